//! One generator run from options to a [`RunSummary`]: sockets, a check that something answers,
//! the run itself on the right cores.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use latlab_engine::generator::{self, GeneratorConfig, GeneratorResult, Progress, Threads};
use latlab_engine::{PollMode, PollSwitch, Stop};
use latlab_io::udp::{UdpOptions, UdpSocket};
use latlab_io::udpmib::UdpMib;
use latlab_probe::model::TrafficModel;
use latlab_probe::protocol::SharedProtocol;
use latlab_probe::{Pattern, ProbeConfig, Traffic};
use latlab_wire::probe;

use crate::losses::SenderWatch;
use crate::results::{RunSetup, RunSummary};
use crate::units::ProbeRate;

pub use crate::error::MeasureError;
mod af_xdp;
pub use af_xdp::{open_xdp, run_xdp, XdpEndpoint};

fn io_err(context: &str) -> impl FnOnce(io::Error) -> MeasureError + '_ {
    move |source| MeasureError::Io {
        context: context.to_string(),
        source,
    }
}

/// How many threads the generator uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ThreadChoice {
    /// Split send and receive over two pinned cores when three or more are free, one loop
    /// otherwise.
    #[default]
    Auto,
    /// One loop.
    One,
    /// A send thread and a receive thread.
    Two,
}

impl ThreadChoice {
    /// Every choice, in the order the command line lists them (its `--threads` values).
    pub const ALL: [ThreadChoice; 3] = [ThreadChoice::Auto, ThreadChoice::One, ThreadChoice::Two];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ThreadChoice::Auto => "auto",
            ThreadChoice::One => "1",
            ThreadChoice::Two => "2",
        }
    }
}

impl std::str::FromStr for ThreadChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ThreadChoice::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| {
                format!(
                    "{s:?} is not {}",
                    or_list(&ThreadChoice::ALL.map(ThreadChoice::name))
                )
            })
    }
}

/// `a`, `a or b`, `a, b or c`: the names of a flag's values in an error.
fn or_list(names: &[&str]) -> String {
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// Everything `latlab gen` takes.
#[derive(Clone, Debug)]
pub struct GenOptions {
    /// Where probes go.
    pub target: SocketAddr,
    /// Local address to send from.
    pub bind: IpAddr,
    /// Offered load over all flows (checked where it was made: at most one probe per
    /// nanosecond).
    pub rate: ProbeRate,
    /// Sending time, warm-up included.
    pub duration: Duration,
    /// Responses to probes of the first `warmup` are kept out of the result.
    pub warmup: Duration,
    /// UDP payload bytes.
    pub payload_len: usize,
    /// Send pattern.
    pub pattern: Pattern,
    /// Flows (one socket, so one source port, each).
    pub flows: u32,
    /// Seed of the Poisson schedule and the run id.
    pub seed: u64,
    /// Busy or blocking receive.
    pub poll: PollMode,
    /// When set, the loop reads its mode from this switch every turn instead of `poll` (a
    /// loop of the core plan that gives its CPU to an emulator; [`crate::cores`]).
    pub switch: Option<PollSwitch>,
    /// Datagrams per batch call.
    pub batch: usize,
    /// How long to wait for responses after the last probe.
    pub grace: Duration,
    /// Threads.
    pub threads: ThreadChoice,
    /// `SO_RCVBUF` of the flow sockets.
    pub rcvbuf: Option<usize>,
    /// Check that the target answers before the run.
    pub check: bool,
    /// Whether the generator and the responder read one clock (one-way delays are reported
    /// only then).
    pub clock: ClockChoice,
    /// The clock the responder said it stamps with, in its answer to the check
    /// ([`check_target`]); `None` before the check, without it, or when the responder named
    /// none. [`ClockChoice::Auto`] takes the clock as shared when it is this host's.
    pub responder_clock: Option<u64>,
    /// Send the sizes and gaps of this model instead of `pattern` at `rate` with
    /// `payload_len` bytes (`latlab gen --model`).
    pub model: Option<TrafficModel>,
    /// Replay this stream of a capture instead (`latlab gen --trace`).
    pub trace: Option<crate::trace::TraceReplay>,
    /// Speak this protocol to a server latlab did not write (`latlab gen --protocol`);
    /// `None`: latlab's own probes, for `latlab echo` or any echo server.
    pub protocol: Option<SharedProtocol>,
    /// Give progress what a live view draws (`gen --ui`; [`GeneratorConfig::live`]).
    pub live: bool,
}

/// Whether the generator's and the responder's stamps come from one clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockChoice {
    /// Shared when the lab made the topology on this host (namespaces share
    /// `CLOCK_REALTIME`), when the target is an address of this host, or when the responder
    /// names this host's clock ([`latlab_io::clock::clock_identity`]) in its answer to the
    /// check: a reflector in another namespace or container of this host; separate
    /// otherwise (another host, or a responder that names no clock).
    Auto,
    /// The user says one clock serves both (one host, or clocks kept together by PTP).
    Shared,
    /// Separate clocks: no one-way figure.
    Separate,
}

