//! `latlab gen`: flags → [`latlab_lab::gen`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use latlab_lab::command::{resolve, CommandError, Io, Pattern, TrafficModel};
use latlab_lab::cores::PollChoice;
use latlab_lab::gen::GenCommand;
use latlab_lab::measure::{ClockChoice, GenOptions, ThreadChoice};
use latlab_lab::units::{parse_bytes, parse_duration, ProbeRate};

use crate::{parse_xdp_frames, progress, values, STOP};

#[derive(Debug, clap::Args)]
pub(crate) struct GenArgs {
    /// The server: ADDR:PORT (latlab echo or any UDP echo server; with --protocol, a server
    /// of that protocol).
    #[arg(long, value_name = "ADDR")]
    target: String,
    #[command(flatten)]
    protocol: Box<crate::protocol_flags::ProtocolFlags>,
    /// Offered load in packets per second over all flows (1000, 10k, 1M), at most 1G.
    /// Required, unless --model or --trace gives the traffic.
    #[arg(
        long,
        value_parser = str::parse::<ProbeRate>,
        value_name = "PPS",
        allow_hyphen_values = true,
        required_unless_present_any = ["model", "trace"]
    )]
    rate: Option<ProbeRate>,
    /// Send a game's traffic instead of --rate/--pattern/--size: each probe has the model's
    /// size and follows the one before by the model's gap (open loop, from the intended
    /// times). A row of Table 1 of Harcsik et al. (NetGames '07) by name, or
    /// fixed:SIZE@INTERVAL (fixed:100@50ms); NAME*SPEED runs a model SPEED times as fast.
    /// Messages below the 56-byte probe header are sent at 56 bytes and counted ("raised").
    #[arg(
        long,
        value_name = "MODEL",
        value_parser = values::model(),
        conflicts_with_all = ["rate", "pattern", "size", "trace"]
    )]
    model: Option<TrafficModel>,
    /// Replay one stream of a pcap or pcapng capture instead of --rate/--pattern/--size: its
    /// payload sizes and gaps, open loop from the intended times, once (--duration defaults to
    /// the stream's length). Streams are numbered as latlab trace-stats numbers them.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["rate", "pattern", "size"])]
    trace: Option<PathBuf>,
    /// The stream of --trace to replay (default: the one with the most packets), in its
    /// direction with more packets.
    #[arg(long, value_name = "N")]
    stream: Option<usize>,
    /// Replay --trace this many times faster (gaps divided by X) [default: 1].
    #[arg(long, value_name = "X")]
    speed: Option<f64>,
    /// How long to send, warm-up included (10s, 500ms) [default: 5s; with --trace, the
    /// replayed stream's length].
    #[arg(long, value_parser = parse_duration, value_name = "DUR", allow_hyphen_values = true)]
    duration: Option<Duration>,
    /// UDP payload bytes per probe, at least the 56-byte probe header.
    #[arg(
        long,
        default_value_t = 64,
        value_name = "BYTES",
        allow_hyphen_values = true
    )]
    size: usize,
    /// constant: exactly 1/rate apart; poisson: exponential gaps (seeded).
    #[arg(long, default_value = "constant", value_name = "PATTERN", value_parser = values::pattern())]
    pattern: Pattern,
    /// Number of flows (source ports); probes go round-robin over them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    flows: u32,
    /// Responses to probes sent in the first DUR are left out of the result.
    #[arg(long, value_parser = parse_duration, default_value = "100ms", value_name = "DUR")]
    warmup: Duration,
    /// How long to wait for the last responses after the last probe.
    #[arg(long, value_parser = parse_duration, default_value = "500ms", value_name = "DUR")]
    grace: Duration,
    /// auto: spin on a CPU nobody else spins on, leaving one free, else block (the core
    /// plan; an emulator comes first); busy: spin (lowest latency), on a CPU no other latlab
    /// loop or emulator claimed unless --cpu says where; block: sleep until a packet arrives or
    /// a probe is due.
    #[arg(long, default_value = "auto", value_name = "MODE", value_parser = values::poll())]
    poll: PollChoice,
    /// Pin the generator's loop to this CPU (with --poll auto: spin there unless another
    /// claimed it).
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,
    /// auto, 1 (one loop) or 2 (send and receive threads on their own cores).
    #[arg(long, default_value = "auto", value_name = "N", value_parser = values::threads())]
    threads: ThreadChoice,
    /// Datagrams per sendmmsg/recvmmsg call.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=1024))]
    batch: u16,
    /// SO_RCVBUF of the flow sockets, in bytes.
    #[arg(long, value_parser = parse_bytes, value_name = "BYTES")]
    rcvbuf: Option<usize>,
    /// Seed of the Poisson schedule.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Local address to send from.
    #[arg(long, value_name = "IP")]
    bind: Option<std::net::IpAddr>,
    /// Skip the check that the target answers before the run (which also asks the reflector
    /// which clock it stamps with, for --clock auto).
    #[arg(long)]
    no_check: bool,
    /// socket: kernel UDP sockets with recvmmsg/sendmmsg; xdp: AF_XDP on --iface, probes
    /// built as whole frames in user space and responses taken before the kernel's stack
    /// (root; IPv4; every flow from one source port).
    #[arg(long, default_value = "socket", value_name = "IO", value_parser = values::socket_io())]
    io: Io,
    /// The interface towards the target that AF_XDP serves (--io xdp).
    #[arg(long, value_name = "IF")]
    iface: Option<String>,
    /// AF_XDP UMEM frames (--io xdp), a power of two from 64 to 1048576: half for receiving,
    /// half for sending; each of the four rings holds half as many entries.
    #[arg(long, default_value_t = 4096, value_parser = parse_xdp_frames, value_name = "N")]
    xdp_frames: u32,
    /// Whether this host and the responder read one clock, which one-way delays need.
    /// auto: shared when the reflector names this host's clock in its answer to the check (any
    /// namespace or container of this host) or the target is an address of this host; shared:
    /// the user says so (clocks kept together by PTP); separate: report round trips only.
    #[arg(long, default_value = "auto", value_name = "CLOCK", value_parser = values::clock())]
    clock: ClockChoice,
    /// Write the summary to this JSON file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write the per-second latency histograms to this HdrHistogram interval log.
    #[arg(long, value_name = "FILE")]
    hlog: Option<PathBuf>,
    /// A latency gate (repeatable), decided from the 95% interval: p99<=2ms, p99.9<5ms,
    /// max<=20ms, mean<=1ms, loss<=0.1%, achieved>=9.9k, forward.p99<=1ms (a shared clock).
    /// One line each at the end; exit 3 when one fails, 4 when none fails but one is
    /// inconclusive.
    #[arg(long = "assert", value_name = "EXPR", value_parser = crate::check::parse_assertion)]
    assertions: Vec<latlab_lab::gate::Assertion>,
    /// Write every --assert verdict as a JUnit XML test case to this file.
    #[arg(long, value_name = "FILE", requires = "assertions")]
    junit: Option<PathBuf>,
    /// Write a whole results folder (summary.json, latency.hlog, ccdf.csv, ccdf.svg; with a
    /// shared clock also forward.hlog, return.hlog and their CCDFs).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Show the run live in a browser on ADDR (--ui alone: 127.0.0.1:9200): its percentiles
    /// with their intervals, the CCDF as it grows, loss, reorder and the sender's lag; after
    /// the run, the final figures and the files written, until Ctrl-C. Its address, with the
    /// run's token, is printed at start. Loopback only, unless --ui-public.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = latlab_ui::DEFAULT_ADDR)]
    ui: Option<std::net::SocketAddr>,
    /// Let --ui listen on an address other than loopback.
    #[arg(long, requires = "ui")]
    ui_public: bool,
}

