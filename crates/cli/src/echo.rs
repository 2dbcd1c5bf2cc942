//! `latlab echo`: flags → [`latlab_lab::echo`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use latlab_lab::command::{resolve, Io};
use latlab_lab::cores::PollChoice;
use latlab_lab::echo::EchoOptions;
use latlab_lab::units::{parse_bytes, parse_duration};

use crate::progress::Terminal;
use crate::{parse_xdp_frames, values, STOP};

#[derive(Debug, clap::Args)]
pub(crate) struct EchoArgs {
    /// Address and port to listen on, e.g. 127.0.0.1:7777.
    #[arg(long, value_name = "ADDR")]
    listen: String,
    /// socket, or xdp (needs --iface and root; takes the UDP port's frames before the kernel).
    #[arg(long, default_value = "socket", value_name = "IO", value_parser = values::socket_io())]
    io: Io,
    /// The interface that AF_XDP serves (--io xdp).
    #[arg(long, value_name = "IF")]
    iface: Option<String>,
    /// AF_XDP UMEM frames (--io xdp), a power of two from 64 to 1048576: half for receiving,
    /// half for sending; each of the four rings holds half as many entries.
    #[arg(long, default_value_t = 4096, value_parser = parse_xdp_frames, value_name = "N")]
    xdp_frames: u32,
    /// auto: spin on a CPU nobody else spins on, leaving one free, else block (the core
    /// plan; an emulator comes first); busy: spin on the socket (lowest latency, one core at
    /// 100%); block: sleep until packets arrive.
    #[arg(long, default_value = "auto", value_name = "MODE", value_parser = values::poll())]
    poll: PollChoice,
    /// Datagrams per recvmmsg/sendmmsg call.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=1024))]
    batch: u16,
    /// Do not write the reflector's receive/transmit times into the probes.
    #[arg(long)]
    no_stamp: bool,
    /// Pin the reflector to this CPU (with --poll auto: spin there unless another claimed it).
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,
    /// SO_RCVBUF in bytes (16k, 4M, ...).
    #[arg(long, value_parser = parse_bytes, value_name = "BYTES")]
    rcvbuf: Option<usize>,
    /// Stop after this long (default: run until Ctrl-C).
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    duration: Option<Duration>,
    /// Write the final counters to this JSON file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

impl EchoArgs {
    /// The checked options these flags make.
    fn options(self) -> Result<EchoOptions> {
        let listen = resolve("--listen", &self.listen)?;
        let options = EchoOptions {
            listen,
            io: self.io,
            iface: self.iface,
            xdp_frames: self.xdp_frames,
            rcvbuf: self.rcvbuf,
            poll: self.poll,
            batch: usize::from(self.batch),
            stamp: !self.no_stamp,
            cpu: self.cpu,
            duration: self.duration,
            json: self.json,
        };
        options.check()?;
        Ok(options)
    }
}

pub(crate) fn run(a: EchoArgs) -> Result<()> {
    let options = a.options()?;
    let report = latlab_lab::echo::run(&options, &STOP, &mut Terminal::new())?;
    outln!("{}", report.text());
    Ok(())
}
