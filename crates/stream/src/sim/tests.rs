use super::*;
use latlab_link::LossModel;

/// The outcome of a run of one transport.
fn one(options: &SimOptions, stop: &Stop) -> Result<SimOutcome, String> {
    run(options, stop).map(|mut o| o.pop().expect("one transport, one outcome"))
}

const MS: u64 = 1_000_000;

fn link(delay_ms: u64, loss: f64, seed: u64) -> LinkConfig {
    LinkConfig {
        delay_ns: delay_ms * MS,
        loss: LossModel::Bernoulli { p: loss },
        seed,
        ..LinkConfig::default()
    }
}

/// Whether `h`'s smallest and largest samples are both `ns`, to the histogram's precision.
fn all_at(h: &LatencyHistogram, ns: u64) -> bool {
    let hdr = h.as_hdr();
    hdr.equivalent(h.min(), ns) && hdr.equivalent(h.max(), ns)
}

fn options(transport: &str, streams: u32, messages: u64, loss: f64) -> SimOptions {
    SimOptions {
        transports: vec![transport.parse().unwrap()],
        streams,
        size: 100,
        interval: Duration::from_millis(20),
        duration: Duration::from_millis(20 * messages),
        grace: Duration::from_secs(5),
        forward: link(10, loss, 1),
        reverse: link(10, loss, 2),
    }
}

#[test]
fn every_virtual_transport_delivers_a_thousand_messages_through_one_percent_loss() {
    for transport in [
        "latlab:tcp-like",
        "latlab:thin",
        "latlab:rack:rdb=600",
        "kcp:mode=fast",
        "kcp:mode=normal",
        "quic",
        "quic:datagrams",
    ] {
        let o = options(transport, 4, 250, 0.01);
        let out = one(&o, &Stop::new()).unwrap();
        assert_eq!(out.sent, 1000, "{transport}: {:?}", out.failure);
        assert_eq!(out.delivered, 1000, "{transport}: {:?}", out.failure);
        assert_eq!(out.failed_streams, 0, "{transport}: {:?}", out.failure);
        assert_eq!(out.malformed, 0, "{transport}");
        assert_eq!(out.latency.len(), 1000, "{transport}");
        // Nothing arrives before the path's delay; a loss costs at least one more trip.
        let first = out.latency.min();
        assert!(
            first >= 10 * MS || out.latency.as_hdr().equivalent(first, 10 * MS),
            "{transport}: {first}"
        );
        assert!(
            out.latency.max() > 30 * MS,
            "{transport}: max {}",
            out.latency.max()
        );
        // Every message's bytes crossed at least once (KCP may put two in one datagram).
        assert!(out.forward.bytes >= 1000 * 100, "{transport}");
        assert!(out.reverse.packets > 0, "{transport}: no acknowledgements");
    }
}

#[test]
fn plain_udp_loses_what_the_link_drops_and_puts_one_datagram_per_message_on_the_wire() {
    let out = one(&options("udp", 10, 1000, 0.01), &Stop::new()).unwrap();
    assert_eq!(out.sent, 10_000);
    let lost = out.sent - out.delivered;
    assert!((50..=150).contains(&lost), "lost {lost} of 10,000 at 1%");
    assert_eq!(out.failed_streams, 0, "udp may lose messages");
    assert_eq!(out.forward.packets, 10_000);
    assert_eq!(out.forward.bytes, 10_000 * (100 + 28));
    assert_eq!(out.reverse.packets, 0);
    // Every message that arrived took exactly the path's delay.
    assert!(all_at(&out.latency, 10 * MS));
}

#[test]
fn without_loss_latlab_delivers_at_the_path_delay_and_kcp_within_its_flush_interval() {
    let out = one(&options("latlab:thin", 3, 100, 0.0), &Stop::new()).unwrap();
    assert_eq!(out.delivered, 300);
    assert!(all_at(&out.latency, 10 * MS));
    assert_eq!(out.forward.retransmissions, Some(0));
    // KCP sends what was handed to it at its next flush, 10 ms apart in fast mode.
    let out = one(&options("kcp:mode=fast", 3, 100, 0.0), &Stop::new()).unwrap();
    assert_eq!(out.delivered, 300);
    assert!(out.latency.min() >= 9_990_000 && out.latency.max() <= 21 * MS);
}

#[test]
fn one_seed_gives_the_same_run_twice() {
    let o = options("latlab:thin", 5, 400, 0.05);
    let a = one(&o, &Stop::new()).unwrap();
    let b = one(&o, &Stop::new()).unwrap();
    assert_eq!(a.latency, b.latency);
    assert_eq!(a.forward, b.forward);
    assert_eq!(a.reverse, b.reverse);
    assert!(a.forward.retransmissions.unwrap() > 0);
}

#[test]
fn a_transport_without_a_virtual_form_is_refused_with_the_reason() {
    for (transport, says) in [("tcp:cc=cubic", "kernel's TCP"), ("enet", "own clock")] {
        let spec: TransportSpec = transport.parse().unwrap();
        let why = why_not_virtual(&spec).unwrap();
        assert!(why.contains(says), "{why}");
        let err = one(&options(transport, 1, 10, 0.0), &Stop::new()).unwrap_err();
        assert_eq!(err, why);
    }
}

#[test]
fn a_raised_stop_ends_the_run_with_what_it_measured() {
    let stop = Stop::new();
    stop.raise();
    let out = one(&options("latlab:thin", 2, 1000, 0.0), &stop).unwrap();
    assert!(out.sent < 2000);
}

#[test]
fn urgent_messages_go_twice_and_a_lost_first_copy_costs_only_the_spacing() {
    let p99_ms = |out: &SimOutcome| out.latency.as_hdr().value_at_quantile(0.99) as f64 / 1e6;
    let plain = one(&options("latlab:rack", 4, 500, 0.05), &Stop::new()).unwrap();
    let urgent = one(&options("latlab:rack:urgent", 4, 500, 0.05), &Stop::new()).unwrap();
    assert_eq!((plain.delivered, urgent.delivered), (2000, 2000));
    // Every message twice: the copy goes 5 ms after the first, before any ACK can come back
    // over a 20 ms round trip.
    assert!(urgent.forward.packets >= 4000, "{}", urgent.forward.packets);
    assert!(plain.forward.packets < 2200, "{}", plain.forward.packets);
    // 5% of first copies are lost; both copies of only 0.25%: the p99 is the copy's 5 ms
    // after the path's 10, where recovery without copies takes a round trip and more.
    assert!(p99_ms(&urgent) <= 15.1, "urgent p99 {} ms", p99_ms(&urgent));
    assert!(p99_ms(&plain) >= 30.0, "plain p99 {} ms", p99_ms(&plain));
}

#[test]
fn transports_in_one_run_share_the_network_and_are_told_apart() {
    let mut o = options("udp", 5, 500, 0.02);
    o.transports.push("latlab:thin".parse().unwrap());
    let out = run(&o, &Stop::new()).unwrap();
    assert_eq!(out.len(), 2);
    let (udp, latlab) = (&out[0], &out[1]);
    assert_eq!((udp.sent, latlab.sent), (2500, 2500));
    assert_eq!(latlab.delivered, 2500);
    assert!(udp.delivered < 2500);
    assert_eq!(udp.forward.packets, 2500);
    assert_eq!(udp.latency.len(), udp.delivered);
    assert_eq!(latlab.latency.len(), 2500);
    // Each transport's datagrams are its own: latlab's include its retransmissions.
    assert!(latlab.forward.packets > 2500);
    assert!(latlab.forward.retransmissions.unwrap() > 0);
}
