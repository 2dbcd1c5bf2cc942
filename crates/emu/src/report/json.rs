//! `latlab emu --json` as types: what the emulator writes at exit and what a reader (the
//! emulator study, `rfc2544`'s emu DUTs) gets back, the same structs both ways. The file is
//! the struct through [`serde_json::Value`], so every object's keys come out in alphabetical
//! order, as they always have; `null` where a value is absent (`spin_ns`, `sleeps`, a flow's
//! `match`, a change's `refused`), and `flows` only with per-flow rules.
//!
//! Read back, a part a file from an older latlab lacks reads as empty (counters 0, no
//! changes, `cpu` as `None`), so every file the emulator ever wrote still reads: only the two
//! directions and their `release_error_ns`, there from the first, are required.

use latlab_engine::emulator::{
    ByteCounters, ConfigChange, CpuUse, DirectionReport, EmulatorReport, FlowReport,
};
use latlab_link::LinkCounters;
use latlab_stats::Summary;
use serde::{Deserialize, Serialize};

use crate::losses::{InterfacesJson, LossesJson, SocketJson};
use latlab_lab::middle::interfaces::InterfaceCounts;

/// The whole file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmuJson {
    /// The latlab that wrote it.
    #[serde(default)]
    pub latlab_version: String,
    /// Frames from A to B.
    pub a_to_b: EmuDirectionJson,
    /// Frames from B to A.
    pub b_to_a: EmuDirectionJson,
    /// The configuration changes made while it ran (`--api`), in order.
    #[serde(default)]
    pub changes: Vec<EmuChangeJson>,
    /// The events begun and released while it ran (`--api`, `--ui`), in order (each
    /// direction's `events` has them all with their times, the schedule's too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub event_changes: Vec<super::EmuEventChangeJson>,
    /// Frames sent but not copied to the `--pcap` tap, whose ring was full.
    #[serde(default)]
    pub pcap_dropped: u64,
    /// The CPU the emulator used; `None` only in a file older than the count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<EmuCpuJson>,
    /// What the two interfaces counted while it ran; `None` where they could not be read, or
    /// in a file older than the count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<InterfacesJson>,
    /// What `--record-fates` and `--replay-fates` did; absent without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fates: Option<FatesJson>,
    /// The host's stalls of the emulator's loop over the run ([`latlab_stats::stalls`]): a
    /// release error no longer than the longest may be the host's; absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_stalls: Option<latlab_stats::stalls::HostStalls>,
}

/// What recording and replaying fates did (see [`latlab_engine::emulator::FatesReport`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FatesJson {
    /// Frames whose fate was recorded.
    pub recorded: u64,
    /// Frames whose record the writer's ring had no room for.
    pub unqueued: u64,
    /// Frames given their recorded fate: A→B, B→A.
    pub replayed: [u64; 2],
    /// Frames the record had no fate for, decided by the model: A→B, B→A.
    pub not_in_record: [u64; 2],
    /// Recorded fates no frame took.
    pub unused: u64,
    /// Frames recorded corrupted too short for their bit, sent whole.
    pub corrupt_too_short: u64,
}

/// What one direction did: every frame read is accounted for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmuDirectionJson {
    /// Frames read from the receiving interface.
    #[serde(default)]
    pub arrived: u64,
    /// The link model's counters by cause.
    #[serde(default)]
    pub link: LinkCounters,
    /// Frames written to the TX ring.
    #[serde(default)]
    pub sent: u64,
    /// Frames the emulator itself dropped, by cause.
    #[serde(default)]
    pub dropped_by_emulator: EmuDropsJson,
    /// Frames still held when it stopped: never sent.
    #[serde(default)]
    pub queued_at_exit: u64,
    /// What the receiving port did to make frames what they were on the wire.
    #[serde(default)]
    pub wire_frames: WireFramesJson,
    /// Frames released before their intended departure (never expected).
    #[serde(default)]
    pub released_early: u64,
    /// Actual − intended departure of every released frame, ns.
    pub release_error_ns: Summary,
    /// With a queue discipline (`aqm`) only: the time every frame it sent spent in its queue,
    /// ns (its drops and marks are `link.aqm_drop`, `link.aqm_overflow`, `link.aqm_mark`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sojourn_ns: Option<Summary>,
    /// With DualPI2 (`aqm=dualpi2`) only: what each of its two queues did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dualpi2: Option<DualQueuesJson>,
    /// The same fates in bytes (a queue discipline's drops are counted in frames only).
    #[serde(default)]
    pub bytes: EmuBytesJson,
    /// Per flow, with per-flow rules only: each rule's frames in the order of the rules, then
    /// the default pipe's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<EmuFlowJson>,
    /// Its events (lag spikes, outages, flaps), scheduled or begun, with their times; empty
    /// (and not written) without any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<super::EmuEventJson>,
    /// Every frame lost on its way through, by where it was lost ([`EmuJson::with_interfaces`]
    /// sets it); `None` in a file older than the count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_by_cause: Option<LossesJson>,
    /// What the kernel counted at the sockets (the receiving one's losses, the sending one's
    /// refusals), set with `lost_by_cause`; `None` in a file older than the count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<SocketJson>,
}

