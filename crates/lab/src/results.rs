//! Results as data: `summary.json`, the `.hlog` interval log, `ccdf.csv` and the CCDF plot.
//!
//! Files are written whole or not at all: each is written to a temporary name in the same
//! folder and renamed into place, and a results folder is filled under a temporary name and
//! renamed when every file in it is complete. The temporary name is `.NAME.partial-PID`, and its
//! writer holds an exclusive lock on it ([`latlab_io::lock`]) until it is renamed or removed, so
//! [`crate::clean`] can tell one left by a run that ended from one being written.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use latlab_engine::generator::GeneratorResult;
use latlab_io::lock::OwnerLock;
use latlab_stats::{hlog::HlogWriter, LatencyHistogram, Summary};
use serde::{Deserialize, Serialize};
mod atomic;
mod export;
mod synthetic;
pub(crate) use atomic::naming;
pub use atomic::temp_name;
pub use atomic::{write_atomic, write_new, PartialFile};
pub use export::{ccdf_csv, hlog_bytes, hlog_of, stall_marks, summary_json, Delay};

/// Datagrams the meter dropped, by cause.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MalformedCounts {
    /// Not a latlab probe (too short, wrong magic or version).
    pub not_a_probe: u64,
    /// A probe of another run.
    pub foreign_run: u64,
    /// A flow or sequence number this run never sent.
    pub unknown_probe: u64,
    /// An impossible intended send time.
    pub bad_time: u64,
}

/// Warm-up probes, kept out of every other figure.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarmupCounts {
    /// Sent during the warm-up.
    pub sent: u64,
    /// Their responses.
    pub received: u64,
}

/// How a run was set up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSetup {
    /// A label for tables and plot legends.
    pub label: String,
    /// Where probes went.
    pub target: String,
    /// `loopback`, `veth-namespaces` or `remote`.
    pub topology: String,
    /// `constant` or `poisson`.
    pub pattern: String,
    /// UDP payload bytes per probe.
    pub payload_bytes: usize,
    /// Number of flows.
    pub flows: u32,
    /// Sending time, warm-up included, in seconds.
    pub duration_s: f64,
    /// Warm-up, in seconds.
    pub warmup_s: f64,
    /// `busy` or `block`.
    pub poll: String,
    /// `one-loop` or `split`.
    pub threads: String,
    /// The run's folder inside a results folder of several runs (`rate-1000pps`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// The traffic model the probes followed (`wow`, `fixed:100@50ms`), when `pattern`
    /// is `model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<String>,
    /// The emulated link the run went through, when it ran behind one (`latlab run` says it
    /// in `LATLAB_LINK`): `up: delay 20ms; down: delay 20ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
}

