//! `latlab gen`: one generator run against a remote responder, from checked options to a
//! report whose `--json`, `--hlog` and `--out` files are written before it is returned.

use std::path::PathBuf;
use std::time::Duration;

use latlab_engine::generator::Threads;
use latlab_engine::Stop;

use crate::command::{check_writable, CommandError, Io};
use crate::cores::{PollChoice, Role, Seat};
use crate::gate::{Assertion, Results};
use crate::measure::{self, ClockChoice, GenOptions, ThreadChoice};
use crate::progress::View;
use crate::results::{self, ResultsDir, RunSummary};
use crate::units::format_rate;

/// Everything `latlab gen` takes: the measurement, the sockets and the files to write.
#[derive(Clone, Debug)]
pub struct GenCommand {
    /// The measurement.
    pub options: GenOptions,
    /// The sockets: [`Io::Socket`] (kernel UDP sockets, one per flow) or [`Io::Xdp`] (AF_XDP
    /// on `iface`, the interface towards the target; IPv4, one source port).
    pub io: Io,
    /// The AF_XDP interface; `Some` exactly when `io` is [`Io::Xdp`].
    pub iface: Option<String>,
    /// AF_XDP UMEM frames, a power of two from 64 to 1048576.
    pub xdp_frames: u32,
    /// How the loop waits: [`PollChoice::Auto`] (the core plan, [`crate::cores`]) decides
    /// `options.poll` and the loop's CPU; an explicit choice is `options.poll` as given.
    pub poll: PollChoice,
    /// Pin the loop to this CPU (`--cpu`), as [`Seat::take`] takes it.
    pub cpu: Option<usize>,
    /// Write the summary to this JSON file.
    pub json: Option<PathBuf>,
    /// Write the per-second latency histograms to this interval log.
    pub hlog: Option<PathBuf>,
    /// Write a whole results folder here.
    pub out: Option<PathBuf>,
    /// Gates decided on the run ([`crate::gate`]): into `summary.json` and the report.
    pub assertions: Vec<Assertion>,
    /// Write the gates' verdicts as JUnit XML to this file.
    pub junit: Option<PathBuf>,
}

impl GenCommand {
    /// A run towards `options.target` over kernel sockets that writes no files.
    pub fn new(options: GenOptions) -> GenCommand {
        GenCommand {
            options,
            io: Io::Socket,
            iface: None,
            xdp_frames: 4096,
            poll: PollChoice::Auto,
            cpu: None,
            json: None,
            hlog: None,
            out: None,
            assertions: Vec::new(),
            junit: None,
        }
    }

    /// Checks what can be checked before anything runs: the target's port, the probe size,
    /// the warm-up against the duration, the gates (a one-way delay needs a shared clock:
    /// [`CommandError::Usage`]; with `--clock auto` and the check, a target elsewhere is
    /// decided by the responder's answer, [`GenCommand::check_clock`]), and that the output
    /// files can be written (the rate is a [`crate::units::ProbeRate`], within its bounds
    /// since it was made).
    pub fn check(&self) -> Result<(), CommandError> {
        let o = &self.options;
        let bad = |text: String| Err(CommandError::Options(text));
        if o.target.port() == 0 {
            return bad(format!("--target {}: port 0 cannot be sent to", o.target));
        }
        let min = latlab_wire::probe::HEADER_LEN;
        if o.payload_len < min || o.payload_len > latlab_probe::MAX_PAYLOAD {
            return bad(format!(
                "--size must be between {min} (the probe header) and {} bytes, not {}",
                latlab_probe::MAX_PAYLOAD,
                o.payload_len
            ));
        }
        if o.warmup >= o.duration {
            return bad(format!(
                "--warmup ({:?}) must be shorter than --duration ({:?})",
                o.warmup, o.duration
            ));
        }
        if self.poll == PollChoice::Auto && o.threads == ThreadChoice::Two {
            return bad(
                "--threads 2 needs --poll busy or block: the core plan (--poll auto) \
                        gives a generator one CPU"
                    .into(),
            );
        }
        if let (Some(cpu), ThreadChoice::Two) = (self.cpu, o.threads) {
            return bad(format!(
                "--cpu {cpu} pins the one loop: --threads 2 places its two threads itself"
            ));
        }
        let answer_to_come = o.clock == ClockChoice::Auto && o.check;
        self.check_gates(o, answer_to_come)?;
        for p in [&self.json, &self.hlog, &self.junit].into_iter().flatten() {
            check_writable(p)?;
        }
        match (self.io, &self.iface) {
            (Io::Socket, _) | (Io::Xdp, Some(_)) => Ok(()),
            (Io::Xdp, None) => bad(
                "--io xdp needs --iface: the interface towards the target that AF_XDP serves"
                    .into(),
            ),
            (other, _) => bad(format!("--io {other}: gen runs on --io socket or xdp")),
        }?;
        match (&o.protocol, self.io) {
            (Some(p), Io::Xdp) => Err(CommandError::Usage(format!(
                "--protocol {} runs on --io socket: AF_XDP carries latlab's probes only",
                p.name()
            ))),
            _ => Ok(()),
        }
    }
}