/// DualPI2's two queues, each on its own (their sums are in `link` and `sojourn_ns`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DualQueuesJson {
    /// The L4S queue: ECT(1) and CE frames.
    pub l4s: DualQueueJson,
    /// The classic queue: not-ECT and ECT(0) frames, and what is not IP.
    pub classic: DualQueueJson,
}

/// One of DualPI2's queues.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DualQueueJson {
    /// Frames it put on the wire.
    pub sent: u64,
    /// Frames it marked CE (`link.aqm_l4s_mark`, `link.aqm_classic_mark`).
    pub marked: u64,
    /// Frames its AQM dropped (`link.aqm_l4s_drop`, `link.aqm_classic_drop`); arrivals over
    /// the limits the two queues share are `link.dropped_queue_*`.
    pub dropped: u64,
    /// The time each frame it sent waited in it, ns.
    pub sojourn_ns: Summary,
}

impl DualQueuesJson {
    /// The queues of a direction with `link`'s counters and `sojourn`'s times.
    fn new(link: &LinkCounters, sojourn: &latlab_link::DualSojourn) -> DualQueuesJson {
        let queue = |marked, dropped, h: &latlab_stats::LatencyHistogram| DualQueueJson {
            sent: h.len(),
            marked,
            dropped,
            sojourn_ns: Summary::from_histogram(h),
        };
        DualQueuesJson {
            l4s: queue(link.aqm_l4s_mark, link.aqm_l4s_drop, &sojourn.l4s),
            classic: queue(
                link.aqm_classic_mark,
                link.aqm_classic_drop,
                &sojourn.classic,
            ),
        }
    }
}

/// The frames of one direction the emulator dropped, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct EmuDropsJson {
    /// The TX ring had no room.
    pub tx_ring_full: u64,
    /// Longer than the far interface sends.
    pub tx_too_long: u64,
    /// Shorter than an Ethernet header.
    pub tx_too_short: u64,
    /// The engine had no slot to hold them.
    pub queue_slots_full: u64,
    /// Dropped by the kernel before the RX ring.
    pub kernel_rx_ring: u64,
}

/// What the receiving port did to hand frames over as they were on the wire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WireFramesJson {
    /// VLAN tags put back.
    pub tags_restored: u64,
    /// Checksums left to the device, finished.
    pub checksums_finished: u64,
    /// Super-frames (GSO) cut into segments.
    pub super_frames: u64,
    /// The segments they became.
    pub segments: u64,
    /// Frames longer than a ring slot read whole.
    pub read_whole: u64,
    /// Frames whose metadata could not be acted on, handed on as they came.
    pub unfinished: u64,
    /// `unfinished` by cause.
    pub unfinished_by_cause: UnfinishedJson,
    /// Frames handed on cut (their whole copy was not there).
    pub truncated: u64,
    /// Super-frames cut short on their way to AF_XDP.
    pub cut_super_frames: u64,
}

/// Why frames with offload metadata could not be finished.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UnfinishedJson {
    /// The `virtio_net_hdr` was missing or asked for what cannot be done here.
    pub metadata: u64,
    /// The frame was cut short on its way (a ring slot).
    pub cut: u64,
    /// An offset or a length lies outside the frame, or a header is too short.
    pub headers: u64,
    /// The segmentation type does not match the frame's EtherType.
    pub protocol: u64,
}

/// One direction's fates in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct EmuBytesJson {
    /// Bytes of the frames read.
    pub arrived: u64,
    /// Bytes written to the TX ring.
    pub sent: u64,
    /// Bytes dropped, by cause.
    pub dropped: EmuByteDropsJson,
}

