//! `latlab demo`: flags → [`latlab_study::demo`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use latlab_demo::DemoOptions;
use latlab_lab::command::default_out;
use latlab_lab::units::{parse_duration, ProbeRate};

use crate::{progress, signals, STOP};

#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// Sending time at each rate.
    #[arg(long, value_parser = parse_duration, default_value = "2s", value_name = "DUR")]
    duration: Duration,
    /// Results folder (default: latlab-results/demo-<time>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Rates to measure at, comma separated.
    #[arg(long, value_delimiter = ',', value_parser = str::parse::<ProbeRate>, default_value = "1k,10k,100k")]
    rates: Vec<ProbeRate>,
    /// Run on loopback even when namespaces would work.
    #[arg(long)]
    loopback: bool,
    /// Skip the run through an emulated link (1 ms each way, 0.1% loss).
    #[arg(long)]
    no_emulated_link: bool,
    /// A latency gate (repeatable), decided on every run from its 95% interval: p99<=2ms,
    /// loss<=0.1%, forward.p99<=1ms (see gen --assert). Exit 3 when one fails, 4 when none
    /// fails but one is inconclusive.
    #[arg(long = "assert", value_name = "EXPR", value_parser = crate::check::parse_assertion)]
    assertions: Vec<latlab_lab::gate::Assertion>,
    /// Write every --assert verdict as a JUnit XML test case to this file.
    #[arg(long, value_name = "FILE", requires = "assertions")]
    junit: Option<PathBuf>,
}

pub(crate) fn run(a: DemoArgs) -> Result<()> {
    let options = DemoOptions {
        duration: a.duration,
        rates: a.rates,
        out: a.out.unwrap_or_else(|| default_out("demo")),
        namespaces: !a.loopback,
        emulated_link: !a.no_emulated_link,
        assertions: a.assertions,
        junit: a.junit,
    };
    options.check()?;
    if options.namespaces {
        crate::clean::at_start(&options.out, false);
    }
    let mut bar = progress::Terminal::new();
    let outcome = latlab_demo::run(&options, &STOP, &mut bar)?;
    outln!("latlab demo: {}", outcome.topology);
    out!(
        "{}",
        latlab_lab::table::render(&outcome.runs.iter().collect::<Vec<_>>())
    );
    for run in &outcome.runs {
        if let Some(lost) = &run.lost_by_cause {
            outln!("{}: {}", run.setup.label, lost.text());
        }
    }
    let r = outcome.reflector;
    outln!(
        "reflector: received {}, reflected {}, malformed {}, not sent back (full send \
         buffer, refused address) {}, dropped at its full receive buffer {}",
        r.received,
        r.reflected,
        r.malformed,
        r.send_dropped,
        r.kernel_drops.map_or("-".to_string(), |n| n.to_string())
    );
    if let Some(e) = &outcome.emulated {
        outln!("{}", e.describe());
    }
    outln!(
        "results: {} (summary.json, per-rate latency.hlog and ccdf.csv, ccdf.svg)",
        outcome.out.display()
    );
    if let Some(signal) = signals::received() {
        eprintln!(
            "stopped early by {}: the results hold the rates that ran",
            signal.name()
        );
    }
    let verdicts: Vec<_> = outcome
        .runs
        .iter()
        .flat_map(|r| r.assertions.clone())
        .collect();
    crate::check::gates(&verdicts)
}
