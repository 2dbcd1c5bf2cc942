//! The artefacts of the game-server study (Emmerich et al., sections IV–V), drawn from the
//! point files only: Table I (`table1.md`, `table1.csv`), Figure 2 (average latency against
//! offered load), Figure 3 (latency histogram with 0.5 µs bins), Figure 4 (buffer size against
//! lossless load and overload latency), the flood table and `report.md`.
//!
//! Everything here reads `<out>/points/*.json` (and the `.hlog` next to each), so
//! [`write_artefacts`] can be run again on any results folder. Percentiles come from the
//! point's JSON summary; a percentile that is not in it (p95 is not a standard latlab
//! percentile, so it does not survive a JSON round trip of `Summary`) is computed from the
//! point's `.hlog`, which holds the whole histogram.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use latlab_stats::hlog::{merge_intervals, read_hlog, HlogWriter};
use latlab_stats::{point_rank, Estimate, LatencyHistogram, Quantile, Z_95};
use plotters::prelude::*;
use serde::Deserialize;

use crate::plot::{chart, svg_page, DrawResult, Page, PALETTE};

use crate::gamestudy::{Point, DEFAULT_RCVBUF, DROP_THRESHOLD, LOSSLESS_THRESHOLD};
use crate::results::write_atomic;

/// The percentiles of Table I.
pub const QUANTILES: [Quantile; 4] = [Quantile::P50, Quantile::P95, Quantile::P99, Quantile::P99_9];

/// Bin width of Figure 3, ns.
const BIN_NS: u64 = 500;

/// One interval .hlog of a point's latency histogram (start time now, one interval covering
/// it).
///
/// The point's sending time is not known here, so the interval has a nominal length of one
/// second; the histogram (untagged) is what matters.
pub fn hlog_of(h: &LatencyHistogram, key: &str) -> io::Result<Vec<u8>> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let comment = format!(
        "latlab game-server study point {key}: latency until the last client has its copy, ns"
    );
    let mut w = HlogWriter::new(Vec::new(), now, &comment).map_err(io::Error::other)?;
    w.write_interval(0.0, 1.0, h, None)
        .map_err(io::Error::other)?;
    Ok(w.into_inner())
}

/// Reads every points/*.json (+ .hlog) under `out`, writes the artefacts into `out`, returns
/// the path of report.md.
pub fn write_artefacts(out: &Path, topology: &str) -> io::Result<PathBuf> {
    let loaded = load_points(&out.join("points"))?;
    let mut figures: Vec<(String, String)> = Vec::new();
    let mut missing_figures: Vec<String> = Vec::new();

    if loaded.points.is_empty() {
        let report = empty_report(topology, &loaded);
        let path = out.join("report.md");
        write_atomic(&path, report.as_bytes())?;
        return Ok(path);
    }
    let study = Study::new(&loaded.points);

    // Table I.
    let table_md = table1_md(&study);
    write_atomic(&out.join("table1.md"), table_md.as_bytes())?;
    write_atomic(&out.join("table1.csv"), table1_csv(&study).as_bytes())?;

    // Figure 2, per I/O mode.
    for io_mode in study.ios() {
        let name = if io_mode == "socket" {
            "fig2-latency-vs-load.svg".to_string()
        } else {
            format!("fig2-latency-vs-load-{io_mode}.svg")
        };
        match fig2(&study, &io_mode) {
            Some(svg) => {
                write_atomic(&out.join(&name), svg?.as_bytes())?;
                figures.push((
                    format!("Figure 2 ({io_mode}): average latency vs offered load"),
                    name,
                ));
            }
            None => {
                missing_figures.push(format!("{name}: no sweep points with I/O mode {io_mode}"))
            }
        }
    }
    if !study.ios().iter().any(|i| i == "socket") {
        missing_figures
            .push("fig2-latency-vs-load.svg: no sweep points with I/O mode socket".into());
    }
    // Figure 3.
    match fig3(&study) {
        Ok(svg) => {
            write_atomic(&out.join("fig3-histogram.svg"), svg.as_bytes())?;
            figures.push((
                "Figure 3: latency histogram, 0.5 µs bins".into(),
                "fig3-histogram.svg".into(),
            ));
        }
        Err(why) => missing_figures.push(format!("fig3-histogram.svg: {why}")),
    }
    // Figure 4.
    match fig4(&study) {
        Ok(svg) => {
            write_atomic(&out.join("fig4-buffers.svg"), svg.as_bytes())?;
            figures.push((
                "Figure 4: buffer size vs lossless load and overload latency".into(),
                "fig4-buffers.svg".into(),
            ));
        }
        Err(why) => missing_figures.push(format!("fig4-buffers.svg: {why}")),
    }
    // The flood.
    let flood = flood_md(&study);
    write_atomic(&out.join("flood.md"), flood.as_bytes())?;

    let report = report_md(
        &study,
        &loaded,
        topology,
        &table_md,
        &flood,
        &figures,
        &missing_figures,
    );
    let path = out.join("report.md");
    write_atomic(&path, report.as_bytes())?;
    Ok(path)
}

// ---------------------------------------------------------------------------------------------
// Loading

/// One point read back from its files.
#[derive(Debug)]
struct Loaded {
    /// File stem, the point's key.
    key: String,
    point: Point,
    /// The raw `latency_last_ns` object, for percentiles `Summary` does not read back.
    raw_last: serde_json::Value,
    /// The histogram from the `.hlog`, when there is one that reads.
    hist: Option<LatencyHistogram>,
}

#[derive(Debug, Default)]
struct LoadedAll {
    points: Vec<Loaded>,
    /// `file: reason` for files that were not used (or only partly).
    skipped: Vec<String>,
    /// The points folder is not there at all.
    no_folder: bool,
}

fn load_points(dir: &Path) -> io::Result<LoadedAll> {
    let mut all = LoadedAll::default();
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            all.no_folder = true;
            return Ok(all);
        }
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
    };
    let mut names: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    for path in names {
        let file = path
            .file_name()
            .map_or_else(String::new, |f| f.to_string_lossy().into_owned());
        let key = path
            .file_stem()
            .map_or_else(String::new, |f| f.to_string_lossy().into_owned());
        let parsed = fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|text| {
                serde_json::from_str::<serde_json::Value>(&text).map_err(|e| e.to_string())
            })
            .and_then(|value| {
                let point = Point::deserialize(&value).map_err(|e| e.to_string())?;
                Ok((point, value))
            });
        let (point, value) = match parsed {
            Ok(p) => p,
            Err(reason) => {
                all.skipped.push(format!("{file}: {reason}"));
                continue;
            }
        };
        if !point.load_pps.is_finite() || !point.loss_ratio.is_finite() {
            all.skipped
                .push(format!("{file}: load or loss is not a finite number"));
            continue;
        }
        let hlog_path = path.with_extension("hlog");
        let hist = match fs::read(&hlog_path) {
            Ok(bytes) => match read_hlog(&bytes[..]).and_then(|i| merge_intervals(&i, None)) {
                Ok(h) => Some(h),
                Err(e) => {
                    all.skipped.push(format!(
                        "{key}.hlog: {e} (the point's JSON is used without it)"
                    ));
                    None
                }
            },
            Err(_) => None,
        };
        let raw_last = value
            .get("latency_last_ns")
            .cloned()
            .unwrap_or(serde_json::Value::Null);
        all.points.push(Loaded {
            key,
            point,
            raw_last,
            hist,
        });
    }
    Ok(all)
}

