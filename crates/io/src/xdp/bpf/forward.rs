//! The XDP forwarder: a program on one interface that redirects every frame it gets to
//! another interface through a one-entry `BPF_MAP_TYPE_DEVMAP`, counting what it did in a
//! `BPF_MAP_TYPE_PERCPU_ARRAY` that user space reads; frames never leave the kernel.
//!
//! ```text
//! r6 = ctx
//! r8 = bpf_xdp_get_buff_len(ctx)                  // the whole frame, fragments included
//! r7 = XDP_DROP; index = TOO_LONG
//! limit = bpf_map_lookup_elem(limits, &0)         // the longest frame the target takes
//! if limit && r8 > *limit goto count              // the kernel would drop it after us
//! r7 = bpf_redirect_map(devmap, 0, XDP_DROP)      // XDP_REDIRECT, or XDP_DROP without a target
//! index = (r7 == XDP_REDIRECT) ? FORWARDED : NO_TARGET
//! count: counter = bpf_map_lookup_elem(counters, &index); if counter { *counter += 1 }  // per CPU
//! return r7
//! ```
//!
//! Frames of any shape: the program never reads the frame's bytes (only its length), so a
//! runt, a VLAN-tagged frame (802.1Q or 802.1ad, one tag or two) or a frame of any length
//! takes no path the verifier did not see, and is forwarded as it came or counted. The
//! longest frame forwarded is the target's MTU plus the Ethernet header plus one VLAN tag,
//! whatever the frame carries: the rule by which the kernel drops a redirected frame after
//! the program returned (`xdp_ok_fwd_dev`), so what the program counts as forwarded is what
//! the target took. The loader writes that limit into a one-entry array
//! ([`XdpForward::refresh_limit`] writes it again when the MTU changed). Nothing shorter
//! than an Ethernet header reaches an XDP program (the kernel refuses to send one on an
//! Ethernet device).
//!
//! What a redirect needs on veth to arrive: the receiving end of the target (its peer) must
//! run NAPI, which it does with an XDP program of its own or GRO on; without it the kernel
//! drops the frame after the program returned (counted by the kernel, not here), as it does
//! a frame longer than the peer's own MTU allows when the peer's MTU is below the target's.
//! The program is attached through a `bpf_link` like the AF_XDP programs: it goes when its
//! owner drops it or dies.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use super::meter::create_map;
use super::{
    bpf, bpf_error, link, load, AttachMode, Insn, MapUpdateAttr, Size, BPF_FUNC_REDIRECT_MAP,
    BPF_MAP_UPDATE_ELEM, R0, R1, R2, R3, R6, R7,
};

const BPF_MAP_LOOKUP_ELEM: u32 = 1;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
const BPF_MAP_TYPE_DEVMAP: u32 = 14;
const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
/// `BPF_FUNC_xdp_get_buff_len`: the frame's length, fragments included (Linux 5.18).
const BPF_FUNC_XDP_GET_BUFF_LEN: i32 = 188;
const XDP_DROP: i32 = 1;
const XDP_REDIRECT: i32 = 4;
const R8: u8 = 8;
const R10: u8 = 10;
/// The Ethernet header and one VLAN tag: what the kernel lets a frame carry beyond the MTU.
const ETH_HLEN: u32 = 14;
const VLAN_HLEN: u32 = 4;

/// The counters' indices.
const FORWARDED: i32 = 0;
const NO_TARGET: i32 = 1;
const TOO_LONG: i32 = 2;
const COUNTERS: u32 = 3;

/// Where the program keeps its keys on the stack (offsets from r10).
mod stack {
    /// The counter's index, 4 bytes.
    pub(super) const INDEX: i16 = -4;
    /// The limit's key (0), 4 bytes.
    pub(super) const LIMIT_KEY: i16 = -8;
}

/// What one direction's program did, summed over the CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForwardCounts {
    /// Frames handed to the target interface (`XDP_REDIRECT`).
    pub forwarded: u64,
    /// Frames dropped because the device map had no target.
    pub no_target: u64,
    /// Frames dropped because they were longer than the target takes (its MTU, the Ethernet
    /// header and one VLAN tag): the kernel would have dropped them after the redirect.
    pub too_long: u64,
    /// Frames handed to the target that it could not pass on (on a veth: its peer's XDP ring
    /// was full), from the target's driver statistics since the program was attached; counted
    /// in `forwarded` too. 0 where the driver does not count them (or another sender's
    /// redirects to the same target are counted with these).
    pub refused_by_target: u64,
}

