//! Table II of the forwarding study: cycles per packet by step at saturation, for every DUT
//! from the software-clock samples of its CPU (the kernel's forwarders among them), beside the
//! paper's rows, and for `latlab fwd` also from its own TSC accounting over the same window.

use std::fmt::Write as _;

use latlab_bench::kernel_steps::KernelStep;

use super::DutPoint;
use crate::rfc2544::StepCycles;

/// The paper's Table II (Emmerich et al.), cycles per packet: RX, TX, Mem., skb, Process.
const PAPER: [(&str, [u32; 5]); 5] = [
    ("Linux bridge", [491, 456, 178, 311, 1508]),
    ("IP forward", [453, 463, 101, 292, 757]),
    ("Open vSwitch", [490, 447, 102, 288, 416]),
    ("DPDK vSwitch", [41, 85, 0, 0, 165]),
    ("DPDK L2FWD", [55, 62, 0, 0, 0]),
];

/// The paper's steps, in its column order.
const STEPS: [KernelStep; 5] = [
    KernelStep::Rx,
    KernelStep::Tx,
    KernelStep::Mem,
    KernelStep::Skb,
    KernelStep::Process,
];

/// The paper's row this DUT is compared with.
fn paper_row(dut: &str) -> Option<(&'static str, [u32; 5])> {
    let name = match dut {
        "kernel" => "IP forward",
        "bridge" => "Linux bridge",
        "testpmd" | "testpmd-xdp" => "DPDK L2FWD",
        _ => return None,
    };
    PAPER.iter().find(|(n, _)| *n == name).copied()
}

/// The Table II section of `report.md`.
pub(super) fn markdown(duts: &[DutPoint]) -> String {
    let mut md = String::from("\n## Table II: cycles per packet by step, at saturation\n\nEach DUT's CPU sampled with the software clock event (this machine has no hardware counters) during one trial with the source as fast as it goes; kernel functions by self time, grouped into the paper's steps by `latlab_bench::kernel_steps`; cycles of the time stamp counter per frame through the DUT. `other` is what no step claims (spin-lock release, where samples of code run with interrupts off land, among it); `user` is system calls and user space (`latlab fwd`'s and testpmd's own loops). In brackets: the ratio to the paper's row for the same forwarder (IP forward, Linux bridge, DPDK L2FWD; its machine, a 2.0 GHz Xeon with 10 GbE, is not this one).\n\n| DUT | Mpps at saturation | RX | TX | Mem. | skb | Process. | user | other | busy | idle |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let mut any = false;
    for p in duts {
        let Some(s) = &p.saturation else {
            continue;
        };
        let Some(profile) = &s.profile else {
            let why = s.profile_error.as_deref().unwrap_or("not sampled");
            let _ = writeln!(
                md,
                "| {} | {:.3} | {why} | | | | | | | | |",
                p.dut,
                s.received_pps() / 1e6
            );
            continue;
        };
        any = true;
        let paper = paper_row(&p.dut);
        let cells: Vec<String> = STEPS
            .iter()
            .enumerate()
            .map(|(i, &step)| {
                let ours = s.cycles_per_packet(step);
                match (ours, paper) {
                    (Some(v), Some((_, row))) if row[i] > 0 => {
                        format!("{v:.0} ({:.1}×)", v / f64::from(row[i]))
                    }
                    (Some(v), _) => format!("{v:.0}"),
                    (None, _) => "-".into(),
                }
            })
            .collect();
        let show = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
        let _ = writeln!(
            md,
            "| {} | {:.3} | {} | {} | {} | {} | {:.0}% |",
            p.dut,
            s.received_pps() / 1e6,
            cells.join(" | "),
            show(s.cycles_per_packet(KernelStep::Syscall)),
            show(s.cycles_per_packet(KernelStep::Other)),
            show(s.busy_cycles_per_packet()),
            100.0 * profile.share_of(KernelStep::Idle)
        );
    }
    if !any {
        md.push_str("| (no DUT's CPU was sampled) | | | | | | | | | | |\n");
    }
    md.push_str("\nThe paper's rows, for reference:\n\n| forwarder (paper) | RX | TX | Mem. | skb | Process. |\n|---|---:|---:|---:|---:|---:|\n");
    for (name, row) in PAPER {
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {} | {} | {} |",
            row[0], row[1], row[2], row[3], row[4]
        );
    }
    md.push_str(&tsc_table(duts));
    md
}

/// `latlab fwd`'s own TSC accounting over the saturation window (its report starts again at
/// that trial and ends when the source stops).
fn tsc_table(duts: &[DutPoint]) -> String {
    let rows: Vec<String> = duts
        .iter()
        .filter_map(|p| {
            let c = p.dut_report.as_ref()?.cycles()?;
            let f = |v: Option<f64>, d: usize| v.map_or("-".into(), |v| format!("{v:.d$}"));
            let step = |v: fn(&StepCycles) -> Option<f64>| f(c.per_packet.as_ref().and_then(v), 0);
            Some(format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                p.dut,
                step(|s| s.rx),
                step(|s| s.processing),
                step(|s| s.tx),
                step(|s| s.buffers),
                f(c.steps_total, 0),
                f(c.empty_polls, 0),
                f(c.measured_untimed, 0),
                f(c.accounted, 2),
                f(c.mean_batch, 1),
            ))
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut md = String::from("\n`latlab fwd`'s own accounting over the same window (TSC around each step, the timer's cost subtracted; `total` is cycles per second ÷ frames per second; `accounted` is the steps' share of it):\n\n| DUT | RX | processing | TX | buffers | steps | empty polls | total | accounted | mean batch |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        md.push_str(&r);
        md.push('\n');
    }
    md
}