/// `summary.json`: everything one run measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The latlab version that wrote it.
    pub latlab_version: String,
    /// How the run was set up.
    pub setup: RunSetup,
    /// Probes sent after the warm-up.
    pub sent: u64,
    /// Distinct responses to them.
    pub received: u64,
    /// `sent - received`.
    pub lost: u64,
    /// Probes that fell due but were never sent, because the sender could not keep up with the
    /// offered rate (not counted as sent or lost).
    #[serde(default)]
    pub unsent: u64,
    /// Probes the port could not send to the target (counted as lost), by cause (the names
    /// `echo --json` uses: `port_zero`, `unreachable`, …); empty when every probe left.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub send_failed: BTreeMap<String, u64>,
    /// Messages of the traffic model smaller than the probe header, sent at the header's size
    /// instead (written only when some were).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub raised: u64,
    /// `lost / sent`.
    pub loss_ratio: f64,
    /// Responses that came after one sent later on the same flow.
    pub reordered: u64,
    /// Extra copies of responses.
    pub duplicated: u64,
    /// Datagrams dropped by cause.
    pub malformed: MalformedCounts,
    /// Warm-up counts.
    pub warmup: WarmupCounts,
    /// The rate asked for, packets per second.
    pub offered_pps: f64,
    /// The rate probes actually left at.
    pub achieved_pps: f64,
    /// `kernel-software` or `user-space`: where the receive stamps came from.
    pub timestamp_source: String,
    /// When the first probe was due, ns since the Unix epoch.
    pub start_time_unix_ns: u64,
    /// Cut short by Ctrl-C.
    pub stopped_early: bool,
    /// Round-trip latency from the intended send time to arrival.
    pub latency_ns: Summary,
    /// How late the sender was (actual − intended send time).
    pub send_lag_ns: Summary,
    /// Round trip from the actual send time: what a closed-loop tool would report; the gap to
    /// `latency_ns` is the sender's own stalls.
    #[serde(default = "empty_summary")]
    pub latency_from_actual_send_ns: Summary,
    /// Time inside the responder, when it stamped its receive and transmit times.
    pub responder_dwell_ns: Summary,
    /// `shared` when the generator and the responder read one clock (the namespaces of one
    /// host, or `--clock shared`), `separate` otherwise; one-way delays are given only for
    /// `shared`. Absent in results written before latlab reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<String>,
    /// One-way delay out, from the intended send time to the responder's receive stamp
    /// (shared clock, stamping responder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_ns: Option<Summary>,
    /// One-way delay back, from the responder's transmit stamp to arrival.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_ns: Option<Summary>,
    /// Stamped responses whose stamps cannot come from one clock (the responder received
    /// before the probe was due, or sent after it arrived back): with a shared clock, a sign
    /// that it is not.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub one_way_impossible: u64,
    /// The host that ran the generator (its hostname), when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The run id its probes carried, when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<u32>,
    /// For a result of `latlab merge`: the runs it was merged from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<MergedRun>,
    /// Where `latlab gen`'s loop ran and why (the core plan), when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<crate::cores::Placement>,
    /// The `--assert` gates decided on this run ([`crate::gate`]); absent when none were
    /// given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assertions: Vec<crate::gate::AssertionVerdict>,
    /// The run's lost probes by cause, from the kernel's counters ([`crate::losses`]);
    /// absent where the run did not count them (AF_XDP, older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_by_cause: Option<crate::losses::LostByCause>,
    /// A `--protocol` run's own counts (answered, wrong id, outcome codes…); absent for
    /// latlab's own probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<latlab_probe::protocol::ProtocolSummary>,
    /// The host's stalls of the generator's loops over the run ([`latlab_stats::stalls`]):
    /// a tail no longer than the longest may be the host's; absent in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_stalls: Option<latlab_stats::stalls::HostStalls>,
}

/// One run a merged result was made of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedRun {
    /// The folder it was read from, as given to `latlab merge`.
    pub dir: String,
    /// Its host, when recorded.
    pub host: Option<String>,
    /// Its run id, when recorded.
    pub run_id: Option<u32>,
    /// When its first probe was due, ns since the Unix epoch.
    pub start_time_unix_ns: u64,
    /// Probes it sent after the warm-up.
    pub sent: u64,
}

