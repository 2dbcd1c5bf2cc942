//! The loss recovery policies side by side at one point of Harcsik et al.'s grid, in virtual
//! time: RTT 100 ms (50 ms each way), a 100-byte message every 100 ms on a reliable-ordered
//! channel, 2.5% random loss each way. Prints, per policy, the application latency (send →
//! delivery) and what the sender put on the wire.
//!
//! `cargo run --release -p latlab-transport --example policies [MESSAGES] [SEED]`

use std::net::SocketAddr;

use latlab_link::sim::{self, Datagram, Network, Pair};
use latlab_link::{LinkConfig, LossModel};
use latlab_transport::{Config, Endpoint, Event, Recovery};

const MS: u64 = 1_000_000;

struct Node {
    endpoint: Endpoint,
    addr: SocketAddr,
    buf: Vec<u8>,
    delivered: Vec<(u32, u64)>,
}

impl Node {
    fn collect(&mut self, now: u64) {
        while let Some(event) = self.endpoint.poll_event() {
            if let Event::Message { message, .. } = event {
                self.delivered.push((message.0, now));
            }
        }
    }
}

impl sim::Endpoint for Node {
    fn handle_datagram(&mut self, now: u64, datagram: Datagram) {
        self.endpoint
            .handle_datagram(now, datagram.from, &datagram.payload);
        self.collect(now);
    }

    fn poll_transmit(&mut self, now: u64) -> Option<Datagram> {
        let transmit = self.endpoint.poll_transmit(now, &mut self.buf)?;
        Some(Datagram {
            from: self.addr,
            to: transmit.to,
            payload: self.buf[..transmit.len].to_vec(),
        })
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.endpoint.poll_timeout()
    }

    fn handle_timeout(&mut self, now: u64) {
        self.endpoint.handle_timeout(now);
        self.collect(now);
    }
}

fn run(policy: &str, messages: u64, seed: u64) -> String {
    let (client_addr, server_addr): (SocketAddr, SocketAddr) = (
        "10.0.0.1:5000".parse().unwrap(),
        "10.0.0.2:7000".parse().unwrap(),
    );
    let client_config = Config {
        recovery: policy.parse::<Recovery>().expect("policy"),
        ..Config::default()
    };
    let node = |config, seed, addr| Node {
        endpoint: Endpoint::new(config, seed),
        addr,
        buf: vec![0; 1500],
        delivered: Vec::new(),
    };
    let mut client = node(client_config, 1, client_addr);
    let server = node(Config::server(), 2, server_addr);
    let connection = client.endpoint.connect(0, server_addr);
    let link = |seed| LinkConfig {
        delay_ns: 50 * MS,
        loss: LossModel::Bernoulli { p: 0.025 },
        seed,
        ..LinkConfig::default()
    };
    let network = Network::new(0, link(seed), link(seed + 1)).unwrap();
    let mut pair = Pair::new(client, server, network);
    let start = 2000 * MS;
    let mut sent_at = Vec::new();
    for i in 0..messages {
        let at = start + i * 100 * MS;
        pair.drive_until(at);
        pair.a
            .endpoint
            .send(at, connection, 0, &[0u8; 100])
            .expect("send");
        sent_at.push(at);
    }
    pair.drive_until(start + messages * 100 * MS + 30_000 * MS);
    let mut latencies: Vec<u64> = pair
        .b
        .delivered
        .iter()
        .map(|&(n, at)| at - sent_at[n as usize])
        .collect();
    assert_eq!(latencies.len() as u64, messages, "{policy}: all delivered");
    latencies.sort_unstable();
    let pick = |q: f64| latencies[((q * latencies.len() as f64) as usize).min(latencies.len() - 1)];
    let mean = latencies.iter().sum::<u64>() as f64 / latencies.len() as f64;
    let stats = pair.a.endpoint.connection_stats(connection).unwrap();
    format!(
        "| `{policy}` | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {} | {} |",
        mean / 1e6,
        pick(0.99) as f64 / 1e6,
        pick(0.999) as f64 / 1e6,
        *latencies.last().unwrap() as f64 / 1e6,
        stats.packets_sent as f64 / messages as f64,
        stats.bytes_sent as f64 / (messages * 100) as f64,
        stats.retransmissions,
        stats.spurious_retransmissions,
    )
}

fn main() {
    let mut args = std::env::args().skip(1);
    let messages: u64 = args.next().map_or(20_000, |a| a.parse().expect("MESSAGES"));
    let seed: u64 = args.next().map_or(1, |a| a.parse().expect("SEED"));
    println!(
        "RTT 100 ms, 100 B every 100 ms, 2.5% loss each way, {messages} messages, seed {seed}"
    );
    println!("| policy | mean ms | p99 ms | p99.9 ms | max ms | packets per message | bytes sent per payload byte | retransmissions | spurious |");
    println!("|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    for policy in [
        "tcp-like",
        "thin",
        "rack",
        "thin:rdb=600",
        "rack:rdb=600",
        "thin:min-rto=120ms,rdb=600",
    ] {
        println!("{}", run(policy, messages, seed));
    }
}
