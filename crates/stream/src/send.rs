//! `latlab stream send`: one run of messages to a `stream recv`, from checked options to a
//! [`StreamSummary`] whose `--json`, `--hlog` and `--out` files are written before it is
//! returned.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use latlab_engine::Stop;
use latlab_io::clock::now_ns;
use latlab_stats::hlog::HlogWriter;
use latlab_stats::{ccdf, Summary};

use super::control::{self, ControlReader, Start, ToReceiver, ToSender};
use super::message::{self, Message, HEADER_LEN, MAX_LEN};
use super::plan::Plan;
use super::summary::{StreamSummary, WireReport};
use super::tcp::{configure, rto_min_way, RtoMinGuard, RtoMinWay};
use super::transport::{SenderSetup, TcpOptions, TransportSpec};
use super::wire::udp_overhead;
use latlab_lab::command::{check_writable, CommandError};
use latlab_lab::gate::{Assertion, Results};
use latlab_lab::progress::View;
use latlab_lab::results::{ccdf_csv, write_atomic, ResultsDir};
use latlab_probe::model::TrafficModel;

/// The most messages one run sends.
pub const MAX_MESSAGES: u64 = 10_000_000;

/// The summary file of a stream's results folder (`stream send --out`): what `--json` holds.
pub const STREAM_JSON: &str = "stream.json";

/// The latency histogram of a stream's results folder: what `--hlog` holds, one interval.
pub const STREAM_HLOG: &str = "latency.hlog";

/// A stream's results folder (`stream send --out`): its summary, latency histogram and CCDF,
/// `None` when `dir` is none (no `stream.json`). Errors name the file.
pub fn read_folder(
    dir: &Path,
) -> Option<Result<(StreamSummary, latlab_stats::LatencyHistogram), String>> {
    let json = dir.join(STREAM_JSON);
    json.is_file().then(|| {
        let named = |path: &Path, e: String| format!("{}: {e}", path.display());
        let text = std::fs::read_to_string(&json).map_err(|e| named(&json, e.to_string()))?;
        let summary: StreamSummary =
            serde_json::from_str(&text).map_err(|e| named(&json, e.to_string()))?;
        let hlog = dir.join(STREAM_HLOG);
        let file = std::fs::File::open(&hlog).map_err(|e| named(&hlog, e.to_string()))?;
        let mut latency = latlab_stats::LatencyHistogram::new();
        for interval in latlab_stats::hlog::read_hlog(std::io::BufReader::new(file))
            .map_err(|e| named(&hlog, e.to_string()))?
        {
            latency
                .merge(&interval.histogram)
                .map_err(|e| named(&hlog, e.to_string()))?;
        }
        Ok((summary, latency))
    })
}

/// How long the sender tries to open the control connection.
const CONTROL_CONNECT: Duration = Duration::from_secs(10);

/// How long the sender waits for the receiver's `Ready` (or `Refused`) after its `Start`.
const READY_WAIT: Duration = Duration::from_secs(30);

/// Everything `latlab stream send` takes.
#[derive(Clone, Debug)]
pub struct SendCommand {
    /// The receiver (`stream recv --listen`).
    pub target: SocketAddr,
    /// The transport; the receiver must run the same.
    pub transport: TransportSpec,
    /// Bytes per message, [`HEADER_LEN`]..=[`MAX_LEN`].
    pub size: usize,
    /// Gap between the messages' intended send times.
    pub interval: Duration,
    /// How long to send.
    pub duration: Duration,
    /// How long the receiver waits for messages still on their way after the last one.
    pub grace: Duration,
    /// Write the summary to this JSON file.
    pub json: Option<PathBuf>,
    /// Write the latency histogram to this HdrHistogram interval log.
    pub hlog: Option<PathBuf>,
    /// Write a results folder here (must not exist): [`STREAM_JSON`], [`STREAM_HLOG`] and
    /// `ccdf.csv`, which `latlab compare` and `latlab check` read.
    pub out: Option<PathBuf>,
    /// Send a game's traffic instead of `size` bytes every `interval`: the model's sizes and
    /// gaps, drawn from `seed` (`--model`).
    pub model: Option<TrafficModel>,
    /// Seed of the model's draws.
    pub seed: u64,
    /// Gates decided on the run ([`latlab_lab::gate`]), into the summary.
    pub assertions: Vec<Assertion>,
    /// Write the gates' verdicts as JUnit XML to this file.
    pub junit: Option<PathBuf>,
}

