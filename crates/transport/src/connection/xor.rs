//! XOR copies (`xor=on`): a blind copy of whole message `n` carries `n ⊕ (n − 1)`.
//!
//! The copy costs what a plain one does (the longer payload and one more length) and gives
//! the older message a third chance on a fixed schedule, one interval plus the copy spacing
//! after its first: a receiver that has `n` recovers `n − 1`, one that has `n − 1` recovers
//! `n`. At an interval shorter than the round trip it comes before a NACK's repair could; at
//! RTT = interval it is the chance that needs no feedback, when a NACK or its repair is lost.
//!
//! The receiver remembers the last [`KEPT`] whole reliable messages it took (once its own
//! policy or the peer uses XOR copies) and the last [`PENDING`] XOR frames of which it had
//! neither message, to be solved when one of the two comes. Both are bounded, whatever the
//! peer sends: a forged XOR frame can only deliver what its sender could have sent as `Data`.

use std::collections::VecDeque;

use latlab_wire::transport::{xor, ChannelKind, Frame};

use super::{Connection, FragKey};
use crate::config::{Config, Feedback, XorCopies};
use crate::recv::Refused;

/// Whole messages a receiver remembers to solve XOR frames with.
const KEPT: usize = 8;
/// XOR frames kept while neither of their messages has arrived.
const PENDING: usize = 16;

/// An `Xor` frame, owned.
#[derive(Debug, Clone)]
struct XorCopy {
    channel: u8,
    kind: ChannelKind,
    message: u32,
    older: u32,
    len: u16,
    older_len: u16,
    payload: Vec<u8>,
}

/// A connection's XOR state.
#[derive(Debug)]
pub(crate) struct XorState {
    /// Recent whole reliable messages: channel, number, bytes.
    kept: VecDeque<(u8, u32, Vec<u8>)>,
    /// XOR frames waiting for either of their messages.
    pending: VecDeque<XorCopy>,
    /// The peer sent an XOR frame: whole messages are kept from now on.
    peer_xors: bool,
    /// Sender: per channel, when its last reliable message was sent (0: none yet) and the
    /// smoothed time between two ([`XorCopies::Auto`]).
    ticks: Vec<(u64, Option<u64>)>,
}

impl XorState {
    /// The state of a connection with `channels` channels.
    pub(crate) fn new(channels: usize) -> XorState {
        XorState {
            kept: VecDeque::new(),
            pending: VecDeque::new(),
            peer_xors: false,
            ticks: vec![(0, None); channels],
        }
    }

    fn find(&self, channel: u8, message: u32) -> Option<&[u8]> {
        self.kept
            .iter()
            .rev()
            .find(|(c, m, _)| (*c, *m) == (channel, message))
            .map(|(_, _, data)| data.as_slice())
    }
}

impl Connection {
    /// A reliable message of `channel` is sent at `now`: the channel's tick follows.
    pub(super) fn note_send_tick(&mut self, now: u64, channel: u8, kind: ChannelKind) {
        let tick = self.xors.ticks.get_mut(usize::from(channel));
        let Some((last, tick)) = tick.filter(|_| kind.is_reliable()) else {
            return;
        };
        if *last > 0 {
            let sample = now.saturating_sub(*last);
            *tick = Some(tick.map_or(sample, |t| (7 * t + sample) / 8));
        }
        *last = now.max(1);
    }

    /// Whether the blind copies of `channel` go as XOR copies now: always with `xor=on`; with
    /// `xor=auto` while the next message's copy (one tick and the copy spacing after a message)
    /// would reach the peer before a NACK's repair of it could (one SRTT and the NACK margin
    /// after its expected arrival, and the spacing too without `nack-early`).
    pub(super) fn xor_copies(&self, channel: u8, config: &Config) -> bool {
        let recovery = config.recovery;
        match recovery.xor {
            XorCopies::Off => false,
            XorCopies::On => true,
            XorCopies::Auto => {
                let tick = self.xors.ticks.get(usize::from(channel)).and_then(|t| t.1);
                let (Some(tick), Some(srtt)) = (tick, self.rtt.srtt()) else {
                    return false;
                };
                let spacing = recovery.duplicate_spacing_ns;
                let wait = if recovery.nack_early { 0 } else { spacing };
                tick + spacing < srtt + recovery.nack_margin_ns + wait
            }
        }
    }

