//! The memory of `recvmmsg`/`sendmmsg` batches: fixed slots allocated once, filled and
//! drained by the batch calls of [`super::UdpSocket`] without allocating.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::SocketAddr;
use std::os::fd::RawFd;

use socket2::SockAddr;

use super::{socket_addr, TimestampSource};
use crate::clock::timespec_ns;

/// One datagram of a [`RecvBatch`].
#[derive(Clone, Copy, Debug)]
pub struct Received<'a> {
    /// The bytes received (at most the slot size).
    pub data: &'a [u8],
    /// Who sent it.
    pub from: SocketAddr,
    /// When it arrived: the kernel's software stamp, or the user-space clock right after the
    /// receive call, per the socket's [`TimestampSource`].
    pub rx_ns: u64,
    /// The datagram was larger than the slot and was cut.
    pub truncated: bool,
}

/// Memory for receiving up to `capacity` datagrams of up to `slot_size` bytes in one call.
#[derive(Debug)]
pub struct RecvBatch {
    pub(crate) slot_size: usize,
    pub(crate) data: Vec<u8>,
    pub(crate) addrs: Vec<libc::sockaddr_storage>,
    pub(crate) control: Vec<[u64; 8]>,
    pub(crate) iovs: Vec<libc::iovec>,
    pub(crate) hdrs: Vec<libc::mmsghdr>,
    pub(crate) stamps: Vec<u64>,
    pub(crate) count: usize,
}

// SAFETY: the raw pointers inside `iovs` and `hdrs` only ever point into this batch's own
// vectors and are rewritten by `prepare` before every use, so moving the batch to another
// thread cannot leave them pointing at memory another thread owns.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// Memory for `capacity` datagrams (at least 1) of `slot_size` bytes each.
    pub fn new(capacity: usize, slot_size: usize) -> RecvBatch {
        let capacity = capacity.max(1);
        RecvBatch {
            slot_size,
            data: vec![0; capacity * slot_size],
            // SAFETY: sockaddr_storage is plain data; all zeroes is valid.
            addrs: vec![unsafe { zeroed() }; capacity],
            control: vec![[0; 8]; capacity],
            // SAFETY: iovec and mmsghdr are plain data; null pointers and zero lengths are
            // valid values and are replaced by `prepare` before use.
            iovs: vec![unsafe { zeroed() }; capacity],
            // SAFETY: as above.
            hdrs: vec![unsafe { zeroed() }; capacity],
            stamps: vec![0; capacity],
            count: 0,
        }
    }

    /// How many datagrams one call can receive.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// How many datagrams the last call received.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the last call received nothing.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub(crate) fn prepare(&mut self) {
        let base = self.data.as_mut_ptr();
        for i in 0..self.hdrs.len() {
            self.iovs[i] = libc::iovec {
                // SAFETY: slot i lies inside `data`, which holds capacity * slot_size bytes.
                iov_base: unsafe { base.add(i * self.slot_size) }.cast(),
                iov_len: self.slot_size,
            };
            let hdr = &mut self.hdrs[i].msg_hdr;
            hdr.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
            hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            hdr.msg_iov = &mut self.iovs[i];
            hdr.msg_iovlen = 1;
            hdr.msg_control = self.control[i].as_mut_ptr().cast();
            hdr.msg_controllen = size_of::<[u64; 8]>() as _;
            hdr.msg_flags = 0;
            self.hdrs[i].msg_len = 0;
        }
    }

    pub(crate) fn finish(&mut self, count: usize, source: TimestampSource, user_ns: u64) {
        self.count = count;
        for i in 0..count {
            let mut stamp = user_ns;
            if source == TimestampSource::KernelSoftware {
                let hdr = &self.hdrs[i].msg_hdr;
                // SAFETY: the kernel filled `hdr` and its control buffer; the CMSG macros stay
                // within `msg_controllen`, and the read is of the type SCM_TIMESTAMPING carries.
                unsafe {
                    let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
                    while !cmsg.is_null() {
                        if (*cmsg).cmsg_level == libc::SOL_SOCKET
                            && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPING
                        {
                            let ts: [libc::timespec; 3] =
                                std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                            let ns = timespec_ns(&ts[0]);
                            if ns != 0 {
                                stamp = ns;
                            }
                        }
                        cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
                    }
                }
            }
            self.stamps[i] = stamp;
        }
    }

    /// The datagrams the last call received.
    pub fn iter(&self) -> impl Iterator<Item = Received<'_>> + '_ {
        (0..self.count).map(move |i| self.get(i))
    }

    pub(crate) fn get(&self, i: usize) -> Received<'_> {
        let hdr = &self.hdrs[i];
        let len = (hdr.msg_len as usize).min(self.slot_size);
        let start = i * self.slot_size;
        Received {
            data: &self.data[start..start + len],
            from: socket_addr(&self.addrs[i])
                .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
            rx_ns: self.stamps[i],
            truncated: hdr.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
        }
    }
}

/// Datagrams queued for one `sendmmsg` call.
#[derive(Debug)]
pub struct SendBatch {
    pub(crate) slot_size: usize,
    pub(crate) data: Vec<u8>,
    pub(crate) lens: Vec<usize>,
    pub(crate) addrs: Vec<Option<SockAddr>>,
    pub(crate) iovs: Vec<libc::iovec>,
    pub(crate) hdrs: Vec<libc::mmsghdr>,
    pub(crate) len: usize,
}

