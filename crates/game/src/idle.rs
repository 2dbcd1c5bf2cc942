//! The clients in the order they were last heard from, for the idle timeout.

use std::net::SocketAddr;

/// No slot: the end of the list.
const NIL: u32 = u32::MAX;

/// One table slot's place in the list.
#[derive(Clone, Copy, Debug)]
struct Entry {
    addr: SocketAddr,
    /// When the client was last heard from, ns; never decreases along the list.
    heard_ns: u64,
    /// The slot heard from just before this one (older), or [`NIL`].
    older: u32,
    /// The slot heard from just after this one (newer), or [`NIL`].
    newer: u32,
    /// Whether the slot is in the list.
    linked: bool,
}

/// A doubly linked list of table slots, least recently heard first, threaded through a
/// vector indexed by slot: hearing from a client, adding and removing one are O(1), and the
/// next client to fall idle is always the first.
///
/// Invariant: `heard_ns` never decreases from `oldest` to `newest` (a `now` that goes
/// backwards is taken as the latest time seen), so the first entry is the earliest deadline.
#[derive(Clone, Debug)]
pub(crate) struct IdleList {
    entries: Vec<Entry>,
    oldest: u32,
    newest: u32,
    /// The latest time any client was heard from.
    latest_ns: u64,
}

impl IdleList {
    pub(crate) fn new() -> IdleList {
        IdleList {
            entries: Vec::new(),
            oldest: NIL,
            newest: NIL,
            latest_ns: 0,
        }
    }

    /// Adds `slot` (not in the list) for `addr`, heard from at `now`.
    pub(crate) fn insert(&mut self, slot: u32, addr: SocketAddr, now: u64) {
        let i = slot as usize;
        if self.entries.len() <= i {
            self.entries.resize(
                i + 1,
                Entry {
                    addr,
                    heard_ns: 0,
                    older: NIL,
                    newer: NIL,
                    linked: false,
                },
            );
        }
        debug_assert!(!self.entries[i].linked, "slot {slot} listed twice");
        self.entries[i].addr = addr;
        self.entries[i].linked = true;
        self.push_newest(slot, now);
    }

    /// `slot` was heard from at `now`: it becomes the newest.
    #[inline]
    pub(crate) fn heard(&mut self, slot: u32, now: u64) {
        debug_assert!(self.entries[slot as usize].linked);
        if self.newest != slot {
            self.unlink(slot);
            self.push_newest(slot, now);
        } else {
            self.latest_ns = self.latest_ns.max(now);
            self.entries[slot as usize].heard_ns = self.latest_ns;
        }
    }

    /// Takes `slot` out of the list (a no-op if it is not in it).
    pub(crate) fn remove(&mut self, slot: u32) {
        if self
            .entries
            .get(slot as usize)
            .is_some_and(|entry| entry.linked)
        {
            self.unlink(slot);
            self.entries[slot as usize].linked = false;
        }
    }

    /// The least recently heard client: its address and when it was last heard from.
    pub(crate) fn oldest(&self) -> Option<(SocketAddr, u64)> {
        let entry = self.entries.get(self.oldest as usize)?;
        Some((entry.addr, entry.heard_ns))
    }

    fn push_newest(&mut self, slot: u32, now: u64) {
        self.latest_ns = self.latest_ns.max(now);
        let entry = &mut self.entries[slot as usize];
        entry.heard_ns = self.latest_ns;
        entry.older = self.newest;
        entry.newer = NIL;
        match self.entries.get_mut(self.newest as usize) {
            Some(previous) => previous.newer = slot,
            None => self.oldest = slot,
        }
        self.newest = slot;
    }

    fn unlink(&mut self, slot: u32) {
        let Entry { older, newer, .. } = self.entries[slot as usize];
        match self.entries.get_mut(older as usize) {
            Some(entry) => entry.newer = newer,
            None => self.oldest = newer,
        }
        match self.entries.get_mut(newer as usize) {
            Some(entry) => entry.older = older,
            None => self.newest = older,
        }
    }
}
