//! `latlab compare BASE NEW`: flags → [`latlab_study::compare`].

use std::path::PathBuf;

use anyhow::Result;
use latlab_lab::gate::regression::Regression;
use latlab_study::compare::CompareOptions;

#[derive(Debug, clap::Args)]
pub(crate) struct CompareArgs {
    /// The folder compared against (gen --out, demo or stream send --out).
    base: PathBuf,
    /// The folder compared (of the same kind and latlab version).
    new: PathBuf,
    /// A regression gate (repeatable): p99<=+10% (NEW's p99 at most 10% above BASE's),
    /// p50<-5%; decided from the change's 95% interval. Exit 3 when one fails, 4 when none
    /// fails but one is inconclusive.
    #[arg(long = "assert", value_name = "EXPR", value_parser = parse_regression)]
    assertions: Vec<Regression>,
    /// Draw both folders' CCDFs on one plot, into this SVG file.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Write every --assert verdict as a JUnit XML test case to this file.
    #[arg(long, value_name = "FILE", requires = "assertions")]
    junit: Option<PathBuf>,
    /// Bootstrap replicates per percentile.
    #[arg(long, default_value_t = 2000, value_name = "N", value_parser = clap::value_parser!(u32).range(100..=1_000_000))]
    draws: u32,
    /// Seed of the bootstrap.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// `--assert`'s value parser for `compare`.
fn parse_regression(text: &str) -> Result<Regression, String> {
    text.parse::<Regression>().map_err(|e| e.reason)
}

pub(crate) fn run(a: CompareArgs) -> Result<()> {
    let plot = a.plot.clone();
    let compared = latlab_study::compare::run(&CompareOptions {
        base: a.base,
        new: a.new,
        assertions: a.assertions,
        plot: a.plot,
        junit: a.junit,
        draws: a.draws,
        seed: a.seed,
    })?;
    for row in &compared.rows {
        outln!("{}", row.line());
    }
    outln!("intervals: 95%, bootstrap over the whole-run histograms");
    if let Some(plot) = plot {
        outln!("plot: {}", plot.display());
    }
    crate::check::gates(&compared.verdicts)
}
