//! One direction's pipes: a pipe per rule and the default pipe, each frame steered by the first
//! rule that matches it.

use latlab_wire::flow::FlowKey;

use super::{Departure, Pipe};
use crate::fates::Recorded;
use crate::{Conditions, ConfigError, Fate, FlowMatch, Flows, LinkConfig, LinkCounters};

/// The pipes of one direction with per-flow rules ([`Flows`]): a [`Pipe`] per rule, each with
/// its own [`LinkConfig`], and the default pipe for the frames no rule takes; as NetEm qdiscs
/// behind `tc` filters. It has the verbs of [`Pipe`], so an engine drives it as it drives one
/// pipe; without rules it is exactly the default pipe.
///
/// Call order: that of [`Pipe`].
///
/// 1. [`FlowPipes::new`] once.
/// 2. [`FlowPipes::handle_arrival`]`(now, frame)` for every frame, in arrival order: the
///    frame's flow fields are read in place ([`FlowKey::read`], no copy, no allocation), the
///    first rule whose [`FlowMatch`] holds takes it (the default pipe if none does), and that
///    pipe decides its fate.
/// 3. [`FlowPipes::poll_departure`]`(now)` until `None`: the next frame due across all the
///    pipes, [`Departure::flow`] saying which pipe it left.
/// 4. [`FlowPipes::poll_timeout`]: the earliest departure of any pipe.
/// 5. [`FlowPipes::handle_config`]`(now, config)` changes the default pipe (the rules keep
///    theirs).
///
/// Guarantees: departures come out in time order across the pipes, and frames due at the same
/// time in the order they arrived, whichever pipes hold them; each pipe keeps its own
/// guarantees (order within a flow unless its link reorders, limits, memory), with its limits
/// its own: a rule's queue never takes room from the default's. Every frame is counted once,
/// by the pipe that took it: the direction's counters ([`FlowPipes::counters`],
/// [`FlowPipes::dropped_no_buffer`], [`FlowPipes::queued_frames`]) are the sums of the pipes'
/// ([`FlowPipes::flows`]).
///
/// ```
/// use latlab_link::{FlowMatch, FlowPipes, FlowRule, Flows, LinkConfig};
///
/// // Frames to UDP port 27015 get 5 ms; everything else goes straight through.
/// let rule = FlowRule {
///     matcher: FlowMatch::parse("--flow", "proto=udp dport=27015").unwrap(),
///     config: LinkConfig { delay_ns: 5_000_000, ..LinkConfig::default() },
/// };
/// let flows = Flows { default: LinkConfig::default(), rules: vec![rule] };
/// let mut pipes = FlowPipes::new(flows, 0).unwrap();
/// let mut game = vec![0u8; 12];
/// game.extend([0x08, 0x00, 0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0]);
/// game.extend([10, 0, 0, 1, 10, 0, 0, 2, 0x9c, 0x40, 0x69, 0x87, 0, 8, 0, 0]);
/// pipes.handle_arrival(0, &game);
/// pipes.handle_arrival(0, &[0u8; 60]); // not IP: the default pipe
/// assert_eq!(pipes.poll_departure(0).map(|d| d.flow()), Some(1)); // the default's, at once
/// assert!(pipes.poll_departure(0).is_none());
/// assert_eq!(pipes.poll_timeout(), Some(5_000_000));
/// assert_eq!(pipes.poll_departure(5_000_000).map(|d| d.flow()), Some(0)); // rule 0's
/// ```
#[derive(Debug)]
pub struct FlowPipes {
    /// The rules' matchers, in order: rule `i` takes its frames to `pipes[i]`.
    matchers: Vec<FlowMatch>,
    /// The rules' pipes, then the default pipe (last; `pipes.len() == matchers.len() + 1`).
    pipes: Vec<Pipe>,
    /// Arrival order across the pipes, so that frames due at the same time leave in the
    /// order they came, whichever pipe holds them.
    seq: u64,
    /// Frames (or copies) the pipes had no buffer for, summed.
    dropped_no_buffer: u64,
    /// Frames the pipes' queue disciplines dropped, summed (see [`FlowPipes::aqm_dropped`]).
    aqm_dropped: u64,
}

impl FlowPipes {
    /// The pipes of `flows`, whose schedules start at `start_ns`. Every configuration is
    /// checked ([`LinkConfig::validate`]); the first that fails is the error.
    pub fn new(flows: Flows, start_ns: u64) -> Result<FlowPipes, ConfigError> {
        let mut matchers = Vec::with_capacity(flows.rules.len());
        let mut pipes = Vec::with_capacity(flows.rules.len() + 1);
        for rule in flows.rules {
            matchers.push(rule.matcher);
            pipes.push(Pipe::new(rule.config, start_ns)?);
        }
        pipes.push(Pipe::new(flows.default, start_ns)?);
        Ok(FlowPipes {
            matchers,
            pipes,
            seq: 0,
            dropped_no_buffer: 0,
            aqm_dropped: 0,
        })
    }

