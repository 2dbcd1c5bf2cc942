//! ARCHITECTURE's size rule, checked: no file under `crates/*/src` is longer than 600 lines
//! before its tests (a trailing `#[cfg(test)]` module, or a sibling `tests.rs`, do not count),
//! and no crate is longer than 12,000 lines (every `.rs` file under its `src/` but its
//! `tests.rs` files and `tests/` folders).

use std::fs;
use std::path::{Path, PathBuf};

const MAX_FILE: usize = 600;
const MAX_CRATE: usize = 12_000;

/// Every source file of a crate that counts: not `tests.rs`, not under a `tests/` folder.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "tests" {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(path);
        }
    }
}

#[test]
fn no_file_over_600_lines_before_its_tests_and_no_crate_over_12000() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut long_files = Vec::new();
    let mut long_crates = Vec::new();
    let mut counted = 0;
    for entry in fs::read_dir(&crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        let mut files = Vec::new();
        sources(&src, &mut files);
        let mut total = 0;
        for file in files {
            let text = fs::read_to_string(&file).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            total += lines.len();
            let before_tests = lines
                .iter()
                .position(|l| l.trim() == "#[cfg(test)]")
                .unwrap_or(lines.len());
            if before_tests > MAX_FILE {
                long_files.push(format!("{} ({before_tests})", file.display()));
            }
        }
        if total > MAX_CRATE {
            long_crates.push(format!("{} ({total})", src.display()));
        }
        counted += 1;
    }
    assert!(
        counted >= 13,
        "found {counted} crates under {}",
        crates.display()
    );
    assert!(
        long_files.is_empty(),
        "over {MAX_FILE} lines: {long_files:?}"
    );
    assert!(
        long_crates.is_empty(),
        "over {MAX_CRATE} lines: {long_crates:?}"
    );
}
