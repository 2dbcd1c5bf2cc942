//! A compact connection's address: the client that was told its address changed (or that
//! heard nothing through two timeouts in a row) announces the short id in its short headers
//! until the server acknowledges a packet sent since (the server's side, moving the
//! connection, is the endpoint's `handle_short`).

use latlab_wire::transport::compact::ShortHeader;
use latlab_wire::transport::AckRanges;

use super::{Connection, State};

impl Connection {
    /// The client's address changed: announce the short id from the next packet on, and send
    /// one (a PING) at once. False if there is nothing to announce (see
    /// `Endpoint::local_address_changed`).
    pub(crate) fn local_address_changed(&mut self) -> bool {
        // Only a client sends Hellos, and only a client's address may change.
        let client = self.hello_attempts > 0;
        if !client || !self.compact || self.short_id.is_none() || self.state != State::Established {
            return false;
        }
        self.announce_from = Some(self.next_pn);
        self.ping_due = true;
        true
    }

    /// A client whose second timeout in a row passed with nothing acknowledged may have been
    /// moved by a NAT it was not told of (the server then counts its packets as foreign and
    /// answers none): it announces its short id, as if told.
    pub(super) fn announce_after_silence(&mut self) {
        if self.timeouts_in_a_row == 2 && self.announce_from.is_none() {
            self.local_address_changed();
        }
    }

    /// An ACK arrived: once it covers a packet sent since the address changed, the server has
    /// found the connection at the new address and the short id is no longer sent.
    pub(super) fn note_announce_acked(&mut self, ranges: &AckRanges) {
        let covered = |from| {
            ranges
                .as_slice()
                .iter()
                .any(|&(_, hi)| hi >= from && hi < self.next_pn)
        };
        if self.announce_from.is_some_and(covered) {
            self.announce_from = None;
        }
    }

    /// The short header of the next packet: its number against the largest acknowledged, and
    /// the short id while announcing a new address.
    pub(super) fn short_header(&self, ack_immediately: bool) -> ShortHeader {
        ShortHeader {
            short_id: self.announce_from.and(self.short_id),
            ..ShortHeader::new(ack_immediately, self.next_pn, self.largest_acked)
        }
    }
}
