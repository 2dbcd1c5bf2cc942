//! `latlab serve`: flags → [`latlab_lab::serve`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use latlab_lab::command::{resolve, ServerIo};
use latlab_lab::cores::PollChoice;
use latlab_lab::serve::ServeOptions;
use latlab_lab::units::{parse_bytes, parse_duration, parse_rate};

use crate::progress::Terminal;
use crate::{parse_xdp_frames, values, STOP};

#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Address and port to serve on.
    #[arg(long, value_name = "ADDR")]
    listen: String,
    /// socket: one recvfrom/sendto per packet and copy; batched: recvmmsg/sendmmsg; xdp:
    /// AF_XDP on --iface, IPv4/UDP in user space (root).
    #[arg(long, default_value = "socket", value_name = "IO", value_parser = values::server_io())]
    io: ServerIo,
    /// The interface that AF_XDP serves (--io xdp).
    #[arg(long, value_name = "IF")]
    iface: Option<String>,
    /// AF_XDP UMEM frames (--io xdp), a power of two from 64 to 1048576: half for receiving,
    /// half for sending; each of the four rings holds half as many entries.
    #[arg(long, default_value_t = 4096, value_parser = parse_xdp_frames, value_name = "N")]
    xdp_frames: u32,
    /// SO_RCVBUF in bytes (16k, 64k, ...); the system default when absent.
    #[arg(long, value_parser = parse_bytes, value_name = "BYTES")]
    rcvbuf: Option<usize>,
    /// Emulated work per game packet, in TSC cycles.
    #[arg(long, default_value_t = 150, value_name = "N")]
    work_cycles: u64,
    /// Size of the client table.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=65535), value_name = "N")]
    max_clients: u32,
    /// Per-client packet-rate limit (packets per second); off when absent. Over --io xdp the
    /// XDP program keeps it too, per source socket (burst 32, as the server's), dropping a flood before user
    /// space; its drops are xdp_rate_limited in --json.
    #[arg(long, value_parser = parse_rate, value_name = "PPS", allow_hyphen_values = true)]
    rate_limit: Option<f64>,
    /// Remove a client not heard from (no game packet, no join) for this long; 0: never.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DUR")]
    idle_timeout: Duration,
    /// Most clients one host (an IPv4 address, an IPv6 /64) may hold in the table; no cap
    /// below --max-clients when absent.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=65535), value_name = "N")]
    max_clients_per_host: Option<u32>,
    /// auto: spin on a CPU nobody else spins on, leaving one free, else block (the core
    /// plan; an emulator comes first); block: sleep until packets arrive (as a plain game
    /// server); busy: spin.
    #[arg(long, default_value = "auto", value_name = "MODE", value_parser = values::poll())]
    poll: PollChoice,
    /// Pin the server to this CPU (with --poll auto: spin there unless another claimed it).
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    duration: Option<Duration>,
    /// Write the final counters to this JSON file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

impl ServeArgs {
    /// The checked options these flags make.
    fn options(self) -> Result<ServeOptions> {
        let options = ServeOptions {
            listen: resolve("--listen", &self.listen)?,
            io: self.io,
            iface: self.iface,
            xdp_frames: self.xdp_frames,
            rcvbuf: self.rcvbuf,
            work_cycles: self.work_cycles,
            max_clients: self.max_clients as usize,
            rate_limit: self.rate_limit,
            idle_timeout: (!self.idle_timeout.is_zero()).then_some(self.idle_timeout),
            max_clients_per_host: self.max_clients_per_host.map(|n| n as usize),
            poll: self.poll,
            cpu: self.cpu,
            duration: self.duration,
            json: self.json,
        };
        options.check()?;
        Ok(options)
    }
}

pub(crate) fn run(a: ServeArgs) -> Result<()> {
    let options = a.options()?;
    let report = latlab_lab::serve::run(&options, &STOP, &mut Terminal::new())?;
    outln!("{}", report.text());
    Ok(())
}
