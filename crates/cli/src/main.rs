//! `latlab`: a latency lab for game servers and network functions.
//!
//! Flags are parsed into checked options before anything runs; a bad flag ends with one line
//! naming it and exit code 2; a failure at run time prints the whole chain of causes on one
//! line and exits with 1. Ctrl-C stops the engines, and everything the command made
//! (namespaces, temporary files) is removed on the way out.
#![forbid(unsafe_code)]

mod progress;

use std::io::IsTerminal;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use latlab_engine::game::{parse_server_io, GameServerConfig, ServerLive};
use latlab_engine::reflector::{self, ReflectorConfig, ReflectorCounters};
use latlab_engine::{PollMode, Stop};
use latlab_io::udp::{UdpOptions, UdpSocket};
use latlab_io::Io;
use latlab_lab::measure::{self, GenOptions, ThreadChoice};
use latlab_lab::results::{self, ResultsDir, RunSummary};
use latlab_lab::units::{format_rate, parse_bytes, parse_duration, parse_rate};
use latlab_probe::Pattern;

/// latlab: a latency lab for game servers and network functions.
#[derive(Debug, Parser)]
#[command(name = "latlab", version, about, allow_negative_numbers = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Reflect latlab probes back to their sender (a probe responder).
    Echo(EchoArgs),
    /// Send probes to a responder on an open-loop schedule and measure round-trip latency.
    Gen(GenArgs),
    /// Measure this machine's UDP echo path at a few rates, end to end, and write a results
    /// folder.
    Demo(DemoArgs),
    /// Print the table of a results folder again, from its data.
    Report(ReportArgs),
    /// Run the model game server: every game packet is sent to every client of its game.
    Serve(ServeArgs),
    /// Emulate a link between two interfaces: delay, jitter, loss, duplication, corruption,
    /// reordering, rate and queue limits, per direction (a transparent layer-2 bridge).
    Emu(Box<EmuArgs>),
    /// Run a study.
    #[command(subcommand)]
    Study(StudyCommand),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum RxRingArg {
    V2,
    V3,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum EmuMode {
    Auto,
    RunToCompletion,
    Pipeline,
}

/// A `--io` flag that takes `names` of [`Io`] (with their help), refusing others as a clap
/// value enum does: `invalid value 'dpdk' for '--io <IO>'`, with the possible values.
fn io_among(
    names: &[(&'static str, &'static str)],
) -> impl clap::builder::TypedValueParser<Value = Io> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(names.iter().map(|&(name, help)| {
        let value = PossibleValue::new(name);
        if help.is_empty() {
            value
        } else {
            value.help(help)
        }
    }))
    // Only the names listed get here, and each is the name of an `Io`.
    .map(|name| name.parse::<Io>().expect("a possible value is an Io"))
}

/// `--io` of emu: packet or xdp.
fn emu_io() -> impl clap::builder::TypedValueParser<Value = Io> {
    io_among(&[("packet", ""), ("xdp", "")])
}

/// `--io` of echo and gen: socket or xdp.
fn echo_io() -> impl clap::builder::TypedValueParser<Value = Io> {
    io_among(&[
        (
            "socket",
            "Kernel UDP sockets with recvmmsg/sendmmsg batches",
        ),
        (
            "xdp",
            "AF_XDP: frames taken before the kernel's stack, IPv4/UDP handled in user space",
        ),
    ])
}

#[derive(Debug, clap::Args)]
struct EmuArgs {
    /// First interface of the bridge.
    #[arg(long, value_name = "IF")]
    iface_a: String,
    /// Second interface of the bridge.
    #[arg(long, value_name = "IF")]
    iface_b: String,
    /// Delay added to every frame (both directions): 100us, 1ms.
    #[arg(long, value_name = "DUR")]
    delay: Option<String>,
    /// Jitter around the delay.
    #[arg(long, value_name = "DUR")]
    jitter: Option<String>,
    /// Jitter distribution: uniform, normal, pareto, paretonormal.
    #[arg(long, value_name = "DIST")]
    jitter_dist: Option<String>,
    /// Jitter values from a file (one number per line, in units of --jitter).
    #[arg(long, value_name = "FILE")]
    dist_table: Option<String>,
    /// Correlation of successive jitter values, 0..1.
    #[arg(long, value_name = "P")]
    correlation: Option<String>,
    /// Independent loss probability: 1%, 0.01.
    #[arg(long, value_name = "P", allow_hyphen_values = true)]
    loss: Option<String>,
    /// A loss model: gemodel:P,R,1-H,1-K or state:P13,P31,P32,P23,P14 (NetEm's definitions).
    #[arg(long, value_name = "MODEL")]
    loss_model: Option<String>,
    /// Duplication probability.
    #[arg(long, value_name = "P", allow_hyphen_values = true)]
    duplicate: Option<String>,
    /// Corruption probability (one bit flipped).
    #[arg(long, value_name = "P", allow_hyphen_values = true)]
    corrupt: Option<String>,
    /// Reordering: P (sent without the delay with probability P) or P,gap=N.
    #[arg(long, value_name = "P")]
    reorder: Option<String>,
    /// Rate limit: 1gbit, 100mbit, 56kbit.
    #[arg(long, value_name = "RATE")]
    rate: Option<String>,
    /// Per-frame overhead counted by the rate limit, bytes (default 24: preamble, gap, FCS).
    #[arg(long, value_name = "BYTES")]
    overhead: Option<String>,
    /// Queue limit in frames (default 1000).
    #[arg(long, value_name = "FRAMES")]
    limit: Option<String>,
    /// Queue limit in bytes.
    #[arg(long, value_name = "BYTES")]
    limit_bytes: Option<String>,
    /// Conditions that change over time: lines of `TIME DELAY LOSS RATE`.
    #[arg(long, value_name = "FILE")]
    schedule: Option<String>,
    /// Seed of the random choices.
    #[arg(long, value_name = "N")]
    seed: Option<String>,
    /// Impairments of the A→B direction only: "delay=1ms loss=1%".
    #[arg(long, value_name = "SPEC")]
    a_to_b: Option<String>,
    /// Impairments of the B→A direction only.
    #[arg(long, value_name = "SPEC")]
    b_to_a: Option<String>,
    /// A TOML file of impairments: keys at the top apply to both directions, [a_to_b] and
    /// [b_to_a] tables to one.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Largest frame bridged, bytes.
    #[arg(long, default_value_t = 2048, value_name = "BYTES")]
    frame_size: usize,
    /// busy: spin (frames picked up within microseconds, one core at 100%); block: sleep
    /// when nothing is due (run-to-completion only).
    #[arg(long, default_value = "busy", value_name = "MODE")]
    poll: PollMode,
    /// run-to-completion: one loop for both directions; pipeline: an RX stage and a TX stage
    /// on their own pinned cores joined by lock-free rings; auto: pipeline when 3 or more
    /// cores are free.
    #[arg(long, default_value = "auto", value_name = "MODE")]
    mode: EmuMode,
    /// AF_PACKET receive ring: v2 hands each frame over as it arrives (microseconds); v3
    /// batches frames into blocks retired by a 1 ms timer (fewer wake-ups at high rates, up to
    /// a millisecond late at low ones).
    #[arg(long, default_value = "v2", value_name = "RING")]
    rx_ring: RxRingArg,
    /// packet: AF_PACKET rings beside the kernel stack; xdp: AF_XDP, every frame of both
    /// interfaces taken before the kernel stack by an XDP program (root; run to completion).
    #[arg(long, default_value = "packet", value_name = "IO", value_parser = emu_io())]
    io: Io,
    /// AF_XDP UMEM frames (--io xdp), a power of two from 64 to 1048576: half for receiving,
    /// half for sending; each of the four rings holds half as many entries.
    #[arg(long, default_value_t = 4096, value_parser = parse_xdp_frames, value_name = "N")]
    xdp_frames: u32,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    duration: Option<Duration>,
    /// Write the counters by cause and the release-error histograms to this JSON file at exit.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum StudyCommand {
    /// The game-server latency study (Emmerich et al.): latency vs load, clients and buffer
    /// sizes, the first-drop load, Table I, Figures 2–4, a flood, and report.md.
    GameServer(GameStudyArgs),
    /// The link emulator against the kernel's forwarding: added latency, delay accuracy, loss
    /// models (namespaces; root).
    Emulator(EmuStudyArgs),
}

