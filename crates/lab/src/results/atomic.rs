//! Files written whole or not at all: [`write_atomic`], and [`PartialFile`], the one path of
//! every partial file (`.NAME.partial-PID` under its writer's owner lock, renamed into place).

use super::*;

/// Writes `bytes` to `path` whole or not at all (a temporary file renamed into place).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_then(path, bytes, PartialFile::commit)
}

/// Writes `bytes` to `path`, whole, unless a file is there already: `true` when this call
/// wrote it, `false` when it found one (left as it was). Of several processes that try at
/// once, on one host or on a shared file system, exactly one writes it (the file is linked
/// into place, and a link is never made over a name that exists).
pub fn write_new(path: &Path, bytes: &[u8]) -> io::Result<bool> {
    write_then(path, bytes, PartialFile::commit_new)
}

/// `bytes` written to `path`'s partial file, then put in place by `commit`; errors name `path`.
fn write_then<T>(
    path: &Path,
    bytes: &[u8],
    commit: impl FnOnce(PartialFile) -> io::Result<T>,
) -> io::Result<T> {
    let result = (|| {
        let tmp = PartialFile::create(path)?;
        let mut f = tmp.file();
        f.write_all(bytes)?;
        commit(tmp)
    })();
    result.map_err(|e| naming(path, e))
}

/// A file written under its partial name (`.NAME.partial-PID` beside where it goes) and renamed
/// into place by [`PartialFile::commit`]; dropped without a commit, it is removed. Its writer
/// holds the lock on it ([`latlab_io::lock`]) while it is written (the lock goes with the open
/// file, renamed or not), so [`crate::clean`] removes it only once its writer is gone, however
/// that went (`kill -9` included). What latlab writes as one file goes through it: the
/// [`write_atomic`] files and the `emu --pcap` capture (`latlab_emu::pcap`); a results folder
/// is locked as a whole ([`ResultsDir`]).
#[derive(Debug)]
pub struct PartialFile {
    file: fs::File,
    tmp: PathBuf,
    dest: PathBuf,
    committed: bool,
}

impl PartialFile {
    /// Starts the file that will end up at `dest`. A partial file of the same name whose writer
    /// is alive (a run of the same PID in another PID namespace) is refused, never written over.
    pub fn create(dest: &Path) -> io::Result<PartialFile> {
        let tmp = temp_name(dest);
        // Not truncated before the lock says whose it is.
        let file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&tmp)?;
        // A name that leads to something other than a regular file (a device) is written as it
        // is. On a file system without flock the file is written all the same and only loses
        // the protection from `latlab clean`.
        if file.metadata()?.is_file() {
            if let Ok(false) = latlab_io::lock::try_lock(&file) {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} is being written by another latlab run", tmp.display()),
                ));
            }
            // Left by a run of the same PID that ended: started afresh.
            file.set_len(0)?;
        }
        Ok(PartialFile {
            file,
            tmp,
            dest: dest.to_path_buf(),
            committed: false,
        })
    }

    /// The file being written (`&File` is `Write`).
    pub fn file(&self) -> &fs::File {
        &self.file
    }

    /// Flushes the file to the disk and renames it into place.
    pub fn commit(mut self) -> io::Result<()> {
        self.file.sync_all()?;
        fs::rename(&self.tmp, &self.dest)?;
        self.committed = true;
        Ok(())
    }

    /// Flushes the file to the disk and links it into place unless a file is there already
    /// (`false`: that one is left as it was); the partial name goes either way.
    pub fn commit_new(self) -> io::Result<bool> {
        self.file.sync_all()?;
        match fs::hard_link(&self.tmp, &self.dest) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
        // Dropped uncommitted: the partial name is removed, the linked file stays.
    }
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        if !self.committed {
            // Removed while the lock is still held: `latlab clean` never sees it half-gone.
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// `error` with `path` in front of its message, of the same kind.
pub(crate) fn naming(path: &Path, error: io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

/// The partial name of `path`: `.NAME.partial-PID` beside it.
pub fn temp_name(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.partial-{}", std::process::id()))
}
