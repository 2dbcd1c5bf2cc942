//! `latlab study forwarding`: Emmerich et al.'s "Assessing Soft- and Hardware Bottlenecks in
//! PC-based Packet Forwarding Systems" on this machine. Every forwarder `latlab rfc2544` can
//! build (the kernel's IP forwarding, a Linux bridge, `latlab fwd` over AF_PACKET and AF_XDP,
//! `latlab emu` with no impairment) is measured as RFC 2544 asks at each frame size; the report
//! has the paper's Table I (throughput at 64 bytes, against the kernel's), its Fig. 2
//! (throughput by frame size) and its Table II for the forwarders that account their own cycles
//! (`latlab fwd`: cycles per packet in receiving, processing, transmitting and buffer
//! management, checked against the run's cycles per packet).
//!
//! One point per DUT (`points/dut-<name>.json`, written when it is measured; `--resume` skips
//! the DUTs measured, `--shard I/N` measures a share of them). A DUT that cannot run here is
//! left out with one line saying why: DPDK's testpmd (not built into latlab's lab) and the
//! kernel forwarders' Table II rows (this machine has no hardware counters; sampling the
//! kernel's functions is not built).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use latlab_engine::Stop;
use serde::{Deserialize, Serialize};

use crate::rfc2544::{self, Dut, DutReport, FwdPoll, Rfc2544Options, Saturation, SizeResult};
use latlab_lab::command::{CommandError, Quiet};
use latlab_lab::progress::View;
use latlab_lab::units::format_duration;
use latlab_study::points::{Existing, PointsDir};
use latlab_study::{Shard, Study, StudyError, StudyFile, StudyKind};

pub mod report;
mod table2;

/// What the study measures.
#[derive(Clone, Debug)]
pub struct ForwardingStudyOptions {
    /// Results folder (must not exist unless `resume` or a shard).
    pub out: PathBuf,
    /// The forwarders.
    pub duts: Vec<Dut>,
    /// Frame sizes.
    pub sizes: Vec<usize>,
    /// Length of one trial.
    pub trial: Duration,
    /// Trials per search at most.
    pub max_trials: usize,
    /// The source's frame port: AF_PACKET or AF_XDP (faster on veth).
    pub source: latlab_lab::command::Io,
    /// Batch sizes `latlab fwd` over AF_XDP is also measured at, 64-byte frames (the paper's
    /// batch-size effect); empty for none.
    pub batches: Vec<usize>,
    /// Poll modes `latlab fwd` over AF_XDP is also measured in, 64-byte frames (the paper's
    /// poll-rate effect); empty for none.
    pub polls: Vec<FwdPoll>,
    /// Continue an interrupted study, keeping the DUTs it measured.
    pub resume: bool,
    /// This job's share of the DUTs.
    pub shard: Shard,
}

impl ForwardingStudyOptions {
    /// Every DUT at RFC 2544's sizes, 1-second trials, at most 8 a search, frames sent from an
    /// AF_XDP socket (the source that outruns the most DUTs on veth).
    pub fn new(out: PathBuf) -> ForwardingStudyOptions {
        ForwardingStudyOptions {
            out,
            duts: Dut::ALL.to_vec(),
            sizes: rfc2544::FRAME_SIZES.to_vec(),
            trial: Duration::from_secs(1),
            max_trials: 8,
            source: latlab_lab::command::Io::Xdp,
            batches: vec![1, 4, 16, 64],
            polls: vec![
                FwdPoll::Busy,
                FwdPoll::Block,
                FwdPoll::Rate(100_000),
                FwdPoll::Rate(10_000),
            ],
            resume: false,
            shard: Shard::WHOLE,
        }
    }

    /// The options that shape every point, as `study.json` keeps them.
    pub fn parameters(&self) -> BTreeMap<String, String> {
        let list = |v: &[usize]| {
            v.iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        BTreeMap::from([
            ("--sizes".to_string(), list(&self.sizes)),
            ("--trial".to_string(), format_duration(self.trial)),
            ("--max-trials".to_string(), self.max_trials.to_string()),
            ("--source".to_string(), self.source.name().to_string()),
            ("--batches".to_string(), list(&self.batches)),
            (
                "--polls".to_string(),
                self.polls
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        ])
    }

    /// The `rfc2544` options of one DUT: throughput and the latency at the NDR, no loss sweep
    /// and no back-to-back (the paper's tables are throughput and cycles).
    fn rfc2544(&self, dut: Dut) -> Rfc2544Options {
        let mut o = Rfc2544Options::new(dut);
        o.sizes = self.sizes.clone();
        o.trial = self.trial;
        o.max_trials = self.max_trials;
        o.source = self.source;
        o.loss_sweep = false;
        o.b2b_repeats = 0;
        o.latency_trials = 1;
        o
    }
}

/// One DUT, as written to `points/dut-<name>.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DutPoint {
    /// The DUT's name (`kernel`, `fwd-xdp`, …).
    pub dut: String,
    /// Where its receive work ran.
    pub receive_work: String,
    /// The results of each frame size.
    pub sizes: Vec<SizeResult>,
    /// `latlab fwd`'s batch size, for a point of the batch-size series (not in Table I).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fwd_batch: Option<usize>,
    /// `latlab fwd`'s poll mode, for a point of the poll series (not in Table I).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fwd_poll: Option<String>,
    /// The saturation trial: the DUT's CPU by step (Table II).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturation: Option<Saturation>,
    /// What the DUT reported at its end (`latlab fwd`: counters and `cycles`).
    pub dut_report: Option<DutReport>,
    /// Why a size ended early, if one did.
    pub failure: Option<String>,
    /// Why the DUT could not run here, when it could not (then nothing else was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_out: Option<String>,
}

/// `latlab study forwarding` as a [`Study`]: [`Study::run`] measures this job's DUTs into
/// `options.out`, then draws the report.
#[derive(Clone, Copy, Debug)]
pub struct ForwardingStudy;

impl Study for ForwardingStudy {
    const KIND: StudyKind = StudyKind::Forwarding;
    const POINT_PREFIXES: &'static [&'static str] = &["dut", "batch", "poll"];
    type Options = ForwardingStudyOptions;