#[derive(Debug, clap::Args)]
struct EmuStudyArgs {
    /// Sending time per point.
    #[arg(long, value_parser = parse_duration, default_value = "3s", value_name = "DUR")]
    duration: Duration,
    /// The rates to measure at, comma separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_rate, default_value = "1k,50k")]
    rates: Vec<f64>,
    /// Delays on the client→server direction, comma separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_duration, default_value = "10us,100us,1ms,100ms")]
    delays: Vec<Duration>,
    /// Sending time of each forwarding-rate point (one per RFC 2544 frame size and path).
    #[arg(long, value_parser = parse_duration, default_value = "2s", value_name = "DUR")]
    rate_duration: Duration,
    /// Results folder (default latlab-results/emulator-<time>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Address and port to serve on.
    #[arg(long, value_name = "ADDR")]
    listen: String,
    /// socket: one recvfrom/sendto per packet and copy; batched: recvmmsg/sendmmsg; xdp:
    /// AF_XDP on --iface, IPv4/UDP in user space (root).
    #[arg(long, default_value = "socket", value_name = "IO", value_parser = parse_server_io)]
    io: Io,
    /// The interface that AF_XDP serves (--io xdp).
    #[arg(long, value_name = "IF")]
    iface: Option<String>,
    /// AF_XDP UMEM frames (--io xdp), a power of two from 64 to 1048576: half for receiving,
    /// half for sending; each of the four rings holds half as many entries.
    #[arg(long, default_value_t = 4096, value_parser = parse_xdp_frames, value_name = "N")]
    xdp_frames: u32,
    /// SO_RCVBUF in bytes (16k, 64k, ...); the system default when absent.
    #[arg(long, value_parser = parse_bytes, value_name = "BYTES")]
    rcvbuf: Option<usize>,
    /// Emulated work per game packet, in TSC cycles.
    #[arg(long, default_value_t = 150, value_name = "N")]
    work_cycles: u64,
    /// Size of the client table.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=65535), value_name = "N")]
    max_clients: u32,
    /// Per-client packet-rate limit (packets per second); off when absent.
    #[arg(long, value_parser = parse_rate, value_name = "PPS", allow_hyphen_values = true)]
    rate_limit: Option<f64>,
    /// block: sleep until packets arrive (as a plain game server); busy: spin.
    #[arg(long, default_value = "block", value_name = "MODE")]
    poll: PollMode,
    /// Pin the server to this CPU.
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    duration: Option<Duration>,
    /// Write the final counters to this JSON file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct GameStudyArgs {
    /// Client counts, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "4,8,16,32")]
    clients: Vec<u32>,
    /// Offered loads: a list (10k,20k) or a range with a step (10k..100k/10k; the step defaults to the start).
    #[arg(long, default_value = "10k..100k", value_name = "LOADS")]
    loads: String,
    /// Server receive buffer sizes (setsockopt values), comma separated; "default" is the system's.
    #[arg(long, value_delimiter = ',', default_value = "16k,64k,default")]
    rcvbuf: Vec<String>,
    /// Server I/O modes, comma separated (xdp is left out, with the reason, where AF_XDP
    /// cannot be had).
    #[arg(long, value_delimiter = ',', default_value = "socket,batched,xdp", value_parser = parse_server_io)]
    io: Vec<Io>,
    /// Sending time per point.
    #[arg(long, value_parser = parse_duration, default_value = "2s", value_name = "DUR")]
    duration: Duration,
    /// Results folder (default latlab-results/game-server-<time>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Continue an interrupted study in --out, skipping the points it finished.
    #[arg(long)]
    resume: bool,
    /// Emulated work per game packet, in TSC cycles.
    #[arg(long, default_value_t = 150, value_name = "N")]
    work_cycles: u64,
    /// Skip the flood scenario.
    #[arg(long)]
    no_flood: bool,
    /// Run on loopback even when namespaces would work.
    #[arg(long)]
    loopback: bool,
}

