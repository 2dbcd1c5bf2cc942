//! The pipe's bottleneck under a queue discipline ([`crate::aqm`]): frames wait in the
//! discipline's queue until the wire is free, are served one at a time at the rate (the
//! discipline deciding, on the sojourn time, what to drop or mark), then go through the delay
//! into the pipe's delay queue. The wire's service runs in virtual time: every call first
//! serves what the wire took by its `now`.

use super::{Pipe, MAX_HELD_WITHOUT_LIMIT};
use crate::aqm::{dualpi2, Discard, DualSojourn, Held, Queue};
use crate::trace::{Opportunities, OPPORTUNITY_BYTES};
use crate::Fate;

/// The discipline's queue and when the wire is busy until (the sojourn times go to the
/// link's histogram, [`crate::Link::sojourn`], which tail drop's queue fills too).
#[derive(Debug)]
pub(super) struct Bottleneck {
    /// The discipline in force; `None` once the pipe went back to tail drop.
    queue: Option<Queue>,
    /// When the frame on the wire has been sent; a frame is taken from the queue then (or at
    /// its arrival, if the wire is idle).
    busy_until_ns: u64,
    /// The discipline's drops of one dequeue (kept for its room).
    discarded: Vec<(Held, Discard)>,
    /// With a trace, its delivery opportunities in place of the rate.
    trace: Option<Opportunities>,
    /// Bytes left of the opportunity at `left_at_ns`, for a frame that waits then (mm-link
    /// spends an opportunity's bytes on every frame waiting, and loses what is left).
    left_bytes: u64,
    /// The instant of the last opportunity used.
    left_at_ns: u64,
    /// DualPI2's sojourn times per queue, once it has been in force.
    dual_sojourn: Option<Box<DualSojourn>>,
}

impl Bottleneck {
    /// Whether a discipline is in force (arrivals join its queue).
    #[inline]
    pub(super) fn is_active(&self) -> bool {
        self.queue.is_some()
    }

    /// Frames waiting.
    pub(super) fn len(&self) -> usize {
        self.queue.as_ref().map_or(0, Queue::len)
    }

    /// Bytes of the discipline's own slots (see [`Pipe::held_bytes`]).
    pub(super) fn held_bytes(&self) -> usize {
        self.queue.as_ref().map_or(0, Queue::held_bytes)
    }

    /// When the wire takes the next frame, if one waits.
    pub(super) fn next_service(&self) -> Option<u64> {
        (self.len() > 0).then(|| self.service_at())
    }

    /// When the wire can take the head of the queue: once the frame before it has gone, and
    /// with a trace at the next opportunity from then (the one that frame left bytes of, if
    /// it did).
    fn service_at(&self) -> u64 {
        let Some(trace) = &self.trace else {
            return self.busy_until_ns;
        };
        if self.left_bytes > 0 && self.left_at_ns >= self.busy_until_ns {
            return self.left_at_ns;
        }
        let mut next = trace.clone();
        next.skip_before(self.busy_until_ns);
        next.next_ns()
    }
}

impl Bottleneck {
    /// Spends the trace's opportunities from `start` (an opportunity's instant) on a frame of
    /// `len` bytes: what the opportunity there has left, then whole ones; returns the instant
    /// of the one its last byte went in. An opportunity carries [`OPPORTUNITY_BYTES`] of IP
    /// packet, the frame less its 14-byte Ethernet header (mm-link's carry one packet of a
    /// 1,500-byte MTU).
    fn spend_opportunities(&mut self, start: u64, len: u32) -> u64 {
        const ETHERNET_HEADER: u64 = 14;
        let mut need = u64::from(len).saturating_sub(ETHERNET_HEADER).max(1);
        let mut done = start;
        if self.left_bytes > 0 && self.left_at_ns == start {
            let used = need.min(self.left_bytes);
            need -= used;
            self.left_bytes -= used;
        } else if let Some(trace) = &mut self.trace {
            trace.skip_before(start);
        }
        let Some(trace) = &mut self.trace else {
            return done;
        };
        while need > 0 {
            done = trace.take();
            let used = need.min(OPPORTUNITY_BYTES);
            need -= used;
            self.left_bytes = OPPORTUNITY_BYTES - used;
            self.left_at_ns = done;
        }
        done
    }
}

