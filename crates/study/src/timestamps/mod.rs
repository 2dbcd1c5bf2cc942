//! `latlab study timestamps`: how far each way of stamping a probe can be trusted on this
//! machine, and which OS settings move a reflector's tail (after Primorac et al., "How to
//! Measure the Killer Microsecond", Figures 2 and 3).
//!
//! In `client — emu — server` namespaces the emulator holds the client→server direction at a
//! fixed delay with no jitter and measures its own release error from the kernel's stamps: the
//! reference is that delay plus the median release error of both directions. A prober in the
//! client sends one probe at a time to a reflector in the server and keeps, for every probe,
//! every stamp it gets: the user-space clock before the send call and after the receive call
//! returns, the kernel's software transmit stamp (`SO_TIMESTAMPING` through the error queue)
//! and its software receive stamp. Each method's round trip is computed from the same probes:
//!
//! - `user-space`: user clock after the receive call returns − user clock before the send
//!   (the prober blocking in `ppoll`, or busy polling, as the point says);
//! - `kernel-rx`: the kernel's receive stamp − user clock before the send;
//! - `kernel-tx-rx`: the kernel's receive stamp − its transmit stamp;
//! - `xdp-rx`: the XDP program's receive stamp − user clock before the send, on a pass of its
//!   own where the prober sends and receives over AF_XDP (the program takes the answers
//!   before the kernel's stack, so the socket methods cannot see the same probes).
//!
//! What a method reports beyond the reference is its own error plus the path's (veth and
//! forwarding) time; two methods on the same probes differ only by their own errors.
//!
//! The points: the prober blocking and busy polling against a pinned, blocking reflector (the
//! methods), sockperf's ping-pong through the same path (the outside view; left out, with the
//! reason, where sockperf cannot be had), then the reflector's OS settings (unpinned, busy polling, timer slack 1 ns,
//! `SO_BUSY_POLL`, a competing spinning thread on its core, RPS on its receiving veth to the
//! other CPU, threaded NAPI on that veth), and the emulator's as a forwarder at delay 0 (the
//! default timer slack, busy polling, unpinned, a spinning thread on its CPU, threaded NAPI or
//! RPS on its veths). Each point goes to `points/` as
//! soon as it is measured; [`report::write`] (and `latlab report DIR`) draws the tables, the
//! CCDFs and `report.md` from those files only.
//!
//! Cores (two on this machine): the prober runs on the first allowed CPU, the reflector (when
//! pinned) and the emulator (blocking, not busy polling, so the two can share) on the last.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use latlab_engine::Stop;
use latlab_lab::progress::View;
use latlab_lab::units::format_duration_ns;
use serde::{Deserialize, Serialize};

use super::{Shard, Study, StudyError, StudyKind};

pub mod analysis;
mod figures;
mod prober;
pub mod report;
mod run;
mod sockperf;

/// `latlab study timestamps` as a [`Study`]: [`Study::run`] measures every point in
/// `client — emu — server` namespaces into `options.out`'s `points/` folder, then writes the
/// tables, the CCDFs and `report.md`.
#[derive(Clone, Copy, Debug)]
pub struct TimestampsStudy;

impl Study for TimestampsStudy {
    const KIND: StudyKind = StudyKind::Timestamps;
    const POINT_PREFIXES: &'static [&'static str] = &["methods", "reflector"];
    type Options = StampStudyOptions;

    fn folder(options: &StampStudyOptions) -> (&Path, Shard) {
        (&options.out, options.shard)
    }

    fn measure(
        options: &StampStudyOptions,
        stop: &Stop,
        progress: &mut dyn View,
    ) -> Result<String, StudyError> {
        run::measure_all(options, stop, progress)
    }

    fn draw(dir: &Path, topology: &str) -> Result<PathBuf, StudyError> {
        report::write(dir, topology)
    }
}

/// What the study measures.
#[derive(Clone, Debug)]
pub struct StampStudyOptions {
    /// Results folder (must not exist unless `resume` or a shard).
    pub out: PathBuf,
    /// Probes per point.
    pub probes: u64,
    /// Probes per second (one probe in flight at a time).
    pub rate_pps: f64,
    /// The fixed delay on the client→server direction, ns.
    pub delay_ns: u64,
    /// Continue an interrupted study, keeping the points it finished.
    pub resume: bool,
    /// This job's share of the points (`--shard I/N`).
    pub shard: Shard,
}

impl StampStudyOptions {
    /// 20 000 probes per point at 2 000 per second through a 100 µs delay.
    pub fn new(out: PathBuf) -> StampStudyOptions {
        StampStudyOptions {
            out,
            probes: 20_000,
            rate_pps: 2_000.0,
            delay_ns: 100_000,
            resume: false,
            shard: Shard::WHOLE,
        }
    }

    /// The options that shape the points, as `study.json` keeps them.
    pub fn parameters(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("--probes".to_string(), self.probes.to_string()),
            ("--rate".to_string(), format!("{}", self.rate_pps)),
            ("--delay".to_string(), format_duration_ns(self.delay_ns)),
        ])
    }
}

