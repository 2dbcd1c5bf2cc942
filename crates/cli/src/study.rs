//! `latlab study game-server`, `emulator`, `timestamps`, `transports`, `forwarding` and
//! `bufferbloat`: flags → latlab-study's studies.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Subcommand;
use latlab_lab::command::{default_out, CommandError, ServerIo};
use latlab_lab::units::{parse_bytes, parse_duration, parse_rate, ProbeRate};
use latlab_study::{Shard, Study};

use crate::{progress, values, STOP};

mod target;

#[derive(Debug, Subcommand)]
pub(crate) enum StudyCommand {
    /// The game-server latency study (Emmerich et al.): latency vs load, clients and buffer
    /// sizes, the first-drop load, Table I, Figures 2–4, a flood, and report.md.
    GameServer(GameStudyArgs),
    /// The link emulator against the kernel's forwarding: added latency, delay accuracy, loss
    /// models (namespaces; root).
    Emulator(EmuStudyArgs),
    /// How far each way of stamping a probe can be trusted (user-space clock blocking and
    /// busy polling, kernel software RX and TX stamps) against an emulated path of known
    /// delay, and which reflector OS settings move the tail (namespaces; root).
    Timestamps(StampStudyArgs),
    /// Reliable transports for thin game streams side by side through an emulated path
    /// (Harcsik et al.): every transport's streams at once per RTT × interarrival × loss cell,
    /// random and bursty loss (namespaces; root).
    Transports(TransportStudyArgs),
    /// Packet forwarders measured as RFC 2544 asks (Emmerich et al.): Table I (64-byte
    /// throughput against the kernel's IP forwarding), Fig. 2 (NDR by frame size) and Table II
    /// (latlab fwd's cycles per packet by step), for every forwarder latlab rfc2544 builds
    /// (namespaces; root).
    Forwarding(ForwardingStudyArgs),
    /// A game stream sharing a rate-limited link with TCP bulk flows (cubic, bbr) through
    /// tail-drop queues of several depths and the emulator's queue disciplines: the game's
    /// tail and loss, each flow's goodput, the queue's sojourn time (namespaces; root).
    Bufferbloat(BloatStudyArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct BloatStudyArgs {
    /// The bottleneck's rate on the client→server direction (as latlab emu --rate takes it).
    #[arg(long, default_value = "20mbit", value_name = "RATE")]
    rate: String,
    /// The bottleneck's queues, comma separated: NAME[:KEY=VALUE...], each handed to the
    /// emulator as a spec (tail:limit=1000 is limit=1000; codel:target=5ms is aqm=codel
    /// target=5ms).
    #[arg(long, value_delimiter = ',', value_parser = latlab_study::bufferbloat::Queue::parse,
          default_value = "tail:limit=1000,tail:limit=100,codel,fq_codel,pie,dualpi2",
          value_name = "QUEUES")]
    queues: Vec<latlab_study::bufferbloat::Queue>,
    /// Numbers of TCP bulk flows per point, comma separated (0: the unloaded link).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0,1,4",
        value_name = "N,..."
    )]
    flows: Vec<u32>,
    /// The bulk flows' congestion controls, comma separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "cubic,bbr",
        value_name = "CC,..."
    )]
    cc: Vec<String>,
    /// The game stream's traffic: a Table 1 model or fixed:SIZE@INTERVAL (see `latlab gen
    /// --help`).
    #[arg(long, value_name = "MODEL", value_parser = values::model(), default_value = latlab_study::bufferbloat::DEFAULT_MODEL)]
    model: latlab_lab::command::TrafficModel,
    /// The game stream's sending time per point.
    #[arg(long, value_parser = parse_duration, default_value = "10s", value_name = "DUR")]
    duration: Duration,
    /// How long the bulk flows run before the game stream starts, filling the queue.
    #[arg(long, value_parser = parse_duration, default_value = "3s", value_name = "DUR")]
    warmup: Duration,
    /// The path's base round trip: a delay on the server→client direction (the flows' ACKs
    /// and the game's answers), so that the bottleneck's queue is its rate's and discipline's
    /// alone.
    #[arg(long, value_parser = parse_duration, default_value = "0ms", value_name = "DUR")]
    delay: Duration,
    #[command(flatten)]
    folder: StudyFolderArgs,
}