impl ClockChoice {
    /// Every choice, in the order the command line lists them (its `--clock` values).
    pub const ALL: [ClockChoice; 3] = [
        ClockChoice::Auto,
        ClockChoice::Shared,
        ClockChoice::Separate,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ClockChoice::Auto => "auto",
            ClockChoice::Shared => "shared",
            ClockChoice::Separate => "separate",
        }
    }

    /// `auto`, `shared` or `separate`.
    pub fn parse(text: &str) -> Result<ClockChoice, String> {
        ClockChoice::ALL
            .into_iter()
            .find(|c| c.name() == text)
            .ok_or_else(|| {
                let names = ClockChoice::ALL.map(ClockChoice::name);
                format!("{text:?} is not a clock: {}", or_list(&names))
            })
    }

    /// Whether the clocks are shared on a run of `topology` (as [`RunSetup::topology`] names
    /// it) towards `target`, whose responder named `responder_clock` (`None`: named none, or
    /// not asked).
    ///
    /// [`RunSetup::topology`]: crate::results::RunSetup::topology
    pub fn is_shared(
        self,
        topology: &str,
        target: SocketAddr,
        responder_clock: Option<u64>,
    ) -> bool {
        self.is_shared_with(
            topology,
            target,
            responder_clock,
            latlab_io::clock::clock_identity(),
        )
    }

    /// [`ClockChoice::is_shared`] on a host whose own clock is `own` (`None`: unnamed, so
    /// never the responder's).
    pub fn is_shared_with(
        self,
        topology: &str,
        target: SocketAddr,
        responder_clock: Option<u64>,
        own: Option<u64>,
    ) -> bool {
        match self {
            ClockChoice::Shared => true,
            ClockChoice::Separate => false,
            ClockChoice::Auto => {
                topology != "remote"
                    || is_local_address(target.ip())
                    || (responder_clock.is_some() && responder_clock == own)
            }
        }
    }
}

