//! `latlab trace-stats`: flags → [`latlab_lab::trace`].

use std::path::PathBuf;

use anyhow::Result;
use latlab_lab::trace::{self, TraceStatsCommand};

#[derive(Debug, clap::Args)]
pub(crate) struct TraceStatsArgs {
    /// The capture: pcap or pcapng; Ethernet, Linux cooked (SLL, SLL2) or raw IP.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Also write the table as CSV to this file.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Also write it as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

pub(crate) fn run(a: TraceStatsArgs) -> Result<()> {
    let report = trace::run(&TraceStatsCommand {
        file: a.file,
        csv: a.csv,
        json: a.json,
    })?;
    out!("{}", report.text());
    Ok(())
}