    /// Which pipe `frame` goes to: the first rule that matches it, or the default pipe (the
    /// index [`Departure::flow`] gives).
    #[inline]
    pub fn flow_of(&self, frame: &[u8]) -> usize {
        if self.matchers.is_empty() {
            return 0;
        }
        let key = FlowKey::read(frame);
        self.matchers
            .iter()
            .position(|m| m.matches(&key))
            .unwrap_or(self.matchers.len())
    }

    /// A frame arrived at `now`: the pipe of its flow decides its fate and holds it (see
    /// [`Pipe::handle_arrival`]).
    #[inline]
    pub fn handle_arrival(&mut self, now: u64, frame: &[u8]) -> Fate {
        let flow = self.flow_of(frame);
        let pipe = &mut self.pipes[flow];
        let no_buffer = pipe.dropped_no_buffer;
        pipe.seq = self.seq;
        if pipe.bottleneck.is_some() {
            let dropped = pipe.aqm_dropped();
            let fate = pipe.handle_arrival(now, frame);
            self.aqm_dropped += pipe.aqm_dropped() - dropped;
            self.seq = pipe.seq;
            self.dropped_no_buffer += pipe.dropped_no_buffer - no_buffer;
            return fate;
        }
        let fate = pipe.handle_arrival(now, frame);
        self.seq = pipe.seq;
        self.dropped_no_buffer += pipe.dropped_no_buffer - no_buffer;
        fate
    }

    /// A frame arrived at `now` and takes the `recorded` fate (a replay): the pipe of its flow
    /// holds or drops it so (see [`Pipe::handle_recorded`]).
    #[inline]
    pub fn handle_recorded(&mut self, now: u64, frame: &[u8], recorded: Recorded) -> Fate {
        let flow = self.flow_of(frame);
        let pipe = &mut self.pipes[flow];
        let no_buffer = pipe.dropped_no_buffer;
        pipe.seq = self.seq;
        let fate = pipe.handle_recorded(now, frame, recorded);
        self.seq = pipe.seq;
        self.dropped_no_buffer += pipe.dropped_no_buffer - no_buffer;
        fate
    }