impl GenCommand {
    /// Refuses a one-way gate once the clock is known not to be shared, after the check has
    /// asked the responder which clock it stamps with ([`measure::check_target`], its answer
    /// in `options.responder_clock`): still before the run, with the reason in one line.
    pub fn check_clock(&self, options: &GenOptions) -> Result<(), CommandError> {
        self.check_gates(options, false)
    }

    /// Refuses a gate a generator run cannot answer; a one-way delay when the clock is not
    /// shared, unless `undecided` (the responder's answer is still to come).
    fn check_gates(&self, o: &GenOptions, undecided: bool) -> Result<(), CommandError> {
        let shared = o.clock.is_shared("remote", o.target, o.responder_clock);
        for a in &self.assertions {
            let usage = |e: crate::gate::AssertionError, why: &str| {
                CommandError::Usage(format!("{e}{why}"))
            };
            a.check_for(Results::Run, true).map_err(|e| usage(e, ""))?;
            if shared || undecided {
                continue;
            }
            let why = match (o.clock, o.check, o.responder_clock) {
                (ClockChoice::Auto, false, _) => {
                    "; --no-check skips asking the reflector which clock it stamps with".into()
                }
                (ClockChoice::Auto, true, None) => format!(
                    "; the reflector at {} named no clock (another responder, or a latlab echo \
                     older than that question)",
                    o.target
                ),
                (ClockChoice::Auto, true, Some(_)) => format!(
                    "; the reflector at {} stamps with another host's clock",
                    o.target
                ),
                _ => String::new(),
            };
            a.check_for(Results::Run, false)
                .map_err(|e| usage(e, &why))?;
        }
        Ok(())
    }
}

/// What a generator run measured; every file asked for is already written.
#[derive(Debug)]
pub struct GenReport {
    /// The run's summary.
    pub summary: RunSummary,
    /// Where its loop ran and why (the core plan).
    pub placement: crate::cores::Placement,
    /// The results folder, when one was asked for.
    pub out: Option<PathBuf>,
    /// Every measured answer's latency (what `summary.json`'s `latency_ns` summarizes).
    pub latency: latlab_stats::LatencyHistogram,
}

impl GenReport {
    /// The table printed at the end of a run, and the line of its lost probes by cause.
    pub fn text(&self) -> String {
        summary_text(&self.summary)
    }
}

/// The table of `summary` and the line of its lost probes by cause, when counted.
fn summary_text(summary: &RunSummary) -> String {
    let mut text = crate::table::render(&[summary]);
    if let Some(link) = &summary.setup.link {
        text.push_str(&format!("link: {link}\n"));
    }
    if let Some(lost) = &summary.lost_by_cause {
        text.push_str(&format!("{}\n", lost.text()));
    }
    if let Some(stalls) = &summary.host_stalls {
        text.push_str(&format!("{}\n", stalls.line()));
    }
    if let Some(protocol) = &summary.protocol {
        text.push_str(&format!("{}\n", protocol.text()));
    }
    text
}

