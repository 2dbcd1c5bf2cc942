//! The per-source token bucket of the endpoint program: a source (one client socket: IPv4
//! address and UDP source port) that sends faster than [`SourceLimit`] allows has its excess
//! dropped in the XDP program, before it costs the AF_XDP socket, the ring or user space
//! anything.
//!
//! Two maps, made here with `bpf(BPF_MAP_CREATE)` and relocated into the program as
//! `ld_imm64` with `BPF_PSEUDO_MAP_FD`:
//! - `latlab_sources`, a `BPF_MAP_TYPE_LRU_HASH` of [`SOURCES`] entries: key the source
//!   (address and port as on the wire, then two zero bytes), value its bucket as a
//!   theoretical arrival time in `CLOCK_MONOTONIC` ns (GCRA, the virtual-scheduling form of a
//!   bucket of `burst` tokens refilled one per `interval_ns`; latlab-game's bucket in user
//!   space is the same). When the map is full the least recently used source is forgotten
//!   and starts again with a full bucket.
//! - `latlab_limited`, a one-entry `BPF_MAP_TYPE_ARRAY` holding the count of frames dropped
//!   (added atomically), read by [`SourceDrops::read`].
//!
//! A bucket is updated in place through the pointer `bpf_map_lookup_elem` returns; two CPUs
//! taking frames of one source at the same instant may both pass on one token (veth delivers
//! one source's frames on one CPU).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::{
    bpf, bpf_error, bpf_fd, name16, Insn, MapCreateAttr, MapUpdateAttr, Size, BPF_MAP_CREATE, R0,
    R1, R2, R3, R4, R5, R7,
};

/// `BPF_MAP_LOOKUP_ELEM`.
const BPF_MAP_LOOKUP_ELEM: u32 = 1;
/// `BPF_MAP_TYPE_ARRAY`.
const BPF_MAP_TYPE_ARRAY: u32 = 2;
/// `BPF_MAP_TYPE_LRU_HASH`.
const BPF_MAP_TYPE_LRU_HASH: u32 = 9;
/// `BPF_FUNC_map_lookup_elem`.
const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
/// `BPF_FUNC_map_update_elem`.
const BPF_FUNC_MAP_UPDATE_ELEM: i32 = 2;
/// XDP return code: drop the frame.
const XDP_DROP: i32 = 1;
/// The frame pointer register (read-only; the stack lies below it).
const R10: u8 = 10;
/// Sources the program keeps a bucket for at once.
pub const SOURCES: u32 = 65_536;
/// Depth of the program's buckets by default: packets a source may send at one instant. The
/// same as latlab-game's `rate_burst` default, so the program never drops what the game
/// core's own bucket would let through: a client within the rate that catches up after a
/// stall (a burst of a few dozen packets at once) is not cut, while a flood still loses
/// everything above the rate after its first 32 packets.
pub const SOURCE_BURST: u32 = 32;
/// The longest refill interval kept (about 18 minutes): lower rates are taken as this one,
/// so that `now + tolerance` cannot overflow.
const MAX_INTERVAL_NS: u64 = 1 << 40;

/// Where the program keeps its values on the stack (offsets from r10).
mod stack {
    /// The source key, 8 bytes.
    pub(super) const KEY: i16 = -8;
    /// A new bucket's value, 8 bytes.
    pub(super) const VALUE: i16 = -16;
    /// The counter's array index, 4 bytes.
    pub(super) const INDEX: i16 = -24;
}

/// How fast one source may send to the endpoint before the program drops its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SourceLimit {
    /// One token every this many ns, 1 to 2^40.
    interval_ns: u64,
    /// Tokens the bucket holds, 1 to 65535.
    burst: u32,
}

impl SourceLimit {
    /// `rate_pps` packets per second per source with a burst of [`SOURCE_BURST`]; `None`
    /// when the rate is not a finite number above 0 (no limit a program can keep). The
    /// interval is rounded to whole ns, as latlab-game's bucket does.
    pub fn new(rate_pps: f64) -> Option<SourceLimit> {
        SourceLimit::with_burst(rate_pps, SOURCE_BURST)
    }

