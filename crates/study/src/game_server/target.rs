//! The game-server study against a server latlab did not start (`--target ADDR --protocol
//! NAME`): the offered load rises until more than 5% of the requests go unanswered (the
//! first-drop load), then Table I's points are measured at 20%, 90% and 110% of it.
//!
//! There is nothing else to vary: the server's client count, I/O mode and receive buffer are
//! its own. Each point is one generator run of the protocol (as `latlab gen --protocol`
//! runs it) from this process's namespace, written to `points/target-<phase>-<protocol>-
//! <load>pps.json` (+ `.hlog`) as soon as it is measured, so `--resume` skips it and
//! [`super::target_report::write`] draws every artefact from the points alone.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use latlab_engine::generator::Threads;
use latlab_engine::{PollMode, Stop};
use latlab_io::udpmib::UdpMib;
use latlab_lab::losses::{FarCounters, FarSide, PathEnds};
use latlab_lab::measure::{self, ClockChoice, GenOptions, ThreadChoice};
use latlab_lab::progress::View;
use latlab_lab::units::ProbeRate;
use latlab_probe::protocol::{ProtocolSummary, SharedProtocol};
use latlab_stats::{LatencyHistogram, Summary};
use serde::{Deserialize, Serialize};

use super::{StudyOptions, DROP_THRESHOLD, QUANTILES};
use crate::points::{Existing, PointsDir};
use crate::{StudyError, StudyFile, StudyKind};

/// The first word of every target point's key.
pub const PREFIX: &str = "target";

/// Loads measured past the first drop, to show the drop is no single bad point.
pub const PAST_DROP: usize = 1;

/// How often a sweep whose lowest load already drops halves it, looking for a load that
/// does not.
pub const HALVINGS: usize = 3;

/// The fractions of the first-drop load Table I is measured at.
pub const TABLE_FRACTIONS: [f64; 3] = [0.2, 0.9, 1.1];

/// The lowest load a sweep halves down to, requests per second.
pub const MIN_LOAD: f64 = 20.0;

/// The server a target study measures, and how it is spoken to.
#[derive(Clone, Debug)]
pub struct TargetOptions {
    /// Its address.
    pub addr: SocketAddr,
    /// The `--protocol` name (`latlab`, `echo`, `dns`…).
    pub protocol_name: String,
    /// The protocol, `None` for latlab's own probes (`latlab`, `echo`).
    pub protocol: Option<SharedProtocol>,
    /// The protocol's own flags as given (`--query a.example --edns 1232`), which shape every
    /// point: `--resume` refuses a folder measured with others.
    pub flags: String,
    /// The emulated link the requests cross, as `--link` names it: the link of the `latlab
    /// run` the study runs under (the command line puts it there).
    pub link: Option<String>,
}

/// One point of a target study, as written to `points/<key>.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TargetPoint {
    /// `sweep` or `table`.
    pub phase: String,
    /// The server's address.
    pub target: String,
    /// The `--protocol` it was spoken to in.
    pub protocol: String,
    /// The emulated link in front of it (`--link`), absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// Offered load, requests per second.
    pub load_pps: f64,
    /// For table points: the load as a fraction of the first-drop load.
    pub load_fraction: Option<f64>,
    /// Requests sent after the warm-up.
    pub sent: u64,
    /// Those answered.
    pub answered: u64,
    /// Those never answered: the loss.
    pub unanswered: u64,
    /// Requests that fell due but could not be sent in time (neither sent nor lost).
    pub unsent: u64,
    /// `unanswered / sent`.
    pub loss_ratio: f64,
    /// The rate requests left at.
    pub achieved_pps: f64,
    /// Round trip from each request's intended send time to its answer.
    pub latency_ns: Summary,
    /// Requests the socket could not send, by cause (counted as unanswered).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub send_failed: BTreeMap<String, u64>,
    /// The protocol's own counts (outcome codes, wrong id, late, …); absent for latlab's
    /// probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_counts: Option<ProtocolSummary>,
    /// The requests lost, the warm-up's included, by cause, as this namespace's counters and
    /// the interface towards the server tell them (the server counts nothing latlab reads);
    /// absent in older points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_by_cause: Option<latlab_lab::losses::LostByCause>,
}

/// The key of a target point: its load as [`load_text`] writes it, `.` as `_` (`0_5pps`).
pub fn key(phase: &str, protocol: &str, load: f64) -> String {
    format!(
        "{PREFIX}-{phase}-{protocol}-{}pps",
        load_text(load).replace('.', "_")
    )
}

