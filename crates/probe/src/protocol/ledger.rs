//! The requests in flight, shared by the send half (which writes) and the receive half (which
//! reads): a ring of slots per flow, each written like a seqlock so that a reader on another
//! thread never takes half of one request and half of the next.

use std::sync::atomic::{AtomicU64, Ordering};

/// What the ledger holds of one request sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sent {
    /// Its sequence number within the flow.
    pub seq: u64,
    /// When it was due.
    pub intended_ns: u64,
    /// When it was handed to the port, right before the batch left.
    pub actual_ns: u64,
    /// The protocol's own note ([`super::Written::aux`]).
    pub aux: u32,
}

#[derive(Debug, Default)]
struct Slot {
    /// `seq + 1` of the request held, `0` for none; odd `version` while it is written.
    tag: AtomicU64,
    version: AtomicU64,
    intended: AtomicU64,
    actual: AtomicU64,
    aux: AtomicU64,
    /// `seq + 1` of the last request of this slot answered.
    done: AtomicU64,
}

/// Per flow, the last `slots` requests sent (a power of two; request `seq` is in slot
/// `seq % slots`), plus how far each flow's replies have come.
#[derive(Debug)]
pub struct Ledger {
    slots: u64,
    ring: Box<[Slot]>,
    /// Per flow, `seq + 1` of the highest request answered (for one-in-flight protocols).
    answered: Box<[AtomicU64]>,
    /// Per flow, `seq + 1` of the last request written.
    written: Box<[AtomicU64]>,
    /// Requests written into a slot whose request was still unanswered: an ID taken again
    /// while its query was outstanding (more in flight than the protocol's IDs).
    reused: AtomicU64,
}

impl Ledger {
    /// A ledger for `flows` flows of `slots` requests each (rounded up to a power of two, at
    /// least 1).
    pub fn new(flows: u32, slots: u64) -> Ledger {
        let slots = slots.max(1).next_power_of_two();
        let n = flows.max(1) as usize;
        Ledger {
            slots,
            ring: (0..n as u64 * slots).map(|_| Slot::default()).collect(),
            answered: (0..n).map(|_| AtomicU64::new(0)).collect(),
            written: (0..n).map(|_| AtomicU64::new(0)).collect(),
            reused: AtomicU64::new(0),
        }
    }

    /// Slots per flow.
    pub fn slots(&self) -> u64 {
        self.slots
    }

    fn slot(&self, flow: u32, index: u64) -> Option<&Slot> {
        let flow = flow as u64;
        if flow >= self.answered.len() as u64 {
            return None;
        }
        self.ring
            .get((flow * self.slots + index % self.slots) as usize)
    }

    /// Records request `sent` of `flow` (send half only).
    pub fn record(&self, flow: u32, sent: Sent) {
        let Some(slot) = self.slot(flow, sent.seq) else {
            return;
        };
        let held = slot.tag.load(Ordering::Relaxed);
        if held != 0 && slot.done.load(Ordering::Acquire) != held {
            // An older request is still unanswered in this slot; it can no longer be matched.
            self.reused.fetch_add(1, Ordering::Relaxed);
        }
        slot.version.fetch_add(1, Ordering::AcqRel);
        slot.tag.store(sent.seq + 1, Ordering::Relaxed);
        slot.intended.store(sent.intended_ns, Ordering::Relaxed);
        slot.actual.store(sent.actual_ns, Ordering::Relaxed);
        slot.aux.store(u64::from(sent.aux), Ordering::Relaxed);
        slot.version.fetch_add(1, Ordering::Release);
        self.written[flow as usize].store(sent.seq + 1, Ordering::Release);
    }

    /// The request held in slot `index` of `flow`, if any.
    pub fn get(&self, flow: u32, index: u64) -> Option<Sent> {
        let slot = self.slot(flow, index)?;
        loop {
            let before = slot.version.load(Ordering::Acquire);
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let tag = slot.tag.load(Ordering::Relaxed);
            let sent = Sent {
                seq: tag.wrapping_sub(1),
                intended_ns: slot.intended.load(Ordering::Relaxed),
                actual_ns: slot.actual.load(Ordering::Relaxed),
                aux: slot.aux.load(Ordering::Relaxed) as u32,
            };
            std::sync::atomic::fence(Ordering::Acquire);
            if slot.version.load(Ordering::Relaxed) == before {
                return (tag != 0).then_some(sent);
            }
        }
    }

    /// Marks request `seq` of `flow` answered (receive half only).
    pub fn answer(&self, flow: u32, seq: u64) {
        if let Some(slot) = self.slot(flow, seq) {
            slot.done.store(seq + 1, Ordering::Release);
        }
        if let Some(a) = self.answered.get(flow as usize) {
            a.fetch_max(seq + 1, Ordering::Release);
        }
    }

    /// `seq + 1` of the highest answered request of `flow` (0: none).
    pub fn answered_through(&self, flow: u32) -> u64 {
        self.answered
            .get(flow as usize)
            .map_or(0, |a| a.load(Ordering::Acquire))
    }

    /// Whether `flow`'s last request written is still unanswered.
    pub fn waiting(&self, flow: u32) -> bool {
        let written = self
            .written
            .get(flow as usize)
            .map_or(0, |w| w.load(Ordering::Acquire));
        written > self.answered_through(flow)
    }

    /// The last request written on `flow`, if any.
    pub fn last(&self, flow: u32) -> Option<Sent> {
        let written = self.written.get(flow as usize)?.load(Ordering::Acquire);
        written
            .checked_sub(1)
            .and_then(|seq| self.get(flow, seq))
            .filter(|s| s.seq + 1 == written)
    }

    /// Requests written over an unanswered one (see the field).
    pub fn reused(&self) -> u64 {
        self.reused.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(seq: u64) -> Sent {
        Sent {
            seq,
            intended_ns: 1000 + seq,
            actual_ns: 2000 + seq,
            aux: seq as u32 * 3,
        }
    }

    #[test]
    fn a_slot_holds_the_last_request_written_into_it() {
        let l = Ledger::new(2, 3);
        assert_eq!(l.slots(), 4);
        assert_eq!(l.get(0, 1), None);
        l.record(0, sent(1));
        assert_eq!(l.get(0, 1), Some(sent(1)));
        assert_eq!(l.get(1, 1), None, "flows are apart");
        l.record(0, sent(5));
        assert_eq!(l.get(0, 1), Some(sent(5)));
        assert_eq!(l.reused(), 1, "request 1 was not answered");
        l.answer(0, 5);
        l.record(0, sent(9));
        assert_eq!(l.reused(), 1);
        assert_eq!(l.get(7, 0), None, "no such flow");
    }

    #[test]
    fn waiting_follows_the_last_request_and_its_answer() {
        let l = Ledger::new(1, 16);
        assert!(!l.waiting(0));
        l.record(0, sent(0));
        assert!(l.waiting(0));
        assert_eq!(l.last(0), Some(sent(0)));
        l.answer(0, 0);
        assert!(!l.waiting(0));
    }

    #[test]
    fn a_reader_on_another_thread_never_sees_half_a_request() {
        let l = std::sync::Arc::new(Ledger::new(1, 1));
        let w = l.clone();
        let writer = std::thread::spawn(move || {
            for seq in 0..200_000 {
                w.record(0, sent(seq));
            }
        });
        let mut seen = 0;
        while !writer.is_finished() || seen == 0 {
            if let Some(s) = l.get(0, 0) {
                assert_eq!(s, sent(s.seq));
                seen += 1;
            }
        }
        writer.join().unwrap();
    }
}
