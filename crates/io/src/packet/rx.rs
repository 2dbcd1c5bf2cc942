//! The receive side of [`PacketSocket`]: frames out of the RX ring (TPACKET_V2 slots or V3
//! blocks), through the restorer when the socket hands on wire frames (`restore.rs`), and the
//! ring's units given back to the kernel.

use std::io;
use std::os::fd::AsRawFd;
use std::ptr;
use std::sync::atomic::{fence, Ordering};

use super::ring::rx_unit_is_ours;
use super::ring::{self, read_slot, walk_block};
use super::{PacketSocket, RxRing};
use crate::port::RecvBatch;

impl PacketSocket {
    /// Hands every frame now ready in the RX ring to `f(frame, kernel_rx_ns, truncated)` and
    /// returns their slots (V2) or blocks (V3) to the kernel; returns how many frames were
    /// handed. Never blocks; `Ok(0)` when no frame is ready.
    ///
    /// Frames start with the Ethernet header. Without [`PacketOptions::wire_frames`](super::PacketOptions::wire_frames) they are
    /// as the kernel holds them: an 802.1Q tag is not in the frame (the kernel takes it out),
    /// checksums may be unfinished and TCP segments up to 64 KiB long; with it, they are as
    /// they were on the wire (one ring frame may become several), and the count is of those.
    ///
    /// `kernel_rx_ns` is the kernel's software receive stamp (`CLOCK_REALTIME` ns, as
    /// [`crate::clock::now_ns`]), taken when the frame entered the ring. `truncated` is true
    /// when the frame was longer than what the ring kept (with V2 frames longer than
    /// `frame_size - 66`, with V3 only frames larger than a block). Frames come in the order
    /// the kernel received them. At most one pass over the ring is made per call, so a sender
    /// that keeps the ring full cannot keep the call going forever.
    pub fn recv_batch(&mut self, f: impl FnMut(&[u8], u64, bool)) -> io::Result<usize> {
        Ok(self.recv_batch_max(usize::MAX, f)?.frames)
    }

    /// As [`PacketSocket::recv_batch`], handing the frames of at most `max` ring frames (V3:
    /// whole blocks), and giving their slots or blocks back to the kernel at once after the
    /// last, timed.
    pub fn recv_batch_max(
        &mut self,
        max: usize,
        mut f: impl FnMut(&[u8], u64, bool),
    ) -> io::Result<RecvBatch> {
        let fd = self.fd.as_raw_fd();
        let mut restorer = self.restorer.take();
        let mut handed = 0;
        let mut hand = |frame: &ring::RxFrame<'_>| match restorer.as_mut() {
            Some(r) => handed += r.hand(fd, frame, &mut f),
            None => {
                f(frame.data, frame.rx_ns, frame.truncated);
                handed += 1;
            }
        };
        let (mut frames, mut units) = (0, 0);
        while units < self.rx_unit_count && frames < max {
            let i = (self.rx_next + units) % self.rx_unit_count;
            let Some(n) = self.read_unit(i, &mut hand) else {
                break;
            };
            frames += n;
            units += 1;
        }
        let start = crate::tsc::read();
        for _ in 0..units {
            self.release_next_unit();
        }
        let release_cycles = crate::tsc::read().wrapping_sub(start);
        self.restorer = restorer;
        Ok(RecvBatch {
            frames: handed,
            release_cycles,
        })
    }

    /// Hands the frames of RX unit `i` to `f` and returns how many; `None` when the kernel has
    /// not handed it over. A unit out of bounds is counted in `corrupt_blocks`.
    fn read_unit(&self, i: usize, f: &mut impl FnMut(&ring::RxFrame<'_>)) -> Option<usize> {
        let unit = self.rx_unit(i);
        if !rx_unit_is_ours(unit, self.ring.rx_status_offset()) {
            return None;
        }
        // SAFETY: the unit lies inside the mapping (`rx_unit`), and its status says the
        // kernel handed it to user space: it does not write to it until
        // `release_next_unit` hands it back, after this slice is gone.
        let bytes = unsafe { std::slice::from_raw_parts(unit, self.rx_unit_size) };
        let (frames, intact) = match self.ring {
            RxRing::V2 => match read_slot(bytes) {
                Some(frame) => {
                    f(&frame);
                    (1, true)
                }
                None => (0, false),
            },
            RxRing::V3 => match walk_block(bytes, f) {
                Ok(n) => (n, true),
                Err(n) => (n, false),
            },
        };
        if !intact {
            self.corrupt_blocks.set(self.corrupt_blocks.get() + 1);
        }
        Some(frames)
    }

    /// Gives the next RX unit back to the kernel.
    fn release_next_unit(&mut self) {
        let unit = self.rx_unit(self.rx_next);
        // Every read of the unit happens before the kernel may write it again.
        fence(Ordering::Release);
        // SAFETY: the status word lies inside the unit, 4-byte aligned (units are aligned to
        // at least 128 bytes); a volatile write because the kernel reads it concurrently.
        unsafe {
            ptr::write_volatile(
                unit.add(self.ring.rx_status_offset()).cast::<u32>(),
                libc::TP_STATUS_KERNEL,
            )
        };
        self.rx_next = (self.rx_next + 1) % self.rx_unit_count;
    }
}