impl GenArgs {
    /// The checked command these flags make.
    fn command(self) -> Result<GenCommand> {
        let target = resolve("--target", &self.target)?;
        let mut opts = GenOptions::new(target);
        if let Some(ip) = self.bind {
            opts.bind = ip;
        }
        if let Some(rate) = self.rate {
            opts.rate = rate;
        }
        opts.model = self.model;
        opts.duration = self.duration.unwrap_or(Duration::from_secs(5));
        if self.trace.is_none() {
            for (flag, given) in [
                ("--stream", self.stream.is_some()),
                ("--speed", self.speed.is_some()),
            ] {
                if given {
                    return Err(CommandError::Usage(format!("{flag} needs --trace FILE")).into());
                }
            }
        }
        if let Some(path) = &self.trace {
            let capture = latlab_lab::trace::read_capture(path)?;
            let replay =
                latlab_lab::trace::replay(path, &capture, self.stream, self.speed.unwrap_or(1.0))?;
            if self.duration.is_none() {
                let span: u64 = replay.messages.iter().map(|m| m.gap_ns).sum();
                // A second past the last message's due time: the sender stops at the end of
                // the duration, and a late wake-up must not cut the last message off. Once
                // the trace is over the run goes straight to its grace period.
                opts.duration = Duration::from_nanos(span) + Duration::from_secs(1);
            }
            opts.trace = Some(replay);
        }
        opts.warmup = self.warmup;
        opts.payload_len = self.size;
        opts.pattern = self.pattern;
        opts.flows = self.flows;
        opts.seed = self.seed;
        opts.poll = self.poll.explicit().unwrap_or(opts.poll);
        opts.batch = usize::from(self.batch);
        opts.grace = self.grace;
        opts.threads = self.threads;
        opts.rcvbuf = self.rcvbuf;
        opts.check = !self.no_check;
        opts.clock = self.clock;
        let protocol_args = self.protocol.args(self.size)?;
        opts.protocol = latlab_lab::protocols::build(&protocol_args)?;
        latlab_lab::protocols::check_warmup(&protocol_args, opts.warmup, opts.offered_pps())?;
        let mut command = GenCommand::new(opts);
        command.json = self.json;
        command.hlog = self.hlog;
        command.out = self.out;
        command.assertions = self.assertions;
        command.junit = self.junit;
        command.io = self.io;
        command.iface = self.iface;
        command.xdp_frames = self.xdp_frames;
        command.poll = self.poll;
        command.cpu = self.cpu;
        command.check()?;
        Ok(command)
    }
}

