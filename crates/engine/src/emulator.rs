//! The link emulator: a transparent layer-2 bridge between two interfaces that delays, drops,
//! duplicates, corrupts and rate-limits frames as a [`latlab_link::Pipe`] per direction says.
//!
//! The engine only moves frames (port → pipe → port), stamps and counts. Per direction: frames
//! are read in batches, each with the kernel's own receive stamp (per frame, not per batch), and
//! handed to the pipe, which decides their fate and departure time and holds them; when a
//! departure time comes, the engine writes the frame the pipe lends it straight to the other
//! interface's TX queue (no copy, no allocation), spinning on the clock for the last stretch
//! instead of sleeping (sleeps are tens of microseconds late). The release error of every frame
//! (actual − intended departure) goes into a histogram; TX queue overflows, frames the far
//! interface cannot send (longer than its MTU) and kernel drops, which only the ports see, are
//! counted here: one frame never stops the emulator, and every frame read is accounted for
//! ([`DirectionReport`]), those still held at exit included.
//!
//! A direction may have per-flow rules ([`Flows`]): its pipe is then a
//! [`latlab_link::FlowPipes`], a pipe per rule plus the default one, driven with the same verbs;
//! each rule's frames are counted on their own ([`FlowReport`]) and summed into the direction's.
//!
//! [`run`] is the run-to-completion shape: one loop serves both directions, for machines
//! without two spare cores per direction. It runs over any [`Port`]: an AF_PACKET socket
//! (frames stamped by the kernel as they enter the ring) or an AF_XDP socket whose program
//! redirects every frame of the interface (frames stamped by that program as the driver hands
//! them over). [`run_pipeline`] splits receiving from the pipes and sending over two cores.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use latlab_io::clock::now_ns;
use latlab_io::packet::PacketSocket;
use latlab_io::port::{FrameQueued, SocketCounters, WireFrameStats};
use latlab_link::{DropCause, Fate, FlowPipes, Flows, LinkCounters};
use latlab_stats::stalls::Stalls;
use latlab_stats::LatencyHistogram;
use rtrb::Consumer;

use crate::stalls::StallWatch;
use crate::{PollMode, Stop};

mod control;
mod cpu;
mod fates;
mod flows;
mod tap;

pub use control::{
    ConfigChange, DirectionSnapshot, EmulatorControl, EventChange, LinkDirection, Snapshot,
    PUBLISH_EVERY_NS,
};
pub use cpu::CpuUse;
pub use fates::{fate_ring, FateSettings, FatesReport};
pub use flows::FlowReport;
pub use tap::{tap_ring, TapRecord, TAP_SNAP};

use fates::Fates;
use tap::Tap;

/// One bridged interface as the run-to-completion loop uses it: the frame port of latlab-io.
pub use latlab_io::port::FramePort as Port;

/// Live counters of one direction, readable while the emulator runs.
#[derive(Debug, Default)]
pub struct DirectionLive {
    /// Frames received.
    pub arrived: AtomicU64,
    /// Frames sent on.
    pub sent: AtomicU64,
    /// Frames dropped, whatever the cause.
    pub dropped: AtomicU64,
}

/// Bytes (frame lengths) by fate, as [`DirectionReport`] counts frames: the bytes read, those
/// sent on (duplicates included), and those dropped, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ByteCounters {
    /// Bytes of the frames read from the receiving interface.
    pub arrived: u64,
    /// Bytes written to the TX ring.
    pub sent: u64,
    /// Bytes the loss model dropped.
    pub dropped_loss: u64,
    /// Bytes dropped because the link's queue held its limit of frames.
    pub dropped_queue_frames: u64,
    /// Bytes dropped because the link's queue would have gone over its limit of bytes.
    pub dropped_queue_bytes: u64,
    /// Bytes of runts dropped.
    pub dropped_runt: u64,
    /// Bytes of oversized frames dropped.
    pub dropped_oversized: u64,
    /// Bytes dropped while an outage was in force.
    pub dropped_outage: u64,
    /// Bytes of [`DirectionReport::queue_slots_full`] frames.
    pub queue_slots_full: u64,
    /// Bytes of [`DirectionReport::tx_ring_full`] frames.
    pub tx_ring_full: u64,
    /// Bytes of [`DirectionReport::tx_too_long`] frames.
    pub tx_too_long: u64,
    /// Bytes of [`DirectionReport::tx_too_short`] frames.
    pub tx_too_short: u64,
}

