//! `--record-fates FILE` and `--replay-fates FILE`: every frame's fate written to a fate file
//! ([`latlab_link::fates`] describes the format), and a recorded file's fates given to the
//! same frames of a new run, by direction, flow and position.
//!
//! The records come from the engine's fate ring ([`latlab_engine::emulator::fate_ring`]), read
//! by a thread of its own, so the frame path never waits on the disk (a record that finds the
//! ring full is counted, and the trailer says how many are missing). The file is written as
//! every partial result is ([`latlab_lab::results::PartialFile`]): whole or absent, also on
//! Ctrl-C and SIGTERM.
//!
//! A file to replay is read and checked before anything runs ([`ReplayFates::load`]): a
//! missing or damaged file, or one whose directions or per-flow rules are not this run's, is
//! refused in one line naming the file and the byte offset or the field.

use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use latlab_engine::emulator::{FatesReport, LinkDirection};
use latlab_lab::command::CommandError;
use latlab_lab::results::PartialFile;
use latlab_link::fates::{DirectionHeader, FateFile, FateWriter, FrameRecord, Header};
use latlab_link::Flows;
use rtrb::Consumer;

/// Records the ring between the engine and the writer holds.
pub const FATE_RING_RECORDS: usize = 65_536;

/// A fate file to replay, read and checked.
#[derive(Clone, Debug)]
pub struct ReplayFates {
    /// Where it was read from.
    pub path: PathBuf,
    /// What it holds.
    pub file: Arc<FateFile>,
}

impl ReplayFates {
    /// Reads `path` (for `flag`) and checks it against a run whose directions carry
    /// `directions`' rules.
    pub fn load(
        flag: &str,
        path: &Path,
        directions: [&Flows; 2],
    ) -> Result<ReplayFates, CommandError> {
        let bytes = std::fs::read(path)
            .map_err(CommandError::setup(format!("{flag} {}", path.display())))?;
        let file = FateFile::parse(&bytes)
            .map_err(|e| CommandError::Usage(format!("{flag} {}: {e}", path.display())))?;
        if let Some(why) = header(directions).mismatch(&file.header) {
            return Err(CommandError::Usage(format!(
                "{flag} {}: {why}; it was recorded on another run",
                path.display()
            )));
        }
        Ok(ReplayFates {
            path: path.to_path_buf(),
            file: Arc::new(file),
        })
    }
}

/// The header of a run with `directions`' rules (A→B, B→A).
pub fn header(directions: [&Flows; 2]) -> Header {
    Header {
        directions: LinkDirection::BOTH
            .iter()
            .zip(directions)
            .map(|(d, flows)| DirectionHeader {
                name: d.name().to_string(),
                rules: flows.rules.iter().map(|r| r.matcher.to_string()).collect(),
            })
            .collect(),
    }
}

/// Writes every record from `ring` to the fate file `path` until `done` is raised and the ring
/// is empty; then the trailer, with `unqueued` (set before `done`) records missing. Returns
/// the frames written.
pub fn write(
    path: &Path,
    header: &Header,
    mut ring: Consumer<FrameRecord>,
    done: &AtomicBool,
    unqueued: &AtomicU64,
) -> io::Result<u64> {
    let partial = PartialFile::create(path)?;
    let file = BufWriter::with_capacity(1 << 20, partial.file());
    let frames = (|| -> io::Result<u64> {
        let mut w = FateWriter::new(file, header)?;
        loop {
            // Raised after the engine stopped: what it pushed is in the ring by then.
            let last_round = done.load(Ordering::Acquire);
            let mut any = false;
            while let Ok(r) = ring.pop() {
                any = true;
                w.frame(&r)?;
            }
            if last_round {
                break;
            }
            if !any {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let (out, frames) = w.finish(unqueued.load(Ordering::Acquire))?;
        out.into_inner().map_err(|e| e.into_error())?;
        Ok(frames)
    })()?;
    partial.commit()?;
    Ok(frames)
}

/// The lines a run that recorded or replayed fates ends with: what was not recorded, what the
/// record had no fate for, and what it held that no frame took (nothing when all is well,
/// except a line saying what was replayed).
pub fn report_lines(report: &FatesReport, replaying: bool) -> String {
    let mut text = String::new();
    if report.unqueued > 0 {
        text.push_str(&format!(
            "warning: --record-fates: {} frames' fates not recorded (the writer fell behind); \
             the file says so\n",
            report.unqueued
        ));
    }
    if !replaying {
        return text;
    }
    let [ab, ba] = report.replayed;
    text.push_str(&format!("replayed fates: A→B {ab}, B→A {ba} frames\n"));
    let [nab, nba] = report.not_in_record;
    if nab + nba > 0 || report.unused > 0 {
        text.push_str(&format!(
            "warning: --replay-fates: {} frames not in the record (A→B {nab}, B→A {nba}: \
             decided by the model), {} recorded fates unused\n",
            nab + nba,
            report.unused
        ));
    }
    if report.corrupt_too_short > 0 {
        text.push_str(&format!(
            "warning: --replay-fates: {} frames recorded corrupted are too short for their \
             bit and were sent whole\n",
            report.corrupt_too_short
        ));
    }
    text
}
