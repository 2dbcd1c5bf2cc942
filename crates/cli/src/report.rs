//! `latlab report DIR`: the table (and, with `--plot`, the CCDF plot) of a results folder,
//! drawn again from its data by latlab-lab.

use std::path::PathBuf;

use anyhow::{Context, Result};
use latlab_lab::command::read_ccdf_csv;
use latlab_lab::results::{self, RunSummary};

#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {
    /// A results folder written by gen --out or demo.
    dir: PathBuf,
    /// Draw the CCDF of every run in it again, into this SVG file.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

pub(crate) fn run(a: ReportArgs) -> Result<()> {
    let path = a.dir.join("summary.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}", path.display()))?;
    // A demo folder holds a list of runs, each in a rate-…/ folder; a gen folder holds one.
    let (runs, dirs): (Vec<RunSummary>, Vec<PathBuf>) = match value.get("runs") {
        Some(runs) => {
            let runs: Vec<RunSummary> = serde_json::from_value(runs.clone())
                .with_context(|| format!("{}: runs", path.display()))?;
            let dirs = runs
                .iter()
                .map(|r| match &r.setup.dir {
                    Some(d) => a.dir.join(d),
                    None => a.dir.join(format!("rate-{}pps", r.offered_pps as u64)),
                })
                .collect();
            (runs, dirs)
        }
        None => (vec![RunSummary::load(&path)?], vec![a.dir.clone()]),
    };
    print!(
        "{}",
        latlab_lab::table::render(&runs.iter().collect::<Vec<_>>())
    );
    if let Some(plot) = a.plot {
        let mut series = Vec::new();
        for (run, dir) in runs.iter().zip(&dirs) {
            let csv = dir.join("ccdf.csv");
            let file = std::fs::File::open(&csv).with_context(|| format!("{}", csv.display()))?;
            let points = read_ccdf_csv(std::io::BufReader::new(file))
                .with_context(|| format!("{}", csv.display()))?;
            series.push((run.setup.label.clone(), points));
        }
        let svg =
            latlab_lab::plot::ccdf_svg("latency CCDF", &series).map_err(anyhow::Error::msg)?;
        results::write_atomic(&plot, svg.as_bytes())?;
        println!("plot: {}", plot.display());
    }
    Ok(())
}
