//! `latlab emu`: flags → [`latlab_emu`]. The impairment flags go to latlab-emu as typed; it
//! combines them with `--config` and the per-direction specs, and its errors name the flags.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use latlab_emu::attach::Target;
use latlab_emu::config::{ImpairmentFlags, LinkSources};
use latlab_emu::knob::KNOBS;
use latlab_emu::{EmuMode, EmuOptions, EmuPoll, RxRing};
use latlab_lab::command::{CommandError, Io};
use latlab_lab::units::parse_duration;

use crate::progress::Terminal;
use crate::{parse_xdp_frames, values, STOP};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum RxRingArg {
    V2,
    V3,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum PollArg {
    Auto,
    Busy,
    Block,
}

impl From<PollArg> for EmuPoll {
    fn from(poll: PollArg) -> EmuPoll {
        match poll {
            PollArg::Auto => EmuPoll::Auto,
            PollArg::Busy => EmuPoll::Busy,
            PollArg::Block => EmuPoll::Block,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ModeArg {
    Auto,
    RunToCompletion,
    Pipeline,
}

/// `--flow`'s help, its names from the lists the rule parser takes.
pub(crate) fn flow_help() -> String {
    use latlab_emu::flow::{ETHER_NAMES, PROTOCOL_NAMES};
    format!(
        "A per-flow rule, 'MATCH / SPEC' (repeatable): frames matching every key of MATCH \
         (ether={}|0xNNNN, proto={}|N, src=PREFIX, dst=PREFIX, sport=N[-M], dport=N[-M], \
         port=N[-M]; dir=a-to-b|b-to-a for one direction) get SPEC's impairments, in the words \
         of --a-to-b, instead of the default link's; the first rule that matches takes a \
         frame: 'proto=udp dport=27015 / loss=5% delay=20ms'",
        ETHER_NAMES.join("|"),
        PROTOCOL_NAMES.join("|")
    )
}

/// The impairment flags, built from the knob table: a new knob's flag comes with its row.
#[derive(Debug, Default)]
pub(crate) struct ImpairmentArgs(pub(crate) ImpairmentFlags);

impl clap::FromArgMatches for ImpairmentArgs {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut args = ImpairmentArgs::default();
        args.update_from_arg_matches(matches)?;
        Ok(args)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        let given = KNOBS.iter().flat_map(|k| k.flags).filter_map(|f| {
            let value = matches.get_one::<String>(f.name)?;
            Some((f.name.to_string(), value.clone()))
        });
        self.0 .0 = given.collect();
        Ok(())
    }
}

impl clap::Args for ImpairmentArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.args(KNOBS.iter().flat_map(|k| k.flags).map(|f| {
            let arg = clap::Arg::new(f.name)
                .long(f.name)
                .value_name(f.value_name)
                .help(f.help_text().trim_end_matches('.').to_string())
                .allow_hyphen_values(f.hyphen_values);
            match f.alone {
                // A switch that may also take a value (`--ecn`, `--ecn off`).
                Some(value) => arg.num_args(0..=1).default_missing_value(value),
                None => arg,
            }
        }))
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct EmuArgs {
    /// First interface of the bridge.
    #[arg(long, value_name = "IF", required_unless_present_any = ["attach", "attach_pid", "preset"])]
    iface_a: Option<String>,
    /// Second interface of the bridge.
    #[arg(long, value_name = "IF", required_unless_present_any = ["attach", "attach_pid", "preset"])]
    iface_b: Option<String>,
    /// Splice the link into the running namespace NETNS (as `ip netns` names it) instead of
    /// bridging two interfaces: its veth's peer here (a container's on a Linux bridge, or an
    /// unaddressed one) is moved into a namespace of the emulator's and a new veth takes its
    /// place; side A is the namespace's, so --a-to-b is what it sends and --b-to-a what it
    /// receives. Everything is put back on exit, on Ctrl-C, SIGTERM and SIGHUP, and by
    /// `latlab clean` after kill -9.
    #[arg(long, value_name = "NETNS", conflicts_with_all = ["iface_a", "iface_b", "attach_pid"])]
    attach: Option<String>,
    /// As --attach, for the namespace of process PID (a container's:
    /// `docker inspect -f '{{.State.Pid}}' NAME`).
    #[arg(long, value_name = "PID", conflicts_with_all = ["iface_a", "iface_b"])]
    attach_pid: Option<u32>,
    /// The impairment flags, one per knob of [`KNOBS`] (`--delay`, `--loss`, …).
    #[command(flatten)]
    impairments: ImpairmentArgs,
    /// Impairments of the A→B direction only: "delay=1ms loss=1%" (with --attach: what the
    /// namespace sends, from the container).
    #[arg(long, value_name = "SPEC")]
    a_to_b: Option<String>,
    /// Impairments of the B→A direction only (with --attach: what the namespace receives,
    /// toward the container).
    #[arg(long, value_name = "SPEC")]
    b_to_a: Option<String>,
    #[arg(long, value_name = "NAME", help = latlab_emu::preset::help())]
    preset: Option<String>,
    #[arg(long, value_name = "RULE", help = flow_help())]
    flow: Vec<String>,
    /// A TOML file of impairments: keys at the top apply to both directions, [a_to_b] and
    /// [b_to_a] tables to one, [[flow]] tables (match = "MATCH" and impairment keys) are
    /// per-flow rules, tried after those of --flow.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Largest frame bridged, bytes.
    #[arg(long, default_value_t = 2048, value_name = "BYTES")]
    frame_size: usize,
    /// busy: spin (frames picked up within microseconds, one core at 100%); block: sleep
    /// until a frame arrives or shortly before the next departure, then spin the last
    /// microseconds (no core of its own needed); auto: pinned to a CPU the emulator claims
    /// first (the core plan: gen, echo and serve at --poll auto keep off it) when 2 or more
    /// CPUs are allowed, there asleep between frames at realtime priority (SCHED_FIFO, woken
    /// ahead of anything else on its CPU) where the process may, else spinning; with one
    /// CPU, block (run-to-completion only).
    #[arg(long, default_value = "auto", value_name = "MODE")]
    poll: PollArg,
    /// run-to-completion: one loop for both directions; pipeline: an RX stage and a TX stage
    /// on their own pinned cores joined by lock-free rings (both spinning); auto: pipeline
    /// when 3 or more cores are free and --poll is not block.
    #[arg(long, default_value = "auto", value_name = "MODE")]
    mode: ModeArg,
    /// AF_PACKET receive ring: v2 hands each frame over as it arrives (microseconds); v3
    /// batches frames into blocks retired by a 1 ms timer (fewer wake-ups at high rates, up to
    /// a millisecond late at low ones).
    #[arg(long, default_value = "v2", value_name = "RING")]
    rx_ring: RxRingArg,
    /// packet: AF_PACKET rings beside the kernel stack; xdp: AF_XDP, every frame of both
    /// interfaces taken before the kernel stack by an XDP program (root; run to completion).
    #[arg(long, default_value = "packet", value_name = "IO", value_parser = values::frame_io())]
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
    /// Serve an HTTP API on ADDR (127.0.0.1:9100) while running: GET /conditions,
    /// PUT /conditions/a-to-b or /conditions/b-to-a with a body such as "delay=5ms loss=1%"
    /// (the keys named change, the others keep their values), GET /metrics (Prometheus).
    /// Loopback only, unless --api-public; not with --mode pipeline.
    #[arg(long, value_name = "ADDR")]
    api: Option<std::net::SocketAddr>,
    /// Let --api listen on an address other than loopback (anyone who reaches it can change
    /// the link).
    #[arg(long, requires = "api")]
    api_public: bool,
    /// Serve the live control panel in a browser on ADDR (--ui alone: 127.0.0.1:9200): both
    /// directions' conditions as controls, presets, pull the cable, lag spike, outage, live
    /// charts and the change log. Its address, with the run's token, is printed at start.
    /// Loopback only, unless --ui-public; not with --mode pipeline.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = latlab_ui::DEFAULT_ADDR)]
    ui: Option<std::net::SocketAddr>,
    /// Let --ui listen on an address other than loopback (anyone who reaches it and has the
    /// token can change the link).
    #[arg(long, requires = "ui")]
    ui_public: bool,
    /// Write what left each side to this pcapng file (Wireshark, tshark): one interface per
    /// side, each frame stamped with its departure (ns), its arrival and intended departure
    /// in the packet's comment. Written by a thread of its own; frames its ring had no room
    /// for are counted in --json as pcap_dropped. Not with --mode pipeline.
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Write every frame's fate to this fate file (direction, flow, position, arrival, and
    /// the transit or the drop cause; `latlab fates FILE` reads it). Written by a thread of
    /// its own, whole or absent. Not with --mode pipeline, --aqm or --trace.
    #[arg(long, value_name = "FILE")]
    record_fates: Option<PathBuf>,
    /// Give the frames the fates recorded in this fate file, by direction, flow and position
    /// in the flow; frames beyond the record are the model's (reported). With
    /// --record-fates, records what was applied.
    #[arg(long, value_name = "FILE")]
    replay_fates: Option<PathBuf>,
}

impl EmuArgs {
    /// The checked options these flags make.
    fn options(self) -> Result<EmuOptions> {
        let sources = LinkSources {
            preset: self.preset,
            config: self.config,
            flags: self.impairments.0,
            frame_size: self.frame_size,
            a_to_b: self.a_to_b,
            b_to_a: self.b_to_a,
            flows: self.flow,
        };
        let mut options = EmuOptions::new(
            self.iface_a.unwrap_or_default(),
            self.iface_b.unwrap_or_default(),
            &sources,
        )?;
        options.attach = match (self.attach, self.attach_pid) {
            (Some(name), _) => Some(Target::Named(name)),
            (None, Some(pid)) => Some(Target::Pid(pid)),
            (None, None) => None,
        };
        options.poll = self.poll.into();
        options.mode = match self.mode {
            ModeArg::Auto => EmuMode::Auto,
            ModeArg::RunToCompletion => EmuMode::RunToCompletion,
            ModeArg::Pipeline => EmuMode::Pipeline,
        };
        options.rx_ring = match self.rx_ring {
            RxRingArg::V2 => RxRing::V2,
            RxRingArg::V3 => RxRing::V3,
        };
        options.io = self.io;
        options.xdp_frames = self.xdp_frames;
        options.duration = self.duration;
        options.json = self.json;
        options.api = self.api;
        options.api_public = self.api_public;
        options.ui = self.ui;
        options.ui_public = self.ui_public;
        options.pcap = self.pcap;
        options.record_fates = self.record_fates;
        if let Some(path) = &self.replay_fates {
            options.replay_fates_from(path)?;
        }
        options.check()?;
        Ok(options)
    }
}

pub(crate) fn run(a: EmuArgs) -> Result<()> {
    if a.preset.as_deref() == Some("list") {
        out!("{}", latlab_emu::preset::list());
        return Ok(());
    }
    let bridged = (a.iface_a.is_some() && a.iface_b.is_some())
        || a.attach.is_some()
        || a.attach_pid.is_some();
    if !bridged {
        anyhow::bail!(CommandError::Usage(
            "--iface-a and --iface-b (or --attach NETNS, --attach-pid PID) are required: \
             the bridge needs its two sides"
                .into()
        ));
    }
    let options = a.options()?;
    if options.attach.is_some() {
        // A splice left by a run that ended is put back before this one looks.
        crate::clean::stale_namespaces();
    }
    let report = latlab_emu::run(&options, &STOP, &mut Terminal::new())?;
    outln!("{}", report.text());
    Ok(())
}