/// The bytes of one direction dropped, by cause (the link's and the emulator's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct EmuByteDropsJson {
    /// The loss model's.
    pub loss: u64,
    /// The queue held its limit of frames.
    pub queue_frames: u64,
    /// The queue would have gone over its limit of bytes.
    pub queue_bytes: u64,
    /// Runts.
    pub runt: u64,
    /// Oversized frames.
    pub oversized: u64,
    /// Dropped while an outage was in force (absent in files written before outages).
    #[serde(default)]
    pub outage: u64,
    /// The engine had no slot to hold them.
    pub queue_slots_full: u64,
    /// The TX ring had no room.
    pub tx_ring_full: u64,
    /// Longer than the far interface sends.
    pub tx_too_long: u64,
    /// Shorter than an Ethernet header.
    pub tx_too_short: u64,
}

/// One flow: its rule's `match` (`null` for the default pipe, last), its link, and its
/// frames: `arrived + link.duplicated = forwarded + dropped + queued_at_exit`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmuFlowJson {
    /// The rule's match as text; `None` (`null`) for the default pipe.
    #[serde(rename = "match", default)]
    pub matcher: Option<String>,
    /// The flow's link as a spec (`delay=5ms loss=1%`; empty without impairment).
    #[serde(default)]
    pub spec: String,
    /// The flow's link setting by setting, as the `--api` shows a link
    /// ([`crate::api::direction_json`]).
    #[serde(default)]
    pub settings: serde_json::Value,
    /// Frames of the flow that arrived.
    #[serde(default)]
    pub arrived: u64,
    /// Frames of the flow written to the TX ring (duplicates included).
    #[serde(default)]
    pub forwarded: u64,
    /// Every frame the flow lost: the link's drops and the emulator's.
    #[serde(default)]
    pub dropped: u64,
    /// Frames of the flow held when it stopped.
    #[serde(default)]
    pub queued_at_exit: u64,
    /// The link model's counters for the flow's frames.
    #[serde(default)]
    pub link: LinkCounters,
    /// Frames the emulator dropped after the link delivered them.
    #[serde(default)]
    pub dropped_by_emulator: u64,
}

/// A configuration change made while it ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmuChangeJson {
    /// `a-to-b` or `b-to-a`.
    #[serde(default)]
    pub direction: String,
    /// When the engine applied it, seconds since the emulator started.
    #[serde(default)]
    pub at_s: f64,
    /// When, Unix time in ns.
    #[serde(default)]
    pub unix_ns: u64,
    /// The configuration in force from then on, as a spec.
    #[serde(default)]
    pub spec: String,
    /// The same setting by setting, as the `--api` shows a link.
    #[serde(default)]
    pub settings: serde_json::Value,
    /// Why the pipe refused it, if it did (`null` when it did not).
    #[serde(default)]
    pub refused: Option<String>,
    /// Who made it: `api`, `ui`, `ui: cable pulled`, … (empty in files from before).
    #[serde(default)]
    pub by: String,
}

/// The CPU the emulator used, and how a blocking loop waited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EmuCpuJson {
    /// Wall-clock time from start to stop, ns.
    pub elapsed_ns: u64,
    /// CPU time of its threads, ns.
    pub cpu_ns: u64,
    /// CPU time over elapsed time: 1.0 is a core busy all the time.
    pub cores: f64,
    /// Its threads (1 run to completion, 2 pipelined).
    pub threads: u32,
    /// Wall-clock time its loop spent in its sends, ns (on veth the receiver's kernel work
    /// runs inside them); not in its host stalls. 0 in files from before it was counted.
    pub send_ns: u64,
    /// The spin before each departure a blocking loop had learned; `null` for a loop that
    /// spins.
    pub spin_ns: Option<u64>,
    /// How a blocking loop slept; `null` for a loop that spins.
    pub sleeps: Option<EmuSleepsJson>,
}

/// How a blocking loop slept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EmuSleepsJson {
    /// The latest wake-up among its last timed sleeps, which sized the spin, ns.
    pub latest_late_ns: u64,
    /// Timed sleeps (those that teach the spin).
    pub timed: u64,
    /// The time it asked to sleep, in all, ns.
    pub asked_ns: u64,
    /// The time it was away sleeping, in all, ns.
    pub slept_ns: u64,
    /// The share of each 10 ms a realtime loop may be awake before it rests (the kernel takes
    /// the CPU from realtime threads past its allowance); `null` for an ordinary loop.
    pub duty_limit: Option<f64>,
    /// The 10 ms windows in which it reached that share and rested.
    pub rested_windows: u64,
}

