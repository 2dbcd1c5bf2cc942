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

/// Every buffer of a pipe, by index, with the idle ones listed by size class, and the most
/// buffers in use over the current window ([`Pool::roll_window`]), which decides how many idle
/// ones are worth keeping.
///
/// Invariants: a buffer of class `c < CLASSES - 1` has capacity exactly `64 << c`, one of the
/// last class at least 64 KiB; a vacant slot (its buffer freed while others were held, so the
/// indices stay) has capacity 0 and is listed once in `vacant`; the idle lists hold indices of
/// idle buffers of their class, each once in one list; `idle.count` is their number;
/// `idle.buffer_bytes` is the sum of the capacities of `buffers`; `peak` is at least the
/// buffers in use now.
#[derive(Debug, Default)]
pub(super) struct Pool {
    pub(super) buffers: Vec<Vec<u8>>,
    pub(super) idle: IdleLists,
    /// Slots whose buffer was freed while frames were held in others, highest first (the
    /// lowest is filled first).
    vacant: Vec<usize>,
    /// The most buffers in use at once since the current window began.
    peak: usize,
    /// When the current window ends, ns (0 before the first window).
    window_ends_ns: u64,
}

/// The idle buffers' indices by class, apart from the buffers so that a departure can give
/// its buffer back while the frame's bytes are lent out.
///
/// After the pool freed buffers around held ones, a buffer given back at an index at or above
/// `ceiling` goes to `above`, taken only when `by_class` has none of its class: the frames
/// then move to the lowest slots and those above are freed at the next window's end, so the
/// index shrinks back as well.
#[derive(Debug, Default)]
pub(super) struct IdleLists {
    by_class: [Vec<usize>; CLASSES],
    above: [Vec<usize>; CLASSES],
    ceiling: Option<usize>,
    count: usize,
    buffer_bytes: usize,
}

impl IdleLists {
    /// Gives back buffer `index` of `capacity` bytes.
    #[inline]
    pub(super) fn give_back(&mut self, index: usize, capacity: usize) {
        let class = class_of_capacity(capacity);
        match self.ceiling {
            Some(ceiling) if index >= ceiling => self.above[class].push(index),
            _ => self.by_class[class].push(index),
        }
        self.count += 1;
    }

    /// An idle buffer of `class`, the lowest lists first.
    #[inline]
    fn take(&mut self, class: usize) -> Option<usize> {
        let index = self.by_class[class]
            .pop()
            .or_else(|| self.above[class].pop())?;
        self.count -= 1;
        Some(index)
    }
}

