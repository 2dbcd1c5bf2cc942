//! `latlab report DIR`: a results folder drawn again from its data by latlab-lab: a gen or
//! demo folder's table (and, with `--plot`, its CCDF plot), a study's tables, figures and
//! report.md.

use std::path::PathBuf;

use anyhow::Result;
use latlab_study::report::{self, Redrawn, ReportOptions};

#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {
    /// A results folder written by gen --out, demo, rfc2544 or a study.
    dir: PathBuf,
    /// Draw the CCDF of every run in it again, into this SVG file (gen and demo folders).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

pub(crate) fn run(a: ReportArgs) -> Result<()> {
    let options = ReportOptions {
        dir: a.dir,
        plot: a.plot,
    };
    match report::run(&options)? {
        Redrawn::Runs { runs, plot } => {
            out!("{}", runs.table());
            if let Some(plot) = plot {
                outln!("plot: {}", plot.display());
            }
        }
        Redrawn::Study {
            report, missing, ..
        } => {
            outln!("report: {}", report.display());
            if !missing.is_empty() {
                let missing: Vec<String> = missing.iter().map(|s| s.to_string()).collect();
                outln!(
                    "missing: shards {} have not finished; their points are not in the report",
                    missing.join(", ")
                );
            }
        }
    }
    Ok(())
}