impl EmuJson {
    /// The file of a run that reported `report`.
    pub fn new(report: &EmulatorReport) -> EmuJson {
        let end_ns = report.start_ns + report.cpu.elapsed_ns;
        let direction = |d: &DirectionReport| EmuDirectionJson {
            events: super::events_json(&d.events, report.start_ns, end_ns),
            ..EmuDirectionJson::new(d)
        };
        EmuJson {
            latlab_version: env!("CARGO_PKG_VERSION").to_string(),
            a_to_b: direction(&report.a_to_b),
            b_to_a: direction(&report.b_to_a),
            changes: report.changes.iter().map(EmuChangeJson::new).collect(),
            event_changes: super::event_changes_json(&report.event_changes),
            pcap_dropped: report.tap_full,
            cpu: Some(EmuCpuJson::new(&report.cpu)),
            interfaces: None,
            fates: report.fates.map(|f| FatesJson {
                recorded: f.recorded,
                unqueued: f.unqueued,
                replayed: f.replayed,
                not_in_record: f.not_in_record,
                unused: f.unused,
                corrupt_too_short: f.corrupt_too_short,
            }),
            host_stalls: Some(report.host_stalls.report()),
        }
    }

    /// Frames lost on their way through, both directions: each direction's `lost_by_cause`
    /// total (its interfaces' drops included) where it was counted, else the frames that
    /// arrived and did not leave.
    pub fn frames_lost(&self) -> u64 {
        [&self.a_to_b, &self.b_to_a]
            .iter()
            .map(|d| {
                d.lost_by_cause
                    .map_or(d.arrived.saturating_sub(d.sent), |l| l.total)
            })
            .sum()
    }

    /// The file of a run that reported `report`, with each direction's losses by cause and,
    /// when they were read, what interface A and B counted over the run (A→B comes in on A
    /// and leaves on B).
    pub fn with_interfaces(
        report: &EmulatorReport,
        interfaces: Option<InterfaceCounts>,
    ) -> EmuJson {
        let (a, b) = (interfaces.map(|i| i.a), interfaces.map(|i| i.b));
        let has_socket = interfaces.is_some_and(|i| i.rx_dropped_has_socket_drops);
        let mut json = EmuJson::new(report);
        json.a_to_b.lost_by_cause = Some(LossesJson::new(&report.a_to_b, a, b, has_socket));
        json.b_to_a.lost_by_cause = Some(LossesJson::new(&report.b_to_a, b, a, has_socket));
        json.a_to_b.socket = Some(report.a_to_b.socket.into());
        json.b_to_a.socket = Some(report.b_to_a.socket.into());
        json.interfaces = interfaces.map(|i| InterfacesJson {
            a: i.a.into(),
            b: i.b.into(),
        });
        json
    }

    /// The file as a JSON value, every object's keys in alphabetical order.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("an emu report serialises: its maps have string keys")
    }

    /// The report `value` holds (as [`EmuJson::to_value`] makes one, or a reader finds one
    /// in a file); the error says which key did not read.
    pub fn from_value(value: serde_json::Value) -> Result<EmuJson, serde_json::Error> {
        serde_json::from_value(value)
    }

    /// The file's text: pretty-printed, keys in alphabetical order, a final newline.
    pub fn text(&self) -> String {
        format!("{:#}\n", self.to_value())
    }
}

impl EmuDirectionJson {
    /// The counters of `d`.
    fn new(d: &DirectionReport) -> EmuDirectionJson {
        let w = &d.wire;
        EmuDirectionJson {
            arrived: d.arrived,
            link: d.link,
            sent: d.sent,
            dropped_by_emulator: EmuDropsJson {
                tx_ring_full: d.tx_ring_full,
                tx_too_long: d.tx_too_long,
                tx_too_short: d.tx_too_short,
                queue_slots_full: d.queue_slots_full,
                kernel_rx_ring: d.kernel_drops,
            },
            queued_at_exit: d.queued_at_exit,
            wire_frames: WireFramesJson {
                tags_restored: w.tags_restored,
                checksums_finished: w.checksums_finished,
                super_frames: w.super_frames,
                segments: w.segments,
                read_whole: w.read_whole,
                unfinished: w.unfinished,
                unfinished_by_cause: UnfinishedJson {
                    metadata: w.unfinished_by.metadata,
                    cut: w.unfinished_by.cut,
                    headers: w.unfinished_by.headers,
                    protocol: w.unfinished_by.protocol,
                },
                truncated: w.truncated,
                cut_super_frames: w.cut_super_frames,
            },
            released_early: d.released_early,
            release_error_ns: Summary::from_histogram(&d.release_error),
            sojourn_ns: d.sojourn.as_ref().map(Summary::from_histogram),
            dualpi2: d
                .dual_sojourn
                .as_ref()
                .map(|dual| DualQueuesJson::new(&d.link, dual)),
            bytes: EmuBytesJson::new(&d.bytes),
            flows: d.flows.iter().map(EmuFlowJson::new).collect(),
            events: Vec::new(),
            lost_by_cause: None,
            socket: None,
        }
    }
}

