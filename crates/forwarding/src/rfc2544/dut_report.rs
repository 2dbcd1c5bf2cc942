//! What the DUT reported when it stopped, as `rfc2544.json`'s `dut_report` and the forwarding
//! study's points keep it: `latlab fwd`'s counters and cycle account, `latlab emu`'s
//! `--json` report, or testpmd's counters; written and read back as [`DutReport`].
//!
//! The DUT's loop hands its report over as JSON ([`DutReport::from_value`] types it). A report
//! none of the known shapes reads (a file written by hand, or by a latlab that reported
//! otherwise) is kept whole as [`DutReport::Other`], so every older file still reads and is
//! written again as it was.

use latlab_emu::report::EmuJson;
use latlab_lab::middle::MiddleReport;
use serde::{Deserialize, Serialize};

pub use latlab_lab::middle::testpmd::TestpmdCounts;

/// The report of the DUT that ran (the kernel, a bridge and an external DUT report nothing).
///
/// Untagged: a file holds the report itself, written as the variant's own JSON. Read back,
/// an object takes the first shape that reads it, in the order of the variants: testpmd's
/// (only the key `testpmd`) and `latlab fwd`'s (only its four keys) refuse any other key, so
/// an emulator's report, whose keys are others, reads as [`DutReport::Emu`]; anything else
/// is [`DutReport::Other`].
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum DutReport {
    /// testpmd's counters (`testpmd`, `testpmd-xdp`).
    Testpmd(TestpmdReport),
    /// `latlab fwd`'s (`fwd`, `fwd-xdp`).
    Fwd(Box<FwdDutReport>),
    /// The XDP forwarder's counts (`fwd-xdp-redirect`).
    XdpRedirect(XdpRedirectReport),
    /// `latlab emu`'s, as `latlab emu --json` writes it (`emu`, `emu-xdp`).
    Emu(Box<EmuJson>),
    /// A report in a shape none of the others reads, kept as it was.
    Other(serde_json::Value),
}

impl DutReport {
    /// The report `value` holds, in the first shape that reads it ([`DutReport::Other`] when
    /// none does: every value is a report).
    pub fn from_value(value: serde_json::Value) -> DutReport {
        // Only objects: a struct would also read from an array, by position, and be written
        // back as an object.
        if !value.is_object() {
            return DutReport::Other(value);
        }
        if let Ok(testpmd) = TestpmdReport::deserialize(&value) {
            return DutReport::Testpmd(testpmd);
        }
        if let Ok(xdp) = XdpRedirectReport::deserialize(&value) {
            return DutReport::XdpRedirect(xdp);
        }
        if let Ok(fwd) = FwdDutReport::deserialize(&value) {
            return DutReport::Fwd(Box::new(fwd));
        }
        if let Ok(emu) = EmuJson::deserialize(&value) {
            return DutReport::Emu(Box::new(emu));
        }
        DutReport::Other(value)
    }

    /// `latlab fwd`'s cycle account, when the DUT was `latlab fwd` and reported one.
    pub fn cycles(&self) -> Option<&CycleFigures> {
        match self {
            DutReport::Fwd(fwd) => fwd.cycles.as_ref(),
            _ => None,
        }
    }
}

impl From<MiddleReport> for DutReport {
    /// What the DUT that ran in the lab's middle reported when it stopped.
    fn from(report: MiddleReport) -> DutReport {
        match report {
            // The cycle account as the report keeps it (each figure read back as an option).
            MiddleReport::Fwd(r) => DutReport::from_value(serde_json::json!({
                "a_to_b_forwarded": r.a_to_b.forwarded,
                "a_to_b_dropped": r.a_to_b.tx_full + r.a_to_b.too_long + r.a_to_b.runts,
                "kernel_drops": r.a_to_b.kernel_drops,
                "cycles": r.cycles,
            })),
            MiddleReport::Emu(r, interfaces) => {
                DutReport::Emu(Box::new(EmuJson::with_interfaces(&r, interfaces)))
            }
            MiddleReport::Testpmd(testpmd) => DutReport::Testpmd(TestpmdReport { testpmd }),
            MiddleReport::FwdXdpRedirect([ab, ba]) => {
                let direction = |c: latlab_io::xdp::ForwardCounts| XdpRedirectCounts {
                    forwarded: c.forwarded,
                    no_target: c.no_target,
                    too_long: c.too_long,
                    refused_by_target: c.refused_by_target,
                };
                DutReport::XdpRedirect(XdpRedirectReport {
                    xdp_redirect: XdpRedirectDirections {
                        a_to_b: direction(ab),
                        b_to_a: direction(ba),
                    },
                })
            }
        }
    }
}

