//! What the stream tests share.

/// Every transport this machine runs, with its options: each runs alone on loopback
/// (`stream.rs`), and all of them side by side through one emulator (`stream_lab.rs`).
pub(crate) const TRANSPORTS: &[&str] = &[
    "udp",
    "tcp:cc=cubic",
    "tcp:cc=reno,thin",
    "tcp:cc=bbr",
    "enet",
    "enet:unreliable",
    "kcp:mode=fast",
    "kcp:mode=normal",
    "quic",
    "quic:datagrams",
    "latlab:tcp-like",
    "latlab:thin",
    "latlab:rack:rdb=600",
    "latlab:lean",
];