/// The reflector's OS settings of one point.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReflectorSettings {
    /// Pinned to the CPU named in the point's `cores`, or left to the scheduler.
    pub pinned: bool,
    /// Busy polling (`true`) or blocking in `ppoll`.
    pub busy: bool,
    /// `PR_SET_TIMERSLACK` of its thread, ns (`None`: the default, 50 µs).
    pub timer_slack_ns: Option<u64>,
    /// `SO_BUSY_POLL` of its socket, µs.
    pub so_busy_poll_us: Option<u32>,
    /// A thread spinning on the reflector's CPU while the point runs.
    pub competitor: bool,
    /// RPS on the reflector's receiving veth steers its receive processing to the prober's
    /// CPU, away from the reflector's (`rps_cpus` of its queue).
    #[serde(default)]
    pub rps_elsewhere: bool,
    /// Threaded NAPI on the reflector's receiving veth (with GRO on, which gives a veth its
    /// NAPI instance): its receive work runs in a kernel thread the scheduler places, not in
    /// the sender's softirq.
    #[serde(default)]
    pub threaded_napi: bool,
}

impl ReflectorSettings {
    /// Pinned, blocking, default slack, no `SO_BUSY_POLL`, no competitor.
    pub const BASELINE: ReflectorSettings = ReflectorSettings {
        pinned: true,
        busy: false,
        timer_slack_ns: None,
        so_busy_poll_us: None,
        competitor: false,
        rps_elsewhere: false,
        threaded_napi: false,
    };
}

/// Every stamp one probe got, ns of `CLOCK_REALTIME`; a stamp the kernel did not give is
/// `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeStamps {
    /// User-space clock just before the send call.
    pub user_tx: u64,
    /// User-space clock just after the receive call returned the answer.
    pub user_rx: u64,
    /// The kernel's software transmit stamp.
    pub kernel_tx: Option<u64>,
    /// The kernel's software receive stamp.
    pub kernel_rx: Option<u64>,
    /// The XDP program's receive stamp (the prober over AF_XDP; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xdp_rx: Option<u64>,
}

/// One measured point, as written to `points/<key>.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StampPoint {
    /// `methods` (the prober's receive mode varies), `outside` (sockperf on the same path),
    /// `reflector` (the reflector's settings vary) or `forwarder` (the emulator's settings
    /// vary, at delay 0).
    pub group: String,
    /// The point's name in tables and legends.
    pub setting: String,
    /// How the prober waited for answers: `block` or `busy`; `xdp` when it sent and
    /// received over AF_XDP (busy polling its rings); `sockperf` for sockperf.
    pub prober_poll: String,
    /// The reflector's settings.
    pub reflector: ReflectorSettings,
    /// The emulator's settings (absent in points written before the study varied them: the
    /// reference's).
    #[serde(default = "reference_forwarder")]
    pub forwarder: ForwarderSettings,
    /// Which CPU ran what, e.g. `prober cpu0, reflector cpu1, emulator cpu1`.
    pub cores: String,
    /// The delay configured on the client→server direction, ns.
    pub delay_ns: u64,
    /// The emulator's median release error, client→server plus server→client, ns.
    pub release_error_ns: u64,
    /// Probes sent.
    pub sent: u64,
    /// The answered probes, in sending order.
    pub probes: Vec<ProbeStamps>,
    /// The emulator's report, as `latlab emu --json` writes it.
    pub emulator: Option<latlab_emu::report::EmuJson>,
    /// Why the point could not be measured (sockperf missing), its probes then empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_out: Option<String>,
    /// The latlab prober's probes lost, by cause; absent for sockperf and in older points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_by_cause: Option<latlab_lab::losses::LostByCause>,
}

fn reference_forwarder() -> ForwarderSettings {
    ForwarderSettings::REFERENCE
}

impl StampPoint {
    /// The reference round trip: the configured delay plus the emulator's release error.
    pub fn reference_ns(&self) -> u64 {
        self.delay_ns + self.release_error_ns
    }
}

/// How the emulator forwards on one point: the bridge's own OS settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForwarderSettings {
    /// The configured delay is held (`false`: delay 0, the emulator as a plain forwarder).
    pub delayed: bool,
    /// Pinned to the shared CPU, or left to the scheduler.
    pub pinned: bool,
    /// Busy polling (`true`) or blocking in `ppoll` until the next frame is due.
    pub busy: bool,
    /// `PR_SET_TIMERSLACK` of its thread, ns (`None`: the default, 50 µs).
    pub timer_slack_ns: Option<u64>,
    /// Threaded NAPI on both of the emulator's veths (GRO on).
    #[serde(default)]
    pub threaded_napi: bool,
    /// RPS on both of the emulator's veths steers their receive work to the prober's CPU.
    #[serde(default)]
    pub rps_elsewhere: bool,
    /// A thread spinning on the emulator's CPU while the point runs (on two CPUs the
    /// reflector shares that CPU, so it feels the spinner too).
    #[serde(default)]
    pub competitor: bool,
}

