//! CoDel, RFC 8289: the state machine of its section 5 pseudo-code (`dodequeue`, `dequeue`,
//! `control_law`), over any FIFO that can say its backlog; and [`CodelFifo`], one FIFO with
//! one CoDel (`aqm=codel`).

use std::collections::VecDeque;

use super::{Aqm, Discard, Held};

/// A FIFO a CoDel drops from: its head, and the bytes left behind it.
pub(crate) trait CodelQueue {
    /// Takes the head.
    fn pop(&mut self) -> Option<Held>;
    /// Bytes still queued (after the last pop), the `queue_.bytes()` of the pseudo-code.
    fn backlog_bytes(&self) -> usize;
    /// The largest frame seen, the pseudo-code's `MAXPACKET`.
    fn max_packet(&self) -> usize;
}

/// CoDel's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CodelParams {
    /// `TARGET`, ns.
    pub target_ns: u64,
    /// `INTERVAL`, ns.
    pub interval_ns: u64,
    /// Mark ECN-capable frames instead of dropping them.
    pub ecn: bool,
}

impl CodelParams {
    pub(crate) fn of(aqm: &Aqm) -> CodelParams {
        CodelParams {
            target_ns: aqm.target(),
            interval_ns: aqm.interval_ns,
            ecn: aqm.ecn,
        }
    }
}

/// CoDel's state (RFC 8289 section 5.1). It is kept across episodes: a new dropping state
/// that begins within 16 intervals of the last drop starts from the count the last one
/// reached above where it began (`count − lastcount`), as the RFC says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Codel {
    /// Drops (and marks) since entering the dropping state.
    count: u32,
    /// `count` when the last dropping state was entered.
    lastcount: u32,
    /// In the dropping state.
    dropping: bool,
    /// When the sojourn time will have stayed above the target for an interval; 0 while it
    /// is below.
    first_above_ns: u64,
    /// When the next drop is due in the dropping state.
    drop_next_ns: u64,
}

impl Codel {
    /// `control_law(t, count)`: `t + interval / √count`.
    #[inline]
    fn control_law(t: u64, interval_ns: u64, count: u32) -> u64 {
        t + (interval_ns as f64 / f64::from(count.max(1)).sqrt()) as u64
    }

    /// `dodequeue(now)`: the head, and whether CoDel may drop it.
    #[inline]
    fn dodequeue<Q: CodelQueue>(
        &mut self,
        now: u64,
        p: &CodelParams,
        q: &mut Q,
    ) -> (Option<Held>, bool) {
        let Some(held) = q.pop() else {
            self.first_above_ns = 0;
            return (None, false);
        };
        let sojourn = now.saturating_sub(held.enqueue_ns);
        if sojourn < p.target_ns || q.backlog_bytes() <= q.max_packet() {
            self.first_above_ns = 0;
            return (Some(held), false);
        }
        if self.first_above_ns == 0 {
            self.first_above_ns = now + p.interval_ns;
            (Some(held), false)
        } else {
            (Some(held), now >= self.first_above_ns)
        }
    }

    /// `dequeue(now)`: the frame to send, if any; the frames CoDel drops on the way go to
    /// `discarded`. With ECN on, an ECN-capable frame CoDel would drop comes back marked
    /// ([`Held::mark`]) and counts as a drop for the control law (as Linux's `codel_dequeue`).
    pub(crate) fn dequeue<Q: CodelQueue>(
        &mut self,
        now: u64,
        p: &CodelParams,
        q: &mut Q,
        discarded: &mut Vec<(Held, Discard)>,
    ) -> Option<Held> {
        let (mut held, mut ok_to_drop) = self.dodequeue(now, p, q);
        let Some(mut head) = held else {
            self.dropping = false;
            return None;
        };
        if self.dropping {
            if !ok_to_drop {
                self.dropping = false;
            }
            while self.dropping && now >= self.drop_next_ns {
                self.count += 1;
                if p.ecn && head.ect {
                    head.mark = true;
                    self.drop_next_ns =
                        Self::control_law(self.drop_next_ns, p.interval_ns, self.count);
                    return Some(head);
                }
                discarded.push((head, Discard::Aqm));
                (held, ok_to_drop) = self.dodequeue(now, p, q);
                let Some(next) = held else {
                    self.dropping = false;
                    return None;
                };
                head = next;
                if ok_to_drop {
                    self.drop_next_ns =
                        Self::control_law(self.drop_next_ns, p.interval_ns, self.count);
                } else {
                    self.dropping = false;
                }
            }
            return Some(head);
        }
        if !ok_to_drop {
            return Some(head);
        }
        let sent = if p.ecn && head.ect {
            head.mark = true;
            Some(head)
        } else {
            discarded.push((head, Discard::Aqm));
            self.dodequeue(now, p, q).0
        };
        self.dropping = true;
        let delta = self.count.saturating_sub(self.lastcount);
        self.count = 1;
        if delta > 1 && now.saturating_sub(self.drop_next_ns) < 16 * p.interval_ns {
            self.count = delta;
        }
        self.drop_next_ns = Self::control_law(now, p.interval_ns, self.count);
        self.lastcount = self.count;
        sent
    }
}

/// One FIFO with one CoDel (`aqm=codel`).
#[derive(Debug)]
pub(crate) struct CodelFifo {
    queue: VecDeque<Held>,
    bytes: usize,
    max_packet: usize,
    params: CodelParams,
    codel: Codel,
}

impl CodelQueue for (&mut VecDeque<Held>, &mut usize, usize) {
    #[inline]
    fn pop(&mut self) -> Option<Held> {
        let held = self.0.pop_front()?;
        *self.1 -= held.len as usize;
        Some(held)
    }

    #[inline]
    fn backlog_bytes(&self) -> usize {
        *self.1
    }

    #[inline]
    fn max_packet(&self) -> usize {
        self.2
    }
}

impl CodelFifo {
    pub(crate) fn new(aqm: &Aqm) -> CodelFifo {
        CodelFifo {
            queue: VecDeque::new(),
            bytes: 0,
            max_packet: 0,
            params: CodelParams::of(aqm),
            codel: Codel::default(),
        }
    }

    pub(crate) fn set_params(&mut self, aqm: &Aqm) {
        self.params = CodelParams::of(aqm);
    }

    #[inline]
    pub(crate) fn push(&mut self, held: Held) {
        self.bytes += held.len as usize;
        self.max_packet = self.max_packet.max(held.len as usize);
        self.queue.push_back(held);
    }

    #[inline]
    pub(crate) fn dequeue(
        &mut self,
        now: u64,
        discarded: &mut Vec<(Held, Discard)>,
    ) -> Option<Held> {
        let mut fifo = (&mut self.queue, &mut self.bytes, self.max_packet);
        self.codel.dequeue(now, &self.params, &mut fifo, discarded)
    }

    pub(crate) fn drain(&mut self) -> Vec<Held> {
        self.bytes = 0;
        self.queue.drain(..).collect()
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Entries the FIFO has room for.
    pub(crate) fn capacity(&self) -> usize {
        self.queue.capacity()
    }
}
