//! XOR copies (`xor=on`) in virtual time: `game` (copy 15 ms behind, 5 ms NACK margin, early
//! NACKs) on a path of RTT 100 ms (50 ms each way, no jitter), a 100-byte message every
//! 100 ms from t = 1 s. The blind copy of message k carries k ⊕ (k − 1); delivery times are
//! computed by hand from the schedule.

mod common;

use common::{client_addr, config, finish, on_time, one_way, send, Lab, MS};
use latlab_link::{LinkConfig, LossModel};
use latlab_wire::transport::Frame;

const XOR: &str = "game:xor=on";
const PLAIN: &str = "game:xor=off";

fn lab(policy: &str) -> Lab {
    common::lab_under(policy)
}

/// Which messages a client packet carries: plainly (`Data`) and as the newer of an XOR copy.
fn contents(bytes: &[u8]) -> (Vec<u32>, Vec<u32>) {
    let (mut data, mut xors) = (Vec::new(), Vec::new());
    common::each_frame(bytes, |f| match f {
        Frame::Data { message, .. } => data.push(message),
        Frame::Xor { message, .. } => xors.push(message),
        _ => {}
    });
    (data, xors)
}

/// Drops the first `data[i].1` client packets carrying message `data[i].0` plainly, and every
/// XOR copy whose newer message is in `xors`.
fn lose(lab: &mut Lab, data: &'static [(u32, u32)], xors: &'static [u32]) {
    let mut seen = vec![0u32; data.len()];
    let client = client_addr();
    lab.pair.network.set_drop_filter(move |d| {
        if d.from != client {
            return false;
        }
        let (plain, xored) = contents(&d.payload);

        let mut hit = xored.iter().any(|m| xors.contains(m));
        for (i, &(message, copies)) in data.iter().enumerate() {
            if plain.contains(&message) && seen[i] < copies {
                seen[i] += 1;
                hit = true;
            }
        }
        hit
    });
}

const T: u64 = 3000 * MS; // message 20 leaves

#[test]
fn every_copy_but_the_first_is_an_xor_and_costs_three_bytes_more() {
    let run = |policy: &str| {
        let mut lab = lab(policy);
        send(&mut lab, 0, 40);
        finish(&mut lab, 40);
        on_time(&lab, 0, 40);
        lab.client_stats()
    };
    let (plain, xored) = (run(PLAIN), run(XOR));
    assert_eq!(plain.xor_copies, 0);
    // Message 0 has no message before it: its copy is plain.
    assert_eq!(xored.xor_copies, 39);
    assert_eq!(xored.duplicated_messages, plain.duplicated_messages);
    assert_eq!(xored.packets_sent, plain.packets_sent);
    let extra = xored.bytes_sent - plain.bytes_sent;
    assert_eq!(extra, 3 * 39);
}

#[test]
fn a_lost_first_copy_is_recovered_from_the_xor_and_the_message_before_at_65ms() {
    let mut lab = lab(XOR);
    lose(&mut lab, &[(20, 1)], &[]);
    send(&mut lab, 0, 40);
    finish(&mut lab, 40);
    assert_eq!(lab.server().delivered_at(0, 20), Some(T + 65 * MS));
    assert_eq!(lab.server_stats().xor_recovered, 1);
    on_time(&lab, 21, 40);
}

#[test]
fn the_next_messages_xor_is_a_third_chance_when_both_repairs_are_lost_too() {
    // 20 and its copy lost; the early NACKs' repairs (due T+155, T+170) lost too. The copy of
    // 21 (sent T+115, 21 ⊕ 20) arrives at T+165, after 21 itself (T+150): 20 is recovered.
    let mut xored = lab(XOR);
    lose(&mut xored, &[(20, 3)], &[20]);
    send(&mut xored, 0, 40);
    finish(&mut xored, 40);
    assert_eq!(xored.server().delivered_at(0, 20), Some(T + 165 * MS));
    assert_eq!(xored.server().delivered_at(0, 21), Some(T + 165 * MS));
    assert_eq!(xored.server_stats().xor_recovered, 1);
    // Without XOR copies the same losses (the plain copy among them) wait for a later NACK.
    let mut plain = lab(PLAIN);
    lose(&mut plain, &[(20, 4)], &[]);
    send(&mut plain, 0, 40);
    finish(&mut plain, 40);
    assert!(plain.server().delivered_at(0, 20) > Some(T + 200 * MS));
}

#[test]
fn under_bursty_loss_every_message_arrives_whole_and_as_sent() {
    // 10 % loss in bursts each way, messages of 1..=300 bytes every 30 ms: whatever the XOR
    // copies recover is byte for byte what was sent, in order.
    let lossy = LinkConfig {
        loss: LossModel::GilbertElliott {
            p: 0.04,
            r: 0.36,
            one_minus_h: 1.0,
            one_minus_k: 0.0,
        },
        ..one_way(50)
    };
    let mut lab = Lab::connect(config(XOR, false), config(XOR, true), lossy.clone(), lossy);
    let body = |i: u32| -> Vec<u8> {
        let len = 1 + (i * 37 % 300) as usize;
        (0..len).map(|j| (i as usize * 31 + j * 7) as u8).collect()
    };
    for i in 0..3000u32 {
        lab.send_at(1000 * MS + u64::from(i) * 30 * MS, 0, &body(i));
    }
    lab.run_until(1000 * MS + 3000 * 30 * MS + 10_000 * MS);
    let got = lab.server().messages(0);
    assert_eq!(got.len(), 3000);
    for (i, (_, number, data)) in got.iter().enumerate() {
        assert_eq!(*number, i as u32);
        assert_eq!(*data, body(i as u32), "message {i}");
    }
    assert!(lab.server_stats().xor_recovered > 10);
    assert!(lab.client_stats().xor_copies > 2000);
}

#[test]
fn game_sends_xor_copies_only_where_they_beat_a_nacks_repair() {
    // xor=auto: the next message's copy (interval + 15 ms) must come before a NACK's repair
    // (SRTT + 5 ms): at a 50 ms interval it does (65 < 105), at 100 ms it does not (115).
    let copies = |policy: &str, interval_ms: u64| {
        let mut lab = lab(policy);
        for i in 0..100u64 {
            lab.send_at(1000 * MS + i * interval_ms * MS, 0, &[i as u8; 100]);
        }
        lab.run_until(1000 * MS + 100 * interval_ms * MS + 3000 * MS);
        assert_eq!(lab.server().messages(0).len(), 100);
        lab.client_stats()
    };
    let (fast, slow) = (copies("game", 50), copies("game", 100));
    // Auto does as `on` does once the SRTT is known: the first cumulative ACK, a second in
    // (20 messages), under NACK feedback.
    let always = copies(XOR, 50);
    assert_eq!(always.xor_copies, 99);
    assert!(
        (99 - 22..99).contains(&fast.xor_copies),
        "{} XOR copies",
        fast.xor_copies
    );
    assert_eq!(fast.duplicated_messages, 100);
    assert_eq!(slow.xor_copies, 0);
    assert_eq!(slow.duplicated_messages, 100);
}
