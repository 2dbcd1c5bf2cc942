//! `latlab clean`: removes what runs that ended without cleaning up left behind
//! ([`latlab_lab::clean`]), and the start-up clean-up of the commands that make namespaces.

use std::path::PathBuf;

use anyhow::{bail, Result};
use latlab_lab::clean::{self, Removed};

#[derive(Debug, clap::Args)]
pub(crate) struct CleanArgs {
    /// Folders to search for partial results (`.NAME.partial-PID`) whose run ended
    /// (default: latlab-results, when it exists).
    #[arg(value_name = "DIR")]
    dirs: Vec<PathBuf>,
}

pub(crate) fn run(a: CleanArgs) -> Result<()> {
    let mut failed = Vec::new();
    let namespaces = clean::remove_stale_namespaces();
    if let Some(line) = namespaces.restored_line() {
        outln!("{line}");
    }
    match namespaces.namespaces_line() {
        Some(line) => outln!("{line}"),
        None => outln!("no namespace left by a run that ended"),
    }
    failed.extend(namespaces.failed);
    // `latlab run --nat`'s tables and forwarding, in this namespace: after the namespaces, so
    // that a table whose run's namespace was just removed is known as left behind.
    match latlab_emu::run::nat::remove_stale() {
        Ok(nat) => {
            if !nat.tables.is_empty() {
                outln!(
                    "removed {} nftables table{} left by a latlab run that ended: {}",
                    nat.tables.len(),
                    if nat.tables.len() == 1 { "" } else { "s" },
                    nat.tables.join(", ")
                );
            }
            if nat.forwarding_restored {
                outln!("put net.ipv4.ip_forward back as it was before latlab run --nat");
            }
        }
        Err(e) => failed.push(format!("latlab run --nat's nftables tables: {e}")),
    }
    clean::remove_orphan_lock_files();
    let dirs = if a.dirs.is_empty() {
        let default = PathBuf::from("latlab-results");
        if default.is_dir() {
            vec![default]
        } else {
            Vec::new()
        }
    } else {
        a.dirs
    };
    for dir in &dirs {
        let removed = clean::remove_partials(dir)?;
        match removed.partials_line() {
            Some(line) => outln!("{line}"),
            None => outln!(
                "no partial result left by a run that ended in {}",
                dir.display()
            ),
        }
        failed.extend(removed.failed);
    }
    if !failed.is_empty() {
        bail!("could not remove {}", failed.join("; "));
    }
    Ok(())
}

/// The start-up clean-up of a command about to make namespaces and write its results to `out`:
/// removes the namespaces left by runs that ended, saying so in one line. Only root can; for
/// others it does nothing (their command falls back to loopback or fails on its own). When `out`
/// exists and the command may not continue it, it does nothing either: the command is about to
/// refuse the folder, and that refusal is the one line it prints.
pub(crate) fn at_start(out: &std::path::Path, may_continue: bool) {
    if !latlab_lab::topology::is_root() || (out.exists() && !may_continue) {
        return;
    }
    stale_namespaces();
}

/// Removes the namespaces left by runs that ended (putting back the links they spliced),
/// saying so on stderr.
pub(crate) fn stale_namespaces() {
    if !latlab_lab::topology::is_root() {
        return;
    }
    let removed: Removed = clean::remove_stale_namespaces();
    for line in [removed.restored_line(), removed.namespaces_line()]
        .into_iter()
        .flatten()
    {
        eprintln!("{line}");
    }
    for failure in &removed.failed {
        eprintln!("warning: left by a run that ended, but not removed: {failure}");
    }
}