/// A percentile of a point's `latency_last_ns`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Pct {
    Value(u64),
    TooFew,
    Missing,
}

impl Loaded {
    fn pct(&self, q: &Quantile) -> Pct {
        match self.raw_last.get(q.key) {
            Some(serde_json::Value::Number(n)) => {
                if let Some(v) = n.as_u64() {
                    return Pct::Value(v);
                }
            }
            Some(serde_json::Value::Null) => return Pct::TooFew,
            _ => {}
        }
        match &self.hist {
            Some(h) => match Estimate::of(h, q.q, Z_95) {
                Estimate::Value { value_ns, .. } => Pct::Value(value_ns),
                Estimate::TooFewSamples { .. } => Pct::TooFew,
            },
            None => Pct::Missing,
        }
    }

    fn count(&self) -> u64 {
        self.point.latency_last_ns.count
    }

    fn mean_us(&self) -> Option<f64> {
        (self.count() > 0).then(|| self.point.latency_last_ns.mean_ns / 1000.0)
    }

    fn std_us(&self) -> Option<f64> {
        (self.count() > 0).then(|| self.point.latency_last_ns.stddev_ns / 1000.0)
    }
}

fn pct_us(p: Pct) -> String {
    match p {
        Pct::Value(v) => format!("{:.1}", v as f64 / 1000.0),
        Pct::TooFew => "too few samples".into(),
        Pct::Missing => "n/a".into(),
    }
}

