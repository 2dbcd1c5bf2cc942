//! `latlab stream send` and `latlab stream recv`: flags → [`latlab_stream`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Subcommand;
use latlab_lab::command::resolve;
use latlab_lab::units::parse_duration;
use latlab_stream::message::{HEADER_LEN, MAX_LEN};
use latlab_stream::{RecvCommand, SendCommand, TransportSpec};

use crate::{values, STOP};

#[derive(Debug, Subcommand)]
pub(crate) enum StreamCommand {
    /// Send one thin stream of messages to a `stream recv` and measure each message's one-way
    /// application latency and what the transport put on the wire.
    Send(Box<SendArgs>),
    /// Receive `stream send` runs, one after another, and hand each one's measurements back.
    Recv(RecvArgs),
}

/// `stream`'s about, naming the transports it drives.
pub(crate) fn about() -> String {
    format!(
        "One thin stream of messages over a real transport ({}): a receiver, and a sender that \
         measures one-way application latency and bytes on the wire",
        values::transport_names().join(", ")
    )
}

/// `--transport`: a form of `TRANSPORTS_HELP`; udt and sctp are refused with the reason.
fn parse_transport(text: &str) -> Result<TransportSpec, String> {
    text.parse()
}

/// `--size`: message bytes, from the 24-byte header to one UDP datagram.
fn parse_size(text: &str) -> Result<usize, String> {
    let n: usize = text
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number of bytes"))?;
    if !(HEADER_LEN..=MAX_LEN).contains(&n) {
        return Err(format!(
            "{n} is not between {HEADER_LEN} (the message header) and {MAX_LEN}"
        ));
    }
    Ok(n)
}

/// `--interval`: at least 10 µs.
fn parse_interval(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d < Duration::from_micros(10) {
        return Err(format!("{text} is below 10us"));
    }
    Ok(d)
}

/// `--grace`: at most 60 s.
fn parse_grace(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d > Duration::from_secs(60) {
        return Err(format!("{text} is above 60s"));
    }
    Ok(d)
}

#[derive(Debug, clap::Args)]
pub(crate) struct SendArgs {
    /// The receiver: ADDR:PORT of a `latlab stream recv`.
    #[arg(long, value_name = "ADDR")]
    target: String,
    // Its help lists the transports and their options (`values::transport_help`).
    #[arg(long, value_name = "T", value_parser = parse_transport, help = values::transport_help())]
    transport: TransportSpec,
    /// Bytes per message (the paper's thin streams: 100), 24 to 65507.
    #[arg(long, default_value = "100", value_name = "BYTES", value_parser = parse_size, allow_hyphen_values = true)]
    size: usize,
    /// Gap between messages (the paper: 50ms, 100ms, 200ms), at least 10us.
    #[arg(long, default_value = "50ms", value_name = "DUR", value_parser = parse_interval, allow_hyphen_values = true)]
    interval: Duration,
    /// Send a game's traffic instead of --size/--interval: the model's sizes and gaps (open
    /// loop, from the intended times), a Table 1 row of Harcsik et al. by name or
    /// fixed:SIZE@INTERVAL; NAME*SPEED runs it SPEED times as fast. Messages below the 24-byte
    /// message header are sent at 24 bytes and counted (raised).
    #[arg(
        long,
        value_name = "MODEL",
        value_parser = values::model(),
        conflicts_with_all = ["size", "interval"]
    )]
    model: Option<latlab_lab::command::TrafficModel>,
    /// Seed of the model's draws.
    #[arg(long, default_value_t = 1, value_name = "N", requires = "model")]
    seed: u64,
    /// How long to send.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true)]
    duration: Duration,
    /// How long the receiver waits for messages still on their way after the last one.
    #[arg(long, default_value = "2s", value_name = "DUR", value_parser = parse_grace)]
    grace: Duration,
    /// Write the summary (latency, CCDF, counts, wire) to this JSON file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write the latency histogram to this HdrHistogram interval log.
    #[arg(long, value_name = "FILE")]
    hlog: Option<PathBuf>,
    /// Write a results folder (stream.json, latency.hlog, ccdf.csv) that latlab compare and
    /// latlab check read; it must not exist.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// A gate on the stream (repeatable), decided from the 95% interval: p99<=100ms (the
    /// one-way application latency), max<=250ms, loss<=0.1%. Exit 3 when one fails, 4 when
    /// none fails but one is inconclusive.
    #[arg(long = "assert", value_name = "EXPR", value_parser = crate::check::parse_assertion)]
    assertions: Vec<latlab_lab::gate::Assertion>,
    /// Write every --assert verdict as a JUnit XML test case to this file.
    #[arg(long, value_name = "FILE", requires = "assertions")]
    junit: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RecvArgs {
    /// ADDR:PORT to listen on: TCP for control (and tcp's data), UDP for the other transports.
    #[arg(long, value_name = "ADDR")]
    listen: String,
    // The transport to serve, with its options, as the senders name it.
    #[arg(long, value_name = "T", value_parser = parse_transport, help = values::transport_help())]
    transport: TransportSpec,
    /// Rewrite this JSON file with every run served, after each run.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Exit after serving N runs (default: until stopped).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    runs: Option<u64>,
}

pub(crate) fn run(command: StreamCommand) -> Result<()> {
    match command {
        StreamCommand::Send(a) => send(*a),
        StreamCommand::Recv(a) => recv(a),
    }
}

fn send(a: SendArgs) -> Result<()> {
    let mut command = SendCommand::new(resolve("--target", &a.target)?, a.transport);
    command.size = a.size;
    command.interval = a.interval;
    command.model = a.model;
    command.seed = a.seed;
    command.duration = a.duration;
    command.grace = a.grace;
    command.json = a.json;
    command.hlog = a.hlog;
    command.out = a.out;
    command.assertions = a.assertions;
    command.junit = a.junit;
    command.check()?;
    let summary = latlab_stream::send::run(&command, &STOP, &mut crate::progress::Terminal::new())?;
    out!("{}", summary.text());
    if summary.stopped_early {
        eprintln!(
            "stopped early by {}: the figures cover the part that ran",
            crate::signals::received().map_or("a signal", |s| s.name())
        );
    }
    if let Some(failure) = summary.failure {
        bail!("{failure}");
    }
    crate::check::gates(&summary.assertions)
}

fn recv(a: RecvArgs) -> Result<()> {
    let command = RecvCommand {
        listen: resolve("--listen", &a.listen)?,
        transport: a.transport,
        json: a.json,
        runs: a.runs,
    };
    let report = latlab_stream::recv::run(&command, &STOP, &mut crate::progress::Terminal::new())?;
    outln!(
        "{} runs served, {} bad connections, {} stray datagrams",
        report.runs.len(),
        report.bad_connections,
        report.stray_datagrams
    );
    Ok(())
}
