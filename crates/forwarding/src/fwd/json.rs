//! `latlab fwd --json` as types: what [`super::run`] writes and what a reader gets back, the
//! same structs both ways. The file is the struct through [`serde_json::Value`], so every
//! object's keys come out in alphabetical order, as they always have.

use latlab_bench::cycles::CycleReport;
use latlab_engine::forwarder::FwdDirection;
use serde::{Deserialize, Serialize};

use super::{FwdOptions, FwdReport};

/// The whole file: the options the forwarder ran with, each direction's counters and where
/// its cycles went.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FwdJson {
    /// The latlab that wrote it.
    pub latlab_version: String,
    /// `--iface-a`.
    pub iface_a: String,
    /// `--iface-b`.
    pub iface_b: String,
    /// `--io` (`packet` or `xdp`).
    pub io: String,
    /// `--batch`.
    pub batch: usize,
    /// `--poll` (`busy`, `block`, `rate:N`).
    pub poll: String,
    /// The core the loop was pinned to; `null` when none was.
    pub cpu: Option<usize>,
    /// Frames from A to B.
    pub a_to_b: FwdDirectionJson,
    /// Frames from B to A.
    pub b_to_a: FwdDirectionJson,
    /// Cycles per packet by step, checked against the whole run's.
    pub cycles: CycleReport,
    /// The host's stalls of the forwarder's loop over the run; absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_stalls: Option<latlab_stats::stalls::HostStalls>,
}

/// One direction's frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FwdDirectionJson {
    /// Frames read from the receiving interface.
    pub received: u64,
    /// Frames queued on the far interface.
    pub forwarded: u64,
    /// Frames the forwarder dropped, by cause.
    pub dropped: FwdDropsJson,
    /// Frames the kernel dropped before the receive ring.
    pub kernel_drops: u64,
}

/// The frames of one direction the forwarder dropped, by cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FwdDropsJson {
    /// The far interface's TX ring had no room, even after a flush.
    pub tx_ring_full: u64,
    /// Longer than the far interface sends.
    pub too_long: u64,
    /// Shorter than an Ethernet header.
    pub runts: u64,
}

impl FwdJson {
    /// The file of a run of `options` that reported `report`.
    pub fn new(options: &FwdOptions, report: &FwdReport) -> FwdJson {
        FwdJson {
            latlab_version: env!("CARGO_PKG_VERSION").to_string(),
            iface_a: options.iface_a.clone(),
            iface_b: options.iface_b.clone(),
            io: options.io.to_string(),
            batch: options.batch,
            poll: options.poll.to_string(),
            cpu: report.cpu,
            a_to_b: FwdDirectionJson::new(&report.report.a_to_b),
            b_to_a: FwdDirectionJson::new(&report.report.b_to_a),
            cycles: report.report.cycles.clone(),
            host_stalls: Some(report.report.host_stalls.report()),
        }
    }

    /// The file as a JSON value, every object's keys in alphabetical order.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a fwd report serialises: its maps have string keys")
    }

    /// The file's text: pretty-printed, keys in alphabetical order, a final newline.
    pub fn text(&self) -> String {
        format!("{:#}\n", self.to_value())
    }
}

impl FwdDirectionJson {
    /// The counters of `d`.
    fn new(d: &FwdDirection) -> FwdDirectionJson {
        FwdDirectionJson {
            received: d.received,
            forwarded: d.forwarded,
            dropped: FwdDropsJson {
                tx_ring_full: d.tx_full,
                too_long: d.too_long,
                runts: d.runts,
            },
            kernel_drops: d.kernel_drops,
        }
    }
}

#[cfg(test)]
mod tests {
    use latlab_bench::cycles::{CycleReport, StepFigures};
    use latlab_engine::forwarder::{ForwarderReport, FwdDirection, FwdPoll};

    use super::*;
    use latlab_lab::command::Io;

    /// A run of a few thousand frames each way with a drop of every cause, over AF_XDP at a
    /// poll rate, pinned.
    fn run() -> (FwdOptions, FwdReport) {
        let options = FwdOptions {
            io: Io::Xdp,
            batch: 16,
            poll: FwdPoll::Rate(10_000),
            cpu: Some(1),
            ..FwdOptions::new("veth-a".into(), "veth-b".into())
        };
        let direction = |received, tx_full, too_long, runts| FwdDirection {
            received,
            forwarded: received - tx_full - too_long - runts,
            tx_full,
            too_long,
            runts,
            kernel_drops: 3,
        };
        let cycles = CycleReport {
            tsc_hz: 2.1e9,
            read_cycles: 24.5,
            elapsed_cycles: 2_100_000_000,
            forwarded: 9_990,
            received: 10_000,
            batches: 1_250,
            mean_batch: 8.0,
            packets_per_second: 9_990.0,
            per_packet: StepFigures {
                rx: 410.25,
                processing: 12.5,
                tx: 880.0,
                buffers: 31.75,
            },
            steps_total: 1_334.5,
            empty_polls: 20.0,
            waiting: 195_000.125,
            overhead: 40.0,
            timer: 120.0,
            measured: 210_210.2,
            measured_untimed: 210_090.2,
            accounted: 0.006_352,
            accounted_with_idle: 0.9987,
        };
        let report = ForwarderReport {
            a_to_b: direction(6_000, 4, 2, 1),
            b_to_a: direction(4_000, 0, 0, 3),
            cycles,
            host_stalls: latlab_stats::stalls::Stalls::new(Default::default()),
        };
        (
            options,
            FwdReport {
                report,
                cpu: Some(1),
            },
        )
    }

    #[test]
    fn the_typed_report_is_written_as_it_always_was_and_reads_back_the_same() {
        let (options, report) = run();
        let json = FwdJson::new(&options, &report);
        // What report_json built with json! before the report had a type: the same bytes.
        let direction = |d: &FwdDirection| {
            serde_json::json!({
                "received": d.received,
                "forwarded": d.forwarded,
                "dropped": {
                    "tx_ring_full": d.tx_full,
                    "too_long": d.too_long,
                    "runts": d.runts,
                },
                "kernel_drops": d.kernel_drops,
            })
        };
        let before = serde_json::json!({
            "latlab_version": env!("CARGO_PKG_VERSION"),
            "iface_a": options.iface_a,
            "iface_b": options.iface_b,
            "io": options.io.to_string(),
            "batch": options.batch,
            "poll": options.poll.to_string(),
            "cpu": report.cpu,
            "a_to_b": direction(&report.report.a_to_b),
            "b_to_a": direction(&report.report.b_to_a),
            "cycles": report.report.cycles,
            "host_stalls": report.report.host_stalls.report(),
        });
        assert_eq!(json.text(), format!("{before:#}\n"));
        let unpinned = FwdReport {
            cpu: None,
            ..report.clone()
        };
        assert!(FwdJson::new(&options, &unpinned)
            .text()
            .contains("\"cpu\": null"));

        let again: FwdJson = serde_json::from_str(&json.text()).unwrap();
        assert_eq!(again, json);
        assert_eq!(again.text(), json.text());
    }
}
