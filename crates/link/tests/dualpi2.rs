//! DualPI2 (RFC 9332) in virtual time: a Reno-like flow in the classic queue and a scalable
//! (DCTCP-like) flow in the L4S queue at once, each queue's sojourn counted; the classifier
//! (RFC 9331) over IPv4 and IPv6; classic frames without ECN dropped, never marked; and the
//! overload rule (an unresponsive L4S load dropped once `p_C` reaches its maximum).

use std::collections::VecDeque;

mod common;

use common::{frame, number_of as seq_of, sport_of};
use latlab_link::{Aqm, Discipline, LinkConfig, Pipe};
use latlab_wire::ecn;

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

/// ECN codepoints in the TOS byte's low bits.
const NOT_ECT: u8 = 0b00;
const ECT0: u8 = 0b10;
const ECT1: u8 = 0b01;
const CE: u8 = 0b11;

/// An Ethernet + IPv6 + UDP frame of `len` bytes with the ECN bits `ecn` in its traffic class.
fn frame6(len: usize, ecn: u8) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend([0x86, 0xdd]);
    // Version 6, traffic class DSCP 0 with the ECN bits, flow label 0.
    f.extend([0x60 | (ecn >> 4), (ecn & 0x3) << 4, 0, 0]);
    f.extend(((len - 54) as u16).to_be_bytes());
    f.extend([17, 64]);
    f.extend([0u8; 32]);
    f.resize(len, 0);
    f
}

fn dualpi2(ecn: bool) -> Aqm {
    Aqm {
        discipline: Discipline::DualPi2,
        ecn,
        ..Aqm::default()
    }
}

/// 20 Mbit/s with no delay of its own (the senders add the round trip).
fn link(aqm: Aqm) -> LinkConfig {
    LinkConfig {
        rate_bps: Some(20_000_000),
        limit_frames: Some(10_000),
        aqm,
        ..LinkConfig::default()
    }
}

/// How a sender answers congestion.
#[derive(Clone, Copy, PartialEq)]
enum Control {
    /// Reno's AIMD: +1/cwnd per acknowledged frame, halved on a loss or a CE mark, at most
    /// once per round trip.
    Reno,
    /// Scalable (DCTCP-like in its steady state): +1/cwnd per acknowledged frame, −½ per CE
    /// mark, so its reduction is proportional to the marks, with no once-per-round-trip limit.
    Scalable,
    /// Not window-based: a frame every `gap_ns`, whatever the feedback (a paced stream).
    Paced { gap_ns: u64 },
}

/// A sender, sans-IO: frames of `len` bytes numbered from 0, acknowledged one round trip
/// after they left the link; a gap in the acknowledgements is a loss (the link keeps each
/// flow's order).
struct Sender {
    control: Control,
    sport: u16,
    ecn: u8,
    len: usize,
    /// A paced sender's next frame is due then.
    next_send_ns: u64,
    rtt_ns: u64,
    cwnd: f64,
    next_seq: u64,
    /// Frames sent and not acknowledged or lost.
    in_flight: u64,
    /// The next sequence number an acknowledgement is expected for.
    expected: u64,
    /// Reno: no reduction for frames sent before this one (the round trip of the last).
    recover: u64,
    /// Acknowledgements due: (when, sequence, CE).
    acks: VecDeque<(u64, u64, bool)>,
    losses: u64,
    marks: u64,
}

impl Sender {
    fn new(control: Control, sport: u16, ecn: u8, rtt_ns: u64) -> Sender {
        Sender {
            control,
            sport,
            ecn,
            len: 1500,
            next_send_ns: 0,
            rtt_ns,
            cwnd: 2.0,
            next_seq: 0,
            in_flight: 0,
            expected: 0,
            recover: 0,
            acks: VecDeque::new(),
            losses: 0,
            marks: 0,
        }
    }

    /// A paced stream of `len`-byte frames at `rate_bps`.
    fn paced(sport: u16, ecn: u8, len: usize, rate_bps: u64, rtt_ns: u64) -> Sender {
        let gap_ns = len as u64 * 8 * S / rate_bps;
        Sender {
            len,
            ..Sender::new(Control::Paced { gap_ns }, sport, ecn, rtt_ns)
        }
    }

    /// Sends what the window (or the pace) allows at `now`.
    fn poll_transmit(&mut self, now: u64, pipe: &mut Pipe) {
        loop {
            match self.control {
                Control::Paced { gap_ns } if self.next_send_ns <= now => {
                    self.next_send_ns += gap_ns;
                }
                Control::Paced { .. } => return,
                _ if (self.in_flight as f64) < self.cwnd.floor().max(1.0) => {}
                _ => return,
            }
            let f = frame(self.len, self.sport, self.ecn, self.next_seq);
            pipe.handle_arrival(now, &f);
            self.next_seq += 1;
            self.in_flight += 1;
        }
    }

