//! `latlab emu` bridging the lab's emulator namespace while a measurement runs (the
//! emulator study's points and the demo's emulated-link run).

use std::io;

use latlab_engine::PollMode;
use latlab_io::Io;
use latlab_link::LinkConfig;

use latlab_emu::report::EmuJson;
use latlab_emu::EmuPoll;
use latlab_lab::middle::{
    self, EmuSettings, FrameIo, Middle, MiddleKind, MiddleReport, MiddleSettings, Placement,
    PortSettings,
};
use latlab_lab::topology::ClientEmuServer;

/// Runs `f` while `latlab emu` bridges the lab's emulator namespace (run to completion, busy
/// polling) over `io` (packet: AF_PACKET rings; xdp: AF_XDP sockets fed every frame), then
/// stops the bridge; returns `f`'s result and the bridge's report (`latlab emu --json`'s, each
/// direction's losses by cause with it). An emulator that cannot open its sockets fails before
/// `f` runs.
pub fn with_emulator<T, E: From<io::Error>>(
    lab: &ClientEmuServer,
    io: Io,
    a_to_b: LinkConfig,
    b_to_a: LinkConfig,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<(T, EmuJson), E> {
    let bridge = Bridge {
        io,
        poll: PollMode::Busy,
        cpu: None,
        timer_slack_ns: None,
    };
    with_bridge(lab, bridge, a_to_b, b_to_a, f)
}

/// How the bridge runs: over which I/O, polling how, pinned to which CPU (`None`: where the
/// scheduler puts it), with which timer slack (`None`: the thread's default).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bridge {
    pub(crate) io: Io,
    pub(crate) poll: PollMode,
    pub(crate) cpu: Option<usize>,
    pub(crate) timer_slack_ns: Option<u64>,
}

/// How the lab gives its cores out while it measures latency through the bridge, so that it
/// measures the emulated link and not its own contention: the emulator spinning on a CPU of
/// its own (the last one allowed), the generator and the reflector, both blocking, together
/// on another (the last of the rest). Only the emulator spins, so no two busy loops take
/// turns on a core; the ends' receive work runs on their own CPU (a veth receives on the
/// sender's core). A spinning emulator never waits for a wake-up, which on a guest takes tens
/// of µs (a sleeping vCPU is halted). On one CPU nothing is pinned and the emulator sleeps until due
/// and spins the last stretch, as `latlab emu --poll auto` does when cores are short.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CorePlan {
    /// The emulator's CPU.
    pub(crate) emulator: Option<usize>,
    /// The generator's and the reflector's CPU.
    pub(crate) ends: Option<usize>,
    /// How the emulator waits.
    pub(crate) poll: PollMode,
}

impl CorePlan {
    /// The plan for a process allowed `cpus`.
    pub(crate) fn for_cpus(cpus: &[usize]) -> CorePlan {
        match cpus {
            [.., ends, emulator] => CorePlan {
                emulator: Some(*emulator),
                ends: Some(*ends),
                poll: PollMode::Busy,
            },
            _ => CorePlan {
                emulator: None,
                ends: None,
                poll: EmuPoll::Auto.resolve(cpus.len()),
            },
        }
    }

    /// The plan for the CPUs this process is allowed.
    pub(crate) fn allowed() -> CorePlan {
        CorePlan::for_cpus(&latlab_io::cpu::allowed_cpus().unwrap_or_default())
    }

    /// The bridge over `io` as the plan runs it (1 ns timer slack).
    pub(crate) fn bridge(self, io: Io) -> Bridge {
        Bridge {
            io,
            poll: self.poll,
            cpu: self.emulator,
            timer_slack_ns: Some(1),
        }
    }

    /// `emulator on CPU 1, spinning; generator and reflector on CPU 0, blocking`.
    pub(crate) fn describe(self) -> String {
        let on = |cpu: Option<usize>| cpu.map_or("unpinned".to_string(), |c| format!("on CPU {c}"));
        let waits = match self.poll {
            PollMode::Busy => "spinning",
            PollMode::Block => "sleeping until due, then spinning the last stretch",
        };
        format!(
            "emulator {}, {waits}; generator and reflector {}, blocking",
            on(self.emulator),
            on(self.ends)
        )
    }
}

/// [`with_emulator`] with the bridge run as `bridge` says: the lab's emulator middle
/// ([`latlab_lab::middle::start`]) with these links, polling and placement.
pub(crate) fn with_bridge<T, E: From<io::Error>>(
    lab: &ClientEmuServer,
    bridge: Bridge,
    a_to_b: LinkConfig,
    b_to_a: LinkConfig,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<(T, EmuJson), E> {
    let Bridge {
        io,
        poll,
        cpu,
        timer_slack_ns,
    } = bridge;
    let frame_io = FrameIo::of(io).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the emulator bridges frames over --io packet or xdp, not {io}"),
        )
    })?;
    let settings = MiddleSettings {
        emu: EmuSettings {
            a_to_b: a_to_b.into(),
            b_to_a: b_to_a.into(),
            poll: Some(poll),
        },
        ..MiddleSettings::default()
    };
    let placement = Placement {
        cpu,
        ends_cpu: None,
        steer: false,
        timer_slack_ns,
    };
    let middle = Middle::of(MiddleKind::Emu, frame_io);
    let running = middle::start(lab, middle, &settings, &placement)
        .map_err(|e| io::Error::other(e.to_string()))?;
    let out = f();
    let report = match running.stop()? {
        Some(MiddleReport::Emu(report, counts)) => EmuJson::with_interfaces(&report, counts),
        _ => return Err(io::Error::other("the emulator gave no report").into()),
    };
    Ok((out?, report))
}

/// Whether the bridge's AF_XDP sockets can be opened in the lab (they are closed again).
pub(super) fn xdp_bridge_opens(lab: &ClientEmuServer) -> io::Result<()> {
    latlab_io::netns::run_in(lab.emu.name(), || -> io::Result<()> {
        let ends = (ClientEmuServer::EMU_A, ClientEmuServer::EMU_B);
        PortSettings::lab_emulator().open_pair(FrameIo::Xdp, ends)?;
        Ok(())
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_emulator_spins_on_the_last_cpu_and_sleeps_only_when_alone() {
        let two = CorePlan::for_cpus(&[0, 1]);
        assert_eq!(
            two,
            CorePlan {
                emulator: Some(1),
                ends: Some(0),
                poll: PollMode::Busy
            }
        );
        assert_eq!(
            two.describe(),
            "emulator on CPU 1, spinning; generator and reflector on CPU 0, blocking"
        );
        let four = CorePlan::for_cpus(&[2, 3, 5, 7]);
        assert_eq!(
            (four.emulator, four.ends, four.poll),
            (Some(7), Some(5), PollMode::Busy)
        );
        let one = CorePlan::for_cpus(&[3]);
        assert_eq!(
            (one.emulator, one.ends, one.poll),
            (None, None, PollMode::Block)
        );
        assert_eq!(
            one.describe(),
            "emulator unpinned, sleeping until due, then spinning the last stretch; \
             generator and reflector unpinned, blocking"
        );
        let bridge = two.bridge(Io::Packet);
        assert_eq!(
            (bridge.cpu, bridge.poll, bridge.timer_slack_ns),
            (Some(1), PollMode::Busy, Some(1))
        );
    }
}
