//! latlab-engine: the thin loops that bind latlab's sans-IO cores to sockets.
//!
//! - [`generator`]: sends probes on an open-loop schedule and meters the responses, in one
//!   loop on one core or split into a send thread and a receive thread on two pinned cores.
//! - [`reflector`]: the echo responder; reflects every valid probe back to its sender, stamped
//!   with its own receive and transmit times, and counts and drops everything else.
//! - [`game`]: the model game server's loop and the clients that measure it.
//! - [`emulator`]: the link emulator's bridge; [`blaster`]: raw frames at a fixed rate.
//! - [`forwarder`]: the L2 forwarder (both directions, no lookup) with its TSC cycle
//!   accounting per step.
//! - [`wait`]: how a blocking loop keeps a deadline without a core of its own (sleep, then
//!   spin a stretch learned from its own wake-ups).
//!
//! The generator, the reflector and the game server are written once, generic over a
//! [`latlab_io::port::DatagramPort`] (kernel UDP sockets, one datagram per call or in batches,
//! or an AF_XDP endpoint); the emulator, the forwarder and the blaster over a
//! [`latlab_io::port::FramePort`] (AF_PACKET or AF_XDP). Each is monomorphized per port: no
//! dynamic dispatch per packet.
//!
//! Engines own no logic of their own: a generator run's start time, schedule, meter, interval
//! log, progress and stop rule come from [`latlab_probe::Run`]; the game clients are the same
//! generator loop with [`latlab_probe::FanoutMeter`]. They poll in batches, stop when a shared
//! flag says so, and report progress through a callback.
#![forbid(unsafe_code)]

pub mod blaster;
pub mod emulator;
pub mod forwarder;
pub mod game;
pub mod generator;
pub mod reflector;
pub mod stalls;
pub mod wait;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use latlab_io::port::{SendFailure, SendFailures};

/// How an engine waits for packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PollMode {
    /// Spin on non-blocking batch calls: lowest latency, one core at 100%.
    #[default]
    Busy,
    /// Sleep in `ppoll` until a packet arrives or shortly before the next deadline (1 ns
    /// timer slack), then spin the last stretch, sized by how late the loop's sleeps woke
    /// ([`wait::SleepSpin`]).
    Block,
}

impl std::str::FromStr for PollMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PollMode::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                let names = PollMode::ALL.map(PollMode::name);
                format!("unknown poll mode {s:?}: expected {}", names.join(" or "))
            })
    }
}

impl PollMode {
    /// Every mode, in the order the command line lists them (its `--poll` values).
    pub const ALL: [PollMode; 2] = [PollMode::Busy, PollMode::Block];

    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            PollMode::Busy => "busy",
            PollMode::Block => "block",
        }
    }
}

/// A [`PollMode`] another thread may change while an engine runs: how a spinning loop gives
/// its CPU to an emulator that claimed it and goes on blocking (`latlab_lab::cores`). The
/// loops that take one read it once a turn (one relaxed load); clones share the mode.
#[derive(Clone, Debug, Default)]
pub struct PollSwitch(Arc<AtomicU8>);

impl PollSwitch {
    /// A switch set to `mode`.
    pub fn new(mode: PollMode) -> PollSwitch {
        let switch = PollSwitch::default();
        switch.set(mode);
        switch
    }

    /// The mode the loop waits in now.
    #[inline]
    pub fn mode(&self) -> PollMode {
        match self.0.load(Ordering::Relaxed) {
            0 => PollMode::Busy,
            _ => PollMode::Block,
        }
    }

    /// Changes the mode; the loop follows at its next turn.
    pub fn set(&self, mode: PollMode) {
        self.0
            .store(u8::from(mode == PollMode::Block), Ordering::Relaxed);
    }
}

/// The mode a loop waits in: `switch`'s when it has one, else the `fixed` one it was given.
#[inline]
pub(crate) fn poll_now(fixed: PollMode, switch: Option<&PollSwitch>) -> PollMode {
    switch.map_or(fixed, PollSwitch::mode)
}

/// A flag that tells a running engine to stop (set from a Ctrl-C handler or another thread).
#[derive(Debug, Default)]
pub struct Stop(AtomicBool);

impl Stop {
    /// A flag not yet raised.
    pub const fn new() -> Stop {
        Stop(AtomicBool::new(false))
    }

    /// Raises the flag.
    pub fn raise(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether the flag was raised.
    pub fn is_raised(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Datagrams an engine could not send, by cause ([`SendFailure`]), counted while it runs and
/// readable from other threads: a datagram its port reported unsent is counted here and
/// dropped, and the engine goes on.
#[derive(Debug, Default)]
pub struct LiveSendFailures {
    counts: [AtomicU64; SendFailure::ALL.len()],
}

impl LiveSendFailures {
    /// Counts one datagram not sent for `failure`.
    #[inline]
    pub fn count(&self, failure: SendFailure) {
        self.counts[failure.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub fn snapshot(&self) -> SendFailures {
        let mut out = SendFailures::default();
        for failure in SendFailure::ALL {
            out.add(
                failure,
                self.counts[failure.index()].load(Ordering::Relaxed),
            );
        }
        out
    }
}
