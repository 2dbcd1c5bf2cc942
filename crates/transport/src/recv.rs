//! The receiving half of a connection: which packet numbers arrived (for ACKs), reassembly of
//! fragments, and each channel's delivery rule.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use latlab_wire::transport::{AckRanges, ChannelKind, MAX_ACK_RANGES};

use crate::ConnectionStats;

/// Ranges of packet numbers kept for ACKs; older ones are forgotten (a packet number below
/// them counts as a duplicate).
const KEPT_RANGES: usize = 64;

/// Ranges ending more than this many packet numbers below the largest received are no longer
/// reported: the peer has long had them acknowledged, or declared them lost.
const ACK_HISTORY: u64 = 64;

/// Received packet numbers and the ACK owed for them.
#[derive(Debug, Default)]
pub(crate) struct Received {
    /// Ascending, disjoint, not touching: `(smallest, largest)` inclusive.
    ranges: VecDeque<(u64, u64)>,
    /// When the largest packet number arrived.
    largest_at: u64,
    /// Ack-eliciting packets since the last ACK sent.
    pub(crate) unacked_eliciting: u32,
    /// An ACK is owed by this time.
    pub(crate) ack_deadline: Option<u64>,
    /// A packet with data arrived since the last ACK sent (under NACK feedback that ACK
    /// asks to be acknowledged, so that its sender learns what the peer has seen).
    pub(crate) data_since_ack: bool,
    /// Under NACK feedback: the peer has seen an ACK up to here, so ACKs report only the
    /// packet numbers above.
    pub(crate) floor: Option<u64>,
}

impl Received {
    /// Records `pn`: `None` if it arrived before (or is older than every range kept), else
    /// `Some(true)` if `pn` opened a gap or filled one, `Some(false)` if it came in order.
    pub(crate) fn insert(&mut self, pn: u64, now: u64) -> Option<bool> {
        let largest = self.ranges.back().map(|&(_, hi)| hi);
        if let Some(&(lo, _)) = self.ranges.front() {
            if pn < lo && self.ranges.len() == KEPT_RANGES {
                return None;
            }
        }
        let at = self.ranges.partition_point(|&(_, hi)| hi < pn);
        if self.ranges.get(at).is_some_and(|&(lo, _)| lo <= pn) {
            return None;
        }
        let joins_prev = at > 0 && self.ranges[at - 1].1.checked_add(1) == Some(pn);
        let joins_next = self
            .ranges
            .get(at)
            .is_some_and(|&(lo, _)| pn.checked_add(1) == Some(lo));
        match (joins_prev, joins_next) {
            (true, true) => {
                self.ranges[at - 1].1 = self.ranges[at].1;
                self.ranges.remove(at);
            }
            (true, false) => self.ranges[at - 1].1 = pn,
            (false, true) => self.ranges[at].0 = pn,
            (false, false) => self.ranges.insert(at, (pn, pn)),
        }
        if self.ranges.len() > KEPT_RANGES {
            self.ranges.pop_front();
        }
        let gap = match largest {
            None => false,
            Some(largest) if pn > largest => {
                self.largest_at = now;
                pn - largest > 1
            }
            Some(_) => true,
        };
        if largest.is_none() {
            self.largest_at = now;
        }
        Some(gap)
    }

    /// The largest packet number received.
    pub(crate) fn largest(&self) -> Option<u64> {
        self.ranges.back().map(|&(_, hi)| hi)
    }

    /// Forgets `pn` (its packet was refused), so the next ACK does not include it.
    pub(crate) fn remove(&mut self, pn: u64) {
        let at = self.ranges.partition_point(|&(_, hi)| hi < pn);
        let Some(&(lo, hi)) = self.ranges.get(at) else {
            return;
        };
        if pn < lo {
            return;
        }
        self.ranges.remove(at);
        if pn < hi {
            self.ranges.insert(at, (pn + 1, hi));
        }
        if lo < pn {
            self.ranges.insert(at, (lo, pn - 1));
        }
    }

    /// The ACK frame's ranges (the newest [`MAX_ACK_RANGES`]) and delay (µs) at `now`.
    pub(crate) fn ack(&self, now: u64) -> Option<(AckRanges, u32)> {
        // Range lengths and gaps travel as 32-bit numbers: a longer range is cut at its low
        // end, and the ranges stop at a gap that does not fit.
        let max = u64::from(u32::MAX);
        let mut ranges = AckRanges::new();
        let mut prev_lo: Option<u64> = None;
        let largest = self.ranges.back().map_or(0, |&(_, hi)| hi);
        let recent = self
            .ranges
            .iter()
            .rev()
            .take_while(|&&(_, hi)| hi + ACK_HISTORY >= largest);
        let above = |&&(_, hi): &&(u64, u64)| self.floor.is_none_or(|f| hi > f);
        for &(lo, hi) in recent.filter(above).take(MAX_ACK_RANGES) {
            if prev_lo.is_some_and(|p| p - hi - 1 > max) {
                break;
            }
            let lo = lo.max(hi.saturating_sub(max));
            let lo = self.floor.map_or(lo, |f| lo.max(f + 1));
            ranges.push(lo, hi);
            prev_lo = Some(lo);
        }
        let delay = u32::try_from(now.saturating_sub(self.largest_at) / 1_000).unwrap_or(u32::MAX);
        (!ranges.is_empty()).then_some((ranges, delay))
    }
}

