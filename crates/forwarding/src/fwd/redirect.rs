//! `latlab fwd --io xdp-redirect`: the forwarder as two XDP programs, one per interface, each
//! redirecting every frame to the other through a device map ([`latlab_io::xdp::XdpForward`]).
//! Frames never leave the kernel: no loop runs here, so there is no batch, poll mode, pinned
//! core or cycle accounting; this process loads the programs, shows their counters about once
//! a second and writes them at the end (`--json`, [`FwdRedirectJson`]). The programs go when
//! it ends, however it ends (their `bpf_link`s close with it).
//!
//! What a redirect into a veth needs to arrive: the target's peer runs NAPI (an XDP program of
//! its own, or GRO on); and the senders' checksums finished (a redirected frame loses the
//! "left to the device" mark). The lab sets both for its DUTs; for interfaces of your own the
//! start line says so.

use std::time::Duration;

use latlab_engine::Stop;
use latlab_io::xdp::{AttachMode, ForwardCounts, XdpForward};
use serde::{Deserialize, Serialize};

use super::FwdOptions;
use latlab_lab::command::{watched, write_json, CommandError, View};

/// What a redirect run did; its `--json` file, if asked for, is already written.
#[derive(Clone, Debug, PartialEq)]
pub struct RedirectReport {
    /// A→B's program's counts.
    pub a_to_b: ForwardCounts,
    /// B→A's.
    pub b_to_a: ForwardCounts,
    /// Where each program runs: native (in the driver) or generic.
    pub modes: [AttachMode; 2],
    /// How long it forwarded.
    pub elapsed: Duration,
}

impl RedirectReport {
    /// The lines printed at the end of a run.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (name, c) in [("A→B", &self.a_to_b), ("B→A", &self.b_to_a)] {
            out.push_str(&format!(
                "{name}: forwarded {} in the kernel, dropped with no target {}, too long for \
                 the target {}, handed over but refused by the target {}\n",
                c.forwarded, c.no_target, c.too_long, c.refused_by_target
            ));
        }
        out.push_str(&format!(
            "XDP: {} on A, {} on B, {:.1} s; frames never left the kernel: their cycles are \
             the kernel's (rfc2544's saturation profile shows them)\n",
            mode_name(self.modes[0]),
            mode_name(self.modes[1]),
            self.elapsed.as_secs_f64()
        ));
        out
    }
}

fn mode_name(mode: AttachMode) -> &'static str {
    match mode {
        AttachMode::Native => "native",
        AttachMode::Generic => "generic",
    }
}

/// `latlab fwd --io xdp-redirect --json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FwdRedirectJson {
    /// The latlab that wrote it.
    pub latlab_version: String,
    /// `--iface-a`.
    pub iface_a: String,
    /// `--iface-b`.
    pub iface_b: String,
    /// `xdp-redirect`.
    pub io: String,
    /// Each program's attach mode: `native` or `generic`.
    pub xdp_mode: [String; 2],
    /// Seconds forwarded.
    pub elapsed_s: f64,
    /// Frames from A to B.
    pub a_to_b: RedirectDirectionJson,
    /// Frames from B to A.
    pub b_to_a: RedirectDirectionJson,
}

/// One direction's frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedirectDirectionJson {
    /// Frames the program redirected to the other interface.
    pub forwarded: u64,
    /// Frames it dropped, by cause.
    pub dropped: RedirectDropsJson,
}

/// The frames one program dropped, by cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedirectDropsJson {
    /// The device map had no target.
    pub no_target: u64,
    /// Longer than the target takes (its MTU, the Ethernet header and one VLAN tag), which
    /// the kernel would have dropped after the redirect; 0 in a file older than the count.
    #[serde(default)]
    pub too_long: u64,
    /// Handed to the target but not passed on by it (a veth's peer's XDP ring was full), from
    /// the target's driver statistics; also in `forwarded`. 0 where the driver does not count
    /// them, and in a file older than the count.
    #[serde(default)]
    pub refused_by_target: u64,
}