fn pct_ns(p: Pct) -> String {
    match p {
        Pct::Value(v) => v.to_string(),
        Pct::TooFew | Pct::Missing => String::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// The study's structure

/// Sort rank of an I/O mode: socket first, then batched, then anything else by name.
fn io_rank(io_mode: &str) -> u8 {
    match io_mode {
        "socket" => 0,
        "batched" => 1,
        _ => 2,
    }
}

type SeriesKey = (u8, String, usize, u32);

#[derive(Debug)]
struct Study<'a> {
    /// Sweep points per (io rank, io, rcvbuf, clients), by load.
    sweep: BTreeMap<SeriesKey, Vec<&'a Loaded>>,
    /// Table points sorted by io, buffer, fraction.
    table: Vec<&'a Loaded>,
    /// Flood points.
    flood: Vec<&'a Loaded>,
    /// Points of other phases.
    other: Vec<&'a Loaded>,
    all: &'a [Loaded],
}

impl<'a> Study<'a> {
    fn new(points: &'a [Loaded]) -> Study<'a> {
        let mut sweep: BTreeMap<SeriesKey, Vec<&Loaded>> = BTreeMap::new();
        let (mut table, mut flood, mut other) = (Vec::new(), Vec::new(), Vec::new());
        for l in points {
            let p = &l.point;
            match p.phase.as_str() {
                "sweep" => sweep
                    .entry((io_rank(&p.io), p.io.clone(), p.rcvbuf, p.clients))
                    .or_default()
                    .push(l),
                "table" => table.push(l),
                ph if ph.starts_with("flood") => flood.push(l),
                _ => other.push(l),
            }
        }
        for s in sweep.values_mut() {
            s.sort_by(|a, b| a.point.load_pps.total_cmp(&b.point.load_pps));
        }
        table.sort_by(|a, b| {
            let (a, b) = (&a.point, &b.point);
            (io_rank(&a.io), &a.io, a.rcvbuf, a.clients)
                .cmp(&(io_rank(&b.io), &b.io, b.rcvbuf, b.clients))
                .then(
                    a.load_fraction
                        .unwrap_or(f64::NAN)
                        .total_cmp(&b.load_fraction.unwrap_or(f64::NAN)),
                )
                .then(a.load_pps.total_cmp(&b.load_pps))
        });
        flood.sort_by(|a, b| {
            let (a, b) = (&a.point, &b.point);
            let rank = |p: &Point| {
                (
                    p.rate_limit_pps.is_some(),
                    p.rcvbuf != DEFAULT_RCVBUF,
                    p.rcvbuf,
                )
            };
            rank(a).cmp(&rank(b))
        });
        Study {
            sweep,
            table,
            flood,
            other,
            all: points,
        }
    }

    /// I/O modes with sweep points, in report order.
    fn ios(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for (_, io_mode, _, _) in self.sweep.keys() {
            if !v.contains(io_mode) {
                v.push(io_mode.clone());
            }
        }
        v
    }

    fn buffers(&self, io_mode: &str) -> Vec<usize> {
        let set: BTreeSet<usize> = self
            .sweep
            .keys()
            .filter(|k| k.1 == io_mode)
            .map(|k| k.2)
            .collect();
        set.into_iter().collect()
    }

    fn clients(&self, io_mode: &str) -> Vec<u32> {
        let set: BTreeSet<u32> = self
            .sweep
            .keys()
            .filter(|k| k.1 == io_mode)
            .map(|k| k.3)
            .collect();
        set.into_iter().collect()
    }

    fn series(&self, io_mode: &str, rcvbuf: usize, clients: u32) -> &[&'a Loaded] {
        self.sweep
            .get(&(io_rank(io_mode), io_mode.to_string(), rcvbuf, clients))
            .map_or(&[], |v| v.as_slice())
    }

    /// The buffer Figure 2 shows: the default when there is one, else the largest.
    fn fig_buffer(&self, io_mode: &str) -> Option<usize> {
        let b = self.buffers(io_mode);
        if b.contains(&DEFAULT_RCVBUF) {
            Some(DEFAULT_RCVBUF)
        } else {
            b.last().copied()
        }
    }
}

/// The lowest load with loss above [`DROP_THRESHOLD`].
fn first_drop(series: &[&Loaded]) -> Option<f64> {
    series
        .iter()
        .find(|l| l.point.loss_ratio > DROP_THRESHOLD)
        .map(|l| l.point.load_pps)
}

fn max_load(series: &[&Loaded]) -> f64 {
    series.iter().map(|l| l.point.load_pps).fold(0.0, f64::max)
}

/// The highest load with loss at or below [`LOSSLESS_THRESHOLD`].
fn max_lossless(series: &[&Loaded]) -> Option<f64> {
    series
        .iter()
        .filter(|l| l.point.loss_ratio <= LOSSLESS_THRESHOLD)
        .map(|l| l.point.load_pps)
        .reduce(f64::max)
}

/// The average of the mean latencies (µs) of the points with loss above [`DROP_THRESHOLD`].
fn overload_latency_us(series: &[&Loaded]) -> Option<f64> {
    let v: Vec<f64> = series
        .iter()
        .filter(|l| l.point.loss_ratio > DROP_THRESHOLD)
        .filter_map(|l| l.mean_us())
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn kpps(pps: f64) -> String {
    format!("{:.1} kpps", pps / 1000.0)
}

fn us(v: f64) -> String {
    format!("{v:.1} µs")
}

/// Buffer size in KiB as Table I shows it.
fn buf_label(rcvbuf: usize) -> String {
    if rcvbuf == DEFAULT_RCVBUF {
        format!("{} (default)", rcvbuf / 1024)
    } else {
        format!("{}", rcvbuf / 1024)
    }
}

/// Buffer size for prose: `64 KiB`, `208 KiB (default)`.
fn buf_kib(rcvbuf: usize) -> String {
    if rcvbuf == DEFAULT_RCVBUF {
        format!("{} KiB (default)", rcvbuf / 1024)
    } else {
        format!("{} KiB", rcvbuf / 1024)
    }
}

fn first_drop_text(series: &[&Loaded]) -> String {
    match first_drop(series) {
        Some(l) => kpps(l),
        None => format!("none up to {}", kpps(max_load(series))),
    }
}

fn pct_text(fraction: f64) -> String {
    format!("{:.0}%", fraction * 100.0)
}

// ---------------------------------------------------------------------------------------------
// Table I

fn table1_md(study: &Study<'_>) -> String {
    let mut s = String::new();
    let clients: BTreeSet<u32> = study.table.iter().map(|l| l.point.clients).collect();
    let clients: Vec<String> = clients.iter().map(|c| c.to_string()).collect();
    let _ = writeln!(
        s,
        "Table I. Latency until the last client has its copy, {} clients\n",
        if clients.is_empty() {
            "–".to_string()
        } else {
            clients.join("/")
        }
    );
    if study.table.is_empty() {
        s.push_str("No table points were measured.\n");
        return s;
    }
    s.push_str("| I/O | Buffer [KiB] | Load* [%] (offered) | Samples | Average [µs] | Std. Dev. [µs] | 50th Perc. [µs] | 95th Perc. [µs] | 99th Perc. [µs] | 99.9th Perc. [µs] | Loss [%] |\n");
    s.push_str("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for l in &study.table {
        let p = &l.point;
        let load = match p.load_fraction {
            Some(f) => format!("{} ({})", pct_text(f), kpps(p.load_pps)),
            None => kpps(p.load_pps),
        };
        let avg = l
            .mean_us()
            .map_or_else(|| "no samples".into(), |v| format!("{v:.1}"));
        let std = l
            .std_us()
            .map_or_else(|| "no samples".into(), |v| format!("{v:.1}"));
        let pcts: Vec<String> = QUANTILES.iter().map(|q| pct_us(l.pct(q))).collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {:.2} |",
            p.io,
            buf_label(p.rcvbuf),
            load,
            l.count(),
            avg,
            std,
            pcts.join(" | "),
            p.loss_ratio * 100.0
        );
    }
    s.push_str("\n*) Normalized to the load at which more than 5% of the copies were first lost (the first-drop load), i.e. a load ≥ 100% is an overload scenario. \"too few samples\": the sample cannot bound that percentile with 95% confidence.\n");
    s
}

fn table1_csv(study: &Study<'_>) -> String {
    let mut s = String::from(
        "io,clients,rcvbuf_bytes,rcvbuf_kib,load_fraction,load_pps,samples,mean_ns,stddev_ns,p50_ns,p95_ns,p99_ns,p99_9_ns,loss_ratio\n",
    );
    for l in &study.table {
        let p = &l.point;
        let (mean, std) = if l.count() > 0 {
            (
                format!("{:.1}", p.latency_last_ns.mean_ns),
                format!("{:.1}", p.latency_last_ns.stddev_ns),
            )
        } else {
            (String::new(), String::new())
        };
        let pcts: Vec<String> = QUANTILES.iter().map(|q| pct_ns(l.pct(q))).collect();
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{}",
            p.io,
            p.clients,
            p.rcvbuf,
            p.rcvbuf / 1024,
            p.load_fraction.map_or_else(String::new, |f| f.to_string()),
            p.load_pps,
            l.count(),
            mean,
            std,
            pcts.join(","),
            p.loss_ratio
        );
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Figures

/// One Figure 2 series: (load kpps, mean µs, std µs, first drop).
type Fig2Series = (String, Vec<(f64, f64, f64, bool)>);

fn fig2(study: &Study<'_>, io_mode: &str) -> Option<io::Result<String>> {
    let rcvbuf = study.fig_buffer(io_mode)?;
    let mut series: Vec<Fig2Series> = Vec::new();
    for clients in study.clients(io_mode) {
        let s = study.series(io_mode, rcvbuf, clients);
        let drop = first_drop(s);
        let pts = s
            .iter()
            .filter_map(|l| {
                let m = l.mean_us().filter(|m| *m > 0.0)?;
                let load = l.point.load_pps;
                Some((
                    load / 1000.0,
                    m,
                    l.std_us().unwrap_or(0.0),
                    drop == Some(load),
                ))
            })
            .collect();
        series.push((format!("{clients} clients"), pts));
    }
    let title = format!(
        "Average latency vs offered load ({io_mode}, {} buffer)",
        buf_kib(rcvbuf)
    );
    Some(
        svg_page(&title, (900, 600), |root| draw_fig2(root, &title, &series))
            .map_err(io::Error::other),
    )
}

fn draw_fig2(root: &Page<'_>, title: &str, series: &[Fig2Series]) -> DrawResult {
    let all = series.iter().flat_map(|s| s.1.iter());
    let (mut x_hi, mut y_lo, mut y_hi) = (0.0f64, f64::MAX, 0.0f64);
    for &(x, m, sd, _) in all {
        x_hi = x_hi.max(x);
        y_lo = y_lo.min(if m - sd > 0.0 { m - sd } else { m });
        y_hi = y_hi.max(m + sd);
    }
    if y_hi <= 0.0 {
        (y_lo, y_hi) = (1.0, 10.0);
    }
    let y_lo = (y_lo / 1.5).max(0.01);
    let y_hi = (y_hi * 2.0).max(y_lo * 10.0);
    let x_hi = if x_hi > 0.0 { x_hi * 1.08 } else { 1.0 };
    let mut chart =
        chart(root, title, 22).build_cartesian_2d(0.0..x_hi, (y_lo..y_hi).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("offered load (kpps)")
        .y_desc("average latency, last client (µs)")
        .y_label_formatter(&|y| format!("{y}"))
        .draw()?;
    for (i, (label, pts)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        // ± one standard deviation as error bars.
        chart.draw_series(pts.iter().filter(|p| p.2 > 0.0).map(|&(x, m, sd, _)| {
            PathElement::new(
                vec![(x, (m - sd).max(y_lo)), (x, (m + sd).min(y_hi))],
                color.mix(0.6).stroke_width(1),
            )
        }))?;
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|p| (p.0, p.1)),
                color.stroke_width(2),
            ))?
            .label(label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart.draw_series(
            pts.iter()
                .map(|&(x, m, _, _)| Circle::new((x, m), 3, color.filled())),
        )?;
        // The first load with more than 5% loss: a big ring and a label.
        chart.draw_series(pts.iter().filter(|p| p.3).map(|&(x, m, _, _)| {
            EmptyElement::at((x, m))
                + Circle::new((0, 0), 8, BLACK.stroke_width(2))
                + Text::new(
                    "first drop",
                    (-30, -24),
                    ("sans-serif", 13).into_font().color(&BLACK),
                )
        }))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}

fn fig3(study: &Study<'_>) -> Result<String, String> {
    let io_mode = "socket";
    let clients = *study
        .clients(io_mode)
        .first()
        .ok_or("no socket sweep points")?;
    let rcvbuf = study.fig_buffer(io_mode).ok_or("no socket sweep points")?;
    let series = study.series(io_mode, rcvbuf, clients);
    let l = series
        .iter()
        .min_by(|a, b| {
            (a.point.load_pps - 30_000.0)
                .abs()
                .total_cmp(&(b.point.load_pps - 30_000.0).abs())
        })
        .ok_or("no socket sweep points")?;
    let h = l
        .hist
        .as_ref()
        .ok_or_else(|| format!("point {} has no readable .hlog", l.key))?;
    if h.is_empty() {
        return Err(format!("point {} has no samples", l.key));
    }
    // The body of the distribution, as the paper draws it: up to the 99th percentile or four
    // times the median, whichever is lower; what lies beyond is counted in the subtitle.
    let p99 = h
        .value_at_rank(point_rank(h.len(), 0.99))
        .unwrap_or_else(|| h.max());
    let p50 = h
        .value_at_rank(point_rank(h.len(), 0.5))
        .unwrap_or_else(|| h.max());
    let top = p99.min(p50.saturating_mul(4)).max(p50);
    let mut bins: BTreeMap<u64, u64> = BTreeMap::new();
    let mut beyond = 0u64;
    for v in h.as_hdr().iter_recorded() {
        let value = v.value_iterated_to();
        if value <= top {
            *bins.entry(value / BIN_NS).or_default() += v.count_at_value();
        } else {
            beyond += v.count_at_value();
        }
    }
    let title = format!(
        "Latency histogram, {io_mode}, {clients} clients, {} buffer, {} offered",
        buf_kib(rcvbuf),
        kpps(l.point.load_pps)
    );
    let sub = format!(
        "{} samples, 0.5 µs bins, up to {}; {} samples ({:.2}%) above it not drawn",
        h.len(),
        us(top as f64 / 1000.0),
        beyond,
        100.0 * beyond as f64 / h.len() as f64
    );
    svg_page(&title, (900, 600), |root| {
        draw_fig3(root, &title, &sub, &bins)
    })
}

fn draw_fig3(root: &Page<'_>, title: &str, sub: &str, bins: &BTreeMap<u64, u64>) -> DrawResult {
    let first = bins.keys().next().copied().unwrap_or(0);
    let last = bins.keys().last().copied().unwrap_or(1);
    let x_lo = first as f64 * 0.5;
    let x_hi = (last + 1) as f64 * 0.5;
    let y_hi = bins.values().copied().max().unwrap_or(1).max(1) as f64 * 1.1;
    let root = root.titled(title, ("sans-serif", 20))?;
    let mut chart = chart(&root, sub, 14).build_cartesian_2d(x_lo..x_hi, 0.0..y_hi)?;
    chart
        .configure_mesh()
        .x_desc("latency, last client (µs)")
        .y_desc("probes per 0.5 µs bin")
        .draw()?;
    let color = PALETTE[0];
    chart.draw_series(bins.iter().map(|(&b, &c)| {
        let x0 = b as f64 * 0.5;
        Rectangle::new([(x0, 0.0), (x0 + 0.5, c as f64)], color.filled())
    }))?;
    Ok(())
}

/// Per buffer of socket mode, smallest client count: (KiB, max lossless kpps, overload µs).
type BufferRow = (usize, Option<f64>, Option<f64>);

fn buffer_rows(study: &Study<'_>, io_mode: &str) -> Option<(u32, Vec<BufferRow>)> {
    let clients = *study.clients(io_mode).first()?;
    let rows = study
        .buffers(io_mode)
        .into_iter()
        .map(|b| {
            let s = study.series(io_mode, b, clients);
            (b, max_lossless(s), overload_latency_us(s))
        })
        .collect();
    Some((clients, rows))
}

fn fig4(study: &Study<'_>) -> Result<String, String> {
    let (clients, rows) = buffer_rows(study, "socket").ok_or("no socket sweep points")?;
    let title =
        format!("Buffer size vs throughput and overload latency (socket, {clients} clients)");
    svg_page(&title, (1200, 550), |root| draw_fig4(root, &title, &rows))
}

fn draw_fig4(root: &Page<'_>, title: &str, rows: &[BufferRow]) -> DrawResult {
    let x_hi = rows
        .iter()
        .map(|r| r.0 as f64 / 1024.0)
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.1;
    let root = root.titled(title, ("sans-serif", 20))?;
    let panels = root.split_evenly((1, 2));
    let lossless: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| Some((r.0 as f64 / 1024.0, r.1? / 1000.0)))
        .collect();
    let overload: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| Some((r.0 as f64 / 1024.0, r.2?)))
        .collect();
    let specs = [
        (
            "(a) max lossless load",
            "max load with no loss (kpps)",
            lossless,
            PALETTE[0],
        ),
        (
            "(b) average latency under overload",
            "average latency, loss > 5% (µs)",
            overload,
            PALETTE[1],
        ),
    ];
    for (area, (caption, y_desc, pts, color)) in panels.iter().zip(specs) {
        let y_hi = pts.iter().map(|p| p.1).fold(0.0, f64::max).max(1.0) * 1.2;
        let mut chart = chart(area, caption, 16).build_cartesian_2d(0.0..x_hi, 0.0..y_hi)?;
        chart
            .configure_mesh()
            .x_desc("receive buffer (KiB)")
            .y_desc(y_desc)
            .draw()?;
        chart.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?;
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The flood

fn flood_label(p: &Point) -> String {
    let mut s = if p.rcvbuf == DEFAULT_RCVBUF {
        format!("default buffer ({} KiB)", p.rcvbuf / 1024)
    } else {
        format!("{} KiB buffer", p.rcvbuf / 1024)
    };
    if let Some(r) = p.rate_limit_pps {
        let _ = write!(s, " + per-client rate limit {r:.0} pps");
    }
    s
}

fn flood_md(study: &Study<'_>) -> String {
    let mut s = String::from("Flood: one client floods the server while the measuring client plays; latency of the normal clients (until the last has its copy).\n\n");
    if study.flood.is_empty() {
        s.push_str("No flood points were measured.\n");
        return s;
    }
    s.push_str("| Scenario | I/O | Clients | Flood | Load | Samples | Average [µs] | 50th [µs] | 99th [µs] | 99.9th [µs] | Max [µs] | Loss [%] | rate_limited | received |\n");
    s.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for l in &study.flood {
        let p = &l.point;
        let counter = |k: &str| {
            p.server
                .get(k)
                .map_or_else(|| "n/a".into(), |v| v.to_string())
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {} | {} |",
            flood_label(p),
            p.io,
            p.clients,
            p.flood_pps.map_or_else(|| "n/a".into(), kpps),
            kpps(p.load_pps),
            l.count(),
            l.mean_us()
                .map_or_else(|| "no samples".into(), |v| format!("{v:.1}")),
            pct_us(l.pct(&Quantile::P50)),
            pct_us(l.pct(&Quantile::P99)),
            pct_us(l.pct(&Quantile::P99_9)),
            if l.count() > 0 {
                format!("{:.1}", p.latency_last_ns.max_ns as f64 / 1000.0)
            } else {
                "no samples".into()
            },
            p.loss_ratio * 100.0,
            counter("rate_limited"),
            counter("received"),
        );
    }
    s
}

// ---------------------------------------------------------------------------------------------
// report.md

fn empty_report(topology: &str, loaded: &LoadedAll) -> String {
    let mut s = String::from("# Game-server latency study\n\n");
    let _ = writeln!(s, "Topology: {topology}\n");
    if loaded.no_folder {
        s.push_str("No points were measured: there is no `points/` folder.\n");
    } else {
        s.push_str("No points were measured: `points/` holds no readable point file.\n");
    }
    skipped_section(&mut s, loaded);
    s
}

fn skipped_section(s: &mut String, loaded: &LoadedAll) {
    if loaded.skipped.is_empty() {
        return;
    }
    s.push_str("\n## Skipped files\n\n");
    for k in &loaded.skipped {
        let _ = writeln!(s, "- skipped: {k}");
    }
}

fn join_kpps(loads: &BTreeSet<u64>) -> String {
    loads
        .iter()
        .map(|&l| format!("{:.1}", l as f64 / 1000.0))
        .collect::<Vec<_>>()
        .join(", ")
}

fn report_md(
    study: &Study<'_>,
    loaded: &LoadedAll,
    topology: &str,
    table_md: &str,
    flood: &str,
    figures: &[(String, String)],
    missing_figures: &[String],
) -> String {
    let mut s = String::from("# Game-server latency study\n\n");
    let _ = writeln!(s, "After Emmerich et al., sections IV–V: a game server copies each incoming packet to every client; latency is the time until the last client has its copy.\n");
    let _ = writeln!(s, "Topology: {topology}\n");

    // How the study was run.
    s.push_str("## How the study was run\n\n");
    let count = |ph: &str| study.all.iter().filter(|l| l.point.phase == ph).count();
    let _ = writeln!(
        s,
        "- points: {} ({} sweep, {} table, {} flood, {} other)",
        study.all.len(),
        count("sweep"),
        study.table.len(),
        study.flood.len(),
        study.other.len()
    );
    let ios = study.ios();
    let all_sweep = study.sweep.values().flatten();
    let bufs: BTreeSet<usize> = study.sweep.keys().map(|k| k.2).collect();
    let clients: BTreeSet<u32> = study.sweep.keys().map(|k| k.3).collect();
    let loads: BTreeSet<u64> = all_sweep.map(|l| l.point.load_pps.round() as u64).collect();
    if !ios.is_empty() {
        let _ = writeln!(s, "- server I/O modes: {}", ios.join(", "));
        let _ = writeln!(
            s,
            "- receive buffers (KiB): {}",
            bufs.iter()
                .map(|&b| buf_label(b))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(
            s,
            "- client counts: {}",
            clients
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(s, "- offered loads of the sweep (kpps): {} (each series stops two loads after its first drop)", join_kpps(&loads));
    }
    let mut spans: Vec<f64> = study
        .all
        .iter()
        .filter(|l| l.point.achieved_pps > 0.0 && l.point.sent > 1)
        .map(|l| l.point.sent as f64 / l.point.achieved_pps)
        .collect();
    spans.sort_by(f64::total_cmp);
    if let Some(&median) = spans.get(spans.len() / 2) {
        let _ = writeln!(s, "- measured time per point: about {median:.2} s after warm-up (inferred: probes sent ÷ achieved rate, median over points)");
    }
    let _ = writeln!(
        s,
        "- first drop: copy loss > {:.0}%; lossless: copy loss ≤ {:.1}%",
        DROP_THRESHOLD * 100.0,
        LOSSLESS_THRESHOLD * 100.0
    );

    // First-drop loads.
    s.push_str("\n## First-drop load\n\nThe lowest offered load of each sweep series with more than 5% of the copies lost.\n\n");
    if study.sweep.is_empty() {
        s.push_str("No sweep points were measured.\n");
    } else {
        s.push_str("| I/O | Buffer [KiB] | Clients | First-drop load |\n|---|---|---:|---:|\n");
        for ((_, io_mode, rcvbuf, clients), series) in &study.sweep {
            let _ = writeln!(
                s,
                "| {io_mode} | {} | {clients} | {} |",
                buf_label(*rcvbuf),
                first_drop_text(series)
            );
        }
    }

    // Table I.
    s.push_str("\n## Table I\n\n");
    s.push_str(table_md);
    s.push_str("\n(also `table1.md`, `table1.csv`)\n");

    // Figures.
    s.push_str("\n## Figures\n\n");
    for (caption, file) in figures {
        let _ = writeln!(s, "![{caption}]({file})\n");
    }
    for m in missing_figures {
        let _ = writeln!(s, "- not drawn: {m}");
    }

    // The flood.
    s.push_str("\n## Flood\n\n");
    s.push_str(flood);

    // Conclusions.
    s.push_str("\n## Conclusions from this run\n\n");
    for (i, c) in conclusions(study).iter().enumerate() {
        let _ = writeln!(s, "{}. {c}", i + 1);
    }
    skipped_section(&mut s, loaded);
    s
}

fn conclusions(study: &Study<'_>) -> Vec<String> {
    vec![
        conclusion_buffers(study),
        conclusion_low_load(study),
        conclusion_batched(study),
        conclusion_clients(study),
        conclusion_flood(study),
    ]
}

fn opt_kpps(v: Option<f64>) -> String {
    v.map_or_else(|| "no lossless load".into(), kpps)
}

fn conclusion_buffers(study: &Study<'_>) -> String {
    let io_mode = "socket";
    let Some((clients, rows)) = buffer_rows(study, io_mode) else {
        return "Buffers vs throughput: no socket sweep points, so nothing to conclude.".into();
    };
    if rows.len() < 2 {
        return format!("Buffers vs throughput: only one buffer size was measured ({}, socket, {clients} clients), so nothing to compare.", buf_kib(rows[0].0));
    }
    let list: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{}: max lossless {}, overload latency {}",
                buf_kib(r.0),
                opt_kpps(r.1),
                r.2.map_or_else(|| "none (never overloaded)".into(), us)
            )
        })
        .collect();
    let data = format!("(socket, {clients} clients; {})", list.join("; "));
    let lossless = |i: usize| rows[i].1.unwrap_or(0.0);
    let last = rows.len() - 1;
    let knee = (0..last)
        .find(|&k| lossless(k) > 0.0 && (k + 1..=last).all(|j| lossless(j) <= lossless(k) * 1.05));
    let Some(k) = knee else {
        return format!("Buffers vs throughput: the max lossless load still grows up to the largest buffer, so the data does not show a size above which a larger buffer stops helping {data}.");
    };
    let (bk, bl) = (rows[k].0 / 1024, rows[last].0 / 1024);
    match (rows[k].2, rows[last].2) {
        (Some(ok), Some(ol)) if ol > ok * 1.05 => format!(
            "Buffers vs throughput: above {bk} KiB the max lossless load stops growing ({} at {bk} KiB, {} at {bl} KiB, within 5%) while the average latency under overload still grows ({} → {}, ×{:.1}): a buffer larger than {bk} KiB buys latency, not throughput {data}.",
            kpps(lossless(k)),
            kpps(lossless(last)),
            us(ok),
            us(ol),
            ol / ok
        ),
        (Some(ok), Some(ol)) => format!(
            "Buffers vs throughput: above {bk} KiB the max lossless load stops growing ({} at {bk} KiB, {} at {bl} KiB), but the overload latency does not grow with the buffer ({} → {}), so the data does not show the paper's trade-off {data}.",
            kpps(lossless(k)),
            kpps(lossless(last)),
            us(ok),
            us(ol)
        ),
        _ => format!(
            "Buffers vs throughput: above {bk} KiB the max lossless load stops growing ({} at {bk} KiB, {} at {bl} KiB), but overload latency is missing for {bk} or {bl} KiB (no sweep point with loss > 5%), so whether latency still grows is not shown {data}.",
            kpps(lossless(k)),
            kpps(lossless(last))
        ),
    }
}

fn conclusion_low_load(study: &Study<'_>) -> String {
    let mut parts = Vec::new();
    let low: Vec<&&Loaded> = study
        .table
        .iter()
        .filter(|l| {
            l.point
                .load_fraction
                .is_some_and(|f| (f - 0.2).abs() < 1e-6)
        })
        .collect();
    if low.is_empty() {
        return "Latency at 20% load: no table points at 20% of the first-drop load, so buffers cannot be compared at low load.".into();
    }
    let mut ios: Vec<&str> = low.iter().map(|l| l.point.io.as_str()).collect();
    ios.sort_by_key(|i| (io_rank(i), *i));
    ios.dedup();
    for io_mode in ios {
        let pts: Vec<(usize, f64, Pct)> = low
            .iter()
            .filter(|l| l.point.io == io_mode)
            .filter_map(|l| Some((l.point.rcvbuf, l.mean_us()?, l.pct(&Quantile::P99))))
            .collect();
        let list: Vec<String> = pts
            .iter()
            .map(|(b, m, p99)| {
                format!(
                    "{} {} (p99 {})",
                    buf_kib(*b),
                    us(*m),
                    match p99 {
                        Pct::Value(v) => us(*v as f64 / 1000.0),
                        Pct::TooFew => "too few samples".into(),
                        Pct::Missing => "n/a".into(),
                    }
                )
            })
            .collect();
        if pts.len() < 2 {
            parts.push(format!(
                "{io_mode}: only one buffer has a 20% point with samples ({}), nothing to compare",
                list.join(", ")
            ));
            continue;
        }
        let lo = pts.iter().map(|p| p.1).fold(f64::MAX, f64::min);
        let hi = pts.iter().map(|p| p.1).fold(0.0, f64::max);
        // Guest preemption puts millisecond outliers into every run; differences below 25% at
        // tens of microseconds are within this machine's run-to-run noise.
        let verdict = if hi <= lo * 1.25 {
            format!(
                "within {:.1}% of each other, so the buffer size does not matter at low load",
                (hi / lo - 1.0) * 100.0
            )
        } else {
            format!(
                "apart by a factor {:.2}, so the buffer size matters even at low load",
                hi / lo
            )
        };
        parts.push(format!(
            "{io_mode}: average latency {verdict} ({})",
            list.join(", ")
        ));
    }
    format!(
        "Latency at 20% of the first-drop load: {}.",
        parts.join("; ")
    )
}

fn conclusion_batched(study: &Study<'_>) -> String {
    let (sb, bb) = (study.buffers("socket"), study.buffers("batched"));
    if sb.is_empty() || bb.is_empty() {
        return format!(
            "Batched vs socket: no comparison, there are no sweep points with I/O mode {}.",
            if sb.is_empty() { "socket" } else { "batched" }
        );
    }
    let common: Vec<usize> = sb.iter().copied().filter(|b| bb.contains(b)).collect();
    let Some(&rcvbuf) = common
        .iter()
        .find(|&&b| b == DEFAULT_RCVBUF)
        .or(common.last())
    else {
        return "Batched vs socket: the two modes share no buffer size, so their first-drop loads are not compared.".into();
    };
    let clients: BTreeSet<u32> = study
        .clients("socket")
        .into_iter()
        .filter(|c| study.clients("batched").contains(c))
        .collect();
    let mut parts = Vec::new();
    for c in clients {
        let (s, b) = (
            study.series("socket", rcvbuf, c),
            study.series("batched", rcvbuf, c),
        );
        let part = match (first_drop(s), first_drop(b)) {
            (Some(fs), Some(fb)) => format!("{c} clients: {} batched vs {} socket, ratio {:.2}", kpps(fb), kpps(fs), fb / fs),
            (Some(fs), None) => format!(
                "{c} clients: batched did not drop up to {} while socket dropped at {}, ratio > {:.2}",
                kpps(max_load(b)),
                kpps(fs),
                max_load(b) / fs
            ),
            (None, Some(fb)) => format!(
                "{c} clients: batched dropped at {} while socket did not drop up to {}, ratio < {:.2}",
                kpps(fb),
                kpps(max_load(s)),
                fb / max_load(s)
            ),
            (None, None) => format!("{c} clients: neither dropped (socket up to {}, batched up to {})", kpps(max_load(s)), kpps(max_load(b))),
        };
        parts.push(part);
    }
    if parts.is_empty() {
        return "Batched vs socket: the two modes share no client count.".into();
    }
    format!(
        "Batched vs socket first-drop load ({} buffer): {}.",
        buf_kib(rcvbuf),
        parts.join("; ")
    )
}

fn conclusion_clients(study: &Study<'_>) -> String {
    let io_mode = "socket";
    let Some(rcvbuf) = study.fig_buffer(io_mode) else {
        return "First drop vs clients: no socket sweep points.".into();
    };
    let rows: Vec<(u32, Option<f64>, f64)> = study
        .clients(io_mode)
        .into_iter()
        .map(|c| {
            let s = study.series(io_mode, rcvbuf, c);
            (c, first_drop(s), max_load(s))
        })
        .collect();
    let list: Vec<String> = rows
        .iter()
        .map(|(c, d, m)| {
            format!(
                "{c} clients: {}",
                d.map_or_else(|| format!("none up to {}", kpps(*m)), kpps)
            )
        })
        .collect();
    let data = format!("(socket, {} buffer; {})", buf_kib(rcvbuf), list.join(", "));
    let drops: Vec<(u32, f64)> = rows.iter().filter_map(|r| Some((r.0, r.1?))).collect();
    if drops.len() < 2 {
        return format!("First drop vs clients: fewer than two client counts dropped within the loads measured, so the trend is not shown {data}.");
    }
    let (c0, d0) = drops[0];
    let (cn, dn) = drops[drops.len() - 1];
    let monotone = drops.windows(2).all(|w| w[1].1 <= w[0].1);
    let shape = if dn < d0 {
        format!(
            "falls from {} at {c0} clients to {} at {cn} clients (÷{:.2}){}",
            kpps(d0),
            kpps(dn),
            d0 / dn,
            if monotone {
                ", never rising with more clients"
            } else {
                ", though not monotonically"
            }
        )
    } else {
        format!(
            "does not fall with the client count ({} at {c0} clients, {} at {cn} clients)",
            kpps(d0),
            kpps(dn)
        )
    };
    format!("First drop vs clients: the first-drop load {shape} {data}.")
}

fn conclusion_flood(study: &Study<'_>) -> String {
    let base = study
        .flood
        .iter()
        .find(|l| l.point.rate_limit_pps.is_none() && l.point.rcvbuf == DEFAULT_RCVBUF);
    let limited = study
        .flood
        .iter()
        .find(|l| l.point.rate_limit_pps.is_some() && l.point.rcvbuf == DEFAULT_RCVBUF);
    let (Some(base), Some(limited)) = (base, limited) else {
        return format!(
            "Rate limit in the flood: missing the flood point {}, so its effect is not shown.",
            if base.is_none() {
                "with the default buffer and no rate limit"
            } else {
                "with the default buffer and the rate limit"
            }
        );
    };
    let rl = limited
        .point
        .server
        .get("rate_limited")
        .copied()
        .unwrap_or(0);
    let (metric, b, l) = match (base.pct(&Quantile::P99), limited.pct(&Quantile::P99)) {
        (Pct::Value(b), Pct::Value(l)) => ("p99", b as f64 / 1000.0, l as f64 / 1000.0),
        _ => match (base.mean_us(), limited.mean_us()) {
            (Some(b), Some(l)) => ("average (p99 has too few samples)", b, l),
            _ => return "Rate limit in the flood: a flood point has no latency samples from the normal clients, so the effect is not shown.".into(),
        },
    };
    let verdict = if l < b * 0.9 {
        format!(
            "the rate limit helped the normal clients ({:.0}% lower)",
            (1.0 - l / b) * 100.0
        )
    } else if l > b * 1.1 {
        format!(
            "the rate limit made it worse ({:.0}% higher)",
            (l / b - 1.0) * 100.0
        )
    } else {
        "the rate limit made no clear difference (within 10%)".into()
    };
    format!(
        "Rate limit in the flood: the normal clients' {metric} latency was {} with the rate limit vs {} without (default buffer, flood {}): {verdict}; the server counted {rl} rate-limited packets.",
        us(l),
        us(b),
        limited.point.flood_pps.map_or_else(|| "n/a".into(), kpps)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use latlab_stats::Summary;

    fn histogram(mean_us: f64, n: u64) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        let mean = (mean_us * 1000.0) as u64;
        let spread = mean / 5;
        for i in 0..n {
            h.record(mean - spread + (i * 2 * spread) / n.max(1));
        }
        h
    }

    #[allow(clippy::too_many_arguments)]
    fn write_point(
        dir: &Path,
        phase: &str,
        io_mode: &str,
        clients: u32,
        rcvbuf: usize,
        load: f64,
        loss: f64,
        mean_us: f64,
        n: u64,
        fraction: Option<f64>,
        flood: Option<(f64, Option<f64>, u64)>,
    ) {
        let h = histogram(mean_us, n);
        let mut server = BTreeMap::new();
        server.insert("received".to_string(), 1000);
        server.insert("rate_limited".to_string(), flood.map_or(0, |f| f.2));
        let p = Point {
            phase: phase.into(),
            io: io_mode.into(),
            clients,
            rcvbuf,
            rcvbuf_granted: rcvbuf * 2,
            load_pps: load,
            load_fraction: fraction,
            flood_pps: flood.map(|f| f.0),
            rate_limit_pps: flood.and_then(|f| f.1),
            sent: 3600,
            unsent: 0,
            complete: n,
            copies_expected: 3600 * u64::from(clients),
            copies_received: ((3600 * u64::from(clients)) as f64 * (1.0 - loss)) as u64,
            loss_ratio: loss,
            achieved_pps: 2000.0,
            latency_last_ns: Summary::with_quantiles(&h, &QUANTILES),
            latency_first_ns: Summary::with_quantiles(&h, &QUANTILES),
            server,
        };
        let mut key = format!(
            "{phase}-{io_mode}-c{clients}-b{}k-{}pps",
            rcvbuf / 1024,
            load.round() as u64
        );
        if p.rate_limit_pps.is_some() {
            key.push_str("-limited");
        }
        write_atomic(
            &dir.join(format!("{key}.hlog")),
            &hlog_of(&h, &key).unwrap(),
        )
        .unwrap();
        let json = serde_json::to_string_pretty(&p).unwrap();
        write_atomic(&dir.join(format!("{key}.json")), json.as_bytes()).unwrap();
    }

    /// Capacity (pps) of the synthetic server.
    fn capacity(io_mode: &str, clients: u32) -> f64 {
        match (io_mode, clients) {
            ("socket", 4) => 35_000.0,
            ("socket", _) => 25_000.0,
            ("batched", 4) => 1e9,
            _ => 35_000.0,
        }
    }

    fn synthetic_study(out: &Path) {
        let dir = out.join("points");
        fs::create_dir_all(&dir).unwrap();
        let k64 = 64 * 1024;
        for io_mode in ["socket", "batched"] {
            for rcvbuf in [k64, DEFAULT_RCVBUF] {
                for clients in [4u32, 8] {
                    for load in [10_000.0, 20_000.0, 30_000.0, 40_000.0] {
                        let cap = capacity(io_mode, clients);
                        let (loss, mean) = if load > cap {
                            (1.0 - cap / load, if rcvbuf == k64 { 500.0 } else { 2000.0 })
                        } else {
                            (0.0, 40.0 + load / 1000.0)
                        };
                        write_point(
                            &dir, "sweep", io_mode, clients, rcvbuf, load, loss, mean, 4000, None,
                            None,
                        );
                    }
                }
                for fraction in [0.2, 0.9, 1.1] {
                    let load = 40_000.0 * fraction;
                    let tiny = io_mode == "batched" && rcvbuf == k64 && fraction == 0.2;
                    let n = if tiny { 10 } else { 4000 };
                    let (loss, mean) = if fraction > 1.0 {
                        (0.1, 300.0)
                    } else {
                        (0.0, 45.0 + fraction * 10.0)
                    };
                    write_point(
                        &dir,
                        "table",
                        io_mode,
                        4,
                        rcvbuf,
                        load,
                        loss,
                        mean,
                        n,
                        Some(fraction),
                        None,
                    );
                }
            }
        }
        write_point(
            &dir,
            "flood",
            "socket",
            4,
            DEFAULT_RCVBUF,
            1000.0,
            0.3,
            2000.0,
            4000,
            None,
            Some((120_000.0, None, 0)),
        );
        write_point(
            &dir,
            "flood",
            "socket",
            4,
            k64,
            1000.0,
            0.3,
            500.0,
            4000,
            None,
            Some((120_000.0, None, 0)),
        );
        write_point(
            &dir,
            "flood",
            "socket",
            4,
            DEFAULT_RCVBUF,
            1000.0,
            0.0,
            60.0,
            4000,
            None,
            Some((120_000.0, Some(2000.0), 9999)),
        );
    }

    #[test]
    fn the_artefacts_of_a_synthetic_study() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path();
        synthetic_study(out);
        fs::write(out.join("points").join("broken.json"), "{ not json").unwrap();
        let report_path = write_artefacts(out, "loopback (test)").unwrap();
        assert_eq!(report_path, out.join("report.md"));
        for f in [
            "report.md",
            "table1.md",
            "table1.csv",
            "fig2-latency-vs-load.svg",
            "fig2-latency-vs-load-batched.svg",
            "fig3-histogram.svg",
            "fig4-buffers.svg",
            "flood.md",
        ] {
            assert!(out.join(f).exists(), "{f} missing");
        }
        for f in [
            "fig2-latency-vs-load.svg",
            "fig2-latency-vs-load-batched.svg",
            "fig3-histogram.svg",
            "fig4-buffers.svg",
        ] {
            let svg = fs::read_to_string(out.join(f)).unwrap();
            assert!(svg.starts_with("<svg"), "{f}");
        }
        assert!(fs::read_to_string(out.join("fig2-latency-vs-load.svg"))
            .unwrap()
            .contains("first drop"));
        assert!(fs::read_to_string(out.join("fig3-histogram.svg"))
            .unwrap()
            .contains("30.0 kpps"));

        let csv = fs::read_to_string(out.join("table1.csv")).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + 12, "{csv}");
        assert!(lines[0].starts_with("io,clients,rcvbuf_bytes"));
        assert!(
            lines[1].starts_with("socket,4,65536,64,0.2,8000,4000,"),
            "{}",
            lines[1]
        );
        assert!(lines
            .iter()
            .any(|l| l.starts_with(&format!("socket,4,{DEFAULT_RCVBUF},208,1.1,44000,"))));
        // The tiny point: p99 and p99.9 empty, p50 a number.
        let tiny = lines
            .iter()
            .find(|l| l.starts_with("batched,4,65536,64,0.2,"))
            .unwrap();
        let fields: Vec<&str> = tiny.split(',').collect();
        assert_eq!(fields.len(), 14);
        assert!(
            !fields[9].is_empty() && fields[11].is_empty() && fields[12].is_empty(),
            "{tiny}"
        );
        // p95 survives (from the .hlog) for the big points.
        let first: Vec<&str> = lines[1].split(',').collect();
        assert!(!first[10].is_empty(), "{}", lines[1]);

        let table = fs::read_to_string(out.join("table1.md")).unwrap();
        assert!(table.contains("too few samples"));
        assert!(table.contains("208 (default)"));
        assert!(table.contains("20% (8.0 kpps)"));

        let report = fs::read_to_string(&report_path).unwrap();
        assert!(report.contains("Topology: loopback (test)"));
        assert!(
            report.contains("| socket | 64 | 4 | 40.0 kpps |"),
            "{report}"
        );
        assert!(report.contains("| socket | 64 | 8 | 30.0 kpps |"));
        assert!(report.contains("| socket | 208 (default) | 8 | 30.0 kpps |"));
        assert!(report.contains("| batched | 208 (default) | 4 | none up to 40.0 kpps |"));
        assert!(report.contains("| batched | 64 | 8 | 40.0 kpps |"));
        assert!(
            report.contains("above 64 KiB the max lossless load stops growing"),
            "{report}"
        );
        assert!(
            report.contains("under overload still grows (500.0 µs → 1999.9 µs"),
            "{report}"
        );
        assert!(
            report.contains("falls from 40.0 kpps at 4 clients to 30.0 kpps at 8 clients"),
            "{report}"
        );
        assert!(
            report.contains("batched did not drop up to 40.0 kpps"),
            "{report}"
        );
        assert!(report.contains("the rate limit helped"), "{report}");
        assert!(report.contains("too few samples"));
        assert!(report.contains("skipped: broken.json"));
        assert!(report.contains("](fig4-buffers.svg)"));
        assert!(report.contains("about 1.80 s"));

        let flood = fs::read_to_string(out.join("flood.md")).unwrap();
        assert_eq!(
            flood
                .lines()
                .filter(|l| l.starts_with("| default") || l.starts_with("| 64"))
                .count(),
            3,
            "{flood}"
        );
        assert!(flood.contains("9999"));

        // Rerunning on the folder gives the same report.
        write_artefacts(out, "loopback (test)").unwrap();
        assert_eq!(fs::read_to_string(&report_path).unwrap(), report);
    }

    #[test]
    fn an_empty_folder_still_reports() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join("points")).unwrap();
        let report = fs::read_to_string(write_artefacts(tmp.path(), "nowhere").unwrap()).unwrap();
        assert!(report.contains("No points were measured"));
        let tmp2 = tempfile::tempdir().unwrap();
        let report = fs::read_to_string(write_artefacts(tmp2.path(), "nowhere").unwrap()).unwrap();
        assert!(report.contains("No points were measured"));
    }

    #[test]
    fn an_hlog_reads_back_to_the_histogram() {
        let h = histogram(50.0, 1000);
        let bytes = hlog_of(&h, "k").unwrap();
        let back = merge_intervals(&read_hlog(&bytes[..]).unwrap(), None).unwrap();
        assert_eq!(back.len(), 1000);
        assert_eq!(back.max(), h.max());
    }
}