    /// Writes the XOR copy of `key` into `buf` when one applies (a whole message of a reliable
    /// channel whose previous message is whole, held and unacknowledged) and fits: its length.
    pub(super) fn emit_xor(&self, key: FragKey, buf: &mut [u8]) -> Option<usize> {
        let older = key.message.checked_sub(1)?;
        let newer = self.outgoing.get(&(key.channel, key.message))?;
        let before = self.outgoing.get(&(key.channel, older))?;
        let whole = |m: &super::OutMessage| m.fragments == 1 && !m.acked[0] && !m.expired;
        if !newer.kind.is_reliable() || !whole(newer) || !whole(before) {
            return None;
        }
        let (a, b) = (newer.data.as_slice(), before.data.as_slice());
        let mut payload = vec![0u8; a.len().max(b.len())];
        xor::xor_into(&mut payload, a, b);
        let frame = Frame::Xor {
            channel: key.channel,
            kind: newer.kind,
            message: key.message,
            back: 1,
            len: u16::try_from(a.len()).ok()?,
            older_len: u16::try_from(b.len()).ok()?,
            payload: &payload,
        };
        if self.frame_len(&frame) > buf.len() {
            return None;
        }
        Some(self.emit_frame(&frame, buf))
    }

    /// An XOR copy of `key` went out in place of a plain one.
    pub(super) fn note_xor_sent(&mut self, key: FragKey) {
        if let Some(message) = self.outgoing.get_mut(&(key.channel, key.message)) {
            message.queued[usize::from(key.fragment)] = false;
        }
        self.stats.xor_copies += 1;
        // Counted as a plain copy is.
        self.stats.retransmissions += 1;
    }

    /// A whole message of a reliable channel arrived (as `Data` or recovered): kept to solve
    /// XOR frames, and any pending frame it solves is solved.
    pub(super) fn keep_whole(
        &mut self,
        now: u64,
        channel: u8,
        message: u32,
        data: &[u8],
        config: &Config,
    ) {
        if config.recovery.xor == XorCopies::Off && !self.xors.peer_xors {
            return;
        }
        if self.xors.find(channel, message).is_some() {
            // A copy of a message kept already (a repair after the first arrived).
            return;
        }
        let mut work = vec![(channel, message, data.to_vec())];
        while let Some((channel, message, data)) = work.pop() {
            let names =
                |x: &XorCopy| x.channel == channel && (x.message == message || x.older == message);
            let mut solved = Vec::new();
            while let Some(at) = self.xors.pending.iter().position(names) {
                solved.extend(self.xors.pending.remove(at));
            }
            for x in solved {
                if let Some((number, bytes)) = self.solve(&x, message, &data) {
                    if self.take_recovered(now, &x, number, &bytes, config) {
                        work.push((channel, number, bytes));
                    }
                }
            }
            if self.xors.kept.len() == KEPT {
                self.xors.kept.pop_front();
            }
            self.xors.kept.push_back((channel, message, data));
        }
    }

    /// The message `x` gives from `known` (one of its two): its number and bytes, unless it
    /// was delivered already or `known` is not as long as `x` says.
    fn solve(&self, x: &XorCopy, known: u32, data: &[u8]) -> Option<(u32, Vec<u8>)> {
        let (want, known_len, want_len) = if known == x.message {
            (x.older, x.len, x.older_len)
        } else {
            (x.message, x.older_len, x.len)
        };
        if self.receiver.done(x.channel, want) {
            return None;
        }
        Some((want, xor::recover(&x.payload, data, known_len, want_len)?))
    }

