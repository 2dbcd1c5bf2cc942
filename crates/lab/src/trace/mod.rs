//! Traffic from captures: `latlab trace-stats` (the Table 1 columns of Harcsik et al. per
//! stream of a pcap or pcapng file) and the replay schedule of `latlab gen --trace`.
//!
//! A capture is read whole into memory and decoded by [`capture::parse_capture`], which never
//! panics on any bytes (fuzz target `capture` in `fuzz/`): a truncated or corrupted file ends
//! with one error naming the file and the byte offset where the bad record starts.

pub mod capture;
pub mod stats;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use latlab_probe::model::Message;
use serde::Serialize;

use crate::error::{check_writable, CommandError};
use crate::results::write_atomic;
pub use capture::{Capture, CapturedPacket, ParseError, Protocol};
pub use stats::{streams, DirectionStats, Stream};

/// Reads and decodes the capture at `path`; errors name the file (exit code 2).
pub fn read_capture(path: &Path) -> Result<Capture, CommandError> {
    let bytes =
        std::fs::read(path).map_err(|e| CommandError::Usage(format!("{}: {e}", path.display())))?;
    capture::parse_capture(&bytes)
        .map_err(|e| CommandError::Usage(format!("{}: {e}", path.display())))
}

/// `latlab trace-stats FILE [--csv FILE] [--json FILE]`.
#[derive(Clone, Debug)]
pub struct TraceStatsCommand {
    /// The capture.
    pub file: PathBuf,
    /// Write the table as CSV here.
    pub csv: Option<PathBuf>,
    /// Write it as JSON here.
    pub json: Option<PathBuf>,
}

/// What `trace-stats` found; the files asked for are written.
#[derive(Clone, Debug, Serialize)]
pub struct TraceStatsReport {
    /// The capture.
    pub file: String,
    /// Frames in the file.
    pub frames: u64,
    /// Frames that were not UDP or TCP over IP (or fragments, or cut short).
    pub skipped: u64,
    /// One row per direction of every stream, by stream number (a → b first).
    pub directions: Vec<DirectionStats>,
}

/// The rows of every stream.
pub fn stats_of(capture: &Capture) -> Vec<DirectionStats> {
    streams(&capture.packets)
        .iter()
        .flat_map(|s| (0..2).filter_map(move |d| DirectionStats::of(s, d)))
        .collect()
}

/// Reads the capture, computes the statistics, writes `--csv` and `--json`.
pub fn run(command: &TraceStatsCommand) -> Result<TraceStatsReport, CommandError> {
    for p in [&command.csv, &command.json].into_iter().flatten() {
        check_writable(p)?;
    }
    let capture = read_capture(&command.file)?;
    let report = TraceStatsReport {
        file: command.file.display().to_string(),
        frames: capture.frames,
        skipped: capture.skipped,
        directions: stats_of(&capture),
    };
    if let Some(path) = &command.csv {
        write_atomic(path, report.csv().as_bytes())?;
    }
    if let Some(path) = &command.json {
        let mut text = serde_json::to_string_pretty(&report).map_err(std::io::Error::other)?;
        text.push('\n');
        write_atomic(path, text.as_bytes())?;
    }
    Ok(report)
}

const COLUMNS: [&str; 16] = [
    "stream",
    "protocol",
    "from",
    "to",
    "packets",
    "size_avg",
    "size_min",
    "size_max",
    "gap_avg_ms",
    "gap_median_ms",
    "gap_min_ms",
    "gap_max_ms",
    "gap_p1_ms",
    "gap_p99_ms",
    "pps",
    "bps",
];

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
}

impl TraceStatsReport {
    fn cells(d: &DirectionStats) -> Vec<String> {
        vec![
            d.stream.to_string(),
            d.protocol.name().to_string(),
            d.from.clone(),
            d.to.clone(),
            d.packets.to_string(),
            format!("{:.1}", d.size_avg),
            d.size_min.to_string(),
            d.size_max.to_string(),
            opt(d.gap_avg_ms, 3),
            opt(d.gap_median_ms, 3),
            opt(d.gap_min_ms, 3),
            opt(d.gap_max_ms, 3),
            opt(d.gap_p1_ms, 3),
            opt(d.gap_p99_ms, 3),
            opt(d.pps, 3),
            opt(d.bps, 0),
        ]
    }

