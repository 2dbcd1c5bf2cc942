//! Where the DUT's cycles go at saturation (the paper's Table II): one trial with the source
//! as fast as it goes, the DUT's CPU sampled meanwhile with the software clock event (every
//! DUT, the kernel's forwarders among them: kernel functions grouped into RX, TX, memory,
//! skb and processing), and `latlab fwd`'s own TSC accounting started again at the trial's
//! start and read when the source stops, so that neither covers the idle time between trials.
//!
//! On this kind of machine the software clock does not sample a CPU while its idle task runs,
//! and the kernel's forwarders do their work in softirqs that often run on the idle task (an
//! interrupt wakes the CPU, the softirq runs on its way out): unsampled. So while the source
//! sends, a spinner in the `SCHED_IDLE` class keeps the DUT's CPU out of the idle task; it runs
//! only when nothing else wants the CPU, and its samples are user-space samples that stand for
//! the CPU's idle time (`user` in the table, for a DUT that has no user-space loop of its own).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::trial::{self, Load, Sink};
use latlab_bench::kernel_steps::{KernelStep, KernelStepReport};
use latlab_engine::blaster;
use latlab_engine::Stop;
use latlab_io::port::FramePort;
use latlab_io::profile::{KernelSymbols, Profiler};
use serde::{Deserialize, Serialize};

use latlab_lab::middle::RunningMiddle;

/// Samples per second of CPU time.
const PROFILE_HZ: u64 = 10_000;

/// What the DUT did in the saturation trial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Saturation {
    /// The frame size sent, bytes on the wire.
    pub frame_size: usize,
    /// How long the source sent, seconds.
    pub seconds: f64,
    /// Frames the source sent.
    pub sent: u64,
    /// Frames that reached the sink.
    pub received: u64,
    /// The CPU the DUT ran on, the one sampled.
    pub cpu: usize,
    /// The time stamp counter's rate, Hz: the clock the cycles are counted in.
    pub tsc_hz: f64,
    /// The DUT's CPU by step, sampled while the source sent; `None` when it could not be
    /// sampled (`profile_error` says why).
    pub profile: Option<KernelStepReport>,
    /// Why the CPU was not sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_error: Option<String>,
    /// Samples the kernel dropped (its ring was full).
    #[serde(default)]
    pub lost_samples: u64,
}

impl Saturation {
    /// Frames per second through the DUT.
    pub fn received_pps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.received as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// The cycles per received frame the DUT's CPU spent in `step`.
    pub fn cycles_per_packet(&self, step: KernelStep) -> Option<f64> {
        self.profile
            .as_ref()?
            .cycles_per_packet(step, self.tsc_hz, self.received)
    }

    /// The cycles per received frame the DUT's CPU was busy (every sample but idle ones).
    pub fn busy_cycles_per_packet(&self) -> Option<f64> {
        let p = self.profile.as_ref()?;
        let busy = p.samples - p.samples_of(KernelStep::Idle);
        latlab_bench::kernel_steps::cycles_per_packet(busy, p.freq_hz, self.tsc_hz, self.received)
    }
}

