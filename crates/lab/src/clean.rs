//! Leftovers of runs that ended without cleaning up (`kill -9`, a container stopped at once):
//! network namespaces and partial results. Used at the start of every command that makes
//! namespaces, and by `latlab clean`.
//!
//! A leftover is known by its owner lock, never by a PID (PIDs repeat across PID namespaces):
//! a namespace is left by a run that ended when the lock on `/run/latlab/<name>.lock` can be
//! taken ([`crate::topology`]), a partial result (`.NAME.partial-PID`, file or folder) when the
//! lock on it can be taken ([`crate::results`]). Nothing whose lock is held is ever removed.
//! Namespaces made by latlab versions that took no lock (no lock file) are judged by the PID in
//! their name, as those versions did.
//!
//! An emulator namespace of `latlab emu --attach` that has a state file
//! (`/run/latlab/<name>.attach`) holds a container's veth: its wiring is put back first
//! ([`attach::restore`], in the namespace the splice ran in), and the
//! namespace is deleted only once the veth is out of it; if that cannot be done, it is left as
//! it is and said so.

pub mod attach;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use latlab_io::lock::OwnerLock;

use crate::topology::{self, TopologyError};
use attach::AttachState;

/// What a clean-up removed, and what it could not.
#[derive(Debug, Default)]
pub struct Removed {
    /// The namespaces removed.
    pub namespaces: Vec<String>,
    /// The spliced links put back (`--attach` runs that ended), each as `namespace c1 (veth1
    /// on br0)`.
    pub restored: Vec<String>,
    /// The partial results removed (files and folders).
    pub partials: Vec<PathBuf>,
    /// Lock files of namespaces that no longer exist, removed.
    pub lock_files: usize,
    /// What could not be removed, each with the reason.
    pub failed: Vec<String>,
}

impl Removed {
    /// The line that says which namespaces were removed: `removed 2 namespaces left by a run
    /// that ended: latlab-…, latlab-…`; `None` when none were.
    pub fn namespaces_line(&self) -> Option<String> {
        match self.namespaces.len() {
            0 => None,
            n => Some(format!(
                "removed {n} namespace{} left by a run that ended: {}",
                if n == 1 { "" } else { "s" },
                self.namespaces.join(", ")
            )),
        }
    }

    /// The line that says which spliced links were put back: `put back 1 link spliced by a
    /// run that ended: namespace c1 (veth1 on br0)`; `None` when none were.
    pub fn restored_line(&self) -> Option<String> {
        match self.restored.len() {
            0 => None,
            n => Some(format!(
                "put back {n} link{} spliced by a run that ended: {}",
                if n == 1 { "" } else { "s" },
                self.restored.join(", ")
            )),
        }
    }