    /// Hands a recovered message to the receiver as if its `Data` frame had arrived; whether
    /// it was taken.
    fn take_recovered(
        &mut self,
        now: u64,
        x: &XorCopy,
        number: u32,
        data: &[u8],
        config: &Config,
    ) -> bool {
        if config.recovery.feedback == Feedback::Nack {
            self.note_arrival(now, x.channel, number);
        }
        let result =
            self.receiver
                .handle_data(x.channel, x.kind, number, 0, 1, data, &mut self.stats);
        if result == Err(Refused::NoRoom) {
            self.stats.reassembly_refused += 1;
            return false;
        }
        self.stats.xor_recovered += 1;
        true
    }

    /// An `Xor` frame arrived (its channel's kind already checked).
    pub(super) fn handle_xor(&mut self, now: u64, frame: &Frame<'_>, config: &Config) {
        let Frame::Xor {
            channel,
            kind,
            message,
            back,
            len,
            older_len,
            payload,
        } = *frame
        else {
            return;
        };
        self.xors.peer_xors = true;
        let older = message.wrapping_sub(u32::from(back));
        let x = XorCopy {
            channel,
            kind,
            message,
            older,
            len,
            older_len,
            payload: payload.to_vec(),
        };
        let (have_new, have_old) = (
            self.receiver.done(channel, message),
            self.receiver.done(channel, older),
        );
        if have_new && have_old {
            self.stats.duplicate_messages += 1;
            return;
        }
        for known in [message, older] {
            let Some(data) = self.xors.find(channel, known).map(<[u8]>::to_vec) else {
                continue;
            };
            if let Some((number, bytes)) = self.solve(&x, known, &data) {
                if self.take_recovered(now, &x, number, &bytes, config) {
                    self.keep_whole(now, channel, number, &bytes, config);
                }
            }
            return;
        }
        if have_new || have_old {
            // One is delivered but no longer kept: nothing to solve with.
            return;
        }
        if self.xors.pending.len() == PENDING {
            self.xors.pending.pop_front();
        }
        self.xors.pending.push_back(x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::State;

    fn xor_frame(message: u32, (len, older_len): (u16, u16), payload: &[u8]) -> Frame<'_> {
        Frame::Xor {
            channel: 0,
            kind: ChannelKind::ReliableOrdered,
            message,
            back: 1,
            len,
            older_len,
            payload,
        }
    }

    #[test]
    fn a_flood_of_xor_frames_keeps_bounded_state_and_delivers_only_what_they_solve() {
        let config = Config {
            recovery: "game:xor=on".parse().unwrap(),
            ..Config::server()
        };
        let addr = "10.0.0.1:5000".parse().unwrap();
        let mut c = Connection::new(0, 1, addr, State::Established, &config);
        let kind = ChannelKind::ReliableOrdered;
        // 10,000 frames pairing messages that never came: kept, at most PENDING of them.
        for n in 0..10_000u32 {
            let payload = [n as u8; 100];
            c.handle_xor(0, &xor_frame(1_000 + n, (100, 100), &payload), &config);
            assert!(c.xors.pending.len() <= PENDING);
        }
        assert_eq!(c.stats.xor_recovered, 0);
        // A frame whose message arrives is solved: 0 ⊕ 1 with 0 known gives 1.
        let (zero, one) = ([7u8; 10], [9u8; 12]);
        let mut payload = [0u8; 12];
        xor::xor_into(&mut payload, &one, &zero);
        c.handle_xor(0, &xor_frame(1, (12, 10), &payload), &config);
        assert_eq!(c.stats.xor_recovered, 0);
        c.receiver
            .handle_data(0, kind, 0, 0, 1, &zero, &mut c.stats)
            .unwrap();
        c.keep_whole(0, 0, 0, &zero, &config);
        assert_eq!(c.stats.xor_recovered, 1);
        assert!(c.receiver.done(0, 1));
        let got: Vec<_> = c.receiver.delivered.drain(..).collect();
        assert_eq!(got.len(), 2);
        assert!(
            matches!(&got[1], crate::recv::Delivery::Message { message: 1, data, .. } if data == &one)
        );
        // Whole messages kept: at most KEPT.
        for m in 2..100u32 {
            c.keep_whole(0, 0, m, &[1; 4], &config);
        }
        assert!(c.xors.kept.len() <= KEPT);
    }
}