/// How far past the oldest message not yet delivered a message may be and still be taken:
/// this bounds what a channel holds for a peer that skips numbers. Later ones are refused
/// (not acknowledged), and come again.
const MAX_AHEAD: u32 = 4096;

/// Message numbers seen on an unordered channel: all below `floor`, and those in `above`.
#[derive(Debug, Default)]
struct Seen {
    floor: u32,
    above: BTreeSet<u32>,
}

impl Seen {
    fn contains(&self, message: u32) -> bool {
        message < self.floor || self.above.contains(&message)
    }

    fn insert(&mut self, message: u32) {
        self.above.insert(message);
        while self.floor < u32::MAX && self.above.remove(&self.floor) {
            self.floor += 1;
        }
    }
}

#[derive(Debug)]
enum Channel {
    Ordered {
        next: u32,
        held: BTreeMap<u32, Vec<u8>>,
    },
    Unordered(Seen),
    Unreliable,
    Sequenced {
        newest: Option<u32>,
    },
}

/// A message being reassembled.
#[derive(Debug)]
struct Partial {
    parts: Vec<Option<Vec<u8>>>,
    missing: usize,
    bytes: usize,
    /// Bytes set aside for the whole message when its first fragment arrived (≥ `bytes`).
    reserved: usize,
    reliable: bool,
}

/// What the receiving half hands to the application.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    Message {
        channel: u8,
        message: u32,
        data: Vec<u8>,
    },
    Expired {
        channel: u8,
        message: u32,
    },
}

/// Why a fragment was not taken.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The reassembly buffer is full: do not acknowledge the packet, so it comes again.
    NoRoom,
    /// The kind does not match the channel, or the channel does not exist.
    BadChannel,
}

/// Per-channel delivery state and the reassembly buffer.
#[derive(Debug)]
pub(crate) struct Receiver {
    channels: Vec<(ChannelKind, Channel)>,
    partials: HashMap<(u8, u32), Partial>,
    /// Sum of the partials' reservations, ≤ `max_partial_bytes` unless one message alone
    /// is larger.
    partial_bytes: usize,
    max_partial_bytes: usize,
    /// Length of a fragment that is not the last one, as this side would cut it; reserves
    /// room for a message whose last fragment arrives first.
    fragment_len: usize,
    pub(crate) delivered: VecDeque<Delivery>,
}

impl Receiver {
    pub(crate) fn new(
        kinds: impl Iterator<Item = ChannelKind>,
        max_partial_bytes: usize,
        fragment_len: usize,
    ) -> Receiver {
        let channels = kinds
            .map(|kind| {
                let state = match kind {
                    ChannelKind::ReliableOrdered => Channel::Ordered {
                        next: 0,
                        held: BTreeMap::new(),
                    },
                    ChannelKind::ReliableUnordered | ChannelKind::Deadline => {
                        Channel::Unordered(Seen::default())
                    }
                    ChannelKind::Unreliable => Channel::Unreliable,
                    ChannelKind::Sequenced => Channel::Sequenced { newest: None },
                };
                (kind, state)
            })
            .collect();
        Receiver {
            channels,
            partials: HashMap::new(),
            partial_bytes: 0,
            max_partial_bytes,
            fragment_len,
            delivered: VecDeque::new(),
        }
    }

    /// The oldest message of reliable `channel` not delivered yet (`None` for the other
    /// kinds or no such channel).
    pub(crate) fn first_missing(&self, channel: u8) -> Option<u32> {
        match &self.channels.get(usize::from(channel))?.1 {
            Channel::Ordered { next, .. } => Some(*next),
            Channel::Unordered(seen) => Some(seen.floor),
            Channel::Unreliable | Channel::Sequenced { .. } => None,
        }
    }

    /// Whether `message` of `channel` was delivered (or expired) already.
    pub(crate) fn done(&self, channel: u8, message: u32) -> bool {
        match &self.channels[usize::from(channel)].1 {
            Channel::Ordered { next, held } => message < *next || held.contains_key(&message),
            Channel::Unordered(seen) => seen.contains(message),
            Channel::Unreliable => false,
            Channel::Sequenced { newest } => newest.is_some_and(|n| message <= n),
        }
    }