/// Where a study writes, the same flags for every study.
#[derive(Debug, clap::Args)]
pub(crate) struct StudyFolderArgs {
    /// Results folder (default latlab-results/<study>-<time>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Continue an interrupted study in --out, skipping the points it measured.
    #[arg(long, requires = "out")]
    resume: bool,
    /// Measure only share I of N of the points into --out, so that N jobs started with the
    /// same options fill one folder (the last to finish draws the report).
    #[arg(long, value_name = "I/N", value_parser = Shard::parse, default_value = "1/1", requires = "out")]
    shard: Shard,
}

impl StudyFolderArgs {
    /// `--out`, or a new folder named after the study and the time.
    fn out(&self, study: &str) -> PathBuf {
        self.out.clone().unwrap_or_else(|| default_out(study))
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct ForwardingStudyArgs {
    /// The forwarders, comma separated [default: all; testpmd and testpmd-xdp left out when
    /// testpmd cannot be installed].
    #[arg(long, value_delimiter = ',', value_name = "DUT,...", value_parser = values::built_dut())]
    duts: Vec<latlab_forwarding::rfc2544::Dut>,
    /// Frame sizes in bytes, comma separated [default: 64,128,256,512,1024,1280,1518].
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Length of one trial.
    #[arg(long, value_parser = parse_duration, default_value = "1s", value_name = "DUR")]
    trial: Duration,
    /// Trials per search at most.
    #[arg(long, default_value_t = 8, value_name = "N")]
    max_trials: usize,
    /// Batch sizes latlab fwd over AF_XDP is also measured at with 64-byte frames (the
    /// batch-size effect), comma separated; 0 for none.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,4,16,64",
        value_name = "N,..."
    )]
    batches: Vec<usize>,
    /// Poll modes latlab fwd over AF_XDP is also measured in with 64-byte frames (the
    /// poll-rate effect), comma separated; none for none.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "busy,block,rate:100000,rate:10000",
        value_parser = values::fwd_polls(),
        value_name = "MODE,..."
    )]
    polls: Vec<String>,
    /// The source's frame port: packet (AF_PACKET) or xdp (AF_XDP, faster on veth).
    #[arg(long, default_value = "xdp", value_parser = values::frame_io(), value_name = "IO")]
    source: latlab_lab::command::Io,
    #[command(flatten)]
    folder: StudyFolderArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct TransportStudyArgs {
    /// Round-trip times the emulator adds (half each way), comma separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_duration, default_value = "50ms,100ms,200ms")]
    rtts: Vec<Duration>,
    /// Gaps between a stream's messages, comma separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_duration, default_value = "50ms,100ms,200ms")]
    intervals: Vec<Duration>,
    /// Loss each way in percent, comma separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_percent, default_value = "0.1%,0.5%,1%,2.5%")]
    losses: Vec<f64>,
    /// Loss models, comma separated: random (each frame on its own) and bursty
    /// (Gilbert-Elliott, the same mean in bursts of 3 frames).
    #[arg(long, value_delimiter = ',', default_value = "random,bursty", value_parser = values::loss_kind())]
    loss_models: Vec<latlab_study::transports::LossKind>,
    // Its help names the transports (`values::transports_study_help`).
    #[arg(long, value_delimiter = ',', value_parser = parse_transport, help = values::transports_study_help())]
    transports: Vec<latlab_stream::TransportSpec>,
    /// Streams of each transport at once per cell (on two cores, 10 of each of nine
    /// transports, udp, tcp cubic and reno-thin, enet, kcp fast, quic and latlab's tcp-like, thin
    /// and rack with RDB, kept plain UDP's p99 within 2 ms of the path; the report says when the
    /// machine could not keep up).
    #[arg(long, default_value_t = 10, value_name = "N")]
    streams: u32,
    /// Bytes per message.
    #[arg(long, default_value_t = 100, value_name = "BYTES")]
    size: usize,
    /// How long each stream sends per cell.
    #[arg(long, value_parser = parse_duration, default_value = "10s", value_name = "DUR")]
    duration: Duration,
    /// Run the cells in virtual time: latlab's transport, KCP, QUIC and UDP over the emulator's
    /// link model in simulated time (a two-hour --duration takes seconds); TCP and ENet are
    /// left out. --checks cells are also measured in namespaces, and the report compares.
    #[arg(long = "virtual")]
    virtual_time: bool,
    /// With --virtual: cells also measured in namespaces (spread over the grid), 0 for none.
    #[arg(long, default_value_t = 3, value_name = "N", requires = "virtual_time")]
    checks: usize,
    /// With --virtual: how long each stream sends in those namespace cells.
    #[arg(long, value_parser = parse_duration, default_value = "20s", value_name = "DUR", requires = "virtual_time")]
    check_duration: Duration,
    #[command(flatten)]
    folder: StudyFolderArgs,
}