impl EmuBytesJson {
    /// The byte counters of `b`.
    fn new(b: &ByteCounters) -> EmuBytesJson {
        EmuBytesJson {
            arrived: b.arrived,
            sent: b.sent,
            dropped: EmuByteDropsJson {
                loss: b.dropped_loss,
                queue_frames: b.dropped_queue_frames,
                queue_bytes: b.dropped_queue_bytes,
                runt: b.dropped_runt,
                oversized: b.dropped_oversized,
                outage: b.dropped_outage,
                queue_slots_full: b.queue_slots_full,
                tx_ring_full: b.tx_ring_full,
                tx_too_long: b.tx_too_long,
                tx_too_short: b.tx_too_short,
            },
        }
    }
}

impl EmuFlowJson {
    /// The flow `f`.
    fn new(f: &FlowReport) -> EmuFlowJson {
        EmuFlowJson {
            matcher: f.matcher.clone(),
            spec: crate::api::spec_text(&f.config),
            settings: crate::api::direction_json(&f.config),
            arrived: f.link.arrived,
            forwarded: f.sent,
            dropped: f.dropped(),
            queued_at_exit: f.queued,
            link: f.link,
            dropped_by_emulator: f.dropped_by_emulator,
        }
    }
}

impl EmuChangeJson {
    /// The change `c`.
    fn new(c: &ConfigChange) -> EmuChangeJson {
        EmuChangeJson {
            direction: c.direction.name().to_string(),
            at_s: c.at_ns as f64 / 1e9,
            unix_ns: c.unix_ns,
            spec: crate::api::spec_text(&c.config),
            settings: crate::api::direction_json(&c.config),
            refused: c.refused.clone(),
            by: c.by.clone(),
        }
    }
}

