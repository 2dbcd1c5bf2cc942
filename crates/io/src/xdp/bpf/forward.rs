//! The XDP forwarder: a program on one interface that redirects every frame it gets to
//! another interface through a one-entry `BPF_MAP_TYPE_DEVMAP`, counting what it did in a
//! `BPF_MAP_TYPE_PERCPU_ARRAY` that user space reads; frames never leave the kernel.
//!
//! ```text
//! r6 = ctx
//! r0 = bpf_redirect_map(devmap, 0, XDP_DROP)      // XDP_REDIRECT, or XDP_DROP without a target
//! r7 = r0
//! index = (r7 == XDP_REDIRECT) ? FORWARDED : NO_TARGET
//! counter = bpf_map_lookup_elem(counters, &index); if counter { *counter += 1 }  // per CPU
//! return r7
//! ```
//!
//! What a redirect needs on veth to arrive: the receiving end of the target (its peer) must
//! run NAPI, which it does with an XDP program of its own or GRO on; without it the kernel
//! drops the frame after the program returned (counted by the kernel, not here). The program
//! is attached through a `bpf_link` like the AF_XDP programs: it goes when its owner drops it
//! or dies.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::meter::create_map;
use super::{
    bpf, bpf_error, link, load, AttachMode, Insn, MapUpdateAttr, Size, BPF_FUNC_REDIRECT_MAP,
    BPF_MAP_UPDATE_ELEM, R0, R1, R2, R3, R6, R7,
};

const BPF_MAP_LOOKUP_ELEM: u32 = 1;
const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
const BPF_MAP_TYPE_DEVMAP: u32 = 14;
const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
const XDP_DROP: i32 = 1;
const XDP_REDIRECT: i32 = 4;
const R10: u8 = 10;

/// The counters' indices.
const FORWARDED: i32 = 0;
const NO_TARGET: i32 = 1;
const COUNTERS: u32 = 2;

/// What one direction's program did, summed over the CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForwardCounts {
    /// Frames handed to the target interface (`XDP_REDIRECT`).
    pub forwarded: u64,
    /// Frames dropped because the device map had no target.
    pub no_target: u64,
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
    counters: ForwardCounter,
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
        let counters = create_map(
            from,
            BPF_MAP_TYPE_PERCPU_ARRAY,
            4,
            8,
            COUNTERS,
            "latlab_fwd_cnt",
        )?;
        let insns = program(devmap.as_raw_fd(), counters.as_raw_fd());
        let prog = load(from, &insns)?;
        let (link, mode) = link(from, from_index, &prog)?;
        Ok(XdpForward {
            from: from.to_owned(),
            to: to.to_owned(),
            mode,
            _link: link,
            _prog: prog,
            _devmap: devmap,
            counters: ForwardCounter {
                map: counters,
                cpus: possible_cpus()?,
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
        })
    }
}

/// The counters of an [`XdpForward`], readable from any thread.
#[derive(Debug)]
pub struct ForwardCounter {
    map: OwnedFd,
    cpus: usize,
}

impl ForwardCounter {
    /// The counts summed over every CPU.
    pub fn read(&self) -> io::Result<ForwardCounts> {
        let sum = |index: u32| -> io::Result<u64> {
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
            forwarded: sum(FORWARDED as u32)?,
            no_target: sum(NO_TARGET as u32)?,
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

/// The forwarder's instructions for the device map `devmap` and the counter map `counters`.
pub(crate) fn program(devmap: i32, counters: i32) -> Vec<Insn> {
    let mut p = vec![Insn::mov64_reg(R6, R1)];
    p.extend(Insn::ld_map_fd(R1, devmap));
    p.push(Insn::mov64_imm(R2, 0));
    p.push(Insn::mov64_imm(R3, XDP_DROP));
    p.push(Insn::call(BPF_FUNC_REDIRECT_MAP));
    p.push(Insn::mov64_reg(R7, R0));
    p.push(Insn::st_imm(Size::W, R10, -4, FORWARDED));
    // if r7 == XDP_REDIRECT skip the next
    p.push(Insn::new(0x15, R7, 0, 1, XDP_REDIRECT));
    p.push(Insn::st_imm(Size::W, R10, -4, NO_TARGET));
    p.extend(Insn::ld_map_fd(R1, counters));
    p.push(Insn::mov64_reg(R2, R10));
    p.push(Insn::add64_imm(R2, -4));
    p.push(Insn::call(BPF_FUNC_MAP_LOOKUP_ELEM));
    // if r0 == NULL skip the increment
    p.push(Insn::new(0x15, R0, 0, 3, 0));
    p.push(Insn::ldx(Size::Dw, R1, R0, 0));
    p.push(Insn::add64_imm(R1, 1));
    p.push(Insn::stx(Size::Dw, R0, R1, 0));
    p.push(Insn::mov64_reg(R0, R7));
    p.push(Insn::exit());
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
    fn the_program_loads_and_its_jumps_land_in_it() {
        let p = program(3, 4);
        for (i, insn) in p.iter().enumerate() {
            if insn.code == 0x15 {
                let target = i + 1 + insn.off as usize;
                assert!(target < p.len(), "jump at {i} leaves the program");
            }
        }
        assert_eq!(p.last().copied(), Some(Insn::exit()));
    }
}
