//! `latlab fwd`: flags → [`latlab_forwarding::fwd`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use latlab_forwarding::fwd::{FwdOptions, FwdPoll, MAX_BATCH};
use latlab_lab::command::Io;
use latlab_lab::units::parse_duration;

use crate::progress::Terminal;
use crate::{values, STOP};

#[derive(Debug, clap::Args)]
pub(crate) struct FwdArgs {
    /// First interface.
    #[arg(long, value_name = "IF")]
    iface_a: String,
    /// Second interface.
    #[arg(long, value_name = "IF")]
    iface_b: String,
    /// packet: AF_PACKET rings beside the kernel stack; xdp: AF_XDP, every frame of both
    /// interfaces taken before the kernel stack by an XDP program (root); xdp-redirect: an
    /// XDP program on each interface redirects every frame to the other, frames never leaving
    /// the kernel (root; no loop here: --batch, --poll and --cpu do not apply).
    #[arg(long, default_value = "packet", value_name = "IO", value_parser = values::fwd_io())]
    io: Io,
    /// Frames per receive call at most, 1 to 4096.
    #[arg(long, default_value_t = 32, value_parser = parse_batch, value_name = "N")]
    batch: usize,
    /// busy: spin (one core at 100%); block: wait in poll(2) when nothing came; rate:N: poll
    /// both interfaces N times per second, sleeping between.
    #[arg(long, default_value = "busy", value_name = "MODE", value_parser = values::fwd_poll())]
    poll: FwdPoll,
    /// Pin the loop to this CPU (default: the last this process may run on).
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_parser = parse_duration, value_name = "DUR")]
    duration: Option<Duration>,
    /// Write the counters by cause and the cycles per packet by step to this JSON file at exit.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Parses `--batch`: a whole number from 1 to 4096.
fn parse_batch(text: &str) -> Result<usize, String> {
    let n: usize = text
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number"))?;
    if !(1..=MAX_BATCH).contains(&n) {
        return Err(format!("{n} is not from 1 to {MAX_BATCH}"));
    }
    Ok(n)
}

impl FwdArgs {
    /// The checked options these flags make.
    fn options(self) -> Result<FwdOptions> {
        let mut options = FwdOptions::new(self.iface_a, self.iface_b);
        options.io = self.io;
        options.batch = self.batch;
        options.poll = self.poll;
        options.cpu = self.cpu;
        options.duration = self.duration;
        options.json = self.json;
        options.check()?;
        Ok(options)
    }
}

pub(crate) fn run(a: FwdArgs) -> Result<()> {
    let options = a.options()?;
    if options.io == Io::XdpRedirect {
        let report = latlab_forwarding::fwd::redirect::run(&options, &STOP, &mut Terminal::new())?;
        outln!("{}", report.text());
        return Ok(());
    }
    let report = latlab_forwarding::fwd::run(&options, &STOP, &mut Terminal::new())?;
    outln!("{}", report.text());
    Ok(())
}