#[derive(Debug, clap::Args)]
struct EchoArgs {
    /// Address and port to listen on, e.g. 127.0.0.1:7777.
    #[arg(long, value_name = "ADDR")]
    listen: String,
    /// socket, or xdp (needs --iface and root; takes the UDP port's frames before the kernel).
    #[arg(long, default_value = "socket", value_name = "IO", value_parser = echo_io())]
    io: Io,
    /// The interface that AF_XDP serves (--io xdp).
    #[arg(long, value_name = "IF")]
    iface: Option<String>,
    /// AF_XDP UMEM frames (--io xdp), a power of two from 64 to 1048576: half for receiving,
    /// half for sending; each of the four rings holds half as many entries.
    #[arg(long, default_value_t = 4096, value_parser = parse_xdp_frames, value_name = "N")]
    xdp_frames: u32,
    /// busy: spin on the socket (lowest latency, one core at 100%); block: sleep until packets
    /// arrive.
    #[arg(long, default_value = "busy", value_name = "MODE")]
    poll: PollMode,
    /// Datagrams per recvmmsg/sendmmsg call.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=1024))]
    batch: u16,
    /// Do not write the reflector's receive/transmit times into the probes.
    #[arg(long)]
    no_stamp: bool,
    /// Pin the reflector to this CPU.
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,
    /// SO_RCVBUF in bytes (16k, 4M, ...).
    #[arg(long, value_parser = parse_bytes, value_name = "BYTES")]
    rcvbuf: Option<usize>,
    /// Stop after this long (default: run until Ctrl-C).
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    duration: Option<Duration>,
    /// Write the final counters to this JSON file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct GenArgs {
    /// The responder: ADDR:PORT (latlab echo, or anything that echoes UDP datagrams).
    #[arg(long, value_name = "ADDR")]
    target: String,
    /// Offered load in packets per second over all flows (1000, 10k, 1M).
    #[arg(long, value_parser = parse_rate, value_name = "PPS", allow_hyphen_values = true)]
    rate: f64,
    /// How long to send, warm-up included (10s, 500ms).
    #[arg(long, value_parser = parse_duration, default_value = "5s", value_name = "DUR", allow_hyphen_values = true)]
    duration: Duration,
    /// UDP payload bytes per probe, at least the 56-byte probe header.
    #[arg(
        long,
        default_value_t = 64,
        value_name = "BYTES",
        allow_hyphen_values = true
    )]
    size: usize,
    /// constant: exactly 1/rate apart; poisson: exponential gaps (seeded).
    #[arg(long, default_value = "constant", value_name = "PATTERN")]
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
    /// busy: spin (lowest latency); block: sleep until a packet arrives or a probe is due.
    #[arg(long, default_value = "busy", value_name = "MODE")]
    poll: PollMode,
    /// auto, 1 (one loop) or 2 (send and receive threads on their own cores).
    #[arg(long, default_value = "auto", value_name = "N")]
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
    /// Skip the check that the target answers before the run.
    #[arg(long)]
    no_check: bool,
    /// socket: kernel UDP sockets with recvmmsg/sendmmsg; xdp: AF_XDP on --iface, probes
    /// built as whole frames in user space and responses taken before the kernel's stack
    /// (root; IPv4; every flow from one source port).
    #[arg(long, default_value = "socket", value_name = "IO", value_parser = echo_io())]
    io: Io,
    /// The interface towards the target that AF_XDP serves (--io xdp).
    #[arg(long, value_name = "IF")]
    iface: Option<String>,
    /// AF_XDP UMEM frames (--io xdp), a power of two from 64 to 1048576: half for receiving,
    /// half for sending; each of the four rings holds half as many entries.
    #[arg(long, default_value_t = 4096, value_parser = parse_xdp_frames, value_name = "N")]
    xdp_frames: u32,
    /// Write the summary to this JSON file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write the per-second latency histograms to this HdrHistogram interval log.
    #[arg(long, value_name = "FILE")]
    hlog: Option<PathBuf>,
    /// Write a whole results folder (summary.json, latency.hlog, ccdf.csv, ccdf.svg).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct DemoArgs {
    /// Sending time at each rate.
    #[arg(long, value_parser = parse_duration, default_value = "2s", value_name = "DUR")]
    duration: Duration,
    /// Results folder (default: latlab-results/demo-<time>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Rates to measure at, comma separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_rate, default_value = "1k,10k,100k")]
    rates: Vec<f64>,
    /// Run on loopback even when namespaces would work.
    #[arg(long)]
    loopback: bool,
    /// Skip the run through an emulated link (1 ms each way, 0.1% loss).
    #[arg(long)]
    no_emulated_link: bool,
}

#[derive(Debug, clap::Args)]
struct ReportArgs {
    /// A results folder written by gen --out or demo.
    dir: PathBuf,
    /// Draw the CCDF of every run in it again, into this SVG file.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

static STOP: Stop = Stop::new();

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                std::process::exit(
                    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        2
                    } else {
                        0
                    },
                );
            }
            eprintln!("{}", one_line(&e));
            std::process::exit(2);
        }
    };
    let _ = ctrlc::set_handler(|| {
        if STOP.is_raised() {
            eprintln!("latlab: second Ctrl-C, exiting now");
            std::process::exit(130);
        }
        STOP.raise();
    });
    let result = match cli.command {
        Command::Echo(a) => echo(a),
        Command::Gen(a) => gen(a),
        Command::Demo(a) => demo(a),
        Command::Report(a) => report(a),
        Command::Serve(a) => serve(a),
        Command::Study(StudyCommand::GameServer(a)) => game_study(a),
        Command::Study(StudyCommand::Emulator(a)) => emu_study(a),
        Command::Emu(a) => emu(*a),
    };
    if let Err(e) = result {
        // Each cause once: an error whose message already ends with its source's is not
        // followed by that source again.
        let mut line = String::new();
        for cause in e.chain().map(|c| c.to_string()) {
            if line.is_empty() {
                line = cause;
            } else if !line.ends_with(&cause) {
                line = format!("{line}: {cause}");
            }
        }
        eprintln!("error: {line}");
        std::process::exit(1);
    }
}

/// clap's error as one line that names the flag (its usage hint is left out).
fn one_line(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() == ErrorKind::MissingRequiredArgument {
        if let Some(ContextValue::Strings(flags)) = e.get(ContextKind::InvalidArg) {
            return format!("error: missing required {}", flags.join(", "));
        }
    }
    let text = e.render().to_string();
    text.lines()
        .next()
        .unwrap_or("error: bad arguments")
        .to_string()
}

