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
    /// What [`PacketOptions::wire_frames`](super::PacketOptions::wire_frames) did since the socket was opened (all 0 without it).
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
            Ok(_) => {
                self.stats.unfinished += 1;
                self.stats.unfinished_by.cut += 1;
                Offload::default()
            }
            Err(_) => {
                self.stats.unfinished += 1;
                self.stats.unfinished_by.metadata += 1;
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
            Err(e) => {
                self.stats.unfinished += 1;
                match e {
                    latlab_wire::Error::OtherProtocol => self.stats.unfinished_by.protocol += 1,
                    _ => self.stats.unfinished_by.headers += 1,
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet + IPv4 + TCP frame with `payload` bytes, its checksum left to the device.
    fn tcp_frame(payload: usize) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        let total = (40 + payload) as u16;
        f.extend_from_slice(&[0x45, 0, (total >> 8) as u8, total as u8, 0, 1, 0x40, 0]);
        f.extend_from_slice(&[64, 6, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2]);
        f.extend_from_slice(&[0x9c, 0x40, 0x14, 0x51, 0, 0, 0, 1, 0, 0, 0, 1, 0x50, 0x18]);
        f.extend_from_slice(&[1, 0xf6, 0, 0, 0, 0]);
        f.extend((0..payload).map(|i| i as u8));
        f
    }

    fn ring_frame<'a>(data: &'a [u8], before: &'a [u8], status: u32) -> RxFrame<'a> {
        RxFrame {
            data,
            rx_ns: 7,
            // The kernel makes a whole copy of the frames it cuts.
            truncated: status & libc::TP_STATUS_COPY != 0,
            status,
            vlan_tci: 100,
            vlan_tpid: 0x88a8,
            before,
        }
    }

    fn hand(restorer: &mut Restorer, frame: &RxFrame<'_>) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let n = restorer.hand(-1, frame, &mut |f, rx_ns, _| {
            assert_eq!(rx_ns, 7, "every wire frame keeps the ring frame's stamp");
            out.push(f.to_vec())
        });
        assert_eq!(n, out.len());
        out
    }

    #[test]
    fn a_tag_the_kernel_took_out_goes_back_with_the_tpid_it_had() {
        let mut restorer = Restorer::default();
        let frame = tcp_frame(10);
        let status = libc::TP_STATUS_VLAN_VALID | libc::TP_STATUS_VLAN_TPID_VALID;
        let out = hand(&mut restorer, &ring_frame(&frame, &[0; 10], status));
        assert_eq!(out[0][12..16], [0x88, 0xa8, 0, 100]);
        // Without TP_STATUS_VLAN_TPID_VALID the tag is 802.1Q.
        let out = hand(&mut restorer, &ring_frame(&frame, &[0; 10], status & !64));
        assert_eq!(out[0][12..16], [0x81, 0x00, 0, 100]);
        assert_eq!(restorer.stats.tags_restored, 2);
    }

    #[test]
    fn the_metadata_before_the_frame_makes_a_super_frame_segments() {
        let mut restorer = Restorer::default();
        let frame = tcp_frame(3000);
        // NEEDS_CSUM, GSO TCPV4, gso_size 1448, csum_start 34, csum_offset 16.
        let vnet = [1, 1, 54, 0, 0xa8, 0x05, 34, 0, 16, 0];
        let out = hand(&mut restorer, &ring_frame(&frame, &vnet, 0));
        assert_eq!(out.len(), 3);
        assert!(out.iter().all(|f| f.len() <= 1502));
        let stats = restorer.stats;
        assert_eq!((stats.super_frames, stats.segments), (1, 3));
        assert_eq!(stats.checksums_finished, 1);
    }

    #[test]
    fn frames_that_cannot_be_finished_are_handed_on_as_they_came_and_counted() {
        let mut restorer = Restorer::default();
        let frame = tcp_frame(100);
        // UFO, which nothing here does.
        let ufo = [1, 3, 0, 0, 0xa8, 0x05, 34, 0, 16, 0];
        let out = hand(&mut restorer, &ring_frame(&frame, &ufo, 0));
        assert_eq!(out, std::slice::from_ref(&frame));
        // A whole copy announced but not there (here: no socket): the cut frame goes on.
        let out = hand(
            &mut restorer,
            &ring_frame(&frame, &[0; 10], libc::TP_STATUS_COPY),
        );
        assert_eq!(out, std::slice::from_ref(&frame));
        assert_eq!(restorer.stats.truncated, 1);
        // GSO TCPV4 metadata over a TCP header whose data offset says 8 bytes: the fields a
        // segment rewrites are not in it (what the offload fuzz target found).
        let mut short = frame.clone();
        short[14 + 20 + 12] = 0x20;
        let gso = [1, 1, 54, 0, 0x0b, 0, 34, 0, 16, 0];
        assert_eq!(hand(&mut restorer, &ring_frame(&short, &gso, 0)), [short]);
        // GSO TCPV6 metadata over an IPv4 frame.
        let v6 = [1, 4, 54, 0, 0x0b, 0, 34, 0, 16, 0];
        assert_eq!(hand(&mut restorer, &ring_frame(&frame, &v6, 0)), [frame]);
        assert_eq!(restorer.stats.unfinished, 4);
        let by = restorer.stats.unfinished_by;
        assert_eq!(
            (by.metadata, by.cut, by.headers, by.protocol),
            (1, 1, 1, 1),
            "{by:?}"
        );
    }
}
