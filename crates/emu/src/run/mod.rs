//! `latlab run -- CMD` and `latlab shell`: a program behind the emulated link, in one command.
//!
//! CMD runs in a network namespace of its own whose only way out is the emulated link
//! ([`wiring`]): its namespace, `latlab emu` (on a thread of this process, its ports opened in a
//! namespace of their own, its API and files here), and an interface in the namespace latlab was
//! started in, whose address CMD is given as `LATLAB_HOST` (its own as `LATLAB_ADDR`). With
//! `--nat` ([`nat`]) CMD reaches whatever this namespace reaches.
//!
//! CMD keeps latlab's standard streams, terminal and process group, so a Ctrl-C at the terminal
//! reaches it as it would without latlab; latlab itself waits for CMD to end (a SIGINT does not
//! stop the link under CMD's feet). A SIGINT sent to latlab alone (`kill -INT PID`), SIGTERM
//! and SIGHUP are passed on to CMD, and SIGKILL [`GRACE`] later if it has not ended. When CMD
//! has ended, the emulator stops, its `--json` is written and the wiring is removed; latlab's
//! exit status is CMD's (128 + the signal that ended it), never 0 once latlab received a
//! stopping signal (then 128 + that signal), or 127 when CMD could not be started (a program
//! not found is refused before anything is built). CMD gets SIGKILL if latlab is killed with
//! `kill -9` (`PR_SET_PDEATHSIG`); `latlab clean` removes what that leaves.

pub mod nat;
pub mod wiring;

use std::ffi::OsString;
use std::sync::mpsc;
use std::time::Duration;

use latlab_engine::Stop;

use crate::{EmuOptions, EmuReport};
use latlab_lab::command::CommandError;
use latlab_lab::progress::View;
use wiring::{RunWiring, RunWiringError, Subnet};

/// Everything `latlab run` takes, checked.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The command's name for the lines it prints: `latlab run` or `latlab shell`.
    pub name: &'static str,
    /// The program and its arguments.
    pub command: Vec<OsString>,
    /// The emulator's options: its links (A→B is up, from CMD; B→A down, towards it), `--json`,
    /// `--api`, `--pcap`, how it waits. Its interfaces and namespace are the run's own.
    pub emu: EmuOptions,
    /// The subnet to put the run on (else a free /30 of [`wiring::POOL`]).
    pub subnet: Option<Subnet>,
    /// Masquerade CMD's traffic to whatever this namespace reaches.
    pub nat: bool,
}

/// How a run ended.
#[derive(Debug)]
pub enum RunOutcome {
    /// CMD ran and ended.
    Ended {
        /// Its exit code (128 + the signal that ended it).
        code: i32,
        /// What the emulator did.
        report: Box<EmuReport>,
    },
    /// CMD could not be started (exit code 127).
    NotStarted {
        /// Why, in one line.
        reason: String,
    },
}

/// A stopping signal latlab received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// Its number.
    pub number: i32,
    /// Whether CMD got it too, and it is not passed on: a Ctrl-C at the terminal, which
    /// reaches the whole foreground process group. A signal sent to latlab's own PID reached
    /// latlab alone.
    pub reached_cmd: bool,
}

/// The emulator's interface names and namespace for a run's wiring.
fn emu_options(options: &RunOptions, wiring: &RunWiring) -> EmuOptions {
    let mut emu = options.emu.clone();
    emu.iface_a = RunWiring::EMU_APP.to_string();
    emu.iface_b = RunWiring::EMU_HOST.to_string();
    emu.netns = Some(wiring.emu.name().to_string());
    emu.duration = None;
    emu
}

/// A view of the emulator under a run: it says when the bridge has its ports (the command may
/// start), hands its notes to the thread that waits for the command, and draws no counters
/// over the command's terminal.
struct RunView {
    started: Option<mpsc::Sender<()>>,
    notes: mpsc::Sender<String>,
    /// `latlab run` or `latlab shell`, which the emulator's notes are given as theirs.
    name: &'static str,
}

impl View for RunView {
    fn note(&mut self, line: &str) {
        let line = match line.strip_prefix("latlab emu: ") {
            Some(rest) => format!("{}: {rest}", self.name),
            None => line.to_string(),
        };
        let _ = self.notes.send(line);
    }

    fn started(&mut self, _line: &str) {
        if let Some(started) = self.started.take() {
            let _ = started.send(());
        }
    }
}