    /// The line that says which partial results were removed; `None` when none were.
    pub fn partials_line(&self) -> Option<String> {
        match self.partials.len() {
            0 => None,
            n => Some(format!(
                "removed {n} partial result{} left by a run that ended: {}",
                if n == 1 { "" } else { "s" },
                self.partials
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

/// Removes every `latlab-*` namespace left by a run that ended (its owner lock is free, or,
/// without a lock file, the process its name gives is gone), with its lock file; one that
/// holds a spliced veth is put back first, and kept when that fails.
pub fn remove_stale_namespaces() -> Removed {
    let mut removed = Removed::default();
    for name in latlab_namespaces() {
        match owner(&name) {
            Owner::Alive => {}
            Owner::Gone(lock) => {
                match put_back(&name) {
                    Ok(Some(line)) => removed.restored.push(line),
                    Ok(None) => {}
                    Err(e) => {
                        removed.failed.push(format!(
                            "namespace {name} holds a spliced veth and stays: {e}"
                        ));
                        continue;
                    }
                }
                let deleted = latlab_io::netns::delete(&name);
                match deleted {
                    Ok(_) => {
                        let _ = fs::remove_file(AttachState::path(&name));
                        if let Some(lock) = lock {
                            let _ = lock.remove();
                        }
                        removed.namespaces.push(name);
                    }
                    // Deleted meanwhile by its owner's own clean-up, or by another run's.
                    Err(_) if !topology::namespace_exists(&name) => {}
                    Err(e) => removed.failed.push(e.to_string()),
                }
            }
            Owner::Unknown(e) => removed.failed.push(format!("namespace {name}: {e}")),
        }
    }
    removed
}

/// Puts back the spliced link the stale namespace `name` holds, if it has a state file;
/// returns what was put back. Runs in the namespace the splice ran in, found by its identity;
/// when it cannot be found, nothing is touched.
fn put_back(name: &str) -> Result<Option<String>, String> {
    let Some(state) = AttachState::read(name).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let Some(host) = attach::find_netns(state.host_netns) else {
        // The namespace it was spliced from is gone, and with it the new pair's end there;
        // what it still holds cannot be put back, and is not deleted.
        return match attach::still_held(&state)? {
            false => Ok(None),
            true => Err(format!(
                "it holds {}, and the namespace it was spliced from is not to be found",
                state.veth
            )),
        };
    };
    let line = format!(
        "{} ({}{})",
        state.target,
        state.veth,
        state
            .master
            .as_ref()
            .map(|b| format!(" on {b}"))
            .unwrap_or_default()
    );
    latlab_io::netns::run_in_path(&host, move || {
        attach::restore(&state)?;
        match attach::still_held(&state)? {
            true => Err(format!("{} is still in it", state.veth)),
            false => Ok(()),
        }
    })
    .map_err(|e| e.to_string())??;
    Ok(Some(line))
}

/// Removes the lock files in `/run/latlab` whose namespace is gone and whose lock is free
/// (left by a run killed between deleting its namespace and removing the lock file), the
/// targets' locks of `--attach` runs and the interface claims of `latlab emu` bridges that ended, state files whose namespace is gone, and the
/// subnet locks of `latlab run`s that ended; returns how many.
pub fn remove_orphan_lock_files() -> usize {
    let Ok(entries) = fs::read_dir(topology::LOCK_DIR) else {
        return 0;
    };
    let mut count = 0;
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        // The targets of `--attach` runs and the interfaces of `latlab emu` bridges that ended.
        let owner_only = file_name.starts_with("attach-") || file_name.starts_with("iface-");
        if owner_only && file_name.ends_with(".lock") {
            if let Ok(Some(lock)) = OwnerLock::open(&entry.path()) {
                if lock.remove().is_ok() {
                    count += 1;
                }
            }
            continue;
        }
        if let Some(name) = file_name.strip_suffix(".attach") {
            let owned = OwnerLock::open(&topology::lock_path(name)).is_ok_and(|l| l.is_none());
            // Its namespace was deleted by hand: the veth that took the host side's place may
            // still be here.
            if !topology::namespace_exists(name)
                && !owned
                && put_back(name).is_ok()
                && fs::remove_file(entry.path()).is_ok()
            {
                count += 1;
            }
            continue;
        }
        let Some(name) = file_name.strip_suffix(".lock") else {
            continue;
        };
        // A `latlab run`'s subnet: its lock is all there is of it.
        if name.starts_with("run-") {
            if let Ok(Some(lock)) = OwnerLock::open(&entry.path()) {
                if lock.remove().is_ok() {
                    count += 1;
                }
            }
            continue;
        }
        if !name.starts_with("latlab-") || topology::namespace_exists(name) {
            continue;
        }
        if let Ok(Some(lock)) = OwnerLock::open(&entry.path()) {
            // Its owner may have added the namespace since we looked: check again under the lock.
            if !topology::namespace_exists(name) && lock.remove().is_ok() {
                count += 1;
            }
        }
    }
    count
}

/// Removes the partial results under `dir` (searched through, partial folders not entered) whose
/// writer is gone; `dir` may also be a partial result itself.
pub fn remove_partials(dir: &Path) -> io::Result<Removed> {
    let mut removed = Removed::default();
    let meta = fs::symlink_metadata(dir)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    if is_partial(dir) {
        remove_partial(dir, meta.is_dir(), &mut removed);
    } else if meta.is_dir() {
        walk(dir, &mut removed);
    }
    Ok(removed)
}

/// Whether `path` names a partial result: `.NAME.partial-PID`.
pub fn is_partial(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    let Some((head, pid)) = name.rsplit_once(".partial-") else {
        return false;
    };
    head.len() > 1
        && head.starts_with('.')
        && !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
}

fn walk(dir: &Path, removed: &mut Removed) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            removed.failed.push(format!("{}: {e}", dir.display()));
            return;
        }
    };
    for entry in entries.flatten() {
        let path = entry.path();
        // Symbolic links are neither followed nor removed.
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            continue;
        }
        if is_partial(&path) {
            remove_partial(&path, kind.is_dir(), removed);
        } else if kind.is_dir() {
            walk(&path, removed);
        }
    }
}

