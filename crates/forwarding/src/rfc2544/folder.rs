//! The results folder of an `rfc2544` run: `rfc2544.json` (with the options that shape every
//! point, which `--resume` checks), `rfc2544.csv`, `report.md` and the figures, written
//! whole; the sizes an earlier run finished; and the redrawing `latlab report` asks for.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use latlab_bench::throughput::PDR_LOSS;
use latlab_lab::gate::AssertionVerdict;
use serde::{Deserialize, Serialize};

use super::{
    report, CommandError, DutReport, Rfc2544Options, Rfc2544Report, Saturation, SizeResult,
};

/// The results file of a run folder.
pub(super) const RESULTS: &str = "rfc2544.json";

/// `rfc2544.json`: what a run measured, the options that shaped it and its gates' verdicts,
/// written and read back as this one type. Every key but `sizes` may be missing from a folder an older latlab wrote, so each is an
/// `Option` that reads as `null` when absent.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Rfc2544File {
    /// Every `--assert` decided on every size (`latlab check`'s verdicts, as `summary.json`
    /// keeps a generator run's); absent when none was asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assertions: Vec<AssertionVerdict>,
    /// `--b2b-repeats`.
    #[serde(default)]
    pub back_to_back_repeats: Option<u32>,
    /// `--dut`.
    #[serde(default)]
    pub dut: Option<String>,
    /// The DUT's own report (`latlab fwd`'s, `latlab emu`'s or testpmd's), when it made one.
    #[serde(default)]
    pub dut_report: Option<DutReport>,
    /// `--fwd-batch`.
    #[serde(default)]
    pub fwd_batch: Option<usize>,
    /// `--fwd-poll` (or the DUT's default).
    #[serde(default)]
    pub fwd_poll: Option<String>,
    /// `--iface-a` of an external DUT.
    #[serde(default)]
    pub iface_a: Option<String>,
    /// `--iface-b` of an external DUT.
    #[serde(default)]
    pub iface_b: Option<String>,
    /// `--latency-trials`.
    #[serde(default)]
    pub latency_trials: Option<u32>,
    /// The latlab that wrote it.
    #[serde(default)]
    pub latlab_version: Option<String>,
    /// Whether the loss sweep ran (`--no-loss-sweep`).
    #[serde(default)]
    pub loss_sweep: Option<bool>,
    /// `--max-trials`.
    #[serde(default)]
    pub max_trials: Option<usize>,
    /// `--mlr-duration-sum`, seconds (with MLRsearch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlr_duration_sum_s: Option<f64>,
    /// `--mlr-exceed-ratio` (with MLRsearch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlr_exceed_ratio: Option<f64>,
    /// `--mlr-max-trials` (with MLRsearch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlr_max_trials: Option<usize>,
    /// `--mlr-width` (with MLRsearch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlr_width: Option<f64>,
    /// The loss the partial drop rate allows.
    #[serde(default)]
    pub pdr_loss: Option<f64>,
    /// Where the lab's receive work ran.
    #[serde(default)]
    pub receive_work: Option<String>,
    /// `--resolution`, a fraction of the source's maximum.
    #[serde(default)]
    pub resolution: Option<f64>,
    /// The saturation trial (Table II); a value an older latlab wrote in another shape reads
    /// as none, as it always has.
    #[serde(default, deserialize_with = "lenient")]
    pub saturation: Option<Saturation>,
    /// `--search`: `binary`, `mlr` or `both` (absent: binary, the only search before).
    #[serde(default)]
    pub search: Option<String>,
    /// Every frame size, every trial.
    pub sizes: Vec<SizeResult>,
    /// `--source`.
    #[serde(default)]
    pub source_io: Option<String>,
    /// The lab it ran in.
    #[serde(default)]
    pub topology: Option<String>,
    /// `--trial`, seconds.
    #[serde(default)]
    pub trial_s: Option<f64>,
}

/// `T` when the value reads as one, else `None`.
fn lenient<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).unwrap_or(None))
}