/// This host's name, as the kernel has it.
pub fn hostname() -> Option<String> {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl RunSummary {
    /// The summary of one generator run.
    pub fn new(setup: RunSetup, offered_pps: f64, result: &GeneratorResult) -> RunSummary {
        let r = &result.report;
        RunSummary {
            latlab_version: env!("CARGO_PKG_VERSION").to_string(),
            setup,
            sent: r.sent,
            received: r.received,
            lost: r.lost,
            unsent: r.unsent,
            send_failed: result
                .send_failed
                .iter()
                .filter(|&(_, n)| n > 0)
                .map(|(failure, n)| (failure.name().to_string(), n))
                .collect(),
            raised: r.raised,
            loss_ratio: if r.sent == 0 {
                0.0
            } else {
                r.lost as f64 / r.sent as f64
            },
            reordered: r.reordered,
            duplicated: r.duplicated,
            malformed: MalformedCounts {
                not_a_probe: r.not_a_probe,
                foreign_run: r.foreign_run,
                unknown_probe: r.unknown_probe,
                bad_time: r.bad_time,
            },
            warmup: WarmupCounts {
                sent: r.warmup_sent,
                received: r.warmup_received,
            },
            offered_pps,
            achieved_pps: result.achieved_pps(),
            timestamp_source: result.timestamp_source.name().to_string(),
            start_time_unix_ns: result.start_ns,
            stopped_early: result.stopped_early,
            latency_ns: Summary::from_histogram(&r.latency),
            send_lag_ns: Summary::from_histogram(&r.send_lag),
            latency_from_actual_send_ns: Summary::from_histogram(&r.latency_from_actual),
            responder_dwell_ns: Summary::from_histogram(&r.responder_dwell),
            clock: None,
            forward_ns: None,
            return_ns: None,
            one_way_impossible: 0,
            host: hostname(),
            run_id: None,
            merged_from: Vec::new(),
            placement: None,
            assertions: Vec::new(),
            lost_by_cause: None,
            host_stalls: Some(result.host_stalls.report()),
            protocol: result
                .protocol
                .as_ref()
                .map(latlab_probe::protocol::ProtocolSummary::new),
        }
    }

    /// The summary with its clock said, and the one-way delays of `result` when the clock is
    /// `shared` and the responder stamped.
    pub fn with_clock(mut self, shared: bool, result: &GeneratorResult) -> RunSummary {
        let r = &result.report;
        self.clock = Some(if shared { "shared" } else { "separate" }.to_string());
        if shared && !r.forward.is_empty() {
            self.forward_ns = Some(Summary::from_histogram(&r.forward));
            self.return_ns = Some(Summary::from_histogram(&r.reverse));
        }
        self.one_way_impossible = r.one_way_impossible;
        self
    }

    /// Reads a `summary.json`.
    pub fn load(path: &Path) -> io::Result<RunSummary> {
        let text = fs::read_to_string(path)?;
        serde_json::from_str(&text).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        })
    }
}

fn empty_summary() -> Summary {
    Summary::from_histogram(&LatencyHistogram::new())
}

/// A results folder being filled under a temporary name; [`commit`](ResultsDir::commit)
/// renames it into place. Dropped without a commit, it is removed. The folder is locked while
/// the `ResultsDir` lives.
#[derive(Debug)]
pub struct ResultsDir {
    tmp: PathBuf,
    dest: PathBuf,
    committed: bool,
    /// The folder takes the place of one that exists (a run that continues it).
    replaces: bool,
    /// The lock on the folder (`None` on a file system without flock); let go of after the
    /// drop has removed an uncommitted folder.
    _lock: Option<OwnerLock>,
}

impl ResultsDir {
    /// Starts a results folder that will take the place of `dest`, which exists (a run that
    /// continues an earlier one's folder): the earlier folder stays as it is until the new one
    /// is whole, then [`ResultsDir::commit`] swaps them.
    pub fn replacing(dest: &Path) -> io::Result<ResultsDir> {
        let mut dir = ResultsDir::start(dest)?;
        dir.replaces = true;
        Ok(dir)
    }