fn remove_partial(path: &Path, is_dir: bool, removed: &mut Removed) {
    match OwnerLock::open(path) {
        // Its writer is alive.
        Ok(None) => {}
        Ok(Some(_lock)) => {
            let gone = if is_dir {
                fs::remove_dir_all(path)
            } else {
                fs::remove_file(path)
            };
            match gone {
                Ok(()) => removed.partials.push(path.to_path_buf()),
                Err(e) => removed.failed.push(format!("{}: {e}", path.display())),
            }
        }
        // Renamed into place or removed by its writer since it was listed.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => removed.failed.push(e.to_string()),
    }
}

/// Who owns a namespace.
enum Owner {
    /// A live process holds its lock (or, without a lock file, the process its name gives
    /// exists).
    Alive,
    /// Its owner is gone; the lock, when it has a lock file, is held now by this process.
    Gone(Option<OwnerLock>),
    /// The lock file could not be opened.
    Unknown(TopologyError),
}

fn owner(name: &str) -> Owner {
    let path = topology::lock_path(name);
    match OwnerLock::open(&path) {
        Ok(Some(lock)) => Owner::Gone(Some(lock)),
        Ok(None) => Owner::Alive,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // A namespace of a latlab that took no lock: `latlab-<pid>-…`.
            let pid = name
                .strip_prefix("latlab-")
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok());
            match pid {
                Some(pid) if Path::new(&format!("/proc/{pid}")).exists() => Owner::Alive,
                Some(_) => Owner::Gone(None),
                // Not a name latlab makes: not ours to judge.
                None => Owner::Alive,
            }
        }
        Err(source) => Owner::Unknown(TopologyError::Lock {
            name: name.to_string(),
            source,
        }),
    }
}

/// The names of the `latlab-*` namespaces that exist now.
fn latlab_namespaces() -> Vec<String> {
    let Ok(entries) = fs::read_dir(latlab_io::netns::DIR) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("latlab-"))
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_names_are_recognised() {
        assert!(is_partial(Path::new("out/.demo-1.partial-1234")));
        assert!(is_partial(Path::new(".summary.json.partial-7")));
        assert!(!is_partial(Path::new("out/demo-1.partial-1234")));
        assert!(!is_partial(Path::new("out/.demo.partial-")));
        assert!(!is_partial(Path::new("out/.demo.partial-12x")));
        assert!(!is_partial(Path::new("out/summary.json")));
    }

    #[test]
    fn a_partial_result_whose_writer_holds_it_is_kept_and_one_left_behind_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("points/.a.json.partial-11");
        let left = dir.path().join(".demo.partial-12");
        fs::create_dir_all(live.parent().unwrap()).unwrap();
        fs::write(&live, b"{").unwrap();
        fs::create_dir_all(left.join("rate-1000pps")).unwrap();
        fs::write(left.join("rate-1000pps/summary.json"), b"{").unwrap();
        fs::write(dir.path().join("summary.json"), b"{}").unwrap();
        let writer = OwnerLock::open(&live).unwrap().unwrap();
        let removed = remove_partials(dir.path()).unwrap();
        assert_eq!(removed.partials, vec![left.clone()]);
        assert!(removed.failed.is_empty(), "{:?}", removed.failed);
        assert!(live.exists() && !left.exists());
        assert!(
            dir.path().join("summary.json").exists(),
            "finished files stay"
        );
        assert!(removed
            .partials_line()
            .unwrap()
            .starts_with("removed 1 partial result left by a run that ended: "));
        drop(writer);
        let removed = remove_partials(dir.path()).unwrap();
        assert_eq!(removed.partials, vec![live.clone()]);
        assert!(remove_partials(dir.path()).unwrap().partials.is_empty());
    }

    #[test]
    fn the_namespaces_line_counts_and_names_them() {
        let mut removed = Removed::default();
        assert_eq!(removed.namespaces_line(), None);
        removed.namespaces = vec!["latlab-1-a-0-client".into(), "latlab-1-a-0-server".into()];
        assert_eq!(
            removed.namespaces_line().unwrap(),
            "removed 2 namespaces left by a run that ended: latlab-1-a-0-client, latlab-1-a-0-server"
        );
    }
}