/// Whether `ip` is an address of this host (of this network namespace): a loopback address,
/// or one a socket can bind to.
fn is_local_address(ip: IpAddr) -> bool {
    ip.is_loopback() || std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

impl GenOptions {
    /// Options with latlab's defaults for everything but the target.
    pub fn new(target: SocketAddr) -> GenOptions {
        GenOptions {
            target,
            bind: if target.is_ipv4() {
                IpAddr::from([0, 0, 0, 0])
            } else {
                IpAddr::from([0u16; 8])
            },
            // Within the bounds: one probe a millisecond.
            rate: ProbeRate::try_from(1000.0).expect("1000 pps is a probe rate"),
            duration: Duration::from_secs(5),
            warmup: Duration::from_millis(100),
            payload_len: 64,
            pattern: Pattern::Constant,
            flows: 1,
            seed: 1,
            poll: PollMode::Busy,
            switch: None,
            batch: 32,
            grace: Duration::from_millis(500),
            threads: ThreadChoice::Auto,
            rcvbuf: None,
            check: true,
            clock: ClockChoice::Auto,
            responder_clock: None,
            model: None,
            trace: None,
            protocol: None,
            live: false,
        }
    }

    /// Whether `--clock auto` takes the clock as shared on the responder's word alone: the
    /// target is no address of this host, and the responder named this host's clock.
    pub fn clock_named_by_responder(&self) -> bool {
        self.clock == ClockChoice::Auto
            && self.responder_clock.is_some()
            && self.responder_clock == latlab_io::clock::clock_identity()
            && !is_local_address(self.target.ip())
    }

    /// The traffic the probes follow instead of a rate, if any.
    pub fn traffic(&self) -> Option<Traffic> {
        match (&self.model, &self.trace) {
            (Some(model), _) => Some(Traffic::Model(model.clone())),
            (None, Some(trace)) => Some(Traffic::Trace(trace.messages.clone())),
            (None, None) => None,
        }
    }

    /// What `traffic` is called in the results: the model's text form or the trace's name.
    pub fn traffic_name(&self) -> Option<String> {
        match (&self.model, &self.trace) {
            (Some(model), _) => Some(model.to_string()),
            (None, Some(trace)) => Some(trace.name.clone()),
            (None, None) => None,
        }
    }

    /// The rate asked for: `rate`, or the traffic's average rate.
    pub fn offered_pps(&self) -> f64 {
        self.traffic().map_or(self.rate.pps(), |t| t.rate_pps())
    }

    /// The largest datagram: `payload_len`, or the traffic's largest message (at least the
    /// probe header).
    pub fn max_payload_len(&self) -> usize {
        let traffic = self.traffic().map(|t| t.max_size());
        match (&self.protocol, traffic) {
            // A protocol writes its own requests: the buffers take the longest of them (and
            // the probe header the sender writes first).
            (Some(p), t) => p
                .max_request_len()
                .max(t.unwrap_or(0))
                .max(probe::HEADER_LEN),
            (None, Some(t)) => t.max(probe::HEADER_LEN),
            (None, None) => self.payload_len,
        }
    }

    /// The probe configuration these options describe (start time set at run time), checked:
    /// an error carries the flag of the option that set the value at fault. (`rate` is
    /// within its bounds already; a model's or a trace's rate, a size or no flows may not
    /// be.)
    pub fn checked_probe_config(&self) -> Result<ProbeConfig, MeasureError> {
        let probe = self.probe_config();
        probe.validate().map_err(|source| MeasureError::Config {
            flag: GenOptions::flag_of(&source),
            source,
        })?;
        Ok(probe)
    }

    /// The flag of the option that sets the probe configuration value `error` is about.
    fn flag_of(error: &latlab_probe::Error) -> &'static str {
        use latlab_probe::Error;
        match error {
            Error::BadRate(_) | Error::RateTooHigh(_) => "--rate",
            Error::SizeTooSmall { .. } | Error::SizeTooLarge { .. } => "--size",
            Error::NoFlows => "--flows",
            Error::EmptyTrace | Error::TrafficTooLarge { .. } => "--model",
        }
    }

    /// The probe configuration these options describe (start time set at run time), not
    /// checked ([`GenOptions::checked_probe_config`] checks it).
    pub fn probe_config(&self) -> ProbeConfig {
        ProbeConfig {
            run_id: run_id(self.seed),
            flows: self.flows,
            payload_len: self.max_payload_len(),
            pattern: self.pattern,
            rate_pps: self.offered_pps(),
            start_ns: 0,
            duration_ns: self.duration.as_nanos() as u64,
            warmup_ns: self.warmup.as_nanos() as u64,
            seed: self.seed,
            traffic: self.traffic(),
        }
    }
}

/// A run id that differs between runs even with the same seed.
fn run_id(seed: u64) -> u32 {
    let t = latlab_io::clock::now_ns();
    let x = (t ^ seed.rotate_left(17) ^ u64::from(std::process::id()) << 32)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 32) as u32
}

