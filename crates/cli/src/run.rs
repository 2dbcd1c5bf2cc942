//! `latlab run -- CMD` and `latlab shell`: flags → [`mod@latlab_emu::run`]. The link flags are
//! `latlab emu`'s, with `--up`/`--down` naming its directions for the user (A→B is from CMD).

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::Result;
use latlab_emu::config::LinkSources;
use latlab_emu::run::wiring::Subnet;
use latlab_emu::run::{Received, RunOptions, RunOutcome};
use latlab_emu::EmuOptions;

use crate::emu::{flow_help, ImpairmentArgs, PollArg};
use crate::signals;

/// The link and wiring flags `run` and `shell` share.
#[derive(Debug, clap::Args)]
pub(crate) struct LinkArgs {
    /// The impairment flags, one per knob (`--delay`, `--loss`, …), both directions.
    #[command(flatten)]
    impairments: ImpairmentArgs,
    /// Impairments of what CMD sends only (A→B in `latlab emu`'s words): "delay=10ms loss=1%".
    #[arg(long, visible_alias = "a-to-b", value_name = "SPEC")]
    up: Option<String>,
    /// Impairments of what CMD receives only (B→A).
    #[arg(long, visible_alias = "b-to-a", value_name = "SPEC")]
    down: Option<String>,
    /// A named set of knobs, as `latlab emu --preset` (up is what CMD sends); 'list' prints
    /// them.
    #[arg(long, value_name = "NAME")]
    preset: Option<String>,
    #[arg(long, value_name = "RULE", help = flow_help())]
    flow: Vec<String>,
    /// A TOML file of impairments, as `latlab emu --config` reads it ([a_to_b] is up,
    /// [b_to_a] down).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// busy: the emulator spins on a core of its own; block: it sleeps until due, then spins
    /// the last microseconds; auto: as `latlab emu --poll auto`.
    #[arg(long, default_value = "auto", value_name = "MODE")]
    poll: PollArg,
    /// Write the emulator's counters by cause and release errors to this JSON file when CMD
    /// ends.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Serve the emulator's HTTP API on ADDR (127.0.0.1:9100) while CMD runs: GET /conditions,
    /// PUT /conditions/a-to-b (up) or /conditions/b-to-a (down), GET /metrics.
    #[arg(long, value_name = "ADDR")]
    api: Option<std::net::SocketAddr>,
    /// Serve the live control panel in a browser on ADDR (--ui alone: 127.0.0.1:9200): the
    /// link's conditions up and down as controls, presets, pull the cable, lag spike, outage,
    /// live charts and the change log; its address, with the run's token, printed at start.
    /// Loopback only, unless --ui-public.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = latlab_ui::DEFAULT_ADDR)]
    ui: Option<std::net::SocketAddr>,
    /// Let --ui listen on an address other than loopback.
    #[arg(long, requires = "ui")]
    ui_public: bool,
    /// Write what crossed the link to this pcapng file (side A is CMD's, B the host's).
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Write every frame's fate to this fate file (`latlab fates FILE` reads it).
    #[arg(long, value_name = "FILE")]
    record_fates: Option<PathBuf>,
    /// Give the frames the fates recorded in this fate file, by direction, flow and position.
    #[arg(long, value_name = "FILE")]
    replay_fates: Option<PathBuf>,
    /// Put the run on this subnet (its first address is the host's, its second CMD's); by
    /// default a free /30 of 198.19.0.0/16.
    #[arg(long, value_name = "CIDR", value_parser = parse_subnet)]
    subnet: Option<Subnet>,
    /// Let CMD reach whatever this host reaches (its address masqueraded; needs nftables'
    /// `nft`); without it CMD reaches this host only.
    #[arg(long)]
    nat: bool,
}

fn parse_subnet(text: &str) -> Result<Subnet, String> {
    Subnet::parse(text)
}

/// `latlab run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    link: LinkArgs,
    /// The program to run behind the link, and its arguments.
    #[arg(required_unless_present = "preset", last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// `latlab shell`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShellArgs {
    #[command(flatten)]
    link: LinkArgs,
}

impl LinkArgs {
    fn options(self, name: &'static str, command: Vec<OsString>) -> Result<RunOptions> {
        let sources = LinkSources {
            preset: self.preset,
            config: self.config,
            flags: self.impairments.0,
            frame_size: 2048,
            a_to_b: self.up,
            b_to_a: self.down,
            flows: self.flow,
        };
        let mut emu = EmuOptions::new("emu-a".into(), "emu-b".into(), &sources)?;
        emu.poll = self.poll.into();
        emu.json = self.json;
        emu.api = self.api;
        emu.ui = self.ui;
        emu.ui_public = self.ui_public;
        emu.ui_title = name;
        emu.pcap = self.pcap;
        emu.record_fates = self.record_fates;
        if let Some(path) = &self.replay_fates {
            emu.replay_fates_from(path)?;
        }
        emu.check()?;
        Ok(RunOptions {
            name,
            command,
            emu,
            subnet: self.subnet,
            nat: self.nat,
        })
    }
}

/// `--preset list`: prints the presets, and the run ends there.
fn listed(link: &LinkArgs) -> Result<bool> {
    if link.preset.as_deref() == Some("list") {
        out!("{}", latlab_emu::preset::list());
        return Ok(true);
    }
    Ok(false)
}

pub(crate) fn run(a: RunArgs) -> Result<i32> {
    if listed(&a.link)? {
        return Ok(0);
    }
    let options = a.link.options("latlab run", a.command)?;
    outcome(&options)
}

pub(crate) fn shell(a: ShellArgs) -> Result<i32> {
    if listed(&a.link)? {
        return Ok(0);
    }
    let shell = std::env::var_os("SHELL")
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/bin/sh".into());
    let options = a.link.options("latlab shell", vec![shell])?;
    outcome(&options)
}

fn outcome(options: &RunOptions) -> Result<i32> {
    crate::clean::at_start(std::path::Path::new(""), true);
    // A SIGINT that no process sent came from the terminal (Ctrl-C), which sent it to CMD too.
    // One sent with `kill` is passed on: latlab cannot tell one sent to its PID alone from one
    // sent to its whole group, and CMD gets one in either case.
    let signal = || {
        let sent = signals::sent_by_a_process();
        sent.or(signals::received()).map(|s| Received {
            number: s.number(),
            reached_cmd: sent.is_none() && s.number() == signal_hook::consts::SIGINT,
        })
    };
    match latlab_emu::run::run(options, &signal, &mut |line| eprintln!("{line}"))? {
        RunOutcome::Ended { code, report } => {
            eprintln!("{}", latlab_emu::run::summary_line(options.name, &report));
            if let Some(fates) = &report.report.fates {
                eprint!(
                    "{}",
                    latlab_emu::fates::report_lines(fates, report.replayed)
                );
            }
            Ok(code)
        }
        RunOutcome::NotStarted { reason } => {
            eprintln!("error: {reason}");
            Ok(127)
        }
    }
}