    /// As [`SourceLimit::new`] with a burst of `burst` packets (1 to 65535; `None` outside).
    pub fn with_burst(rate_pps: f64, burst: u32) -> Option<SourceLimit> {
        if !(rate_pps.is_finite() && rate_pps > 0.0 && (1..=65_535).contains(&burst)) {
            return None;
        }
        // `as` saturates; the clamp keeps `now + tolerance` far from overflow.
        let interval_ns = ((1e9 / rate_pps).round() as u64).clamp(1, MAX_INTERVAL_NS);
        Some(SourceLimit { interval_ns, burst })
    }

    /// One token every this many ns.
    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// Tokens the bucket holds.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// How far ahead of its schedule a source may be: `(burst - 1) * interval_ns`.
    fn tolerance_ns(&self) -> u64 {
        self.interval_ns * u64::from(self.burst - 1)
    }
}

/// The maps of a metered program, closed with it.
#[derive(Debug)]
pub(crate) struct SourceMeter {
    limit: SourceLimit,
    sources: OwnedFd,
    dropped: OwnedFd,
}

impl SourceMeter {
    /// Makes the two maps for `limit`; errors name the interface and the map.
    pub(crate) fn create(ifname: &str, limit: SourceLimit) -> io::Result<SourceMeter> {
        let sources = create_map(
            ifname,
            BPF_MAP_TYPE_LRU_HASH,
            8,
            8,
            SOURCES,
            "latlab_sources",
        )?;
        let dropped = create_map(ifname, BPF_MAP_TYPE_ARRAY, 4, 8, 1, "latlab_limited")?;
        Ok(SourceMeter {
            limit,
            sources,
            dropped,
        })
    }

    /// The limit the program keeps.
    pub(crate) fn limit(&self) -> SourceLimit {
        self.limit
    }

    /// The descriptors the program refers to.
    pub(crate) fn fds(&self) -> MeterFds {
        MeterFds {
            sources: self.sources.as_raw_fd(),
            dropped: self.dropped.as_raw_fd(),
            limit: self.limit,
        }
    }

    /// A handle on the drop counter that another thread may read.
    pub(crate) fn drops(&self) -> io::Result<SourceDrops> {
        Ok(SourceDrops {
            map: self.dropped.try_clone()?,
        })
    }
}

/// The frames a metered program has dropped, readable from any thread while the socket runs
/// (and after: the handle keeps the counter map, and only it, open until it is dropped).
#[derive(Debug)]
pub struct SourceDrops {
    map: OwnedFd,
}

impl SourceDrops {
    /// Frames dropped so far for a source above its limit.
    pub fn read(&self) -> io::Result<u64> {
        let key = 0u32;
        let mut value = 0u64;
        let mut attr = MapUpdateAttr {
            map_fd: self.map.as_raw_fd() as u32,
            _pad: 0,
            key: &key as *const u32 as u64,
            value: &mut value as *mut u64 as u64,
            flags: 0,
        };
        bpf(BPF_MAP_LOOKUP_ELEM, &mut attr)?;
        Ok(value)
    }
}

/// Makes a map named `name` for the program of `ifname`; errors name both.
pub(super) fn create_map(
    ifname: &str,
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    name: &str,
) -> io::Result<OwnedFd> {
    let mut attr = MapCreateAttr {
        map_type,
        key_size,
        value_size,
        max_entries,
        map_flags: 0,
        inner_map_fd: 0,
        numa_node: 0,
        map_name: name16(name),
    };
    bpf_fd(BPF_MAP_CREATE, &mut attr)
        .map_err(|e| bpf_error(ifname, &format!("BPF_MAP_CREATE {name}"), e))
}

/// What the program's meter needs: its maps' descriptors and the limit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MeterFds {
    pub(crate) sources: i32,
    pub(crate) dropped: i32,
    pub(crate) limit: SourceLimit,
}

impl Insn {
    /// `dst = imm` (64 bit): two instruction slots.
    const fn ld_imm64(dst: u8, imm: u64) -> [Insn; 2] {
        [
            Insn::new(0x18, dst, 0, 0, imm as u32 as i32),
            Insn::new(0, 0, 0, 0, (imm >> 32) as u32 as i32),
        ]
    }

