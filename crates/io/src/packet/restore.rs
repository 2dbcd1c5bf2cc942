//! Received frames made whole again, for a bridge that must forward what was on the wire
//! ([`PacketOptions::wire_frames`]).
//!
//! With offloads on, a sender's kernel hands over frames whose TCP/UDP checksum is unfinished
//! and TCP segments of up to 64 KiB, and AF_PACKET takes a VLAN tag out of every tagged frame.
//! The socket asks for the metadata (`PACKET_VNET_HDR`: a `virtio_net_hdr` before each frame
//! in the RX ring), and for a full copy of every frame longer than a ring slot
//! (`PACKET_COPY_THRESH`: the kernel marks the slot `TP_STATUS_COPY` and queues the whole frame
//! on the socket, read here with `recv`); [`latlab_wire::offload::Finisher`] then puts the tag
//! back, finishes the checksum and cuts super-frames into the segments a NIC would have sent.
//! The full copy exists with `TPACKET_V2` only: with V3 a frame longer than a block is
//! truncated by the kernel.

use std::io;
use std::os::fd::RawFd;

use latlab_wire::offload::{Finisher, Offload, VlanTag, TPID_8021Q, VNET_HDR_LEN};

use super::ring::RxFrame;
use crate::port::WireFrameStats;

/// The state of [`PacketOptions::wire_frames`]: buffers reused frame after frame.
///
/// [`PacketOptions::wire_frames`]: super::PacketOptions::wire_frames
#[derive(Debug, Default)]
pub(super) struct Restorer {
    finisher: Finisher,
    /// Where a frame longer than a slot is read whole (grown once).
    whole: Vec<u8>,
    pub(super) stats: WireFrameStats,
}

impl super::PacketSocket {
    /// What [`PacketOptions::wire_frames`] did since the socket was opened (all 0 without it).
    pub fn wire_frame_stats(&self) -> WireFrameStats {
        self.restorer.as_ref().map(|r| r.stats).unwrap_or_default()
    }

    /// Where a frame goes in a TX slot: with [`PacketOptions::wire_frames`] after an empty
    /// `virtio_net_hdr`, which the kernel then expects on TX as well (nothing left to do).
    pub(super) fn tx_data_offset(&self) -> usize {
        let vnet = if self.restorer.is_some() {
            latlab_wire::offload::VNET_HDR_LEN
        } else {
            0
        };
        self.ring.tx_data_offset() + vnet
    }
}

/// Room for the largest frame the kernel hands over: 64 KiB of GSO payload and its headers,
/// and the `virtio_net_hdr` before them (BIG TCP super-frames are longer and arrive cut).
const WHOLE_FRAME: usize = 128 * 1024;

impl Restorer {
    /// Hands `f(frame, rx_ns, truncated)` the wire frames that the ring frame `frame` becomes;
    /// returns how many.
    pub(super) fn hand(
        &mut self,
        fd: RawFd,
        frame: &RxFrame<'_>,
        f: &mut impl FnMut(&[u8], u64, bool),
    ) -> usize {
        let mut whole_len = None;
        if frame.status & libc::TP_STATUS_COPY != 0 {
            match self.read_whole(fd) {
                Ok(len) => whole_len = Some(len),
                Err(_) => self.stats.truncated += 1,
            }
        }
        let (vnet, data, truncated) = match whole_len {
            Some(len) => (
                &self.whole[..VNET_HDR_LEN],
                &self.whole[VNET_HDR_LEN..len],
                false,
            ),
            None => {
                let vnet = frame.before.len().checked_sub(VNET_HDR_LEN);
                let vnet = vnet.map_or(&[][..], |at| &frame.before[at..]);
                (vnet, frame.data, frame.truncated)
            }
        };
        let tpid = match frame.status & libc::TP_STATUS_VLAN_TPID_VALID {
            0 => TPID_8021Q,
            _ => frame.vlan_tpid,
        };
        let tag = (frame.status & libc::TP_STATUS_VLAN_VALID != 0).then_some(VlanTag {
            tpid,
            tci: frame.vlan_tci,
        });
        let offload = match Offload::from_virtio(vnet) {
            Ok(offload) if !truncated => offload,
            // A frame cut short cannot be finished; metadata that cannot be done is not.
            _ => {
                self.stats.unfinished += 1;
                Offload::default()
            }
        };
        if tag.is_none() && offload.is_none() {
            f(data, frame.rx_ns, truncated);
            return 1;
        }
        let mut n = 0;
        match self.finisher.finish(data, tag, offload, |wire| {
            n += 1;
            f(wire, frame.rx_ns, truncated)
        }) {
            Ok(done) => {
                self.stats.tags_restored += u64::from(done.tagged);
                self.stats.checksums_finished += u64::from(done.checksummed);
                if done.segmented {
                    self.stats.super_frames += 1;
                    self.stats.segments += done.frames as u64;
                }
            }
            Err(_) => {
                self.stats.unfinished += 1;
                f(data, frame.rx_ns, truncated);
                n = 1;
            }
        }
        n
    }

    /// Reads the next whole frame the kernel queued for a slot marked `TP_STATUS_COPY`
    /// (its `virtio_net_hdr` first) into `whole`; returns its length.
    fn read_whole(&mut self, fd: RawFd) -> io::Result<usize> {
        if self.whole.len() < WHOLE_FRAME {
            self.whole.resize(WHOLE_FRAME, 0);
        }
        // SAFETY: `whole` is a live buffer of the length passed; the kernel writes at most that
        // many bytes into it.
        let rc = unsafe {
            libc::recv(
                fd,
                self.whole.as_mut_ptr().cast(),
                self.whole.len(),
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        // With MSG_TRUNC the kernel says how long the frame was, even when it did not fit.
        let len = rc as usize;
        if len < VNET_HDR_LEN || len > self.whole.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "copy cut or short",
            ));
        }
        self.stats.read_whole += 1;
        Ok(len)
    }
}
