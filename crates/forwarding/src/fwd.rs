//! `latlab fwd`: the L2 forwarder between two interfaces (AF_PACKET or AF_XDP), run to
//! completion on one pinned core, from checked options to a report whose `--json` file is
//! written before it is returned: counters by cause per direction and where the cycles went
//! (cycles per packet in receiving, processing, transmitting and buffer management, checked
//! against the whole run's cycles per packet), typed as [`FwdJson`].

use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use latlab_engine::forwarder::{self, ForwarderConfig, ForwarderLive, ForwarderReport};
use latlab_engine::Stop;
use latlab_lab::middle::PortSettings;

pub use latlab_engine::forwarder::FwdPoll;

use latlab_lab::command::{watched, write_json, CommandError, Io, View};

mod json;
pub mod redirect;
pub use json::{FwdDirectionJson, FwdDropsJson, FwdJson};

/// Largest `--batch`.
pub const MAX_BATCH: usize = 4096;

/// Everything `latlab fwd` takes, checked.
#[derive(Clone, Debug)]
pub struct FwdOptions {
    /// First interface.
    pub iface_a: String,
    /// Second interface.
    pub iface_b: String,
    /// [`Io::Packet`] (AF_PACKET TPACKET_V2 rings) or [`Io::Xdp`] (AF_XDP, every frame of
    /// both interfaces taken by an XDP program).
    pub io: Io,
    /// Frames per receive call at most, 1..=[`MAX_BATCH`].
    pub batch: usize,
    /// Spin, block, or a poll rate.
    pub poll: FwdPoll,
    /// The core the loop is pinned to (default: the last this process may run on).
    pub cpu: Option<usize>,
    /// Stop after this long (else when the stop flag is raised).
    pub duration: Option<Duration>,
    /// Write the counters and the cycle accounting to this JSON file.
    pub json: Option<PathBuf>,
}

impl FwdOptions {
    /// Forwarding between `iface_a` and `iface_b` over AF_PACKET, batches of 32, busy polling.
    pub fn new(iface_a: String, iface_b: String) -> FwdOptions {
        FwdOptions {
            iface_a,
            iface_b,
            io: Io::Packet,
            batch: 32,
            poll: FwdPoll::Busy,
            cpu: None,
            duration: None,
            json: None,
        }
    }

    /// Checks that the flags go together and that the `--json` file can be written, before
    /// anything runs.
    pub fn check(&self) -> Result<(), CommandError> {
        if !matches!(self.io, Io::Packet | Io::Xdp | Io::XdpRedirect) {
            return Err(CommandError::Usage(format!(
                "--io {}: the forwarder moves frames over --io packet, xdp or xdp-redirect",
                self.io
            )));
        }
        if !(1..=MAX_BATCH).contains(&self.batch) {
            return Err(CommandError::Usage(format!(
                "--batch {}: must be 1 to {MAX_BATCH}",
                self.batch
            )));
        }
        if self.poll == FwdPoll::Rate(0) {
            return Err(CommandError::Usage(
                "--poll rate:0: at least one poll per second".into(),
            ));
        }
        if self.iface_a == self.iface_b {
            return Err(CommandError::Usage(format!(
                "--iface-a and --iface-b are both {}: the forwarder joins two different interfaces",
                self.iface_a
            )));
        }
        if let Some(cpu) = self.cpu {
            let allowed = latlab_io::cpu::allowed_cpus().unwrap_or_default();
            if !allowed.contains(&cpu) {
                return Err(CommandError::Usage(format!(
                    "--cpu {cpu}: not a CPU this process may run on ({allowed:?})"
                )));
            }
        }
        if let Some(path) = &self.json {
            latlab_lab::command::check_writable(path)?;
        }
        Ok(())
    }
}

/// What a forwarder run did; its JSON file, if asked for, is already written.
#[derive(Clone, Debug)]
pub struct FwdReport {
    /// Counters and cycles.
    pub report: ForwarderReport,
    /// The core it ran on.
    pub cpu: Option<usize>,
}

impl FwdReport {
    /// The lines printed at the end of a run.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (name, d) in [("A→B", &self.report.a_to_b), ("B→A", &self.report.b_to_a)] {
            out.push_str(&format!(
                "{name}: received {}, forwarded {}, dropped: tx ring full {}, too long {}, runts \
                 {}; kernel drops {}\n",
                d.received, d.forwarded, d.tx_full, d.too_long, d.runts, d.kernel_drops
            ));
        }
        let c = &self.report.cycles;
        let s = c.per_packet;
        out.push_str(&format!(
            "cycles per packet: rx {:.0}, processing {:.0}, tx {:.0}, buffers {:.0} = {:.0}; \
             measured {:.0} (timer {:.0} taken out: {:.0}), accounted {:.0}%; empty polls {:.0}, \
             waiting {:.0}, loop {:.0} (with them {:.0}%); {:.0} packets/s, batch {:.1}\n",
            s.rx,
            s.processing,
            s.tx,
            s.buffers,
            c.steps_total,
            c.measured,
            c.timer,
            c.measured_untimed,
            100.0 * c.accounted,
            c.empty_polls,
            c.waiting,
            c.overhead,
            100.0 * c.accounted_with_idle,
            c.packets_per_second,
            c.mean_batch,
        ));
        out.push_str(&format!("{}\n", self.report.host_stalls.report().line()));
        out
    }
}