/// A load as the study shows it: whole requests a second from 100 up, else to a hundredth
/// (a game engine's query limit is one a second: its table loads are fractions of that).
pub fn load_text(load: f64) -> String {
    let load = tidy(load);
    if load.fract() == 0.0 {
        format!("{load:.0}")
    } else {
        let text = format!("{load:.2}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// `load` rounded as [`load_text`] shows it, at least a hundredth.
fn tidy(load: f64) -> f64 {
    if load >= 100.0 {
        load.round()
    } else {
        ((load * 100.0).round() / 100.0).max(0.01)
    }
}

/// What a sweep measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Sweep {
    /// (load, loss) of each load measured, ascending.
    pub measured: Vec<(f64, f64)>,
    /// The lowest load with more than [`DROP_THRESHOLD`] unanswered, if one was reached.
    pub first_drop: Option<f64>,
    /// The sweep was stopped before it ended.
    pub stopped: bool,
}

impl Sweep {
    /// The load Table I's fractions are taken of: the first drop, else the highest load
    /// measured (the server did not drop within the sweep).
    pub fn table_base(&self) -> Option<f64> {
        self.first_drop
            .or_else(|| self.measured.iter().map(|m| m.0).reduce(f64::max))
    }
}

/// Runs the sweep over `loads` (ascending): `measure(load)` gives the share unanswered at
/// `load` (`None`: stopped). It rises until a load drops more than [`DROP_THRESHOLD`], then
/// measures [`PAST_DROP`] loads more and ends. When the lowest load drops already, it is
/// halved (at most [`HALVINGS`] times, not below [`MIN_LOAD`]) until one does not, so the
/// first drop is bracketed from below.
pub fn sweep<E>(
    loads: &[f64],
    mut measure: impl FnMut(f64) -> Result<Option<f64>, E>,
) -> Result<Sweep, E> {
    let mut loads: Vec<f64> = loads.to_vec();
    let mut result = Sweep {
        measured: Vec::new(),
        first_drop: None,
        stopped: false,
    };
    // The loss of each load measured: a halving goes back over them without measuring again.
    let mut losses: Vec<Option<f64>> = vec![None; loads.len()];
    let (mut i, mut halvings, mut past) = (0, 0, 0);
    while i < loads.len() && past <= PAST_DROP {
        let load = loads[i];
        let loss = match losses[i] {
            Some(loss) => loss,
            None => {
                let Some(loss) = measure(load)? else {
                    result.stopped = true;
                    break;
                };
                result.measured.push((load, loss));
                losses[i] = Some(loss);
                loss
            }
        };
        if loss > DROP_THRESHOLD && result.first_drop.is_none() {
            let half = tidy(load / 2.0);
            if i == 0 && halvings < HALVINGS && half >= MIN_LOAD {
                halvings += 1;
                loads.insert(0, half);
                losses.insert(0, None);
                continue;
            }
            result.first_drop = Some(load);
        }
        if result.first_drop.is_some() {
            past += 1;
        }
        i += 1;
    }
    result.measured.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(result)
}

/// The loads of Table I: [`TABLE_FRACTIONS`] of `base`.
pub fn table_loads(base: f64) -> Vec<(f64, f64)> {
    TABLE_FRACTIONS
        .iter()
        .map(|&f| (f, tidy(base * f)))
        .collect()
}

/// Measures the sweep and the table points of a target study into `<out>/points` and writes
/// `study.json`; returns the lab's description.
pub(super) fn measure_all(
    options: &StudyOptions,
    target: &TargetOptions,
    stop: &Stop,
    progress: &mut dyn View,
) -> Result<String, StudyError> {
    let existing = if options.resume {
        let parameters = options.parameters();
        StudyFile::check_resume(&options.out, StudyKind::GameServer, &parameters)?;
        // A folder of latlab's own server, or of another target or protocol, is not this.
        if let Some(before) = StudyFile::read(&options.out)? {
            for name in ["--target", "--protocol", "protocol flags", "--link"] {
                if before.parameters.get(name) != parameters.get(name) {
                    return Err(StudyError::Resume(format!(
                        "the folder was measured with {name} {}, not {}",
                        before
                            .parameters
                            .get(name)
                            .map_or("not given", String::as_str),
                        parameters.get(name).map_or("not given", String::as_str)
                    )));
                }
            }
        }
        Existing::Continue
    } else {
        Existing::RefuseResumable
    };
    let points = PointsDir::create(&options.out, existing)?;
    let topology = describe(target);
    progress.note(&format!("lab: {topology}"));
    StudyFile::new(StudyKind::GameServer, &topology)
        .with_parameters(options.parameters())
        .write(&options.out)?;
    check_answers(target)?;
    let mut done = 0;
    let total = options.loads.len() + TABLE_FRACTIONS.len();
    let mut point = |phase: &str,
                     load: f64,
                     fraction: Option<f64>,
                     progress: &mut dyn View|
     -> Result<Option<TargetPoint>, StudyError> {
        if stop.is_raised() {
            return Ok(None);
        }
        let key = key(phase, &target.protocol_name, load);
        if let Some(p) = points.resumed::<TargetPoint>(&key) {
            progress.note(&format!("resume: {key} is done, skipped"));
            return Ok(Some(p));
        }
        progress.point(
            &format!("{} {phase} {:.0} requests/s", target.protocol_name, load),
            done,
            total,
        );
        done += 1;
        let (mut p, histogram) = measure_point(options, target, load, stop)?;
        p.phase = phase.to_string();
        p.load_fraction = fraction;
        let comment = format!(
            "latlab game-server study point {key}: round trip of {} requests to {}, ns",
            target.protocol_name, target.addr
        );
        if stop.is_raised() || p.sent == 0 {
            // Cut short: not written, so --resume measures it again.
            return Ok(None);
        }
        points.write(&key, &p, Some((&histogram, &comment)))?;
        Ok(Some(p))
    };
    let swept = sweep(&options.loads, |load| {
        Ok::<_, StudyError>(point("sweep", load, None, progress)?.map(|p| p.loss_ratio))
    })?;
    if let Some(base) = swept.table_base().filter(|_| !swept.stopped) {
        for (fraction, load) in table_loads(base) {
            if point("table", load, Some(fraction), progress)?.is_none() {
                break;
            }
        }
    }
    progress.finish();
    Ok(topology)
}

/// The lab's description: the server and the protocol it is spoken to in.
pub fn describe(target: &TargetOptions) -> String {
    let path = match &target.link {
        Some(link) => format!("behind the emulated link {link} (latlab run's)"),
        None => "no emulated link".to_string(),
    };
    format!(
        "target {} (a server latlab did not start), protocol {}, from this namespace, {path}",
        target.addr, target.protocol_name
    )
}

/// Fails at once, with the reason, when the target does not answer at all.
fn check_answers(target: &TargetOptions) -> Result<(), StudyError> {
    let bind = GenOptions::new(target.addr).bind;
    let (_, check) = measure::open_sockets(bind, 1, None)?;
    let timeout = Duration::from_secs(1);
    match &target.protocol {
        Some(p) => latlab_lab::protocols::check_answers(&check, target.addr, p, timeout)?,
        None => {
            measure::check_target(&check, target.addr, timeout)?;
        }
    }
    Ok(())
}

/// One generator run at `load` (phase and fraction left for the caller).
fn measure_point(
    options: &StudyOptions,
    target: &TargetOptions,
    load: f64,
    stop: &Stop,
) -> Result<(TargetPoint, LatencyHistogram), StudyError> {
    let mut g = GenOptions::new(target.addr);
    g.rate = ProbeRate::try_from(load)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    g.duration = options.duration;
    g.warmup = (options.duration / 10).min(Duration::from_millis(200));
    g.payload_len = options.payload_len;
    g.poll = PollMode::Block;
    g.threads = ThreadChoice::One;
    g.check = false;
    g.clock = ClockChoice::Separate;
    g.grace = Duration::from_millis(300);
    g.protocol = target.protocol.clone();
    let (sockets, _) = measure::open_sockets(g.bind, 1, Some(4 << 20))?;
    let threads = Threads::OneLoop { cpu: None };
    let label = format!("{} {load:.0}/s to {}", target.protocol_name, target.addr);
    let setup = measure::setup(&g, label, "remote", threads);
    // This namespace's UDP MIB (exact in one the study has to itself, under `latlab run`;
    // the server's too when it is an address of this namespace) and the interface the
    // requests leave by.
    let (mib, ends) = (UdpMib::open().ok(), PathEnds::towards(target.addr.ip()));
    let far = FarSide {
        socket: None,
        counters: FarCounters::Foreign,
        mib: None,
        ends: ends.as_ref(),
    };
    let before = far.read();
    let (mut summary, result) = measure::run_counted(
        &g,
        &sockets,
        mib.as_ref(),
        threads,
        setup,
        stop,
        &mut |_| {},
    )?;
    far.place_in(&before, &mut summary);
    if let (Some(p), Some(counts)) = (&target.protocol, summary.protocol.as_mut()) {
        counts.limit = p.limit_note(load);
    }
    let point = TargetPoint {
        phase: String::new(),
        target: target.addr.to_string(),
        protocol: target.protocol_name.clone(),
        link: target.link.clone(),
        load_pps: load,
        load_fraction: None,
        sent: summary.sent,
        answered: summary.received,
        unanswered: summary.lost,
        unsent: summary.unsent,
        loss_ratio: summary.loss_ratio,
        achieved_pps: summary.achieved_pps,
        latency_ns: Summary::with_quantiles(&result.report.latency, &QUANTILES),
        send_failed: summary.send_failed.clone(),
        protocol_counts: summary.protocol.clone(),
        lost_by_cause: summary.lost_by_cause,
    };
    Ok((point, result.report.latency))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that answers everything up to `capacity` requests per second.
    fn capped(capacity: f64) -> impl FnMut(f64) -> Result<Option<f64>, ()> {
        move |load| Ok(Some((1.0 - capacity / load).max(0.0)))
    }

    #[test]
    fn the_sweep_rises_to_the_first_drop_and_one_load_past_it() {
        let loads: Vec<f64> = (1..=10).map(|k| k as f64 * 1000.0).collect();
        let s = sweep(&loads, capped(3_500.0)).unwrap();
        // 4000/s loses 12.5% (the first above 5%), 5000/s is the one past it.
        assert_eq!(s.first_drop, Some(4_000.0));
        let measured: Vec<f64> = s.measured.iter().map(|m| m.0).collect();
        assert_eq!(measured, [1000.0, 2000.0, 3000.0, 4000.0, 5000.0]);
        assert_eq!(s.table_base(), Some(4_000.0));
        assert!(!s.stopped);
    }

    #[test]
    fn a_sweep_that_drops_at_its_lowest_load_halves_it() {
        let s = sweep(&[8_000.0, 16_000.0], capped(2_500.0)).unwrap();
        let measured: Vec<f64> = s.measured.iter().map(|m| m.0).collect();
        // 8000 and 4000 drop; 2000 does not: the first drop is 4000, bracketed from below.
        assert_eq!(measured, [2000.0, 4000.0, 8000.0]);
        assert_eq!(s.first_drop, Some(4_000.0));
        // A server that drops at any load: halved three times, then the lowest is the drop.
        let s = sweep(&[8_000.0], capped(10.0)).unwrap();
        let measured: Vec<f64> = s.measured.iter().map(|m| m.0).collect();
        assert_eq!(measured, [1000.0, 2000.0, 4000.0, 8000.0]);
        assert_eq!(s.first_drop, Some(1_000.0));
    }

    #[test]
    fn a_server_that_never_drops_takes_its_table_from_the_highest_load() {
        let s = sweep(&[100.0, 200.0, 300.0], capped(1e9)).unwrap();
        assert_eq!(s.first_drop, None);
        assert_eq!(s.measured.len(), 3);
        assert_eq!(s.table_base(), Some(300.0));
        assert_eq!(
            table_loads(300.0),
            [(0.2, 60.0), (0.9, 270.0), (1.1, 330.0)]
        );
    }

    #[test]
    fn a_stopped_sweep_ends_where_it_stopped_and_errors_pass_through() {
        let mut n = 0;
        let s = sweep(&[1.0e3, 2.0e3, 3.0e3], |_| {
            n += 1;
            Ok::<_, ()>((n < 2).then_some(0.0))
        })
        .unwrap();
        assert!(s.stopped);
        assert_eq!(s.measured, [(1000.0, 0.0)]);
        assert_eq!(
            sweep(&[1.0e3], |_| Err::<Option<f64>, _>("boom")),
            Err("boom")
        );
    }

    #[test]
    fn keys_say_target_phase_protocol_and_load() {
        assert_eq!(key("sweep", "dns", 1999.6), "target-sweep-dns-2000pps");
        assert_eq!(key("table", "echo", 220.0), "target-table-echo-220pps");
        // A game engine's loads are below one a second: they keep their hundredths.
        assert_eq!(key("table", "quake3", 0.4), "target-table-quake3-0_4pps");
        assert_eq!(key("table", "quake3", 1.8), "target-table-quake3-1_8pps");
        assert_eq!(key("sweep", "quake3", 0.5), "target-sweep-quake3-0_5pps");
        assert_ne!(key("sweep", "quake3", 0.5), key("sweep", "quake3", 1.0));
        assert_eq!(table_loads(2.0), vec![(0.2, 0.4), (0.9, 1.8), (1.1, 2.2)]);
    }
}
