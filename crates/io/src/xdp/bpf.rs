//! The XDP side of AF_XDP: a small eBPF instruction encoder, the two programs latlab uses,
//! the `XSKMAP` they redirect into, and the `bpf_link` that attaches them to an interface.
//!
//! Everything goes through the `bpf()` system call with `#[repr(C)]` prefixes of
//! `union bpf_attr` (`linux/bpf.h`): the kernel zero-fills whatever part of the union a
//! command is not given.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::iface::{at, interface_index};

mod forward;
mod meter;

pub use forward::{ForwardCounter, ForwardCounts, XdpForward};
use meter::{MeterFds, SourceMeter};
pub use meter::{SourceDrops, SourceLimit, SOURCES, SOURCE_BURST};

// `enum bpf_cmd`.
const BPF_MAP_CREATE: u32 = 0;
const BPF_MAP_UPDATE_ELEM: u32 = 2;
const BPF_PROG_LOAD: u32 = 5;
const BPF_LINK_CREATE: u32 = 28;
/// `BPF_MAP_TYPE_XSKMAP`: queue id to AF_XDP socket.
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type` `BPF_XDP`.
const BPF_XDP: u32 = 37;
/// `linux/if_link.h`: generic (skb) and native (driver) XDP.
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// `BPF_FUNC_redirect_map`.
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `BPF_FUNC_ktime_get_ns`: `CLOCK_MONOTONIC` nanoseconds.
const BPF_FUNC_KTIME_GET_NS: i32 = 5;
/// `BPF_FUNC_xdp_adjust_meta`: grows the metadata area in front of the frame.
const BPF_FUNC_XDP_ADJUST_META: i32 = 54;
/// Bytes of metadata each redirected frame carries in front of it: the arrival stamp
/// (`CLOCK_MONOTONIC` ns, u64) and [`STAMP_MAGIC`] (u32), then 4 bytes of padding.
pub(crate) const META_LEN: usize = 16;
/// Marks metadata written by this program ("LLTS" as the bytes of a native u32).
pub(crate) const STAMP_MAGIC: u32 = u32::from_ne_bytes(*b"LLTS");
/// `src_reg` of a `ld_imm64` whose immediate is a map file descriptor.
const BPF_PSEUDO_MAP_FD: u8 = 1;
/// XDP return codes.
const XDP_PASS: i32 = 2;
/// Queues the `XSKMAP` has room for; a frame from a higher queue is passed to the stack.
const XSKMAP_ENTRIES: u32 = 64;
/// Bytes of verifier log kept when a load fails.
const LOG_SIZE: usize = 1 << 16;

/// `struct xdp_md` field offsets: what an XDP program reads from its context.
mod xdp_md {
    pub(super) const DATA: i16 = 0;
    pub(super) const DATA_END: i16 = 4;
    pub(super) const DATA_META: i16 = 8;
    pub(super) const RX_QUEUE_INDEX: i16 = 16;
}

/// Which frames an [`XdpProgram`] takes from the kernel stack into the AF_XDP socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Redirect {
    /// IPv4 UDP datagrams to this destination port, unfragmented and without IP options;
    /// every other frame (ARP, ICMP, other ports, IPv6) goes on to the kernel stack, so the
    /// interface keeps its addresses, neighbours and other sockets.
    Endpoint {
        /// The UDP destination port taken, in host order.
        udp_port: u16,
    },
    /// Every frame, ARP included: for a bridge that owns the interface. An endpoint with
    /// this program never resolves ARP (the stack never sees the requests).
    Everything,
}

/// Whether the program runs in the driver or in the kernel's generic (skb) hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttachMode {
    /// In the driver (`XDP_FLAGS_DRV_MODE`), before any socket buffer is allocated.
    Native,
    /// In the generic hook (`XDP_FLAGS_SKB_MODE`), after the socket buffer is made: slower,
    /// but every interface has it.
    Generic,
}

/// An XDP program with its `XSKMAP`, attached to one interface through a `bpf_link`.
///
/// Dropping it closes the link, which detaches the program; a process that dies leaves
/// nothing attached either, since the kernel detaches a link when its last descriptor closes.
#[derive(Debug)]
pub struct XdpProgram {
    ifname: String,
    ifindex: u32,
    redirect: Redirect,
    mode: AttachMode,
    /// Held only to be closed: declared first so it closes first, detaching the program
    /// before the program and map descriptors close.
    _link: OwnedFd,
    prog: OwnedFd,
    map: OwnedFd,
    /// The per-source token bucket's maps, when the program has one.
    meter: Option<SourceMeter>,
}

impl XdpProgram {
    /// Loads the program for `redirect` and attaches it to `ifname` (of the calling thread's
    /// network namespace): natively when the driver can, else in generic mode.
    ///
    /// Errors name the interface and the step: `veth-a: an XDP program is already attached
    /// (another latlab?)` (`AlreadyExists`; the program already there is left alone),
    /// `veth-a: BPF_PROG_LOAD: …` with the verifier's log, or `PermissionDenied` /
    /// `Unsupported` with a hint to use the kernel path (`--io socket`, `--io packet` for emu).
    pub fn attach(ifname: &str, redirect: Redirect) -> io::Result<XdpProgram> {
        XdpProgram::attach_limited(ifname, redirect, None)
    }

    /// As [`XdpProgram::attach`], with a per-source token bucket when `limit` is given: an
    /// endpoint program then drops the frames of a source (IPv4 address and UDP source port)
    /// above `limit` before they reach the socket, and counts them ([`XdpProgram::drops`]).
    /// Only the endpoint's datagrams are metered; a limit on [`Redirect::Everything`] is an
    /// `InvalidInput` error.
    pub fn attach_limited(
        ifname: &str,
        redirect: Redirect,
        limit: Option<SourceLimit>,
    ) -> io::Result<XdpProgram> {
        if limit.is_some() && redirect == Redirect::Everything {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{ifname}: a per-source limit needs the endpoint program"),
            ));
        }
        let ifindex = interface_index(ifname)?;
        let map = create_xskmap(ifname)?;
        let meter = limit.map(|l| SourceMeter::create(ifname, l)).transpose()?;
        let insns = assemble(redirect, map.as_raw_fd(), meter.as_ref().map(|m| m.fds()));
        let prog = load(ifname, &insns)?;
        let (link, mode) = link(ifname, ifindex, &prog)?;
        Ok(XdpProgram {
            ifname: ifname.to_owned(),
            ifindex,
            redirect,
            mode,
            _link: link,
            prog,
            map,
            meter,
        })
    }

    /// The per-source limit the program keeps, if it has one.
    pub fn source_limit(&self) -> Option<SourceLimit> {
        self.meter.as_ref().map(|m| m.limit())
    }

    /// A handle on the count of frames the per-source limit dropped (`None` without a
    /// limit), readable from any thread.
    pub fn drops(&self) -> io::Result<Option<SourceDrops>> {
        self.meter.as_ref().map(|m| m.drops()).transpose()
    }

    /// Which frames the program takes.
    pub fn redirect(&self) -> Redirect {
        self.redirect
    }

    /// Native or generic, whichever the attach got.
    pub fn mode(&self) -> AttachMode {
        self.mode
    }

    /// The interface the program is attached to, and its index.
    pub fn interface(&self) -> (&str, u32) {
        (&self.ifname, self.ifindex)
    }

    /// Makes frames from RX queue `queue_id` go to the bound AF_XDP socket `socket`
    /// (`XSKMAP[queue_id] = socket`). The kernel takes the entry out when the socket closes.
    pub fn insert_socket(&self, queue_id: u32, socket: BorrowedFd<'_>) -> io::Result<()> {
        let key = queue_id;
        let value = socket.as_raw_fd() as u32;
        let mut attr = MapUpdateAttr {
            map_fd: self.map.as_raw_fd() as u32,
            _pad: 0,
            key: &key as *const u32 as u64,
            value: &value as *const u32 as u64,
            flags: 0,
        };
        bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map_err(at(&self.ifname, "XSKMAP update"))?;
        Ok(())
    }

    /// The loaded program's descriptor (for `BPF_PROG_TEST_RUN` or `bpftool`).
    pub fn prog_fd(&self) -> BorrowedFd<'_> {
        self.prog.as_fd()
    }
}

