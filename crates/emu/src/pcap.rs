//! `latlab emu --pcap FILE`: what left each side of the bridge, as a pcapng file (pcap-file 2)
//! that Wireshark and tshark read.
//!
//! One interface description block per side (interface 0: frames sent on interface A, that is
//! the B→A direction; interface 1: frames sent on B, A→B), with nanosecond timestamps
//! (`if_tsresol` 9). Each enhanced packet block is stamped with the frame's departure (when
//! the emulator queued it on the interface) and carries in its comment the arrival stamp and
//! the intended departure, in ns on the same clock: `arrival_ns=… intended_ns=…`. The first
//! frame of a direction to leave after one of its events began or ended (a lag spike, an
//! outage, a flap) carries one more comment with the event and its time:
//! `event: outage 2s began at 3.000000000 s (event_ns=…)`. At most
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
use latlab_link::EventRecord;
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

/// The engine's start and both directions' events (A→B, B→A), as the engine last copied them.
pub type EventsNow<'a> = &'a (dyn Fn() -> (u64, [Vec<EventRecord>; 2]) + Sync);

/// An event's beginning or end: its direction, the event's beginning, whether its end.
type Boundary = (usize, u64, bool);

/// The events' beginnings and ends not yet written, per direction.
#[derive(Default)]
struct EventNotes {
    /// Boundaries written.
    written: std::collections::HashSet<Boundary>,
    /// Boundaries to write, per direction: (time, which, text), in time order.
    pending: [Vec<(u64, Boundary, String)>; 2],
}

impl EventNotes {
    fn refresh(&mut self, (start_ns, events): (u64, [Vec<EventRecord>; 2])) {
        for (d, records) in events.iter().enumerate() {
            let mut pending = Vec::new();
            for r in records {
                let boundaries = [(r.begin_ns, false, "began")]
                    .into_iter()
                    .chain(r.end_ns.map(|end| (end, true, "ended")));
                for (at, is_end, what) in boundaries {
                    let key = (d, r.begin_ns, is_end);
                    if self.written.contains(&key) {
                        continue;
                    }
                    let since = at.saturating_sub(start_ns) as f64 / 1e9;
                    let text = format!("event: {} {what} at {since:.9} s (event_ns={at})", r.event);
                    pending.push((at, key, text));
                }
            }
            pending.sort_by_key(|(at, _, _)| *at);
            self.pending[d] = pending;
        }
    }

    /// The notes of direction `d` due by `departure_ns`, marked written.
    fn due(&mut self, d: usize, departure_ns: u64) -> Vec<String> {
        let due = self.pending[d].partition_point(|(at, _, _)| *at <= departure_ns);
        let notes: Vec<_> = self.pending[d].drain(..due).collect();
        notes
            .into_iter()
            .map(|(_, key, text)| {
                self.written.insert(key);
                text
            })
            .collect()
    }
}

/// Writes every record from `ring` to the pcapng file `path` until `done` is raised and the
/// ring is empty; `ifaces` are the names of interfaces A and B; `events` gives the events,
/// noted on the first frame of their direction to leave after each began or ended.
pub fn write(
    path: &Path,
    ifaces: [&str; 2],
    mut ring: Consumer<TapRecord>,
    done: &AtomicBool,
    events: EventsNow<'_>,
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
        let mut notes = EventNotes::default();
        loop {
            // Raised before the last records are read: what the engine pushed before it
            // stopped is in the ring by then.
            let last_round = done.load(Ordering::Acquire);
            notes.refresh(events());
            let mut any = false;
            while let Ok(r) = ring.pop() {
                any = true;
                let i = interface(r.direction);
                let mut options = vec![EnhancedPacketOption::Comment(Cow::Owned(format!(
                    "arrival_ns={} intended_ns={}",
                    r.arrival_ns, r.intended_ns
                )))];
                let d = LinkDirection::BOTH
                    .iter()
                    .position(|x| *x == r.direction)
                    .unwrap_or(0);
                for note in notes.due(d, r.departure_ns) {
                    options.push(EnhancedPacketOption::Comment(Cow::Owned(note)));
                }
                let epb = EnhancedPacketBlock {
                    interface_id: i,
                    timestamp: Duration::from_nanos(r.departure_ns),
                    original_len: r.len,
                    data: Cow::Borrowed(r.frame()),
                    options,
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