impl<'de> Deserialize<'de> for DutReport {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde_json::Value::deserialize(deserializer).map(DutReport::from_value)
    }
}

/// The XDP forwarder's report: `{"xdp_redirect": {"a_to_b": {…}, "b_to_a": {…}}}`, what its
/// two programs counted in the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XdpRedirectReport {
    /// Both directions' counts.
    pub xdp_redirect: XdpRedirectDirections,
}

/// Each direction's program's counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XdpRedirectDirections {
    /// The program on the client's side (frames towards the server).
    pub a_to_b: XdpRedirectCounts,
    /// The program on the server's side.
    pub b_to_a: XdpRedirectCounts,
}

/// What one program counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XdpRedirectCounts {
    /// Frames redirected to the other veth.
    pub forwarded: u64,
    /// Frames dropped with no target in the device map.
    pub no_target: u64,
    /// Frames dropped as longer than the other veth takes (its MTU, the Ethernet header and
    /// one VLAN tag); 0 in a file older than the count.
    #[serde(default)]
    pub too_long: u64,
    /// Frames the other veth was handed but could not pass on (its peer's XDP ring full), from
    /// its driver statistics; also in `forwarded`. 0 in a file older than the count.
    #[serde(default)]
    pub refused_by_target: u64,
}

/// testpmd's report: `{"testpmd": {…}}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestpmdReport {
    /// What testpmd counted over its run.
    pub testpmd: TestpmdCounts,
}

/// `latlab fwd` as a DUT reports it: the frames of A→B (the direction the source sends) and
/// the cycle account over the run (over the saturation trial, when there was one). A key a
/// file lacks reads as `None` and stays absent when the file is written again.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FwdDutReport {
    /// Frames forwarded from A to B.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a_to_b_forwarded: Option<u64>,
    /// Frames of A→B dropped, every cause together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a_to_b_dropped: Option<u64>,
    /// Frames the kernel dropped before A's receive ring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_drops: Option<u64>,
    /// Where the cycles went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycles: Option<CycleFigures>,
}

/// `latlab fwd`'s cycle account ([`latlab_bench::cycles::CycleReport`]) as a report keeps
/// it: each figure `None` when the file lacks it, so a table shows `-` for it rather than a
/// number that was never measured. Cycles per packet unless the name says otherwise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CycleFigures {
    /// The counter's frequency, Hz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tsc_hz: Option<f64>,
    /// The calibrated cost of one counter read, cycles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_cycles: Option<f64>,
    /// Cycles of the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_cycles: Option<u64>,
    /// Frames forwarded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forwarded: Option<u64>,
    /// Frames received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<u64>,
    /// Receive calls that returned at least one frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batches: Option<u64>,
    /// Frames per such call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_batch: Option<f64>,
    /// Frames forwarded per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packets_per_second: Option<f64>,
    /// Each step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_packet: Option<StepCycles>,
    /// The sum of the steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps_total: Option<f64>,
    /// Receive calls that found nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_polls: Option<f64>,
    /// Sleeping or waiting in poll(2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<f64>,
    /// The loop's own time between steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead: Option<f64>,
    /// The counter reads themselves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer: Option<f64>,
    /// The whole run per packet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<f64>,
    /// `measured` without the counter reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_untimed: Option<f64>,
    /// The steps' share of `measured_untimed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accounted: Option<f64>,
    /// As `accounted`, with empty polls, waiting and the loop's overhead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accounted_with_idle: Option<f64>,
}

/// Cycles per packet of each of `latlab fwd`'s steps, as a report keeps them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepCycles {
    /// Receiving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx: Option<f64>,
    /// Processing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processing: Option<f64>,
    /// Transmitting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx: Option<f64>,
    /// Buffer management.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffers: Option<f64>,
}

