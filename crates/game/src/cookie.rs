//! Stateless join cookies and the keyed hasher of the server's tables.

use std::hash::BuildHasher;
use std::net::{IpAddr, SocketAddr};

use siphasher::sip::{SipHasher13, SipHasher24};

/// Makes and checks cookie MACs: SipHash-2-4 keyed by the server secret over
/// (source IP octets, source port, epoch, client nonce, game), all
/// big-endian. An IPv4 input is 22 bytes and an IPv6 input 34, and SipHash
/// hashes the length in, so the two families cannot collide by layout.
#[derive(Clone)]
pub(crate) struct CookieKey {
    hasher: SipHasher24,
}

impl CookieKey {
    pub(crate) fn new(secret: &[u8; 16]) -> CookieKey {
        CookieKey {
            hasher: SipHasher24::new_with_key(secret),
        }
    }

    /// The MAC a `Challenge` to `addr` carries.
    pub(crate) fn mac(&self, addr: SocketAddr, epoch: u32, client_nonce: u64, game: u32) -> u64 {
        let mut input = [0u8; 16 + 2 + 4 + 8 + 4];
        let ip_len = match addr.ip() {
            IpAddr::V4(ip) => {
                input[..4].copy_from_slice(&ip.octets());
                4
            }
            IpAddr::V6(ip) => {
                input[..16].copy_from_slice(&ip.octets());
                16
            }
        };
        let mut at = ip_len;
        for part in [
            &addr.port().to_be_bytes()[..],
            &epoch.to_be_bytes(),
            &client_nonce.to_be_bytes(),
            &game.to_be_bytes(),
        ] {
            input[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        self.hasher.hash(&input[..at])
    }

    /// Keys for the table hasher, derived from the secret so that they differ
    /// from the cookie key.
    pub(crate) fn table_hasher(&self) -> KeyedState {
        KeyedState {
            k0: self.hasher.hash(b"latlab-game table k0"),
            k1: self.hasher.hash(b"latlab-game table k1"),
        }
    }
}

impl std::fmt::Debug for CookieKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CookieKey(<redacted>)")
    }
}

/// `BuildHasher` for the server's maps: SipHash-1-3 under a key derived from
/// the server secret. Deterministic for a given secret (no OS randomness, as
/// `RandomState` would draw) and still unpredictable to peers.
#[derive(Clone)]
pub(crate) struct KeyedState {
    k0: u64,
    k1: u64,
}

impl BuildHasher for KeyedState {
    type Hasher = SipHasher13;

    fn build_hasher(&self) -> SipHasher13 {
        SipHasher13::new_with_keys(self.k0, self.k1)
    }
}

impl std::fmt::Debug for KeyedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyedState(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SipHash-2-4 reference vector (Aumasson & Bernstein, appendix A):
    /// key 00..0f, message 00..0e (15 bytes) → a129ca6149be45e5.
    #[test]
    fn siphash_is_the_reference_siphash_2_4() {
        let key: [u8; 16] = core::array::from_fn(|i| i as u8);
        let message: [u8; 15] = core::array::from_fn(|i| i as u8);
        assert_eq!(
            SipHasher24::new_with_key(&key).hash(&message),
            0xa129_ca61_49be_45e5
        );
    }

    #[test]
    fn mac_binds_every_input() {
        let key = CookieKey::new(&[9; 16]);
        let addr: SocketAddr = "10.0.0.2:4000".parse().unwrap();
        let mac = key.mac(addr, 5, 77, 0);
        assert_eq!(mac, key.mac(addr, 5, 77, 0));
        assert_ne!(mac, key.mac("10.0.0.3:4000".parse().unwrap(), 5, 77, 0));
        assert_ne!(mac, key.mac("10.0.0.2:4001".parse().unwrap(), 5, 77, 0));
        assert_ne!(
            mac,
            key.mac("[::ffff:10.0.0.2]:4000".parse().unwrap(), 5, 77, 0)
        );
        assert_ne!(mac, key.mac(addr, 6, 77, 0));
        assert_ne!(mac, key.mac(addr, 5, 78, 0));
        assert_ne!(mac, key.mac(addr, 5, 77, 1));
        assert_ne!(mac, CookieKey::new(&[8; 16]).mac(addr, 5, 77, 0));
    }
}