impl ForwarderSettings {
    /// The reference path: the delay held, pinned, blocking, timer slack 1 ns.
    pub const REFERENCE: ForwarderSettings = ForwarderSettings {
        delayed: true,
        pinned: true,
        busy: false,
        timer_slack_ns: Some(1),
        threaded_napi: false,
        rps_elsewhere: false,
        competitor: false,
    };
    /// The forwarder's baseline: the reference's settings at delay 0.
    pub const BASELINE: ForwarderSettings = ForwarderSettings {
        delayed: false,
        ..ForwarderSettings::REFERENCE
    };
}

/// One point of the study's plan.
#[derive(Clone, Debug)]
pub(crate) struct Planned {
    pub(crate) key: &'static str,
    pub(crate) group: &'static str,
    pub(crate) setting: &'static str,
    pub(crate) prober_busy: bool,
    /// The prober sends and receives over AF_XDP on its veth (busy polling), so the XDP
    /// program stamps each answer; the kernel's socket stamps are then not there.
    pub(crate) prober_xdp: bool,
    pub(crate) reflector: ReflectorSettings,
    pub(crate) forwarder: ForwarderSettings,
}

/// The points of the study, in order.
pub(crate) fn plan() -> Vec<Planned> {
    let base = ReflectorSettings::BASELINE;
    let point = |key, group, setting, reflector| Planned {
        key,
        group,
        setting,
        prober_busy: false,
        prober_xdp: false,
        reflector,
        forwarder: ForwarderSettings::REFERENCE,
    };
    let forwarder = |key, setting, forwarder| Planned {
        forwarder,
        ..point(key, "forwarder", setting, base.clone())
    };
    let fwd = ForwarderSettings::BASELINE;
    vec![
        point(
            "methods-prober-block",
            "methods",
            "prober blocks",
            base.clone(),
        ),
        Planned {
            prober_busy: true,
            ..point(
                "methods-prober-busy",
                "methods",
                "prober busy-polls",
                base.clone(),
            )
        },
        Planned {
            prober_busy: true,
            prober_xdp: true,
            ..point(
                "methods-prober-xdp",
                "methods",
                "prober over AF_XDP",
                base.clone(),
            )
        },
        point(
            "outside-sockperf",
            "outside",
            "sockperf ping-pong",
            base.clone(),
        ),
        point(
            "reflector-unpinned",
            "reflector",
            "reflector unpinned",
            ReflectorSettings {
                pinned: false,
                ..base.clone()
            },
        ),
        point(
            "reflector-busy",
            "reflector",
            "reflector busy-polls",
            ReflectorSettings {
                busy: true,
                ..base.clone()
            },
        ),
        point(
            "reflector-slack-1ns",
            "reflector",
            "reflector timer slack 1 ns",
            ReflectorSettings {
                timer_slack_ns: Some(1),
                ..base.clone()
            },
        ),
        point(
            "reflector-so-busy-poll",
            "reflector",
            "reflector SO_BUSY_POLL 50 µs",
            ReflectorSettings {
                so_busy_poll_us: Some(50),
                ..base.clone()
            },
        ),
        point(
            "reflector-competitor",
            "reflector",
            "reflector with a spinning thread on its CPU",
            ReflectorSettings {
                competitor: true,
                ..base.clone()
            },
        ),
        point(
            "reflector-rps",
            "reflector",
            "reflector with RPS to the other CPU",
            ReflectorSettings {
                rps_elsewhere: true,
                ..base.clone()
            },
        ),
        point(
            "reflector-threaded-napi",
            "reflector",
            "reflector with threaded NAPI on its veth",
            ReflectorSettings {
                threaded_napi: true,
                ..base.clone()
            },
        ),
        forwarder(
            "forwarder-baseline",
            "forwarder blocks, pinned, slack 1 ns",
            fwd,
        ),
        forwarder(
            "forwarder-slack-default",
            "forwarder with the default timer slack",
            ForwarderSettings {
                timer_slack_ns: None,
                ..fwd
            },
        ),
        forwarder(
            "forwarder-busy",
            "forwarder busy-polls",
            ForwarderSettings { busy: true, ..fwd },
        ),
        forwarder(
            "forwarder-unpinned",
            "forwarder unpinned",
            ForwarderSettings {
                pinned: false,
                ..fwd
            },
        ),
        forwarder(
            "forwarder-competitor",
            "forwarder with a spinning thread on its CPU",
            ForwarderSettings {
                competitor: true,
                ..fwd
            },
        ),
        forwarder(
            "forwarder-threaded-napi",
            "forwarder with threaded NAPI on its veths",
            ForwarderSettings {
                threaded_napi: true,
                ..fwd
            },
        ),
        forwarder(
            "forwarder-rps",
            "forwarder with RPS to the other CPU",
            ForwarderSettings {
                rps_elsewhere: true,
                ..fwd
            },
        ),
    ]
}

#[cfg(test)]
mod tests;