impl Pool {
    /// Copies `frame` into an idle buffer of its class, or a new one, and returns the
    /// buffer's index.
    #[inline]
    pub(super) fn hold(&mut self, frame: &[u8]) -> usize {
        let class = class_for_len(frame.len());
        let index = match self.idle.take(class) {
            Some(index) => index,
            None => {
                let buffer = Vec::with_capacity(64 << class);
                self.idle.buffer_bytes += buffer.capacity();
                match self.vacant.pop() {
                    Some(slot) => {
                        self.buffers[slot] = buffer;
                        slot
                    }
                    None => {
                        self.buffers.push(buffer);
                        self.buffers.len() - 1
                    }
                }
            }
        };
        self.peak = self.peak.max(self.in_use());
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

    /// Buffers holding a frame.
    #[inline]
    pub(super) fn in_use(&self) -> usize {
        self.buffers.len() - self.vacant.len() - self.idle.count
    }

    /// Bytes of every buffer (idle or holding a frame) and of the lists that index them.
    pub(super) fn held_bytes(&self) -> usize {
        let lists: usize =
            self.idle.by_class.iter().map(Vec::capacity).sum::<usize>() + self.vacant.capacity();
        self.idle.buffer_bytes
            + self.buffers.capacity() * std::mem::size_of::<Vec<u8>>()
            + lists * std::mem::size_of::<usize>()
    }

    /// At `now`, if the current window is over: starts the next one, `window_ns` long, and
    /// returns the most buffers that were in use at once during the one that ended (`None`
    /// while it runs). A window with no call in it is one without traffic: the next starts
    /// from the buffers in use now.
    #[inline]
    pub(super) fn roll_window(&mut self, now: u64, window_ns: u64) -> Option<usize> {
        if now < self.window_ends_ns {
            return None;
        }
        let peak = self.peak;
        self.peak = self.in_use();
        self.window_ends_ns = now.saturating_add(window_ns);
        Some(peak)
    }

    /// Frees idle buffers until at most `keep` buffers are left (in use or idle), the highest
    /// indices first, and every idle one above the ceiling the last call set; returns how many
    /// it freed. With every buffer idle the rest are renumbered ([`Pool::trim_idle`]); with
    /// frames held their slots stay, vacant, except at the end, and buffers given back at
    /// `keep` or above are freed by the next call.
    pub(super) fn release_above(&mut self, keep: usize) -> usize {
        let live = self.buffers.len() - self.vacant.len();
        if self.in_use() == 0 {
            if live <= keep {
                self.merge_above();
                return 0;
            }
            self.trim_idle(keep);
            return live - keep;
        }
        if live <= keep && self.idle.above.iter().all(Vec::is_empty) {
            return 0;
        }
        let mut excess = live.saturating_sub(keep);
        let mut freed = 0;
        for class in (0..CLASSES).rev() {
            // Those above the ceiling first, whatever the count: they hold the index long.
            let above = std::mem::take(&mut self.idle.above[class]);
            let list = &mut self.idle.by_class[class];
            // Highest index first: those are freed, so the slots at the end fall vacant, and
            // the lowest are taken next (`take` pops from the end).
            list.sort_unstable_by(|a, b| b.cmp(a));
            let n = excess.saturating_sub(above.len()).min(list.len());
            for index in above.into_iter().chain(list.drain(..n)) {
                let buffer = std::mem::take(&mut self.buffers[index]);
                self.idle.buffer_bytes -= buffer.capacity();
                self.vacant.push(index);
                freed += 1;
                excess = excess.saturating_sub(1);
            }
            list.shrink_to_fit();
            self.idle.above[class] = Vec::new();
        }
        self.idle.count -= freed;
        // Vacant slots at the end go, so the index shrinks too.
        while self.buffers.last().is_some_and(|b| b.capacity() == 0) {
            self.buffers.pop();
        }
        let len = self.buffers.len();
        self.vacant.retain(|&slot| slot < len);
        // The lowest slot is filled first, for the same reason.
        self.vacant.sort_unstable_by(|a, b| b.cmp(a));
        self.vacant.shrink_to_fit();
        self.buffers.shrink_to_fit();
        self.idle.ceiling = (!self.vacant.is_empty()).then_some(keep);
        freed
    }

    /// Puts the idle buffers above the ceiling back among the others and lifts it.
    fn merge_above(&mut self) {
        for class in 0..CLASSES {
            let above = std::mem::take(&mut self.idle.above[class]);
            self.idle.by_class[class].extend(above);
        }
        self.idle.ceiling = None;
    }

    /// With every buffer idle, frees all but `keep` of them, the smallest kept, and
    /// renumbers the rest.
    pub(super) fn trim_idle(&mut self, keep: usize) {
        debug_assert_eq!(
            self.idle.count + self.vacant.len(),
            self.buffers.len(),
            "a buffer is out"
        );
        self.merge_above();
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
        self.vacant = Vec::new();
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
    fn idle_buffers_are_freed_around_held_ones_and_their_slots_refilled() {
        let mut pool = Pool::default();
        let held: Vec<usize> = (0..10).map(|_| pool.hold(&[1; 1500])).collect();
        // Frames 0..8 leave; 8 and 9 stay held.
        for &index in &held[..8] {
            pool.idle.give_back(index, 2048);
        }
        assert_eq!((pool.in_use(), pool.idle_buffers()), (2, 8));
        assert_eq!(pool.release_above(4), 6);
        assert_eq!((pool.in_use(), pool.idle_buffers()), (2, 2));
        assert_eq!(pool.idle.buffer_bytes, 4 * 2048);
        // The held frames' buffers kept their indices and bytes.
        assert_eq!(pool.buffers[8].capacity(), 2048);
        assert_eq!(pool.buffers[9].capacity(), 2048);
        // The lowest idle buffers were kept, so the next frames take them, then vacant slots.
        let next: Vec<usize> = (0..4).map(|_| pool.hold(&[2; 1500])).collect();
        assert_eq!(next, [0, 1, 2, 3]);
        assert_eq!(pool.in_use(), 6);
        assert_eq!(
            pool.idle.buffer_bytes,
            pool.buffers.iter().map(Vec::capacity).sum::<usize>()
        );
    }

    #[test]
    fn freeing_with_nothing_held_renumbers_and_drops_vacant_slots() {
        let mut pool = Pool::default();
        let held: Vec<usize> = (0..6).map(|_| pool.hold(&[1; 60])).collect();
        for &index in &held[..5] {
            pool.idle.give_back(index, 64);
        }
        pool.release_above(2);
        pool.idle.give_back(held[5], 64);
        assert_eq!(pool.in_use(), 0);
        assert_eq!(pool.release_above(1), 1);
        assert_eq!((pool.buffers.len(), pool.idle_buffers()), (1, 1));
        assert_eq!(pool.hold(&[3; 10]), 0);
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
