//! `latlab emu --pcap FILE`: what left each side of the bridge, as a pcapng file (pcap-file 2)
//! that Wireshark and tshark read.
//!
//! One interface description block per side (interface 0: frames sent on interface A, that is
//! the B→A direction; interface 1: frames sent on B, A→B), with nanosecond timestamps
//! (`if_tsresol` 9). Each enhanced packet block is stamped with the frame's departure (when
//! the emulator queued it on the interface) and carries in its comment the arrival stamp and
//! the intended departure, in ns on the same clock: `arrival_ns=… intended_ns=…`. At most
//! [`latlab_engine::emulator::TAP_SNAP`] bytes of each frame are kept, with its whole length.
//!
//! The frames come from the engine's tap ring, read by a thread of its own, so the frame path
//! never waits on the disk. The file is written as every partial result is
//! ([`latlab_lab::results::PartialFile`]): under `.FILE.partial-PID`, locked by its writer, and
//! renamed once complete, at the end of the run (Ctrl-C and SIGTERM included): it is whole or
//! absent, and what a run killed outright left is removed by `latlab clean`.

use std::borrow::Cow;
use std::io::{self, BufWriter};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use latlab_engine::emulator::{LinkDirection, TapRecord, TAP_SNAP};
use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;
use rtrb::Consumer;

use latlab_lab::results::PartialFile;

/// Frames the ring between the engine and the writer holds.
pub const PCAP_RING_FRAMES: usize = 8192;

/// What the writer wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PcapWritten {
    /// Frames written, per interface they left on: A, B.
    pub frames: [u64; 2],
}

/// The interface a frame travelling in `direction` left on: 0 for A, 1 for B.
fn interface(direction: LinkDirection) -> u32 {
    match direction {
        LinkDirection::BToA => 0,
        LinkDirection::AToB => 1,
    }
}

/// Writes every record from `ring` to the pcapng file `path` until `done` is raised and the
/// ring is empty; `ifaces` are the names of interfaces A and B.
pub fn write(
    path: &Path,
    ifaces: [&str; 2],
    mut ring: Consumer<TapRecord>,
    done: &AtomicBool,
) -> io::Result<PcapWritten> {
    let partial = PartialFile::create(path)?;
    let file = BufWriter::with_capacity(1 << 20, partial.file());
    let written = (|| -> io::Result<PcapWritten> {
        let mut w = PcapNgWriter::new(file).map_err(pcap_error)?;
        for (name, other) in [(ifaces[0], ifaces[1]), (ifaces[1], ifaces[0])] {
            let idb = InterfaceDescriptionBlock {
                linktype: DataLink::ETHERNET,
                snaplen: TAP_SNAP as u32,
                options: vec![
                    InterfaceDescriptionOption::IfName(Cow::Owned(name.to_string())),
                    InterfaceDescriptionOption::IfDescription(Cow::Owned(format!(
                        "frames latlab emu sent on {name} (arrived on {other})"
                    ))),
                    InterfaceDescriptionOption::IfTsResol(9),
                ],
            };
            w.write_pcapng_block(idb).map_err(pcap_error)?;
        }
        let mut written = PcapWritten::default();
        loop {
            // Raised before the last records are read: what the engine pushed before it
            // stopped is in the ring by then.
            let last_round = done.load(Ordering::Acquire);
            let mut any = false;
            while let Ok(r) = ring.pop() {
                any = true;
                let i = interface(r.direction);
                let epb = EnhancedPacketBlock {
                    interface_id: i,
                    timestamp: Duration::from_nanos(r.departure_ns),
                    original_len: r.len,
                    data: Cow::Borrowed(r.frame()),
                    options: vec![EnhancedPacketOption::Comment(Cow::Owned(format!(
                        "arrival_ns={} intended_ns={}",
                        r.arrival_ns, r.intended_ns
                    )))],
                };
                w.write_pcapng_block(epb).map_err(pcap_error)?;
                written.frames[i as usize] += 1;
            }
            if last_round {
                break;
            }
            if !any {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        w.into_inner().into_inner().map_err(|e| e.into_error())?;
        Ok(written)
    })()?;
    // On an error above, `partial` is removed as it drops.
    partial.commit()?;
    Ok(written)
}

fn pcap_error(e: pcap_file::PcapError) -> io::Error {
    io::Error::other(e.to_string())
}

#[cfg(test)]
mod tests;
