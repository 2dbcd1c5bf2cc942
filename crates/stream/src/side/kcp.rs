//! `kcp`: KCP (the `kcp` crate, a Rust port of skywind3000/kcp) in message mode, with the two
//! settings KCP's README names: `mode=fast` (`nodelay 1, interval 10, resend 2, nc 1`) and
//! `mode=normal` (KCP's defaults: `nodelay 0, interval 40, resend 0, nc 0`).
//!
//! The conversation id is the run's id, so datagrams of another run (or garbage) are counted
//! and dropped before KCP sees them. KCP's clock is whole milliseconds of the side's time, and
//! `update` runs when `check` says it is due, as KCP's README asks.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Boxes, Side};

/// The datagrams KCP's output wrote, kept until the side takes them.
type Written = Arc<Mutex<VecDeque<Vec<u8>>>>;

fn lock(written: &Mutex<VecDeque<Vec<u8>>>) -> MutexGuard<'_, VecDeque<Vec<u8>>> {
    // Only the side's own thread ever holds it; a poisoned lock still holds whole datagrams.
    written.lock().unwrap_or_else(|e| e.into_inner())
}

/// KCP's output: each write is one datagram.
struct KcpOutput(Written);

impl Write for KcpOutput {
    fn write(&mut self, datagram: &[u8]) -> io::Result<usize> {
        lock(&self.0).push_back(datagram.to_vec());
        Ok(datagram.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// KCP's settings for `mode=fast` (`nodelay 1, interval 10, resend 2, nc 1`) or `mode=normal`
/// (its defaults: `nodelay 0, interval 40, resend 0, nc 0`).
fn configure<W: Write>(kcp: &mut kcp::Kcp<W>, fast: bool) {
    if fast {
        kcp.set_nodelay(true, 10, 2, true);
    } else {
        kcp.set_nodelay(false, 40, 0, false);
    }
}

/// KCP in message mode.
pub(super) struct KcpSide {
    kcp: kcp::Kcp<KcpOutput>,
    written: Written,
    run: u32,
    /// The far side; the receiver learns it from the first datagram of its run.
    peer: Option<SocketAddr>,
    /// KCP's clock at the last call, ms.
    now_ms: u32,
    failed: Option<String>,
    /// Datagrams not of this run, or that KCP refused.
    foreign: u64,
    buf: Vec<u8>,
    boxes: Boxes,
}

impl KcpSide {
    /// A side of run `run` (its conversation id); `peer` is where a sender sends.
    pub(super) fn new(run: u32, fast: bool, peer: Option<SocketAddr>) -> io::Result<KcpSide> {
        let written = Arc::new(Mutex::new(VecDeque::new()));
        let mut kcp = kcp::Kcp::new(run, KcpOutput(written.clone()));
        configure(&mut kcp, fast);
        // KCP's clock starts at 0 with a first update, before anything is sent.
        kcp.update(0)
            .map_err(|e| io::Error::other(format!("kcp: {e}")))?;
        Ok(KcpSide {
            kcp,
            written,
            run,
            peer,
            now_ms: 0,
            failed: None,
            foreign: 0,
            buf: vec![0; 65_536],
            boxes: Boxes::default(),
        })
    }

    /// Moves what KCP wrote to the outbox, towards the peer once it is known.
    fn take_written(&mut self) {
        let written: Vec<Vec<u8>> = lock(&self.written).drain(..).collect();
        if let Some(peer) = self.peer {
            self.boxes
                .outbox
                .extend(written.into_iter().map(|d| (peer, d)));
        }
    }

    /// Updates KCP at `now` (ns) and takes what it wrote and delivered.
    fn update(&mut self, now: u64) {
        // KCP's times wrap, as it expects.
        self.now_ms = (now / 1_000_000) as u32;
        if let Err(e) = self.kcp.update(self.now_ms) {
            self.failed.get_or_insert(format!("kcp: {e}"));
        }
        self.take_written();
        while let Ok(n) = self.kcp.recv(&mut self.buf) {
            self.boxes.inbox.push_back(self.buf[..n].to_vec());
        }
    }
}

impl Side for KcpSide {
    fn send(&mut self, now: u64, message: &[u8]) -> io::Result<()> {
        // Queued: KCP sends it at its next flush.
        self.kcp
            .send(message)
            .map_err(|e| io::Error::other(format!("kcp: {e}")))?;
        self.update(now);
        Ok(())
    }
    fn handle_datagram(&mut self, now: u64, from: SocketAddr, data: &[u8]) {
        let ours = data.len() >= kcp::KCP_OVERHEAD
            && kcp::get_conv(data) == self.run
            && self.peer.is_none_or(|p| p == from);
        if !ours {
            self.foreign += 1;
            return;
        }
        self.peer.get_or_insert(from);
        if self.kcp.input(data).is_err() {
            self.foreign += 1;
        }
        self.update(now);
    }
    fn handle_timeout(&mut self, now: u64) {
        self.update(now);
    }
    fn poll_timeout(&mut self) -> Option<u64> {
        // After an update `check` can still say "now": a segment whose resend time has passed
        // waits for the next flush, which `check` does not tell. KCP counts whole
        // milliseconds, so that flush comes at the next one.
        let at = self.kcp.check(self.now_ms);
        let ahead = (at.wrapping_sub(self.now_ms) as i32).max(1) as u64;
        Some((u64::from(self.now_ms) + ahead) * 1_000_000)
    }
    fn boxes(&mut self) -> &mut Boxes {
        &mut self.boxes
    }
    fn is_connected(&self) -> bool {
        true
    }
    fn retransmissions(&self) -> (Option<u64>, Option<u64>) {
        // KCP keeps its retransmission count to itself.
        (None, None)
    }
    fn failure(&self) -> Option<String> {
        self.failed.clone()
    }
    fn foreign(&self) -> u64 {
        self.foreign
    }
    fn close(&mut self, _now: u64) {
        let _ = self.kcp.flush();
        self.take_written();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_datagrams_of_the_run_never_panic_kcp() {
        let mut e = KcpSide::new(7, true, None).unwrap();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut buf = [0u8; 200];
        let mut out = vec![0u8; 65_536];
        for i in 0..50_000u32 {
            let len = (next() % 200) as usize;
            for b in &mut buf[..len] {
                *b = next() as u8;
            }
            if len >= 24 {
                // The run's conversation, and now and then a command KCP knows (81..=84) with a
                // length that fits, so the input gets past its first checks.
                buf[..4].copy_from_slice(&7u32.to_le_bytes());
                if next() % 2 == 0 {
                    buf[4] = 81 + (next() % 4) as u8;
                    let data = (len - 24) as u32;
                    buf[20..24].copy_from_slice(&data.to_le_bytes());
                }
            }
            let _ = e.kcp.input(&buf[..len]);
            let _ = e.kcp.update(i);
            while let Ok(n) = e.kcp.recv(&mut out) {
                assert!(n <= out.len());
            }
        }
    }
}