    /// A frame of this flow left the link at `now`.
    fn handle_departure(&mut self, now: u64, frame: &[u8]) {
        let ce = ecn::read(frame) == ecn::Ecn::Ce;
        self.acks.push_back((now + self.rtt_ns, seq_of(frame), ce));
    }

    fn poll_timeout(&self) -> Option<u64> {
        let pace = match self.control {
            Control::Paced { .. } => Some(self.next_send_ns),
            _ => None,
        };
        self.acks.front().map(|a| a.0).into_iter().chain(pace).min()
    }

    /// The acknowledgements due by `now`.
    fn handle_timeout(&mut self, now: u64) {
        while let Some(&(at, seq, ce)) = self.acks.front() {
            if at > now {
                return;
            }
            self.acks.pop_front();
            let lost = seq - self.expected;
            self.expected = seq + 1;
            self.in_flight -= lost + 1;
            self.losses += lost;
            self.marks += u64::from(ce);
            match self.control {
                Control::Reno if (lost > 0 || ce) && seq >= self.recover => {
                    self.cwnd = (self.cwnd / 2.0).max(2.0);
                    self.recover = self.next_seq;
                }
                Control::Scalable if ce => self.cwnd = (self.cwnd - 0.5).max(2.0),
                Control::Paced { .. } => {}
                _ => self.cwnd += 1.0 / self.cwnd,
            }
        }
    }
}

/// Each flow's sojourn times (ns) from `measure_from` on, as the frames' departures tell
/// them (the link has no delay: a frame leaves when its transmission ends).
struct Run {
    pipe: Pipe,
    senders: Vec<Sender>,
    sojourns: Vec<Vec<u64>>,
    /// Frames that left the link.
    departures: u64,
}

/// Runs `senders` over a pipe of `config` until `until`, recording each flow's sojourn times
/// from `measure_from`: a frame's sojourn is its departure less its transmission (its bytes
/// and the link's 24 bytes of overhead at 20 Mbit/s) less its arrival (the sender's send
/// time, kept by sequence).
fn run(config: LinkConfig, mut senders: Vec<Sender>, measure_from: u64, until: u64) -> Run {
    let mut pipe = Pipe::new(config, 0).unwrap();
    let tx = |len: usize| (len as u64 + 24) * 8 * S / 20_000_000;
    let mut sent_at: Vec<Vec<u64>> = vec![Vec::new(); senders.len()];
    let mut sojourns = vec![Vec::new(); senders.len()];
    let mut now = 0;
    let mut departures = 0;
    for (i, s) in senders.iter_mut().enumerate() {
        s.poll_transmit(now, &mut pipe);
        sent_at[i].resize(s.next_seq as usize, now);
    }
    while now < until {
        while let Some(d) = pipe.poll_departure(now) {
            let i = senders
                .iter()
                .position(|s| s.sport == sport_of(d.frame()))
                .unwrap();
            let seq = seq_of(d.frame()) as usize;
            if now >= measure_from {
                let sent = sent_at[i][seq] + tx(d.frame().len());
                sojourns[i].push(d.departure_ns().saturating_sub(sent));
            }
            senders[i].handle_departure(now, d.frame());
            departures += 1;
        }
        for (i, s) in senders.iter_mut().enumerate() {
            s.handle_timeout(now);
            s.poll_transmit(now, &mut pipe);
            sent_at[i].resize(s.next_seq as usize, now);
        }
        let next = senders
            .iter()
            .filter_map(Sender::poll_timeout)
            .chain(pipe.poll_timeout())
            .min();
        match next {
            Some(t) => now = t.max(now + 1).min(until),
            None => break,
        }
    }
    Run {
        pipe,
        senders,
        sojourns,
        departures,
    }
}

fn percentile(values: &mut [u64], q: f64) -> u64 {
    values.sort_unstable();
    values[((values.len() - 1) as f64 * q).round() as usize]
}

