//! `latlab check DIR --assert EXPR`: flags → [`latlab_forwarding::check`] (that is
//! [`latlab_study::check`], which reads `rfc2544` folders through `latlab_forwarding`); and
//! what every command with `--assert` shares: the flag's parser, one line per verdict and the
//! gates' exit code.

use std::path::PathBuf;

use anyhow::Result;
use latlab_lab::gate::{overall, Assertion, AssertionVerdict, Verdict};
use latlab_study::check::CheckOptions;

#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// A results folder written by gen --out, demo, stream send --out, rfc2544 or a study (each
    /// point with a latency summary is gated, named by its key).
    dir: PathBuf,
    /// A gate (repeatable): p99<=2ms, p99.9<5ms, max<=20ms, mean<=1ms, loss<=0.1%,
    /// achieved>=9.9k, forward.p99<=1ms; ndr>=500k, pdr>=600k on an rfc2544 folder. Exit 0 when all pass, 3 when one fails, 4 when none
    /// fails but one is inconclusive.
    #[arg(long = "assert", value_name = "EXPR", required = true, value_parser = parse_assertion)]
    assertions: Vec<Assertion>,
    /// Write every verdict as a JUnit XML test case to this file.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
}

pub(crate) fn run(a: CheckArgs) -> Result<()> {
    let verdicts = latlab_forwarding::check(&CheckOptions {
        dir: a.dir,
        assertions: a.assertions,
        junit: a.junit,
    })?;
    gates(&verdicts)
}

/// `--assert`'s value parser: the assertion, or why not (clap names the flag and the value).
pub(crate) fn parse_assertion(text: &str) -> Result<Assertion, String> {
    text.parse::<Assertion>().map_err(|e| e.reason)
}

/// Prints one line per verdict; an error carrying the gates' exit code ([`GatesNotPassed`])
/// when one did not pass.
pub(crate) fn gates(verdicts: &[AssertionVerdict]) -> Result<()> {
    for v in verdicts {
        outln!("{}", v.line());
    }
    let count = |verdict| verdicts.iter().filter(|v| v.verdict == verdict).count();
    match overall(verdicts) {
        Verdict::Pass => Ok(()),
        verdict => Err(GatesNotPassed {
            verdict,
            failed: count(Verdict::Fail),
            inconclusive: count(Verdict::Inconclusive),
            total: verdicts.len(),
        }
        .into()),
    }
}

/// Some gate failed (exit 3), or none failed but one was inconclusive (exit 4).
#[derive(Debug)]
pub(crate) struct GatesNotPassed {
    verdict: Verdict,
    failed: usize,
    inconclusive: usize,
    total: usize,
}

impl GatesNotPassed {
    /// 3 when a gate failed, 4 when none failed but one was inconclusive.
    pub(crate) fn exit_code(&self) -> i32 {
        if self.verdict == Verdict::Fail {
            3
        } else {
            4
        }
    }
}

impl std::fmt::Display for GatesNotPassed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "gates: {} of {} failed, {} inconclusive",
            self.failed, self.total, self.inconclusive
        )
    }
}

impl std::error::Error for GatesNotPassed {}