/// The longest frame an interface of MTU `mtu` takes from a redirect, bytes.
fn longest_frame(mtu: u32) -> u32 {
    mtu.saturating_add(ETH_HLEN + VLAN_HLEN)
}

/// An XDP program that forwards every frame of one interface to another.
#[derive(Debug)]
pub struct XdpForward {
    from: String,
    to: String,
    mode: AttachMode,
    /// Closed first: detaches the program before its maps close.
    _link: OwnedFd,
    _prog: OwnedFd,
    _devmap: OwnedFd,
    limit: TargetLimit,
    counters: ForwardCounter,
}

/// The longest frame the target takes, as the program reads it from its one-entry array.
#[derive(Debug)]
struct TargetLimit {
    map: OwnedFd,
    /// A socket of the namespace the forwarder was made in, through which the target's MTU
    /// is asked (whichever thread asks).
    socket: socket2::Socket,
    /// The limit last written, bytes.
    written: AtomicU32,
}

impl TargetLimit {
    fn new(from: &str) -> io::Result<TargetLimit> {
        let map = create_map(from, BPF_MAP_TYPE_ARRAY, 4, 4, 1, "latlab_fwd_max")?;
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
        Ok(TargetLimit {
            map,
            socket,
            written: AtomicU32::new(0),
        })
    }

    /// Reads `to`'s MTU and writes its limit into the map if it changed; returns the limit.
    fn refresh(&self, to: &str) -> io::Result<u32> {
        let mtu = crate::iface::mtu(self.socket.as_raw_fd(), to)?;
        let limit = longest_frame(u32::try_from(mtu).unwrap_or(u32::MAX));
        if limit != self.written.load(Ordering::Relaxed) {
            let key = 0u32;
            let mut attr = MapUpdateAttr {
                map_fd: self.map.as_raw_fd() as u32,
                _pad: 0,
                key: &key as *const u32 as u64,
                value: &limit as *const u32 as u64,
                flags: 0,
            };
            bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map_err(|e| bpf_error(to, "limit update", e))?;
            self.written.store(limit, Ordering::Relaxed);
        }
        Ok(limit)
    }
}

impl XdpForward {
    /// Loads the forwarder from `from` to `to` (both of the calling thread's namespace) and
    /// attaches it to `from`, natively when the driver can. Errors name the interface and the
    /// step; a program already on `from` is an `AlreadyExists` error and stays.
    pub fn attach(from: &str, to: &str) -> io::Result<XdpForward> {
        let from_index = crate::iface::interface_index(from)?;
        let to_index = crate::iface::interface_index(to)?;
        let devmap = create_map(from, BPF_MAP_TYPE_DEVMAP, 4, 4, 1, "latlab_fwd_to")?;
        let key = 0u32;
        let mut attr = MapUpdateAttr {
            map_fd: devmap.as_raw_fd() as u32,
            _pad: 0,
            key: &key as *const u32 as u64,
            value: &to_index as *const u32 as u64,
            flags: 0,
        };
        bpf(BPF_MAP_UPDATE_ELEM, &mut attr)
            .map_err(|e| bpf_error(from, &format!("DEVMAP update (target {to})"), e))?;
        let limit = TargetLimit::new(from)?;
        limit.refresh(to)?;
        let refused = TargetRefusals::new(to)?;
        let counters = create_map(
            from,
            BPF_MAP_TYPE_PERCPU_ARRAY,
            4,
            8,
            COUNTERS,
            "latlab_fwd_cnt",
        )?;
        let insns = program(
            devmap.as_raw_fd(),
            limit.map.as_raw_fd(),
            counters.as_raw_fd(),
        );
        let prog = load(from, &insns)?;
        let (link, mode) = link(from, from_index, &prog)?;
        Ok(XdpForward {
            from: from.to_owned(),
            to: to.to_owned(),
            mode,
            _link: link,
            _prog: prog,
            _devmap: devmap,
            limit,
            counters: ForwardCounter {
                map: counters,
                cpus: possible_cpus()?,
                refused,
            },
        })
    }

    /// The interfaces: frames come in on the first and leave by the second.
    pub fn interfaces(&self) -> (&str, &str) {
        (&self.from, &self.to)
    }

    /// Native or generic, whichever the attach got.
    pub fn mode(&self) -> AttachMode {
        self.mode
    }