impl SendBatch {
    /// The destination of the `i`-th queued datagram (`0.0.0.0:0` for the connected peer).
    pub(crate) fn destination(&self, i: usize) -> SocketAddr {
        self.addrs
            .get(i)
            .and_then(|a| a.as_ref())
            .and_then(|a| a.as_socket())
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// One `sendmmsg` of everything queued, without blocking: the number of datagrams that
    /// left (removed from the batch), or the error of the first one when none did.
    pub(crate) fn send_raw(&mut self, fd: RawFd) -> Result<usize, io::Error> {
        if self.len == 0 {
            return Ok(0);
        }
        self.prepare();
        // SAFETY: `prepare` pointed the first `self.len` headers at buffers and addresses
        // owned by `self`, which outlives the call.
        let rc = unsafe {
            libc::sendmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                self.len as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        self.consume(rc as usize);
        Ok(rc as usize)
    }

    /// Removes the first `n` queued datagrams (sent one at a time, or dropped).
    pub(crate) fn drop_first(&mut self, n: usize) {
        self.consume(n);
    }

    /// The `i`-th queued datagram's bytes and destination.
    pub(crate) fn get(&self, i: usize) -> Option<(&[u8], Option<&SockAddr>)> {
        (i < self.len).then(|| {
            let start = i * self.slot_size;
            (
                &self.data[start..start + self.lens[i]],
                self.addrs[i].as_ref(),
            )
        })
    }
}

// SAFETY: the raw pointers inside `iovs` and `hdrs` only point into this batch's own vectors
// and are rewritten by `prepare` before every use.
unsafe impl Send for SendBatch {}

impl SendBatch {
    /// Room for `capacity` datagrams (at least 1) of up to `slot_size` bytes each. Slots start
    /// zeroed; bytes a caller does not write keep their old value.
    pub fn new(capacity: usize, slot_size: usize) -> SendBatch {
        let capacity = capacity.max(1);
        SendBatch {
            slot_size,
            data: vec![0; capacity * slot_size],
            lens: vec![0; capacity],
            addrs: vec![None; capacity],
            // SAFETY: iovec and mmsghdr are plain data; zeroes are valid and are replaced
            // by `prepare` before use.
            iovs: vec![unsafe { zeroed() }; capacity],
            // SAFETY: as above.
            hdrs: vec![unsafe { zeroed() }; capacity],
            len: 0,
        }
    }

    /// How many datagrams fit.
    pub fn capacity(&self) -> usize {
        self.lens.len()
    }

    /// How many datagrams are queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether no more datagrams fit.
    pub fn is_full(&self) -> bool {
        self.len == self.capacity()
    }

    /// Queues a datagram of `len` bytes to `to` (the connected peer when `None`) and returns
    /// its slot to write into, or `None` when the batch is full. `len` is capped at the slot
    /// size.
    pub fn push(&mut self, len: usize, to: Option<SocketAddr>) -> Option<&mut [u8]> {
        if self.is_full() {
            return None;
        }
        let i = self.len;
        let len = len.min(self.slot_size);
        self.lens[i] = len;
        self.addrs[i] = to.map(SockAddr::from);
        self.len += 1;
        let start = i * self.slot_size;
        Some(&mut self.data[start..start + len])
    }

    /// The bytes of the `i`-th queued datagram, to change them before sending.
    pub fn slot_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        if i >= self.len {
            return None;
        }
        let start = i * self.slot_size;
        Some(&mut self.data[start..start + self.lens[i]])
    }

    /// Drops everything queued.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    pub(crate) fn prepare(&mut self) {
        let base = self.data.as_mut_ptr();
        for i in 0..self.len {
            self.iovs[i] = libc::iovec {
                // SAFETY: slot i lies inside `data`, which holds capacity * slot_size bytes.
                iov_base: unsafe { base.add(i * self.slot_size) }.cast(),
                iov_len: self.lens[i],
            };
            let hdr = &mut self.hdrs[i].msg_hdr;
            match &self.addrs[i] {
                Some(a) => {
                    hdr.msg_name = a.as_ptr().cast::<libc::c_void>().cast_mut();
                    hdr.msg_namelen = a.len();
                }
                None => {
                    hdr.msg_name = std::ptr::null_mut();
                    hdr.msg_namelen = 0;
                }
            }
            hdr.msg_iov = &mut self.iovs[i];
            hdr.msg_iovlen = 1;
            hdr.msg_control = std::ptr::null_mut();
            hdr.msg_controllen = 0;
            hdr.msg_flags = 0;
            self.hdrs[i].msg_len = 0;
        }
    }

    /// Removes the first `n` queued datagrams, keeping the order of the rest.
    pub(crate) fn consume(&mut self, n: usize) {
        let n = n.min(self.len);
        if n == self.len {
            self.len = 0;
            return;
        }
        for j in n..self.len {
            let (src, dst) = (j * self.slot_size, (j - n) * self.slot_size);
            let len = self.lens[j];
            self.data.copy_within(src..src + len, dst);
            self.lens[j - n] = len;
            self.addrs[j - n] = self.addrs[j].take();
        }
        self.len -= n;
    }
}