/// What one direction did. Every frame read is accounted for:
/// `arrived + link.duplicated = sent + link.dropped() + tx_ring_full + tx_too_long +
/// tx_too_short + queue_slots_full + queued_at_exit` ([`DirectionReport::unaccounted`] is 0).
#[derive(Clone, Debug)]
pub struct DirectionReport {
    /// Frames read from the receiving interface (the pipeline's full ring included, which
    /// the link model never saw).
    pub arrived: u64,
    /// The link model's counters by cause.
    pub link: LinkCounters,
    /// Frames written to the TX ring.
    pub sent: u64,
    /// Frames the TX ring had no room for (dropped by the emulator itself).
    pub tx_ring_full: u64,
    /// Frames longer than the far interface can send (its MTU, or a TX slot or UMEM frame):
    /// dropped by the emulator, which goes on.
    pub tx_too_long: u64,
    /// Frames shorter than an Ethernet header, which no interface sends: dropped.
    pub tx_too_short: u64,
    /// Frames (duplicates included) still held by the link, or on their way to it, when the
    /// emulator stopped: never sent.
    pub queued_at_exit: u64,
    /// Frames dropped by the engine before their departure: a pipe without a frame limit
    /// already held [`latlab_link::MAX_HELD_WITHOUT_LIMIT`] frames, or (pipeline) the ring to
    /// the TX stage was full.
    pub queue_slots_full: u64,
    /// Frames the kernel dropped before the RX ring (PACKET_STATISTICS; AF_XDP's
    /// `rx_dropped + rx_ring_full`): [`SocketCounters::rx_lost`] of `socket`.
    pub kernel_drops: u64,
    /// What the kernel counted at the sockets, by cause: the receiving socket's `rx_*`
    /// counters and the sending socket's `tx_*` ones.
    pub socket: SocketCounters,
    /// What the receiving port did to make frames what they were on the wire (tags put back,
    /// checksums finished, super-frames segmented: `arrived` counts the wire frames).
    pub wire: WireFrameStats,
    /// Actual − intended departure of every released frame, ns.
    pub release_error: LatencyHistogram,
    /// Released before the intended departure (never expected; counted to show it).
    pub released_early: u64,
    /// The same fates in bytes (the queue discipline's drops, counted in `link`, not among
    /// them).
    pub bytes: ByteCounters,
    /// With a queue (a rate, under tail drop or a discipline), the sojourn time there of every
    /// frame it sent, ns, over the direction's pipes; `None` without one.
    pub sojourn: Option<LatencyHistogram>,
    /// The direction's events (lag spikes, outages, flapping), scheduled or begun while it ran,
    /// with their times on the engine's clock (the default pipe's; an event begun while running
    /// applies to every pipe of the direction).
    pub events: Vec<latlab_link::EventRecord>,
    /// With DualPI2 (`aqm=dualpi2`), the sojourn times of each of its queues, L4S and
    /// classic, over the direction's pipes (their marks and drops are in `link`); `None`
    /// without it.
    pub dual_sojourn: Option<latlab_link::DualSojourn>,
    /// Per flow, with per-flow rules: each rule's frames in the order of the rules, then the
    /// default pipe's; they add up to the counters above. Empty without rules.
    pub flows: Vec<FlowReport>,
}

/// One direction of the run-to-completion loop: its pipes (the link models and the frames they
/// hold) and what the ports reported.
struct Direction {
    pipe: FlowPipes,
    /// Longest frame sent: longer ones leave cut to this length, as the buffers of old did.
    max_frame: usize,
    report: DirectionReport,
    live: std::sync::Arc<DirectionLive>,
}

impl Direction {
    fn new(
        flows: Flows,
        start_ns: u64,
        max_frame: usize,
        live: std::sync::Arc<DirectionLive>,
    ) -> io::Result<Direction> {
        let pipe = FlowPipes::new(flows, start_ns).map_err(invalid_config)?;
        Ok(Direction {
            report: DirectionReport::new(&pipe),
            pipe,
            max_frame,
            live,
        })
    }

