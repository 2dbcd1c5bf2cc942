//! `latlab study game-server --target ADDR`: flags → the game-server study's load sweep
//! against a server latlab did not start ([`latlab_study::game_server::target`]).

use anyhow::Result;
use latlab_lab::command::CommandError;
use latlab_study::Study;

use super::{finish, parse_loads, GameStudyArgs};
use crate::{progress, STOP};

/// `study game-server --target`: the load sweep against a server latlab did not start.
pub(crate) fn run(a: GameStudyArgs) -> Result<()> {
    use latlab_study::game_server::target::TargetOptions;
    use latlab_study::game_server::StudyOptions;
    let usage = |line: String| -> anyhow::Error { CommandError::Usage(line).into() };
    let what = "the server is not latlab's: only the offered load varies";
    for (flag, given) in [
        ("--clients", a.clients.is_some()),
        ("--rcvbuf", a.rcvbuf.is_some()),
        ("--io", a.io.is_some()),
        ("--work-cycles", a.work_cycles.is_some()),
        ("--no-flood", a.no_flood),
        ("--loopback", a.loopback),
        ("--model", a.model.is_some()),
        ("--trace", a.trace.is_some()),
        ("--shard", !a.folder.shard.is_whole()),
    ] {
        if given {
            return Err(usage(format!("{flag} does not go with --target: {what}")));
        }
    }
    let addr = latlab_lab::command::resolve("--target", a.target.as_deref().unwrap_or(""))?;
    let protocol_name = a.protocol.name().to_string();
    let flags = a.protocol.given_text();
    let protocol = latlab_lab::protocols::build(&a.protocol.args(64)?)?;
    let loads = parse_loads(&a.loads)?;
    if let Some(link) = &a.link {
        if std::env::var_os("LATLAB_HOST").is_none() {
            if addr.ip().is_loopback() {
                return Err(usage(format!(
                    "--link: the study runs behind the link in a namespace of its own, where \
                     {} is not this host's: give --target an address of this host, not loopback",
                    addr.ip()
                )));
            }
            return behind_link(link);
        }
    }
    let mut options = StudyOptions::new(a.folder.out("game-server"));
    options.loads = loads;
    options.duration = a.duration;
    options.resume = a.folder.resume;
    options.flood = false;
    options.namespaces = false;
    options.target = Some(TargetOptions {
        addr,
        protocol_name,
        protocol,
        link: a.link,
        flags,
    });
    let mut bar = progress::Terminal::new();
    let report = latlab_study::game_server::GameServerStudy::run(&options, &STOP, &mut bar)?;
    finish(&report, "the finished points")
}

/// Runs this very command again as `latlab run`'s CMD, behind an emulated link of `spec` in
/// each direction (`latlab run --up SPEC --down SPEC`), and ends with its exit status: the
/// study's generator then sends from `latlab run`'s namespace, whose only way out is the
/// link, and reaches the target through this host. (Under `latlab run`, `LATLAB_HOST` set,
/// the study runs as it is and `--link` names the link.)
fn behind_link(spec: &str) -> Result<()> {
    let exe = std::env::current_exe()?;
    let mut child = std::process::Command::new(&exe)
        .args(["run", "--up", spec, "--down", spec, "--"])
        .arg(&exe)
        .args(std::env::args_os().skip(1))
        .spawn()?;
    // A stopping signal sent to this process alone (not to its group, as a terminal's Ctrl-C
    // is) is passed on once to the run, which passes it to the study behind it: the study
    // writes its finished points and ends as it would have here.
    let mut passed = false;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if let (false, Some(signal)) = (passed, crate::signals::received()) {
            passed = true;
            let _ = latlab_io::signal::send(child.id(), signal.number());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    std::process::exit(status.code().unwrap_or(1))
}