    /// The table as CSV: one row per direction, the columns of [`DirectionStats`]; an empty
    /// field where a direction has a single packet.
    pub fn csv(&self) -> String {
        let mut out = COLUMNS.join(",");
        out.push('\n');
        for d in &self.directions {
            let cells: Vec<String> = Self::cells(d)
                .into_iter()
                .map(|c| if c == "-" { String::new() } else { c })
                .collect();
            out.push_str(&cells.join(","));
            out.push('\n');
        }
        out
    }

    /// The table printed on the terminal.
    pub fn text(&self) -> String {
        let header = [
            "stream",
            "proto",
            "from",
            "to",
            "packets",
            "size avg",
            "min",
            "max",
            "gap avg ms",
            "median",
            "min",
            "max",
            "1%",
            "99%",
            "pps",
            "bit/s",
        ];
        let rows: Vec<Vec<String>> = std::iter::once(header.map(String::from).to_vec())
            .chain(self.directions.iter().map(Self::cells))
            .collect();
        let widths: Vec<usize> = (0..header.len())
            .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
            .collect();
        let mut out = String::new();
        for row in &rows {
            let line: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (cell, w))| {
                    if (2..=3).contains(&i) {
                        format!("{cell:<w$}")
                    } else {
                        format!("{cell:>w$}")
                    }
                })
                .collect();
            let _ = writeln!(out, "{}", line.join("  ").trim_end());
        }
        let _ = writeln!(
            out,
            "{} frames, {} streams, {} frames not UDP/TCP over IP; payload bytes, gaps between \
             packets of one direction",
            self.frames,
            self.directions.iter().map(|d| d.stream).max().unwrap_or(0),
            self.skipped
        );
        out
    }
}

/// One direction of one stream of a capture, as a send schedule for `latlab gen --trace`.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceReplay {
    /// `FILE stream N a→b ×SPEED`, for the results.
    pub name: String,
    /// Its messages: payload sizes and gaps (divided by the speed).
    pub messages: Arc<[Message]>,
}

/// The replay of stream `stream` (numbered as `trace-stats` numbers them; the one with the
/// most packets when `None`), in its direction with more packets, at `speed` times the
/// captured pace. Errors name `--stream` or `--speed`.
pub fn replay(
    path: &Path,
    capture: &Capture,
    stream: Option<usize>,
    speed: f64,
) -> Result<TraceReplay, CommandError> {
    if !(speed.is_finite() && speed > 0.0) {
        return Err(CommandError::Usage(format!(
            "--speed must be a number above 0, not {speed}"
        )));
    }
    let all = streams(&capture.packets);
    let chosen = match stream {
        Some(n) => all.iter().find(|s| s.number == n).ok_or_else(|| {
            CommandError::Usage(format!(
                "--stream {n}: {} has streams 1 to {} (see latlab trace-stats)",
                path.display(),
                all.len()
            ))
        })?,
        None => all
            .iter()
            .max_by_key(|s| (s.packets(), std::cmp::Reverse(s.number)))
            .ok_or_else(|| {
                CommandError::Usage(format!(
                    "--trace {}: no UDP or TCP stream with payload in the capture",
                    path.display()
                ))
            })?,
    };
    let dir = usize::from(chosen.directions[1].len() > chosen.directions[0].len());
    let packets = &chosen.directions[dir];
    let mut gaps = stats::gaps(packets).into_iter();
    let messages: Arc<[Message]> = packets
        .iter()
        .enumerate()
        .map(|(i, p)| Message {
            size: p.1.min(latlab_probe::MAX_PAYLOAD),
            gap_ns: if i == 0 {
                0
            } else {
                (gaps.next().unwrap_or(0) as f64 / speed).round() as u64
            },
        })
        .collect();
    let (from, to) = if dir == 0 {
        (chosen.a, chosen.b)
    } else {
        (chosen.b, chosen.a)
    };
    Ok(TraceReplay {
        name: format!(
            "{} stream {} {from}→{to} x{speed}",
            path.display(),
            chosen.number
        ),
        messages,
    })
}

#[cfg(test)]
mod tests;