    /// `dst += src` (64 bit).
    const fn add64_reg(dst: u8, src: u8) -> Insn {
        Insn::new(0x0f, dst, src, 0, 0)
    }

    /// `if dst == imm goto +off`.
    const fn jeq_imm(dst: u8, imm: i32, off: i16) -> Insn {
        Insn::new(0x15, dst, 0, off, imm)
    }

    /// `if dst >= src goto +off` (unsigned).
    const fn jge_reg(dst: u8, src: u8, off: i16) -> Insn {
        Insn::new(0x3d, dst, src, off, 0)
    }

    /// `goto +off`.
    const fn ja(off: i16) -> Insn {
        Insn::new(0x05, 0, 0, off, 0)
    }

    /// `lock *(u64 *)(dst + off) += src`.
    const fn atomic_add64(dst: u8, src: u8, off: i16) -> Insn {
        // BPF_STX | BPF_ATOMIC | BPF_DW, imm BPF_ADD.
        Insn::new(0xdb, dst, src, off, 0)
    }
}

/// Appends the meter to `p`, where r2 holds `ctx->data` checked for the IPv4 and UDP headers,
/// r7 the arrival time: a frame within its source's limit falls through (its bucket updated,
/// or a full one made for a source not seen before); the index of the one jump to the drop
/// block is returned, to be patched by [`drop_block`].
pub(super) fn meter(p: &mut Vec<Insn>, fds: MeterFds) -> usize {
    let limit = fds.limit;
    // The key: source address (IPv4 bytes 12..16) and UDP source port, as on the wire.
    p.push(Insn::ldx(Size::W, R5, R2, 26));
    p.push(Insn::stx(Size::W, R10, R5, stack::KEY));
    p.push(Insn::ldx(Size::H, R5, R2, 34));
    p.push(Insn::stx(Size::H, R10, R5, stack::KEY + 4));
    p.push(Insn::st_imm(Size::H, R10, stack::KEY + 6, 0));
    p.extend(Insn::ld_map_fd(R1, fds.sources));
    p.push(Insn::mov64_reg(R2, R10));
    p.push(Insn::add64_imm(R2, i32::from(stack::KEY)));
    p.push(Insn::call(BPF_FUNC_MAP_LOOKUP_ELEM));
    let to_new = p.len();
    p.push(Insn::jeq_imm(R0, 0, 0));
    // A known source: tat = max(tat, now); over the limit when tat > now + tolerance.
    p.push(Insn::ldx(Size::Dw, R1, R0, 0));
    p.push(Insn::jge_reg(R1, R7, 1));
    p.push(Insn::mov64_reg(R1, R7));
    p.extend(Insn::ld_imm64(R3, limit.tolerance_ns()));
    p.push(Insn::mov64_reg(R2, R7));
    p.push(Insn::add64_reg(R2, R3));
    let to_drop = p.len();
    p.push(Insn::jgt_reg(R1, R2, 0));
    p.extend(Insn::ld_imm64(R3, limit.interval_ns));
    p.push(Insn::add64_reg(R1, R3));
    p.push(Insn::stx(Size::Dw, R0, R1, 0));
    let to_end = p.len();
    p.push(Insn::ja(0));
    // A new source: its first token taken, tat = now + interval.
    p[to_new].off = (p.len() - to_new - 1) as i16;
    p.push(Insn::mov64_reg(R1, R7));
    p.extend(Insn::ld_imm64(R3, limit.interval_ns));
    p.push(Insn::add64_reg(R1, R3));
    p.push(Insn::stx(Size::Dw, R10, R1, stack::VALUE));
    p.extend(Insn::ld_map_fd(R1, fds.sources));
    p.push(Insn::mov64_reg(R2, R10));
    p.push(Insn::add64_imm(R2, i32::from(stack::KEY)));
    p.push(Insn::mov64_reg(R3, R10));
    p.push(Insn::add64_imm(R3, i32::from(stack::VALUE)));
    // BPF_ANY; a failed update lets the frame through, as a full bucket would.
    p.push(Insn::mov64_imm(R4, 0));
    p.push(Insn::call(BPF_FUNC_MAP_UPDATE_ELEM));
    p[to_end].off = (p.len() - to_end - 1) as i16;
    to_drop
}

