//! Loss recovery of a connection: the loss rules (`tcp-like`, `thin`, `rack`), the
//! retransmission timeout with its backoff, and deadline expiry of lost messages.

use super::{ConnEvent, Connection, FragKey, Item, LostPacket, KEPT_LOST};
use crate::config::{Config, Feedback, LossRule};
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
        self.packets_since_loss = 0;
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
                Item::Xor(key) => {
                    self.requeue(key);
                    self.expire_if_lost(key.channel, key.message);
                }
                Item::Expired { .. } => self.controls.push_back(item),
                Item::Nack {
                    channel,
                    first,
                    count,
                } => self.nack_lost(channel, first, count),
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
        if self.mark_queued(key) {
            self.retransmit.push_back(key);
        }
    }

    /// Marks a fragment queued to go again (a retransmission or a blind copy) and says so,
    /// unless it was acknowledged, dropped, is already queued or is not reliable.
    pub(super) fn mark_queued(&mut self, key: FragKey) -> bool {
        let Some(message) = self.outgoing.get_mut(&(key.channel, key.message)) else {
            return false;
        };
        let index = usize::from(key.fragment);
        if message.acked[index]
            || message.queued[index]
            || message.expired
            || !message.kind.is_reliable()
        {
            return false;
        }
        message.queued[index] = true;
        true
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

    /// When the retransmission timeout fires: from the oldest packet in flight, the RTO (with
    /// `tlp`, a thin stream's is SRTT + 4·RTTVAR without the `min-rto` floor) times the
    /// backoff; under NACK feedback plus the time a cumulative ACK may wait.
    pub(super) fn rto_deadline(&self, config: &Config) -> Option<u64> {
        let (_, oldest) = self.sent.first_key_value()?;
        let recovery = config.recovery;
        let floor = self.rto_floor(config);
        let wait = match recovery.feedback {
            Feedback::Nack if !oldest.asked_now => recovery.ack_every_ns,
            _ => 0,
        };
        Some(oldest.sent + self.rtt.rto(floor) * self.backoff + wait)
    }

    /// The RTO's lower bound: none for a thin stream with `tlp` once the RTT is known (its
    /// timeout is the tail-loss probe, SRTT + 4·RTTVAR), `min-rto` otherwise.
    pub(super) fn rto_floor(&self, config: &Config) -> u64 {
        let recovery = config.recovery;
        let thin = self.sent.len() < recovery.thin_packets;
        if recovery.tlp && thin && self.rtt.srtt().is_some() {
            0
        } else {
            recovery.min_rto_ns
        }
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