/// Checks `command`, opens the sockets, checks that the target answers, runs the generator
/// (its progress to `sink`, notes to `log`) and writes the files asked for.
pub fn run(
    command: &GenCommand,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<GenReport, CommandError> {
    command.check()?;
    // Fail before the run, not after it, when an output cannot be written.
    let dir = command.out.as_deref().map(ResultsDir::create).transpose()?;
    let mut raised = command.options.clone();
    if let Some(p) = &raised.protocol {
        let flows =
            crate::protocols::flows_needed(p, raised.offered_pps(), raised.grace, raised.flows);
        if flows > raised.flows {
            view.note(&format!(
                "latlab gen: --flows {flows} (not {}): more {} requests may be in flight within \
                 --grace than one source port has IDs",
                raised.flows,
                p.name()
            ));
            raised.flows = flows;
        }
    }
    let opts = &raised;
    let target = opts.target;
    let (sockets, check) = measure::open_sockets(opts.bind, opts.flows, opts.rcvbuf)
        .map_err(CommandError::setup(format!("--bind {}", opts.bind)))?;
    let mut asked = opts.clone();
    match (&opts.protocol, opts.check) {
        (Some(protocol), true) => {
            crate::protocols::check_answers(&check, target, protocol, Duration::from_secs(1))?
        }
        (None, true) => {
            asked.responder_clock = measure::check_target(&check, target, Duration::from_secs(1))?;
            command.check_clock(&asked)?;
        }
        (_, false) => {}
    }
    let opts = &asked;
    if opts.clock_named_by_responder() {
        view.note(&format!(
            "latlab gen: the reflector at {target} stamps with this host's clock: one-way \
             delays reported"
        ));
    }
    let xdp = match (command.io, &command.iface) {
        (Io::Xdp, Some(iface)) => Some(measure::open_xdp(
            iface,
            target,
            opts.bind,
            command.xdp_frames,
        )?),
        _ => None,
    };
    let seat = Seat::take(Role::Loop, "latlab gen", command.poll, command.cpu);
    let mut opts = opts.clone();
    let threads = match command.poll {
        PollChoice::Auto => {
            opts.poll = seat.poll();
            opts.switch = Some(seat.switch().clone());
            Threads::OneLoop { cpu: None }
        }
        // `--cpu` is one loop there; else an explicit choice's one loop runs where the seat
        // put it (for `--poll busy`, a CPU nobody claimed), two threads placed as before.
        _ => match (
            command.cpu,
            measure::pick_threads(opts.threads, None),
            seat.cpu(),
        ) {
            (Some(cpu), _, _) => Threads::OneLoop { cpu: Some(cpu) },
            (None, Threads::OneLoop { .. }, Some(cpu)) => Threads::OneLoop { cpu: Some(cpu) },
            (None, threads, _) => threads,
        },
    };
    let opts = &opts;
    view.note(&format!(
        "latlab gen: {}",
        placement_of(&seat, threads).line()
    ));
    let offered = match (&opts.model, &opts.trace) {
        (Some(model), _) => format!("model {model}"),
        (None, Some(trace)) => format!("trace {}", trace.name),
        (None, None) => format_rate(opts.rate.pps()),
    };
    let label = format!(
        "{}{offered} to {target}{}",
        opts.protocol
            .as_ref()
            .map_or(String::new(), |p| format!("{} ", p.name())),
        if xdp.is_some() { " (xdp)" } else { "" }
    );
    let setup = measure::setup(opts, label.clone(), "remote", threads);
    if let Some(x) = &xdp {
        let (bind, attach) = x.socket.mode();
        view.note(&format!(
            "latlab gen: AF_XDP on {} ({} mode, {} XDP), from {} to {}",
            x.socket.ifname(),
            format!("{bind:?}").to_lowercase(),
            format!("{attach:?}").to_lowercase(),
            x.addrs.src,
            x.addrs.dst
        ));
    }
    // This process's namespace, the generator's: its UDP counters place lost probes.
    let mib = latlab_io::udpmib::UdpMib::open().ok();
    view.run_started(&label, opts.duration);
    let mut update = |p: crate::command::Progress| view.run_progress(&p);
    let outcome = seat
        .run(|| match xdp {
            Some(x) => measure::run_xdp(opts, x, threads, setup, stop, &mut update),
            None => measure::run_counted(
                opts,
                &sockets,
                mib.as_ref(),
                threads,
                setup,
                stop,
                &mut update,
            ),
        })
        .map_err(CommandError::setup(
            "placing the generator's loop".to_string(),
        ))?;
    view.run_finished();
    let (mut summary, result) = outcome?;
    if let (Some(p), Some(counts)) = (&opts.protocol, summary.protocol.as_mut()) {
        // Every flow leaves from the one bind address: a server's per-address limit sees
        // the whole rate.
        counts.limit = p.limit_note(opts.offered_pps());
    }
    let placement = placement_of(&seat, threads);
    summary.placement = Some(placement.clone());
    summary.assertions = command
        .assertions
        .iter()
        .map(|a| a.evaluate(&summary, None))
        .collect();
    if let Some(path) = &command.json {
        results::write_atomic(path, results::summary_json(&summary).as_bytes())?;
    }
    if let Some(path) = &command.junit {
        let xml = crate::gate::junit::junit_xml("latlab gen", &summary.assertions);
        results::write_atomic(path, xml.as_bytes())?;
    }
    if let Some(path) = &command.hlog {
        results::write_atomic(path, &results::hlog_bytes(&result, &summary.setup.label)?)?;
    }
    let out = match dir {
        Some(dir) => {
            results::write_run(&dir, "", &summary, &result)?;
            dir.write("summary.txt", summary_text(&summary).as_bytes())?;
            Some(dir.commit()?)
        }
        None => None,
    };
    Ok(GenReport {
        summary,
        placement,
        out,
        latency: result.report.latency,
    })
}

/// The seat's placement, with the CPU an explicit `--poll` run pins its loop to.
fn placement_of(seat: &Seat, threads: Threads) -> crate::cores::Placement {
    let mut placement = seat.placement();
    match threads {
        Threads::OneLoop { cpu: Some(cpu) } => placement.cpu = Some(cpu),
        Threads::Split { tx_cpu, rx_cpu } => {
            placement.cpu = None;
            placement.reason +=
                &format!("; send thread on CPU {tx_cpu}, receive thread on CPU {rx_cpu}");
        }
        Threads::OneLoop { cpu: None } => {}
    }
    placement
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(edit: impl FnOnce(&mut GenCommand)) -> Result<(), String> {
        let mut c = GenCommand::new(GenOptions::new("127.0.0.1:9".parse().unwrap()));
        edit(&mut c);
        c.check().map_err(|e| e.to_string())
    }

    #[test]
    fn a_run_that_cannot_succeed_is_refused_before_anything_opens() {
        assert_eq!(command(|_| {}), Ok(()));
        assert_eq!(
            command(|c| c.options.target = "127.0.0.1:0".parse().unwrap()),
            Err("--target 127.0.0.1:0: port 0 cannot be sent to".into())
        );
        assert_eq!(
            command(|c| c.options.payload_len = 10),
            Err("--size must be between 56 (the probe header) and 65507 bytes, not 10".into())
        );
        assert_eq!(
            command(|c| c.options.warmup = Duration::from_secs(5)),
            Err("--warmup (5s) must be shorter than --duration (5s)".into())
        );
        // A rate above one probe per nanosecond is no ProbeRate: refused where it is made
        // (units::tests), before a command exists.
        assert_eq!(
            command(|c| {
                c.cpu = Some(1);
                c.poll = PollChoice::Busy;
                c.options.threads = ThreadChoice::Two;
            }),
            Err("--cpu 1 pins the one loop: --threads 2 places its two threads itself".into())
        );
        assert_eq!(
            command(|c| c.hlog = Some("/no/such/folder/run.hlog".into())),
            Err("/no/such/folder/run.hlog: folder /no/such/folder does not exist".into())
        );
        assert_eq!(
            command(|c| c.junit = Some("/no/such/folder/gates.xml".into())),
            Err("/no/such/folder/gates.xml: folder /no/such/folder does not exist".into())
        );
    }

    #[test]
    fn a_one_way_gate_without_a_shared_clock_is_refused_before_the_run() {
        let gate = |text: &str, clock| {
            command(|c| {
                c.options.clock = clock;
                c.assertions = vec![text.parse().unwrap()];
            })
        };
        assert_eq!(gate("forward.p99<=1ms", ClockChoice::Shared), Ok(()));
        assert_eq!(gate("p99<=1ms", ClockChoice::Separate), Ok(()));
        let refused = gate("forward.p99<=1ms", ClockChoice::Separate).unwrap_err();
        assert!(
            refused
                .starts_with("--assert \"forward.p99<=1ms\": one-way delays need a shared clock"),
            "{refused}"
        );
    }

    #[test]
    fn with_the_auto_clock_a_one_way_gate_is_decided_by_the_reflectors_answer() {
        // A target elsewhere (TEST-NET-1): nothing here says whose clock it reads until the
        // check's answer; the gate waits for it, and is refused before the run if the answer
        // does not name this host's clock.
        let mut c = GenCommand::new(GenOptions::new("192.0.2.1:7".parse().unwrap()));
        c.assertions = vec!["forward.p99<=1ms".parse().unwrap()];
        assert_eq!(c.check().map_err(|e| e.to_string()), Ok(()));
        let after = |c: &GenCommand, named: Option<u64>| {
            let mut options = c.options.clone();
            options.responder_clock = named;
            c.check_clock(&options).map_err(|e| e.to_string())
        };
        let own = latlab_io::clock::clock_identity().expect("this kernel has a boot id");
        assert_eq!(after(&c, Some(own)), Ok(()));
        let old = after(&c, None).unwrap_err();
        assert!(
            old.starts_with("--assert \"forward.p99<=1ms\": one-way delays need a shared clock")
                && old.ends_with(
                    "; the reflector at 192.0.2.1:7 named no clock (another responder, or a \
                     latlab echo older than that question)"
                ),
            "{old}"
        );
        let other = after(&c, Some(own ^ 1)).unwrap_err();
        assert!(
            other.ends_with("; the reflector at 192.0.2.1:7 stamps with another host's clock"),
            "{other}"
        );
        // Without the check nothing asks: refused at once, saying why.
        c.options.check = false;
        let unasked = c.check().unwrap_err().to_string();
        assert!(
            unasked.ends_with("; --no-check skips asking the reflector which clock it stamps with"),
            "{unasked}"
        );
        assert!(!unasked.contains('\n'));
        // Round-trip gates never wait for a clock.
        c.assertions = vec!["p99<=1ms".parse().unwrap()];
        assert_eq!(c.check().map_err(|e| e.to_string()), Ok(()));
        assert_eq!(after(&c, None), Ok(()));
    }
}