/// Opens the flow sockets (kernel receive timestamps on) plus one socket for the check, all
/// bound to `bind` on free ports. Call it inside the namespace the generator lives in.
pub fn open_sockets(
    bind: IpAddr,
    flows: u32,
    rcvbuf: Option<usize>,
) -> io::Result<(Vec<UdpSocket>, UdpSocket)> {
    let opts = UdpOptions {
        rcvbuf,
        rx_timestamps: true,
        ..UdpOptions::default()
    };
    let addr = SocketAddr::new(bind, 0);
    let flows = (0..flows.max(1))
        .map(|_| UdpSocket::bind(addr, &opts))
        .collect::<io::Result<Vec<_>>>()?;
    let check = UdpSocket::bind(addr, &UdpOptions::default())?;
    Ok((flows, check))
}

/// Sends a few probes of a throw-away run on `socket` and waits up to `timeout` for one to
/// come back, so a run against nothing fails at once with the reason instead of reporting
/// 100% loss. The probes ask which clock the responder stamps with (a 64-byte header); the
/// answer's `responder_clock` is returned (`None`: the responder named none, as one that
/// predates the field or does not stamp).
pub fn check_target(
    socket: &UdpSocket,
    target: SocketAddr,
    timeout: Duration,
) -> Result<Option<u64>, MeasureError> {
    let unreachable = |reason: String| MeasureError::Unreachable { target, reason };
    socket
        .connect(target)
        .map_err(|e| unreachable(e.to_string()))?;
    let run_id = run_id(0x636865636b);
    let mut buf = [0u8; probe::CLOCK_HEADER_LEN];
    let deadline = latlab_io::clock::now_ns() + timeout.as_nanos() as u64;
    let mut seq = 0u64;
    loop {
        let now = latlab_io::clock::now_ns();
        if now >= deadline {
            return Err(unreachable(format!(
                "no response to {seq} check probes within {}: is a probe responder \
                 (latlab echo) running there? (--no-check skips this check)",
                crate::units::format_duration(timeout)
            )));
        }
        probe::Repr {
            run_id,
            flow: 0,
            seq,
            intended_send_ns: now,
            actual_send_ns: now,
            responder: None,
            responder_clock: probe::ResponderClock::Asked,
        }
        .emit(&mut probe::Packet::new_unchecked(&mut buf[..]));
        seq += 1;
        if let Err(e) = socket.send_one(&buf, None) {
            return Err(unreachable(refusal(&e)));
        }
        let wait = Duration::from_nanos((deadline - now).min(100_000_000));
        match socket.wait_readable(Some(wait)) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => return Err(unreachable(e.to_string())),
        }
        let mut rx = [0u8; 2048];
        loop {
            match socket.recv_one(&mut rx) {
                Ok(n) => {
                    if let Some(clock) = answer_to_check(&rx[..n], run_id) {
                        return Ok(clock);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(unreachable(refusal(&e))),
            }
        }
    }
}

/// `Some` when `bytes` answer a check probe of `run_id`: with the clock the responder named
/// in it, if it named one.
fn answer_to_check(bytes: &[u8], run_id: u32) -> Option<Option<u64>> {
    let packet = probe::Packet::new_checked(bytes).ok()?;
    let repr = probe::Repr::parse(&packet).ok()?;
    (repr.run_id == run_id).then_some(match repr.responder_clock {
        probe::ResponderClock::Named(clock) => Some(clock),
        probe::ResponderClock::NotAsked | probe::ResponderClock::Asked => None,
    })
}

fn refusal(e: &io::Error) -> String {
    if e.kind() == io::ErrorKind::ConnectionRefused {
        "port unreachable: nothing listens there (start `latlab echo` on it first)".into()
    } else {
        e.to_string()
    }
}

/// Picks the generator's cores: split over the last two free CPUs when three or more are free
/// (or when asked), else one loop on the last CPU; `avoid` is a CPU another engine of this
/// process holds.
pub fn pick_threads(choice: ThreadChoice, avoid: Option<usize>) -> Threads {
    let cpus: Vec<usize> = latlab_io::cpu::allowed_cpus()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| Some(*c) != avoid)
        .collect();
    let split = match choice {
        ThreadChoice::Auto => cpus.len() >= 3,
        ThreadChoice::One => false,
        ThreadChoice::Two => cpus.len() >= 2,
    };
    match cpus.as_slice() {
        [.., a, b] if split => Threads::Split {
            tx_cpu: *a,
            rx_cpu: *b,
        },
        [.., last] if cpus.len() >= 2 || avoid.is_some() => Threads::OneLoop { cpu: Some(*last) },
        _ => Threads::OneLoop { cpu: None },
    }
}