/// Sends `frame` through `tx` as fast as the source goes for `duration` while the DUT's CPU
/// `dut_cpu` is sampled and `latlab fwd`'s report starts again; stops the DUT as soon as the
/// source has sent (so its report is the saturated window) and returns what the trial
/// measured and the DUT's report.
pub(super) fn measure<P: FramePort>(
    tx: &mut P,
    sink: &Sink,
    frame: &[u8],
    duration: Duration,
    (source_cpu, dut_cpu): (Option<usize>, usize),
    running: RunningMiddle,
    stop: &Stop,
) -> io::Result<(Saturation, Option<super::DutReport>)> {
    let tsc_hz = latlab_io::tsc::frequency_hz(Duration::from_millis(20));
    let symbols = KernelSymbols::load();
    running.restart_report();
    let profiler = Profiler::start(dut_cpu, PROFILE_HZ);
    let spinning = AtomicBool::new(true);
    let (mut samples, mut dut_report) = (None, None);
    let trial = std::thread::scope(|s| {
        s.spawn(|| {
            let placed = latlab_io::cpu::pin_current_thread(dut_cpu)
                .and_then(|()| latlab_io::cpu::set_current_thread_idle_class());
            while placed.is_ok() && spinning.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        let load = Load::Rate(None);
        let trial = trial::run_then(
            tx,
            sink,
            frame,
            load,
            duration,
            ((source_cpu, None), stop),
            None,
            || {
                samples = Some(profiler.and_then(|p| p.stop()));
                spinning.store(false, Ordering::Relaxed);
                dut_report = Some(running.stop().map(|r| r.map(super::DutReport::from)));
            },
        );
        spinning.store(false, Ordering::Relaxed);
        trial
    })?;
    let samples = samples.unwrap_or_else(|| Err(io::Error::other("the trial did not run")));
    let (profile, profile_error, lost_samples) = match (samples, symbols) {
        (Ok(samples), Ok(symbols)) => {
            let functions = samples.by_function(&symbols);
            let report = KernelStepReport::from_functions(&functions, samples.user, PROFILE_HZ);
            (Some(report), None, samples.lost)
        }
        (Err(e), _) | (_, Err(e)) => (None, Some(e.to_string()), 0),
    };
    let saturation = Saturation {
        frame_size: frame.len() + blaster::FCS_LEN,
        seconds: trial.elapsed_ns as f64 / 1e9,
        sent: trial.counts.sent,
        received: trial.counts.received,
        cpu: dut_cpu,
        tsc_hz,
        profile,
        profile_error,
        lost_samples,
    };
    Ok((saturation, dut_report.transpose()?.flatten()))
}

impl Saturation {
    /// The markdown section of `report.md`: cycles per frame by step, as the paper's Table II.
    pub fn markdown(&self) -> String {
        let mut md = format!(
            "## Where the cycles go at saturation (Table II's shape)\n\n{}-byte frames as fast as the source goes for {:.1} s: {} of {} frames through the DUT ({:.3} Mpps). ",
            self.frame_size,
            self.seconds,
            self.received,
            self.sent,
            self.received_pps() / 1e6
        );
        let Some(p) = &self.profile else {
            let why = self.profile_error.as_deref().unwrap_or("not sampled");
            md.push_str(&format!("The DUT's CPU could not be sampled: {why}.\n\n"));
            return md;
        };
        md.push_str(&format!(
            "CPU {} sampled with the software clock event at {} Hz ({} samples, {} lost); kernel functions by self time, grouped into the paper's steps by `latlab_bench::kernel_steps`. Cycles are the time stamp counter's ({:.2} GHz) per frame through.\n\n",
            self.cpu,
            p.freq_hz,
            p.samples,
            self.lost_samples,
            self.tsc_hz / 1e9
        ));
        md.push_str("| RX | TX | Mem. | skb | Process. | system calls, user space | other | busy | idle |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        let cell = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
        let steps: Vec<String> = KernelStep::ALL
            .iter()
            .filter(|&&s| s != KernelStep::Idle)
            .map(|&s| cell(self.cycles_per_packet(s)))
            .collect();
        md.push_str(&format!(
            "| {} | {} | {:.0}% |\n\n",
            steps.join(" | "),
            cell(self.busy_cycles_per_packet()),
            100.0 * p.share_of(KernelStep::Idle)
        ));
        if !p.other_functions.is_empty() {
            let top: Vec<String> = p
                .other_functions
                .iter()
                .take(6)
                .map(|f| {
                    format!(
                        "`{}` {:.1}%",
                        f.function,
                        100.0 * f.samples as f64 / p.samples.max(1) as f64
                    )
                })
                .collect();
            md.push_str(&format!(
                "Most sampled of \"other\": {}.\n\n",
                top.join(", ")
            ));
        }
        md
    }
}
