//! The prober of the timestamp study: one latlab probe in flight at a time, every stamp of
//! each kept.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use latlab_engine::Stop;
use latlab_io::clock::{now_ns, wait_until};
use latlab_io::port::{DatagramPort, NoStamp, SendQueue};
use latlab_io::udp::{RecvBatch, UdpSocket};
use latlab_wire::probe::{Packet, Repr, ResponderClock, HEADER_LEN};

use super::ProbeStamps;

/// How long the prober waits for one answer before it counts the probe lost.
const ANSWER_TIMEOUT: Duration = Duration::from_millis(100);

/// What one prober run gives.
#[derive(Debug, Default)]
pub(super) struct Probed {
    pub(super) sent: u64,
    pub(super) probes: Vec<ProbeStamps>,
    /// The probes lost, by cause (set by the point that ran the prober).
    pub(super) lost_by_cause: Option<latlab_lab::losses::LostByCause>,
}

/// Sends `count` probes to `target` over `socket` (opened with receive and transmit
/// stamps), one every `1/rate_pps` seconds and never before the last one's answer came or
/// timed out; waits for answers busy polling (`busy`) or blocking in `ppoll`.
pub(super) fn probe(
    socket: &UdpSocket,
    target: SocketAddr,
    count: u64,
    rate_pps: f64,
    busy: bool,
    stop: &Stop,
) -> io::Result<Probed> {
    let run_id = (now_ns() as u32) | 1;
    let gap_ns = (1e9 / rate_pps.max(1.0)) as u64;
    let mut batch = RecvBatch::new(4, 2048);
    let mut buf = [0u8; HEADER_LEN];
    let mut tx_stamps = Vec::new();
    let mut out = Probed::default();
    // Transmit stamps come with the socket's datagram counter, from 0: one per probe sent.
    let mut tx_by_counter: Vec<Option<u64>> = Vec::new();
    let mut answered: Vec<u64> = Vec::new();
    let mut next = now_ns() + 1_000_000;
    for seq in 0..count {
        if stop.is_raised() {
            break;
        }
        wait_until(next, 200_000);
        next += gap_ns;
        let user_tx = now_ns();
        Repr {
            run_id,
            flow: 0,
            seq,
            intended_send_ns: user_tx,
            actual_send_ns: user_tx,
            responder: None,
            responder_clock: ResponderClock::NotAsked,
        }
        .emit(&mut Packet::new_unchecked(&mut buf[..]));
        socket.send_one(&buf, Some(target))?;
        out.sent += 1;
        tx_by_counter.push(None);
        // The stamp is queued as the datagram leaves; read it before waiting, since a stamp
        // waiting in the error queue would wake every `ppoll`.
        if socket.tx_timestamps() {
            tx_stamps.clear();
            socket.read_tx_timestamps(&mut tx_stamps)?;
            for &(counter, ns) in &tx_stamps {
                if let Some(slot) = tx_by_counter.get_mut(counter as usize) {
                    *slot = Some(ns);
                }
            }
        }
        let deadline = user_tx + ANSWER_TIMEOUT.as_nanos() as u64;
        'wait: loop {
            if !busy {
                let left = deadline.saturating_sub(now_ns());
                if left == 0 || !socket.wait_readable(Some(Duration::from_nanos(left)))? {
                    break 'wait;
                }
            } else if now_ns() >= deadline {
                break 'wait;
            }
            if socket.recv_batch(&mut batch)? == 0 {
                continue;
            }
            let user_rx = now_ns();
            for got in batch.iter() {
                let Ok(repr) = Packet::new_checked(got.data).and_then(|p| Repr::parse(&p)) else {
                    continue;
                };
                if repr.run_id != run_id || repr.seq != seq {
                    continue;
                }
                let kernel_rx = (socket.rx_timestamp_source()
                    == latlab_io::udp::TimestampSource::KernelSoftware)
                    .then_some(got.rx_ns);
                answered.push(seq);
                out.probes.push(ProbeStamps {
                    user_tx,
                    user_rx,
                    kernel_tx: None,
                    kernel_rx,
                    xdp_rx: None,
                });
                break 'wait;
            }
        }
    }
    if socket.tx_timestamps() {
        tx_stamps.clear();
        socket.read_tx_timestamps(&mut tx_stamps)?;
        for &(counter, ns) in &tx_stamps {
            if let Some(slot) = tx_by_counter.get_mut(counter as usize) {
                *slot = Some(ns);
            }
        }
    }
    for (stamps, seq) in out.probes.iter_mut().zip(answered) {
        stamps.kernel_tx = tx_by_counter[seq as usize];
    }
    Ok(out)
}

/// As [`probe`], over a datagram port whose receive stamps are the XDP program's (an AF_XDP
/// endpoint): sends `count` probes to `target`, one every `1/rate_pps` seconds and never
/// before the last one's answer came or timed out, busy polling the port for answers. Each
/// answer keeps the user clock before the send, after the answer was read, and the port's
/// receive stamp as `xdp_rx`. A probe the port could not send ends the run with the reason.
pub(super) fn probe_port<P: DatagramPort>(
    port: &mut P,
    target: SocketAddr,
    count: u64,
    rate_pps: f64,
    stop: &Stop,
) -> io::Result<Probed> {
    let run_id = (now_ns() as u32) | 1;
    let gap_ns = (1e9 / rate_pps.max(1.0)) as u64;
    let mut out = Probed::default();
    let mut next = now_ns() + 1_000_000;
    for seq in 0..count {
        if stop.is_raised() {
            break;
        }
        wait_until(next, 200_000);
        next += gap_ns;
        let user_tx = now_ns();
        let Some(buf) = port.queue().push(target, HEADER_LEN) else {
            return Err(io::Error::other("the AF_XDP send queue is full"));
        };
        Repr {
            run_id,
            flow: 0,
            seq,
            intended_send_ns: user_tx,
            actual_send_ns: user_tx,
            responder: None,
            responder_clock: ResponderClock::NotAsked,
        }
        .emit(&mut Packet::new_unchecked(&mut buf[..HEADER_LEN]));
        let mut refused = None;
        port.flush(&mut NoStamp, |unsent| refused = Some(unsent.failure))?;
        if let Some(failure) = refused {
            return Err(io::Error::other(format!(
                "a probe to {target} could not be sent over AF_XDP: {}",
                failure.name()
            )));
        }
        out.sent += 1;
        let deadline = user_tx + ANSWER_TIMEOUT.as_nanos() as u64;
        let mut answer = None;
        while answer.is_none() && now_ns() < deadline {
            port.recv(|got| {
                let Ok(repr) = Packet::new_checked(got.data).and_then(|p| Repr::parse(&p)) else {
                    return;
                };
                if repr.run_id == run_id && repr.seq == seq && answer.is_none() {
                    answer = Some(got.rx_ns);
                }
            })?;
        }
        if let Some(xdp_rx) = answer {
            out.probes.push(ProbeStamps {
                user_tx,
                user_rx: now_ns(),
                kernel_tx: None,
                kernel_rx: None,
                xdp_rx: Some(xdp_rx),
            });
        }
    }
    Ok(out)
}