/// Watches a long-running command: raises the stop flag after `duration`, and on a terminal
/// redraws the line `show` makes once a second.
fn watch(
    duration: Option<Duration>,
    show: impl Fn() -> String + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let terminal = std::io::stderr().is_terminal();
    std::thread::spawn(move || {
        let start = std::time::Instant::now();
        let mut ticks = 0u32;
        while !STOP.is_raised() {
            std::thread::sleep(Duration::from_millis(100));
            ticks += 1;
            if duration.is_some_and(|d| start.elapsed() >= d) {
                STOP.raise();
            }
            if terminal && ticks % 10 == 0 {
                eprint!("\r  {}   ", show());
            }
        }
    })
}

fn resolve(flag: &str, text: &str) -> Result<SocketAddr> {
    let mut addrs = text
        .to_socket_addrs()
        .with_context(|| format!("{flag} {text:?} is not an ADDR:PORT"))?;
    addrs
        .next()
        .with_context(|| format!("{flag} {text:?} resolves to no address"))
}

fn echo(a: EchoArgs) -> Result<()> {
    let listen = resolve("--listen", &a.listen)?;
    if a.io == Io::Xdp {
        return echo_xdp(&a, listen);
    }
    let opts = UdpOptions {
        rcvbuf: a.rcvbuf,
        rx_timestamps: true,
        ..UdpOptions::default()
    };
    let socket = UdpSocket::bind(listen, &opts).with_context(|| format!("--listen {listen}"))?;
    if let Some(cpu) = a.cpu {
        latlab_io::cpu::pin_current_thread(cpu).with_context(|| format!("--cpu {cpu}"))?;
    }
    let _ = latlab_io::cpu::set_timer_slack_ns(1);
    let config = ReflectorConfig {
        batch: a.batch as usize,
        poll: a.poll,
        stamp: !a.no_stamp,
        ..ReflectorConfig::default()
    };
    eprintln!(
        "latlab echo: listening on {} ({} poll, timestamps {}); Ctrl-C stops",
        socket.local_addr()?,
        a.poll.name(),
        socket.rx_timestamp_source().name()
    );
    let counters = Arc::new(ReflectorCounters::default());
    let live = std::io::stderr().is_terminal();
    let watcher = {
        let counters = counters.clone();
        watch(a.duration, move || {
            let r = counters.snapshot();
            format!(
                "received {}  reflected {}  malformed {}  oversized {}",
                r.received, r.reflected, r.malformed, r.oversized
            )
        })
    };
    let run = reflector::run_udp(&socket, &config, &STOP, &counters);
    STOP.raise();
    let _ = watcher.join();
    run.context("reflector")?;
    let r = counters.snapshot();
    if live {
        eprintln!();
    }
    println!(
        "received {}  reflected {}  malformed {}  oversized {}  send-dropped {}",
        r.received, r.reflected, r.malformed, r.oversized, r.send_dropped
    );
    if let Some(path) = a.json {
        let json = serde_json::json!({
            "listen": listen.to_string(),
            "received": r.received,
            "reflected": r.reflected,
            "malformed": r.malformed,
            "oversized": r.oversized,
            "send_dropped": r.send_dropped,
            "timestamp_source": socket.rx_timestamp_source().name(),
        });
        results::write_atomic(&path, format!("{json:#}\n").as_bytes())?;
    }
    Ok(())
}

fn gen(a: GenArgs) -> Result<()> {
    let target = resolve("--target", &a.target)?;
    if target.port() == 0 {
        bail!("--target {target}: port 0 cannot be sent to");
    }
    let min = latlab_wire::probe::HEADER_LEN;
    if a.size < min || a.size > latlab_probe::MAX_PAYLOAD {
        bail!(
            "--size must be between {min} (the probe header) and {} bytes, not {}",
            latlab_probe::MAX_PAYLOAD,
            a.size
        );
    }
    if a.warmup >= a.duration {
        bail!(
            "--warmup ({:?}) must be shorter than --duration ({:?})",
            a.warmup,
            a.duration
        );
    }
    // Fail before the run, not after it, when an output cannot be written.
    let dir = a.out.as_deref().map(ResultsDir::create).transpose()?;
    for p in [&a.json, &a.hlog].into_iter().flatten() {
        check_writable(p)?;
    }
    let mut opts = GenOptions::new(target);
    if let Some(ip) = a.bind {
        opts.bind = ip;
    }
    opts.rate_pps = a.rate;
    opts.duration = a.duration;
    opts.warmup = a.warmup;
    opts.payload_len = a.size;
    opts.pattern = a.pattern;
    opts.flows = a.flows;
    opts.seed = a.seed;
    opts.poll = a.poll;
    opts.batch = a.batch as usize;
    opts.grace = a.grace;
    opts.threads = a.threads;
    opts.rcvbuf = a.rcvbuf;
    opts.check = !a.no_check;
    let xdp_iface = match (a.io, &a.iface) {
        (Io::Xdp, None) => {
            bail!("--io xdp needs --iface: the interface towards the target that AF_XDP serves")
        }
        (Io::Xdp, Some(iface)) => Some(iface.as_str()),
        (_, _) => None,
    };
    let (sockets, check) = measure::open_sockets(opts.bind, opts.flows, opts.rcvbuf)
        .with_context(|| format!("--bind {}", opts.bind))?;
    if opts.check {
        measure::check_target(&check, target, Duration::from_secs(1))?;
    }
    let xdp = xdp_iface
        .map(|iface| measure::open_xdp(iface, target, opts.bind, a.xdp_frames))
        .transpose()?;
    let threads = measure::pick_threads(opts.threads, None);
    let label = format!(
        "{} to {target}{}",
        format_rate(opts.rate_pps),
        if xdp.is_some() { " (xdp)" } else { "" }
    );
    let setup = measure::setup(&opts, label.clone(), "remote", threads);
    if let Some(x) = &xdp {
        let (bind, attach) = x.socket.mode();
        eprintln!(
            "latlab gen: AF_XDP on {} ({} mode, {} XDP), from {} to {}",
            x.socket.ifname(),
            format!("{bind:?}").to_lowercase(),
            format!("{attach:?}").to_lowercase(),
            x.addrs.src,
            x.addrs.dst
        );
    }
    let mut bar = progress::Bar::new();
    latlab_lab::demo::ProgressSink::start(&mut bar, &label, opts.duration);
    let mut update = |p: latlab_engine::generator::Progress| {
        latlab_lab::demo::ProgressSink::update(&mut bar, &p)
    };
    let outcome = match xdp {
        Some(x) => measure::run_xdp(&opts, x, threads, setup, &STOP, &mut update),
        None => measure::run(&opts, &sockets, threads, setup, &STOP, &mut update),
    };
    latlab_lab::demo::ProgressSink::finish(&mut bar);
    let (summary, result) = outcome?;
    if let Some(path) = &a.json {
        results::write_atomic(path, results::summary_json(&summary).as_bytes())?;
    }
    if let Some(path) = &a.hlog {
        results::write_atomic(path, &results::hlog_bytes(&result, &summary.setup.label)?)?;
    }
    print!("{}", latlab_lab::table::render(&[&summary]));
    if let Some(dir) = dir {
        results::write_run(&dir, "", &summary, &result)?;
        dir.write(
            "summary.txt",
            latlab_lab::table::render(&[&summary]).as_bytes(),
        )?;
        let path = dir.commit()?;
        println!("results: {}", path.display());
    }
    if summary.stopped_early {
        eprintln!("stopped early by Ctrl-C: the figures cover the part that ran");
    }
    Ok(())
}