    /// Starts a results folder that will end up at `dest`, which must not exist yet.
    pub fn create(dest: &Path) -> io::Result<ResultsDir> {
        if dest.exists() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "results folder {} exists already: pick another --out",
                    dest.display()
                ),
            ));
        }
        ResultsDir::start(dest)
    }

    fn start(dest: &Path) -> io::Result<ResultsDir> {
        if let Some(parent) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", parent.display())))?;
        }
        let tmp = temp_name(dest);
        if tmp.exists() {
            // Left by a run of the same PID (in another PID namespace, or long ago): removed
            // unless its writer is alive.
            if let Ok(None) = OwnerLock::open(&tmp) {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "{} is being written by another latlab run: pick another --out",
                        tmp.display()
                    ),
                ));
            }
            let _ = fs::remove_dir_all(&tmp);
        }
        // Named as the user gave it: the partial folder beside it is latlab's own business.
        fs::create_dir_all(&tmp).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("{}: cannot make the results folder: {e}", dest.display()),
            )
        })?;
        Ok(ResultsDir {
            _lock: OwnerLock::open(&tmp).ok().flatten(),
            tmp,
            dest: dest.to_path_buf(),
            committed: false,
            replaces: false,
        })
    }

    /// Where a file of the folder is written now.
    pub fn path(&self, name: &str) -> PathBuf {
        self.tmp.join(name)
    }

    /// Writes one file of the folder; an error names the file (as it will be named once the
    /// folder is in place).
    pub fn write(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let path = self.path(name);
        let result = (|| {
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)?;
            }
            let mut f = BufWriter::new(fs::File::create(&path)?);
            f.write_all(bytes)?;
            f.into_inner().map_err(|e| e.into_error())?.sync_all()
        })();
        result.map_err(|e| naming(&self.dest.join(name), e))
    }

    /// Moves the finished folder into place and returns its path.
    pub fn commit(mut self) -> io::Result<PathBuf> {
        let named =
            |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", self.dest.display()));
        // The earlier folder steps aside (it is put back if the new one cannot go in), and
        // goes once the new one is in place.
        let old = self.replaces.then(|| {
            let mut name = self.tmp.clone().into_os_string();
            name.push(".old");
            PathBuf::from(name)
        });
        if let Some(old) = &old {
            fs::rename(&self.dest, old).map_err(named)?;
        }
        if let Err(e) = fs::rename(&self.tmp, &self.dest) {
            if let Some(old) = &old {
                let _ = fs::rename(old, &self.dest);
            }
            return Err(named(e));
        }
        self.committed = true;
        if let Some(old) = &old {
            let _ = fs::remove_dir_all(old);
        }
        Ok(self.dest.clone())
    }
}

impl Drop for ResultsDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.tmp);
        }
    }
}

/// The file of a run folder that holds each of its whole-run histograms exactly, one tagged
/// interval each ([`RunHistograms`]): what `latlab merge` adds up.
pub const HISTOGRAMS: &str = "histograms.hlog";

/// Every whole-run histogram of a run, as [`HISTOGRAMS`] holds them.
#[derive(Clone, Debug, Default)]
pub struct RunHistograms {
    /// Round trip from the intended send time.
    pub latency: LatencyHistogram,
    /// Actual − intended send time.
    pub send_lag: LatencyHistogram,
    /// Round trip from the actual send time.
    pub latency_from_actual: LatencyHistogram,
    /// The reflector's transmit − receive stamps.
    pub responder_dwell: LatencyHistogram,
    /// One way out (empty unless the responder stamped).
    pub forward: LatencyHistogram,
    /// One way back.
    pub reverse: LatencyHistogram,
}

/// `TAGS`, `of`, `get_mut` and `iter` of [`RunHistograms`] from one list of (tag, field), so a
/// tag and its histogram are named once (the generator's report names its fields the same).
macro_rules! tagged_histograms {
    ($(($tag:literal, $field:ident)),* $(,)?) => {
        impl RunHistograms {
            /// The tags of [`HISTOGRAMS`], in the order they are written.
            pub const TAGS: [&'static str; 6] = [$($tag),*];

            /// The histograms of a generator run.
            pub fn of(result: &GeneratorResult) -> RunHistograms {
                RunHistograms {
                    $($field: result.report.$field.clone(),)*
                }
            }

            /// The histogram tagged `tag` (one of [`RunHistograms::TAGS`]).
            pub fn get_mut(&mut self, tag: &str) -> Option<&mut LatencyHistogram> {
                match tag {
                    $($tag => Some(&mut self.$field),)*
                    _ => None,
                }
            }

            /// Each tag with its histogram.
            pub fn iter(&self) -> [(&'static str, &LatencyHistogram); 6] {
                [$(($tag, &self.$field)),*]
            }
        }
    };
}

tagged_histograms!(
    ("latency", latency),
    ("send_lag", send_lag),
    ("latency_from_actual", latency_from_actual),
    ("responder_dwell", responder_dwell),
    ("forward", forward),
    ("return", reverse),
);

impl RunHistograms {
    /// Reads a run's [`HISTOGRAMS`] file; an error says what is wrong with it (the caller
    /// names the file).
    pub fn read(path: &Path) -> io::Result<RunHistograms> {
        let mut histograms = RunHistograms::default();
        let file = fs::File::open(path)?;
        for interval in latlab_stats::hlog::read_hlog(io::BufReader::new(file))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?
        {
            let tag = interval.tag.as_deref().unwrap_or("");
            let slot = histograms.get_mut(tag).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidData, format!("unknown tag {tag:?}"))
            })?;
            slot.merge(&interval.histogram)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        }
        Ok(histograms)
    }
}