/// `bpf_attr` for `BPF_MAP_CREATE`, up to `map_name`.
#[repr(C)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// `bpf_attr` for `BPF_MAP_UPDATE_ELEM`.
#[repr(C)]
struct MapUpdateAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// `bpf_attr` for `BPF_PROG_LOAD`, up to `expected_attach_type`.
#[repr(C)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `bpf_attr` for `BPF_LINK_CREATE`, up to `flags`.
#[repr(C)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// `bpf(cmd, attr, sizeof attr)`: the non-negative result (a new descriptor for commands that
/// make one), or the error.
fn bpf<T>(cmd: u32, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, initialised `#[repr(C)]` prefix of `union bpf_attr` of the size
    // passed; every pointer inside it points at memory that outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr as *mut T,
            size_of::<T>() as libc::c_long,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc)
}

/// A new descriptor returned by `bpf`.
fn bpf_fd<T>(cmd: u32, attr: &mut T) -> io::Result<OwnedFd> {
    let fd = bpf(cmd, attr)? as RawFd;
    // SAFETY: the kernel returned a fresh descriptor (close-on-exec) that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Turns `bpf()` errors that mean "cannot do XDP here" into ones that say why.
fn bpf_error(ifname: &str, step: &str, err: io::Error) -> io::Error {
    match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{ifname}: {step}: not permitted: XDP needs CAP_BPF and CAP_NET_ADMIN \
                 (run as root, or use the kernel path: --io socket, or --io packet for emu)"
            ),
        ),
        Some(libc::ENOSYS) => io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{ifname}: {step}: this kernel has no bpf() system call (use the kernel \
                 path: --io socket, or --io packet for emu)"
            ),
        ),
        _ => at(ifname, step)(err),
    }
}

