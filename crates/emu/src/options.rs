//! `latlab emu`'s options: how the bridge is laid out and waits, and everything the command
//! takes, checked before anything runs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use latlab_engine::PollMode;
use latlab_link::{Flows, LinkConfig};

use super::attach;
use super::config::{self, LinkSources};
use super::RxRing;
use latlab_lab::command::{CommandError, Io};
use latlab_lab::cores::PollChoice;

/// How the AF_PACKET bridge is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EmuMode {
    /// The pipeline when 3 or more cores are free, else one loop.
    #[default]
    Auto,
    /// One loop for both directions.
    RunToCompletion,
    /// An RX stage and a TX stage on their own pinned cores, joined by lock-free rings.
    Pipeline,
}

/// How the run-to-completion loop waits for frames and departures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EmuPoll {
    /// As the core plan says ([`latlab_lab::cores`]): pinned on a CPU of its own, claimed first,
    /// when two or more CPUs are allowed, and there asleep between frames in `SCHED_FIFO`
    /// where the process may (else spinning); with one CPU, sleep; without the plan's
    /// claims, spin only with [`EmuPoll::SPIN_CPUS`] or more.
    #[default]
    Auto,
    /// Spin: frames picked up within a microsecond, one core at 100%.
    Busy,
    /// Sleep until a frame arrives or shortly before the next departure, then spin the last
    /// stretch: no core of its own needed.
    Block,
}

impl EmuPoll {
    /// The CPUs [`EmuPoll::Auto`] needs before it spins: one for the emulator, and two for
    /// what sends and answers through it.
    pub const SPIN_CPUS: usize = 3;

    /// The core plan's name for this choice.
    pub fn choice(self) -> PollChoice {
        match self {
            EmuPoll::Auto => PollChoice::Auto,
            EmuPoll::Busy => PollChoice::Busy,
            EmuPoll::Block => PollChoice::Block,
        }
    }

    /// The wait of a loop allowed `cpus` CPUs when no core plan is at hand (the studies'
    /// bridges, which give the cores out themselves).
    pub fn resolve(self, cpus: usize) -> PollMode {
        match self {
            EmuPoll::Busy => PollMode::Busy,
            EmuPoll::Block => PollMode::Block,
            EmuPoll::Auto if cpus >= EmuPoll::SPIN_CPUS => PollMode::Busy,
            EmuPoll::Auto => PollMode::Block,
        }
    }
}

/// Everything `latlab emu` takes, checked.
#[derive(Clone, Debug)]
pub struct EmuOptions {
    /// First interface of the bridge (unused with [`EmuOptions::attach`]).
    pub iface_a: String,
    /// Second interface of the bridge (unused with [`EmuOptions::attach`]).
    pub iface_b: String,
    /// Splice the link into this namespace's veth instead ([`attach`]): side A is the
    /// namespace's (the container's), side B the bridge's.
    pub attach: Option<attach::Target>,
    /// The namespace both interfaces are in, where their sockets are opened (`None`: this
    /// one). The API and the files stay in this one.
    pub netns: Option<String>,
    /// The A→B links, validated: the default and the per-flow rules (`--flow`).
    pub a_to_b: Flows,
    /// The B→A links, validated.
    pub b_to_a: Flows,
    /// Largest frame bridged, bytes.
    pub frame_size: usize,
    /// Spin or sleep (run to completion only).
    pub poll: EmuPoll,
    /// One loop or a pipeline.
    pub mode: EmuMode,
    /// The AF_PACKET receive ring.
    pub rx_ring: RxRing,
    /// [`Io::Packet`] (AF_PACKET rings beside the kernel stack) or [`Io::Xdp`] (every frame of
    /// both interfaces taken before the kernel stack; run to completion only).
    pub io: Io,
    /// AF_XDP UMEM frames per interface, a power of two from 64 to 1048576.
    pub xdp_frames: u32,
    /// Stop after this long (else when the stop flag is raised).
    pub duration: Option<Duration>,
    /// Write the counters by cause and the release-error histograms to this JSON file.
    pub json: Option<PathBuf>,
    /// Serve the HTTP API ([`crate::api`]) on this address (run to completion only).
    pub api: Option<SocketAddr>,
    /// Let the API listen on an address other than loopback.
    pub api_public: bool,
    /// Serve the control panel ([`crate::panel`]) on this address (run to completion only).
    pub ui: Option<SocketAddr>,
    /// Let the panel listen on an address other than loopback.
    pub ui_public: bool,
    /// The command the panel names (`latlab emu`; `latlab run` and `latlab shell` call the
    /// two directions up and down).
    pub ui_title: &'static str,
    /// Write what left each side to this pcapng file ([`crate::pcap`]; run to completion
    /// only).
    pub pcap: Option<PathBuf>,
    /// Write every frame's fate to this fate file ([`crate::fates`]; run to completion only).
    pub record_fates: Option<PathBuf>,
    /// Give the frames the fates of this fate file, read and checked ([`crate::fates`]; run
    /// to completion only).
    pub replay_fates: Option<crate::fates::ReplayFates>,
}

impl EmuOptions {
    /// Reads the fate file at `path` for `--replay-fates` and checks it against this run's
    /// directions and rules (set them first).
    pub fn replay_fates_from(&mut self, path: &std::path::Path) -> Result<(), CommandError> {
        let directions = [&self.a_to_b, &self.b_to_a];
        self.replay_fates = Some(crate::fates::ReplayFates::load(
            "--replay-fates",
            path,
            directions,
        )?);
        Ok(())
    }