#[test]
fn the_classic_queue_holds_its_target_while_the_l4s_queue_stays_near_its_step() {
    // A Reno-like flow without ECN (told by drops), a scalable ECT(1) flow (told by marks)
    // and a paced ECT(1) stream of 200-byte datagrams at 2 Mbit/s, 20 ms round trip, 60 s;
    // measured over the last 40 s, once the controller has converged.
    let senders = vec![
        Sender::new(Control::Reno, 1000, NOT_ECT, 20 * MS),
        Sender::new(Control::Scalable, 2000, ECT1, 20 * MS),
        Sender::paced(3000, ECT1, 200, 2_000_000, 20 * MS),
    ];
    let mut r = run(link(dualpi2(false)), senders, 20 * S, 60 * S);
    let classic_p50 = percentile(&mut r.sojourns[0], 0.5);
    let scalable_p50 = percentile(&mut r.sojourns[1], 0.5);
    let paced_p50 = percentile(&mut r.sojourns[2], 0.5);
    let paced_p95 = percentile(&mut r.sojourns[2], 0.95);
    let paced_max = percentile(&mut r.sojourns[2], 1.0);
    let classic_max = percentile(&mut r.sojourns[0], 1.0);
    let c = *r.pipe.counters();
    let shown = format!(
        "classic p50 {classic_p50} max {classic_max} ns, scalable p50 {scalable_p50}, paced \
         p50 {paced_p50} p95 {paced_p95} max {paced_max} ns, {c:?}, cwnd {} {}",
        r.senders[0].cwnd, r.senders[1].cwnd
    );
    assert!(
        (5 * MS..=30 * MS).contains(&classic_p50),
        "the classic queue near its 15 ms target: {shown}"
    );
    assert!(
        scalable_p50 <= 2 * MS,
        "the L4S queue near its 1 ms step: {shown}"
    );
    assert!(paced_p50 <= 2 * MS && paced_p95 <= 5 * MS, "{shown}");
    // The time-shifted FIFO serves the classic head ahead of the L4S head only once it has
    // waited tshift (30 ms) longer: an L4S frame waits long only while the classic queue's
    // head has waited tshift longer still (plus a classic frame's transmission or two).
    assert!(paced_max + 30 * MS <= classic_max + 2 * MS, "{shown}");
    // Every flow kept sending: neither queue starved the other.
    for sojourns in &r.sojourns {
        assert!(sojourns.len() > 10_000, "{shown}");
    }
    // The classic flow was told by drops, the L4S flows by marks, and the counts add up.
    assert_eq!((c.aqm_classic_mark, c.aqm_l4s_drop), (0, 0), "{shown}");
    assert!(c.aqm_classic_drop > 0 && c.aqm_l4s_mark > 0, "{shown}");
    assert_eq!(c.aqm_drop, c.aqm_classic_drop + c.aqm_l4s_drop);
    assert_eq!(c.aqm_mark, c.aqm_classic_mark + c.aqm_l4s_mark);
    // What the senders saw of them (the last round trip's are still on their way).
    let losses = r.senders[0].losses;
    assert!(losses > 0 && losses <= c.aqm_classic_drop, "{shown}");
    let marks_seen: u64 = r.senders[1..]
        .iter()
        .map(|s| s.marks + s.acks.iter().filter(|a| a.2).count() as u64)
        .sum();
    assert_eq!(marks_seen, c.aqm_l4s_mark, "{shown}");
    // The per-queue histograms hold every frame put on the wire from each queue: those that
    // left, and the one on the wire now, if any.
    let dual = r.pipe.dual_sojourn().expect("dualpi2 records per queue");
    let held = r.pipe.queued_frames() as u64;
    assert_eq!(c.delivered - c.aqm_drop, r.departures + held, "{shown}");
    let recorded = dual.l4s.len() + dual.classic.len();
    assert!(
        (r.departures..=r.departures + 1).contains(&recorded),
        "{shown}"
    );
    assert_eq!(r.pipe.sojourn().unwrap().len(), recorded);
    let sent_by = |flows: std::ops::Range<usize>| -> u64 {
        r.senders[flows].iter().map(|s| s.next_seq).sum()
    };
    assert!(dual.classic.len() <= sent_by(0..1) && dual.l4s.len() <= sent_by(1..3));
    eprintln!("{shown}");
}

#[test]
fn ect1_and_ce_go_to_the_l4s_queue_ect0_and_not_ect_to_the_classic_over_ipv4_and_ipv6() {
    let mut pipe = Pipe::new(link(dualpi2(true)), 0).unwrap();
    let frames = [
        (frame(1000, 1, ECT1, 0), true),
        (frame(1000, 1, CE, 0), true),
        (frame(1000, 1, ECT0, 0), false),
        (frame(1000, 1, NOT_ECT, 0), false),
        (frame6(1000, ECT1), true),
        (frame6(1000, CE), true),
        (frame6(1000, ECT0), false),
        (frame6(1000, NOT_ECT), false),
        // Not IP at all: classic.
        (vec![0u8; 60], false),
    ];
    for (i, (f, l4s)) in frames.iter().enumerate() {
        assert_eq!(
            ecn::read(f).is_capable() && ecn::read(f) != ecn::Ecn::Ect0,
            *l4s,
            "frame {i}"
        );
        let before = pipe
            .dual_sojourn()
            .map_or((0, 0), |d| (d.l4s.len(), d.classic.len()));
        pipe.handle_arrival(i as u64 * 10 * MS, f);
        while pipe.poll_departure(i as u64 * 10 * MS + 5 * MS).is_some() {}
        let d = pipe.dual_sojourn().unwrap();
        let after = (d.l4s.len(), d.classic.len());
        let expected = if *l4s {
            (before.0 + 1, before.1)
        } else {
            (before.0, before.1 + 1)
        };
        assert_eq!(after, expected, "frame {i}");
    }
}