fn name16(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (dst, src) in out.iter_mut().zip(name.bytes().take(15)) {
        *dst = src;
    }
    out
}

fn create_xskmap(ifname: &str) -> io::Result<OwnedFd> {
    let mut attr = MapCreateAttr {
        map_type: BPF_MAP_TYPE_XSKMAP,
        key_size: 4,
        value_size: 4,
        max_entries: XSKMAP_ENTRIES,
        map_flags: 0,
        inner_map_fd: 0,
        numa_node: 0,
        map_name: name16("latlab_xsks"),
    };
    bpf_fd(BPF_MAP_CREATE, &mut attr).map_err(|e| bpf_error(ifname, "BPF_MAP_CREATE XSKMAP", e))
}

/// Loads `insns` as an XDP program; a failed load is retried once with the verifier's log,
/// whose text goes into the error.
fn load(ifname: &str, insns: &[Insn]) -> io::Result<OwnedFd> {
    let code: Vec<u64> = insns
        .iter()
        .map(|i| u64::from_ne_bytes(i.encode()))
        .collect();
    let license = c"GPL";
    let attempt = |log: Option<&mut [u8]>| {
        let (log_level, log_size, log_buf) = match log {
            Some(buf) => (1, buf.len() as u32, buf.as_mut_ptr() as u64),
            None => (0, 0, 0),
        };
        let mut attr = ProgLoadAttr {
            prog_type: BPF_PROG_TYPE_XDP,
            insn_cnt: code.len() as u32,
            insns: code.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level,
            log_size,
            log_buf,
            kern_version: 0,
            prog_flags: 0,
            prog_name: name16("latlab_xsk"),
            prog_ifindex: 0,
            expected_attach_type: BPF_XDP,
        };
        bpf_fd(BPF_PROG_LOAD, &mut attr)
    };
    match attempt(None) {
        Ok(fd) => Ok(fd),
        Err(first) => {
            let mut log = vec![0u8; LOG_SIZE];
            let retry = attempt(Some(&mut log));
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            match retry {
                Ok(fd) => Ok(fd),
                Err(err) if matches!(err.raw_os_error(), Some(libc::EPERM | libc::ENOSYS)) => {
                    Err(bpf_error(ifname, "BPF_PROG_LOAD", err))
                }
                Err(err) => Err(io::Error::new(
                    err.kind(),
                    format!(
                        "{ifname}: BPF_PROG_LOAD: {err} (first attempt: {first}); verifier log:\n{}",
                        text.trim_end()
                    ),
                )),
            }
        }
    }
}