fn check_writable(path: &Path) -> Result<()> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        bail!(
            "{}: folder {} does not exist",
            path.display(),
            parent.display()
        );
    }
    Ok(())
}

fn demo(a: DemoArgs) -> Result<()> {
    let out = a.out.unwrap_or_else(|| {
        let secs = latlab_io::clock::now_ns() / 1_000_000_000;
        PathBuf::from("latlab-results").join(format!("demo-{secs}"))
    });
    let options = latlab_lab::demo::DemoOptions {
        duration: a.duration,
        rates: a.rates,
        out,
        namespaces: !a.loopback,
        emulated_link: !a.no_emulated_link,
    };
    let mut bar = progress::Bar::new();
    let outcome =
        latlab_lab::demo::run(&options, &STOP, &mut bar, &mut |line| eprintln!("{line}"))?;
    println!("latlab demo: {}", outcome.topology);
    print!(
        "{}",
        latlab_lab::table::render(&outcome.runs.iter().collect::<Vec<_>>())
    );
    let r = outcome.reflector;
    println!(
        "reflector: received {}, reflected {}, malformed {}, dropped on a full socket {}",
        r.received, r.reflected, r.malformed, r.send_dropped
    );
    if let Some(e) = &outcome.emulated {
        println!("{}", e.describe());
    }
    println!(
        "results: {} (summary.json, per-rate latency.hlog and ccdf.csv, ccdf.svg)",
        outcome.out.display()
    );
    if STOP.is_raised() {
        eprintln!("stopped early by Ctrl-C: the results hold the rates that ran");
    }
    Ok(())
}

fn report(a: ReportArgs) -> Result<()> {
    let path = a.dir.join("summary.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}", path.display()))?;
    // A demo folder holds a list of runs, each in a rate-…/ folder; a gen folder holds one.
    let (runs, dirs): (Vec<RunSummary>, Vec<PathBuf>) = match value.get("runs") {
        Some(runs) => {
            let runs: Vec<RunSummary> = serde_json::from_value(runs.clone())
                .with_context(|| format!("{}: runs", path.display()))?;
            let dirs = runs
                .iter()
                .map(|r| match &r.setup.dir {
                    Some(d) => a.dir.join(d),
                    None => a.dir.join(format!("rate-{}pps", r.offered_pps as u64)),
                })
                .collect();
            (runs, dirs)
        }
        None => (vec![RunSummary::load(&path)?], vec![a.dir.clone()]),
    };
    print!(
        "{}",
        latlab_lab::table::render(&runs.iter().collect::<Vec<_>>())
    );
    if let Some(plot) = a.plot {
        let mut series = Vec::new();
        for (run, dir) in runs.iter().zip(&dirs) {
            let csv = dir.join("ccdf.csv");
            let file = std::fs::File::open(&csv).with_context(|| format!("{}", csv.display()))?;
            let points = latlab_stats::read_ccdf_csv(std::io::BufReader::new(file))
                .with_context(|| format!("{}", csv.display()))?;
            series.push((run.setup.label.clone(), points));
        }
        let svg =
            latlab_lab::plot::ccdf_svg("latency CCDF", &series).map_err(anyhow::Error::msg)?;
        results::write_atomic(&plot, svg.as_bytes())?;
        println!("plot: {}", plot.display());
    }
    Ok(())
}

/// The game server's two kinds of socket.
enum ServeSocket {
    Udp(UdpSocket),
    Xdp(Box<latlab_io::xdp::XdpSocket>),
}

