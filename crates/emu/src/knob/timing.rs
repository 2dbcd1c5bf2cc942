//! The rows of [`super::KNOBS`] that shape when frames leave: a delay trace (the base delay
//! over time, from a file) and slotting (NetEm's `slot`).

use latlab_link::delay_trace::{DelayFile, DelayTraceMode};
use latlab_link::{parse, slot, LinkConfig, Slot};

use super::{flag, text, Flag, Knob};

/// The slot of `c`, made (without a gap, which validation then asks for) if there is none.
fn slot_of(c: &mut LinkConfig) -> &mut Slot {
    c.slot.get_or_insert(Slot {
        gap: None,
        frames: None,
        bytes: None,
    })
}

pub(super) const DELAY_TRACE: Knob = Knob {
    key: "delay-trace",
    flags: &[flag(
        "delay-trace",
        "FILE",
        "The base delay over time from a file, repeated: lines of `TIME_MS DELAY_MS`, one \
         `DELAY_MS` each --delay-trace-step, or `ping -D` output (half of each round trip).",
    )],
    field: Some("delay_trace"),
    set: |c, flag, v| {
        let file = DelayFile::read(std::path::Path::new(v)).map_err(|e| format!("{flag}: {e}"))?;
        c.delay_trace.get_or_insert_with(Default::default).file = Some(file);
        Ok(())
    },
};

pub(super) const DELAY_TRACE_STEP: Knob = Knob {
    key: "delay-trace-step",
    flags: &[flag(
        "delay-trace-step",
        "DUR",
        "Time between the lines of a one-column --delay-trace, and its last step before it \
         repeats (default: its last gap).",
    )],
    field: Some("delay_trace_step"),
    set: |c, flag, v| {
        let step = parse::duration_ns(flag, v).map_err(text)?;
        c.delay_trace.get_or_insert_with(Default::default).step_ns = Some(step);
        Ok(())
    },
};

pub(super) const DELAY_TRACE_MODE: Knob = Knob {
    key: "delay-trace-mode",
    flags: &[Flag {
        names: &DelayTraceMode::NAMES,
        ..flag(
            "delay-trace-mode",
            "MODE",
            "How --delay-trace goes from point to point (default linear)",
        )
    }],
    field: Some("delay_trace_mode"),
    set: |c, flag, v| {
        let mode = DelayTraceMode::from_name(v).ok_or_else(|| {
            format!(
                "{flag}: {v:?} is not a mode: expected one of {}",
                DelayTraceMode::NAMES.join(", ")
            )
        })?;
        c.delay_trace.get_or_insert_with(Default::default).mode = mode;
        Ok(())
    },
};

pub(super) const SLOT: Knob = Knob {
    key: "slot",
    flags: &[flag(
        "slot",
        "MIN[,MAX]",
        "Slotting (NetEm's slot): frames due leave in bursts at slots MIN..MAX apart (none: off).",
    )],
    field: Some("slot"),
    set: |c, flag, v| {
        if v == "none" {
            c.slot = None;
            return Ok(());
        }
        slot_of(c).gap = Some(slot::parse_uniform(flag, v).map_err(text)?);
        Ok(())
    },
};

pub(super) const SLOT_DIST: Knob = Knob {
    key: "slot-dist",
    flags: &[Flag {
        names: &parse::DISTRIBUTIONS,
        ..flag(
            "slot-dist",
            "NAME,DELAY,JITTER",
            "Slots apart by DELAY with JITTER of a distribution, in place of --slot's MIN,MAX \
             (normal,10ms,2ms)",
        )
    }],
    field: Some("slot_dist"),
    set: |c, flag, v| {
        slot_of(c).gap = Some(slot::parse_distribution(flag, v).map_err(text)?);
        Ok(())
    },
};

pub(super) const SLOT_PACKETS: Knob = Knob {
    key: "slot-packets",
    flags: &[flag(
        "slot-packets",
        "N",
        "Most frames one slot lets out (needs --slot or --slot-dist).",
    )],
    field: Some("slot_packets"),
    set: |c, flag, v| {
        slot_of(c).frames = slot::parse_budget(flag, v, false).map_err(text)?;
        Ok(())
    },
};

pub(super) const SLOT_BYTES: Knob = Knob {
    key: "slot-bytes",
    flags: &[flag(
        "slot-bytes",
        "BYTES",
        "Bytes after which a slot closes, the last frame leaving whole (needs --slot).",
    )],
    field: Some("slot_bytes"),
    set: |c, flag, v| {
        slot_of(c).bytes = slot::parse_budget(flag, v, true).map_err(text)?;
        Ok(())
    },
};