pub(crate) fn run(a: GenArgs) -> Result<()> {
    let (ui, ui_public) = (a.ui, a.ui_public);
    let mut command = a.command()?;
    let mut bar = progress::Terminal::new();
    let Some(addr) = ui else {
        let report = latlab_lab::gen::run(&command, &STOP, &mut bar)?;
        return finish(&report);
    };
    let server = crate::gen_ui::bind(addr, ui_public)?;
    command.options.live = true;
    eprintln!("latlab gen: live page on {}", server.url());
    let board = latlab_ui::GenBoard::new();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| crate::gen_ui::serve(&server, &board, &done));
        let mut view = crate::gen_ui::Teed {
            inner: &mut bar,
            board: &board,
        };
        let result = latlab_lab::gen::run(&command, &STOP, &mut view);
        let outcome = match &result {
            Ok(report) => {
                let summary = latlab_lab::results::summary_json(&report.summary);
                let given = [&command.json, &command.hlog, &command.junit].map(|p| p.as_deref());
                board.finished(
                    serde_json::from_str(&summary).unwrap_or_default(),
                    report.latency.clone(),
                    crate::gen_ui::written(report, &given),
                );
                let outcome = finish(report);
                if !report.summary.stopped_early {
                    eprintln!(
                        "latlab gen: the run is over; its page stays on {} until Ctrl-C",
                        server.url()
                    );
                    crate::gen_ui::linger(&STOP, &done);
                }
                outcome
            }
            Err(e) => {
                board.failed(&e.to_string());
                Ok(())
            }
        };
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        result?;
        outcome
    })
}

/// The end of a run: its table, where its files are, and its gates' exit.
fn finish(report: &latlab_lab::gen::GenReport) -> Result<()> {
    out!("{}", report.text());
    if let Some(path) = &report.out {
        outln!("results: {}", path.display());
    }
    if report.summary.stopped_early {
        eprintln!(
            "stopped early by {}: the figures cover the part that ran",
            crate::signals::received().map_or("a signal", |s| s.name())
        );
    }
    crate::check::gates(&report.summary.assertions)
}
