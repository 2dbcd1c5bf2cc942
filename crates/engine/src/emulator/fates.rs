//! `--record-fates` and `--replay-fates` in the engine: each frame named by its direction,
//! flow and position ([`latlab_link::fates`]), given its recorded fate when a replay has one,
//! and its fate (the model's or the replay's) handed to another thread through a lock-free
//! single-producer single-consumer ring (`rtrb`) to be written out.
//!
//! The frame path never waits for the writer: a record that finds the ring full is not
//! written and is counted ([`FatesReport::unqueued`]; the file's trailer says how many). A
//! frame costs one read of its flow fields and a hash lookup, plus a map insert for a new
//! 5-tuple; nothing of this runs without either flag.

use latlab_link::fates::replay::{FlowNumbers, Replay};
use latlab_link::fates::{FrameRecord, Recorded};
use latlab_link::{Fate, FlowPipes};
use rtrb::{Consumer, Producer, RingBuffer};

/// What [`super::run`] is to do with fates, set before it starts
/// ([`super::EmulatorControl::set_fates`]).
#[derive(Debug, Default)]
pub struct FateSettings {
    /// Push every frame's fate (as applied) into this ring ([`fate_ring`]).
    pub record: Option<Producer<FrameRecord>>,
    /// Give each frame the fate recorded for its direction, flow and position, where the
    /// record has one (directions 0: A→B, 1: B→A, as the file's header).
    pub replay: Option<Replay>,
}

/// A ring of `records` frame records: the producer for [`FateSettings::record`], the consumer
/// for the thread that writes them.
pub fn fate_ring(records: usize) -> (Producer<FrameRecord>, Consumer<FrameRecord>) {
    RingBuffer::new(records.max(16))
}

/// What recording and replaying did in a run. Per direction, `replayed + not_in_record` is
/// every frame that arrived during a replay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FatesReport {
    /// Records pushed into the ring.
    pub recorded: u64,
    /// Records the ring had no room for (not written).
    pub unqueued: u64,
    /// Frames given their recorded fate, per direction.
    pub replayed: [u64; 2],
    /// Frames the record had no fate for (beyond it, or a flow it lacks): the model decided
    /// them, per direction.
    pub not_in_record: [u64; 2],
    /// Recorded fates no frame took by the end of the run.
    pub unused: u64,
    /// Frames recorded as corrupted whose bit lies beyond their length in this run: sent
    /// uncorrupted.
    pub corrupt_too_short: u64,
}

/// The engine's end: the flows seen, the replay, the ring and the counts.
pub(crate) struct Fates {
    start_ns: u64,
    numbers: [FlowNumbers; 2],
    settings: FateSettings,
    report: FatesReport,
}

impl Fates {
    pub(crate) fn new(settings: FateSettings, start_ns: u64) -> Fates {
        Fates {
            start_ns,
            numbers: Default::default(),
            settings,
            report: FatesReport::default(),
        }
    }

    /// The fate of `frame`, arrived at `rx_ns` in direction `d`, from `pipe`: the recorded one
    /// if the replay has it, else the model's; recorded if asked.
    #[inline]
    pub(crate) fn decide(
        &mut self,
        d: usize,
        rx_ns: u64,
        frame: &[u8],
        pipe: &mut FlowPipes,
    ) -> Fate {
        let (flow, position) = self.numbers[d].name(frame);
        let recorded = self
            .settings
            .replay
            .as_mut()
            .map(|r| r.take(d, flow, position));
        let fate = match recorded {
            Some(Some(recorded)) => {
                self.report.replayed[d] += 1;
                let fate = pipe.handle_recorded(rx_ns, frame, recorded);
                if let (
                    Recorded::Deliver {
                        corrupt_bit: Some(_),
                        ..
                    },
                    Fate::Deliver {
                        corrupt_bit: None, ..
                    },
                ) = (recorded, fate)
                {
                    self.report.corrupt_too_short += 1;
                }
                fate
            }
            Some(None) => {
                self.report.not_in_record[d] += 1;
                pipe.handle_arrival(rx_ns, frame)
            }
            None => pipe.handle_arrival(rx_ns, frame),
        };
        if let Some(ring) = &mut self.settings.record {
            let record = FrameRecord {
                direction: d as u8,
                flow,
                position,
                arrival_ns: rx_ns.saturating_sub(self.start_ns),
                len: u32::try_from(frame.len()).unwrap_or(u32::MAX),
                fate: Recorded::of(&fate, rx_ns),
            };
            match ring.push(record) {
                Ok(()) => self.report.recorded += 1,
                Err(_) => self.report.unqueued += 1,
            }
        }
        fate
    }

    /// What was done, at the end of the run (the ring dropped: the writer sees it closed).
    pub(crate) fn finish(self) -> FatesReport {
        FatesReport {
            unused: self.settings.replay.as_ref().map_or(0, Replay::unused),
            ..self.report
        }
    }
}