impl Rfc2544File {
    /// The file of a run measured with `options`.
    pub(super) fn new(
        options: &Rfc2544Options,
        report: &Rfc2544Report,
        dut_report: Option<DutReport>,
        topology: &str,
    ) -> Rfc2544File {
        let mlr = options.search.mlr();
        Rfc2544File {
            assertions: super::gates::decide(&options.assertions, &report.sizes),
            back_to_back_repeats: Some(options.b2b_repeats),
            dut: Some(options.dut.name().to_string()),
            dut_report,
            fwd_batch: Some(options.fwd_batch),
            fwd_poll: Some(options.poll().to_string()),
            iface_a: options.iface_a.clone(),
            iface_b: options.iface_b.clone(),
            latency_trials: Some(options.latency_trials),
            latlab_version: Some(env!("CARGO_PKG_VERSION").to_string()),
            loss_sweep: Some(options.loss_sweep),
            max_trials: Some(options.max_trials),
            mlr_duration_sum_s: mlr.then_some(options.mlr.duration_sum.as_secs_f64()),
            mlr_exceed_ratio: mlr.then_some(options.mlr.exceed_ratio),
            mlr_max_trials: mlr.then_some(options.mlr.max_trials),
            mlr_width: mlr.then_some(options.mlr.width),
            pdr_loss: Some(PDR_LOSS),
            receive_work: Some(report.rps.clone()),
            resolution: Some(options.resolution),
            saturation: report.saturation.clone(),
            search: Some(options.search.name().to_string()),
            sizes: report.sizes.clone(),
            source_io: Some(options.source.name().to_string()),
            topology: Some(topology.to_string()),
            trial_s: Some(options.trial.as_secs_f64()),
        }
    }

    /// Reads `path`; errors name it.
    pub fn read(path: &Path) -> Result<Rfc2544File, String> {
        let named = |e: String| format!("{}: {e}", path.display());
        let text = std::fs::read_to_string(path).map_err(|e| named(e.to_string()))?;
        serde_json::from_str(&text).map_err(|e| named(e.to_string()))
    }

    /// The file's text, pretty-printed with the keys of every object in alphabetical order (as
    /// the file has always been written), with a final newline.
    pub fn text(&self) -> String {
        let value = serde_json::to_value(self).expect("an rfc2544 file serialises");
        format!("{value:#}\n")
    }

    /// How the run was measured, for its `report.md`.
    fn how_measured(&self) -> String {
        // Numbers as JSON writes them (`2.0`, `null` when absent), as the report always had.
        fn shown<T: Serialize>(v: &Option<T>) -> String {
            serde_json::to_value(v).map_or_else(|_| "null".into(), |v| v.to_string())
        }
        let text = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".into());
        format!(
            "DUT `{}` in {}; its receive work: {}; source over {}; trials of {} s, search resolution {}% of the source's maximum, at most {} trials a search; {} back-to-back searches and {} latency trials per load. Every trial is in `rfc2544.json`.",
            text(&self.dut),
            text(&self.topology),
            text(&self.receive_work),
            text(&self.source_io),
            shown(&self.trial_s),
            self.resolution.map_or("?".into(), |r| format!("{:.1}", r * 100.0)),
            shown(&self.max_trials),
            shown(&self.back_to_back_repeats),
            shown(&self.latency_trials),
        )
    }
}

