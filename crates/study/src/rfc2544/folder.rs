//! The results folder of an `rfc2544` run: `rfc2544.json` (with the options that shape every
//! point, which `--resume` checks), `rfc2544.csv`, `report.md` and the figures, written
//! whole; the sizes an earlier run finished; and the redrawing `latlab report` asks for.

use std::fmt::Write as _;
use std::path::PathBuf;

use latlab_bench::throughput::PDR_LOSS;

use super::{report, CommandError, Rfc2544Options, Rfc2544Report, SizeResult};

/// The results file of a run folder.
pub(super) const RESULTS: &str = "rfc2544.json";

/// How a run was measured, for its `report.md`, from what its `rfc2544.json` records.
pub(super) fn how_measured(json: &serde_json::Value) -> String {
    format!(
        "DUT `{}` in {}; its receive work: {}; source over {}; trials of {} s, search resolution {}% of the source's maximum, at most {} trials a search; {} back-to-back searches and {} latency trials per load. Every trial is in `rfc2544.json`.",
        json["dut"].as_str().unwrap_or("?"),
        json["topology"].as_str().unwrap_or("?"),
        json["receive_work"].as_str().unwrap_or("?"),
        json["source_io"].as_str().unwrap_or("?"),
        json["trial_s"],
        json["resolution"].as_f64().map_or("?".into(), |r| format!("{:.1}", r * 100.0)),
        json["max_trials"],
        json["back_to_back_repeats"],
        json["latency_trials"],
    )
}

/// Draws `report.md` and the figures of the rfc2544 folder `dir` again from its
/// `rfc2544.json`; returns the report's path.
pub fn redraw(dir: &std::path::Path) -> Result<PathBuf, String> {
    let path = dir.join(RESULTS);
    let named = |e: String| format!("{}: {e}", path.display());
    let text = std::fs::read_to_string(&path).map_err(|e| named(e.to_string()))?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| named(e.to_string()))?;
    let report = Rfc2544Report {
        out: dir.to_path_buf(),
        dut: json["dut"].as_str().unwrap_or("").parse().map_err(named)?,
        rps: json["receive_work"].as_str().unwrap_or("").to_string(),
        sizes: serde_json::from_value(json["sizes"].clone()).map_err(|e| named(e.to_string()))?,
        saturation: serde_json::from_value(json["saturation"].clone()).unwrap_or(None),
    };
    let figures = report::figures(&report).map_err(named)?;
    for (name, svg) in &figures {
        latlab_lab::results::write_atomic(&dir.join(name), svg.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    let names: Vec<String> = figures.into_iter().map(|f| f.0).collect();
    let md = report::markdown(&report, &how_measured(&json), &names);
    let out = dir.join("report.md");
    latlab_lab::results::write_atomic(&out, md.as_bytes()).map_err(|e| e.to_string())?;
    Ok(out)
}

/// Whether `dir` is the results folder of an rfc2544 run.
pub fn is_folder(dir: &std::path::Path) -> bool {
    dir.join(RESULTS).is_file()
}

/// The options that shape every point, as `rfc2544.json` keeps them, with the flag each
/// comes from: `--resume` refuses a folder measured with other values.
pub(super) fn parameters(
    options: &Rfc2544Options,
) -> Vec<(&'static str, &'static str, serde_json::Value)> {
    use serde_json::json;
    vec![
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
    ]
}

/// The sizes the run in `options.out` finished (no error), after checking it was measured
/// with the same options; the error names the flag that differs.
pub(super) fn earlier_sizes(options: &Rfc2544Options) -> Result<Vec<SizeResult>, CommandError> {
    let path = options.out.join(RESULTS);
    let bad = |why: String| CommandError::Usage(format!("--resume: {}: {why}", path.display()));
    let text = std::fs::read_to_string(&path).map_err(|e| bad(e.to_string()))?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    for (key, flag, value) in parameters(options) {
        if json[key] != value {
            return Err(CommandError::Usage(format!(
                "--resume: {} was measured with {flag} {} ({key}), not {value}",
                options.out.display(),
                json[key]
            )));
        }
    }
    let sizes: Vec<SizeResult> =
        serde_json::from_value(json["sizes"].clone()).map_err(|e| bad(e.to_string()))?;
    Ok(sizes.into_iter().filter(|s| s.error.is_none()).collect())
}

/// `rfc2544.json` and `rfc2544.csv`, into the results folder, whole.
pub(super) fn write_results(
    options: &Rfc2544Options,
    report: &Rfc2544Report,
    dut_report: Option<serde_json::Value>,
    topology: &str,
) -> Result<(), CommandError> {
    let dir = if options.resume {
        latlab_lab::results::ResultsDir::replacing(&options.out)?
    } else {
        latlab_lab::results::ResultsDir::create(&options.out)?
    };
    let mut json = serde_json::json!({
        "latlab_version": env!("CARGO_PKG_VERSION"),
        "topology": topology,
        "receive_work": report.rps,
        "pdr_loss": PDR_LOSS,
        "sizes": report.sizes,
        "dut_report": dut_report,
        "saturation": report.saturation,
    });
    for (key, _, value) in parameters(options) {
        json[key] = value;
    }
    dir.write("rfc2544.json", format!("{json:#}\n").as_bytes())?;
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
    dir.write("rfc2544.csv", csv.as_bytes())?;
    let figures = report::figures(report).map_err(|e| CommandError::Run {
        engine: "rfc2544 figures",
        source: std::io::Error::other(e),
    })?;
    for (name, svg) in &figures {
        dir.write(name, svg.as_bytes())?;
    }
    let how = how_measured(&json);
    let names: Vec<String> = figures.into_iter().map(|f| f.0).collect();
    dir.write(
        "report.md",
        report::markdown(report, &how, &names).as_bytes(),
    )?;
    dir.commit()?;
    Ok(())
}