/// Builds the wiring, starts the emulator, runs CMD in its namespace until it ends, then stops
/// the emulator and removes the wiring. `signal` says which stopping signal latlab received, if
/// any: one that did not reach CMD is passed on to it once. `notes` gets the lines for the user
/// (what the run is on, once; anything the emulator notices). A program that cannot be found
/// is [`RunOutcome::NotStarted`] before anything is built.
pub fn run(
    options: &RunOptions,
    signal: &dyn Fn() -> Option<Received>,
    notes: &mut (dyn FnMut(&str) + Send),
) -> Result<RunOutcome, CommandError> {
    let Some((program, args)) = options.command.split_first() else {
        return Err(CommandError::Usage(
            "no command to run: latlab run [LINK OPTIONS] -- CMD [ARGS…]".into(),
        ));
    };
    if let Err(reason) = find_program(program) {
        return Ok(RunOutcome::NotStarted { reason });
    }
    if let Some(why) = latlab_lab::topology::why_no_namespaces() {
        return Err(CommandError::Options(format!(
            "latlab run needs network namespaces: {why}"
        )));
    }
    if options.nat {
        if let Some(why) = nat::why_no_nft() {
            return Err(CommandError::Options(why));
        }
    }
    options.emu.check()?;
    let wiring = RunWiring::build(options.subnet).map_err(|e| match e {
        RunWiringError::SubnetInUse { .. } => CommandError::Usage(e.to_string()),
        e => CommandError::Options(format!("latlab run: {e}")),
    })?;
    let subnet = wiring.subnet();
    let nat = if options.nat {
        let nat = nat::Nat::add(wiring.app.name(), subnet, &wiring.host_if)
            .map_err(CommandError::setup("--nat"))?;
        Some(nat)
    } else {
        None
    };
    let emu = emu_options(options, &wiring);
    let emu_stop = Stop::new();
    let (started_tx, started_rx) = mpsc::channel();
    let (notes_tx, notes_rx) = mpsc::channel::<String>();
    let outcome = std::thread::scope(|s| {
        let emu_thread = {
            let (emu, emu_stop) = (&emu, &emu_stop);
            s.spawn(move || {
                let mut view = RunView {
                    started: Some(started_tx),
                    notes: notes_tx,
                    name: options.name,
                };
                crate::run(emu, emu_stop, &mut view)
            })
        };
        if started_rx.recv().is_err() {
            // The emulator ended before it had its ports: its error says why.
            return match emu_thread.join() {
                Ok(Err(e)) => Err(e),
                _ => Err(CommandError::Run {
                    engine: "emulator",
                    source: std::io::Error::other("the emulator ended before it started"),
                }),
            };
        }
        notes(&format!(
            "{}: {} in namespace {} at {}; this host at {} (LATLAB_HOST){}; {}",
            options.name,
            program.to_string_lossy(),
            wiring.app.name(),
            subnet.app(),
            subnet.host(),
            if nat.is_some() { ", NAT on" } else { "" },
            describe_links(&emu)
        ));
        if let Some(sig) = signal() {
            // Stopped while the link was being made: CMD never starts.
            emu_stop.raise();
            let report = emu_thread.join().map_err(|_| CommandError::Run {
                engine: "emulator",
                source: std::io::Error::other("the emulator panicked"),
            })??;
            return Ok(RunOutcome::Ended {
                code: 128 + sig.number,
                report: Box::new(report),
            });
        }
        let child = spawn(&wiring, subnet, &describe_links(&emu), program, args);
        let code = match child {
            Err(e) => {
                emu_stop.raise();
                let _ = emu_thread.join();
                return Ok(RunOutcome::NotStarted {
                    reason: format!("cannot start {}: {e}", program.to_string_lossy()),
                });
            }
            Ok(child) => wait(
                child,
                signal,
                &emu_thread,
                &mut |line| notes(line),
                &notes_rx,
            ),
        };
        emu_stop.raise();
        let report = match emu_thread.join() {
            Ok(report) => report?,
            Err(_) => {
                return Err(CommandError::Run {
                    engine: "emulator",
                    source: std::io::Error::other("the emulator panicked"),
                })
            }
        };
        let code = code.map_err(CommandError::Io)?;
        Ok(RunOutcome::Ended {
            code: exit_code(code, signal()),
            report: Box::new(report),
        })
    });
    drop(nat);
    drop(wiring);
    outcome
}

/// The run's exit code from CMD's: never 0 once latlab received a stopping signal (then 128 +
/// that signal), as an interrupted command never exits 0.
pub fn exit_code(cmd: i32, received: Option<Received>) -> i32 {
    match received {
        Some(sig) if cmd == 0 => 128 + sig.number,
        _ => cmd,
    }
}