fn serve(a: ServeArgs) -> Result<()> {
    let listen = resolve("--listen", &a.listen)?;
    let socket = if a.io == Io::Xdp {
        let Some(iface) = a.iface.as_deref() else {
            bail!("--io xdp needs --iface: the interface whose frames AF_XDP takes");
        };
        let options = latlab_io::xdp::XdpOptions {
            frame_count: a.xdp_frames,
            ..latlab_io::xdp::XdpOptions::new(latlab_io::xdp::Redirect::Endpoint {
                udp_port: listen.port(),
            })
        };
        let s = latlab_io::xdp::XdpSocket::open(iface, &options)
            .with_context(|| format!("--iface {iface}"))?;
        ServeSocket::Xdp(Box::new(s))
    } else {
        let opts = UdpOptions {
            rcvbuf: a.rcvbuf,
            ..UdpOptions::default()
        };
        let s = UdpSocket::bind(listen, &opts).with_context(|| format!("--listen {listen}"))?;
        ServeSocket::Udp(s)
    };
    if let Some(cpu) = a.cpu {
        latlab_io::cpu::pin_current_thread(cpu).with_context(|| format!("--cpu {cpu}"))?;
    }
    let mut secret = [0u8; 16];
    secret[..8].copy_from_slice(&latlab_io::clock::now_ns().to_le_bytes());
    secret[8..].copy_from_slice(&latlab_io::tsc::read().to_le_bytes());
    let config = GameServerConfig {
        io: a.io,
        work_cycles: a.work_cycles,
        batch: 32,
        poll: a.poll,
        game: latlab_game::ServerConfig {
            max_clients: a.max_clients as usize,
            rate_limit_pps: a.rate_limit,
            secret,
            ..latlab_game::ServerConfig::default()
        },
    };
    match &socket {
        ServeSocket::Udp(s) => eprintln!(
            "latlab serve: listening on {} ({} I/O, SO_RCVBUF {} bytes, {} cycles of work); Ctrl-C stops",
            s.local_addr()?,
            a.io.name(),
            s.recv_buffer_size()?,
            a.work_cycles
        ),
        ServeSocket::Xdp(s) => eprintln!(
            "latlab serve: AF_XDP on {}, UDP port {} ({:?}, {} cycles of work); Ctrl-C stops",
            s.ifname(),
            listen.port(),
            s.mode(),
            a.work_cycles
        ),
    }
    let live = Arc::new(ServerLive::default());
    let terminal = std::io::stderr().is_terminal();
    let watcher = {
        let live = live.clone();
        watch(a.duration, move || {
            use std::sync::atomic::Ordering::Relaxed;
            format!(
                "clients {}  received {}  copies sent {}  dropped {}",
                live.clients.load(Relaxed),
                live.received.load(Relaxed),
                live.copies.load(Relaxed),
                live.dropped.load(Relaxed)
            )
        })
    };
    let run = match socket {
        ServeSocket::Udp(s) => latlab_engine::game::serve(&s, &config, &STOP, &live),
        ServeSocket::Xdp(s) => {
            latlab_engine::game::serve_xdp(*s, listen.port(), &config, &STOP, &live)
        }
    };
    STOP.raise();
    let _ = watcher.join();
    let c = run.context("game server")?;
    if terminal {
        eprintln!();
    }
    let json = serde_json::json!({
        "listen": listen.to_string(),
        "io": a.io.name(),
        "received": c.received,
        "game_packets": c.game_packets,
        "copies": c.copies,
        "joins": c.joins,
        "leaves": c.leaves,
        "dropped": {
            "malformed": c.malformed,
            "oversized": c.oversized,
            "unknown_sender": c.unknown_sender,
            "bad_cookie": c.bad_cookie,
            "expired": c.expired,
            "table_full": c.table_full,
            "rate_limited": c.rate_limited,
            "short_join": c.short_join,
        },
    });
    println!("{json:#}");
    if let Some(path) = a.json {
        results::write_atomic(&path, format!("{json:#}\n").as_bytes())?;
    }
    Ok(())
}

/// Parses `--loads`: `10k,20k,50k` or `10k..100k` (step = start) or `10k..100k/5k`.
fn parse_xdp_frames(text: &str) -> Result<u32, String> {
    let n: u32 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number"))?;
    if !n.is_power_of_two() || !(64..=1 << 20).contains(&n) {
        return Err(format!("{n} is not a power of two from 64 to 1048576"));
    }
    Ok(n)
}

fn parse_loads(text: &str) -> Result<Vec<f64>> {
    let bad = |why: String| anyhow::anyhow!("--loads {text:?}: {why}");
    if let Some((from, rest)) = text.split_once("..") {
        let (to, step) = match rest.split_once('/') {
            Some((to, step)) => (to, Some(step)),
            None => (rest, None),
        };
        let from = parse_rate(from).map_err(bad)?;
        let to = parse_rate(to).map_err(bad)?;
        let step = step
            .map(parse_rate)
            .transpose()
            .map_err(bad)?
            .unwrap_or(from);
        if to < from {
            return Err(bad("the range ends below its start".into()));
        }
        let n = ((to - from) / step).floor() as usize + 1;
        if n > 1000 {
            return Err(bad(format!("{n} loads is too many")));
        }
        return Ok((0..n).map(|k| from + k as f64 * step).collect());
    }
    let mut loads = text
        .split(',')
        .map(|t| parse_rate(t.trim()).map_err(bad))
        .collect::<Result<Vec<f64>>>()?;
    loads.sort_by(f64::total_cmp);
    Ok(loads)
}

fn game_study(a: GameStudyArgs) -> Result<()> {
    use latlab_lab::gamestudy::{StudyOptions, DEFAULT_RCVBUF};
    let loads = parse_loads(&a.loads)?;
    let rcvbufs = a
        .rcvbuf
        .iter()
        .map(|t| {
            if t == "default" {
                Ok(DEFAULT_RCVBUF)
            } else {
                parse_bytes(t).map_err(|e| anyhow::anyhow!("--rcvbuf: {e}"))
            }
        })
        .collect::<Result<Vec<usize>>>()?;
    if a.clients.is_empty() || a.clients.iter().any(|&c| c == 0 || c > 1024) {
        bail!("--clients must list counts between 1 and 1024");
    }
    let out = a.out.unwrap_or_else(|| {
        let secs = latlab_io::clock::now_ns() / 1_000_000_000;
        PathBuf::from("latlab-results").join(format!("game-server-{secs}"))
    });
    let mut options = StudyOptions::new(out);
    options.clients = a.clients;
    options.loads = loads;
    options.rcvbufs = rcvbufs;
    options.ios = a.io;
    options.duration = a.duration;
    options.resume = a.resume;
    options.work_cycles = a.work_cycles;
    options.flood = !a.no_flood;
    options.namespaces = !a.loopback;
    let mut bar = progress::StudyBar::new();
    let report =
        latlab_lab::gamestudy::run(&options, &STOP, &mut bar, &mut |line| eprintln!("{line}"))?;
    println!("report: {}", report.display());
    if STOP.is_raised() {
        eprintln!("stopped by Ctrl-C: the finished points are in the folder; rerun with --resume to go on");
    }
    Ok(())
}

