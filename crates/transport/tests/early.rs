//! `nack-early` in virtual time: `lean` with the blind copy 10 ms behind, a 5 ms margin and
//! the first NACK sent as soon as the first copy is late, on a path of RTT 100 ms (50 ms each
//! way, no jitter), a 100-byte message every 100 ms from t = 1 s, with delivery times
//! computed by hand.
//!
//! The receiver learns the tick (100 ms) and NACKs message k once `arrival(k−1) + tick + 5 ms`
//! has passed without it: 55 ms after k was sent, before its copy (sent at 10 ms) is due at
//! 60 ms. That NACK reaches the sender at 105 ms and its repair arrives at 155 ms. While both
//! copies are missing, a second NACK goes 10 ms (the copy's spacing) after the first and its
//! repair arrives at 165 ms: a fragment may go again twice per half SRTT (50 ms).

mod common;

use common::{
    carries, client_addr, config, finish, forged, one_way, send, sent_at, server_addr, Lab, MS,
};
use latlab_wire::transport::Frame;

const EARLY: &str = "lean:dup-spacing=10ms,nack-margin=5ms,nack-early=on";

fn lab(policy: &str) -> Lab {
    common::lab_under(policy)
}

/// Drops the first `data` client packets carrying message 20 and the first `nacks` server
/// packets carrying a NACK.
fn lose(lab: &mut Lab, data: u32, nacks: u32) {
    let (mut data_seen, mut nacks_seen) = (0, 0);
    let client = client_addr();
    lab.pair.network.set_drop_filter(move |d| {
        if d.from == client {
            let hit = data_seen < data && carries(&d.payload, 0, 20, None);
            data_seen += u32::from(hit);
            return hit;
        }
        let mut nack = false;
        common::each_frame(&d.payload, |f| nack |= matches!(f, Frame::Nack { .. }));
        let hit = nack && nacks_seen < nacks;
        nacks_seen += u32::from(hit);
        hit
    });
}

const T: u64 = 3000 * MS; // message 20 leaves

#[test]
fn a_lost_first_copy_arrives_with_its_copy_at_60ms_and_costs_one_nack_and_one_repair() {
    // 20 is late at T+55: the NACK goes; the copy (T+10) arrives at T+60 and no second NACK
    // follows. The sender, which cannot know that, repairs once at T+105.
    let mut lab = lab(EARLY);
    lose(&mut lab, 1, 0);
    send(&mut lab, 0, 25);
    // (Counted before the stream ends: the receiver NACKs the message after the last too.)
    assert_eq!(lab.server_stats().nacks_sent, 1);
    let client = lab.client_stats();
    assert_eq!((client.nacks_received, client.nack_repairs), (1, 1));
    send(&mut lab, 25, 40);
    finish(&mut lab, 40);
    assert_eq!(lab.server().delivered_at(0, 20), Some(T + 60 * MS));
    assert_eq!(lab.server().delivered_at(0, 21), Some(T + 150 * MS));
}

#[test]
fn both_copies_lost_arrive_with_the_early_nacks_repair_at_155ms() {
    // NACKs at T+55 and T+65 (the copy is late too), at the client T+105 and T+115: the
    // repairs arrive at T+155 and T+165. 21 (arrived T+150) waits for 20.
    let mut lab = lab(EARLY);
    lose(&mut lab, 2, 0);
    send(&mut lab, 0, 25);
    assert_eq!(lab.server_stats().nacks_sent, 2);
    let client = lab.client_stats();
    assert_eq!((client.nacks_received, client.nack_repairs), (2, 2));
    send(&mut lab, 25, 40);
    finish(&mut lab, 40);
    assert_eq!(lab.server().delivered_at(0, 20), Some(T + 155 * MS));
    assert_eq!(lab.server().delivered_at(0, 21), Some(T + 155 * MS));
    assert_eq!(lab.server().delivered_at(0, 22), Some(T + 250 * MS));
}

#[test]
fn a_lost_first_repair_is_covered_by_the_second_nacks_at_165ms() {
    // The second NACK reaches the client at T+115, 10 ms after the first repair: the fragment
    // went twice in the last 50 ms only if the copy (T+10) counted, and it does not.
    let mut lab = lab(EARLY);
    lose(&mut lab, 3, 0);
    send(&mut lab, 0, 25);
    assert_eq!(lab.client_stats().nack_repairs, 2);
    send(&mut lab, 25, 40);
    finish(&mut lab, 40);
    assert_eq!(lab.server().delivered_at(0, 20), Some(T + 165 * MS));
}

#[test]
fn a_lost_early_nack_is_covered_by_the_second_at_165ms() {
    let mut lab = lab(EARLY);
    lose(&mut lab, 2, 1);
    send(&mut lab, 0, 25);
    let client = lab.client_stats();
    assert_eq!((client.nacks_received, client.nack_repairs), (1, 1));
    send(&mut lab, 25, 40);
    finish(&mut lab, 40);
    assert_eq!(lab.server().delivered_at(0, 20), Some(T + 165 * MS));
}

#[test]
fn without_nack_early_the_same_loss_waits_for_the_copy_and_its_margin() {
    // The same policy without `nack-early`: 20 is late at T+50+10+5, the repair arrives at
    // T+165 (and with it its blind copy 10 ms later, unused).
    let mut lab = lab("lean:dup-spacing=10ms,nack-margin=5ms");
    lose(&mut lab, 2, 0);
    send(&mut lab, 0, 40);
    finish(&mut lab, 40);
    assert_eq!(lab.server().delivered_at(0, 20), Some(T + 165 * MS));
}