/// Attaches `prog` to interface `ifindex` with a `bpf_link`: native first, generic when the
/// driver cannot. A program already on the interface, in either mode, is an `AlreadyExists`
/// error, and stays attached.
fn link(ifname: &str, ifindex: u32, prog: &OwnedFd) -> io::Result<(OwnedFd, AttachMode)> {
    let try_mode = |flags: u32| {
        let mut attr = LinkCreateAttr {
            prog_fd: prog.as_raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type: BPF_XDP,
            flags,
        };
        bpf_fd(BPF_LINK_CREATE, &mut attr)
    };
    let busy = |err: &io::Error| matches!(err.raw_os_error(), Some(libc::EBUSY | libc::EEXIST));
    let already = || {
        io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{ifname}: an XDP program is already attached (another latlab?)"),
        )
    };
    let native = match try_mode(XDP_FLAGS_DRV_MODE) {
        Ok(fd) => return Ok((fd, AttachMode::Native)),
        Err(err) if busy(&err) => return Err(already()),
        Err(err) => err,
    };
    match try_mode(XDP_FLAGS_SKB_MODE) {
        Ok(fd) => Ok((fd, AttachMode::Generic)),
        Err(err) if busy(&err) => Err(already()),
        Err(err) => Err(bpf_error(
            ifname,
            &format!("BPF_LINK_CREATE XDP (native: {native}; generic)"),
            err,
        )),
    }
}

/// eBPF registers.
const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R4: u8 = 4;
const R5: u8 = 5;
const R6: u8 = 6;
const R7: u8 = 7;

/// One eBPF instruction, `struct bpf_insn`: opcode, destination and source registers (4 bits
/// each), signed offset, signed immediate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Insn {
    code: u8,
    dst: u8,
    src: u8,
    off: i16,
    imm: i32,
}

/// Operand sizes of loads and stores.
#[derive(Clone, Copy, Debug)]
enum Size {
    B = 0x10,
    H = 0x08,
    W = 0x00,
    Dw = 0x18,
}

impl Insn {
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            dst,
            src,
            off,
            imm,
        }
    }

    /// `dst = src` (64 bit).
    const fn mov64_reg(dst: u8, src: u8) -> Insn {
        Insn::new(0xbf, dst, src, 0, 0)
    }

    /// `dst = imm` (64 bit).
    const fn mov64_imm(dst: u8, imm: i32) -> Insn {
        Insn::new(0xb7, dst, 0, 0, imm)
    }

    /// `dst += imm` (64 bit).
    const fn add64_imm(dst: u8, imm: i32) -> Insn {
        Insn::new(0x07, dst, 0, 0, imm)
    }

    /// `dst &= imm` (64 bit).
    const fn and64_imm(dst: u8, imm: i32) -> Insn {
        Insn::new(0x57, dst, 0, 0, imm)
    }

    /// `dst = *(size *)(src + off)`.
    const fn ldx(size: Size, dst: u8, src: u8, off: i16) -> Insn {
        // BPF_LDX | BPF_MEM | size
        Insn::new(0x61 | size as u8, dst, src, off, 0)
    }

    /// `*(size *)(dst + off) = src`.
    const fn stx(size: Size, dst: u8, src: u8, off: i16) -> Insn {
        // BPF_STX | BPF_MEM | size
        Insn::new(0x63 | size as u8, dst, src, off, 0)
    }

    /// `*(size *)(dst + off) = imm`.
    const fn st_imm(size: Size, dst: u8, off: i16, imm: i32) -> Insn {
        // BPF_ST | BPF_MEM | size
        Insn::new(0x62 | size as u8, dst, 0, off, imm)
    }

    /// `if dst > src goto +off` (unsigned).
    const fn jgt_reg(dst: u8, src: u8, off: i16) -> Insn {
        Insn::new(0x2d, dst, src, off, 0)
    }

    /// `if dst != imm goto +off`.
    const fn jne_imm(dst: u8, imm: i32, off: i16) -> Insn {
        Insn::new(0x55, dst, 0, off, imm)
    }

    /// `dst = map` for the map whose descriptor is `fd`: two instruction slots.
    const fn ld_map_fd(dst: u8, fd: RawFd) -> [Insn; 2] {
        [
            Insn::new(0x18, dst, BPF_PSEUDO_MAP_FD, 0, fd),
            Insn::new(0, 0, 0, 0, 0),
        ]
    }

    /// `r0 = helper(r1, …, r5)`.
    const fn call(helper: i32) -> Insn {
        Insn::new(0x85, 0, 0, 0, helper)
    }

    /// `return r0`.
    const fn exit() -> Insn {
        Insn::new(0x95, 0, 0, 0, 0)
    }

    /// The 8 bytes the kernel reads, in this machine's byte order (the register nibbles are a
    /// C bit-field, whose order follows the byte order).
    pub(crate) fn encode(self) -> [u8; 8] {
        let regs = if cfg!(target_endian = "little") {
            (self.src << 4) | (self.dst & 0xf)
        } else {
            (self.dst << 4) | (self.src & 0xf)
        };
        let off = self.off.to_ne_bytes();
        let imm = self.imm.to_ne_bytes();
        [
            self.code, regs, off[0], off[1], imm[0], imm[1], imm[2], imm[3],
        ]
    }
}

