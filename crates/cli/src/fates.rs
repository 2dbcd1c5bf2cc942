//! `latlab fates FILE [FILE2]`: what a fate file holds (`--record-fates`), or whether two hold
//! the same fates ([`latlab_link::fates::summary`]).

use std::path::{Path, PathBuf};

use anyhow::Result;
use latlab_lab::command::CommandError;
use latlab_link::fates::summary::{compare, summary};
use latlab_link::fates::FateFile;

#[derive(Debug, clap::Args)]
pub(crate) struct FatesArgs {
    /// A fate file written by --record-fates.
    file: PathBuf,
    /// A second fate file: compare the two flow by flow and position by position (exit 1 at
    /// the first difference of any flow).
    other: Option<PathBuf>,
}

/// Reads the fate file at `path`; the error names it, and the byte and field at fault.
fn read(path: &Path) -> Result<FateFile, CommandError> {
    let bytes = std::fs::read(path).map_err(CommandError::setup(path.display().to_string()))?;
    FateFile::parse(&bytes).map_err(|e| CommandError::Usage(format!("{}: {e}", path.display())))
}

pub(crate) fn run(a: FatesArgs) -> Result<()> {
    let first = read(&a.file)?;
    let Some(other) = &a.other else {
        out!("{}", summary(&first));
        return Ok(());
    };
    let second = read(other)?;
    let names = [a.file.display().to_string(), other.display().to_string()];
    let compared = compare(&first, &second, [&names[0], &names[1]]);
    for line in &compared.lines {
        outln!("{line}");
    }
    if compared.differing > 0 {
        anyhow::bail!(
            "the fates differ in {} flows of {}",
            compared.differing,
            compared.lines.len()
        );
    }
    outln!(
        "same fates: {} frames each, {} drops at the same positions",
        first.frames.len(),
        compared.same_drops
    );
    Ok(())
}
