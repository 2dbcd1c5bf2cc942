//! Reading what the kernel wrote into the RX and TX rings: status words, V2 slots and V3
//! blocks, every offset and length checked against the unit it lies in.

use super::*;

/// Whether the kernel has handed the RX unit (V2 slot, V3 block) at `unit`, whose status word
/// is at `status_at`, to user space; orders the reads of its contents after that of the status.
pub(super) fn rx_unit_is_ours(unit: *const u8, status_at: usize) -> bool {
    // SAFETY: callers pass the start of a unit inside the mapping and its status offset; the
    // status word lies inside it, 4-byte aligned; volatile because the kernel writes it
    // concurrently.
    let status = unsafe { ptr::read_volatile(unit.add(status_at).cast::<u32>()) };
    if status & libc::TP_STATUS_USER == 0 {
        return false;
    }
    fence(Ordering::Acquire);
    true
}

/// The status word of the TX slot at `slot`.
pub(super) fn tx_slot_status(slot: *const u8, fields: TxFields) -> u32 {
    // SAFETY: callers pass the start of a TX slot inside the mapping and the socket's header
    // layout; the status word lies inside the slot, 4-byte aligned (slots are 16-byte
    // aligned); volatile because the kernel writes it concurrently.
    unsafe { ptr::read_volatile(slot.add(fields.status).cast::<u32>()) }
}

/// Hands the frames of one retired RX block to `f`. `Err(n)` when an offset or length points
/// outside the block, after `n` frames were handed; the rest of the block is skipped.
pub(super) fn walk_block(block: &[u8], f: &mut impl FnMut(&RxFrame<'_>)) -> Result<usize, usize> {
    let count = read_u32(block, BLOCK_NUM_PKTS).ok_or(0usize)?;
    let mut offset = read_u32(block, BLOCK_FIRST_PKT).ok_or(0usize)? as usize;
    for i in 0..count as usize {
        let (frame, next_offset) = read_frame(block, offset).ok_or(i)?;
        f(&frame);
        if i + 1 < count as usize {
            // Only the last frame of a block has no successor (next offset 0).
            if (next_offset as usize) < HDR3_LEN {
                return Err(i + 1);
            }
            offset = offset.checked_add(next_offset as usize).ok_or(i + 1)?;
        }
    }
    Ok(count as usize)
}

/// One received frame, read from its ring header.
pub(super) struct RxFrame<'a> {
    pub(super) data: &'a [u8],
    pub(super) rx_ns: u64,
    pub(super) truncated: bool,
    /// The ring header's status word (`TP_STATUS_COPY`, `TP_STATUS_VLAN_VALID`, ...).
    pub(super) status: u32,
    /// The tag the kernel took out of the frame, valid with `TP_STATUS_VLAN_VALID`.
    pub(super) vlan_tci: u16,
    /// Its TPID, valid with `TP_STATUS_VLAN_TPID_VALID`.
    pub(super) vlan_tpid: u16,
    /// The bytes right before the frame: its `virtio_net_hdr` when the socket asked for one.
    pub(super) before: &'a [u8],
}

/// Reads the frame of one V2 RX slot from the `tpacket2_hdr` at its start; `None` when the
/// frame would lie outside the slot or overlap its header.
pub(super) fn read_slot(slot: &[u8]) -> Option<RxFrame<'_>> {
    let field = |offset: usize| read_u32(slot, offset);
    let sec = field(offset_of!(libc::tpacket2_hdr, tp_sec))?;
    let nsec = field(offset_of!(libc::tpacket2_hdr, tp_nsec))?;
    let snaplen = field(offset_of!(libc::tpacket2_hdr, tp_snaplen))? as usize;
    let len = field(offset_of!(libc::tpacket2_hdr, tp_len))? as usize;
    let mac_at = offset_of!(libc::tpacket2_hdr, tp_mac);
    let mac = u16::from_ne_bytes(slot.get(mac_at..mac_at + 2)?.try_into().ok()?) as usize;
    if mac < HDR2_LEN {
        // The kernel always puts the frame after its header.
        return None;
    }
    let data = slot.get(mac..mac.checked_add(snaplen)?)?;
    let half = |at: usize| Some(u16::from_ne_bytes(slot.get(at..at + 2)?.try_into().ok()?));
    Some(RxFrame {
        data,
        rx_ns: u64::from(sec) * 1_000_000_000 + u64::from(nsec),
        truncated: snaplen < len,
        status: field(offset_of!(libc::tpacket2_hdr, tp_status))?,
        vlan_tci: half(offset_of!(libc::tpacket2_hdr, tp_vlan_tci))?,
        vlan_tpid: half(offset_of!(libc::tpacket2_hdr, tp_vlan_tpid))?,
        before: &slot[HDR2_LEN..mac],
    })
}

/// Reads the frame whose `tpacket3_hdr` starts at `offset` of `block`, and the offset of the
/// next one from it; `None` when the header or the frame would lie outside the block, or the
/// frame overlaps its header.
pub(super) fn read_frame(block: &[u8], offset: usize) -> Option<(RxFrame<'_>, u32)> {
    let end = offset.checked_add(HDR3_LEN)?;
    let hdr = block.get(offset..end)?;
    let field = |name_offset: usize| read_u32(hdr, name_offset);
    let next_offset = field(offset_of!(libc::tpacket3_hdr, tp_next_offset))?;
    let sec = field(offset_of!(libc::tpacket3_hdr, tp_sec))?;
    let nsec = field(offset_of!(libc::tpacket3_hdr, tp_nsec))?;
    let snaplen = field(offset_of!(libc::tpacket3_hdr, tp_snaplen))? as usize;
    let len = field(offset_of!(libc::tpacket3_hdr, tp_len))? as usize;
    let mac_at = offset_of!(libc::tpacket3_hdr, tp_mac);
    let mac = u16::from_ne_bytes(hdr.get(mac_at..mac_at + 2)?.try_into().ok()?) as usize;
    if mac < HDR3_LEN {
        // The kernel always puts the frame after its header.
        return None;
    }
    let start = offset.checked_add(mac)?;
    let data = block.get(start..start.checked_add(snaplen)?)?;
    let tpid_at =
        offset_of!(libc::tpacket3_hdr, hv1) + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tpid);
    Some((
        RxFrame {
            data,
            rx_ns: u64::from(sec) * 1_000_000_000 + u64::from(nsec),
            truncated: snaplen < len,
            status: field(offset_of!(libc::tpacket3_hdr, tp_status))?,
            vlan_tci: field(
                offset_of!(libc::tpacket3_hdr, hv1)
                    + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tci),
            )? as u16,
            vlan_tpid: u16::from_ne_bytes(hdr.get(tpid_at..tpid_at + 2)?.try_into().ok()?),
            before: &block[offset + HDR3_LEN..start],
        },
        next_offset,
    ))
}

pub(super) fn read_u32(bytes: &[u8], offset: usize) -> Option<u32> {
    let b = bytes.get(offset..offset.checked_add(4)?)?;
    Some(u32::from_ne_bytes(b.try_into().ok()?))
}