/// Appends the drop block (count the frame, `return XDP_DROP`) and points the jump at
/// `to_drop` to it.
pub(super) fn drop_block(p: &mut Vec<Insn>, fds: MeterFds, to_drop: usize) {
    p[to_drop].off = (p.len() - to_drop - 1) as i16;
    p.push(Insn::st_imm(Size::W, R10, stack::INDEX, 0));
    p.extend(Insn::ld_map_fd(R1, fds.dropped));
    p.push(Insn::mov64_reg(R2, R10));
    p.push(Insn::add64_imm(R2, i32::from(stack::INDEX)));
    p.push(Insn::call(BPF_FUNC_MAP_LOOKUP_ELEM));
    p.push(Insn::jeq_imm(R0, 0, 2));
    p.push(Insn::mov64_imm(R1, 1));
    p.push(Insn::atomic_add64(R0, R1, 0));
    p.push(Insn::mov64_imm(R0, XDP_DROP));
    p.push(Insn::exit());
}

#[cfg(test)]
mod tests {
    use super::super::{assemble, load, Redirect};
    use super::*;

    fn fds() -> MeterFds {
        MeterFds {
            sources: 6,
            dropped: 7,
            // 2000 pps: one token every 500 µs, 8 deep.
            limit: SourceLimit::with_burst(2000.0, 8).unwrap(),
        }
    }

