//! Feedback that costs bytes only on loss ([`Feedback::Nack`]) and blind copies.
//!
//! The receiver watches each reliable channel: the highest message that arrived, when, and
//! the channel's tick (the smoothed time between messages). Message `k` is expected at
//! `arrived + (k − highest)·tick`; once that time plus the copy spacing (when copies are on)
//! plus the margin has passed and `k` has not arrived, a NACK names it. A NACK travels in an
//! ack-eliciting packet that asks for an immediate ACK: if that packet is lost (the loss
//! rules of the receiver's own packets, with tail-loss probes), or the message has not come
//! one timeout after the NACK (its repair lost), the messages still missing are NACKed again.
//! With copies on, the NACK and the repair each go twice, the copy's spacing apart, as every
//! message does. The sender answers a NACK by sending each message it still holds again, at
//! most once per half SRTT per fragment: a flood of NACKs costs it no more than that.
//!
//! With `nack-early` the first NACK does not wait for the blind copy: it goes once the first
//! copy is late by the margin, `expected + margin`, and its repair goes once. While the blind
//! copy is missing too, a second NACK follows the copy's spacing later and draws a second
//! repair, so a fragment may go again twice per half SRTT (a flood costs at most that). At
//! RTT 100 ms, one-way 50 ms, both copies lost: the repair arrives 50 + margin + 100 ms after
//! the message left, instead of 50 + spacing + margin + 100 ms.

use super::{Connection, FragKey, Item};
use crate::config::{Config, Copies, Feedback};
use crate::rtt::INITIAL_RTO_NS;

/// Most messages one look for late ones walks through per channel.
const NACK_SCAN: u32 = 256;

/// What a receiver knows of one channel's arrivals.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Watch {
    /// The highest message number that arrived, and when.
    highest: Option<(u32, u64)>,
    /// Smoothed time between two messages (ns), once two have arrived.
    tick: Option<u64>,
}

impl Connection {
    /// A copy of `message` of reliable `channel` arrived at `now`.
    pub(super) fn note_arrival(&mut self, now: u64, channel: u8, message: u32) {
        self.nack_pending.remove(&(channel, message));
        let Some(watch) = self.watches.get_mut(usize::from(channel)) else {
            return;
        };
        match watch.highest {
            Some((highest, at)) if message > highest => {
                let sample = now.saturating_sub(at) / u64::from(message - highest);
                watch.tick = Some(watch.tick.map_or(sample, |t| (7 * t + sample) / 8));
                watch.highest = Some((message, now));
            }
            None => watch.highest = Some((message, now)),
            Some(_) => {}
        }
    }

    /// When message `k` of a channel whose watch is `watch` counts as late.
    fn late_at(watch: &Watch, k: u32, config: &Config) -> Option<u64> {
        let ((highest, at), tick) = (watch.highest?, watch.tick?);
        let expected = if k > highest {
            at.saturating_add(u64::from(k - highest).saturating_mul(tick))
        } else {
            at.saturating_sub(u64::from(highest - k).saturating_mul(tick))
        };
        let recovery = config.recovery;
        // An early NACK does not wait for the blind copy.
        let spacing = match recovery.copies {
            Copies::Off => 0,
            Copies::On | Copies::Auto if recovery.nack_early => 0,
            Copies::On | Copies::Auto => recovery.duplicate_spacing_ns,
        };
        Some(expected + spacing + recovery.nack_margin_ns)
    }

