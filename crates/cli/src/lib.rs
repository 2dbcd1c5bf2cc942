//! `latlab`: a latency lab for game servers and network functions.
//!
//! The command line is flags → latlab-lab → exit code: each command's module parses its flags
//! into lab's checked options, calls lab, and prints the report lab returns (whose files are
//! already written). A bad flag, configuration or schedule ends with one line naming it and
//! exit code 2; a failure at run time prints the whole chain of causes on one line and exits
//! with 1. A closed stdout (`latlab … | head`) ends the command quietly. SIGINT (Ctrl-C),
//! SIGTERM and SIGHUP raise the stop flag every command watches (`signals`): the command
//! writes what it measured, everything it made (namespaces, partial files) is dropped on the
//! way out, and only then does latlab exit, with 130, 143 or 129.
//!
//! The binary calls [`main`]; [`command`] is the whole command line as clap defines it, which
//! `tests/readme.rs` holds the guide's command summary (`docs/commands.md`) against. The values a flag takes are
//! listed from the constants its parser uses (`values.rs`).
#![forbid(unsafe_code)]

/// Prints to stdout like `print!`, in a function that returns `anyhow::Result`: a closed
/// stdout (`latlab … | head`) ends the command quietly instead of panicking ([`write_out`]).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::write_out(format_args!($($arg)*))?
    };
}

/// [`out!`] with a newline, like `println!`.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::write_out(format_args!("{}\n", format_args!($($arg)*)))?
    };
}

mod check;
mod clean;
mod compare;
mod completions;
mod demo;
mod echo;
mod emu;
mod fates;
mod fwd;
mod gen;
mod gen_ui;
mod man;
mod merge;
mod progress;
mod protocol_flags;
mod report;
mod rfc2544;
mod run;
mod serve;
mod signals;
mod stream;
mod study;
mod trace;
mod values;

use anyhow::Result;
use clap::{CommandFactory, Parser, Subcommand};
use latlab_lab::command::{CommandError, Stop};
use latlab_study::StudyError;