impl EmuCpuJson {
    /// The CPU use `cpu`.
    fn new(cpu: &CpuUse) -> EmuCpuJson {
        EmuCpuJson {
            elapsed_ns: cpu.elapsed_ns,
            cpu_ns: cpu.cpu_ns,
            cores: cpu.cores(),
            threads: cpu.threads,
            send_ns: cpu.send_ns,
            spin_ns: cpu.sleeps.map(|s| s.spin_ns),
            sleeps: cpu.sleeps.map(|s| EmuSleepsJson {
                latest_late_ns: s.latest_late_ns,
                timed: s.timed_sleeps,
                asked_ns: s.asked_ns,
                slept_ns: s.slept_ns,
                duty_limit: s.duty_limit,
                rested_windows: s.rested_windows,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use latlab_engine::emulator::{ByteCounters, LinkDirection};
    use latlab_engine::wait::SleepReport;
    use latlab_link::{LinkConfig, LossModel};
    use latlab_stats::LatencyHistogram;

    use super::*;

    /// What `report_json` wrote before the report had a type, kept as the reference: the file
    /// must not change by a byte.
    mod before {
        use latlab_engine::emulator::{
            ByteCounters, ConfigChange, CpuUse, DirectionReport, EmulatorReport, FlowReport,
        };
        use latlab_stats::Summary;

        fn direction_json(d: &DirectionReport) -> serde_json::Value {
            let mut value = serde_json::json!({
                "arrived": d.arrived,
                "link": d.link,
                "sent": d.sent,
                "dropped_by_emulator": {
                    "tx_ring_full": d.tx_ring_full,
                    "tx_too_long": d.tx_too_long,
                    "tx_too_short": d.tx_too_short,
                    "queue_slots_full": d.queue_slots_full,
                    "kernel_rx_ring": d.kernel_drops,
                },
                "queued_at_exit": d.queued_at_exit,
                "wire_frames": {
                    "tags_restored": d.wire.tags_restored,
                    "checksums_finished": d.wire.checksums_finished,
                    "super_frames": d.wire.super_frames,
                    "segments": d.wire.segments,
                    "read_whole": d.wire.read_whole,
                    "unfinished": d.wire.unfinished,
                    "unfinished_by_cause": {
                        "metadata": d.wire.unfinished_by.metadata,
                        "cut": d.wire.unfinished_by.cut,
                        "headers": d.wire.unfinished_by.headers,
                        "protocol": d.wire.unfinished_by.protocol,
                    },
                    "truncated": d.wire.truncated,
                    "cut_super_frames": d.wire.cut_super_frames,
                },
                "released_early": d.released_early,
                "release_error_ns": Summary::from_histogram(&d.release_error),
                "bytes": bytes_json(&d.bytes),
            });
            if !d.flows.is_empty() {
                value["flows"] = d.flows.iter().map(flow_json).collect::<Vec<_>>().into();
            }
            value
        }

        fn flow_json(f: &FlowReport) -> serde_json::Value {
            serde_json::json!({
                "match": f.matcher,
                "spec": crate::api::spec_text(&f.config),
                "settings": crate::api::direction_json(&f.config),
                "arrived": f.link.arrived,
                "forwarded": f.sent,
                "dropped": f.dropped(),
                "queued_at_exit": f.queued,
                "link": f.link,
                "dropped_by_emulator": f.dropped_by_emulator,
            })
        }

        fn bytes_json(b: &ByteCounters) -> serde_json::Value {
            serde_json::json!({
                "arrived": b.arrived,
                "sent": b.sent,
                "dropped": {
                    "loss": b.dropped_loss,
                    "queue_frames": b.dropped_queue_frames,
                    "queue_bytes": b.dropped_queue_bytes,
                    "runt": b.dropped_runt,
                    "oversized": b.dropped_oversized,
                    "outage": b.dropped_outage,
                    "queue_slots_full": b.queue_slots_full,
                    "tx_ring_full": b.tx_ring_full,
                    "tx_too_long": b.tx_too_long,
                    "tx_too_short": b.tx_too_short,
                },
            })
        }

        fn changes_json(changes: &[ConfigChange]) -> serde_json::Value {
            changes
                .iter()
                .map(|c| {
                    serde_json::json!({
                        "direction": c.direction.name(),
                        "at_s": c.at_ns as f64 / 1e9,
                        "unix_ns": c.unix_ns,
                        "spec": crate::api::spec_text(&c.config),
                        "settings": crate::api::direction_json(&c.config),
                        "refused": c.refused,
                        "by": c.by,
                    })
                })
                .collect()
        }

        pub(super) fn report_json(report: &EmulatorReport) -> serde_json::Value {
            serde_json::json!({
                "latlab_version": env!("CARGO_PKG_VERSION"),
                "a_to_b": direction_json(&report.a_to_b),
                "b_to_a": direction_json(&report.b_to_a),
                "changes": changes_json(&report.changes),
                "pcap_dropped": report.tap_full,
                "cpu": cpu_json(&report.cpu),
                "host_stalls": report.host_stalls.report(),
            })
        }

        fn cpu_json(cpu: &CpuUse) -> serde_json::Value {
            serde_json::json!({
                "elapsed_ns": cpu.elapsed_ns,
                "cpu_ns": cpu.cpu_ns,
                "cores": cpu.cores(),
                "threads": cpu.threads,
                "send_ns": cpu.send_ns,
                "spin_ns": cpu.sleeps.map(|s| s.spin_ns),
                "sleeps": cpu.sleeps.map(|s| serde_json::json!({
                    "latest_late_ns": s.latest_late_ns,
                    "timed": s.timed_sleeps,
                    "asked_ns": s.asked_ns,
                    "slept_ns": s.slept_ns,
                    "duty_limit": s.duty_limit,
                    "rested_windows": s.rested_windows,
                })),
            })
        }
    }

    /// A direction whose every counter differs from the others, so a key written from the
    /// wrong counter shows; with two flows (a rule and the default pipe) when asked.
    fn direction(first: u64, with_flows: bool) -> DirectionReport {
        let n = |k: u64| first + k;
        let link = LinkCounters {
            arrived: n(1000),
            delivered: n(900),
            duplicated: n(1),
            corrupted: n(2),
            reordered: n(3),
            dropped_loss: n(4),
            dropped_queue_frames: n(5),
            dropped_queue_bytes: n(6),
            dropped_runt: n(7),
            dropped_oversized: n(8),
            dropped_outage: n(9),
            aqm_drop: n(41),
            aqm_mark: n(42),
            aqm_overflow: n(43),
            aqm_l4s_mark: n(44),
            aqm_l4s_drop: n(45),
            aqm_classic_mark: n(46),
            aqm_classic_drop: n(47),
        };
        let mut wire = latlab_io::port::WireFrameStats {
            tags_restored: n(11),
            checksums_finished: n(12),
            super_frames: n(13),
            segments: n(14),
            read_whole: n(15),
            unfinished: n(16),
            truncated: n(17),
            cut_super_frames: n(18),
            ..Default::default()
        };
        wire.unfinished_by.metadata = n(19);
        wire.unfinished_by.cut = n(20);
        wire.unfinished_by.headers = n(21);
        wire.unfinished_by.protocol = n(22);
        let mut release_error = LatencyHistogram::new();
        for ns in [800, 1_200, 1_500, 2_000, 40_000] {
            release_error.record(ns + first);
        }
        let lossy = LinkConfig {
            delay_ns: 5_000_000,
            loss: LossModel::Bernoulli { p: 0.05 },
            ..LinkConfig::default()
        };
        let flow = |matcher: Option<&str>, config: LinkConfig, k: u64| FlowReport {
            matcher: matcher.map(String::from),
            config,
            link: LinkCounters {
                arrived: n(k),
                delivered: n(k) - 2,
                dropped_loss: 2,
                ..LinkCounters::default()
            },
            sent: n(k) - 3,
            dropped_by_emulator: 1,
            queued: 0,
        };
        DirectionReport {
            arrived: n(1001),
            link,
            sent: n(890),
            tx_ring_full: n(31),
            tx_too_long: n(32),
            tx_too_short: n(33),
            queued_at_exit: n(34),
            queue_slots_full: n(35),
            kernel_drops: n(36),
            socket: Default::default(),
            wire,
            release_error,
            sojourn: None,
            dual_sojourn: None,
            released_early: n(37),
            bytes: ByteCounters {
                arrived: n(64_000),
                sent: n(57_000),
                dropped_loss: n(41),
                dropped_queue_frames: n(42),
                dropped_queue_bytes: n(43),
                dropped_runt: n(44),
                dropped_oversized: n(45),
                dropped_outage: n(50),
                queue_slots_full: n(46),
                tx_ring_full: n(47),
                tx_too_long: n(48),
                tx_too_short: n(49),
            },
            events: Vec::new(),
            flows: if with_flows {
                vec![
                    flow(Some("proto=udp dport=27015"), lossy, 400),
                    flow(None, LinkConfig::default(), 600),
                ]
            } else {
                Vec::new()
            },
        }
    }

    /// A run with per-flow rules on A→B, two changes over the API (one refused) and a blocking
    /// loop; or, with `spinning`, none of that.
    fn report(spinning: bool) -> EmulatorReport {
        let change = |direction, at_ns, refused: Option<&str>| ConfigChange {
            direction,
            at_ns,
            unix_ns: 1_790_000_000_000_000_000 + at_ns,
            config: LinkConfig {
                delay_ns: 20_000_000,
                loss: LossModel::Bernoulli { p: 0.01 },
                ..LinkConfig::default()
            },
            refused: refused.map(String::from),
            by: "api".into(),
        };
        let sleeps = SleepReport {
            spin_ns: 12_000,
            latest_late_ns: 7_000,
            timed_sleeps: 900,
            asked_ns: 2_500_000_000,
            slept_ns: 2_400_000_000,
            duty_limit: Some(0.76),
            rested_windows: 37,
        };
        EmulatorReport {
            a_to_b: direction(0, !spinning),
            b_to_a: direction(100_000, false),
            event_changes: Vec::new(),
            start_ns: 0,
            changes: if spinning {
                Vec::new()
            } else {
                vec![
                    change(LinkDirection::AToB, 1_250_000_000, None),
                    change(LinkDirection::BToA, 2_000_000_001, Some("loss: above 100%")),
                ]
            },
            tap_full: if spinning { 0 } else { 5 },
            fates: None,
            host_stalls: latlab_stats::stalls::Stalls::new(Default::default()),
            cpu: CpuUse {
                elapsed_ns: 3_000_000_000,
                cpu_ns: if spinning { 3_000_000_000 } else { 700_000_003 },
                threads: 1,
                send_ns: if spinning { 390_000_000 } else { 120_000_007 },
                sleeps: (!spinning).then_some(sleeps),
            },
        }
    }

    #[test]
    fn the_typed_report_is_written_as_it_always_was_and_reads_back_the_same() {
        for spinning in [false, true] {
            let report = report(spinning);
            let json = EmuJson::new(&report);
            let reference = before::report_json(&report);
            assert_eq!(
                json.text(),
                format!("{reference:#}\n"),
                "spinning: {spinning}"
            );
            assert_eq!(EmuJson::new(&report).to_value(), reference);

            let again: EmuJson = serde_json::from_str(&json.text()).unwrap();
            assert_eq!(again, json);
            assert_eq!(again.text(), json.text());
        }
        let text = EmuJson::new(&report(true)).text();
        assert!(
            text.contains("\"sleeps\": null") && text.contains("\"spin_ns\": null"),
            "{text}"
        );
        assert!(!text.contains("\"flows\""), "no rules, no flows: {text}");
        let text = EmuJson::new(&report(false)).text();
        assert!(text.contains("\"match\": null") && text.contains("\"refused\": null"));
    }

    #[test]
    fn a_queue_disciplines_sojourn_times_are_written_only_with_one_and_read_back() {
        let mut report = report(false);
        assert!(!EmuJson::new(&report).text().contains("sojourn_ns"));
        let mut sojourn = LatencyHistogram::new();
        for ns in [1_000, 2_000_000, 9_000_000] {
            sojourn.record(ns);
        }
        report.a_to_b.sojourn = Some(sojourn);
        let json = EmuJson::new(&report);
        let again: EmuJson = serde_json::from_str(&json.text()).unwrap();
        assert_eq!(again, json);
        let summary = again.a_to_b.sojourn_ns.expect("a_to_b has a discipline");
        assert_eq!(summary.count, 3);
        assert!(
            summary.max_ns.abs_diff(9_000_000) < 9_000,
            "{}",
            summary.max_ns
        );
        assert!(again.b_to_a.sojourn_ns.is_none());
    }

    #[test]
    fn dualpi2s_queues_are_written_each_on_its_own_only_with_it() {
        let mut report = report(false);
        assert!(!EmuJson::new(&report).text().contains("dualpi2"));
        let mut dual = latlab_link::DualSojourn::default();
        for ns in [100_000, 300_000] {
            dual.l4s.record(ns);
        }
        for ns in [12_000_000, 15_000_000, 30_000_000] {
            dual.classic.record(ns);
        }
        let link = &mut report.a_to_b.link;
        (link.aqm_l4s_mark, link.aqm_l4s_drop) = (7, 1);
        (link.aqm_classic_mark, link.aqm_classic_drop) = (2, 5);
        report.a_to_b.dual_sojourn = Some(dual);
        let json = EmuJson::new(&report);
        let again: EmuJson = serde_json::from_str(&json.text()).unwrap();
        assert_eq!(again, json);
        let queues = again.a_to_b.dualpi2.expect("a_to_b runs dualpi2");
        let counts = |q: &DualQueueJson| (q.sent, q.marked, q.dropped, q.sojourn_ns.count);
        assert_eq!(counts(&queues.l4s), (2, 7, 1, 2));
        assert_eq!(counts(&queues.classic), (3, 2, 5, 3));
        assert!(queues.classic.sojourn_ns.max_ns.abs_diff(30_000_000) < 30_000);
        assert!(again.b_to_a.dualpi2.is_none());
        assert_eq!(json.to_value()["a_to_b"]["link"]["aqm_l4s_mark"], 7);
    }

    #[test]
    fn a_report_of_an_older_latlab_reads_with_what_it_has() {
        // The emulator's first --json: no bytes, wire frames, changes, flows or CPU.
        let summary = serde_json::to_value(Summary::from_histogram(&LatencyHistogram::new()));
        let direction = serde_json::json!({
            "link": {"arrived": 10, "delivered": 9, "dropped_loss": 1},
            "sent": 9,
            "dropped_by_emulator": {"tx_ring_full": 0, "queue_slots_full": 0, "kernel_rx_ring": 2},
            "released_early": 0,
            "release_error_ns": summary.unwrap(),
        });
        let old = serde_json::json!({
            "latlab_version": "0.1.0",
            "a_to_b": direction,
            "b_to_a": direction,
        });
        let json: EmuJson = serde_json::from_value(old).unwrap();
        assert_eq!(json.a_to_b.dropped_by_emulator.kernel_rx_ring, 2);
        assert_eq!(json.a_to_b.link.delivered, 9);
        assert_eq!(json.a_to_b.bytes, EmuBytesJson::default());
        assert!(json.cpu.is_none() && json.changes.is_empty() && json.a_to_b.flows.is_empty());
        assert!(!json.text().contains("\"cpu\""), "absent, not made up");
        let without = serde_json::json!({"a_to_b": {"sent": 1}, "b_to_a": {"sent": 1}});
        assert!(serde_json::from_value::<EmuJson>(without).is_err());
    }
}
