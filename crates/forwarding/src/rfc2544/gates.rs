//! `rfc2544 --assert` and `latlab check` on an `rfc2544` folder: `ndr` and `pdr` gates decided
//! on every frame size ([`latlab_lab::gate::Assertion::evaluate_rates`]).

use std::path::Path;

use latlab_lab::gate::{Assertion, AssertionVerdict, Results};
use latlab_study::check::CheckError;
use latlab_study::StudyError;

use super::folder::{Rfc2544File, RESULTS};
use super::SizeResult;

/// The frame sizes of the `rfc2544` run whose folder `dir` is; `None` when it is not one (no
/// `rfc2544.json`), an error naming the file when that does not read.
pub fn folder_sizes(dir: &Path) -> Option<Result<Vec<SizeResult>, String>> {
    let path = dir.join(RESULTS);
    path.is_file()
        .then(|| Rfc2544File::read(&path).map(|file| file.sizes))
}

/// `latlab check` on an `rfc2544` folder (a [`latlab_study::check::FolderCheck`]): every
/// assertion, once all are known to be answerable, on every frame size of `dir`; `None` when
/// `dir` is not one.
pub fn check_folder(
    dir: &Path,
    assertions: &[Assertion],
) -> Option<Result<Vec<AssertionVerdict>, CheckError>> {
    let sizes = folder_sizes(dir)?;
    let checked = || {
        let sizes = sizes.map_err(|reason| StudyError::Data {
            path: dir.to_path_buf(),
            reason,
        })?;
        for a in assertions {
            a.check_for(Results::Rfc2544, false)
                .map_err(|source| CheckError::Assertion {
                    dir: dir.to_path_buf(),
                    source,
                })?;
        }
        Ok(decide(assertions, &sizes))
    };
    Some(checked())
}

/// Every gate on every frame size, named `64 B`, `1518 B`.
pub fn decide(assertions: &[Assertion], sizes: &[SizeResult]) -> Vec<AssertionVerdict> {
    sizes
        .iter()
        .flat_map(|size| {
            let run = format!("{} B", size.frame_size);
            assertions
                .iter()
                .map(move |a| a.evaluate_rates(size.ndr_pps, size.pdr_pps, size.dut_kept_up, &run))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use latlab_lab::gate::Verdict;

    use super::*;

    #[test]
    fn every_size_is_decided_under_its_name() {
        let sizes = [
            SizeResult {
                frame_size: 64,
                ndr_pps: Some(450_000),
                pdr_pps: Some(480_000),
                ..SizeResult::default()
            },
            SizeResult {
                frame_size: 1518,
                ndr_pps: Some(300_000),
                dut_kept_up: true,
                ..SizeResult::default()
            },
        ];
        let gates: Vec<Assertion> =
            vec!["ndr>=400k".parse().unwrap(), "pdr>=500k".parse().unwrap()];
        let v = decide(&gates, &sizes);
        let got: Vec<_> = v
            .iter()
            .map(|v| (v.run.as_deref().unwrap(), v.assertion.as_str(), v.verdict))
            .collect();
        assert_eq!(
            got,
            [
                ("64 B", "ndr>=400k", Verdict::Pass),
                ("64 B", "pdr>=500k", Verdict::Fail),
                ("1518 B", "ndr>=400k", Verdict::Inconclusive),
                ("1518 B", "pdr>=500k", Verdict::Inconclusive),
            ]
        );
    }
}
