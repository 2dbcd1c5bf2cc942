//! `latlab rfc2544`: flags → [`latlab_forwarding::rfc2544`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use latlab_forwarding::rfc2544::{Dut, Rfc2544Options};
use latlab_lab::command::{check_writable, CommandError, Io};
use latlab_lab::gate::{Assertion, Results};
use latlab_lab::units::parse_duration;

use crate::progress::Terminal;
use crate::{values, STOP};

#[derive(Debug, clap::Args)]
pub(crate) struct Rfc2544Args {
    /// The forwarder: one the lab builds in the middle namespace, or external, one you started
    /// between --iface-a and --iface-b of this host.
    #[arg(long, value_name = "DUT", value_parser = values::dut())]
    dut: Dut,
    /// Frame sizes in bytes on the wire, 64 to 1518 (default: RFC 2544's 64,128,256,512,1024,
    /// 1280,1518).
    #[arg(long, value_delimiter = ',', value_parser = parse_size, value_name = "BYTES,...")]
    sizes: Vec<usize>,
    /// Length of each trial.
    #[arg(long, default_value = "2s", value_parser = parse_duration, value_name = "DUR")]
    trial: Duration,
    /// The search stops when the interval left is this fraction of the source's maximum rate
    /// or less: 0.01 or 1%.
    #[arg(long, default_value = "1%", value_parser = parse_fraction, value_name = "F")]
    resolution: f64,
    /// Trials per search at most (NDR and PDR each).
    #[arg(long, default_value_t = 16, value_name = "N")]
    max_trials: usize,
    /// The throughput search: binary (RFC 2544's bisection, one trial deciding each step), mlr
    /// (MLRsearch, RFC 9971: each load judged on --mlr-duration-sum of trials; its relevant
    /// lower bounds are the NDR and PDR) or both (side by side in the report, with their trial
    /// time).
    #[arg(long, default_value = "binary", value_name = "METHOD", value_parser = ["binary", "mlr", "both"])]
    search: String,
    /// MLRsearch's duration sum: the trials each load is judged on (FD.io CSIT: 21s; its
    /// trials are 1s: --trial 1s).
    #[arg(long, default_value = "21s", value_parser = parse_duration, value_name = "DUR")]
    mlr_duration_sum: Duration,
    /// MLRsearch's exceed ratio: the fraction of the duration sum allowed to lose more than the
    /// goal's loss ratio.
    #[arg(long, default_value = "0.5", value_parser = parse_ratio, value_name = "F")]
    mlr_exceed_ratio: f64,
    /// MLRsearch's width: how close its relevant bounds must come, relative to the upper.
    #[arg(long, default_value = "0.5%", value_parser = parse_fraction, value_name = "F")]
    mlr_width: f64,
    /// MLRsearch's trials at most per frame size.
    #[arg(long, default_value_t = 400, value_name = "N")]
    mlr_max_trials: usize,
    /// Leave out the frame loss rate sweep (100% down in 10% steps).
    #[arg(long)]
    no_loss_sweep: bool,
    /// Back-to-back searches per size, averaged (0: none; RFC 2544 asks for 50).
    #[arg(long, default_value_t = 1, value_name = "N")]
    b2b_repeats: u32,
    /// Latency trials at each of 10, 50, 90 and 100% of the NDR (0: none; RFC 8219 asks
    /// for 20).
    #[arg(long, default_value_t = 1, value_name = "N")]
    latency_trials: u32,
    /// The source's frame port in the client: packet (an AF_PACKET TX ring) or xdp (an AF_XDP
    /// TX ring, copy mode on veth; root), for a source that outruns a faster DUT.
    #[arg(long, default_value = "packet", value_name = "IO", value_parser = values::frame_io())]
    source: Io,
    /// The results folder (must not exist unless --resume; default
    /// latlab-results/rfc2544-<time>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Continue the run in --out: the frame sizes it finished are kept, the others measured,
    /// and the folder replaced whole (refused when it was measured with other options).
    #[arg(long, requires = "out")]
    resume: bool,
    /// A gate on every frame size (repeatable): ndr>=500k, pdr>=600k (frames per second, as
    /// the search found them). Exit 3 when one fails, 4 when none fails but one is
    /// inconclusive (no rate found, or the source, not the DUT, was the limit).
    #[arg(long = "assert", value_name = "EXPR", value_parser = crate::check::parse_assertion)]
    assertions: Vec<Assertion>,
    /// Write every --assert verdict as a JUnit XML test case to this file.
    #[arg(long, value_name = "FILE", requires = "assertions")]
    junit: Option<PathBuf>,
    /// Frames per receive call of latlab fwd as the DUT (--dut fwd or fwd-xdp), or testpmd's
    /// burst (--dut testpmd or testpmd-xdp).
    #[arg(long, default_value_t = 32, value_name = "N")]
    fwd_batch: usize,
    /// How latlab fwd as the DUT waits for frames: busy (spin), block (poll(2) when nothing
    /// came) or rate:N (poll N times a second, sleeping between) [default: block for fwd-xdp,
    /// whose NAPI pollers share its core; busy for fwd].
    #[arg(long, value_name = "MODE", value_parser = values::fwd_poll())]
    fwd_poll: Option<latlab_forwarding::rfc2544::FwdPoll>,
    /// Leave out the saturation trial (the source as fast as it goes, the DUT's CPU sampled
    /// for the cycles per packet by step).
    #[arg(long)]
    no_saturation: bool,
    /// --dut external: the interface the frames leave by, towards the DUT.
    #[arg(long, value_name = "IF")]
    iface_a: Option<String>,
    /// --dut external: the interface the DUT's frames come back on (only the blaster's frames
    /// are counted there).
    #[arg(long, value_name = "IF")]
    iface_b: Option<String>,
    /// --dut external: the frames' destination MAC (a router's MAC on --iface-a's side; by
    /// default a locally administered address an L2 forwarder passes on).
    #[arg(long, value_parser = latlab_lab::units::parse_mac, value_name = "MAC")]
    dst_mac: Option<[u8; 6]>,
    /// --dut external: the frames' destination address [default: 198.19.0.1].
    #[arg(long, value_name = "IP")]
    dst_ip: Option<std::net::Ipv4Addr>,
}