impl SendCommand {
    /// 100-byte messages every 50 ms for 10 s (the paper's `fixed:100@50ms`), no files.
    pub fn new(target: SocketAddr, transport: TransportSpec) -> SendCommand {
        SendCommand {
            target,
            transport,
            size: 100,
            interval: Duration::from_millis(50),
            duration: Duration::from_secs(10),
            grace: Duration::from_secs(2),
            json: None,
            hlog: None,
            out: None,
            model: None,
            seed: 1,
            assertions: Vec::new(),
            junit: None,
        }
    }

    /// The messages of the run: the model's, drawn in advance, or `size` bytes every
    /// `interval`; `None` when the model makes more than [`MAX_MESSAGES`].
    pub fn plan(&self) -> Option<Plan> {
        match &self.model {
            Some(model) => Plan::drawn(model, self.seed, self.duration, MAX_MESSAGES),
            None => Some(Plan::Fixed {
                size: self.size,
                interval_ns: self.interval.as_nanos() as u64,
                count: self.messages(),
            }),
        }
    }

    /// How many messages the schedule holds: one every `interval` from 0 until `duration`.
    pub fn messages(&self) -> u64 {
        let (d, i) = (self.duration.as_nanos(), self.interval.as_nanos().max(1));
        (d.div_ceil(i)).min(u128::from(u64::MAX)) as u64
    }

    /// Checks what can be checked before anything opens; each error names its flag.
    pub fn check(&self) -> Result<(), CommandError> {
        let bad = |text: String| Err(CommandError::Options(text));
        if self.target.port() == 0 {
            return bad(format!(
                "--target {}: port 0 cannot be sent to",
                self.target
            ));
        }
        if let Some(model) = &self.model {
            if model.max_size() > MAX_LEN {
                return bad(format!(
                    "--model {model}: messages up to {} bytes, more than {MAX_LEN}",
                    model.max_size()
                ));
            }
            return match self.plan() {
                None => bad(format!(
                    "--model {model} for {:?} makes more than the {MAX_MESSAGES} messages a run sends",
                    self.duration
                )),
                Some(p) if p.is_empty() => bad(format!(
                    "--duration ({:?}) holds no message of --model {model}",
                    self.duration
                )),
                Some(_) => self.check_rest(),
            };
        }
        if !(HEADER_LEN..=MAX_LEN).contains(&self.size) {
            return bad(format!(
                "--size must be between {HEADER_LEN} (the message header) and {MAX_LEN} bytes, \
                 not {}",
                self.size
            ));
        }
        if self.interval < Duration::from_micros(10) {
            return bad(format!(
                "--interval must be at least 10us (a thin stream), not {:?}",
                self.interval
            ));
        }
        if self.duration < self.interval {
            return bad(format!(
                "--duration ({:?}) must be at least one --interval ({:?})",
                self.duration, self.interval
            ));
        }
        if self.messages() > MAX_MESSAGES {
            return bad(format!(
                "--duration / --interval makes {} messages, more than the {MAX_MESSAGES} a run \
                 sends",
                self.messages()
            ));
        }
        self.check_rest()
    }

    /// The checks of the grace and the files.
    fn check_rest(&self) -> Result<(), CommandError> {
        let bad = |text: String| Err(CommandError::Options(text));
        if self.grace > Duration::from_secs(60) {
            return bad(format!("--grace must be at most 60s, not {:?}", self.grace));
        }
        for a in &self.assertions {
            a.check_for(Results::Stream, true)
                .map_err(|e| CommandError::Usage(e.to_string()))?;
        }
        for p in [&self.json, &self.hlog, &self.junit].into_iter().flatten() {
            check_writable(p)?;
        }
        Ok(())
    }
}

/// Why the run failed, if it did: a reliable transport that did not deliver every message
/// sent. (An unreliable one only loses them: that is measured, not a failure.)
pub fn failure(spec: &TransportSpec, sent: u64, delivered: u64) -> Option<String> {
    let lost = sent.saturating_sub(delivered);
    (spec.is_reliable() && lost > 0).then(|| {
        format!("{spec} is reliable but {lost} of {sent} messages never reached the application")
    })
}