/// A network-order 16-bit field as a native-order `u16` load of it reads it.
fn wire16(value: u16) -> i32 {
    i32::from(u16::from_ne_bytes(value.to_be_bytes()))
}

/// The program for `redirect`, referring to the `XSKMAP` whose descriptor is `map_fd`.
///
/// A frame it takes gets [`META_LEN`] bytes of metadata in front of it: its arrival time
/// (`bpf_ktime_get_ns()`, taken as the program starts on it) and [`STAMP_MAGIC`]; where the
/// driver has no room for metadata the frame goes on without it. Both programs end in
/// `return bpf_redirect_map(map, ctx->rx_queue_index, XDP_PASS)`: a queue whose map slot is
/// empty (no socket yet, or the socket closed) passes its frames to the stack.
#[cfg(test)]
pub(crate) fn program(redirect: Redirect, map_fd: RawFd) -> Vec<Insn> {
    assemble(redirect, map_fd, None)
}

/// [`program`], with the per-source meter of `meter` (endpoint programs only) between the
/// header checks and the stamp: a frame over its source's limit is counted and dropped
/// (`XDP_DROP`) in a block after the pass exit.
fn assemble(redirect: Redirect, map_fd: RawFd, meter: Option<MeterFds>) -> Vec<Insn> {
    let mut p = Vec::with_capacity(96);
    // The context survives the helper calls in r6; the stamp waits in r7.
    p.push(Insn::mov64_reg(R6, R1));
    p.push(Insn::call(BPF_FUNC_KTIME_GET_NS));
    p.push(Insn::mov64_reg(R7, R0));
    // Indices of the jumps to the final `return XDP_PASS`, patched at the end.
    let mut to_pass = Vec::new();
    if let Redirect::Endpoint { udp_port } = redirect {
        // Ethernet (14) + IPv4 without options (20) + UDP (8).
        const HEADERS: i32 = 42;
        p.push(Insn::ldx(Size::W, R2, R6, xdp_md::DATA));
        p.push(Insn::ldx(Size::W, R3, R6, xdp_md::DATA_END));
        p.push(Insn::mov64_reg(R4, R2));
        p.push(Insn::add64_imm(R4, HEADERS));
        // The verifier allows the loads below only after this check against data_end.
        to_pass.push(p.len());
        p.push(Insn::jgt_reg(R4, R3, 0));
        // (offset, size, mask, value): frames whose field differs go to the stack.
        let checks: [(i16, Size, Option<i32>, i32); 5] = [
            // EtherType IPv4.
            (12, Size::H, None, wire16(0x0800)),
            // Version 4, header length 5 words: no options.
            (14, Size::B, None, 0x45),
            // Neither "more fragments" nor a fragment offset: a whole datagram.
            (20, Size::H, Some(wire16(0x3fff)), 0),
            // Protocol UDP.
            (23, Size::B, None, 17),
            // UDP destination port.
            (36, Size::H, None, wire16(udp_port)),
        ];
        for (offset, size, mask, value) in checks {
            p.push(Insn::ldx(size, R5, R2, offset));
            if let Some(mask) = mask {
                p.push(Insn::and64_imm(R5, mask));
            }
            to_pass.push(p.len());
            p.push(Insn::jne_imm(R5, value, 0));
        }
    }
    let meter = match (redirect, meter) {
        (Redirect::Endpoint { .. }, Some(fds)) => Some((fds, meter::meter(&mut p, fds))),
        _ => None,
    };
    // The stamp: room for the metadata in front of the frame, then (after the bounds check
    // the verifier asks for) the time and the magic. Jumps to the redirect when there is none.
    let mut to_redirect = Vec::new();
    p.push(Insn::mov64_reg(R1, R6));
    p.push(Insn::mov64_imm(R2, -(META_LEN as i32)));
    p.push(Insn::call(BPF_FUNC_XDP_ADJUST_META));
    to_redirect.push(p.len());
    p.push(Insn::jne_imm(R0, 0, 0));
    p.push(Insn::ldx(Size::W, R2, R6, xdp_md::DATA_META));
    p.push(Insn::ldx(Size::W, R3, R6, xdp_md::DATA));
    p.push(Insn::mov64_reg(R4, R2));
    p.push(Insn::add64_imm(R4, META_LEN as i32));
    to_redirect.push(p.len());
    p.push(Insn::jgt_reg(R4, R3, 0));
    p.push(Insn::stx(Size::Dw, R2, R7, 0));
    p.push(Insn::st_imm(Size::W, R2, 8, STAMP_MAGIC as i32));
    let redirect_at = p.len();
    p.push(Insn::ldx(Size::W, R2, R6, xdp_md::RX_QUEUE_INDEX));
    p.extend(Insn::ld_map_fd(R1, map_fd));
    p.push(Insn::mov64_imm(R3, XDP_PASS));
    p.push(Insn::call(BPF_FUNC_REDIRECT_MAP));
    p.push(Insn::exit());
    for i in to_redirect {
        p[i].off = (redirect_at - i - 1) as i16;
    }
    if !to_pass.is_empty() {
        let pass = p.len();
        p.push(Insn::mov64_imm(R0, XDP_PASS));
        p.push(Insn::exit());
        for i in to_pass {
            // Jump offsets count from the next instruction; the program is a few dozen long.
            p[i].off = (pass - i - 1) as i16;
        }
    }
    if let Some((fds, to_drop)) = meter {
        meter::drop_block(&mut p, fds, to_drop);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(p: &[Insn]) -> Vec<[u8; 8]> {
        p.iter().map(|i| i.encode()).collect()
    }

    #[test]
    fn instructions_encode_as_the_kernel_reads_them() {
        // r4 = r2: dst in the low nibble on a little-endian machine.
        let mov = Insn::mov64_reg(R4, R2).encode();
        let ld = Insn::ld_map_fd(R1, 7)[0].encode();
        if cfg!(target_endian = "little") {
            assert_eq!(mov, [0xbf, 0x24, 0, 0, 0, 0, 0, 0]);
            assert_eq!(ld, [0x18, 0x11, 0, 0, 7, 0, 0, 0]);
            assert_eq!(
                Insn::jne_imm(R5, -2, -3).encode(),
                [0x55, 0x05, 0xfd, 0xff, 0xfe, 0xff, 0xff, 0xff]
            );
        } else {
            assert_eq!(mov, [0xbf, 0x42, 0, 0, 0, 0, 0, 0]);
        }
        assert_eq!(Insn::exit().encode(), [0x95, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Insn::call(51).encode()[4], 51);
    }

    /// The stamp and the redirect both programs end with, for map descriptor `fd`.
    fn stamp_and_redirect(fd: u8) -> Vec<[u8; 8]> {
        vec![
            [0xbf, 0x61, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r1 = r6
            [0xb7, 0x02, 0x00, 0x00, 0xf0, 0xff, 0xff, 0xff], // r2 = -16
            [0x85, 0x00, 0x00, 0x00, 0x36, 0x00, 0x00, 0x00], // call bpf_xdp_adjust_meta
            [0x55, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00], // if r0 != 0 goto redirect
            [0x61, 0x62, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00], // r2 = ctx->data_meta
            [0x61, 0x63, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r3 = ctx->data
            [0xbf, 0x24, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r4 = r2
            [0x07, 0x04, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00], // r4 += 16
            [0x2d, 0x34, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00], // if r4 > r3 goto redirect
            [0x7b, 0x72, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // *(u64 *)(r2 + 0) = r7
            [0x62, 0x02, 0x08, 0x00, b'L', b'L', b'T', b'S'], // *(u32 *)(r2 + 8) = "LLTS"
            [0x61, 0x62, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00], // redirect: r2 = ctx->rx_queue_index
            [0x18, 0x11, 0x00, 0x00, fd, 0x00, 0x00, 0x00],   // r1 = map (fd)
            [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], //   (upper half)
            [0xb7, 0x03, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00], // r3 = XDP_PASS
            [0x85, 0x00, 0x00, 0x00, 0x33, 0x00, 0x00, 0x00], // call bpf_redirect_map
            [0x95, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // exit
        ]
    }

    /// The start of both programs: the context kept in r6, the arrival time in r7.
    const PROLOGUE: [[u8; 8]; 3] = [
        [0xbf, 0x16, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r6 = r1
        [0x85, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00], // call bpf_ktime_get_ns
        [0xbf, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r7 = r0
    ];

    #[test]
    #[cfg(target_endian = "little")]
    fn the_endpoint_program_is_these_bytes() {
        let checks: [[u8; 8]; 16] = [
            [0x61, 0x62, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r2 = ctx->data
            [0x61, 0x63, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00], // r3 = ctx->data_end
            [0xbf, 0x24, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r4 = r2
            [0x07, 0x04, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x00], // r4 += 42
            [0x2d, 0x34, 0x1c, 0x00, 0x00, 0x00, 0x00, 0x00], // if r4 > r3 goto pass
            [0x69, 0x25, 0x0c, 0x00, 0x00, 0x00, 0x00, 0x00], // r5 = ethertype
            [0x55, 0x05, 0x1a, 0x00, 0x08, 0x00, 0x00, 0x00], // != 0x0800
            [0x71, 0x25, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x00], // r5 = version/ihl
            [0x55, 0x05, 0x18, 0x00, 0x45, 0x00, 0x00, 0x00], // != 0x45
            [0x69, 0x25, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00], // r5 = flags/fragment
            [0x57, 0x05, 0x00, 0x00, 0x3f, 0xff, 0x00, 0x00], // r5 &= 0x3fff (wire order)
            [0x55, 0x05, 0x15, 0x00, 0x00, 0x00, 0x00, 0x00], // != 0
            [0x71, 0x25, 0x17, 0x00, 0x00, 0x00, 0x00, 0x00], // r5 = protocol
            [0x55, 0x05, 0x13, 0x00, 0x11, 0x00, 0x00, 0x00], // != UDP
            [0x69, 0x25, 0x24, 0x00, 0x00, 0x00, 0x00, 0x00], // r5 = UDP dst port
            [0x55, 0x05, 0x11, 0x00, 0x1e, 0x61, 0x00, 0x00], // != 7777 (0x1e61)
        ];
        let pass = [
            [0xb7, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00], // pass: r0 = XDP_PASS
            [0x95, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // exit
        ];
        let golden = [
            PROLOGUE.to_vec(),
            checks.to_vec(),
            stamp_and_redirect(5),
            pass.to_vec(),
        ]
        .concat();
        let got = bytes(&program(Redirect::Endpoint { udp_port: 7777 }, 5));
        assert_eq!(got, golden);
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn the_bridge_program_stamps_and_redirects_every_frame() {
        let got = bytes(&program(Redirect::Everything, 9));
        assert_eq!(got, [PROLOGUE.to_vec(), stamp_and_redirect(9)].concat());
    }

    #[test]
    fn a_program_the_verifier_refuses_brings_its_log_into_the_error() {
        // Returns without setting r0.
        let err = load("veth-x", &[Insn::exit()]).unwrap_err();
        // The verifier refuses with EACCES too; only an error without its log means bpf()
        // itself was not allowed.
        if err.kind() == io::ErrorKind::PermissionDenied
            && !err.to_string().contains("verifier log")
        {
            crate::precondition::missing(format_args!("bpf() is not allowed here: {err}"));
            return;
        }
        let text = err.to_string();
        assert!(text.starts_with("veth-x: BPF_PROG_LOAD: "), "{text}");
        assert!(text.contains("R0 !read_ok"), "{text}");
    }

    #[test]
    fn every_jump_lands_on_the_pass_exit_or_on_the_redirect() {
        for redirect in [Redirect::Endpoint { udp_port: 1 }, Redirect::Everything] {
            let p = program(redirect, 3);
            let redirect_at = p
                .iter()
                .position(|i| *i == Insn::ldx(Size::W, R2, R6, xdp_md::RX_QUEUE_INDEX))
                .unwrap();
            let stamp_at = p
                .iter()
                .position(|i| *i == Insn::call(BPF_FUNC_XDP_ADJUST_META))
                .unwrap();
            let pass = p.len() - 2;
            for (i, insn) in p.iter().enumerate() {
                if matches!(insn.code, 0x2d | 0x55) {
                    let target = i + 1 + insn.off as usize;
                    // The header checks give frames to the stack; the stamp, when it cannot
                    // be written, skips to the redirect.
                    let expected = if i < stamp_at { pass } else { redirect_at };
                    assert_eq!(target, expected, "{redirect:?}: jump at {i}");
                }
            }
            if matches!(redirect, Redirect::Endpoint { .. }) {
                assert_eq!(p[pass], Insn::mov64_imm(R0, XDP_PASS));
            }
        }
    }
}
