//! The four single-producer single-consumer rings of an AF_XDP socket, shared with the kernel.
//!
//! Each ring is a power-of-two array of descriptors with a free-running u32 producer index and
//! a u32 consumer index; the entry of index `i` is at `i & (size - 1)`, and the indices wrap
//! around at `u32::MAX` (so `producer - consumer`, wrapping, is the number of entries in the
//! ring). The side that owns an index writes it with release ordering after writing or
//! reading the entries, and the other side reads it with acquire ordering before touching
//! them.
//!
//! The kernel's index is never trusted: an entry count above the ring size (only a broken
//! kernel could write one) is clamped, so no entry outside the array is ever read or written.

use std::io;
use std::os::fd::RawFd;
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

/// Entries free for the producer: the ring size less what the consumer has not taken yet.
/// `0` when the indices claim more entries than the ring holds.
pub(crate) fn free_entries(size: u32, producer: u32, consumer: u32) -> u32 {
    size.saturating_sub(producer.wrapping_sub(consumer))
}

/// Entries ready for the consumer, at most the ring size.
pub(crate) fn ready_entries(size: u32, producer: u32, consumer: u32) -> u32 {
    producer.wrapping_sub(consumer).min(size)
}

/// One ring mapped from the socket: which side this process is on is up to the caller, who
/// uses either [`Ring::reserve`]/[`Ring::submit`] (producer: fill and TX rings) or
/// [`Ring::peek`]/[`Ring::release`] (consumer: RX and completion rings), never both.
#[derive(Debug)]
pub(crate) struct Ring {
    /// The mapping, unmapped on drop; null when the ring lives in memory owned elsewhere
    /// (tests).
    map: *mut u8,
    map_len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    descs: *mut u8,
    /// Entries, a power of two.
    size: u32,
    /// This side's own index: the next entry to produce, or to consume. Published to the
    /// shared index by `submit`/`release`.
    local: u32,
    /// The other side's index as last read.
    other: u32,
}

impl Ring {
    /// Maps the ring of `size` entries of `desc_size` bytes at page offset `pgoff` of socket
    /// `fd`, laid out as `offsets` (from `XDP_MMAP_OFFSETS`) says. The offsets are checked to
    /// lie inside the mapping, 4-byte aligned.
    pub(crate) fn map(
        fd: RawFd,
        pgoff: libc::off_t,
        offsets: &libc::xdp_ring_offset,
        size: u32,
        desc_size: usize,
    ) -> Result<Ring, io::Error> {
        debug_assert!(size.is_power_of_two());
        let bad = || {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the kernel's ring offsets do not fit the ring: {offsets:?}"),
            )
        };
        let desc_at = usize::try_from(offsets.desc).map_err(|_| bad())?;
        let map_len = (size as usize)
            .checked_mul(desc_size)
            .and_then(|n| n.checked_add(desc_at))
            .ok_or_else(bad)?;
        for field in [offsets.producer, offsets.consumer, offsets.flags] {
            let at = usize::try_from(field).map_err(|_| bad())?;
            if at % 4 != 0 || at.checked_add(4).is_none_or(|end| end > desc_at) {
                return Err(bad());
            }
        }
        if desc_at % 8 != 0 {
            return Err(bad());
        }
        // SAFETY: a fresh shared mapping of one ring of the socket, of the length the kernel
        // expects for it; nothing in this process aliases it.
        let map = unsafe {
            libc::mmap(
                ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = map.cast::<u8>();
        // SAFETY: every offset was checked above to lie inside the mapping, 4-byte aligned
        // (8 for the descriptors); the mapping is page aligned.
        let ring = unsafe {
            Ring::from_raw(
                map.add(offsets.producer as usize).cast(),
                map.add(offsets.consumer as usize).cast(),
                map.add(offsets.flags as usize).cast(),
                map.add(desc_at),
                size,
            )
        };
        Ok(Ring {
            map,
            map_len,
            ..ring
        })
    }

    /// A ring over memory the caller owns, not unmapped on drop.
    ///
    /// # Safety
    /// The three index pointers must be valid, aligned `AtomicU32`s and `descs` must hold
    /// `size` (a power of two) descriptors, all for as long as the ring is used.
    pub(crate) unsafe fn from_raw(
        producer: *const AtomicU32,
        consumer: *const AtomicU32,
        flags: *const AtomicU32,
        descs: *mut u8,
        size: u32,
    ) -> Ring {
        debug_assert!(size.is_power_of_two());
        // `into_producer`/`into_consumer` start each side from the indices as they are.
        Ring {
            map: ptr::null_mut(),
            map_len: 0,
            producer,
            consumer,
            flags,
            descs,
            size,
            local: 0,
            other: 0,
        }
    }

    /// Starts as the producer side: our index is the shared producer index.
    pub(crate) fn into_producer(mut self) -> Ring {
        self.local = self.producer().load(Ordering::Relaxed);
        self.other = self.consumer().load(Ordering::Acquire);
        self
    }

    /// Starts as the consumer side: our index is the shared consumer index.
    pub(crate) fn into_consumer(mut self) -> Ring {
        self.local = self.consumer().load(Ordering::Relaxed);
        self.other = self.producer().load(Ordering::Acquire);
        self
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: `from_raw`'s contract: a valid, aligned AtomicU32 for the ring's lifetime.
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*self.consumer }
    }

