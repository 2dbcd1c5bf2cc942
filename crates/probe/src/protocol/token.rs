//! What a run mixes into the tokens its requests carry, so that a reply names the request it
//! answers and a reply to another run (or to nothing latlab sent) is told apart.

/// splitmix64's finaliser: a 64-bit mix of `z` (the run's keys are made with it).
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Bits of a [`RunKey`] token that hold the sequence number.
pub const SEQ_BITS: u32 = 40;
/// The sequence number's part of a token.
pub const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

/// A 64-bit token per request: the run's 24-bit tag (never zero) above the sequence number's
/// low 40 bits XORed with the run's mask (NTP's transmit timestamp, Quake III's challenge).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunKey {
    tag: u64,
    mask: u64,
}

impl RunKey {
    /// The key of run `run_id` for a protocol's `salt` (each protocol its own).
    pub fn new(run_id: u32, salt: u64) -> RunKey {
        let mixed = splitmix64(u64::from(run_id) ^ salt);
        RunKey {
            tag: ((mixed >> SEQ_BITS) & 0xff_ffff).max(1),
            mask: mixed & SEQ_MASK,
        }
    }

    /// The token of request `seq` (its low 40 bits).
    pub fn token(self, seq: u64) -> u64 {
        (self.tag << SEQ_BITS) | ((seq ^ self.mask) & SEQ_MASK)
    }

    /// The sequence number `token` holds, `None` for another run's token.
    pub fn seq(self, token: u64) -> Option<u64> {
        (token >> SEQ_BITS == self.tag).then_some((token ^ self.mask) & SEQ_MASK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_gives_back_its_sequence_number_to_its_run_only() {
        let (a, b) = (RunKey::new(7, 1), RunKey::new(8, 1));
        for seq in [0, 1, 12_345, SEQ_MASK] {
            assert_eq!(a.seq(a.token(seq)), Some(seq));
            assert_ne!(a.token(seq), 0);
        }
        assert_eq!(b.seq(a.token(3)), None);
        assert_ne!(RunKey::new(7, 2), a, "another protocol's salt, another key");
    }
}