impl Pipe {
    /// Sets up, keeps or retires the bottleneck for the configuration in force at `now`.
    pub(super) fn reconfigure_bottleneck(&mut self, now: u64) {
        let aqm = self.link.config().aqm;
        let seed = self.link.config().seed;
        let active = self.link.config().has_bottleneck();
        let trace = self.link.config().trace.clone();
        if !active && self.bottleneck.is_none() {
            return;
        }
        self.serve_bottleneck(now);
        let bottleneck = self.bottleneck.get_or_insert_with(|| {
            Box::new(Bottleneck {
                queue: None,
                busy_until_ns: 0,
                discarded: Vec::new(),
                trace: None,
                left_bytes: 0,
                left_at_ns: 0,
                dual_sojourn: None,
            })
        });
        if active && aqm.discipline == crate::Discipline::DualPi2 {
            bottleneck.dual_sojourn.get_or_insert_with(Box::default);
        }
        // A new trace starts its millisecond 0 now; the same one goes on where it is.
        if bottleneck.trace.as_ref().map(Opportunities::trace) != trace.as_ref() {
            bottleneck.trace = trace.map(|t| Opportunities::new(t, now));
            bottleneck.left_bytes = 0;
        }
        match &mut bottleneck.queue {
            Some(queue) if active && queue.serves(&aqm) => {
                queue.set_params(&aqm);
                return;
            }
            _ => {}
        }
        // A new discipline (or none): what waits in the old one goes to the wire in order.
        let waiting = bottleneck
            .queue
            .take()
            .map(|mut q| q.drain())
            .unwrap_or_default();
        bottleneck.queue = active.then(|| Queue::new(&aqm, seed));
        for held in waiting {
            let start = self.bottleneck_mut().busy_until_ns.max(held.enqueue_ns);
            self.send(start, held);
        }
    }

    fn bottleneck_mut(&mut self) -> &mut Bottleneck {
        // Only called once the bottleneck exists.
        self.bottleneck.as_mut().expect("the bottleneck exists")
    }

    /// A frame arrived at `now`, with a queue discipline in force: the link decides its fate; a delivered frame (and its copy) joins the
    /// discipline's queue, a reordered one skips it and the delay.
    pub(super) fn arrive_at_bottleneck(&mut self, now: u64, frame: &[u8]) -> Fate {
        self.serve_bottleneck(now);
        if self.link.config().aqm.discipline == crate::Discipline::FqCodel {
            // RFC 8290 section 4.1.3: at the limit, the fattest queue's head makes room.
            while self.link.would_overflow(frame.len()) {
                let dropped = self
                    .bottleneck
                    .as_mut()
                    .and_then(|b| b.queue.as_mut())
                    .and_then(Queue::drop_from_fattest);
                let Some(held) = dropped else { break };
                self.discard(now, held, Discard::Overflow);
            }
        }
        let fate = self.link.handle_arrival(now, frame.len());
        if let Fate::Deliver {
            duplicate_departure_ns,
            corrupt_bit,
            reordered,
            departure_ns,
        } = fate
        {
            if reordered {
                self.hold(now, departure_ns, frame, corrupt_bit);
            } else {
                self.enqueue(now, frame, corrupt_bit);
            }
            if duplicate_departure_ns.is_some() {
                self.enqueue(now, frame, None);
            }
            self.serve_bottleneck(now);
        }
        debug_assert_eq!(self.queued_frames(), self.link.queued_frames());
        fate
    }

    /// Copies `frame` into a buffer and offers it to the discipline.
    fn enqueue(&mut self, now: u64, frame: &[u8], corrupt_bit: Option<usize>) {
        if self.link.config().limit_frames.is_none()
            && self.queued_frames() >= MAX_HELD_WITHOUT_LIMIT
        {
            self.dropped_no_buffer += 1;
            self.link.handle_departure(now, frame.len());
            return;
        }
        let ecn = self.link.config().aqm.ecn;
        let buffer = self.pool.hold(frame);
        if let Some(bit) = corrupt_bit {
            if let Some(byte) = self.pool.buffers[buffer].get_mut(bit / 8) {
                *byte ^= 1 << (bit % 8);
            }
        }
        self.seq += 1;
        let seq = self.seq;
        let bottleneck = self.bottleneck_mut();
        if bottleneck.len() == 0 {
            // An idle wire takes the frame at once.
            bottleneck.busy_until_ns = bottleneck.busy_until_ns.max(now);
        }
        // Arrivals come here only while a discipline is in force (`Pipe::handle_arrival`).
        let queue = bottleneck.queue.as_mut().expect("a discipline is in force");
        let held = Held {
            enqueue_ns: now,
            seq,
            buffer,
            len: u32::try_from(frame.len()).unwrap_or(u32::MAX),
            queue: queue.classify(frame),
            ect: ecn && latlab_wire::ecn::read(frame).is_capable(),
            mark: false,
        };
        if let Err((held, cause)) = queue.enqueue(now, held) {
            self.discard(now, held, cause);
        }
    }

