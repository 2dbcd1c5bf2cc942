//! `latlab report DIR`: a results folder drawn again from its data by latlab-lab: a gen or
//! demo folder's table (and, with `--plot`, its CCDF plot), a study's tables, figures and
//! report.md.

use std::path::PathBuf;

use anyhow::Result;
use latlab_study::registry::StudyEntry;
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
    match report::run(&options, &studies())? {
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

/// Every study, one line each: `latlab_study`'s and `latlab_forwarding`'s, where `latlab
/// report` finds a folder's study.
pub(crate) fn studies() -> Vec<StudyEntry> {
    [&latlab_study::STUDIES[..], &latlab_forwarding::STUDIES[..]].concat()
}

#[cfg(test)]
mod tests {
    use latlab_study::registry::{entry, kind_of_point, names};
    use latlab_study::StudyKind;

    use super::*;

    #[test]
    fn every_kind_has_one_line_and_no_two_studies_share_a_point_prefix() {
        let studies = studies();
        for kind in StudyKind::ALL {
            assert_eq!(
                studies.iter().filter(|e| e.kind == kind).count(),
                1,
                "{kind:?}"
            );
            assert_eq!(entry(&studies, kind).kind, kind);
        }
        assert_eq!(studies.len(), StudyKind::ALL.len());
        for a in &studies {
            for b in studies.iter().filter(|b| b.kind != a.kind) {
                for p in a.point_prefixes {
                    let p = p.trim_end_matches('*');
                    assert!(
                        !b.point_prefixes.iter().any(|q| names(q, p)),
                        "{:?} and {:?} both claim points starting {p}",
                        a.kind,
                        b.kind
                    );
                }
            }
        }
    }

    #[test]
    fn point_keys_name_their_study() {
        let studies = studies();
        for (key, kind) in [
            ("sweep-socket-16k-4", StudyKind::GameServer),
            ("table-batched-default-8-90", StudyKind::GameServer),
            ("flood-xdp", StudyKind::GameServer),
            ("kernel-1000", StudyKind::Emulator),
            ("emu-busy-50000-100us", StudyKind::Emulator),
            ("loss-1000", StudyKind::Emulator),
            ("rate-emu-64", StudyKind::Emulator),
            ("methods-default", StudyKind::Timestamps),
            ("reflector-busy", StudyKind::Timestamps),
            ("rtt50ms-jitter50ms-loss0.1-random", StudyKind::Transports),
            ("dut-fwd-xdp", StudyKind::Forwarding),
            ("size-64", StudyKind::Rfc2544),
            ("run", StudyKind::Rfc2544),
            ("bloat-tail-limit-1000-cubic-1", StudyKind::Bufferbloat),
            ("bloat-fq_codel-0", StudyKind::Bufferbloat),
        ] {
            assert_eq!(kind_of_point(&studies, key), Some(kind), "{key}");
        }
        assert_eq!(kind_of_point(&studies, "mine"), None);
        assert_eq!(kind_of_point(&studies, ""), None);
    }
}
