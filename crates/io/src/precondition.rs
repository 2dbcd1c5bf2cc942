//! The one rule for a test whose precondition is missing on this machine (namespaces, root,
//! `bpf()`, a peer tool, a kernel feature): on a developer's machine the test says why and is
//! skipped; under CI it fails with the same reason, because there `.ci/run` sets up everything
//! the tests need and a skip would be a pass that checked nothing.
//!
//! CI is recognised the way CI services set it: `CI` set to anything but empty, `0` or
//! `false` (`true` on GitHub and GitLab, `1` on others).
//!
//! ```no_run
//! # fn namespaces_work() -> Option<String> { None }
//! #[test]
//! fn a_test_that_needs_namespaces() {
//!     if !latlab_io::precondition::met(namespaces_work()) {
//!         return;
//!     }
//!     // ...
//! }
//! ```

use std::fmt::Display;
use std::io::Write;

/// Whether this process runs under CI (`CI` set to anything but empty, `0` or `false`).
pub fn under_ci() -> bool {
    ci_value(std::env::var("CI").ok().as_deref())
}

fn ci_value(value: Option<&str>) -> bool {
    match value {
        None => false,
        Some(v) => {
            let v = v.trim();
            !(v.is_empty() || v == "0" || v.eq_ignore_ascii_case("false"))
        }
    }
}

/// A precondition is missing, for `reason`: under CI this panics (the test fails) with the
/// reason; elsewhere it prints `skipped TEST: REASON` on standard error and returns, and the
/// caller returns from the test.
///
/// The line is written to the standard error stream itself, not through `eprintln!`: the test
/// harness captures (and hides) what a passing test prints with the macros, and a skip the
/// person running `cargo test` does not see would read as a pass that checked something.
#[track_caller]
pub fn missing(reason: impl Display) {
    if under_ci() {
        panic!("under CI this test must run, but: {reason}");
    }
    let _ = writeln!(std::io::stderr().lock(), "{}", skipped_line(&reason));
}

/// `skipped TEST: REASON`, the test named by its thread (the harness names each test's thread
/// after the test).
fn skipped_line(reason: &dyn Display) -> String {
    match std::thread::current().name() {
        Some(test) if test != "main" => format!("skipped {test}: {reason}"),
        _ => format!("skipped: {reason}"),
    }
}

/// Whether the precondition is met: `None` (no reason against it) is met; `Some(reason)` goes
/// to [`missing`] and returns false.
#[track_caller]
pub fn met(why_not: Option<impl Display>) -> bool {
    match why_not {
        None => true,
        Some(reason) => {
            missing(reason);
            false
        }
    }
}

/// Whether this process runs as root (effective uid 0), from `/proc/self/status`.
pub fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .and_then(|id| id.parse::<u32>().ok())
        == Some(0)
}

/// Whether `program` is found on `PATH` as an executable file.
pub fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// `None` when `program` is on `PATH`, else the reason naming it and what provides it.
pub fn need_program(program: &str, package: &str) -> Option<String> {
    (!on_path(program)).then(|| format!("`{program}` is not installed (Debian: {package})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_is_recognised_as_ci_services_set_it() {
        for set in ["true", "1", "yes", "TRUE", " true "] {
            assert!(ci_value(Some(set)), "{set:?}");
        }
        for unset in [None, Some(""), Some("0"), Some("false"), Some("False")] {
            assert!(!ci_value(unset), "{unset:?}");
        }
    }

    #[test]
    fn a_met_precondition_returns_true_and_a_found_program_is_found() {
        assert!(met(None::<&str>));
        assert!(on_path("sh"));
        assert!(need_program("sh", "dash").is_none());
        let missing = need_program("latlab-no-such-program", "none").unwrap();
        assert!(missing.contains("latlab-no-such-program"), "{missing}");
    }

    #[test]
    fn a_skip_names_the_test_it_skips() {
        let line = skipped_line(&"sockperf is not installed");
        assert_eq!(
            line,
            "skipped precondition::tests::a_skip_names_the_test_it_skips: sockperf is not installed"
        );
        let unnamed = std::thread::Builder::new()
            .spawn(|| skipped_line(&"no root"))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(unnamed, "skipped: no root");
    }
}