/// Draws `report.md` and the figures of the rfc2544 folder `dir` again from its
/// `rfc2544.json`; returns the report's path.
pub fn redraw(dir: &Path) -> Result<PathBuf, String> {
    let path = dir.join(RESULTS);
    let named = |e: String| format!("{}: {e}", path.display());
    let file = Rfc2544File::read(&path)?;
    let report = Rfc2544Report {
        out: dir.to_path_buf(),
        dut: file.dut.as_deref().unwrap_or("").parse().map_err(named)?,
        rps: file.receive_work.clone().unwrap_or_default(),
        sizes: file.sizes.clone(),
        saturation: file.saturation.clone(),
    };
    let figures = report::figures(&report).map_err(named)?;
    for (name, svg) in &figures {
        latlab_lab::results::write_atomic(&dir.join(name), svg.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    let names: Vec<String> = figures.into_iter().map(|f| f.0).collect();
    let md = report::markdown(&report, &file.how_measured(), &names, &file.assertions);
    let out = dir.join("report.md");
    latlab_lab::results::write_atomic(&out, md.as_bytes()).map_err(|e| e.to_string())?;
    Ok(out)
}

/// Whether `dir` is the results folder of an rfc2544 run.
pub fn is_folder(dir: &Path) -> bool {
    dir.join(RESULTS).is_file()
}

/// The options that shape every point, as `rfc2544.json` keeps them, with the flag each
/// comes from: `--resume` refuses a folder measured with other values.
pub(super) fn parameters(
    options: &Rfc2544Options,
) -> Vec<(&'static str, &'static str, serde_json::Value)> {
    use serde_json::json;
    let mut parameters = vec![
        ("dut", "--dut", json!(options.dut.name())),
        ("source_io", "--source", json!(options.source.name())),
        ("trial_s", "--trial", json!(options.trial.as_secs_f64())),
        ("resolution", "--resolution", json!(options.resolution)),
        ("max_trials", "--max-trials", json!(options.max_trials)),
        ("loss_sweep", "--no-loss-sweep", json!(options.loss_sweep)),
        (
            "back_to_back_repeats",
            "--b2b-repeats",
            json!(options.b2b_repeats),
        ),
        (
            "latency_trials",
            "--latency-trials",
            json!(options.latency_trials),
        ),
        ("fwd_batch", "--fwd-batch", json!(options.fwd_batch)),
        ("fwd_poll", "--fwd-poll", json!(options.poll().to_string())),
        ("iface_a", "--iface-a", json!(options.iface_a)),
        ("iface_b", "--iface-b", json!(options.iface_b)),
        ("search", "--search", json!(options.search.name())),
    ];
    if options.search.mlr() {
        let mlr = &options.mlr;
        parameters.extend([
            (
                "mlr_duration_sum_s",
                "--mlr-duration-sum",
                json!(mlr.duration_sum.as_secs_f64()),
            ),
            (
                "mlr_exceed_ratio",
                "--mlr-exceed-ratio",
                json!(mlr.exceed_ratio),
            ),
            ("mlr_width", "--mlr-width", json!(mlr.width)),
            ("mlr_max_trials", "--mlr-max-trials", json!(mlr.max_trials)),
        ]);
    }
    parameters
}

/// The sizes the run in `options.out` finished (no error), after checking it was measured
/// with the same options; the error names the flag that differs. For a folder written before
/// rfc2544 wrote points: its `rfc2544.json`.
pub(super) fn earlier_sizes(options: &Rfc2544Options) -> Result<Vec<SizeResult>, CommandError> {
    let path = options.out.join(RESULTS);
    let file =
        Rfc2544File::read(&path).map_err(|why| CommandError::Usage(format!("--resume: {why}")))?;
    check_parameters(options, &file)?;
    Ok(file
        .sizes
        .into_iter()
        .filter(|s| s.error.is_none())
        .collect())
}

/// Refuses to continue a run that `file` says was measured with options other than
/// `options`, naming the first flag that differs.
pub(super) fn check_parameters(
    options: &Rfc2544Options,
    file: &Rfc2544File,
) -> Result<(), CommandError> {
    let json = serde_json::to_value(file).map_err(std::io::Error::other)?;
    for (key, flag, value) in parameters(options) {
        // Before MLRsearch, every run searched by bisection.
        let measured = match &json[key] {
            serde_json::Value::Null if key == "search" => serde_json::json!("binary"),
            v => v.clone(),
        };
        if measured != value {
            return Err(CommandError::Usage(format!(
                "--resume: {} was measured with {flag} {} ({key}), not {value}",
                options.out.display(),
                measured
            )));
        }
    }
    Ok(())
}

/// Writes `rfc2544.json`, `rfc2544.csv`, the figures and `report.md` of `file` into the
/// folder `dir`, each whole; returns the `report.md`.
pub(super) fn write_files(dir: &Path, file: &Rfc2544File) -> Result<PathBuf, String> {
    let report = Rfc2544Report {
        out: dir.to_path_buf(),
        dut: file.dut.as_deref().unwrap_or("").parse()?,
        rps: file.receive_work.clone().unwrap_or_default(),
        sizes: file.sizes.clone(),
        saturation: file.saturation.clone(),
    };
    let write = |name: &str, bytes: &[u8]| {
        latlab_lab::results::write_atomic(&dir.join(name), bytes).map_err(|e| e.to_string())
    };
    write(RESULTS, file.text().as_bytes())?;
    let mut csv = String::from(
        "frame_size,source_max_pps,dut_kept_up,ndr_pps,pdr_pps,converged,loss_at_100_percent,\
         back_to_back_frames,typical_latency_ns_at_ndr,worst_case_latency_ns_at_ndr,\
         pdv_ns_at_ndr,trials,error\n",
    );
    for s in &report.sizes {
        let opt = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
        let at_ndr = s.latency.iter().find(|l| l.percent_of_ndr == 100);
        let _ = writeln!(
            csv,
            "{},{:.0},{},{},{},{},{},{},{},{},{},{},{}",
            s.frame_size,
            s.source_max_pps,
            s.dut_kept_up,
            opt(s.ndr_pps),
            opt(s.pdr_pps),
            s.converged,
            s.loss
                .first()
                .map_or(String::new(), |l| format!("{:.4}", l.1)),
            s.back_to_back_mean
                .map_or(String::new(), |m| format!("{m:.1}")),
            opt(at_ndr.and_then(|l| l.summary.typical_ns)),
            opt(at_ndr.and_then(|l| l.summary.worst_case_ns)),
            opt(at_ndr.and_then(|l| l.summary.pdv_ns)),
            s.trials.len(),
            s.error.as_deref().unwrap_or("").replace(',', ";"),
        );
    }
    write("rfc2544.csv", csv.as_bytes())?;
    let figures = report::figures(&report)?;
    for (name, svg) in &figures {
        write(name, svg.as_bytes())?;
    }
    let names: Vec<String> = figures.into_iter().map(|f| f.0).collect();
    write(
        "report.md",
        report::markdown(&report, &file.how_measured(), &names, &file.assertions).as_bytes(),
    )?;
    Ok(dir.join("report.md"))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::rfc2544::Dut;

    pub(in crate::rfc2544) fn measured() -> (Rfc2544Options, Rfc2544Report) {
        let mut options = Rfc2544Options::new(Dut::FWD_XDP);
        options.trial = std::time::Duration::from_secs(1);
        options.fwd_batch = 16;
        let report = Rfc2544Report {
            out: "/nowhere".into(),
            dut: Dut::FWD_XDP,
            rps: "RPS on CPU 1".into(),
            sizes: vec![SizeResult {
                frame_size: 64,
                source_max_pps: 250_000.5,
                ndr_pps: Some(200_000),
                error: None,
                ..SizeResult::default()
            }],
            saturation: None,
        };
        (options, report)
    }

    #[test]
    fn the_typed_file_is_written_as_the_file_always_was_and_reads_back_the_same() {
        let (options, report) = measured();
        let dut_report = Some(serde_json::json!({"cycles": {"rx": 120}}));
        let typed = dut_report.clone().map(DutReport::from_value);
        let file = Rfc2544File::new(&options, &report, typed, "namespaces (test)");
        // What write_results built with json! before the file had a type: the same bytes.
        let mut json = serde_json::json!({
            "latlab_version": env!("CARGO_PKG_VERSION"),
            "topology": "namespaces (test)",
            "receive_work": report.rps,
            "pdr_loss": PDR_LOSS,
            "sizes": report.sizes,
            "dut_report": dut_report,
            "saturation": report.saturation,
        });
        for (key, _, value) in parameters(&options) {
            json[key] = value;
        }
        assert_eq!(file.text(), format!("{json:#}\n"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RESULTS);
        std::fs::write(&path, file.text()).unwrap();
        let again = Rfc2544File::read(&path).unwrap();
        assert_eq!(again.text(), file.text());
        assert_eq!(
            file.how_measured(),
            "DUT `fwd-xdp` in namespaces (test); its receive work: RPS on CPU 1; source over packet; \
             trials of 1.0 s, search resolution 1.0% of the source's maximum, at most 16 trials a \
             search; 1 back-to-back searches and 1 latency trials per load. Every trial is in \
             `rfc2544.json`."
        );
    }

    #[test]
    fn a_file_of_an_older_latlab_reads_with_what_it_has() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RESULTS);
        // No options recorded, and a saturation in a shape this latlab does not know.
        std::fs::write(
            &path,
            r#"{"dut": "kernel", "sizes": [], "saturation": {"pps": 1}}"#,
        )
        .unwrap();
        let file = Rfc2544File::read(&path).unwrap();
        assert_eq!(file.dut.as_deref(), Some("kernel"));
        assert!(file.saturation.is_none() && file.trial_s.is_none());
        assert!(file.how_measured().contains("trials of null s"));
        std::fs::write(&path, r#"{"dut": "kernel"}"#).unwrap();
        let err = Rfc2544File::read(&path).unwrap_err();
        assert!(
            err.contains("rfc2544.json") && err.contains("sizes"),
            "{err}"
        );
    }
}