    /// The messages of `channel` missing, from the oldest not delivered to one past the
    /// highest arrived, each with the earliest time it may be NACKed.
    fn nack_candidates<'a>(
        &'a self,
        channel: u8,
        config: &'a Config,
    ) -> impl Iterator<Item = (u32, u64)> + 'a {
        let watch = self.watches[usize::from(channel)];
        let first = self.receiver.first_missing(channel);
        let last = watch.highest.map(|(h, _)| h.saturating_add(1));
        // Empty when nothing arrived yet or nothing is missing.
        let (from, to) = match (first, last) {
            (Some(first), Some(last)) => (first, last.min(first.saturating_add(NACK_SCAN))),
            _ => (1, 0),
        };
        let range = from..=to;
        range
            .filter(move |&k| !self.receiver.done(channel, k))
            .filter_map(move |k| {
                let late = Self::late_at(&watch, k, config)?;
                let again = self.nack_pending.get(&(channel, k)).map_or(0, |p| p.0);
                Some((k, late.max(again)))
            })
    }

    /// How long after a NACK the message may be NACKed again: the receiver's own timeout.
    fn nack_retry_ns(&self, config: &Config) -> u64 {
        self.rtt.rto(self.rto_floor(config))
    }

    /// The earliest time a NACK is due, if any.
    pub(super) fn next_nack_at(&self, config: &Config) -> Option<u64> {
        if config.recovery.feedback != Feedback::Nack || !self.is_established() {
            return None;
        }
        (0..self.watches.len())
            .filter_map(|c| {
                self.nack_candidates(c as u8, config)
                    .map(|(_, at)| at)
                    .min()
            })
            .min()
    }

    /// The NACK frames due at `now` (runs of late messages, each at most 255 long), marked
    /// pending.
    pub(super) fn due_nacks(&mut self, now: u64, config: &Config) -> Vec<Item> {
        let mut items = Vec::new();
        if config.recovery.feedback != Feedback::Nack || !self.is_established() {
            return items;
        }
        let retry = self.nack_retry_ns(config);
        let recovery = config.recovery;
        let copies = recovery.copies != Copies::Off;
        for c in 0..self.watches.len() {
            let channel = c as u8;
            let late: Vec<u32> = self
                .nack_candidates(channel, config)
                .filter(|&(_, at)| at <= now)
                .map(|(k, _)| k)
                .collect();
            for k in late {
                let tries = self.nack_pending.get(&(channel, k)).map_or(0, |p| p.1);
                // With copies on, a NACK goes twice too (the copy's spacing apart); then one
                // timeout, doubling.
                let wait = match (tries, copies) {
                    (0, true) => recovery.duplicate_spacing_ns,
                    (n, true) => retry.saturating_mul(1 << (n - 1).min(6)),
                    (n, false) => retry.saturating_mul(1 << n.min(6)),
                };
                self.nack_pending
                    .insert((channel, k), (now + wait, tries + 1));
                let extends = matches!(items.last(), Some(&Item::Nack { channel: c, first, count })
                    if c == channel && first.checked_add(u32::from(count)) == Some(k) && count < 255);
                if extends {
                    if let Some(Item::Nack { count, .. }) = items.last_mut() {
                        *count += 1;
                    }
                } else {
                    items.push(Item::Nack {
                        channel,
                        first: k,
                        count: 1,
                    });
                }
            }
        }
        items
    }

    /// The packet carrying a NACK was lost: its messages still missing may be NACKed again.
    pub(super) fn nack_lost(&mut self, channel: u8, first: u32, count: u8) {
        for k in (0..u32::from(count)).filter_map(|i| first.checked_add(i)) {
            self.nack_pending.remove(&(channel, k));
        }
    }

    /// The peer NACKed `first..first + count` of `channel`: each fragment of those messages
    /// that we still hold, unacknowledged, goes again unless it went less than half an SRTT
    /// ago (with `nack-early`: unless it went twice within the last half SRTT). Messages we
    /// never sent or no longer hold change nothing.
    pub(super) fn handle_nack(
        &mut self,
        now: u64,
        channel: u8,
        first: u32,
        count: u8,
        config: &Config,
    ) {
        self.stats.nacks_received += 1;
        let gap = self.rtt.srtt().unwrap_or(INITIAL_RTO_NS) / 2;
        let early = config.recovery.nack_early;
        // Under `nack-early` the second NACK draws the second repair, not a blind copy.
        let copies = self.copies_active(config) && !early;
        let spacing = config.recovery.duplicate_spacing_ns;
        for number in (0..u32::from(count)).filter_map(|i| first.checked_add(i)) {
            let Some(message) = self.outgoing.get_mut(&(channel, number)) else {
                continue;
            };
            if !message.kind.is_reliable() || message.expired {
                continue;
            }
            let mut keys = Vec::new();
            for (index, fragment) in (0..message.fragments).enumerate() {
                let recent = if early {
                    message.sends[index] > 1 && now < message.prior_sent[index] + gap
                } else {
                    message.sends[index] > 0 && now < message.last_sent[index] + gap
                };
                if message.acked[index] || message.queued[index] || recent {
                    continue;
                }
                message.queued[index] = true;
                keys.push(FragKey {
                    channel,
                    message: number,
                    fragment,
                });
            }
            self.stats.nack_repairs += keys.len() as u64;
            if !keys.is_empty() && copies {
                // The repair goes twice as every message does, the copy's spacing apart.
                self.duplicates.insert((now + spacing, channel, number));
            }
            self.retransmit.extend(keys);
        }
    }

    /// Queues a blind copy of a fragment unless it was acknowledged, dropped or is already
    /// queued.
    pub(super) fn queue_copy(&mut self, key: FragKey) {
        if self.mark_queued(key) {
            self.copies.push_back(key);
        }
    }
}