    /// A frame arrived at `rx_ns`: into the pipe, which holds or drops it (with the recorded
    /// fate on a replay); noted by the tap and the fate recorder (direction `d`), if any.
    fn arrive(
        &mut self,
        rx_ns: u64,
        frame: &[u8],
        d: usize,
        tap: &mut Option<Tap>,
        fates: &mut Option<Fates>,
    ) {
        self.report.arrived += 1;
        self.report.bytes.arrived += frame.len() as u64;
        self.live.arrived.fetch_add(1, Ordering::Relaxed);
        let decide = |pipe: &mut FlowPipes| match fates {
            Some(fates) => fates.decide(d, rx_ns, frame, pipe),
            None => pipe.handle_arrival(rx_ns, frame),
        };
        let (fate, no_buffer) = arrive(&mut self.pipe, &mut self.report, &self.live, frame, decide);
        if let Some(tap) = tap {
            tap.arrived(d, rx_ns, &fate, no_buffer);
        }
    }

    /// Sends every frame due at `now` through `tx`, each copied to the tap (direction `d`),
    /// if any; returns how many were queued on it.
    fn release(
        &mut self,
        now: u64,
        tx: &mut impl Port,
        d: usize,
        tap: &mut Option<Tap>,
    ) -> io::Result<usize> {
        let max_frame = self.max_frame;
        let send = |frame: &[u8]| {
            let frame = &frame[..frame.len().min(max_frame)];
            let mut queued = tx.try_queue_frame(frame)?;
            if queued == FrameQueued::Full {
                tx.flush()?;
                queued = tx.try_queue_frame(frame)?;
            }
            Ok(queued)
        };
        let tapped = |frame: &[u8], intended: u64, sent_at: Option<u64>| {
            if let Some(tap) = tap.as_mut() {
                match sent_at {
                    Some(t) => tap.departed(d, frame, intended, t),
                    None => tap.refused(d, intended),
                }
            }
        };
        release(
            &mut self.pipe,
            now,
            &mut self.report,
            &self.live,
            send,
            tapped,
        )
    }

    /// The report, with the pipe's counters, what the kernel counted at the receiving
    /// socket (`rx`) and at the sending one (`tx`).
    fn finish(
        self,
        rx: SocketCounters,
        tx: SocketCounters,
        wire: WireFrameStats,
    ) -> DirectionReport {
        DirectionReport {
            kernel_drops: rx.rx_lost(),
            socket: SocketCounters {
                tx_invalid: tx.tx_invalid,
                tx_ring_empty: tx.tx_ring_empty,
                ..rx
            },
            wire,
            ..finish(self.report, &self.pipe)
        }
    }
}

impl DirectionReport {
    /// Nothing counted yet, with a flow for each of `pipes`' (none without rules).
    fn new(pipes: &FlowPipes) -> DirectionReport {
        DirectionReport {
            arrived: 0,
            link: LinkCounters::default(),
            sent: 0,
            tx_ring_full: 0,
            tx_too_long: 0,
            tx_too_short: 0,
            queued_at_exit: 0,
            queue_slots_full: 0,
            kernel_drops: 0,
            socket: SocketCounters::default(),
            wire: WireFrameStats::default(),
            release_error: LatencyHistogram::new(),
            released_early: 0,
            bytes: ByteCounters::default(),
            sojourn: None,
            events: Vec::new(),
            dual_sojourn: None,
            flows: flows::flow_reports(pipes),
        }
    }
}

impl DirectionReport {
    /// Frames (and copies) in minus frames accounted for: 0 unless a frame was lost without
    /// being counted (see the type's description).
    pub fn unaccounted(&self) -> i128 {
        let copies_in = i128::from(self.arrived) + i128::from(self.link.duplicated);
        let out = [
            self.sent,
            self.link.dropped(),
            self.link.aqm_drop + self.link.aqm_overflow,
            self.tx_ring_full,
            self.tx_too_long,
            self.tx_too_short,
            self.queue_slots_full,
            self.queued_at_exit,
        ];
        copies_in - out.iter().map(|&n| i128::from(n)).sum::<i128>()
    }
}