#[cfg(test)]
mod tests {
    use latlab_bench::cycles::{CycleReport, StepFigures};

    use super::*;

    /// What each DUT's loop hands over, as JSON.
    fn reports() -> Vec<serde_json::Value> {
        let cycles = CycleReport {
            tsc_hz: 2.1e9,
            read_cycles: 24.0,
            elapsed_cycles: 2_100_000_000,
            forwarded: 1_000_000,
            received: 1_000_100,
            batches: 40_000,
            mean_batch: 25.0025,
            packets_per_second: 1e6,
            per_packet: StepFigures {
                rx: 400.5,
                processing: 20.0,
                tx: 900.25,
                buffers: 30.0,
            },
            steps_total: 1_350.75,
            empty_polls: 0.0,
            waiting: 0.0,
            overhead: 40.0,
            timer: 96.0,
            measured: 2_100.0,
            measured_untimed: 2_004.0,
            accounted: 0.674,
            accounted_with_idle: 0.694,
        };
        let counts = TestpmdCounts {
            rx_packets: 10,
            rx_dropped: 1,
            tx_packets: 9,
            tx_dropped: 0,
        };
        let emu = EmuJson::from_value(serde_json::json!({
            "a_to_b": {"release_error_ns": latlab_stats::Summary::from_histogram(
                &latlab_stats::LatencyHistogram::new())},
            "b_to_a": {"release_error_ns": latlab_stats::Summary::from_histogram(
                &latlab_stats::LatencyHistogram::new())},
        }))
        .unwrap();
        vec![
            // dut.rs's run_fwd.
            serde_json::json!({
                "a_to_b_forwarded": 1_000_000,
                "a_to_b_dropped": 100,
                "kernel_drops": 0,
                "cycles": cycles,
            }),
            // `DutReport::from` a `MiddleReport` for testpmd.
            serde_json::json!({ "testpmd": counts }),
            // dut.rs's run_emu.
            emu.to_value(),
        ]
    }

    #[test]
    fn each_dut_report_reads_as_its_own_shape_and_is_written_again_as_it_was() {
        let [fwd, testpmd, emu] = <[serde_json::Value; 3]>::try_from(reports()).unwrap();
        let typed = |v: &serde_json::Value| DutReport::from_value(v.clone());
        let back = |r: &DutReport| serde_json::to_value(r).unwrap();

        let r = typed(&fwd);
        assert!(matches!(r, DutReport::Fwd(_)), "{r:?}");
        assert_eq!(back(&r), fwd);
        let c = r.cycles().unwrap();
        assert_eq!(c.per_packet.and_then(|s| s.tx), Some(900.25));
        assert_eq!(c.steps_total, Some(1_350.75));

        let r = typed(&testpmd);
        assert!(
            matches!(r, DutReport::Testpmd(t) if t.testpmd.tx_packets == 9),
            "{r:?}"
        );
        assert_eq!(back(&r), testpmd);

        let r = typed(&emu);
        assert!(matches!(r, DutReport::Emu(_)), "{r:?}");
        assert_eq!(back(&r), emu);
        assert!(r.cycles().is_none());
    }

    #[test]
    fn a_report_of_another_shape_is_kept_as_it_was() {
        // Part of a cycle account: what it has reads, the rest stays absent.
        let partial = serde_json::json!({"cycles": {"mean_batch": 1.0, "steps_total": 900.0}});
        let r = DutReport::from_value(partial.clone());
        let c = r.cycles().unwrap();
        assert_eq!((c.mean_batch, c.empty_polls), (Some(1.0), None));
        assert_eq!(serde_json::to_value(&r).unwrap(), partial);
        // A key no shape has: kept whole.
        for other in [
            serde_json::json!({"cycles": {"rx": 120}}),
            serde_json::json!({"testpmd": {"rx_packets": 1}}),
            serde_json::json!([1, 2]),
        ] {
            let r = DutReport::from_value(other.clone());
            assert_eq!(r, DutReport::Other(other.clone()));
            assert_eq!(serde_json::to_value(&r).unwrap(), other);
        }
    }
}