/// Runs the generator on `sockets` and summarizes the run, its lost probes placed by the
/// sockets' own counters ([`run_counted`] without a namespace's).
pub fn run(
    options: &GenOptions,
    sockets: &[UdpSocket],
    threads: Threads,
    setup: RunSetup,
    stop: &Stop,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<(RunSummary, GeneratorResult), MeasureError> {
    run_counted(options, sockets, None, threads, setup, stop, progress)
}

/// [`run`], its lost probes placed also by the UDP MIB of the generator's namespace, `mib`
/// (opened in it; [`UdpMib::open`]), read before and after the run. A target that is an
/// address of this namespace shares it with the reflector.
pub fn run_counted(
    options: &GenOptions,
    sockets: &[UdpSocket],
    mib: Option<&UdpMib>,
    threads: Threads,
    setup: RunSetup,
    stop: &Stop,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<(RunSummary, GeneratorResult), MeasureError> {
    let shared = mib.is_some() && is_local_address(options.target.ip());
    let watch = SenderWatch::start(sockets, mib, shared);
    let locals: Vec<SocketAddr> = sockets.iter().filter_map(|s| s.local_addr().ok()).collect();
    let (mut summary, result) = summarized(options, &locals, threads, setup, |config| {
        generator::run(sockets, config, stop, progress)
    })?;
    summary.lost_by_cause = Some(watch.finish(sockets, &result));
    Ok((summary, result))
}

/// Checks the probe configuration of `options` (the one place a generator run's is), runs
/// `generate` with the generator configuration they make, and summarizes its result.
fn summarized(
    options: &GenOptions,
    locals: &[SocketAddr],
    threads: Threads,
    setup: RunSetup,
    generate: impl FnOnce(&GeneratorConfig) -> io::Result<GeneratorResult>,
) -> Result<(RunSummary, GeneratorResult), MeasureError> {
    let probe = options.checked_probe_config()?;
    let config = GeneratorConfig {
        probe,
        target: options.target,
        batch: options.batch,
        poll: options.poll,
        switch: options.switch.clone(),
        grace_ns: options.grace.as_nanos() as u64,
        interval_ns: 1_000_000_000,
        threads,
        protocol: options.protocol.clone(),
        locals: locals.to_vec(),
        live: options.live,
    };
    let result = generate(&config).map_err(io_err("generator"))?;
    let shared = options
        .clock
        .is_shared(&setup.topology, options.target, options.responder_clock);
    let mut summary =
        RunSummary::new(setup, options.offered_pps(), &result).with_clock(shared, &result);
    summary.run_id = Some(config.probe.run_id);
    Ok((summary, result))
}

/// The variable `latlab run` tells the program behind its link the link in (its settings each
/// way); a generator run behind it records the link in its setup.
pub const LINK_ENV: &str = "LATLAB_LINK";

/// The [`RunSetup`] of a generator run.
pub fn setup(options: &GenOptions, label: String, topology: &str, threads: Threads) -> RunSetup {
    RunSetup {
        label,
        target: options.target.to_string(),
        topology: topology.to_string(),
        pattern: match (&options.model, &options.trace) {
            (Some(_), _) => "model".to_string(),
            (None, Some(_)) => "trace".to_string(),
            (None, None) => options.pattern.name().to_string(),
        },
        payload_bytes: options.max_payload_len(),
        flows: options.flows,
        duration_s: options.duration.as_secs_f64(),
        warmup_s: options.warmup.as_secs_f64(),
        poll: options.poll.name().to_string(),
        threads: match threads {
            Threads::OneLoop { .. } => "one-loop".into(),
            Threads::Split { .. } => "split".into(),
        },
        dir: None,
        traffic: options.traffic_name(),
        link: std::env::var(LINK_ENV).ok().filter(|l| !l.is_empty()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_configuration_errors_name_the_option_not_the_field() {
        let target = SocketAddr::from(([127, 0, 0, 1], 9));
        let error = |options: GenOptions| options.checked_probe_config().unwrap_err().to_string();
        let mut small = GenOptions::new(target);
        small.payload_len = 10;
        assert_eq!(
            error(small),
            "--size must be at least 56 bytes (the probe header), not 10"
        );
        // A rate of 0 is no ProbeRate: refused where it is made (units::tests).
        let mut none = GenOptions::new(target);
        none.flows = 0;
        assert_eq!(error(none), "--flows must be at least 1");
    }

    /// An address of no host here (TEST-NET-1): never local, never sent to.
    fn elsewhere() -> SocketAddr {
        SocketAddr::from(([192, 0, 2, 1], 7))
    }

    /// A responder on loopback that answers one check probe with `answer` applied to it.
    fn responder(answer: impl FnOnce(&mut [u8]) + Send + 'static) -> SocketAddr {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = socket.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            let (n, from) = socket.recv_from(&mut buf).unwrap();
            answer(&mut buf[..n]);
            socket.send_to(&buf[..n], from).unwrap();
        });
        addr
    }

    fn checked(target: SocketAddr) -> Option<u64> {
        let socket =
            UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpOptions::default()).unwrap();
        check_target(&socket, target, Duration::from_secs(5)).unwrap()
    }

    #[test]
    fn a_reflector_that_names_another_clock_gets_round_trips_only() {
        let own = latlab_io::clock::clock_identity().expect("this kernel has a boot id");
        let forged = own ^ 0xdead_beef;
        // Forged bytes: the answer names a clock that is not this host's.
        let target = responder(move |bytes| {
            let mut p = probe::Packet::new_checked(bytes).unwrap();
            assert!(p.has_clock_field(), "the check asks which clock");
            p.set_responder_stamps(1, 2);
            assert!(p.set_responder_clock(forged));
        });
        let named = checked(target);
        assert_eq!(named, Some(forged));
        let auto = ClockChoice::Auto;
        assert!(!auto.is_shared("remote", elsewhere(), named));
        // The same answer naming this host's clock: shared, across namespaces.
        assert!(auto.is_shared("remote", elsewhere(), Some(own)));
        assert!(!auto.is_shared_with("remote", elsewhere(), Some(own), None));
        // The user's word goes before the responder's.
        assert!(!ClockChoice::Separate.is_shared("remote", elsewhere(), Some(own)));
        assert!(ClockChoice::Shared.is_shared("remote", elsewhere(), named));
        let mut options = GenOptions::new(elsewhere());
        options.responder_clock = Some(own);
        assert!(options.clock_named_by_responder());
        options.responder_clock = named;
        assert!(!options.clock_named_by_responder());
    }

    #[test]
    fn a_reflector_that_predates_the_clock_gets_round_trips_only() {
        // It stamps and leaves bytes 56..64 and flag bit 1 as they came.
        let target = responder(|bytes| {
            probe::Packet::new_checked(bytes)
                .unwrap()
                .set_responder_stamps(1, 2);
        });
        let named = checked(target);
        assert_eq!(named, None);
        assert!(!ClockChoice::Auto.is_shared("remote", elsewhere(), named));
        // A target on this host is shared whatever its responder says.
        assert!(ClockChoice::Auto.is_shared("remote", target, named));
        // So is a lab this host built.
        assert!(ClockChoice::Auto.is_shared("veth-namespaces", elsewhere(), named));
    }

    #[test]
    fn only_an_answer_to_this_check_counts() {
        let mut bytes = [0u8; probe::CLOCK_HEADER_LEN];
        let repr = probe::Repr {
            run_id: 5,
            responder_clock: probe::ResponderClock::Named(9),
            ..probe::Repr::default()
        };
        repr.emit(&mut probe::Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(answer_to_check(&bytes, 5), Some(Some(9)));
        assert_eq!(answer_to_check(&bytes, 6), None);
        assert_eq!(answer_to_check(&bytes[..60], 5), None);
        assert_eq!(answer_to_check(b"not a probe", 5), None);
    }
}