    /// The next frame due at `now` of any pipe (the earliest departure; the earliest arrival
    /// among equal ones), if any. See [`Pipe::poll_departure`].
    #[inline]
    pub fn poll_departure(&mut self, now: u64) -> Option<Departure<'_>> {
        for pipe in &mut self.pipes {
            // A queue discipline's wire first: what it sent by `now` joins the delay queues.
            if pipe.bottleneck.is_some() {
                let dropped = pipe.aqm_dropped();
                pipe.serve_bottleneck(now);
                self.aqm_dropped += pipe.aqm_dropped() - dropped;
            }
        }
        let due = self.next_flow().filter(|&(_, at)| at <= now);
        let Some((flow, _)) = due else {
            for pipe in &mut self.pipes {
                pipe.follow_queue(now);
            }
            return None;
        };
        let mut departure = self.pipes[flow].poll_departure(now)?;
        departure.flow = flow;
        Some(departure)
    }

    /// When to come back: the earliest of the pipes' [`Pipe::poll_timeout`], `None` if none
    /// holds a frame.
    #[inline]
    pub fn poll_timeout(&self) -> Option<u64> {
        if let [only] = &self.pipes[..] {
            return only.poll_timeout();
        }
        self.pipes.iter().filter_map(Pipe::poll_timeout).min()
    }

    /// The sojourn times at the queue of every pipe that has had one (a rate or a queue
    /// discipline), together (see [`Pipe::sojourn`]); `None` if none has.
    pub fn sojourn(&self) -> Option<latlab_stats::LatencyHistogram> {
        let mut all: Option<latlab_stats::LatencyHistogram> = None;
        for histogram in self.pipes.iter().filter_map(Pipe::sojourn) {
            match &mut all {
                // Histograms of one precision always merge.
                Some(sum) => sum.merge(histogram).expect("same precision"),
                None => all = Some(histogram.clone()),
            }
        }
        all
    }

    /// DualPI2's sojourn times per queue of every pipe that has had it, together (see
    /// [`Pipe::dual_sojourn`]); `None` if none has.
    pub fn dual_sojourn(&self) -> Option<crate::DualSojourn> {
        let mut all: Option<crate::DualSojourn> = None;
        for dual in self.pipes.iter().filter_map(Pipe::dual_sojourn) {
            match &mut all {
                Some(sum) => sum.merge(dual),
                None => all = Some(dual.clone()),
            }
        }
        all
    }

    /// Changes the default pipe's conditions at `now` (see [`Pipe::handle_config`]); the rules
    /// keep theirs. On error nothing changes.
    pub fn handle_config(&mut self, now: u64, config: LinkConfig) -> Result<(), ConfigError> {
        self.default_pipe_mut().handle_config(now, config)
    }

    /// Begins `event` at `now` on every pipe (an outage takes the whole link down, rules and
    /// all).
    pub fn begin_event(&mut self, now: u64, event: crate::Event) {
        for pipe in &mut self.pipes {
            pipe.begin_event(now, event);
        }
    }

    /// Ends the events in force at `now` on every pipe; how many the default pipe ended.
    pub fn release_events(&mut self, now: u64) -> usize {
        let mut ended = 0;
        for pipe in &mut self.pipes {
            ended = pipe.release_events(now);
        }
        ended
    }

    /// The default pipe's events (scheduled and begun), with their times.
    pub fn events(&self) -> &[crate::EventRecord] {
        self.default_pipe().events()
    }

    /// Every frame's fate so far, by cause, summed over the pipes.
    pub fn counters(&self) -> LinkCounters {
        let mut sum = LinkCounters::default();
        for pipe in &self.pipes {
            sum += *pipe.counters();
        }
        sum
    }

    /// Delivered frames (or copies) the pipes had no buffer for, summed (see
    /// [`Pipe::dropped_no_buffer`]).
    pub fn dropped_no_buffer(&self) -> u64 {
        self.dropped_no_buffer
    }

    /// Frames the pipes' queue disciplines dropped (their `aqm_drop` and `aqm_overflow`),
    /// summed; kept as they happen, so reading it costs no sum over the pipes.
    #[inline]
    pub fn aqm_dropped(&self) -> u64 {
        self.aqm_dropped
    }

    /// Frames held by the pipes (duplicates included).
    pub fn queued_frames(&self) -> usize {
        self.pipes.iter().map(Pipe::queued_frames).sum()
    }

    /// Bytes of the frames held by the pipes.
    pub fn queued_bytes(&self) -> usize {
        self.pipes.iter().map(Pipe::queued_bytes).sum()
    }

    /// Times the pipes freed idle buffers, summed (see [`Pipe::releases`]).
    pub fn releases(&self) -> u64 {
        self.pipes.iter().map(Pipe::releases).sum()
    }

    /// Idle buffers the pipes keep for reuse.
    pub fn idle_buffers(&self) -> usize {
        self.pipes.iter().map(Pipe::idle_buffers).sum()
    }

    /// Bytes of memory the pipes hold for frames (see [`Pipe::held_bytes`]).
    pub fn held_bytes(&self) -> usize {
        self.pipes.iter().map(Pipe::held_bytes).sum()
    }

    /// The default pipe's configuration.
    pub fn config(&self) -> &LinkConfig {
        self.default_pipe().config()
    }

    /// The default pipe's conditions at its last arrival.
    pub fn conditions(&self) -> &Conditions {
        self.default_pipe().conditions()
    }

    /// The pipe of the frames no rule takes.
    pub fn default_pipe(&self) -> &Pipe {
        &self.pipes[self.matchers.len()]
    }

    /// How many rules there are (0: the default pipe alone).
    pub fn rules(&self) -> usize {
        self.matchers.len()
    }

    /// Every pipe with its rule's matcher: the rules in order, then the default pipe with
    /// `None`. The position is a departure's [`Departure::flow`].
    pub fn flows(&self) -> impl Iterator<Item = (Option<&FlowMatch>, &Pipe)> {
        self.matchers
            .iter()
            .map(Some)
            .chain(std::iter::once(None))
            .zip(&self.pipes)
    }

    fn default_pipe_mut(&mut self) -> &mut Pipe {
        let default = self.matchers.len();
        &mut self.pipes[default]
    }

    /// The pipe whose frame is due first in its delay queue, and when.
    #[inline]
    fn next_flow(&self) -> Option<(usize, u64)> {
        if let [only] = &self.pipes[..] {
            return only.next_due().map(|(at, _)| (0, at));
        }
        self.pipes
            .iter()
            .enumerate()
            .filter_map(|(flow, pipe)| pipe.next_due().map(|order| (order, flow)))
            .min()
            .map(|((at, _), flow)| (flow, at))
    }
}

#[cfg(test)]
mod tests;