    /// Options for bridging `iface_a` and `iface_b` with the links `sources` make (file,
    /// flags, per-direction specs), and defaults for everything else; checked.
    pub fn new(
        iface_a: String,
        iface_b: String,
        sources: &LinkSources,
    ) -> Result<EmuOptions, CommandError> {
        let (a_to_b, b_to_a) = config::links(sources).map_err(CommandError::Usage)?;
        Ok(EmuOptions {
            iface_a,
            iface_b,
            attach: None,
            netns: None,
            a_to_b,
            b_to_a,
            frame_size: sources.frame_size,
            poll: EmuPoll::Auto,
            mode: EmuMode::Auto,
            rx_ring: RxRing::V2,
            io: Io::Packet,
            xdp_frames: 4096,
            duration: None,
            json: None,
            api: None,
            api_public: false,
            ui: None,
            ui_public: false,
            ui_title: "latlab emu",
            pcap: None,
            record_fates: None,
            replay_fates: None,
        })
    }

    /// Checks that the flags go together (two different interfaces; AF_XDP runs to
    /// completion, on frames of at most 3840 bytes; fates are recorded and replayed by the
    /// one loop, on links without a bottleneck) and that the `--json` file can be written,
    /// before anything runs.
    pub fn check(&self) -> Result<(), CommandError> {
        if !matches!(self.io, Io::Packet | Io::Xdp) {
            return Err(CommandError::Options(format!(
                "--io {}: the emulator bridges frames over --io packet or xdp",
                self.io
            )));
        }
        if self.io == Io::Xdp {
            if self.mode == EmuMode::Pipeline {
                return Err(CommandError::Options(
                    "--mode pipeline needs --io packet: AF_XDP gives one socket per interface \
                     queue, which the pipeline's RX and TX stages cannot share; use --mode \
                     run-to-completion"
                        .into(),
                ));
            }
            if self.frame_size + 256 > 4096 {
                return Err(CommandError::Options(format!(
                    "--frame-size {} is too large for --io xdp (at most 3840 bytes)",
                    self.frame_size
                )));
            }
        }
        if self.attach.is_none() && self.iface_a == self.iface_b {
            return Err(CommandError::Usage(format!(
                "--iface-a and --iface-b are both {}: the bridge joins two different interfaces",
                self.iface_a
            )));
        }
        if let Some(path) = &self.json {
            latlab_lab::command::check_writable(path)?;
        }
        if let Some(path) = &self.pcap {
            latlab_lab::command::check_writable(path)?;
            if self.mode == EmuMode::Pipeline {
                return Err(CommandError::Usage(
                    "--pcap does not work with --mode pipeline: its TX stage keeps no copies; \
                     use --mode run-to-completion (or auto)"
                        .into(),
                ));
            }
        }
        let replay = self.replay_fates.as_ref().map(|r| r.path.as_path());
        for (flag, path) in [
            ("--record-fates", self.record_fates.as_deref()),
            ("--replay-fates", replay),
        ] {
            let Some(path) = path else { continue };
            if flag == "--record-fates" {
                latlab_lab::command::check_writable(path)?;
            }
            if self.mode == EmuMode::Pipeline {
                return Err(CommandError::Usage(format!(
                    "{flag} does not work with --mode pipeline: its stages keep no fates; use \
                     --mode run-to-completion (or auto)"
                )));
            }
            let directions = [("A→B", &self.a_to_b), ("B→A", &self.b_to_a)];
            for (name, flows) in directions {
                let configs = flows
                    .rules
                    .iter()
                    .map(|r| &r.config)
                    .chain([&flows.default]);
                if configs.into_iter().any(LinkConfig::has_bottleneck) {
                    return Err(CommandError::Usage(format!(
                        "{flag} {}: the {name} link has a queue discipline (--aqm) or a delivery \
                         trace, which decide fates after arrival; fates are recorded and replayed \
                         without them",
                        path.display()
                    )));
                }
            }
        }
        for (flag, addr, public) in [
            ("api", self.api, self.api_public),
            ("ui", self.ui, self.ui_public),
        ] {
            let Some(addr) = addr else { continue };
            if !addr.ip().is_loopback() && !public {
                return Err(CommandError::Usage(format!(
                    "--{flag} {addr}: not a loopback address; anyone who reaches it could change \
                     the link, so add --{flag}-public to serve it there"
                )));
            }
            if self.mode == EmuMode::Pipeline {
                return Err(CommandError::Usage(format!(
                    "--{flag} does not work with --mode pipeline: its stages take no changes while \
                     running; use --mode run-to-completion (or auto)"
                )));
            }
        }
        if self.api.is_some_and(|a| a.port() != 0) && self.api == self.ui {
            return Err(CommandError::Usage(format!(
                "--api and --ui are both {}: give them two ports",
                self.api.map_or(String::new(), |a| a.to_string())
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_spins_only_with_three_cpus_or_more() {
        for (cpus, poll) in [
            (1, PollMode::Block),
            (2, PollMode::Block),
            (3, PollMode::Busy),
            (8, PollMode::Busy),
        ] {
            assert_eq!(EmuPoll::Auto.resolve(cpus), poll, "{cpus} CPUs");
        }
        assert_eq!(EmuPoll::Busy.resolve(1), PollMode::Busy);
        assert_eq!(EmuPoll::Block.resolve(8), PollMode::Block);
    }
}