/// `report` with the counters of `pipes`: their links', the frames they had no buffer for,
/// and those they still hold, per direction and per flow.
fn finish(report: DirectionReport, pipes: &FlowPipes) -> DirectionReport {
    let mut report = flows::counted(report, pipes);
    report.queued_at_exit += pipes.queued_frames() as u64;
    report
}

/// A frame arrived: `decide` hands it to `pipe`; counts a drop live and in bytes. Returns its
/// fate, and how many of its copies the pipe had no buffer for.
fn arrive(
    pipe: &mut FlowPipes,
    report: &mut DirectionReport,
    live: &DirectionLive,
    frame: &[u8],
    decide: impl FnOnce(&mut FlowPipes) -> Fate,
) -> (Fate, u64) {
    let no_buffer = pipe.dropped_no_buffer();
    let aqm = pipe.aqm_dropped();
    let len = frame.len() as u64;
    let mut dropped = 0;
    let fate = decide(pipe);
    // A queue discipline's drops (of frames before this one, or this one), live only: the
    // report takes them from the pipes' counters.
    dropped += pipe.aqm_dropped() - aqm;
    if let Fate::Drop(cause) = fate {
        let b = &mut report.bytes;
        *match cause {
            DropCause::Loss => &mut b.dropped_loss,
            DropCause::QueueFrames => &mut b.dropped_queue_frames,
            DropCause::QueueBytes => &mut b.dropped_queue_bytes,
            DropCause::Runt => &mut b.dropped_runt,
            DropCause::Oversized => &mut b.dropped_oversized,
            DropCause::Outage => &mut b.dropped_outage,
        } += len;
        dropped = 1;
    }
    let no_buffer = pipe.dropped_no_buffer() - no_buffer;
    report.bytes.queue_slots_full += no_buffer * len;
    dropped += no_buffer;
    if dropped > 0 {
        live.dropped.fetch_add(dropped, Ordering::Relaxed);
    }
    (fate, no_buffer)
}

/// Hands every frame of `pipe` due at `now` to `send` (which says what the TX queue did with
/// it), stamping its release error; returns how many were taken. A frame the TX queue has no
/// room for, or that the far interface can never send, is counted by cause and dropped.
/// `tapped` sees each frame with its intended departure, and the time it was queued (`None`
/// if it was not).
fn release(
    pipe: &mut FlowPipes,
    now: u64,
    report: &mut DirectionReport,
    live: &DirectionLive,
    mut send: impl FnMut(&[u8]) -> io::Result<FrameQueued>,
    mut tapped: impl FnMut(&[u8], u64, Option<u64>),
) -> io::Result<usize> {
    let mut n = 0;
    let aqm = pipe.aqm_dropped();
    let releases = pipe.releases();
    while let Some(departure) = pipe.poll_departure(now) {
        let queued = send(departure.frame())?;
        let t = now_ns();
        let intended = departure.departure_ns();
        let sent_at = (queued == FrameQueued::Queued).then_some(t);
        tapped(departure.frame(), intended, sent_at);
        let len = departure.frame().len() as u64;
        if let Some(flow) = report.flows.get_mut(departure.flow()) {
            match queued {
                FrameQueued::Queued => flow.sent += 1,
                _ => flow.dropped_by_emulator += 1,
            }
        }
        let b = &mut report.bytes;
        let (dropped, bytes) = match queued {
            FrameQueued::Queued => {
                report.sent += 1;
                b.sent += len;
                live.sent.fetch_add(1, Ordering::Relaxed);
                if t >= intended {
                    report.release_error.record(t - intended);
                } else {
                    report.released_early += 1;
                }
                n += 1;
                continue;
            }
            FrameQueued::Full => (&mut report.tx_ring_full, &mut b.tx_ring_full),
            FrameQueued::TooLong => (&mut report.tx_too_long, &mut b.tx_too_long),
            FrameQueued::TooShort => (&mut report.tx_too_short, &mut b.tx_too_short),
        };
        *dropped += 1;
        *bytes += len;
        live.dropped.fetch_add(1, Ordering::Relaxed);
    }
    // A queue discipline's drops while it served the wire, live only: the report takes them
    // from the pipes' counters.
    let aqm = pipe.aqm_dropped() - aqm;
    if aqm > 0 {
        live.dropped.fetch_add(aqm, Ordering::Relaxed);
    }
    // The pipes freed the buffers a past burst left (at most once a memory window): the
    // allocator keeps freed chunks, so the process's memory follows only when it is asked to
    // give whole free pages back.
    if pipe.releases() != releases {
        latlab_io::mem::give_back_free_memory();
    }
    Ok(n)
}