/// The two directions' link configurations from a file, the flags and the specs.
fn emu_links(a: &EmuArgs) -> Result<(latlab_link::LinkConfig, latlab_link::LinkConfig)> {
    use latlab_lab::emuconfig::{apply, apply_spec, load_file};
    let mut ab = latlab_link::LinkConfig::default();
    let mut ba = latlab_link::LinkConfig::default();
    if let Some(path) = &a.config {
        let (both, only_ab, only_ba) = load_file(path).map_err(anyhow::Error::msg)?;
        for (k, v) in &both {
            apply(&mut ab, k, v).map_err(anyhow::Error::msg)?;
            apply(&mut ba, k, v).map_err(anyhow::Error::msg)?;
        }
        for (k, v) in &only_ab {
            apply(&mut ab, k, v).map_err(anyhow::Error::msg)?;
        }
        for (k, v) in &only_ba {
            apply(&mut ba, k, v).map_err(anyhow::Error::msg)?;
        }
    }
    let max_frame = Some(a.frame_size.to_string());
    // (flag, key, value): --loss-model sets the same knob as --loss.
    let flags: [(&str, &str, &Option<String>); 17] = [
        ("delay", "delay", &a.delay),
        ("jitter", "jitter", &a.jitter),
        ("jitter-dist", "jitter-dist", &a.jitter_dist),
        ("dist-table", "dist-table", &a.dist_table),
        ("correlation", "correlation", &a.correlation),
        ("loss", "loss", &a.loss),
        ("loss-model", "loss", &a.loss_model),
        ("duplicate", "duplicate", &a.duplicate),
        ("corrupt", "corrupt", &a.corrupt),
        ("reorder", "reorder", &a.reorder),
        ("rate", "rate", &a.rate),
        ("overhead", "overhead", &a.overhead),
        ("limit", "limit", &a.limit),
        ("limit-bytes", "limit-bytes", &a.limit_bytes),
        ("schedule", "schedule", &a.schedule),
        ("seed", "seed", &a.seed),
        ("frame-size", "max-frame", &max_frame),
    ];
    for (flag, key, value) in flags {
        if let Some(v) = value {
            let named =
                |e: String| anyhow::anyhow!(e.replace(&format!("--{key}"), &format!("--{flag}")));
            apply(&mut ab, key, v).map_err(named)?;
            apply(&mut ba, key, v).map_err(named)?;
        }
    }
    // Each direction draws its own random numbers.
    ba.seed = ba.seed.wrapping_add(0x9e37_79b9);
    if let Some(spec) = &a.a_to_b {
        apply_spec(&mut ab, "--a-to-b", spec).map_err(anyhow::Error::msg)?;
    }
    if let Some(spec) = &a.b_to_a {
        apply_spec(&mut ba, "--b-to-a", spec).map_err(anyhow::Error::msg)?;
    }
    ab.validate().map_err(|e| anyhow::anyhow!("A to B: {e}"))?;
    ba.validate().map_err(|e| anyhow::anyhow!("B to A: {e}"))?;
    Ok((ab, ba))
}

fn emu(a: EmuArgs) -> Result<()> {
    use latlab_engine::emulator::{self, EmulatorLive};
    let (ab, ba) = emu_links(&a)?;
    if a.io == Io::Xdp {
        return emu_xdp(a, ab, ba);
    }
    let options = latlab_io::packet::PacketOptions {
        // Ring slots hold the frame plus the kernel's headers and must be a power of two.
        frame_size: (a.frame_size.max(128) + 128).next_power_of_two(),
        rx_ring: match a.rx_ring {
            RxRingArg::V2 => latlab_io::packet::RxRing::V2,
            RxRingArg::V3 => latlab_io::packet::RxRing::V3,
        },
        ..latlab_io::packet::PacketOptions::default()
    };
    let open = |flag: &str, ifname: &str, opts: &latlab_io::packet::PacketOptions| {
        latlab_io::packet::PacketSocket::open(ifname, opts)
            .with_context(|| format!("{flag} {ifname}"))
    };
    let mut sock_a = open("--iface-a", &a.iface_a, &options)?;
    let mut sock_b = open("--iface-b", &a.iface_b, &options)?;
    let cpus = latlab_io::cpu::allowed_cpus().unwrap_or_default();
    let pipeline = match a.mode {
        EmuMode::Pipeline => true,
        EmuMode::RunToCompletion => false,
        EmuMode::Auto => cpus.len() >= 3,
    };
    // The pipeline's TX stage writes through sockets of its own.
    let tx_sockets = if pipeline {
        Some((
            open("--iface-a", &a.iface_a, &options)?,
            open("--iface-b", &a.iface_b, &options)?,
        ))
    } else {
        None
    };
    eprintln!(
        "latlab emu: bridging {} and {} ({}); Ctrl-C stops",
        a.iface_a,
        a.iface_b,
        if pipeline {
            "pipeline: RX and TX stages on their own cores"
        } else {
            "run to completion: one loop"
        }
    );
    let live = Arc::new(EmulatorLive::default());
    let watcher = emu_watch(a.duration, &live);
    let run = match tx_sockets {
        Some((tx_a, tx_b)) => {
            let n = cpus.len();
            let stage_cpus = if n >= 2 {
                (Some(cpus[n - 2]), Some(cpus[n - 1]))
            } else {
                (None, None)
            };
            let sockets = emulator::PipelineSockets {
                rx_a: sock_a,
                rx_b: sock_b,
                tx_a,
                tx_b,
            };
            emulator::run_pipeline(sockets, ab, ba, 4096, stage_cpus, &STOP, &live)
        }
        None => emulator::run(
            &mut sock_a,
            &mut sock_b,
            ab,
            ba,
            a.frame_size,
            a.poll,
            &STOP,
            &live,
        ),
    };
    emu_finish(run, watcher, a.json.as_deref())
}