/// `2.5%` or `2.5` → 0.025.
fn parse_percent(text: &str) -> Result<f64, String> {
    let number = text.strip_suffix('%').unwrap_or(text);
    match number.parse::<f64>() {
        Ok(p) if (0.0..100.0).contains(&p) => Ok(p / 100.0),
        _ => Err(format!(
            "{text:?}: expected a percentage from 0 to below 100 (2.5%)"
        )),
    }
}

/// A transport as `latlab stream` spells it, with `+` for the commas between its options.
fn parse_transport(text: &str) -> Result<latlab_stream::TransportSpec, String> {
    text.replace('+', ",")
        .parse::<latlab_stream::TransportSpec>()
        .map_err(|e| e.to_string())
}

#[derive(Debug, clap::Args)]
pub(crate) struct StampStudyArgs {
    /// Probes per point (one in flight at a time).
    #[arg(long, default_value_t = 20_000, value_name = "N")]
    probes: u64,
    /// Probes per second.
    #[arg(long, value_parser = parse_rate, default_value = "2k")]
    rate: f64,
    /// The fixed delay the emulator holds on the client→server direction: the reference.
    #[arg(long, value_parser = parse_duration, default_value = "100us", value_name = "DUR")]
    delay: Duration,
    #[command(flatten)]
    folder: StudyFolderArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct EmuStudyArgs {
    /// Sending time per point.
    #[arg(long, value_parser = parse_duration, default_value = "3s", value_name = "DUR")]
    duration: Duration,
    /// The rates to measure at, comma separated.
    #[arg(long, value_delimiter = ',', value_parser = str::parse::<ProbeRate>, default_value = "1k,50k")]
    rates: Vec<ProbeRate>,
    /// Delays on the client→server direction, comma separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_duration, default_value = "10us,100us,1ms,100ms")]
    delays: Vec<Duration>,
    /// Sending time of each forwarding-rate point (one per RFC 2544 frame size and path).
    #[arg(long, value_parser = parse_duration, default_value = "2s", value_name = "DUR")]
    rate_duration: Duration,
    #[command(flatten)]
    folder: StudyFolderArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct GameStudyArgs {
    /// Measure this server (ADDR:PORT), one latlab did not start, instead of latlab's own
    /// model server: only the offered load varies (--loads; no --clients, --rcvbuf, --io,
    /// --work-cycles, flood or --model/--trace: they are the server's own), until more than 5%
    /// of the requests go unanswered, in the --protocol given.
    #[arg(long, value_name = "ADDR")]
    target: Option<String>,
    #[command(flatten)]
    protocol: Box<crate::protocol_flags::ProtocolFlags>,
    /// With --target: put an emulated link in front of the server, this spec each way
    /// ("delay=5ms loss=1%", as `latlab run --up`): the study runs itself again behind `latlab
    /// run`'s link, whose only way out is this host (give --target an address of this host,
    /// not loopback, or run the study under `latlab run --nat` yourself, --link naming its link).
    #[arg(long, value_name = "SPEC", requires = "target")]
    link: Option<String>,
    /// Client counts, comma separated [default: 4,8,16,32].
    #[arg(long, value_delimiter = ',')]
    clients: Option<Vec<u32>>,
    /// Offered loads: a list (10k,20k) or a range with a step (10k..100k/10k; the step defaults to the start).
    #[arg(long, default_value = "10k..100k", value_name = "LOADS")]
    loads: String,
    /// Server receive buffer sizes (setsockopt values), comma separated; "default" is the
    /// system's [default: 16k,64k,default].
    #[arg(long, value_delimiter = ',')]
    rcvbuf: Option<Vec<String>>,
    /// Server I/O modes, comma separated (xdp is left out, with the reason, where AF_XDP
    /// cannot be had) [default: socket,batched,xdp].
    #[arg(long, value_delimiter = ',', value_parser = values::server_io())]
    io: Option<Vec<ServerIo>>,
    /// Sending time per point.
    #[arg(long, value_parser = parse_duration, default_value = "2s", value_name = "DUR")]
    duration: Duration,
    /// Emulated work per game packet, in TSC cycles [default: 150].
    #[arg(long, value_name = "N")]
    work_cycles: Option<u64>,
    /// Skip the flood scenario.
    #[arg(long)]
    no_flood: bool,
    /// Run on loopback even when namespaces would work.
    #[arg(long)]
    loopback: bool,
    /// The measuring client plays a game's traffic instead of constant-rate 128-byte probes:
    /// the model's sizes, and its gaps paced to each point's load (see `latlab gen --help`).
    #[arg(long, value_name = "MODEL", value_parser = values::model(), conflicts_with = "trace")]
    model: Option<latlab_lab::command::TrafficModel>,
    /// The measuring client replays one stream of a pcap or pcapng capture: its sizes, and
    /// its gaps paced to each point's load (once: a stream shorter than --duration at that
    /// pace ends the point early).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// The stream of --trace to replay (default: the one with the most packets), numbered as
    /// latlab trace-stats numbers them.
    #[arg(long, value_name = "N", requires = "trace")]
    stream: Option<usize>,
    #[command(flatten)]
    folder: StudyFolderArgs,
}

pub(crate) fn run(command: StudyCommand) -> Result<()> {
    match command {
        StudyCommand::GameServer(a) => game_study(a),
        StudyCommand::Emulator(a) => emu_study(a),
        StudyCommand::Timestamps(a) => stamp_study(a),
        StudyCommand::Transports(a) => transport_study(a),
        StudyCommand::Forwarding(a) => forwarding_study(a),
        StudyCommand::Bufferbloat(a) => bloat_study(a),
    }
}

/// Parses `--loads`: `10k,20k,50k` or `10k..100k` (step = start) or `10k..100k/5k`.
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
    use latlab_study::game_server::{ClientTraffic, StudyOptions, DEFAULT_RCVBUF};
    let usage = |line: String| -> anyhow::Error { CommandError::Usage(line).into() };
    if a.target.is_some() {
        return target::run(a);
    }
    if let Some(flag) = a.protocol.first_given() {
        return Err(usage(format!(
            "{flag} needs --target ADDR: latlab's own server speaks latlab's game protocol"
        )));
    }
    let loads = parse_loads(&a.loads)?;
    let rcvbufs = a
        .rcvbuf
        .unwrap_or_else(|| vec!["16k".into(), "64k".into(), "default".into()])
        .iter()
        .map(|t| {
            if t == "default" {
                Ok(DEFAULT_RCVBUF)
            } else {
                parse_bytes(t).map_err(|e| anyhow::anyhow!("--rcvbuf: {e}"))
            }
        })
        .collect::<Result<Vec<usize>>>()?;
    let clients = a.clients.unwrap_or_else(|| vec![4, 8, 16, 32]);
    if clients.is_empty() || clients.iter().any(|&c| c == 0 || c > 1024) {
        bail!("--clients must list counts between 1 and 1024");
    }
    let out = a.folder.out("game-server");
    let mut options = StudyOptions::new(out);
    options.clients = clients;
    options.loads = loads;
    options.rcvbufs = rcvbufs;
    if let Some(io) = a.io {
        options.ios = io;
    } else {
        options.ios = vec![ServerIo::Socket, ServerIo::Batched, ServerIo::Xdp];
    }
    options.duration = a.duration;
    options.resume = a.folder.resume;
    options.shard = a.folder.shard;
    options.work_cycles = a.work_cycles.unwrap_or(150);
    options.flood = !a.no_flood;
    options.namespaces = !a.loopback;
    options.traffic = match (a.model, &a.trace) {
        (Some(model), _) => Some(ClientTraffic::model(model)),
        (None, Some(path)) => {
            let capture = latlab_lab::trace::read_capture(path)?;
            let replay = latlab_lab::trace::replay(path, &capture, a.stream, 1.0)?;
            Some(ClientTraffic::trace(replay))
        }
        (None, None) => None,
    };
    if options.namespaces {
        crate::clean::at_start(&options.out, options.resume || !options.shard.is_whole());
    }
    let mut bar = progress::Terminal::new();
    let report = latlab_study::game_server::GameServerStudy::run(&options, &STOP, &mut bar)?;
    finish(&report, "the finished points")
}

fn emu_study(a: EmuStudyArgs) -> Result<()> {
    use latlab_study::emulator::{self, EmuStudyOptions};
    if let Some(reason) = latlab_lab::topology::why_no_namespaces() {
        bail!("study emulator needs network namespaces: {reason}");
    }
    let out = a.folder.out("emulator");
    let mut options = EmuStudyOptions::new(out);
    options.duration = a.duration;
    options.rates = a.rates;
    options.delays_ns = a.delays.iter().map(|d| d.as_nanos() as u64).collect();
    options.rate_duration = a.rate_duration;
    options.resume = a.folder.resume;
    options.shard = a.folder.shard;
    crate::clean::at_start(&options.out, options.resume || !options.shard.is_whole());
    let mut bar = progress::Terminal::new();
    let report = emulator::EmulatorStudy::run(&options, &STOP, &mut bar)?;
    finish(&report, "the finished points")
}

fn stamp_study(a: StampStudyArgs) -> Result<()> {
    use latlab_study::timestamps::{self, StampStudyOptions};
    if let Some(reason) = latlab_lab::topology::why_no_namespaces() {
        bail!("study timestamps needs network namespaces: {reason}");
    }
    if a.probes == 0 {
        bail!("--probes must be at least 1");
    }
    let out = a.folder.out("timestamps");
    let mut options = StampStudyOptions::new(out);
    options.probes = a.probes;
    options.rate_pps = a.rate;
    options.delay_ns = a.delay.as_nanos() as u64;
    options.resume = a.folder.resume;
    options.shard = a.folder.shard;
    crate::clean::at_start(&options.out, options.resume || !options.shard.is_whole());
    let mut bar = progress::Terminal::new();
    let report = timestamps::TimestampsStudy::run(&options, &STOP, &mut bar)?;
    finish(&report, "the finished points")
}

fn transport_study(a: TransportStudyArgs) -> Result<()> {
    use latlab_study::transports::{self, TransportStudyOptions};
    let no_namespaces = latlab_lab::topology::why_no_namespaces();
    if let (Some(reason), false) = (&no_namespaces, a.virtual_time) {
        bail!("study transports needs network namespaces (or --virtual): {reason}");
    }
    for (flag, empty) in [
        ("--rtts", a.rtts.is_empty()),
        ("--intervals", a.intervals.is_empty()),
        ("--losses", a.losses.is_empty()),
        ("--loss-models", a.loss_models.is_empty()),
    ] {
        if empty {
            bail!("{flag} must name at least one value");
        }
    }
    if a.streams == 0 || a.streams > 200 {
        bail!("--streams must be from 1 to 200");
    }
    if let Some(i) = a.intervals.iter().find(|i| i.is_zero()) {
        bail!("--intervals: {i:?} is not a gap between messages");
    }
    let out = a.folder.out("transports");
    let mut options = TransportStudyOptions::new(out);
    options.rtts = a.rtts;
    options.intervals = a.intervals;
    options.losses = a.losses;
    options.loss_kinds = a.loss_models;
    if !a.transports.is_empty() {
        options.transports = a.transports;
    }
    options.streams = a.streams;
    options.size = a.size;
    options.duration = a.duration;
    options.resume = a.folder.resume;
    options.shard = a.folder.shard;
    options.virtual_time = a.virtual_time;
    options.checks = a.checks;
    options.check_duration = a.check_duration;
    if let (Some(reason), true) = (&no_namespaces, a.checks > 0) {
        eprintln!("no cross-checks in namespaces: {reason}");
        options.checks = 0;
    }
    if !options.virtual_time || options.checks > 0 {
        crate::clean::at_start(&options.out, options.resume || !options.shard.is_whole());
    }
    let mut bar = progress::Terminal::new();
    let report = transports::TransportsStudy::run(&options, &STOP, &mut bar)?;
    finish(&report, "the finished cells")
}

fn forwarding_study(a: ForwardingStudyArgs) -> Result<()> {
    use latlab_forwarding::forwarding::{self, ForwardingStudyOptions};
    if let Some(reason) = latlab_lab::topology::why_no_namespaces() {
        bail!("study forwarding needs network namespaces: {reason}");
    }
    let out = a.folder.out("forwarding");
    let mut options = ForwardingStudyOptions::new(out);
    if !a.duts.is_empty() {
        options.duts = a.duts;
    }
    if !a.sizes.is_empty() {
        options.sizes = a.sizes;
    }
    options.trial = a.trial;
    options.max_trials = a.max_trials;
    options.source = a.source;
    options.batches = a.batches.into_iter().filter(|&b| b != 0).collect();
    // Checked by `parse_poll`: every value but "none" is a mode.
    options.polls = a.polls.iter().filter_map(|p| p.parse().ok()).collect();
    options.resume = a.folder.resume;
    options.shard = a.folder.shard;
    crate::clean::at_start(&options.out, options.resume || !options.shard.is_whole());
    let mut bar = progress::Terminal::new();
    let report = forwarding::ForwardingStudy::run(&options, &STOP, &mut bar)?;
    finish(&report, "the measured DUTs")
}

fn bloat_study(a: BloatStudyArgs) -> Result<()> {
    use latlab_study::bufferbloat::{BloatOptions, BufferbloatStudy};
    let mut options = BloatOptions::new(a.folder.out("bufferbloat"));
    options.rate = a.rate;
    options.queues = a.queues;
    options.flows = a.flows;
    options.ccs = a.cc;
    options.model = a.model;
    options.duration = a.duration;
    options.warmup = a.warmup;
    options.delay = a.delay;
    options.resume = a.folder.resume;
    options.shard = a.folder.shard;
    if let Err(e) = options.check() {
        return Err(latlab_lab::error::CommandError::Usage(e).into());
    }
    if let Some(reason) = latlab_lab::topology::why_no_namespaces() {
        bail!("study bufferbloat needs network namespaces: {reason}");
    }
    crate::clean::at_start(&options.out, options.resume || !options.shard.is_whole());
    let mut bar = progress::Terminal::new();
    let report = BufferbloatStudy::run(&options, &STOP, &mut bar)?;
    finish(&report, "the finished points")
}

/// Prints where the report is and, when a signal stopped the study, that `kept` (the finished
/// points, cells, …) are in the folder and how to go on (every study takes `--resume`).
fn finish(report: &latlab_study::StudyReport, kept: &str) -> Result<()> {
    print_report(report)?;
    if let Some(signal) = crate::signals::received() {
        eprintln!(
            "stopped by {}: {kept} are in the folder; rerun with --resume to go on",
            signal.name()
        );
    }
    Ok(())
}

/// Where the report is, or, for a shard that did not finish last, which shards it waits for
/// (or which one draws the report).
fn print_report(report: &latlab_study::StudyReport) -> Result<()> {
    if let (true, Some(drawer)) = (report.pending.is_empty(), report.drawn_by) {
        outln!(
            "points written to {}; shard {drawer} draws the report ({})",
            report.out.display(),
            report.report.display()
        );
    } else if report.pending.is_empty() {
        outln!("report: {}", report.report.display());
    } else {
        let pending: Vec<String> = report.pending.iter().map(|s| s.to_string()).collect();
        outln!(
            "points written to {}; the report is drawn when shards {} are done (latlab report {} draws what is there now)",
            report.out.display(),
            pending.join(", "),
            report.out.display()
        );
    }
    Ok(())
}
