//! Loss recovery of a connection: the loss rules (`tcp-like`, `thin`, `rack`), the
//! retransmission timeout with its backoff, and deadline expiry of lost messages.

use super::{ConnEvent, Connection, FragKey, Item, LostPacket, KEPT_LOST};
use crate::config::{Config, LossRule};
use crate::rtt::INITIAL_RTO_NS;

impl Connection {
    pub(super) fn detect_losses(&mut self, now: u64, config: &Config) {
        let recovery = config.recovery;
        self.rack_timer = None;
        let srtt = self.rtt.srtt().unwrap_or(INITIAL_RTO_NS);
        let reo_wnd = if recovery.reo_wnd_ns > 0 {
            recovery.reo_wnd_ns
        } else {
            srtt / 4
        };
        let mut lost = Vec::new();
        for (&pn, packet) in &self.sent {
            if packet.later_acked == 0 {
                continue;
            }
            match recovery.rule {
                LossRule::TcpLike | LossRule::Thin => {
                    if packet.later_acked >= recovery.dupacks {
                        lost.push(pn);
                    }
                }
                LossRule::Rack => {
                    let at = packet.sent + srtt + reo_wnd;
                    if now >= at {
                        lost.push(pn);
                    } else {
                        self.rack_timer = Some(self.rack_timer.map_or(at, |t| t.min(at)));
                    }
                }
            }
        }
        for pn in lost {
            self.declare_lost(now, pn);
        }
    }

    pub(super) fn declare_lost(&mut self, now: u64, pn: u64) {
        let Some(packet) = self.sent.remove(&pn) else {
            return;
        };
        self.stats.packets_lost += 1;
        self.bytes_in_flight -= packet.size;
        self.cc.on_loss(packet.sent, now);
        for &item in &packet.items {
            match item {
                Item::Fragment(key) => {
                    self.copy_landed(key);
                    self.requeue(key);
                    self.expire_if_lost(key.channel, key.message);
                }
                Item::Bundled(key) => {
                    self.copy_landed(key);
                    self.expire_if_lost(key.channel, key.message);
                }
                Item::Expired { .. } => self.controls.push_back(item),
                Item::Ping => {}
            }
        }
        self.lost.insert(
            pn,
            LostPacket {
                items: packet.items,
            },
        );
        while self.lost.len() > KEPT_LOST {
            self.lost.pop_first();
        }
    }

    /// Sends a fragment again unless it was acknowledged, dropped or is already queued.
    pub(super) fn requeue(&mut self, key: FragKey) {
        let Some(message) = self.outgoing.get_mut(&(key.channel, key.message)) else {
            return;
        };
        let index = usize::from(key.fragment);
        if message.acked[index]
            || message.queued[index]
            || message.expired
            || !message.kind.is_reliable()
        {
            return;
        }
        message.queued[index] = true;
        self.retransmit.push_back(key);
    }

    /// Drops a message past its deadline once a fragment of it can no longer arrive, and
    /// reports it here and to the peer.
    pub(super) fn expire_if_lost(&mut self, channel: u8, number: u32) {
        let Some(message) = self.outgoing.get(&(channel, number)) else {
            return;
        };
        if !message.expired || !message.cannot_arrive() {
            return;
        }
        self.forget(channel, number);
        self.stats.expired += 1;
        self.events.push_back(ConnEvent::Expired {
            channel,
            message: number,
        });
        self.controls.push_back(Item::Expired {
            channel,
            message: number,
        });
    }

    pub(super) fn rto_deadline(&self, config: &Config) -> Option<u64> {
        let (_, oldest) = self.sent.first_key_value()?;
        Some(oldest.sent + self.rtt.rto(config.recovery.min_rto_ns) * self.backoff)
    }

    pub(super) fn on_rto(&mut self, now: u64, config: &Config) {
        let in_flight = self.sent.len();
        self.stats.timeouts += 1;
        // RFC 6298 5.4: the earliest packet not acknowledged goes again; the timer restarts.
        if let Some((&oldest, _)) = self.sent.first_key_value() {
            self.declare_lost(now, oldest);
        }
        let linear =
            config.recovery.rule == LossRule::Thin && in_flight < config.recovery.thin_packets;
        if !linear {
            self.backoff = (self.backoff * 2).min(64);
        }
        self.timeouts_in_a_row += 1;
        if self.timeouts_in_a_row >= 2 {
            self.cc.collapse(now);
        }
    }
}