/// A link configuration the pipe refused, as an I/O error.
fn invalid_config(error: latlab_link::ConfigError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, error.to_string())
}

/// Live counters of both directions.
#[derive(Debug, Default)]
pub struct EmulatorLive {
    /// Interface A to interface B.
    pub a_to_b: std::sync::Arc<DirectionLive>,
    /// Interface B to interface A.
    pub b_to_a: std::sync::Arc<DirectionLive>,
    /// Changes and snapshots asked for from other threads (served by [`run`]; the pipeline
    /// ignores it).
    pub control: EmulatorControl,
}

/// What a run of the emulator did, per direction.
#[derive(Clone, Debug)]
pub struct EmulatorReport {
    /// Frames from A to B.
    pub a_to_b: DirectionReport,
    /// Frames from B to A.
    pub b_to_a: DirectionReport,
    /// The configuration changes applied while it ran, in order, with their times.
    pub changes: Vec<ConfigChange>,
    /// The events begun and released while it ran ([`EmulatorControl::submit_event`]), in
    /// order, with their times.
    pub event_changes: Vec<EventChange>,
    /// When it started, on the frames' clock (the origin of the events' times).
    pub start_ns: u64,
    /// Frames sent but not copied to the tap, whose ring was full ([`run`] only).
    pub tap_full: u64,
    /// What recording and replaying fates did, if either was asked for ([`run`] only).
    pub fates: Option<FatesReport>,
    /// How much of its CPU the emulator used.
    pub cpu: CpuUse,
    /// The host's stalls of the loop (the TX stage's, pipelined), [`crate::stalls`].
    pub host_stalls: Stalls,
}