    /// The longest frame forwarded, bytes: the target's MTU as last read, plus the Ethernet
    /// header and one VLAN tag.
    pub fn limit(&self) -> u32 {
        self.limit.written.load(Ordering::Relaxed)
    }

    /// Reads the target's MTU again (in the namespace the forwarder was made in) and, if it
    /// changed, gives the program the new limit; returns the limit. A frame that met the
    /// old limit in between was counted by it.
    pub fn refresh_limit(&self) -> io::Result<u32> {
        self.limit.refresh(&self.to)
    }

    /// What the program did so far.
    pub fn counts(&self) -> io::Result<ForwardCounts> {
        self.counters.read()
    }

    /// A handle on the counters that another thread may read (it keeps the counter map, and
    /// only it, open).
    pub fn counter(&self) -> io::Result<ForwardCounter> {
        Ok(ForwardCounter {
            map: self.counters.map.try_clone()?,
            cpus: self.counters.cpus,
            refused: self.counters.refused.try_clone()?,
        })
    }
}

/// The target's count of frames it could not pass on, read through a socket of the namespace
/// the forwarder was made in (whichever thread reads), from where it stood at the attach.
#[derive(Debug)]
struct TargetRefusals {
    to: String,
    socket: socket2::Socket,
    /// The count at the attach; `None` for a driver that keeps none.
    at_attach: Option<u64>,
}

impl TargetRefusals {
    fn new(to: &str) -> io::Result<TargetRefusals> {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)?;
        let at_attach = crate::ethtool::xdp_xmit_errors(&socket, to)?;
        Ok(TargetRefusals {
            to: to.to_owned(),
            socket,
            at_attach,
        })
    }

    fn try_clone(&self) -> io::Result<TargetRefusals> {
        Ok(TargetRefusals {
            to: self.to.clone(),
            socket: self.socket.try_clone()?,
            at_attach: self.at_attach,
        })
    }

    /// Frames refused since the attach.
    fn read(&self) -> io::Result<u64> {
        let Some(at_attach) = self.at_attach else {
            return Ok(0);
        };
        let now = crate::ethtool::xdp_xmit_errors(&self.socket, &self.to)?.unwrap_or(at_attach);
        Ok(now.saturating_sub(at_attach))
    }
}

/// The counters of an [`XdpForward`], readable from any thread.
#[derive(Debug)]
pub struct ForwardCounter {
    map: OwnedFd,
    cpus: usize,
    refused: TargetRefusals,
}

impl ForwardCounter {
    /// The counts summed over every CPU.
    pub fn read(&self) -> io::Result<ForwardCounts> {
        let sum = |index: i32| -> io::Result<u64> {
            let index = index as u32;
            // A per-CPU map's value is one 8-byte slot per possible CPU.
            let mut values = vec![0u64; self.cpus];
            let mut attr = MapUpdateAttr {
                map_fd: self.map.as_raw_fd() as u32,
                _pad: 0,
                key: &index as *const u32 as u64,
                value: values.as_mut_ptr() as u64,
                flags: 0,
            };
            bpf(BPF_MAP_LOOKUP_ELEM, &mut attr)?;
            Ok(values.iter().sum())
        };
        Ok(ForwardCounts {
            forwarded: sum(FORWARDED)?,
            no_target: sum(NO_TARGET)?,
            too_long: sum(TOO_LONG)?,
            refused_by_target: self.refused.read()?,
        })
    }
}

/// How many CPUs the kernel may ever bring up (`/sys/devices/system/cpu/possible`, `0-N`):
/// the slots of a per-CPU map's value.
fn possible_cpus() -> io::Result<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    parse_possible(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/sys/devices/system/cpu/possible: {:?}", text.trim()),
        )
    })
}

/// `0-3` → 4, `0` → 1, `0-1,4-7` → 8: one more than the highest CPU named.
fn parse_possible(text: &str) -> Option<usize> {
    let last = text
        .trim()
        .split([',', '-'])
        .filter_map(|n| n.parse::<usize>().ok())
        .max()?;
    Some(last + 1)
}