    fn folder(options: &ForwardingStudyOptions) -> (&Path, Shard) {
        (&options.out, options.shard)
    }

    fn measure(
        options: &ForwardingStudyOptions,
        stop: &Stop,
        progress: &mut dyn View,
    ) -> Result<String, StudyError> {
        measure_all(options, stop, progress)
    }

    fn draw(dir: &Path, topology: &str) -> Result<PathBuf, StudyError> {
        report::write(dir, topology)
    }
}

/// Measures this job's DUTs, batch sizes and poll modes into `<out>/points`, after writing
/// `study.json`; returns the lab's description.
fn measure_all(
    options: &ForwardingStudyOptions,
    stop: &Stop,
    progress: &mut dyn View,
) -> Result<String, StudyError> {
    let existing = if options.resume || !options.shard.is_whole() {
        StudyFile::check_resume(&options.out, StudyKind::Forwarding, &options.parameters())?;
        Existing::Continue
    } else {
        Existing::RefuseResumable
    };
    for dut in &options.duts {
        options.rfc2544(*dut).check_measurement().map_err(usage)?;
    }
    if let Some(b) = options.batches.iter().find(|b| !(1..=1024).contains(*b)) {
        return Err(usage(CommandError::Usage(format!(
            "--batches {b}: 1 to 1024 frames"
        ))));
    }
    let points = PointsDir::create(&options.out, existing)?;
    let topology = "client — dut — server namespaces (a fresh lab for each DUT)";
    StudyFile::new(StudyKind::Forwarding, topology)
        .with_parameters(options.parameters())
        .write(&options.out)?;
    // Every DUT, then latlab fwd over AF_XDP at each batch size and in each poll mode with
    // 64-byte frames.
    let fwd64 = || {
        let mut o = options.rfc2544(Dut::FWD_XDP);
        o.sizes = vec![64];
        o
    };
    let units: Vec<(String, Rfc2544Options, Option<usize>)> = options
        .duts
        .iter()
        .map(|d| (format!("dut-{}", d.name()), options.rfc2544(*d), None))
        .chain(options.batches.iter().map(|&b| {
            let mut o = fwd64();
            o.fwd_batch = b;
            (format!("batch-{b}"), o, Some(b))
        }))
        .chain(options.polls.iter().map(|&poll| {
            let mut o = fwd64();
            o.fwd_poll = Some(poll);
            (
                format!("poll-{}", poll.to_string().replace(':', "-")),
                o,
                None,
            )
        }))
        .collect();
    let total = options.shard.share_of(units.len());
    let mine = units
        .iter()
        .enumerate()
        .filter(|&(i, _)| options.shard.owns(i));
    for (done, (_, (key, rfc, batch))) in mine.enumerate() {
        if stop.is_raised() {
            break;
        }
        if points.resumed::<DutPoint>(key).is_some() {
            progress.note(&format!("{key}: measured before, kept"));
            continue;
        }
        progress.point(&format!("rfc2544 of {key}"), done, total);
        // A DUT that cannot run here (testpmd not installable) is left out with one line.
        if let Some(why) = rfc.dut.unavailable() {
            progress.note(&format!("left out: {}: {why}", rfc.dut.name()));
            let point = DutPoint {
                dut: rfc.dut.name().to_string(),
                receive_work: String::new(),
                sizes: Vec::new(),
                fwd_batch: *batch,
                fwd_poll: None,
                saturation: None,
                dut_report: None,
                failure: None,
                left_out: Some(why),
            };
            points.write(key, &point, None)?;
            continue;
        }
        let measured = rfc2544::measure(rfc, Vec::new(), stop, &mut Quiet)
            .map_err(|e| std::io::Error::other(format!("{key}: {e}")))?;
        if stop.is_raised() {
            break;
        }
        let point = DutPoint {
            dut: rfc.dut.name().to_string(),
            receive_work: measured.report.rps.clone(),
            sizes: measured.report.sizes,
            fwd_batch: *batch,
            fwd_poll: key.starts_with("poll-").then(|| rfc.poll().to_string()),
            saturation: measured.report.saturation,
            dut_report: measured.dut_report,
            failure: measured.failure,
            left_out: None,
        };
        points.write(key, &point, None)?;
    }
    progress.finish();
    Ok(topology.to_string())
}

fn usage(e: CommandError) -> StudyError {
    StudyError::Io(std::io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests;