/// The text of [`HISTOGRAMS`]: one interval per histogram, tagged with its name, covering the
/// run from `start_ns`.
pub fn histograms_bytes(h: &RunHistograms, start_ns: u64, label: &str) -> io::Result<Vec<u8>> {
    let mut w = HlogWriter::new(
        Vec::new(),
        start_ns as f64 / 1e9,
        &format!(
            "latlab {} {label}: whole-run histograms in ns, one per tag",
            env!("CARGO_PKG_VERSION")
        ),
    )
    .map_err(io::Error::other)?;
    for (tag, histogram) in h.iter() {
        w.write_interval(0.0, 0.0, histogram, Some(tag))
            .map_err(io::Error::other)?;
    }
    Ok(w.into_inner())
}

/// Writes one run's files into `dir` under `prefix` (`""` or `"rate-1000pps/"`):
/// `summary.json`, `latency.hlog`, `ccdf.csv`, [`HISTOGRAMS`] and `ccdf.svg`.
pub fn write_run(
    dir: &ResultsDir,
    prefix: &str,
    summary: &RunSummary,
    result: &GeneratorResult,
) -> io::Result<()> {
    dir.write(
        &format!("{prefix}summary.json"),
        summary_json(summary).as_bytes(),
    )?;
    dir.write(
        &format!("{prefix}latency.hlog"),
        &hlog_bytes(result, &summary.setup.label)?,
    )?;
    dir.write(
        &format!("{prefix}ccdf.csv"),
        &ccdf_csv(&result.report.latency)?,
    )?;
    dir.write(
        &format!("{prefix}{HISTOGRAMS}"),
        &histograms_bytes(
            &RunHistograms::of(result),
            result.start_ns,
            &summary.setup.label,
        )?,
    )?;
    let points = latlab_stats::ccdf(&result.report.latency);
    let mut curves = vec![(summary.setup.label.clone(), points)];
    if summary.forward_ns.is_some() {
        for (delay, name) in [(Delay::Forward, "forward"), (Delay::Return, "return")] {
            let label = &summary.setup.label;
            dir.write(
                &format!("{prefix}{name}.hlog"),
                &hlog_of(result, label, delay)?,
            )?;
            dir.write(
                &format!("{prefix}{name}_ccdf.csv"),
                &ccdf_csv(delay.of(result))?,
            )?;
            curves.push((
                delay.title().to_string(),
                latlab_stats::ccdf(delay.of(result)),
            ));
        }
    }
    // Each line says what it is when one-way delays are drawn beside the round trips (the
    // title names the run).
    let axis = if curves.len() > 1 {
        curves[0].0 = "round trip".to_string();
        crate::plot::ONE_WAY_TOO_AXIS
    } else {
        crate::plot::ROUND_TRIP_AXIS
    };
    let svg = crate::plot::ccdf_svg_marked(
        &format!("Latency CCDF, {}", summary.setup.label),
        axis,
        &curves,
        &stall_marks(std::slice::from_ref(summary)),
    )
    .map_err(io::Error::other)?;
    dir.write(&format!("{prefix}ccdf.svg"), svg.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_atomic_write_leaves_no_partial_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        write_atomic(&path, b"{}").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{}");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
        // A folder that does not exist: an error naming the path, and nothing left behind.
        let bad = dir.path().join("missing").join("a.json");
        assert!(write_atomic(&bad, b"{}")
            .unwrap_err()
            .to_string()
            .contains("missing"));
    }

    #[test]
    fn a_new_file_is_written_once_and_never_over_another() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("claim.json");
        assert!(write_new(&path, b"first").unwrap());
        assert!(!write_new(&path, b"second").unwrap());
        assert_eq!(fs::read(&path).unwrap(), b"first");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no partial file left: {names:?}");
        let bad = dir.path().join("missing").join("claim.json");
        assert!(write_new(&bad, b"x")
            .unwrap_err()
            .to_string()
            .contains("missing"));
    }

    /// Points `link` at `/dev/full`, where every write fails with `ENOSPC`: a full disk.
    fn full_disk_at(link: &Path) {
        std::os::unix::fs::symlink("/dev/full", link).unwrap();
    }

    #[test]
    fn a_full_disk_names_the_file_it_could_not_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.json");
        full_disk_at(&temp_name(&path));
        let e = write_atomic(&path, b"{}").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::StorageFull);
        assert!(
            e.to_string()
                .starts_with(&format!("{}: No space left on device", path.display())),
            "{e}"
        );
        assert!(!path.exists());

        let dest = dir.path().join("run");
        let results = ResultsDir::create(&dest).unwrap();
        full_disk_at(&results.path("ccdf.csv"));
        let e = results.write("ccdf.csv", b"1,2\n").unwrap_err();
        assert!(
            e.to_string().starts_with(&format!(
                "{}: No space left on device",
                dest.join("ccdf.csv").display()
            )),
            "{e}"
        );
    }

    #[test]
    fn an_uncommitted_results_folder_disappears() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("run");
        {
            let r = ResultsDir::create(&dest).unwrap();
            r.write("summary.json", b"{}").unwrap();
        }
        assert!(!dest.exists());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        let r = ResultsDir::create(&dest).unwrap();
        r.write("x/summary.json", b"{}").unwrap();
        assert_eq!(r.commit().unwrap(), dest);
        assert!(dest.join("x/summary.json").exists());
        assert!(
            ResultsDir::create(&dest).is_err(),
            "an existing folder is never overwritten"
        );
    }

    #[test]
    fn a_folder_that_continues_another_takes_its_place_only_when_whole() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("run");
        let first = ResultsDir::create(&dest).unwrap();
        first.write("a.json", b"1").unwrap();
        first.commit().unwrap();
        {
            // Interrupted before it was whole: the earlier folder is as it was.
            let again = ResultsDir::replacing(&dest).unwrap();
            again.write("b.json", b"2").unwrap();
        }
        assert!(dest.join("a.json").exists() && !dest.join("b.json").exists());
        let again = ResultsDir::replacing(&dest).unwrap();
        again.write("b.json", b"2").unwrap();
        assert!(
            dest.join("a.json").exists(),
            "still the earlier one until the commit"
        );
        assert_eq!(again.commit().unwrap(), dest);
        assert!(dest.join("b.json").exists() && !dest.join("a.json").exists());
        // Nothing else is left beside it.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_results_folder_being_filled_is_not_taken_for_a_leftover() {
        let dir = tempfile::tempdir().unwrap();
        let filling = ResultsDir::create(&dir.path().join("run")).unwrap();
        filling.write("summary.json", b"{}").unwrap();
        let removed = crate::clean::remove_partials(dir.path()).unwrap();
        assert!(removed.partials.is_empty(), "{:?}", removed.partials);
        assert!(filling.path("summary.json").exists());
        drop(filling);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
