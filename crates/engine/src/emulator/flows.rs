//! What each flow of a direction did, when the direction has per-flow rules
//! ([`latlab_link::FlowPipes`]): the pipes keep the link's counters per flow, the engine counts
//! per flow what the port did with the frames each pipe released ([`latlab_link::Departure::flow`]).

use latlab_link::{FlowPipes, LinkConfig, LinkCounters};

use super::DirectionReport;

/// What one flow of a direction did: the frames of one rule, or those no rule took (the
/// default pipe). Every frame of the flow is accounted for: `link.arrived + link.duplicated =
/// sent + link.dropped() + dropped_by_emulator + queued` ([`FlowReport::unaccounted`] is 0).
/// The flows of a direction add up to its counters: `link`, `sent`, and the pipes' part of
/// `queue_slots_full`, `tx_*` and `queued_at_exit` (frames the pipeline's ring dropped or still
/// carried never met the rules and are counted per direction only).
#[derive(Clone, Debug, PartialEq)]
pub struct FlowReport {
    /// The rule's match as text (`proto=udp dport=27015`); `None` for the default pipe.
    pub matcher: Option<String>,
    /// The link the flow's frames took (the default pipe's in force when the report was
    /// made: the API may have changed it).
    pub config: LinkConfig,
    /// The link model's counters for the flow's frames.
    pub link: LinkCounters,
    /// Frames of the flow written to the TX ring (duplicates included).
    pub sent: u64,
    /// Frames of the flow the emulator dropped after the link model delivered them: the pipe
    /// had no buffer, or the port refused them (TX ring full, too long or too short to send).
    pub dropped_by_emulator: u64,
    /// Frames of the flow its pipe held when the report was made (at exit: never sent).
    pub queued: u64,
}

impl FlowReport {
    /// Frames (and copies) in minus frames accounted for: 0 unless one was lost uncounted.
    pub fn unaccounted(&self) -> i128 {
        let copies_in = i128::from(self.link.arrived) + i128::from(self.link.duplicated);
        let out = [
            self.sent,
            self.link.dropped(),
            self.link.aqm_drop + self.link.aqm_overflow,
            self.dropped_by_emulator,
            self.queued,
        ];
        copies_in - out.iter().map(|&n| i128::from(n)).sum::<i128>()
    }

    /// Every frame the flow lost: the link's drops (its queue discipline's too) and the
    /// emulator's.
    pub fn dropped(&self) -> u64 {
        self.link.dropped() + self.link.aqm_drop + self.link.aqm_overflow + self.dropped_by_emulator
    }
}

/// The flows of `pipes` with nothing counted yet, in the order of [`FlowPipes::flows`] (the
/// index of [`latlab_link::Departure::flow`]); none when there are no rules, so a direction
/// without rules reports as it always has.
pub(super) fn flow_reports(pipes: &FlowPipes) -> Vec<FlowReport> {
    if pipes.rules() == 0 {
        return Vec::new();
    }
    pipes
        .flows()
        .map(|(matcher, pipe)| FlowReport {
            matcher: matcher.map(|m| m.to_string()),
            config: pipe.config().clone(),
            link: LinkCounters::default(),
            sent: 0,
            dropped_by_emulator: 0,
            queued: 0,
        })
        .collect()
}

/// `report` with the counters `pipes` keep: the link's (summed over the pipes) and the frames
/// they had no buffer for, for the direction and per flow, and each flow's queue and link.
/// The queue of the direction is left to the caller (at exit it is `queued_at_exit`).
pub(super) fn counted(mut report: DirectionReport, pipes: &FlowPipes) -> DirectionReport {
    report.link = pipes.counters();
    report.sojourn = pipes.sojourn();
    report.events = pipes.events().to_vec();
    report.dual_sojourn = pipes.dual_sojourn();
    report.queue_slots_full += pipes.dropped_no_buffer();
    for (flow, (_, pipe)) in report.flows.iter_mut().zip(pipes.flows()) {
        flow.config = pipe.config().clone();
        flow.link = *pipe.counters();
        flow.dropped_by_emulator += pipe.dropped_no_buffer();
        flow.queued = pipe.queued_frames() as u64;
    }
    report
}