#[test]
fn a_forged_nack_flood_costs_the_sender_no_more_than_two_repairs_per_half_srtt() {
    // 10,000 NACKs for messages 0..=255 from the server's address over 1 s: the client sends
    // again only messages it still holds, each at most twice per 50 ms.
    let baseline = {
        let mut lab = lab(EARLY);
        send(&mut lab, 0, 40);
        finish(&mut lab, 40);
        lab.client_stats()
    };
    let mut lab = lab(EARLY);
    for i in 0..40u64 {
        lab.send_at(sent_at(i), 0, &[i as u8; 100]);
        if i == 20 {
            for n in 0..10_000u64 {
                let at = sent_at(20) + n * 100_000;
                lab.run_until(at);
                let nack = Frame::Nack {
                    channel: 0,
                    first: 0,
                    count: 255,
                };
                let bytes = forged(5 + n, &[nack]);
                lab.pair
                    .a
                    .endpoint
                    .handle_datagram(at, server_addr(), &bytes);
            }
        }
    }
    lab.run_until(sent_at(40) + 3000 * MS);
    let client = lab.client_stats();
    // At most ~20 messages are unacknowledged at once (a cumulative ACK a second), each
    // repaired at most twice per 50 ms over the flood's 1 s (and twice at its start).
    assert!(client.nack_repairs > 0);
    assert!(
        client.nack_repairs <= 20 * 2 * 21,
        "{} repairs",
        client.nack_repairs
    );
    let extra = client.bytes_sent - baseline.bytes_sent;
    assert!(
        extra <= client.nack_repairs * 108 + 10_000,
        "{extra} bytes more than without the flood"
    );
}

/// Every message's delay and the client's and server's bytes, at 2.5 % random loss each way.
fn lossy_run(policy: &str, count: u64) -> (Vec<u64>, u64) {
    let lossy = |seed| latlab_link::LinkConfig {
        loss: latlab_link::LossModel::Bernoulli { p: 0.025 },
        seed,
        ..one_way(50)
    };
    let mut lab = Lab::connect(
        config(policy, false),
        config(policy, true),
        lossy(1),
        lossy(2),
    );
    let start = lab.now().max(1000 * MS);
    for i in 0..count {
        lab.send_at(start + i * 100 * MS, 0, &[i as u8; 100]);
    }
    lab.run_until(start + count * 100 * MS + 3000 * MS);
    let delivered = lab.server().messages(0);
    assert_eq!(delivered.len(), count as usize);
    let delays = (0..count)
        .map(|i| delivered[i as usize].0 - (start + i * 100 * MS))
        .collect();
    assert_eq!(lab.client_stats().window_limited, 0);
    let bytes = lab.client_stats().bytes_sent + lab.server_stats().bytes_sent;
    (delays, bytes)
}

#[test]
fn at_2_5_percent_loss_each_way_the_worst_message_comes_with_an_early_repair() {
    // 3,000 messages: ~1.9 lose both copies (2 in this run), and come at 155 ms (165 ms when
    // an early NACK or its repair is lost too; 165 ms without `nack-early`). A repair for
    // each message whose first copy is lost (2.5 %: 108 bytes and a NACK of ~8) is ~1.3 % of
    // the ~214 bytes a message costs.
    let (early, early_bytes) = lossy_run(EARLY, 3000);
    let (late, late_bytes) = lossy_run("lean:dup-spacing=10ms,nack-margin=5ms", 3000);
    let worst = |d: &[u64]| *d.iter().max().unwrap();
    assert!(worst(&early) <= 165 * MS, "worst {} ns", worst(&early));
    assert!(
        worst(&early) < worst(&late),
        "{} {}",
        worst(&early),
        worst(&late)
    );
    assert!(
        early_bytes * 100 <= late_bytes * 102,
        "{early_bytes} bytes against {late_bytes}"
    );
}

#[test]
fn a_datagram_repeated_a_hundred_times_draws_no_ack_and_no_nack() {
    // Message 20's first datagram, recorded on the way and played to the server 100 times
    // more at T+51 ms (20 arrived at T+50; nothing is due before 21's NACK time, T+155).
    let mut lab = lab(EARLY);
    let seen: std::rc::Rc<std::cell::RefCell<Vec<Vec<u8>>>> = Default::default();
    let log = std::rc::Rc::clone(&seen);
    let client = client_addr();
    lab.pair.network.set_drop_filter(move |d| {
        if d.from == client && carries(&d.payload, 0, 20, None) {
            log.borrow_mut().push(d.payload.to_vec());
        }
        false
    });
    send(&mut lab, 0, 21);
    lab.run_until(T + 51 * MS);
    let now = lab.now();
    let datagram = seen.borrow()[0].clone();
    let mut buf = [0u8; 1500];
    let before = lab.server_stats();
    assert!(lab.pair.b.endpoint.poll_transmit(now, &mut buf).is_none());
    for _ in 0..100 {
        lab.pair
            .b
            .endpoint
            .handle_datagram(now, client_addr(), &datagram);
    }
    assert!(lab.pair.b.endpoint.poll_transmit(now, &mut buf).is_none());
    let after = lab.server_stats();
    assert_eq!(after.duplicate_packets, before.duplicate_packets + 100);
    assert_eq!(after.packets_sent, before.packets_sent);
    send(&mut lab, 21, 40);
    finish(&mut lab, 40);
}
