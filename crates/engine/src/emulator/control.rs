//! Changing and watching a running emulator from another thread (an HTTP API, a script).
//!
//! The frame path pays one relaxed atomic load per loop iteration ([`EmulatorControl`]'s
//! flags) and nothing else: no lock is taken while frames flow. When the flags say so, between
//! two frames, the engine
//!
//! - takes the new link configurations another thread submitted ([`EmulatorControl::submit`])
//!   and hands them to the pipes' `handle_config` (the default pipe of a direction with
//!   per-flow rules; the rules keep theirs): frames already held keep their departure
//!   times and their order, frames arriving from then on get the new conditions; each change
//!   is kept with its time ([`EmulatorControl::changes`]);
//! - begins the events submitted ([`EmulatorControl::submit_event`]: a lag spike, an outage,
//!   a flapping link) on every pipe of the directions named, or ends those in force, and keeps
//!   each with its time ([`EmulatorControl::event_changes`]); the events of both directions,
//!   scheduled and begun, are then copied out ([`EmulatorControl::events`]);
//! - publishes a [`Snapshot`] of its counters, queue depths and release errors, when one was
//!   asked for ([`EmulatorControl::snapshot`]) and the last one is at least
//!   [`PUBLISH_EVERY_NS`] old, so a flood of requests costs the engine at most one copy of its
//!   counters every 50 ms.
//!
//! The locks here are taken by the engine only on those occasions, and held by the other side
//! only to copy a value in or out.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use latlab_link::{Event, EventRecord, FlowPipes, LinkConfig};

use super::DirectionReport;

/// Least time between two snapshots the engine publishes, ns.
pub const PUBLISH_EVERY_NS: u64 = 50_000_000;

/// A configuration change is waiting.
const CHANGE: u8 = 1;
/// A snapshot was asked for.
const PUBLISH: u8 = 2;

/// One direction of the bridge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkDirection {
    /// Frames from interface A to interface B.
    AToB,
    /// Frames from interface B to interface A.
    BToA,
}

impl LinkDirection {
    /// Both directions, A→B first.
    pub const BOTH: [LinkDirection; 2] = [LinkDirection::AToB, LinkDirection::BToA];