impl FwdRedirectJson {
    /// The file of a run of `options` that reported `report`.
    pub fn new(options: &FwdOptions, report: &RedirectReport) -> FwdRedirectJson {
        let direction = |c: &ForwardCounts| RedirectDirectionJson {
            forwarded: c.forwarded,
            dropped: RedirectDropsJson {
                no_target: c.no_target,
                too_long: c.too_long,
                refused_by_target: c.refused_by_target,
            },
        };
        FwdRedirectJson {
            latlab_version: env!("CARGO_PKG_VERSION").to_string(),
            iface_a: options.iface_a.clone(),
            iface_b: options.iface_b.clone(),
            io: options.io.to_string(),
            xdp_mode: report.modes.map(|m| mode_name(m).to_string()),
            elapsed_s: report.elapsed.as_secs_f64(),
            a_to_b: direction(&report.a_to_b),
            b_to_a: direction(&report.b_to_a),
        }
    }
}

/// Loads both programs, shows their counters until `stop` is raised or the duration is over,
/// writes the JSON file and returns the counts.
pub fn run(
    options: &FwdOptions,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<RedirectReport, CommandError> {
    options.check()?;
    let attach = |flag: &str, from: &str, to: &str| {
        XdpForward::attach(from, to).map_err(CommandError::setup(format!("{flag} {from}")))
    };
    let to_b = attach("--iface-a", &options.iface_a, &options.iface_b)?;
    let to_a = attach("--iface-b", &options.iface_b, &options.iface_a)?;
    let (count_ab, count_ba) = (
        to_b.counter().map_err(CommandError::Io)?,
        to_a.counter().map_err(CommandError::Io)?,
    );
    view.started(&format!(
        "latlab fwd: forwarding {} ↔ {} by XDP redirect ({} on {}, {} on {}), frames never \
         leaving the kernel; a redirect into a veth arrives only where the target's peer runs \
         NAPI (an XDP program or GRO on) and with the senders' checksums finished; frames \
         longer than the target's MTU plus 18 bytes are dropped and counted; Ctrl-C stops",
        options.iface_a,
        options.iface_b,
        mode_name(to_b.mode()),
        options.iface_a,
        mode_name(to_a.mode()),
        options.iface_b,
    ));
    let started = std::time::Instant::now();
    let line = || match (count_ab.read(), count_ba.read()) {
        (Ok(ab), Ok(ba)) => format!(
            "A→B forwarded {} dropped {}   B→A forwarded {} dropped {}",
            ab.forwarded,
            ab.no_target + ab.too_long + ab.refused_by_target,
            ba.forwarded,
            ba.no_target + ba.too_long + ba.refused_by_target
        ),
        (Err(e), _) | (_, Err(e)) => format!("counters unreadable: {e}"),
    };
    watched(
        options.duration,
        stop,
        view,
        line,
        || -> std::io::Result<()> {
            // A target's MTU changed while forwarding takes effect within a turn.
            while !stop.is_raised() {
                std::thread::sleep(Duration::from_millis(20));
                to_b.refresh_limit()?;
                to_a.refresh_limit()?;
            }
            Ok(())
        },
    )
    .map_err(|source| CommandError::Run {
        engine: "XDP forwarder",
        source,
    })?;
    let report = RedirectReport {
        a_to_b: to_b.counts().map_err(CommandError::Io)?,
        b_to_a: to_a.counts().map_err(CommandError::Io)?,
        modes: [to_b.mode(), to_a.mode()],
        elapsed: started.elapsed(),
    };
    drop((to_b, to_a));
    if let Some(path) = &options.json {
        let json = FwdRedirectJson::new(options, &report);
        write_json(
            path,
            &serde_json::to_value(&json).map_err(|e| CommandError::Io(std::io::Error::other(e)))?,
        )?;
    }
    Ok(report)
}