    #[test]
    fn a_limit_is_a_whole_interval_and_the_named_burst() {
        let l = SourceLimit::new(2000.0).unwrap();
        assert_eq!((l.interval_ns(), l.burst()), (500_000, SOURCE_BURST));
        assert_eq!(SOURCE_BURST, 32);
        assert_eq!(l.tolerance_ns(), 31 * 500_000);
        let l = SourceLimit::with_burst(2000.0, 8).unwrap();
        assert_eq!(l.tolerance_ns(), 7 * 500_000);
        // Rates no program can keep set no limit.
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(SourceLimit::new(rate), None, "{rate}");
        }
        assert_eq!(SourceLimit::with_burst(10.0, 0), None);
        // Above 1 Gpps the interval stays 1 ns; a tiny rate is clamped, never overflowing.
        assert_eq!(SourceLimit::new(5e9).unwrap().interval_ns(), 1);
        assert_eq!(
            SourceLimit::new(1e-9).unwrap().interval_ns(),
            MAX_INTERVAL_NS
        );
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn the_metered_endpoint_program_is_these_bytes() {
        let golden: [[u8; 8]; 86] = [
            [0xbf, 0x16, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // 0: r6 = r1
            [0x85, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00], // call bpf_ktime_get_ns
            [0xbf, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r7 = r0 (now)
            [0x61, 0x62, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r2 = ctx->data
            [0x61, 0x63, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00], // r3 = ctx->data_end
            [0xbf, 0x24, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r4 = r2
            [0x07, 0x04, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x00], // r4 += 42
            [0x2d, 0x34, 0x41, 0x00, 0x00, 0x00, 0x00, 0x00], // 7: if r4 > r3 goto pass (73)
            [0x69, 0x25, 0x0c, 0x00, 0x00, 0x00, 0x00, 0x00], // r5 = ethertype
            [0x55, 0x05, 0x3f, 0x00, 0x08, 0x00, 0x00, 0x00], // != 0x0800: pass
            [0x71, 0x25, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x00], // r5 = version/ihl
            [0x55, 0x05, 0x3d, 0x00, 0x45, 0x00, 0x00, 0x00], // != 0x45: pass
            [0x69, 0x25, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00], // r5 = flags/fragment
            [0x57, 0x05, 0x00, 0x00, 0x3f, 0xff, 0x00, 0x00], // r5 &= 0x3fff (wire order)
            [0x55, 0x05, 0x3a, 0x00, 0x00, 0x00, 0x00, 0x00], // != 0: pass
            [0x71, 0x25, 0x17, 0x00, 0x00, 0x00, 0x00, 0x00], // r5 = protocol
            [0x55, 0x05, 0x38, 0x00, 0x11, 0x00, 0x00, 0x00], // != UDP: pass
            [0x69, 0x25, 0x24, 0x00, 0x00, 0x00, 0x00, 0x00], // r5 = UDP dst port
            [0x55, 0x05, 0x36, 0x00, 0x1e, 0x61, 0x00, 0x00], // 18: != 7777: pass
            [0x61, 0x25, 0x1a, 0x00, 0x00, 0x00, 0x00, 0x00], // 19: r5 = IPv4 source
            [0x63, 0x5a, 0xf8, 0xff, 0x00, 0x00, 0x00, 0x00], // *(u32 *)(r10 - 8) = r5
            [0x69, 0x25, 0x22, 0x00, 0x00, 0x00, 0x00, 0x00], // r5 = UDP source port
            [0x6b, 0x5a, 0xfc, 0xff, 0x00, 0x00, 0x00, 0x00], // *(u16 *)(r10 - 4) = r5
            [0x6a, 0x0a, 0xfe, 0xff, 0x00, 0x00, 0x00, 0x00], // *(u16 *)(r10 - 2) = 0
            [0x18, 0x11, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00], // r1 = sources map (fd 6)
            [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], //   (upper half)
            [0xbf, 0xa2, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r2 = r10
            [0x07, 0x02, 0x00, 0x00, 0xf8, 0xff, 0xff, 0xff], // r2 += -8 (&key)
            [0x85, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00], // call bpf_map_lookup_elem
            [0x15, 0x00, 0x0d, 0x00, 0x00, 0x00, 0x00, 0x00], // 29: if r0 == 0 goto new (43)
            [0x79, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r1 = bucket's tat
            [0x3d, 0x71, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00], // if r1 >= r7 goto +1
            [0xbf, 0x71, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r1 = r7
            [0x18, 0x03, 0x00, 0x00, 0xe0, 0x67, 0x35, 0x00], // r3 = 3_500_000 (tolerance)
            [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], //   (upper half)
            [0xbf, 0x72, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r2 = r7
            [0x0f, 0x32, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r2 += r3
            [0x2d, 0x21, 0x25, 0x00, 0x00, 0x00, 0x00, 0x00], // 37: if r1 > r2 goto drop (75)
            [0x18, 0x03, 0x00, 0x00, 0x20, 0xa1, 0x07, 0x00], // r3 = 500_000 (interval)
            [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], //   (upper half)
            [0x0f, 0x31, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r1 += r3
            [0x7b, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // bucket's tat = r1
            [0x05, 0x00, 0x0d, 0x00, 0x00, 0x00, 0x00, 0x00], // 42: goto stamp (56)
            [0xbf, 0x71, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // 43: new: r1 = r7
            [0x18, 0x03, 0x00, 0x00, 0x20, 0xa1, 0x07, 0x00], // r3 = 500_000
            [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], //   (upper half)
            [0x0f, 0x31, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r1 += r3
            [0x7b, 0x1a, 0xf0, 0xff, 0x00, 0x00, 0x00, 0x00], // *(u64 *)(r10 - 16) = r1
            [0x18, 0x11, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00], // r1 = sources map
            [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], //   (upper half)
            [0xbf, 0xa2, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r2 = r10
            [0x07, 0x02, 0x00, 0x00, 0xf8, 0xff, 0xff, 0xff], // r2 += -8 (&key)
            [0xbf, 0xa3, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r3 = r10
            [0x07, 0x03, 0x00, 0x00, 0xf0, 0xff, 0xff, 0xff], // r3 += -16 (&value)
            [0xb7, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r4 = BPF_ANY
            [0x85, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00], // call bpf_map_update_elem
            [0xbf, 0x61, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // 56: stamp: r1 = r6
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
            [0x61, 0x62, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00], // redirect: r2 = rx_queue_index
            [0x18, 0x11, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00], // r1 = XSKMAP (fd 5)
            [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], //   (upper half)
            [0xb7, 0x03, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00], // r3 = XDP_PASS
            [0x85, 0x00, 0x00, 0x00, 0x33, 0x00, 0x00, 0x00], // call bpf_redirect_map
            [0x95, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // exit
            [0xb7, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00], // 73: pass: r0 = XDP_PASS
            [0x95, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // exit
            [0x62, 0x0a, 0xe8, 0xff, 0x00, 0x00, 0x00, 0x00], // 75: drop: *(u32 *)(r10 - 24) = 0
            [0x18, 0x11, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00], // r1 = drop counter (fd 7)
            [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], //   (upper half)
            [0xbf, 0xa2, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r2 = r10
            [0x07, 0x02, 0x00, 0x00, 0xe8, 0xff, 0xff, 0xff], // r2 += -24 (&index)
            [0x85, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00], // call bpf_map_lookup_elem
            [0x15, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00], // if r0 == 0 goto +2
            [0xb7, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00], // r1 = 1
            [0xdb, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // lock *(u64 *)(r0 + 0) += r1
            [0xb7, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00], // r0 = XDP_DROP
            [0x95, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // exit
        ];
        let got: Vec<[u8; 8]> = assemble(Redirect::Endpoint { udp_port: 7777 }, 5, Some(fds()))
            .iter()
            .map(|i| i.encode())
            .collect();
        assert_eq!(got, golden);
    }

    #[test]
    fn every_meter_jump_lands_where_its_comment_says() {
        let p = assemble(Redirect::Endpoint { udp_port: 1 }, 3, Some(fds()));
        let at = |insn: Insn| p.iter().position(|i| *i == insn).unwrap();
        let meter_at = at(Insn::ldx(Size::W, R5, R2, 26));
        // `r1 = r7` twice: tat = now after the `>=` test, then the new source's block.
        let new_at = (meter_at..p.len())
            .filter(|&i| p[i] == Insn::mov64_reg(R1, R7))
            .nth(1)
            .unwrap();
        let stamp_at = at(Insn::mov64_reg(R1, super::super::R6));
        let pass = p
            .iter()
            .rposition(|i| *i == Insn::mov64_imm(R0, 2))
            .unwrap();
        let drop_at = pass + 2;
        let drop_exit = p.len() - 2;
        assert_eq!(p[drop_exit], Insn::mov64_imm(R0, XDP_DROP));
        let mut seen = [0usize; 4];
        for (i, insn) in p.iter().enumerate() {
            let target = match insn.code {
                0x05 | 0x15 | 0x2d | 0x3d | 0x55 => i + 1 + insn.off as usize,
                _ => continue,
            };
            assert!(target < p.len(), "jump at {i} leaves the program");
            if i < meter_at {
                assert_eq!(target, pass, "header check at {i}");
            } else if insn.code == 0x15 && i < stamp_at {
                assert_eq!(target, new_at, "lookup miss at {i}");
                seen[0] += 1;
            } else if insn.code == 0x2d && i < stamp_at {
                assert_eq!(target, drop_at, "over the limit at {i}");
                seen[1] += 1;
            } else if insn.code == 0x05 {
                assert_eq!(target, stamp_at, "within the limit at {i}");
                seen[2] += 1;
            } else if insn.code == 0x3d {
                assert_eq!(target, i + 2, "tat = max(tat, now) at {i}");
            } else if i > drop_at {
                assert_eq!(target, drop_exit, "counter lookup miss at {i}");
                seen[3] += 1;
            }
        }
        assert_eq!(seen, [1, 1, 1, 1]);
    }

    #[test]
    fn the_verifier_takes_the_metered_program() {
        let meter = match SourceMeter::create("veth-x", SourceLimit::new(2000.0).unwrap()) {
            Ok(m) => m,
            Err(err) if err.kind() == io::ErrorKind::PermissionDenied => {
                crate::precondition::missing(format_args!("bpf() is not allowed here: {err}"));
                return;
            }
            Err(err) => panic!("{err}"),
        };
        let xsks = super::super::create_xskmap("veth-x").unwrap();
        let insns = assemble(
            Redirect::Endpoint { udp_port: 7777 },
            xsks.as_raw_fd(),
            Some(meter.fds()),
        );
        load("veth-x", &insns).unwrap();
        assert_eq!(meter.drops().unwrap().read().unwrap(), 0);
    }
}