/// `latlab emu --io xdp`: the run-to-completion bridge over one AF_XDP socket per interface,
/// each fed every frame of its interface by an XDP program.
fn emu_xdp(a: EmuArgs, ab: latlab_link::LinkConfig, ba: latlab_link::LinkConfig) -> Result<()> {
    use latlab_engine::emulator::{self, EmulatorLive};
    use latlab_io::xdp::{Redirect, XdpOptions, XdpSocket};
    if a.mode == EmuMode::Pipeline {
        bail!(
            "--mode pipeline needs --io packet: AF_XDP gives one socket per interface queue, \
             which the pipeline's RX and TX stages cannot share; use --mode run-to-completion"
        );
    }
    let options = XdpOptions {
        // A received frame gets frame_size − 256 bytes of a UMEM frame.
        frame_size: if a.frame_size + 256 > 2048 {
            4096
        } else {
            2048
        },
        ..XdpOptions::new(Redirect::Everything)
    };
    if a.frame_size + 256 > 4096 {
        bail!(
            "--frame-size {} is too large for --io xdp (at most 3840 bytes)",
            a.frame_size
        );
    }
    let open = |flag: &str, ifname: &str| {
        XdpSocket::open(ifname, &options).with_context(|| format!("{flag} {ifname}"))
    };
    let mut sock_a = open("--iface-a", &a.iface_a)?;
    let mut sock_b = open("--iface-b", &a.iface_b)?;
    let describe = |s: &XdpSocket| {
        let (bind, attach) = s.mode();
        format!(
            "{}: {} mode, {} XDP",
            s.ifname(),
            format!("{bind:?}").to_lowercase(),
            format!("{attach:?}").to_lowercase()
        )
    };
    eprintln!(
        "latlab emu: bridging {} and {} over AF_XDP ({}; {}), run to completion; Ctrl-C stops",
        a.iface_a,
        a.iface_b,
        describe(&sock_a),
        describe(&sock_b)
    );
    let live = Arc::new(EmulatorLive::default());
    let watcher = emu_watch(a.duration, &live);
    let run = emulator::run(
        &mut sock_a,
        &mut sock_b,
        ab,
        ba,
        a.frame_size,
        a.poll,
        &STOP,
        &live,
    );
    emu_finish(run, watcher, a.json.as_deref())
}

/// The live counters line of `latlab emu`, redrawn until the run stops.
fn emu_watch(
    duration: Option<Duration>,
    live: &Arc<latlab_engine::emulator::EmulatorLive>,
) -> std::thread::JoinHandle<()> {
    let live = live.clone();
    watch(duration, move || {
        use std::sync::atomic::Ordering::Relaxed;
        let (x, y) = (&live.a_to_b, &live.b_to_a);
        format!(
            "A→B in {} out {} dropped {}   B→A in {} out {} dropped {}",
            x.arrived.load(Relaxed),
            x.sent.load(Relaxed),
            x.dropped.load(Relaxed),
            y.arrived.load(Relaxed),
            y.sent.load(Relaxed),
            y.dropped.load(Relaxed)
        )
    })
}

/// Stops the counters line, prints the summary and writes the JSON report.
fn emu_finish(
    run: std::io::Result<latlab_engine::emulator::EmulatorReport>,
    watcher: std::thread::JoinHandle<()>,
    json: Option<&Path>,
) -> Result<()> {
    STOP.raise();
    let _ = watcher.join();
    if std::io::stderr().is_terminal() {
        eprintln!();
    }
    let report = run.context("emulator")?;
    let value = latlab_lab::emureport::report_json(&report);
    println!("{}", latlab_lab::emureport::summary_text(&report));
    if let Some(path) = json {
        results::write_atomic(path, format!("{value:#}\n").as_bytes())?;
    }
    Ok(())
}

fn emu_study(a: EmuStudyArgs) -> Result<()> {
    use latlab_lab::emustudy::{self, EmuStudyOptions};
    if let Some(reason) = latlab_lab::topology::why_no_namespaces() {
        bail!("study emulator needs network namespaces: {reason}");
    }
    let out = a.out.unwrap_or_else(|| {
        let secs = latlab_io::clock::now_ns() / 1_000_000_000;
        PathBuf::from("latlab-results").join(format!("emulator-{secs}"))
    });
    let mut options = EmuStudyOptions::new(out);
    options.duration = a.duration;
    options.rates = a.rates;
    options.delays_ns = a.delays.iter().map(|d| d.as_nanos() as u64).collect();
    options.rate_duration = a.rate_duration;
    let mut bar = progress::StudyBar::new();
    let report = emustudy::run(&options, &STOP, &mut bar, &mut |line| eprintln!("{line}"))?;
    println!("report: {}", report.display());
    Ok(())
}

fn echo_xdp(a: &EchoArgs, listen: SocketAddr) -> Result<()> {
    use latlab_io::xdp::{Redirect, XdpOptions, XdpSocket};
    let Some(iface) = a.iface.as_deref() else {
        bail!("--io xdp needs --iface: the interface whose frames AF_XDP takes");
    };
    let options = XdpOptions {
        frame_count: a.xdp_frames,
        ..XdpOptions::new(Redirect::Endpoint {
            udp_port: listen.port(),
        })
    };
    let socket = XdpSocket::open(iface, &options).with_context(|| format!("--iface {iface}"))?;
    if let Some(cpu) = a.cpu {
        latlab_io::cpu::pin_current_thread(cpu).with_context(|| format!("--cpu {cpu}"))?;
    }
    let (bind, attach) = socket.mode();
    eprintln!(
        "latlab echo: AF_XDP on {iface}, UDP port {} ({bind:?} bind, {attach:?} XDP program, {} poll); Ctrl-C stops",
        listen.port(),
        a.poll.name()
    );
    let config = ReflectorConfig {
        batch: a.batch as usize,
        poll: a.poll,
        stamp: !a.no_stamp,
        ..ReflectorConfig::default()
    };
    let counters = Arc::new(ReflectorCounters::default());
    let watcher = {
        let counters = counters.clone();
        watch(a.duration, move || {
            let r = counters.snapshot();
            format!(
                "received {}  reflected {}  malformed {}",
                r.received, r.reflected, r.malformed
            )
        })
    };
    let mut port = latlab_io::port::XdpEndpoint::new(socket, listen.port(), config.port_sizes())
        .with_context(|| format!("--iface {iface}"))?;
    let run = reflector::run(&mut port, &config, &STOP, &counters);
    STOP.raise();
    let _ = watcher.join();
    run.context("AF_XDP reflector")?;
    drop(port);
    let r = counters.snapshot();
    println!(
        "received {}  reflected {}  malformed {}  send-dropped {}",
        r.received, r.reflected, r.malformed, r.send_dropped
    );
    if let Some(path) = &a.json {
        let json = serde_json::json!({
            "listen": listen.to_string(),
            "io": "xdp",
            "iface": iface,
            "received": r.received,
            "reflected": r.reflected,
            "malformed": r.malformed,
            "send_dropped": r.send_dropped,
        });
        results::write_atomic(path, format!("{json:#}\n").as_bytes())?;
    }
    Ok(())
}