/// Parses one `--sizes` value.
fn parse_size(text: &str) -> Result<usize, String> {
    let n: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number of bytes"))?;
    if !(64..=1518).contains(&n) {
        return Err(format!("{n} is not from 64 to 1518"));
    }
    Ok(n)
}

/// Parses `--resolution`: a fraction in (0, 0.5], or a percentage.
fn parse_fraction(text: &str) -> Result<f64, String> {
    let value = match text.strip_suffix('%') {
        Some(p) => p.parse::<f64>().map(|p| p / 100.0),
        None => text.parse::<f64>(),
    }
    .map_err(|_| format!("{text:?} is not a fraction or a percentage"))?;
    if !(value > 0.0 && value <= 0.5) {
        return Err(format!("{text} is not above 0 and at most 50%"));
    }
    Ok(value)
}

/// A ratio in `0..1`: `0.5` or `50%`.
fn parse_ratio(text: &str) -> Result<f64, String> {
    let value = match text.strip_suffix('%') {
        Some(p) => p.parse::<f64>().map(|p| p / 100.0),
        None => text.parse::<f64>(),
    }
    .map_err(|_| format!("{text:?} is not a fraction or a percentage"))?;
    if !(0.0..1.0).contains(&value) {
        return Err(format!("{text} is not at least 0 and below 1"));
    }
    Ok(value)
}

impl Rfc2544Args {
    fn options(self) -> Result<Rfc2544Options> {
        let mut options = Rfc2544Options::new(self.dut);
        if !self.sizes.is_empty() {
            options.sizes = self.sizes;
        }
        options.trial = self.trial;
        options.resolution = self.resolution;
        options.max_trials = self.max_trials;
        options.search = self
            .search
            .parse()
            .map_err(|e| latlab_lab::command::CommandError::Usage(format!("--search {e}")))?;
        options.mlr = latlab_forwarding::rfc2544::MlrSettings {
            duration_sum: self.mlr_duration_sum,
            exceed_ratio: self.mlr_exceed_ratio,
            width: self.mlr_width,
            max_trials: self.mlr_max_trials,
        };
        options.loss_sweep = !self.no_loss_sweep;
        options.b2b_repeats = self.b2b_repeats;
        options.latency_trials = self.latency_trials;
        options.source = self.source;
        if let Some(out) = self.out {
            options.out = out;
        }
        options.resume = self.resume;
        options.fwd_batch = self.fwd_batch;
        options.fwd_poll = self.fwd_poll;
        options.saturation = !self.no_saturation;
        options.iface_a = self.iface_a;
        options.iface_b = self.iface_b;
        if let Some(mac) = self.dst_mac {
            options.dst_mac = mac;
        }
        if let Some(ip) = self.dst_ip {
            options.dst_ip = ip;
        }
        options.check()?;
        Ok(options)
    }
}

pub(crate) fn run(a: Rfc2544Args) -> Result<()> {
    let (assertions, junit) = (a.assertions.clone(), a.junit.clone());
    for gate in &assertions {
        gate.check_for(Results::Rfc2544, false)
            .map_err(|e| CommandError::Usage(e.to_string()))?;
    }
    if let Some(path) = &junit {
        check_writable(path)?;
    }
    let mut options = a.options()?;
    // Decided on every size as the folder is drawn: into rfc2544.json and report.md.
    options.assertions = assertions.clone();
    let (report, failure) = latlab_forwarding::rfc2544::run(&options, &STOP, &mut Terminal::new())?;
    // The sizes that finished are shown also when a search ended early (Ctrl-C included).
    outln!("{}", report.text());
    if let Some(e) = failure {
        return Err(e.into());
    }
    let verdicts = latlab_forwarding::rfc2544::gates::decide(&assertions, &report.sizes);
    if let Some(path) = &junit {
        let xml = latlab_lab::gate::junit::junit_xml("latlab rfc2544", &verdicts);
        latlab_lab::results::write_atomic(path, xml.as_bytes())?;
    }
    crate::check::gates(&verdicts)
}