/// latlab: a latency lab for game servers and network functions.
#[derive(Debug, Parser)]
#[command(name = "latlab", version, about, allow_negative_numbers = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Reflect latlab probes back to their sender (a probe responder).
    Echo(echo::EchoArgs),
    /// Send probes to a responder on an open-loop schedule and measure round-trip latency.
    Gen(Box<gen::GenArgs>),
    /// Measure this machine's UDP echo path at a few rates, end to end, and write a results
    /// folder.
    Demo(demo::DemoArgs),
    /// Draw a results folder again from its data: a gen or demo folder's table (and CCDF
    /// plot), a study's tables, figures and report.md.
    Report(report::ReportArgs),
    /// Decide latency gates on a results folder (gen --out, demo, stream send --out, rfc2544 or a study): each --assert from its 95%
    /// interval, pass, fail or inconclusive; exit 0, 3 (one failed) or 4 (one inconclusive).
    Check(check::CheckArgs),
    /// Compare two results folders (gen --out, demo or stream send --out): each percentile's change with its 95%
    /// interval, regression gates (--assert 'p99<=+10%'), both CCDFs on one plot.
    Compare(compare::CompareArgs),
    /// Merge the runs of several generator hosts (gen --out folders) into one, exactly:
    /// histograms merged, counts added, the runs listed.
    Merge(merge::MergeArgs),
    /// Run the model game server: every game packet is sent to every client of its game.
    Serve(serve::ServeArgs),
    /// Emulate a link between two interfaces: delay, jitter, loss, duplication, corruption,
    /// reordering, rate and queue limits, per direction (a transparent layer-2 bridge).
    ///
    /// Frames leave as they were on the wire, whatever the hosts' offloads: VLAN tags put back,
    /// checksums the senders left to the device finished, TCP super-frames cut into segments
    /// (--io packet; --io xdp finishes checksums and names super-frames it cannot take). No
    /// ethtool step is needed on either side.
    Emu(Box<emu::EmuArgs>),
    /// Run a program behind an emulated link: CMD gets a network namespace of its own whose
    /// only way out is `latlab emu` (the link flags are emu's), and reaches this host at
    /// $LATLAB_HOST (with --nat, whatever this host reaches). latlab's exit status is CMD's.
    Run(Box<run::RunArgs>),
    /// Run $SHELL behind an emulated link, as `latlab run` runs a program.
    Shell(Box<run::ShellArgs>),
    /// Summarise a fate file (emu/run/shell --record-fates): frames per direction and flow,
    /// drops by cause and their positions; with a second file, compare the two.
    Fates(fates::FatesArgs),
    /// Forward frames between two interfaces, both ways, no lookup (an L2 forwarder on one
    /// pinned core), and report where each packet's cycles go.
    Fwd(fwd::FwdArgs),
    /// Measure a forwarder as RFC 2544 asks (NDR and PDR by binary search, frame loss rate)
    /// in client — dut — server namespaces, per frame size.
    Rfc2544(rfc2544::Rfc2544Args),
    /// Run a study.
    #[command(subcommand)]
    Study(study::StudyCommand),
    // One thin stream of messages over a real transport (its about names the transports).
    #[command(subcommand, about = stream::about())]
    Stream(stream::StreamCommand),
    /// Per stream of a pcap or pcapng capture (UDP/TCP, both directions), the columns of
    /// Table 1 of Harcsik et al.: payload size average/min/max, interarrival
    /// average/median/min/max/1%/99%, packets/s and bits/s.
    TraceStats(trace::TraceStatsArgs),
    /// Remove what runs that ended without cleaning up (kill -9) left behind: network
    /// namespaces whose owner is gone (a container's link that `emu --attach` spliced put back
    /// as it was first), the nftables tables and ip_forward of `run --nat`, stale locks, and
    /// partial results in the folders given.
    Clean(clean::CleanArgs),
    /// Write latlab's man pages, one for latlab and one for each subcommand
    /// (latlab-emu.1, latlab-study-bufferbloat.1, ...), into a folder.
    Man(man::ManArgs),
    /// Print a completion script for latlab's commands and flags (bash, zsh or fish).
    Completions(completions::CompletionsArgs),
}

/// Raised by a stopping signal (or a command's duration); every command stops when it is.
static STOP: Stop = Stop::new();

/// The command line as clap defines it: every command, its flags, their defaults and the values
/// they take.
pub fn command() -> clap::Command {
    Cli::command()
}

/// Parses the command line, runs the command and exits with its code.
pub fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                std::process::exit(
                    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        2
                    } else {
                        0
                    },
                );
            }
            eprintln!("{}", one_line(&e));
            std::process::exit(2);
        }
    };
    if let Err(e) = signals::watch(&STOP) {
        eprintln!("error: cannot handle SIGINT, SIGTERM and SIGHUP: {e}");
        std::process::exit(1);
    }
    let result = match cli.command {
        Command::Echo(a) => echo::run(a),
        Command::Gen(a) => gen::run(*a),
        Command::Demo(a) => demo::run(a),
        Command::Report(a) => report::run(a),
        Command::Check(a) => check::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Merge(a) => merge::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Study(s) => study::run(s),
        Command::Stream(s) => stream::run(s),
        Command::Emu(a) => emu::run(*a),
        Command::Fwd(a) => fwd::run(a),
        Command::Rfc2544(a) => rfc2544::run(a),
        Command::Clean(a) => clean::run(a),
        // CMD's exit status is latlab's; everything the run made is removed by now.
        Command::Run(a) => exit_with(run::run(*a)),
        Command::Shell(a) => exit_with(run::shell(*a)),
        Command::TraceStats(a) => trace::run(a),
        Command::Fates(a) => fates::run(a),
        Command::Man(a) => man::run(a),
        Command::Completions(a) => completions::run(a),
    };
    // The command has returned: everything it made is dropped, so exiting cannot leak.
    let mut code = 0;
    if let Err(e) = &result {
        // A closed stdout means whoever read our output has all they wanted (`| head`): end
        // quietly, as ripgrep does. Every file the command writes is written before it prints.
        if !e.chain().any(|c| c.is::<StdoutClosed>()) {
            eprintln!("error: {}", chain(e));
            code = exit_code(e);
        }
    }
    if let Some(signal) = signals::received() {
        code = signal.exit_code();
    }
    if code != 0 {
        std::process::exit(code);
    }
}