/// Opens the sockets `options` name, forwards until `stop` is raised or the duration is over,
/// writes the JSON file and returns the report.
pub fn run(
    options: &FwdOptions,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<FwdReport, CommandError> {
    options.check()?;
    if options.io == Io::XdpRedirect {
        return Err(CommandError::Options(
            "--io xdp-redirect runs no loop here: it is fwd::redirect::run".into(),
        ));
    }
    let cpu = options.cpu.or_else(|| {
        latlab_io::cpu::allowed_cpus()
            .ok()
            .and_then(|c| c.last().copied())
    });
    let config = ForwarderConfig {
        batch: options.batch,
        poll: options.poll,
    };
    let live = ForwarderLive::default();
    let line = |kind: &str| {
        format!(
            "latlab fwd: forwarding {} ↔ {} over {kind}, batch {}, poll {}, on CPU {}; Ctrl-C \
             stops",
            options.iface_a,
            options.iface_b,
            options.batch,
            options.poll,
            cpu.map_or("any".to_string(), |c| c.to_string())
        )
    };
    let ports = PortSettings::forwarder();
    let report = match options.io {
        Io::Xdp => {
            let open = |flag: &str, ifname: &str| {
                ports
                    .open_xdp(ifname)
                    .map_err(CommandError::setup(format!("{flag} {ifname}")))
            };
            let mut a = open("--iface-a", &options.iface_a)?;
            let mut b = open("--iface-b", &options.iface_b)?;
            view.started(&line("AF_XDP"));
            watched_run(options, cpu, stop, view, &live, || {
                forwarder::run(&mut a, &mut b, config, stop, &live)
            })?
        }
        _ => {
            let open = |flag: &str, ifname: &str| {
                ports
                    .open_packet(ifname)
                    .map_err(CommandError::setup(format!("{flag} {ifname}")))
            };
            let mut a = open("--iface-a", &options.iface_a)?;
            let mut b = open("--iface-b", &options.iface_b)?;
            view.started(&line("AF_PACKET"));
            watched_run(options, cpu, stop, view, &live, || {
                forwarder::run(&mut a, &mut b, config, stop, &live)
            })?
        }
    };
    let report = FwdReport { report, cpu };
    if let Some(path) = &options.json {
        write_json(path, &FwdJson::new(options, &report).to_value())?;
    }
    Ok(report)
}

/// Runs `forward` on this thread, pinned to `cpu`, while `view` shows the live counters.
fn watched_run(
    options: &FwdOptions,
    cpu: Option<usize>,
    stop: &Stop,
    view: &mut dyn View,
    live: &ForwarderLive,
    forward: impl FnOnce() -> std::io::Result<ForwarderReport>,
) -> Result<ForwarderReport, CommandError> {
    if let Some(cpu) = cpu {
        latlab_io::cpu::pin_current_thread(cpu)
            .map_err(CommandError::setup(format!("--cpu {cpu}")))?;
    }
    watched(options.duration, stop, view, || counters(live), forward).map_err(|source| {
        CommandError::Run {
            engine: "forwarder",
            source,
        }
    })
}

/// The live counters line.
fn counters(live: &ForwarderLive) -> String {
    let (x, y) = (&live.a_to_b, &live.b_to_a);
    format!(
        "A→B in {} out {} dropped {}   B→A in {} out {} dropped {}",
        x.received.load(Relaxed),
        x.forwarded.load(Relaxed),
        x.dropped.load(Relaxed),
        y.received.load(Relaxed),
        y.forwarded.load(Relaxed),
        y.dropped.load(Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_that_do_not_go_together_name_themselves_before_anything_runs() {
        let base = FwdOptions::new("veth-a".into(), "veth-b".into());
        let err = |o: FwdOptions| o.check().unwrap_err().to_string();
        let same = FwdOptions::new("lo".into(), "lo".into());
        assert!(err(same).starts_with("--iface-a and --iface-b"));
        assert!(err(FwdOptions {
            batch: 0,
            ..base.clone()
        })
        .starts_with("--batch 0"));
        assert!(err(FwdOptions {
            batch: MAX_BATCH + 1,
            ..base.clone()
        })
        .starts_with("--batch"));
        assert!(err(FwdOptions {
            io: Io::Socket,
            ..base.clone()
        })
        .starts_with("--io socket"));
        assert!(err(FwdOptions {
            cpu: Some(100_000),
            ..base.clone()
        })
        .starts_with("--cpu 100000"));
        let missing = FwdOptions {
            json: Some("/no/such/folder/fwd.json".into()),
            ..base.clone()
        };
        assert!(err(missing).contains("does not exist"));
        assert!(base.check().is_ok());
    }
}
