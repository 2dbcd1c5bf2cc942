//! The pipe's delay queue: frames by departure time, then arrival order.
//!
//! Most links give every frame the same delay (or a rate that never lets a frame pass the one
//! before), so departures arrive already sorted. Those go to a FIFO, pushed and popped in
//! constant time; only a frame due before the last one queued (jitter, reordering) goes to a
//! binary heap. The next frame due is the earlier of the two fronts, so the order is the same
//! as one heap's whatever the mix.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// A held frame: `(departure_ns, arrival order, buffer)`; entries compare in that order.
pub(super) type Entry = (u64, u64, usize);

#[derive(Debug, Default)]
pub(super) struct DelayQueue {
    /// Entries in non-decreasing order (each pushed no earlier than the one before it).
    fifo: VecDeque<Entry>,
    /// Entries that came due before the FIFO's last one when they arrived.
    heap: BinaryHeap<Reverse<Entry>>,
}

impl DelayQueue {
    /// Queues `entry`, whose arrival order is above every entry's queued so far.
    #[inline]
    pub(super) fn push(&mut self, entry: Entry) {
        match self.fifo.back() {
            Some(last) if entry < *last => self.heap.push(Reverse(entry)),
            _ => self.fifo.push_back(entry),
        }
    }

    /// The entry due first (earliest departure, then earliest arrival).
    #[inline]
    pub(super) fn peek(&self) -> Option<Entry> {
        match (self.fifo.front(), self.heap.peek()) {
            (Some(&f), Some(&Reverse(h))) => Some(f.min(h)),
            (Some(&f), None) => Some(f),
            (None, Some(&Reverse(h))) => Some(h),
            (None, None) => None,
        }
    }

    /// Takes the entry [`DelayQueue::peek`] shows.
    #[inline]
    pub(super) fn pop(&mut self) -> Option<Entry> {
        match (self.fifo.front(), self.heap.peek()) {
            (Some(f), Some(Reverse(h))) if h < f => self.heap.pop().map(|Reverse(e)| e),
            (Some(_), _) => self.fifo.pop_front(),
            (None, _) => self.heap.pop().map(|Reverse(e)| e),
        }
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.fifo.len() + self.heap.len()
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.fifo.is_empty() && self.heap.is_empty()
    }

    /// Entries the queue has room for without growing.
    pub(super) fn capacity(&self) -> usize {
        self.fifo.capacity() + self.heap.capacity()
    }

    /// Gives back room above `entries` in each half.
    pub(super) fn shrink_to(&mut self, entries: usize) {
        self.fifo.shrink_to(entries);
        self.heap.shrink_to(entries);
    }

    /// Entries in the FIFO and in the heap (for tests).
    #[cfg(test)]
    pub(super) fn halves(&self) -> (usize, usize) {
        (self.fifo.len(), self.heap.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pops everything, checking it comes out as a sort of what went in.
    fn drain_sorted(mut q: DelayQueue, mut pushed: Vec<Entry>) {
        pushed.sort_unstable();
        let mut out = Vec::new();
        while let Some(peeked) = q.peek() {
            assert_eq!(q.pop(), Some(peeked));
            out.push(peeked);
        }
        assert_eq!(out, pushed);
        assert!(q.is_empty() && q.pop().is_none());
    }

    #[test]
    fn sorted_departures_never_touch_the_heap() {
        let mut q = DelayQueue::default();
        let pushed: Vec<Entry> = (0..1000).map(|i| (1_000 + i / 3, i, i as usize)).collect();
        for &e in &pushed {
            q.push(e);
        }
        assert_eq!(q.halves(), (1000, 0));
        drain_sorted(q, pushed);
    }

    #[test]
    fn any_mix_of_departures_comes_out_in_departure_then_arrival_order() {
        // A small xorshift, so the test needs no crate and repeats exactly.
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for spread in [1, 10, 1_000_000] {
            let mut q = DelayQueue::default();
            // The reference: every entry queued and not yet popped, in order.
            let mut model = std::collections::BTreeSet::new();
            for seq in 0..5_000u64 {
                // Mostly rising, with jitter of up to `spread` back and forth.
                let departure = 10 * seq + next() % spread;
                let e = (departure, seq, seq as usize);
                q.push(e);
                model.insert(e);
                // Pop now and then, as frames fall due, and check each pop is the minimum.
                if next() % 4 == 0 {
                    assert_eq!(q.pop(), model.pop_first());
                }
            }
            assert_eq!(q.len(), model.len());
            let (fifo, heap) = q.halves();
            assert!(fifo > 0, "spread {spread}: the FIFO took no entry");
            if spread > 10 {
                assert!(heap > 0, "spread {spread}: jitter never reached the heap");
            }
            drain_sorted(q, model.into_iter().collect());
        }
    }

    #[test]
    fn equal_departures_leave_in_arrival_order_across_both_halves() {
        let mut q = DelayQueue::default();
        q.push((100, 0, 0));
        q.push((50, 1, 1)); // before the FIFO's last: to the heap
        q.push((100, 2, 2)); // FIFO
        q.push((50, 3, 3)); // heap
        assert_eq!(q.halves(), (2, 2));
        let order: Vec<usize> = std::iter::from_fn(|| q.pop().map(|e| e.2)).collect();
        assert_eq!(order, [1, 3, 0, 2]);
    }
}
