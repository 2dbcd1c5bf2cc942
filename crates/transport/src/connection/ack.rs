//! Acknowledgements a connection receives: RTT samples, packets and fragments acknowledged,
//! spurious retransmissions, and what it forgets once a message is whole at the peer.

use latlab_wire::transport as wire;

use super::{Connection, FragKey, Item};
use crate::config::{Config, Feedback};

impl Connection {
    pub(super) fn handle_ack(
        &mut self,
        now: u64,
        delay_us: u32,
        ranges: &wire::AckRanges,
        config: &Config,
    ) {
        // The base of our truncated packet numbers: only a number we sent counts.
        if let Some(largest) = ranges.largest().filter(|&l| l < self.next_pn) {
            self.largest_acked = Some(self.largest_acked.map_or(largest, |a| a.max(largest)));
        }
        let mut newly: Vec<u64> = Vec::new();
        for &(lo, hi) in ranges.as_slice() {
            newly.extend(self.sent.range(lo..=hi).map(|(&pn, _)| pn));
            let late: Vec<u64> = self.lost.range(lo..=hi).map(|(&pn, _)| pn).collect();
            for pn in late {
                if let Some(lost) = self.lost.remove(&pn) {
                    self.late_ack(&lost.items);
                }
            }
        }
        if newly.is_empty() {
            return;
        }
        newly.sort_unstable();
        let largest = *newly.last().expect("not empty");
        if ranges.largest() == Some(largest) {
            let packet = &self.sent[&largest];
            let sample = now.saturating_sub(packet.sent);
            let delay = u64::from(delay_us) * 1_000;
            let sample = if sample > delay {
                sample - delay
            } else {
                sample
            };
            self.rtt.update(sample);
        }
        self.backoff = 1;
        self.timeouts_in_a_row = 0;
        let limited = 2 * self.bytes_in_flight >= self.cc.window;
        for &pn in &newly {
            for (_, packet) in self.sent.range_mut(..pn) {
                packet.later_acked += 1;
            }
        }
        for pn in newly {
            let packet = self.sent.remove(&pn).expect("listed above");
            self.bytes_in_flight -= packet.size;
            self.packets_since_loss += 1;
            if config.recovery.feedback == Feedback::Nack {
                if let Some(l) = packet.ack_largest {
                    self.received.floor = Some(self.received.floor.map_or(l, |f| f.max(l)));
                }
            }
            self.cc
                .on_ack(packet.sent, packet.size, config.mtu, limited);
            for item in packet.items {
                if let Item::Fragment(key) | Item::Bundled(key) = item {
                    self.copy_landed(key);
                    self.ack_fragment(key);
                }
            }
        }
        self.detect_losses(now, config);
    }

    /// A packet declared lost was acknowledged after all.
    pub(super) fn late_ack(&mut self, items: &[Item]) {
        for item in items {
            if let Item::Bundled(key) = *item {
                self.ack_fragment(key);
            }
            if let Item::Fragment(key) = *item {
                let resent = self
                    .outgoing
                    .get(&(key.channel, key.message))
                    .is_none_or(|m| m.sends[usize::from(key.fragment)] > 1);
                if resent {
                    self.stats.spurious_retransmissions += 1;
                }
                self.ack_fragment(key);
            }
        }
    }

    /// A packet carrying a copy of `key` was acknowledged or declared lost.
    pub(super) fn copy_landed(&mut self, key: FragKey) {
        if let Some(message) = self.outgoing.get_mut(&(key.channel, key.message)) {
            let copies = &mut message.in_flight[usize::from(key.fragment)];
            *copies = copies.saturating_sub(1);
        }
    }

    pub(super) fn ack_fragment(&mut self, key: FragKey) {
        let Some(message) = self.outgoing.get_mut(&(key.channel, key.message)) else {
            return;
        };
        let index = usize::from(key.fragment);
        if message.acked[index] {
            return;
        }
        message.acked[index] = true;
        message.unacked -= 1;
        if message.unacked == 0 {
            self.forget(key.channel, key.message);
        }
    }

    pub(super) fn forget(&mut self, channel: u8, number: u32) {
        if let Some(message) = self.outgoing.remove(&(channel, number)) {
            self.outgoing_bytes -= message.data.len();
            if let Some(at) = message.expires {
                self.expiries.remove(&(at, channel, number));
            }
        }
    }
}