    /// The name used in reports, URLs and metric labels: `a_to_b`, `b_to_a`.
    pub fn name(self) -> &'static str {
        match self {
            LinkDirection::AToB => "a_to_b",
            LinkDirection::BToA => "b_to_a",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A configuration change the engine applied (or refused), with its time.
#[derive(Clone, Debug)]
pub struct ConfigChange {
    /// The direction changed.
    pub direction: LinkDirection,
    /// When the engine applied it, ns since the emulator started.
    pub at_ns: u64,
    /// When it applied it, Unix time in ns.
    pub unix_ns: u64,
    /// The configuration in force from then on.
    pub config: LinkConfig,
    /// Why the pipe refused it, if it did (the direction then kept its configuration).
    pub refused: Option<String>,
    /// Who asked for it: `api`, `ui`, `ui: cable pulled`, … (as the submitter named itself).
    pub by: String,
}

/// What one direction had done when a [`Snapshot`] was taken.
#[derive(Clone, Debug)]
pub struct DirectionSnapshot {
    /// The counters so far (`queued_at_exit` is 0: the run goes on), the link's included.
    pub report: DirectionReport,
    /// Frames held by the link (duplicates included).
    pub queued_frames: u64,
    /// Bytes of the frames held.
    pub queued_bytes: u64,
}

/// The engine's counters at one moment, published on request.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// When it was taken, ns since the emulator started.
    pub at_ns: u64,
    /// When the emulator started, on the frames' clock (the origin of the events' times).
    pub start_ns: u64,
    /// Frames from A to B.
    pub a_to_b: DirectionSnapshot,
    /// Frames from B to A.
    pub b_to_a: DirectionSnapshot,
}

/// Configurations waiting for the engine, and how many were submitted in all.
/// An event begun (or the events in force ended) in one direction while the emulator ran,
/// and who asked.
#[derive(Clone, Debug)]
pub struct EventChange {
    /// Which direction.
    pub direction: LinkDirection,
    /// When, ns since the emulator started.
    pub at_ns: u64,
    /// When, in Unix time, ns.
    pub unix_ns: u64,
    /// The event begun; `None` for a release (every event in force ended).
    pub event: Option<Event>,
    /// Events a release ended (0 when it found none in force); 0 for a beginning.
    pub ended: usize,
    /// Who asked (`api`, `ui`).
    pub by: String,
}

/// An event to begin (`None`: release) in the directions marked, and who asked.
type PendingEvent = ([bool; 2], Option<Event>, String);

#[derive(Debug, Default)]
struct Pending {
    configs: [Option<(LinkConfig, String)>; 2],
    events: Vec<PendingEvent>,
    submitted: u64,
}

/// The link between a running emulator and the threads that change and watch it. One lives in
/// every [`super::EmulatorLive`]; without calls from outside, it costs the engine one relaxed
/// load per iteration.
#[derive(Debug, Default)]
pub struct EmulatorControl {
    flags: AtomicU8,
    pending: Mutex<Pending>,
    /// Submissions the engine has taken and applied.
    applied: AtomicU64,
    changes: Mutex<Vec<ConfigChange>>,
    event_changes: Mutex<Vec<EventChange>>,
    /// Both directions' events (scheduled and begun) as of the last change, and the engine's
    /// start, so their times can be read on the frames' clock.
    events: Mutex<(u64, [Vec<EventRecord>; 2])>,
    snapshot: Mutex<Option<Arc<Snapshot>>>,
    /// Snapshots published so far.
    published: AtomicU64,
    /// The tap's end for the engine, until [`super::run`] takes it at its start.
    tap: Mutex<Option<rtrb::Producer<super::TapRecord>>>,
    /// What to do with fates, until [`super::run`] takes it at its start.
    fates: Mutex<Option<super::FateSettings>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl EmulatorControl {
    /// Hands `config` (already checked with [`LinkConfig::validate`]) to the engine for
    /// `direction`; it takes effect between two frames. Returns a ticket for
    /// [`EmulatorControl::wait_applied`]. A later submission for the same direction before the
    /// engine looked replaces this one.
    pub fn submit(&self, direction: LinkDirection, config: LinkConfig) -> u64 {
        self.submit_by(direction, config, "api")
    }

    /// [`EmulatorControl::submit`], the change recorded as made `by` (`ui`, `ui: outage`, …:
    /// [`ConfigChange::by`]).
    pub fn submit_by(&self, direction: LinkDirection, config: LinkConfig, by: &str) -> u64 {
        let mut pending = lock(&self.pending);
        pending.configs[direction.index()] = Some((config, by.to_string()));
        pending.submitted += 1;
        self.flags.fetch_or(CHANGE, Ordering::Release);
        pending.submitted
    }

    /// Hands both directions' configurations (`None`: that direction unchanged) to the engine
    /// under one lock, so that it applies them between the same two frames; recorded as made
    /// `by`. Returns the ticket of the pair.
    pub fn submit_pair(&self, configs: [Option<LinkConfig>; 2], by: &str) -> u64 {
        let mut pending = lock(&self.pending);
        for (slot, config) in pending.configs.iter_mut().zip(configs) {
            if let Some(config) = config {
                *slot = Some((config, by.to_string()));
            }
        }
        pending.submitted += 1;
        self.flags.fetch_or(CHANGE, Ordering::Release);
        pending.submitted
    }

    /// Submits `event` (`None`: end the events in force) for the directions marked in
    /// `directions` (A→B, B→A), as asked `by`; the engine takes it between two frames, with
    /// the configurations submitted. Returns the ticket for [`EmulatorControl::wait_applied`].
    pub fn submit_event(&self, directions: [bool; 2], event: Option<Event>, by: &str) -> u64 {
        let mut pending = lock(&self.pending);
        pending.events.push((directions, event, by.to_string()));
        pending.submitted += 1;
        self.flags.fetch_or(CHANGE, Ordering::Release);
        pending.submitted
    }

    /// The events begun and released while running, in the order applied.
    pub fn event_changes(&self) -> Vec<EventChange> {
        lock(&self.event_changes).clone()
    }

    /// The engine's start (ns on the frames' clock) and both directions' events, scheduled
    /// and begun, with their times on that clock, as of the last change.
    pub fn events(&self) -> (u64, [Vec<EventRecord>; 2]) {
        lock(&self.events).clone()
    }

    /// Keeps a copy of both directions' events, for [`EmulatorControl::events`].
    pub(crate) fn note_events(&self, start_ns: u64, pipes: [&FlowPipes; 2]) {
        *lock(&self.events) = (start_ns, pipes.map(|p| p.events().to_vec()));
    }

    /// Waits until the engine has applied the submission `ticket` (and all before it), at most
    /// `timeout`; false if it has not by then (the engine is not running).
    pub fn wait_applied(&self, ticket: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.applied.load(Ordering::Acquire) >= ticket {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Every change applied so far, in order.
    pub fn changes(&self) -> Vec<ConfigChange> {
        lock(&self.changes).clone()
    }

    /// The latest snapshot, asking the engine for a fresh one and waiting for it at most
    /// `timeout` if the latest is older than [`PUBLISH_EVERY_NS`] (as the engine's clock goes).
    /// `None` if the engine has published none (it is not running yet).
    pub fn snapshot(&self, timeout: Duration) -> Option<Arc<Snapshot>> {
        let before = self.published.load(Ordering::Acquire);
        self.flags.fetch_or(PUBLISH, Ordering::Release);
        let deadline = Instant::now() + timeout;
        while self.published.load(Ordering::Acquire) == before && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(500));
        }
        lock(&self.snapshot).clone()
    }

    /// Has [`super::run`] copy every frame it sends into `ring` (see [`super::tap_ring`]);
    /// call before it starts.
    pub fn set_tap(&self, ring: rtrb::Producer<super::TapRecord>) {
        *lock(&self.tap) = Some(ring);
    }

    /// Has [`super::run`] record or replay every frame's fate as `settings` say (see
    /// [`super::FateSettings`]); call before it starts.
    pub fn set_fates(&self, settings: super::FateSettings) {
        *lock(&self.fates) = Some(settings);
    }

    /// Engine side, at the start: the fate settings, if any were set.
    pub(crate) fn take_fates(&self) -> Option<super::FateSettings> {
        lock(&self.fates).take()
    }

    /// Engine side, at the start: the tap, if one was set.
    pub(crate) fn take_tap(&self) -> Option<rtrb::Producer<super::TapRecord>> {
        lock(&self.tap).take()
    }

    /// Engine side: what is asked for, in one relaxed load (0: nothing).
    #[inline]
    pub(crate) fn poll(&self) -> u8 {
        self.flags.load(Ordering::Relaxed)
    }

    /// Engine side, when [`EmulatorControl::poll`] is not 0: applies the waiting changes to
    /// `pipes` (A→B, B→A) at `now` and publishes a snapshot if one is asked for and due.
    /// `last_publish` is the time of the last one; `snapshot` makes one.
    pub(crate) fn serve(
        &self,
        flags: u8,
        now: u64,
        start_ns: u64,
        pipes: [&mut FlowPipes; 2],
        last_publish: &mut Option<u64>,
        snapshot: impl FnOnce(&[&mut FlowPipes; 2]) -> Snapshot,
    ) {
        if flags & CHANGE != 0 {
            self.flags.fetch_and(!CHANGE, Ordering::Acquire);
            let (configs, events, submitted) = {
                let mut pending = lock(&self.pending);
                let configs = std::mem::take(&mut pending.configs);
                (
                    configs,
                    std::mem::take(&mut pending.events),
                    pending.submitted,
                )
            };
            let unix_ns = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            let mut changes = lock(&self.changes);
            for (d, config) in configs.into_iter().enumerate() {
                let Some((config, by)) = config else { continue };
                let refused = pipes[d]
                    .handle_config(now, config.clone())
                    .err()
                    .map(|e| e.to_string());
                changes.push(ConfigChange {
                    direction: LinkDirection::BOTH[d],
                    at_ns: now.saturating_sub(start_ns),
                    unix_ns,
                    config,
                    refused,
                    by,
                });
            }
            drop(changes);
            let mut logged = lock(&self.event_changes);
            for (directions, event, by) in events {
                for d in (0..2).filter(|&d| directions[d]) {
                    let ended = match event {
                        Some(event) => {
                            pipes[d].begin_event(now, event);
                            0
                        }
                        None => pipes[d].release_events(now),
                    };
                    logged.push(EventChange {
                        direction: LinkDirection::BOTH[d],
                        at_ns: now.saturating_sub(start_ns),
                        unix_ns,
                        event,
                        ended,
                        by: by.clone(),
                    });
                }
            }
            drop(logged);
            self.note_events(start_ns, [&*pipes[0], &*pipes[1]]);
            self.applied.store(submitted, Ordering::Release);
        }
        let due = last_publish.is_none_or(|t| now >= t + PUBLISH_EVERY_NS);
        if flags & PUBLISH != 0 && due {
            self.flags.fetch_and(!PUBLISH, Ordering::Acquire);
            *last_publish = Some(now);
            self.publish(snapshot(&pipes));
        }
    }

    /// Engine side: makes `snapshot` the latest (also at exit, so the last word is the final
    /// count).
    pub(crate) fn publish(&self, snapshot: Snapshot) {
        *lock(&self.snapshot) = Some(Arc::new(snapshot));
        self.published.fetch_add(1, Ordering::Release);
    }
}

impl DirectionSnapshot {
    /// The counters of a running direction: `report` with `pipes`' link counters, the frames
    /// they had no buffer for, and their queue depth (per flow too, with per-flow rules).
    pub(crate) fn of(report: &DirectionReport, pipes: &FlowPipes) -> DirectionSnapshot {
        DirectionSnapshot {
            report: super::flows::counted(report.clone(), pipes),
            queued_frames: pipes.queued_frames() as u64,
            queued_bytes: pipes.queued_bytes() as u64,
        }
    }
}
