//! The pipe's frame buffers: one per frame, sized to it, reused by size.

/// The smallest buffer, 64 bytes (the shortest Ethernet frame), is `1 << MIN_BITS`.
const MIN_BITS: u32 = 6;

/// Size classes: 64 bytes, 128, … 64 KiB. The last class also takes longer frames: its
/// buffers start at 64 KiB and grow for them.
const CLASSES: usize = 11;

/// The class whose buffers are the smallest that hold `len` bytes (the last one above 32 KiB).
#[inline]
fn class_for_len(len: usize) -> usize {
    let bits = (usize::BITS - len.saturating_sub(1).leading_zeros()).max(MIN_BITS);
    ((bits - MIN_BITS) as usize).min(CLASSES - 1)
}

/// The class of a buffer of `capacity` bytes (made by [`Pool::take`]).
#[inline]
fn class_of_capacity(capacity: usize) -> usize {
    let bits = (usize::BITS - 1 - capacity.max(1).leading_zeros()).max(MIN_BITS);
    ((bits - MIN_BITS) as usize).min(CLASSES - 1)
}

/// Every buffer of a pipe, by index, with the idle ones listed by size class.
///
/// Invariants: a buffer of class `c < CLASSES - 1` has capacity exactly `64 << c`, one of the
/// last class at least 64 KiB; `idle[c]` lists indices of idle buffers of class `c`, each
/// once; `idle_count` is their number; `buffer_bytes` is the sum of the capacities of
/// `buffers`.
#[derive(Debug, Default)]
pub(super) struct Pool {
    pub(super) buffers: Vec<Vec<u8>>,
    pub(super) idle: IdleLists,
}

/// The idle buffers' indices by class, apart from the buffers so that a departure can give
/// its buffer back while the frame's bytes are lent out.
#[derive(Debug, Default)]
pub(super) struct IdleLists {
    by_class: [Vec<usize>; CLASSES],
    count: usize,
    buffer_bytes: usize,
}

impl IdleLists {
    /// Gives back buffer `index` of `capacity` bytes.
    #[inline]
    pub(super) fn give_back(&mut self, index: usize, capacity: usize) {
        self.by_class[class_of_capacity(capacity)].push(index);
        self.count += 1;
    }
}

impl Pool {
    /// Copies `frame` into an idle buffer of its class, or a new one, and returns the
    /// buffer's index.
    #[inline]
    pub(super) fn hold(&mut self, frame: &[u8]) -> usize {
        let class = class_for_len(frame.len());
        let index = match self.idle.by_class[class].pop() {
            Some(index) => {
                self.idle.count -= 1;
                index
            }
            None => {
                let buffer = Vec::with_capacity(64 << class);
                self.idle.buffer_bytes += buffer.capacity();
                self.buffers.push(buffer);
                self.buffers.len() - 1
            }
        };
        let buffer = &mut self.buffers[index];
        let before = buffer.capacity();
        buffer.clear();
        buffer.extend_from_slice(frame);
        // Only a buffer of the last class grows, for a frame over 64 KiB.
        self.idle.buffer_bytes += buffer.capacity() - before;
        index
    }

    /// Idle buffers.
    pub(super) fn idle_buffers(&self) -> usize {
        self.idle.count
    }

    /// Bytes of every buffer (idle or holding a frame) and of the lists that index them.
    pub(super) fn held_bytes(&self) -> usize {
        let lists: usize = self.idle.by_class.iter().map(Vec::capacity).sum();
        self.idle.buffer_bytes
            + self.buffers.capacity() * std::mem::size_of::<Vec<u8>>()
            + lists * std::mem::size_of::<usize>()
    }

    /// With every buffer idle, frees all but `keep` of them, the smallest kept, and
    /// renumbers the rest.
    pub(super) fn trim_idle(&mut self, keep: usize) {
        debug_assert_eq!(self.idle.count, self.buffers.len(), "a buffer is out");
        let mut kept = Vec::with_capacity(keep.min(self.buffers.len()));
        for class in 0..CLASSES {
            let list = std::mem::take(&mut self.idle.by_class[class]);
            for index in list {
                if kept.len() < keep {
                    self.idle.by_class[class].push(kept.len());
                    kept.push(std::mem::take(&mut self.buffers[index]));
                }
            }
        }
        self.idle.count = kept.len();
        self.idle.buffer_bytes = kept.iter().map(Vec::capacity).sum();
        self.buffers = kept;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capacity_for(pool: &mut Pool, len: usize) -> usize {
        let index = pool.hold(&vec![0; len]);
        let capacity = pool.buffers[index].capacity();
        pool.idle.give_back(index, capacity);
        capacity
    }

    #[test]
    fn a_buffer_is_the_smallest_power_of_two_from_64_bytes_that_holds_the_frame() {
        let mut pool = Pool::default();
        for (len, capacity) in [
            (0, 64),
            (1, 64),
            (64, 64),
            (65, 128),
            (1500, 2048),
            (65536, 65536),
        ] {
            assert_eq!(capacity_for(&mut pool, len), capacity, "{len} bytes");
        }
        // One per class used (64, 128, 2048, 65536 bytes), each reused by the next frame of
        // its class.
        assert_eq!(pool.idle_buffers(), 4);
        // Longer frames grow a buffer of the last class.
        assert!(capacity_for(&mut pool, 65537) >= 65537);
        assert_eq!(pool.idle_buffers(), 4);
        assert_eq!(
            pool.idle.buffer_bytes,
            pool.buffers.iter().map(Vec::capacity).sum::<usize>()
        );
    }

    #[test]
    fn trimming_keeps_the_smallest_buffers_and_their_bytes() {
        let mut pool = Pool::default();
        let held: Vec<usize> = [1500, 60, 100, 60]
            .iter()
            .map(|&n| pool.hold(&vec![1; n]))
            .collect();
        for index in held {
            let capacity = pool.buffers[index].capacity();
            pool.idle.give_back(index, capacity);
        }
        pool.trim_idle(2);
        assert_eq!(pool.idle_buffers(), 2);
        let capacities: Vec<usize> = pool.buffers.iter().map(Vec::capacity).collect();
        assert_eq!(capacities, [64, 64]);
        assert_eq!(pool.idle.buffer_bytes, 128);
        assert_eq!(capacity_for(&mut pool, 10), 64, "a kept buffer is reused");
        assert_eq!(pool.buffers.len(), 2);
    }
}