    /// Takes one `Data` frame.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn handle_data(
        &mut self,
        channel: u8,
        kind: ChannelKind,
        message: u32,
        fragment: u16,
        fragments: u16,
        payload: &[u8],
        stats: &mut ConnectionStats,
    ) -> Result<(), Refused> {
        match self.channels.get(usize::from(channel)) {
            Some(&(k, _)) if k == kind => {}
            _ => return Err(Refused::BadChannel),
        }
        if self.done(channel, message) {
            if kind == ChannelKind::Sequenced {
                stats.sequenced_dropped += 1;
            } else {
                stats.duplicate_messages += 1;
            }
            return Ok(());
        }
        let base = match &self.channels[usize::from(channel)].1 {
            Channel::Ordered { next, .. } => Some(*next),
            Channel::Unordered(seen) => Some(seen.floor),
            Channel::Unreliable | Channel::Sequenced { .. } => None,
        };
        if base.is_some_and(|base| message.wrapping_sub(base) >= MAX_AHEAD) {
            return Err(Refused::NoRoom);
        }
        if fragments == 1 {
            self.complete(channel, message, payload.to_vec(), stats);
            return Ok(());
        }
        let key = (channel, message);
        if !self.partials.contains_key(&key) {
            // Room for the whole message is set aside at its first fragment, so that the
            // messages being reassembled can always complete: a new one waits (its packet is
            // refused and comes again) rather than starving them.
            let per_fragment = if fragment + 1 < fragments {
                payload.len()
            } else {
                self.fragment_len.max(payload.len())
            };
            let reserve = usize::from(fragments) * per_fragment;
            if self.partial_bytes + reserve > self.max_partial_bytes {
                self.evict_unreliable();
            }
            if self.partial_bytes + reserve > self.max_partial_bytes && !self.partials.is_empty() {
                return Err(Refused::NoRoom);
            }
            let partial = Partial {
                parts: vec![None; usize::from(fragments)],
                missing: usize::from(fragments),
                bytes: 0,
                reserved: reserve,
                reliable: kind.is_reliable(),
            };
            self.partial_bytes += reserve;
            self.partials.insert(key, partial);
        }
        let room = self.max_partial_bytes.saturating_sub(self.partial_bytes);
        let Some(partial) = self.partials.get_mut(&key) else {
            return Ok(());
        };
        if partial.parts.len() != usize::from(fragments) {
            return Err(Refused::BadChannel);
        }
        let slot = &mut partial.parts[usize::from(fragment)];
        if slot.is_some() {
            stats.duplicate_messages += 1;
            return Ok(());
        }
        // Fragments longer than the reservation (a peer that cuts differently) need room.
        let extra = (partial.bytes + payload.len()).saturating_sub(partial.reserved);
        if extra > room {
            return Err(Refused::NoRoom);
        }
        *slot = Some(payload.to_vec());
        partial.missing -= 1;
        partial.bytes += payload.len();
        partial.reserved += extra;
        self.partial_bytes += extra;
        if partial.missing == 0 {
            // The key was present a moment ago.
            let partial = self.partials.remove(&key).expect("partial present");
            self.partial_bytes -= partial.reserved;
            let data = partial.parts.into_iter().flatten().flatten().collect();
            self.complete(channel, message, data, stats);
        }
        Ok(())
    }

    /// Frees the memory of incomplete unreliable messages (they may never complete).
    fn evict_unreliable(&mut self) {
        let before = self.partials.len();
        self.partials.retain(|_, p| p.reliable);
        if self.partials.len() != before {
            self.partial_bytes = self.partials.values().map(|p| p.reserved).sum();
        }
    }

    fn complete(&mut self, channel: u8, message: u32, data: Vec<u8>, stats: &mut ConnectionStats) {
        let out = &mut self.delivered;
        match &mut self.channels[usize::from(channel)].1 {
            Channel::Ordered { next, held } => {
                held.insert(message, data);
                while let Some(data) = held.remove(next) {
                    out.push_back(Delivery::Message {
                        channel,
                        message: *next,
                        data,
                    });
                    *next = next.wrapping_add(1);
                }
            }
            Channel::Unordered(seen) => {
                seen.insert(message);
                out.push_back(Delivery::Message {
                    channel,
                    message,
                    data,
                });
            }
            Channel::Unreliable => out.push_back(Delivery::Message {
                channel,
                message,
                data,
            }),
            Channel::Sequenced { newest } => {
                if newest.is_some_and(|n| message <= n) {
                    stats.sequenced_dropped += 1;
                    return;
                }
                *newest = Some(message);
                out.push_back(Delivery::Message {
                    channel,
                    message,
                    data,
                });
            }
        }
    }

    /// The sender dropped `message` of deadline channel `channel`.
    pub(crate) fn handle_expired(&mut self, channel: u8, message: u32) {
        let Some((ChannelKind::Deadline, Channel::Unordered(seen))) =
            self.channels.get_mut(usize::from(channel))
        else {
            return;
        };
        if seen.contains(message) {
            return;
        }
        seen.insert(message);
        if let Some(partial) = self.partials.remove(&(channel, message)) {
            self.partial_bytes -= partial.reserved;
        }
        self.delivered
            .push_back(Delivery::Expired { channel, message });
    }
}