/// Whether `program` can be started, as a shell would find it: a name with a `/` is that file,
/// any other is looked up in `PATH`. Else the shell's line: `NAME: command not found`.
pub fn find_program(program: &std::ffi::OsStr) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let name = program.to_string_lossy();
    let runnable = |path: &std::path::Path| {
        std::fs::metadata(path).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.as_bytes().contains(&b'/') {
        return match runnable(std::path::Path::new(program)) {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!("{name}: not an executable file")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(format!("{name}: no such file or directory"))
            }
            Err(e) => Err(format!("{name}: {e}")),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = !program.is_empty()
        && std::env::split_paths(&path).any(|dir| {
            let dir = if dir.as_os_str().is_empty() {
                std::path::PathBuf::from(".")
            } else {
                dir
            };
            runnable(&dir.join(program)).unwrap_or(false)
        });
    if found {
        Ok(())
    } else {
        Err(format!("{name}: command not found"))
    }
}

/// Starts CMD in the run's namespace, with `LATLAB_HOST`, `LATLAB_ADDR` and `LATLAB_LINK`
/// (the link each way, which a `latlab gen` behind it records).
fn spawn(
    wiring: &RunWiring,
    subnet: Subnet,
    link: &str,
    program: &OsString,
    args: &[OsString],
) -> std::io::Result<std::process::Child> {
    let mut command = std::process::Command::new(program);
    command
        .args(args)
        .env("LATLAB_HOST", subnet.host().to_string())
        .env("LATLAB_ADDR", subnet.app().to_string())
        .env(latlab_lab::measure::LINK_ENV, link);
    latlab_io::netns::spawn_in(wiring.app.name(), &mut command, Some(SIGKILL))
}

const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;

/// How long CMD has to end after a SIGTERM or SIGHUP passed on to it, before it gets SIGKILL.
pub const GRACE: Duration = Duration::from_secs(10);

/// Waits for CMD to end; passes a stopping signal that did not reach it on to it once; if the emulator ends first
/// (an interface vanished), asks CMD to end too. The emulator's notes go to `notes` meanwhile.
/// CMD's exit code.
fn wait<T>(
    mut child: std::process::Child,
    signal: &dyn Fn() -> Option<Received>,
    emu: &std::thread::ScopedJoinHandle<'_, T>,
    notes: &mut dyn FnMut(&str),
    emu_notes: &mpsc::Receiver<String>,
) -> std::io::Result<i32> {
    use std::os::unix::process::ExitStatusExt;
    let mut passed_on = None;
    let mut emu_gone = false;
    loop {
        for line in emu_notes.try_iter() {
            notes(&line);
        }
        if let Some(status) = child.try_wait()? {
            return Ok(status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)));
        }
        match passed_on {
            None => {
                if let Some(sig) = signal().filter(|s| !s.reached_cmd) {
                    let _ = latlab_io::signal::send(child.id(), sig.number);
                    passed_on = Some(std::time::Instant::now());
                }
            }
            // CMD did not end within GRACE of the signal: it is ended, as `docker stop` does.
            Some(at) if at.elapsed() > GRACE => {
                let _ = latlab_io::signal::send(child.id(), SIGKILL);
                passed_on = Some(std::time::Instant::now() + Duration::from_secs(3600));
            }
            Some(_) => {}
        }
        if !emu_gone && emu.is_finished() {
            let _ = latlab_io::signal::send(child.id(), SIGTERM);
            emu_gone = true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The links of a run in the user's words: up (from CMD) and down (towards it).
fn describe_links(emu: &EmuOptions) -> String {
    let spec = |flows: &latlab_link::Flows| {
        let text = crate::api::spec_text(&flows.default);
        let text = if text.is_empty() {
            "no impairment".to_string()
        } else {
            text
        };
        match flows.rules.len() {
            0 => text,
            n => format!("{text} (+{n} flow rule{})", if n == 1 { "" } else { "s" }),
        }
    };
    format!("up: {}; down: {}", spec(&emu.a_to_b), spec(&emu.b_to_a))
}

/// The line a run ends with (`name`: `latlab run` or `latlab shell`): per direction, what came
/// in, went out, was dropped and was still queued in the link when CMD ended (which add up: in
/// plus the link's copies = out + dropped + queued), and how late the emulator released frames.
pub fn summary_line(name: &str, report: &EmuReport) -> String {
    use latlab_stats::Summary;
    let r = &report.report;
    let direction = |name: &str, d: &latlab_engine::emulator::DirectionReport| {
        let l = &d.link;
        let dropped = l.dropped()
            + l.aqm_drop
            + l.aqm_overflow
            + d.tx_ring_full
            + d.tx_too_long
            + d.tx_too_short
            + d.queue_slots_full;
        let copies = match l.duplicated {
            0 => String::new(),
            n => format!(" (+{n} copies)"),
        };
        let p50 = Summary::from_histogram(&d.release_error)
            .percentile("p50")
            .and_then(|p| p.estimate.value_ns())
            .map_or("-".to_string(), |v| latlab_lab::units::format_us(v as f64));
        format!(
            "{name} {} frames in{copies}, {} out, {dropped} dropped, {} still queued at exit \
             (release error p50 {p50})",
            d.arrived, d.sent, d.queued_at_exit
        )
    };
    format!(
        "{name}: {}; {}",
        direction("up", &r.a_to_b),
        direction("down", &r.b_to_a)
    )
}