    /// Serves the queue up to `now`: each time the wire is free, the discipline picks the next
    /// frame (dropping or marking on the way), which takes the wire for its transmission time
    /// and then goes through the delay.
    pub(super) fn serve_bottleneck(&mut self, now: u64) {
        loop {
            let Some(bottleneck) = self.bottleneck.as_mut() else {
                return;
            };
            if bottleneck.len() == 0 {
                return;
            }
            let start = bottleneck.service_at();
            let Some(queue) = bottleneck.queue.as_mut() else {
                return;
            };
            if start > now {
                return;
            }
            let mut discarded = std::mem::take(&mut bottleneck.discarded);
            let next = queue.dequeue(start, &mut discarded);
            for (held, cause) in discarded.drain(..) {
                self.discard(start, held, cause);
            }
            self.bottleneck_mut().discarded = discarded;
            match next {
                Some(held) => self.send(start, held),
                None => return,
            }
        }
    }

    /// Puts `held` on the wire at `start`: marks it if the discipline said so, records its
    /// sojourn, and gives it its departure after the transmission and the delay.
    fn send(&mut self, start: u64, held: Held) {
        let dual = self.is_dual();
        if held.mark && latlab_wire::ecn::mark_ce(&mut self.pool.buffers[held.buffer]) {
            let counters = self.link.counters_mut();
            counters.aqm_mark += 1;
            match (dual, held.queue) {
                (false, _) => {}
                (true, dualpi2::L4S) => counters.aqm_l4s_mark += 1,
                (true, _) => counters.aqm_classic_mark += 1,
            }
        }
        if dual {
            let sojourn = start.saturating_sub(held.enqueue_ns);
            if let Some(d) = self.bottleneck_mut().dual_sojourn.as_mut() {
                match held.queue {
                    dualpi2::L4S => d.l4s.record(sojourn),
                    _ => d.classic.record(sojourn),
                }
            }
        }
        let done = if self.bottleneck_mut().trace.is_some() {
            self.bottleneck_mut().spend_opportunities(start, held.len)
        } else {
            start.saturating_add(self.link.transmission_ns(held.len as usize))
        };
        self.link
            .record_sojourn(start.saturating_sub(held.enqueue_ns));
        self.bottleneck_mut().busy_until_ns = done;
        let departure = self.link.departure_after_bottleneck(done);
        self.queue.push((departure, held.seq, held.buffer));
    }

    /// Takes `held` out unsent: its buffer back to the pool, its room freed, its cause counted.
    fn discard(&mut self, now: u64, held: Held, cause: Discard) {
        let dual = self.is_dual();
        let capacity = self.pool.buffers[held.buffer].capacity();
        self.pool.idle.give_back(held.buffer, capacity);
        self.link.handle_departure(now, held.len as usize);
        let counters = self.link.counters_mut();
        match cause {
            Discard::Aqm => counters.aqm_drop += 1,
            Discard::Overflow => counters.aqm_overflow += 1,
        }
        match (dual, held.queue) {
            (false, _) => {}
            (true, dualpi2::L4S) => counters.aqm_l4s_drop += 1,
            (true, _) => counters.aqm_classic_drop += 1,
        }
    }

    /// Whether DualPI2 serves the bottleneck now ([`Held::queue`] then names its queue).
    fn is_dual(&self) -> bool {
        self.bottleneck
            .as_ref()
            .and_then(|b| b.queue.as_ref())
            .is_some_and(Queue::is_dual)
    }

    /// DualPI2's sojourn times per queue, once it has been in force; `None` otherwise.
    pub fn dual_sojourn(&self) -> Option<&DualSojourn> {
        self.bottleneck.as_ref()?.dual_sojourn.as_deref()
    }

    /// The sojourn times at the queue of the frames sent (ns), from joining it to leaving it
    /// for the wire, once a rate or a queue discipline has been in force (tail drop's queue
    /// included: delay then rate, its frames join the queue when due); `None` on a link
    /// that never had a queue.
    pub fn sojourn(&self) -> Option<&latlab_stats::LatencyHistogram> {
        self.link.sojourn()
    }

    /// Frames its queue discipline dropped: `aqm_drop` and `aqm_overflow` of its counters.
    #[inline]
    pub fn aqm_dropped(&self) -> u64 {
        let counters = self.link.counters();
        counters.aqm_drop + counters.aqm_overflow
    }

    /// PIE's drop probability now, with PIE in force; DualPI2's base probability `p'` (its
    /// classic queue's is `p'²`), with DualPI2.
    pub fn pie_drop_probability(&self) -> Option<f64> {
        self.bottleneck.as_ref()?.queue.as_ref()?.drop_probability()
    }
}