/// Bridges `a` and `b` until `stop` is raised, impairing A→B frames by `a_to_b` and B→A frames
/// by `b_to_a`: a [`latlab_link::LinkConfig`] each, or [`Flows`] (a default link and per-flow rules).
///
/// With [`PollMode::Busy`] the loop never sleeps (a core at 100%, frames picked up within
/// microseconds); with [`PollMode::Block`] it needs no core of its own: when nothing is due it
/// sleeps in `ppoll` until a frame arrives or shortly before the next departure, and spins the
/// last stretch ([`crate::wait::SleepSpin`], learned from how late its sleeps woke). After it
/// handled a frame it polls on for that stretch before sleeping, so the second half of a round
/// trip is taken without a wake-up; a frame arriving while it sleeps waits for the wake-up.
///
/// Between two frames, it applies the configuration changes submitted through
/// `live.control` and publishes snapshots of its counters when asked (see
/// [`EmulatorControl`]); checking for them costs one relaxed load per iteration.
#[allow(clippy::too_many_arguments)]
pub fn run<P: Port>(
    a: &mut P,
    b: &mut P,
    a_to_b: impl Into<Flows>,
    b_to_a: impl Into<Flows>,
    max_frame: usize,
    poll: PollMode,
    stop: &Stop,
    live: &EmulatorLive,
) -> io::Result<EmulatorReport> {
    let _ = latlab_io::cpu::set_timer_slack_ns(1);
    let start = now_ns();
    let cpu_start = latlab_io::clock::thread_cpu_ns();
    let mut ab = Direction::new(a_to_b.into(), start, max_frame, live.a_to_b.clone())?;
    let mut ba = Direction::new(b_to_a.into(), start, max_frame, live.b_to_a.clone())?;
    let control = &live.control;
    control.note_events(start, [&ab.pipe, &ba.pipe]);
    let mut last_publish = None;
    let mut tap = control.take_tap().map(Tap::new);
    let mut fates = control.take_fates().map(|f| Fates::new(f, start));
    // A realtime loop keeps under the kernel's realtime allowance (see `crate::wait`).
    let mut waits = crate::wait::SleepSpin::for_this_thread();
    let mut watch = StallWatch::new(start);
    let mut send_ns = 0;
    while !stop.is_raised() {
        let got = a
            .recv_frames(&mut |frame, rx_ns| ab.arrive(rx_ns, frame, 0, &mut tap, &mut fates))?
            + b.recv_frames(&mut |frame, rx_ns| ba.arrive(rx_ns, frame, 1, &mut tap, &mut fates))?;
        let now = now_ns();
        watch.tick(now);
        let asked = control.poll();
        if asked != 0 {
            let pipes = [&mut ab.pipe, &mut ba.pipe];
            control.serve(asked, now, start, pipes, &mut last_publish, |pipes| {
                snapshot(
                    now - start,
                    start,
                    [(&ab.report, &*pipes[0]), (&ba.report, &*pipes[1])],
                )
            });
        }
        let sent_b = ab.release(now, b, 0, &mut tap)?;
        let sent_a = ba.release(now, a, 1, &mut tap)?;
        if sent_a + sent_b > 0 {
            let flushing = now_ns();
            if sent_b > 0 {
                b.flush()?;
            }
            if sent_a > 0 {
                a.flush()?;
            }
            // The sends are the loop's own work (with, on veth, the receiver's), not the
            // host's: timed apart, and not a stall.
            let flushed = now_ns();
            send_ns += flushed.saturating_sub(flushing);
            watch.resumed(flushed);
        }
        if poll == PollMode::Busy {
            continue;
        }
        if got > 0 || sent_a + sent_b > 0 {
            waits.lingers(now);
            continue;
        }
        // Idle: sleep until a frame arrives or shortly before the next departure; spin the
        // last stretch.
        let next = [ab.pipe.poll_timeout(), ba.pipe.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        // From the time now, not the loop's start: the sleep ends at the spin before the
        // deadline however long this round's work took, and it is counted from here.
        let asleep = now_ns();
        let sleep = waits.sleep_for(asleep, next, Duration::from_millis(10));
        if !sleep.is_zero() {
            P::wait_either(a, b, sleep)?;
            let woke = now_ns();
            waits.woke(woke);
            watch.woke(woke, asleep + sleep.as_nanos() as u64);
        }
    }
    let now = now_ns();
    control.publish(snapshot(
        now.saturating_sub(start),
        start,
        [(&ab.report, &ab.pipe), (&ba.report, &ba.pipe)],
    ));
    // Once per socket: AF_PACKET's kernel counters start again after each read.
    let (socket_a, socket_b) = (a.socket_counters(), b.socket_counters());
    Ok(EmulatorReport {
        a_to_b: ab.finish(socket_a, socket_b, a.wire_frame_stats()),
        b_to_a: ba.finish(socket_b, socket_a, b.wire_frame_stats()),
        changes: control.changes(),
        event_changes: control.event_changes(),
        start_ns: start,
        tap_full: tap.map_or(0, |t| t.full),
        fates: fates.map(Fates::finish),
        cpu: CpuUse {
            elapsed_ns: now.saturating_sub(start),
            cpu_ns: latlab_io::clock::thread_cpu_ns() - cpu_start,
            threads: 1,
            send_ns,
            sleeps: (poll == PollMode::Block).then(|| waits.report()),
        },
        host_stalls: watch.finish(now),
    })
}

/// The counters of both directions at `at_ns` since the start.
fn snapshot(at_ns: u64, start_ns: u64, [ab, ba]: [(&DirectionReport, &FlowPipes); 2]) -> Snapshot {
    Snapshot {
        at_ns,
        start_ns,
        a_to_b: DirectionSnapshot::of(ab.0, ab.1),
        b_to_a: DirectionSnapshot::of(ba.0, ba.1),
    }
}

mod pipeline;
#[cfg(test)]
mod tests;
pub use pipeline::{run_pipeline, PipelineSockets, PIPE_FRAME};
