//! `latlab merge DIR… --out DIR`: the runs of several generator hosts made one by latlab-lab.

use std::path::PathBuf;

use anyhow::Result;
use latlab_lab::merge::{self, MergeOptions};

#[derive(Debug, clap::Args)]
pub(crate) struct MergeArgs {
    /// The run folders (written by gen --out, or by an earlier merge), at least two.
    #[arg(required = true, num_args = 2.., value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// The merged folder, which must not exist yet.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

pub(crate) fn run(a: MergeArgs) -> Result<()> {
    let merged = merge::run(&MergeOptions {
        dirs: a.dirs,
        out: a.out,
    })?;
    out!("{}", latlab_lab::table::render(&[&merged.summary]));
    outln!(
        "merged {} runs into {}",
        merged.summary.merged_from.len(),
        merged.out.display()
    );
    Ok(())
}