    /// Entries in the ring.
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// Whether the kernel asks to be woken up (`XDP_RING_NEED_WAKEUP`) to act on this ring.
    pub(crate) fn needs_wakeup(&self) -> bool {
        // SAFETY: as for `producer`.
        let flags = unsafe { &*self.flags };
        flags.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// Producer: how many of `want` entries may be written from index [`Ring::local`] on,
    /// reading the consumer's index again only when the cached one leaves too little room.
    pub(crate) fn reserve(&mut self, want: u32) -> u32 {
        let mut free = free_entries(self.size, self.local, self.other);
        if free < want {
            self.other = self.consumer().load(Ordering::Acquire);
            free = free_entries(self.size, self.local, self.other);
        }
        free.min(want)
    }

    /// Producer: publishes `n` entries written from index [`Ring::local`] on.
    pub(crate) fn submit(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.producer().store(self.local, Ordering::Release);
    }

    /// Producer: entries published that the consumer has not taken yet.
    pub(crate) fn unconsumed(&mut self) -> u32 {
        self.other = self.consumer().load(Ordering::Acquire);
        self.size - free_entries(self.size, self.local, self.other)
    }

    /// Consumer: how many entries (at most `max`) are ready from index [`Ring::local`] on.
    pub(crate) fn peek(&mut self, max: u32) -> u32 {
        let mut ready = ready_entries(self.size, self.other, self.local);
        if ready < max {
            self.other = self.producer().load(Ordering::Acquire);
            ready = ready_entries(self.size, self.other, self.local);
        }
        ready.min(max)
    }

    /// Consumer: hands `n` read entries back to the producer.
    pub(crate) fn release(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.consumer().store(self.local, Ordering::Release);
    }

    /// This side's next index.
    pub(crate) fn local(&self) -> u32 {
        self.local
    }

    /// Where the descriptor of index `i` (of `desc_size` bytes) lies.
    fn desc(&self, i: u32, desc_size: usize) -> *mut u8 {
        let slot = (i & (self.size - 1)) as usize;
        // SAFETY: `slot < size`, and the descriptor array holds `size` descriptors of
        // `desc_size` bytes (`map`/`from_raw`).
        unsafe { self.descs.add(slot * desc_size) }
    }

    /// A UMEM address entry (fill and completion rings).
    pub(crate) fn read_addr(&self, i: u32) -> u64 {
        // SAFETY: the entry lies inside the array (`desc`), 8-byte aligned; the consumer owns
        // it between the acquire of the producer index and its release.
        unsafe { ptr::read(self.desc(i, 8).cast::<u64>()) }
    }

    pub(crate) fn write_addr(&mut self, i: u32, addr: u64) {
        // SAFETY: as for `read_addr`; the producer owns reserved entries until `submit`.
        unsafe { ptr::write(self.desc(i, 8).cast::<u64>(), addr) }
    }

    /// A packet descriptor entry (RX and TX rings).
    pub(crate) fn read_desc(&self, i: u32) -> libc::xdp_desc {
        // SAFETY: as for `read_addr`, with 16-byte entries.
        unsafe { ptr::read(self.desc(i, DESC_SIZE).cast::<libc::xdp_desc>()) }
    }

    pub(crate) fn write_desc(&mut self, i: u32, desc: libc::xdp_desc) {
        // SAFETY: as for `write_addr`, with 16-byte entries.
        unsafe { ptr::write(self.desc(i, DESC_SIZE).cast::<libc::xdp_desc>(), desc) }
    }
}

/// Bytes of an RX or TX descriptor (`struct xdp_desc`).
pub(crate) const DESC_SIZE: usize = std::mem::size_of::<libc::xdp_desc>();

impl Drop for Ring {
    fn drop(&mut self) {
        if !self.map.is_null() {
            // SAFETY: `map` and `map_len` describe the mapping made in `Ring::map`, which
            // nothing borrows any more.
            unsafe { libc::munmap(self.map.cast(), self.map_len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_counts_wrap_around_u32() {
        assert_eq!(free_entries(8, 0, 0), 8);
        assert_eq!(free_entries(8, 5, 2), 5);
        assert_eq!(ready_entries(8, 5, 2), 3);
        // The producer index has wrapped, the consumer's not yet.
        assert_eq!(ready_entries(8, 2, u32::MAX - 2), 5);
        assert_eq!(free_entries(8, 2, u32::MAX - 2), 3);
        assert_eq!(free_entries(8, 5, u32::MAX - 2), 0);
        // Indices that claim more entries than the ring holds: no room, at most a ring full.
        assert_eq!(free_entries(8, 100, 0), 0);
        assert_eq!(ready_entries(8, 100, 0), 8);
        // A consumer "ahead" of the producer is a wrapped count far above the size.
        assert_eq!(free_entries(8, 0, 1), 0);
        assert_eq!(ready_entries(8, 0, 1), 8);
    }

    /// A ring of `size` u64 entries in heap memory, with both indices starting at `start`.
    struct Fake {
        indices: Box<[AtomicU32; 3]>,
        descs: Vec<u64>,
    }

    impl Fake {
        fn new(size: u32, start: u32) -> Fake {
            Fake {
                indices: Box::new([
                    AtomicU32::new(start),
                    AtomicU32::new(start),
                    AtomicU32::new(0),
                ]),
                descs: vec![0; size as usize],
            }
        }

        /// The producer and the consumer side of the same ring.
        fn sides(&mut self) -> (Ring, Ring) {
            let size = self.descs.len() as u32;
            let descs = self.descs.as_mut_ptr().cast::<u8>();
            let [p, c, f] = &*self.indices;
            // SAFETY: the indices and entries live in `self`, which outlives both rings in
            // every test; `size` is a power of two.
            let make = || unsafe { Ring::from_raw(p, c, f, descs, size) };
            (make().into_producer(), make().into_consumer())
        }
    }

    #[test]
    fn a_batch_reserves_only_the_free_entries_and_wraps_around_u32() {
        let mut fake = Fake::new(8, u32::MAX - 5);
        let (mut producer, mut consumer) = fake.sides();
        let mut next_value = 0u64;
        let mut expected = 0u64;
        for round in 0..10 {
            let want = 3 + round % 5;
            let n = producer.reserve(want);
            assert!(n <= want);
            let start = producer.local();
            for k in 0..n {
                producer.write_addr(start.wrapping_add(k), next_value);
                next_value += 1;
            }
            producer.submit(n);
            // Take only part of what is there, so the ring fills up.
            let ready = consumer.peek(2);
            assert!(ready <= 2);
            let start = consumer.local();
            for k in 0..ready {
                assert_eq!(consumer.read_addr(start.wrapping_add(k)), expected);
                expected += 1;
            }
            consumer.release(ready);
            assert!(producer.unconsumed() <= 8);
        }
        // The ring filled up: reservations were cut short.
        assert_eq!(producer.reserve(8), 8 - producer.unconsumed());
        // Indices wrapped past u32::MAX.
        assert!(producer.local() < 100);
        // Draining gives every remaining entry in order.
        let ready = consumer.peek(u32::MAX);
        let start = consumer.local();
        for k in 0..ready {
            assert_eq!(consumer.read_addr(start.wrapping_add(k)), expected);
            expected += 1;
        }
        consumer.release(ready);
        assert_eq!(expected, next_value);
        assert_eq!(producer.unconsumed(), 0);
        assert_eq!(producer.reserve(9), 8);
    }

    #[test]
    fn a_consumer_trusts_no_more_entries_than_the_ring_holds() {
        let mut fake = Fake::new(4, 0);
        let (_, mut consumer) = fake.sides();
        fake.indices[0].store(1000, Ordering::Release);
        assert_eq!(consumer.peek(u32::MAX), 4);
        // Reading them stays inside the array.
        for k in 0..4 {
            assert_eq!(consumer.read_addr(k), 0);
        }
    }
}
