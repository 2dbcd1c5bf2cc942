//! What a fate file holds ([`summary`]) and whether two hold the same fates ([`compare`]).

use std::collections::BTreeMap;
use std::fmt::Write;

use super::{cause_name, FateFile, FlowId, Recorded};

/// Drop positions listed per flow in a summary before it says "and N more".
pub const POSITIONS_SHOWN: usize = 20;

/// One flow's fates, by position.
type FlowFates = BTreeMap<u64, Recorded>;

/// The file's fates per direction and flow.
fn by_flow(file: &FateFile) -> Vec<BTreeMap<FlowId, FlowFates>> {
    let mut out = vec![BTreeMap::new(); file.header.directions.len()];
    for r in &file.frames {
        if let Some(d) = out.get_mut(usize::from(r.direction)) {
            let flow: &mut FlowFates = d.entry(r.flow).or_default();
            flow.insert(r.position, r.fate);
        }
    }
    out
}

/// The summary `latlab fates FILE` prints: per direction its rules, then per flow the frames,
/// the drops by cause with their positions (the first [`POSITIONS_SHOWN`]), duplicates,
/// corrupted and reordered frames.
pub fn summary(file: &FateFile) -> String {
    let mut s = String::new();
    let total = file.frames.len();
    let _ = writeln!(s, "{total} frames recorded");
    if file.unqueued > 0 {
        let _ = writeln!(
            s,
            "{} frames not recorded (the recorder's ring was full): their positions are missing",
            file.unqueued
        );
    }
    for (d, flows) in by_flow(file).iter().enumerate() {
        let header = &file.header.directions[d];
        let frames: usize = flows.values().map(BTreeMap::len).sum();
        let _ = write!(
            s,
            "{}: {frames} frames in {} flows",
            header.name,
            flows.len()
        );
        if !header.rules.is_empty() {
            let _ = write!(s, " (rules: {})", header.rules.join("; "));
        }
        s.push('\n');
        for (flow, fates) in flows {
            let mut causes: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
            let (mut duplicated, mut corrupted, mut reordered) = (0, 0, 0);
            for (&position, fate) in fates {
                match fate {
                    Recorded::Drop(cause) => {
                        causes.entry(cause_name(*cause)).or_default().push(position)
                    }
                    Recorded::Deliver {
                        duplicate_transit_ns,
                        corrupt_bit,
                        reordered: r,
                        ..
                    } => {
                        duplicated += u64::from(duplicate_transit_ns.is_some());
                        corrupted += u64::from(corrupt_bit.is_some());
                        reordered += u64::from(*r);
                    }
                }
            }
            let dropped: usize = causes.values().map(Vec::len).sum();
            let _ = write!(s, "  {flow}: {} frames, {dropped} dropped", fates.len());
            for (what, n) in [
                ("duplicated", duplicated),
                ("corrupted", corrupted),
                ("reordered", reordered),
            ] {
                if n > 0 {
                    let _ = write!(s, ", {n} {what}");
                }
            }
            s.push('\n');
            for (cause, positions) in causes {
                let shown: Vec<String> = positions
                    .iter()
                    .take(POSITIONS_SHOWN)
                    .map(u64::to_string)
                    .collect();
                let more = positions.len().saturating_sub(POSITIONS_SHOWN);
                let _ = write!(s, "    {cause} {} at {}", positions.len(), shown.join(" "));
                if more > 0 {
                    let _ = write!(s, " and {more} more");
                }
                s.push('\n');
            }
        }
    }
    s
}

/// How two fate files compare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comparison {
    /// One line per flow of either file: the same fates, or the first difference.
    pub lines: Vec<String>,
    /// Flows whose fates differ (or that only one file has).
    pub differing: usize,
    /// Drops at the same positions in both, over all flows.
    pub same_drops: u64,
}

/// Compares the fates of `a` and `b` (named `names` in the lines) flow by flow and position by
/// position: the same drop cause, or delivered with the same duplicate and corrupted bit
/// (transit times are not compared). A flow only one file has, or with frames one file lacks,
/// differs at the first position the other has not.
pub fn compare(a: &FateFile, b: &FateFile, names: [&str; 2]) -> Comparison {
    let mut lines = Vec::new();
    let mut differing = 0;
    let mut same_drops = 0;
    if let Some(why) = a.header.mismatch(&b.header) {
        return Comparison {
            lines: vec![format!("the headers differ: {why}")],
            differing: 1,
            same_drops: 0,
        };
    }
    let (fa, fb) = (by_flow(a), by_flow(b));
    for (d, (da, db)) in fa.iter().zip(&fb).enumerate() {
        let name = &a.header.directions[d].name;
        let flows: std::collections::BTreeSet<&FlowId> = da.keys().chain(db.keys()).collect();
        let empty = FlowFates::new();
        for flow in flows {
            let (xa, xb) = (
                da.get(flow).unwrap_or(&empty),
                db.get(flow).unwrap_or(&empty),
            );
            let positions: std::collections::BTreeSet<&u64> = xa.keys().chain(xb.keys()).collect();
            let mut first = None;
            let mut drops = 0;
            for &p in positions {
                match (xa.get(&p), xb.get(&p)) {
                    (Some(x), Some(y)) if x.class() == y.class() => {
                        drops += u64::from(matches!(x, Recorded::Drop(_)));
                    }
                    (x, y) => {
                        let say = |f: Option<&Recorded>| {
                            f.map_or("not there".to_string(), Recorded::to_string)
                        };
                        first = Some(format!(
                            "first difference at position {p}: {} {}, {} {}",
                            names[0],
                            say(x),
                            names[1],
                            say(y)
                        ));
                        break;
                    }
                }
            }
            match first {
                None => {
                    same_drops += drops;
                    lines.push(format!(
                        "{name} {flow}: same fates, {} frames, {drops} dropped at the same positions",
                        xa.len()
                    ));
                }
                Some(first) => {
                    differing += 1;
                    lines.push(format!(
                        "{name} {flow}: {} frames in {}, {} in {}; {first}",
                        xa.len(),
                        names[0],
                        xb.len(),
                        names[1]
                    ));
                }
            }
        }
    }
    Comparison {
        lines,
        differing,
        same_drops,
    }
}