/// The forwarder's instructions for the device map `devmap`, the one-entry array `limits`
/// (the longest frame the target takes) and the counter map `counters`.
pub(crate) fn program(devmap: i32, limits: i32, counters: i32) -> Vec<Insn> {
    let mut p = vec![Insn::mov64_reg(R6, R1)];
    // The frame's length: r1 is still the context.
    p.push(Insn::call(BPF_FUNC_XDP_GET_BUFF_LEN));
    p.push(Insn::mov64_reg(R8, R0));
    p.push(Insn::mov64_imm(R7, XDP_DROP));
    p.push(Insn::st_imm(Size::W, R10, stack::INDEX, TOO_LONG));
    p.push(Insn::st_imm(Size::W, R10, stack::LIMIT_KEY, 0));
    p.extend(Insn::ld_map_fd(R1, limits));
    p.push(Insn::mov64_reg(R2, R10));
    p.push(Insn::add64_imm(R2, i32::from(stack::LIMIT_KEY)));
    p.push(Insn::call(BPF_FUNC_MAP_LOOKUP_ELEM));
    // No entry (never, for an array): no limit.
    let no_limit = p.len();
    p.push(Insn::new(0x15, R0, 0, 0, 0)); // if r0 == 0 goto redirect
    p.push(Insn::ldx(Size::W, R1, R0, 0));
    let too_long = p.len();
    p.push(Insn::jgt_reg(R8, R1, 0)); // if r8 > limit goto count
    let redirect = p.len();
    p.extend(Insn::ld_map_fd(R1, devmap));
    p.push(Insn::mov64_imm(R2, 0));
    p.push(Insn::mov64_imm(R3, XDP_DROP));
    p.push(Insn::call(BPF_FUNC_REDIRECT_MAP));
    p.push(Insn::mov64_reg(R7, R0));
    p.push(Insn::st_imm(Size::W, R10, stack::INDEX, FORWARDED));
    // if r7 == XDP_REDIRECT skip the next
    p.push(Insn::new(0x15, R7, 0, 1, XDP_REDIRECT));
    p.push(Insn::st_imm(Size::W, R10, stack::INDEX, NO_TARGET));
    let count = p.len();
    p.extend(Insn::ld_map_fd(R1, counters));
    p.push(Insn::mov64_reg(R2, R10));
    p.push(Insn::add64_imm(R2, i32::from(stack::INDEX)));
    p.push(Insn::call(BPF_FUNC_MAP_LOOKUP_ELEM));
    // if r0 == NULL skip the increment
    p.push(Insn::new(0x15, R0, 0, 3, 0));
    p.push(Insn::ldx(Size::Dw, R1, R0, 0));
    p.push(Insn::add64_imm(R1, 1));
    p.push(Insn::stx(Size::Dw, R0, R1, 0));
    p.push(Insn::mov64_reg(R0, R7));
    p.push(Insn::exit());
    // Jump offsets count from the next instruction; the program is a few dozen long.
    p[no_limit].off = (redirect - no_limit - 1) as i16;
    p[too_long].off = (count - too_long - 1) as i16;
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn possible_cpus_read_as_the_kernel_writes_them() {
        assert_eq!(parse_possible("0-1\n"), Some(2));
        assert_eq!(parse_possible("0\n"), Some(1));
        assert_eq!(parse_possible("0-1,4-7\n"), Some(8));
        assert_eq!(parse_possible(""), None);
    }

    #[test]
    fn every_jump_lands_inside_the_program_and_too_long_frames_skip_the_redirect() {
        let p = program(3, 4, 5);
        let redirect = p
            .iter()
            .position(|i| *i == Insn::call(BPF_FUNC_REDIRECT_MAP))
            .unwrap();
        let count = p
            .iter()
            .rposition(|i| *i == Insn::ld_map_fd(R1, 5)[0])
            .unwrap();
        for (i, insn) in p.iter().enumerate() {
            if matches!(insn.code, 0x15 | 0x2d) {
                let target = i + 1 + insn.off as usize;
                assert!(target < p.len(), "jump at {i} leaves the program");
                assert!(target > i, "jump at {i} goes backwards");
            }
        }
        // The length check jumps over the redirect, straight to the count.
        let check = p.iter().position(|i| i.code == 0x2d).unwrap();
        assert!(check < redirect);
        assert_eq!(check + 1 + p[check].off as usize, count);
        assert_eq!(p.last().copied(), Some(Insn::exit()));
    }

    #[test]
    fn the_limit_is_the_mtu_with_an_ethernet_header_and_one_vlan_tag() {
        assert_eq!(longest_frame(1500), 1518);
        assert_eq!(longest_frame(9000), 9018);
        assert_eq!(longest_frame(u32::MAX), u32::MAX);
    }
}