/// Ends latlab with `code` (the exit status of the program `latlab run` ran), or returns the
/// error for `main` to report.
fn exit_with(code: Result<i32>) -> Result<()> {
    match code {
        Ok(code) => std::process::exit(code),
        Err(e) => Err(e),
    }
}

/// The exit code of a failed command: 2 when what it was given cannot be used (a
/// configuration or schedule file, a value in one, flags that contradict each other, a
/// `--resume` that does not fit its folder, a gate it cannot answer), 3 when a gate failed,
/// 4 when none failed but one was inconclusive, 1 for a failure at run time.
fn exit_code(e: &anyhow::Error) -> i32 {
    if let Some(gates) = e.downcast_ref::<check::GatesNotPassed>() {
        return gates.exit_code();
    }
    let usage = e.chain().any(|cause| {
        cause
            .downcast_ref::<CommandError>()
            .is_some_and(CommandError::is_usage)
            || cause
                .downcast_ref::<StudyError>()
                .is_some_and(StudyError::is_usage)
            || cause
                .downcast_ref::<latlab_study::compare::CompareError>()
                .is_some_and(latlab_study::compare::CompareError::is_usage)
            || cause
                .downcast_ref::<latlab_study::check::CheckError>()
                .is_some_and(latlab_study::check::CheckError::is_usage)
            || cause
                .downcast_ref::<latlab_lab::merge::MergeError>()
                .is_some_and(latlab_lab::merge::MergeError::is_usage)
    });
    if usage {
        2
    } else {
        1
    }
}

/// Stdout was closed by its reader: the command's output has nowhere to go.
#[derive(Debug)]
struct StdoutClosed;

impl std::fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stdout was closed")
    }
}

impl std::error::Error for StdoutClosed {}

/// Writes `text` to stdout at once. A closed pipe (`EPIPE`) is [`StdoutClosed`], which `main`
/// ends on quietly; `print!` would panic on it.
fn write_out(text: std::fmt::Arguments<'_>) -> Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_fmt(text).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        Err(e) => Err(anyhow::Error::new(e).context("writing to stdout")),
    }
}

/// The error and its causes on one line, each cause once: an error whose message already ends
/// with its source's is not followed by that source again.
fn chain(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain().map(|c| c.to_string()) {
        if line.is_empty() {
            line = cause;
        } else if !line.ends_with(&cause) {
            line = format!("{line}: {cause}");
        }
    }
    line
}

/// clap's error as one line that names the flag (its usage hint is left out).
fn one_line(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() == ErrorKind::MissingRequiredArgument {
        if let Some(ContextValue::Strings(flags)) = e.get(ContextKind::InvalidArg) {
            return format!("error: missing required {}", flags.join(", "));
        }
    }
    let text = e.render().to_string();
    text.lines()
        .next()
        .unwrap_or("error: bad arguments")
        .to_string()
}

/// Parses `--xdp-frames`: a power of two from 64 to 1048576.
fn parse_xdp_frames(text: &str) -> Result<u32, String> {
    let n: u32 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number"))?;
    if !n.is_power_of_two() || !(64..=1 << 20).contains(&n) {
        return Err(format!("{n} is not a power of two from 64 to 1048576"));
    }
    Ok(n)
}