#[test]
fn classic_frames_without_ecn_are_dropped_never_marked_and_ect0_is_marked_with_ecn_on() {
    // Two unresponsive classic streams, one not-ECT and one ECT(0), together at 1.2 times the
    // rate: the controller raises p' and the queue drops or marks. ECN on: the ECT(0) stream
    // is marked, the other dropped; ECN off: both dropped.
    for ecn_on in [true, false] {
        let mut pipe = Pipe::new(link(dualpi2(ecn_on)), 0).unwrap();
        // Each at 12 Mbit/s: 24 together, 1.2 times the rate.
        let gap = 1500 * 8 * S / 12_000_000;
        let (mut marked_ect0, mut sent) = (0u64, [0u64; 2]);
        let mut t = 0;
        let mut seq = 0;
        while t < 20 * S {
            for (i, cp) in [NOT_ECT, ECT0].into_iter().enumerate() {
                pipe.handle_arrival(t, &frame(1500, 1000 + i as u16, cp, seq));
                seq += 1;
            }
            while let Some(d) = pipe.poll_departure(t) {
                let i = usize::from(sport_of(d.frame()) == 1001);
                sent[i] += 1;
                if ecn::read(d.frame()) == ecn::Ecn::Ce {
                    assert_eq!(i, 1, "a not-ECT frame is never marked");
                    marked_ect0 += 1;
                }
            }
            t += gap;
        }
        let c = *pipe.counters();
        let shown = format!(
            "ecn {ecn_on}: {c:?}, sent {sent:?}, p' {:?}",
            pipe.pie_drop_probability()
        );
        assert!(c.aqm_classic_drop > 100, "{shown}");
        assert_eq!((c.aqm_l4s_drop, c.aqm_l4s_mark), (0, 0), "{shown}");
        assert_eq!(c.aqm_classic_mark, marked_ect0, "{shown}");
        if ecn_on {
            assert!(marked_ect0 > 100, "{shown}");
            // The not-ECT stream took every drop: it sent fewer.
            assert!(sent[0] + 100 < sent[1], "{shown}");
        } else {
            assert_eq!(marked_ect0, 0, "{shown}");
        }
    }
}

#[test]
fn an_unresponsive_l4s_load_is_dropped_once_the_classic_probability_reaches_its_maximum() {
    // An ECT(1) stream at twice the rate, never slowing down for its marks: the L4S queue
    // grows, p' rises until p_C = p'² reaches 1/k² = 25%, and from there L4S frames are
    // dropped too. A Reno flow shares the link.
    let mut pipe = Pipe::new(link(dualpi2(false)), 0).unwrap();
    let mut reno = Sender::new(Control::Reno, 1000, NOT_ECT, 20 * MS);
    let gap = 1500 * 8 * S / 40_000_000;
    let mut t = 0;
    let mut seq = 0;
    let mut first_l4s_drop = None;
    while t < 30 * S {
        pipe.handle_arrival(t, &frame(1500, 2000, ECT1, seq));
        seq += 1;
        while let Some(d) = pipe.poll_departure(t) {
            if sport_of(d.frame()) == 1000 {
                reno.handle_departure(t, d.frame());
            }
        }
        reno.handle_timeout(t);
        reno.poll_transmit(t, &mut pipe);
        if first_l4s_drop.is_none() && pipe.counters().aqm_l4s_drop > 0 {
            first_l4s_drop = Some((t, pipe.pie_drop_probability().unwrap()));
        }
        t += gap;
    }
    let c = *pipe.counters();
    let (at, p) = first_l4s_drop.unwrap_or_else(|| panic!("no L4S drop: {c:?}"));
    // The first L4S drop came with p' at 1/k (p_C at 25%), not before.
    assert!(p >= 0.5, "first L4S drop at {at} ns with p' {p}: {c:?}");
    assert!(c.aqm_l4s_drop > 1000, "{c:?}");
    // The unresponsive stream sent about half its frames at most; the rest were dropped at
    // the queue or at its limit, and every frame is accounted for.
    assert_eq!(c.aqm_drop, c.aqm_l4s_drop + c.aqm_classic_drop);
    assert_eq!(
        c.arrived,
        c.delivered + c.dropped(),
        "every arrival delivered or dropped by cause"
    );
    // Under overload the L4S queue's sojourn is held by the drops, far under the limit's.
    let dual = pipe.dual_sojourn().unwrap();
    let median = dual.l4s.value_at_rank(dual.l4s.len() / 2).unwrap();
    assert!(median < 100 * MS, "L4S sojourn p50 {median} ns: {c:?}");
}
