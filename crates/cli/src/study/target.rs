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
    if a.link.is_some() && std::env::var_os("LATLAB_HOST").is_none() {
        return Err(usage(
            "--link: the study cannot put an emulated link in front of a server it did not start; \
             run it behind one (latlab run --delay 10ms [--nat] -- latlab study game-server \
             --target ... --link \"delay=10ms\") and --link names that link"
                .into(),
        ));
    }
    let addr = latlab_lab::command::resolve("--target", a.target.as_deref().unwrap_or(""))?;
    let protocol_name = a.protocol.name().to_string();
    let flags = a.protocol.given_text();
    let protocol = latlab_lab::protocols::build(&a.protocol.args()?)?;
    let loads = parse_loads(&a.loads)?;
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