/// A run's id: different for every run a receiver serves (time and process mixed).
fn run_id() -> u32 {
    let t = now_ns();
    ((t ^ (t >> 32)) as u32) ^ std::process::id().rotate_left(16)
}

/// Runs `command` (notes to `log`): starts the run at the receiver, sends on schedule until
/// the duration is over or `stop` is raised, ends it, and writes the files asked for.
pub fn run(
    command: &SendCommand,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<StreamSummary, CommandError> {
    run_measured(command, stop, view).map(|(summary, _)| summary)
}

/// As [`run`], also returning the latency histogram the summary was made from, so that
/// several runs can be merged exactly.
pub fn run_measured(
    command: &SendCommand,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<(StreamSummary, latlab_stats::LatencyHistogram), CommandError> {
    command.check()?;
    // Fail before the run, not after it, when the folder cannot be made.
    let dir = command.out.as_deref().map(ResultsDir::create).transpose()?;
    let target = command.target;
    let spec = &command.transport;
    // Modified TCP's minimum RTO goes on the data connection's socket. On a kernel without
    // TCP_RTO_MIN_US it is per namespace instead: set it (only in a lab namespace) before
    // anything opens, leave it off the socket, and put it back when the run is over.
    let mut settings = Vec::new();
    let mut socket_options = None;
    let _rto_min = match spec {
        TransportSpec::Tcp(
            options @ TcpOptions {
                rto_min: Some(rto), ..
            },
        ) => match rto_min_way(*rto).map_err(CommandError::Usage)? {
            RtoMinWay::Socket => None,
            RtoMinWay::Namespace => {
                let guard = RtoMinGuard::set(*rto).map_err(CommandError::Options)?;
                settings.push(format!(
                    "net.ipv4.tcp_rto_min_us={} in the sender's network namespace (this \
                     kernel has no TCP_RTO_MIN_US)",
                    rto.as_micros()
                ));
                socket_options = Some(TcpOptions {
                    rto_min: None,
                    ..options.clone()
                });
                Some(guard)
            }
        },
        _ => None,
    };
    let no_receiver = |what: &str| CommandError::setup(format!("--target {target}: {what}"));
    // The control connection may cross the emulated path it measures: a lost SYN is sent
    // again after 1 s and 3 s, a lost Start after an RTO, so the waits allow for that.
    let mut ctl = TcpStream::connect_timeout(&target, CONTROL_CONNECT)
        .map_err(no_receiver("no latlab stream recv answers there"))?;
    ctl.set_nodelay(true).map_err(no_receiver("control"))?;
    let run = run_id();
    let plan = command.plan().ok_or_else(|| {
        CommandError::Options("--model makes more messages than a run sends".into())
    })?;
    let messages = plan.len();
    ctl.write_all(&control::HELLO_CONTROL)
        .map_err(no_receiver("control"))?;
    control::write_frame(
        &mut ctl,
        &ToReceiver::Start(Start {
            version: env!("CARGO_PKG_VERSION").to_string(),
            transport: spec.to_string(),
            run,
            size: plan.max_size(),
            messages,
            duration_ms: command.duration.as_millis() as u64,
        }),
    )
    .map_err(no_receiver("control"))?;
    let mut reader = ControlReader::new();
    let certificate = match reader
        .read::<ToSender>(&mut ctl, READY_WAIT)
        .map_err(no_receiver("the receiver did not start the run"))?
    {
        ToSender::Ready { certificate_hex } => certificate_hex
            .map(|hex| {
                control::from_hex(&hex).ok_or_else(|| {
                    CommandError::Options(format!(
                        "--target {target}: the receiver's certificate is not hex"
                    ))
                })
            })
            .transpose()?,
        ToSender::Refused { reason } => {
            return Err(CommandError::Options(format!(
                "--transport {spec}: the receiver at {target} refused the run: {reason}"
            )))
        }
        ToSender::Results(_) => {
            return Err(CommandError::Options(format!(
                "--target {target}: the receiver answered out of turn"
            )))
        }
    };
    let mut setup = SenderSetup {
        certificate,
        tcp: None,
    };
    if let TransportSpec::Tcp(options) = spec {
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(target),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )
        .map_err(CommandError::setup("tcp socket"))?;
        settings.extend(
            configure(&socket, socket_options.as_ref().unwrap_or(options))
                .map_err(CommandError::setup(format!("--transport {spec}")))?,
        );
        socket
            .connect_timeout(&target.into(), Duration::from_secs(3))
            .map_err(no_receiver("the tcp data connection was refused"))?;
        let mut data: TcpStream = socket.into();
        let mut hello = control::HELLO_DATA.to_vec();
        hello.extend_from_slice(&run.to_be_bytes());
        data.write_all(&hello)
            .map_err(no_receiver("tcp data connection"))?;
        setup.tcp = Some(data);
    }
    let mut endpoint = spec
        .open_sender(target, run, &setup)
        .map_err(CommandError::setup(format!(
            "--transport {spec} to {target}"
        )))?;
    let _ = latlab_io::cpu::set_timer_slack_ns(1);
    let interval_ns = plan.mean_gap_ns();
    let mut buf = vec![0u8; plan.max_size()];
    let start_ns = now_ns() + 1_000_000;
    let mut next = 0u64;
    let mut ignore = |_: &[u8]| {};
    let failed = |e| CommandError::Run {
        engine: "stream sender",
        source: e,
    };
    while next < messages && !stop.is_raised() {
        let now = now_ns();
        let (offset, size) = plan.at(next);
        let due = start_ns + offset;
        if now >= due {
            let header = Message {
                run,
                seq: next,
                sent_ns: due,
            };
            message::emit(&header, &mut buf[..size]);
            endpoint.send(&buf[..size]).map_err(failed)?;
            next += 1;
            continue;
        }
        // Each endpoint shortens the wait to its own timers; a message's due time or a stop
        // flag needs no faster look than this.
        let wait = Duration::from_nanos(due - now).min(Duration::from_millis(20));
        endpoint.poll(wait, &mut ignore).map_err(failed)?;
    }
    let stopped_early = next < messages;
    let sent = next;
    control::write_frame(
        &mut ctl,
        &ToReceiver::End {
            sent,
            grace_ms: command.grace.as_millis() as u64,
        },
    )
    .map_err(no_receiver("control"))?;
    // The transport goes on (retransmissions, acknowledgements) until the receiver answers.
    let until = Instant::now() + command.grace + Duration::from_secs(10);
    let results = loop {
        endpoint
            .poll(Duration::from_millis(2), &mut ignore)
            .map_err(failed)?;
        match reader
            .try_read::<ToSender>(&mut ctl)
            .map_err(no_receiver("the receiver broke off the run"))?
        {
            Some(ToSender::Results(r)) => break r,
            Some(_) => {
                return Err(CommandError::Options(format!(
                    "--target {target}: the receiver answered out of turn"
                )))
            }
            None if Instant::now() >= until => {
                return Err(CommandError::Run {
                    engine: "stream sender",
                    source: std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the receiver sent no results",
                    ),
                })
            }
            None => {}
        }
    };
    let forward = endpoint.wire();
    let sender_foreign = endpoint.foreign();
    endpoint.close();
    let latency = control::histogram_from_hex(&results.histogram_hex)
        .map_err(no_receiver("the receiver's results"))?;
    let lost = sent.saturating_sub(results.delivered);
    let failure = failure(spec, sent, results.delivered);
    if let Some(f) = &failure {
        view.note(&format!("latlab stream: {f}"));
    }
    let mut summary = StreamSummary {
        latlab_version: env!("CARGO_PKG_VERSION").to_string(),
        transport: spec.to_string(),
        reliable: spec.is_reliable(),
        target: target.to_string(),
        size: match plan {
            Plan::Fixed { size, .. } => size,
            Plan::Drawn { .. } => (plan.payload_bytes(sent) / sent.max(1)) as usize,
        },
        interval_ns,
        traffic: command.model.as_ref().map(|m| m.to_string()),
        raised: plan.raised(),
        duration_ns: command.duration.as_nanos() as u64,
        start_time_unix_ns: start_ns,
        stopped_early,
        settings,
        sent,
        delivered: results.delivered,
        lost,
        duplicated: results.duplicated,
        reordered: results.reordered,
        malformed: results.malformed,
        foreign: results.foreign + sender_foreign,
        failure,
        latency_ns: Summary::from_histogram(&latency),
        ccdf: ccdf(&latency),
        wire: WireReport::of_payload(
            forward,
            results.wire,
            sent,
            plan.payload_bytes(sent),
            udp_overhead(target),
        ),
        assertions: Vec::new(),
    };
    summary.assertions = command
        .assertions
        .iter()
        .map(|a| a.evaluate_measured(&summary.measured(), None))
        .collect();
    let json = serde_json::to_string_pretty(&summary).map_err(std::io::Error::other)? + "\n";
    if let Some(path) = &command.json {
        write_atomic(path, json.as_bytes())?;
    }
    if let Some(path) = &command.junit {
        let xml = latlab_lab::gate::junit::junit_xml("latlab stream send", &summary.assertions);
        write_atomic(path, xml.as_bytes())?;
    }
    let hlog = || -> std::io::Result<Vec<u8>> {
        let mut w = HlogWriter::new(
            Vec::new(),
            start_ns as f64 / 1e9,
            &format!(
                "latlab {} stream {spec}: one-way application latency in ns",
                env!("CARGO_PKG_VERSION")
            ),
        )
        .map_err(std::io::Error::other)?;
        let seconds = (sent * interval_ns) as f64 / 1e9;
        w.write_interval(0.0, seconds, &latency, None)
            .map_err(std::io::Error::other)?;
        Ok(w.into_inner())
    };
    if let Some(path) = &command.hlog {
        write_atomic(path, &hlog()?)?;
    }
    if let Some(dir) = dir {
        dir.write(STREAM_JSON, json.as_bytes())?;
        dir.write(STREAM_HLOG, &hlog()?)?;
        dir.write("ccdf.csv", &ccdf_csv(&latency)?)?;
        dir.commit()?;
    }
    Ok((summary, latency))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(edit: impl FnOnce(&mut SendCommand)) -> Result<(), String> {
        let mut c = SendCommand::new("127.0.0.1:9".parse().unwrap(), TransportSpec::Udp);
        edit(&mut c);
        c.check().map_err(|e| e.to_string())
    }

    #[test]
    fn a_run_that_cannot_succeed_is_refused_before_anything_opens() {
        assert_eq!(check(|_| {}), Ok(()));
        assert_eq!(
            check(|c| c.target = "127.0.0.1:0".parse().unwrap()),
            Err("--target 127.0.0.1:0: port 0 cannot be sent to".into())
        );
        assert_eq!(
            check(|c| c.size = 23),
            Err("--size must be between 24 (the message header) and 65507 bytes, not 23".into())
        );
        assert_eq!(
            check(|c| c.duration = Duration::from_millis(10)),
            Err("--duration (10ms) must be at least one --interval (50ms)".into())
        );
        assert_eq!(
            check(|c| {
                c.interval = Duration::from_micros(10);
                c.duration = Duration::from_secs(1000);
            }),
            Err(
                "--duration / --interval makes 100000000 messages, more than the 10000000 a \
                 run sends"
                    .into()
            )
        );
    }

    #[test]
    fn the_schedule_holds_one_message_per_interval() {
        let mut c = SendCommand::new("127.0.0.1:9".parse().unwrap(), TransportSpec::Udp);
        c.interval = Duration::from_millis(5);
        c.duration = Duration::from_secs(5);
        assert_eq!(c.messages(), 1000);
        c.duration = Duration::from_millis(5001);
        assert_eq!(c.messages(), 1001);
    }

    #[test]
    fn only_a_reliable_transport_that_loses_a_message_fails() {
        let tcp: TransportSpec = "tcp".parse().unwrap();
        assert_eq!(failure(&tcp, 1000, 1000), None);
        assert_eq!(
            failure(&tcp, 1000, 998).as_deref(),
            Some("tcp is reliable but 2 of 1000 messages never reached the application")
        );
        assert_eq!(failure(&TransportSpec::Udp, 1000, 990), None);
        let unreliable: TransportSpec = "enet:unreliable".parse().unwrap();
        assert_eq!(failure(&unreliable, 1000, 990), None);
    }
}
