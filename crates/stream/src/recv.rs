//! `latlab stream recv`: serves `stream send` runs one after another on one address and port,
//! and hands each run's measurements back to its sender.
//!
//! Nothing from the network stops it: a connection that is not a sender's, a run that breaks
//! off, a garbage datagram, are counted (and logged), and the receiver goes on with the next.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use latlab_engine::Stop;
use latlab_io::clock::now_ns;
use serde::Serialize;

use super::control::{self, ControlReader, Results, Start, Tally, ToReceiver, ToSender};
use super::message::{HEADER_LEN, MAX_LEN};
use super::quic::Identity;
use super::send::MAX_MESSAGES;
use super::transport::{Endpoint, TransportSpec};
use super::wire::WireCounts;
use latlab_lab::command::{check_writable, CommandError};
use latlab_lab::progress::View;
use latlab_lab::results::write_atomic;

/// Everything `latlab stream recv` takes.
#[derive(Clone, Debug)]
pub struct RecvCommand {
    /// The address and port to listen on (TCP for control, UDP for the datagram transports).
    pub listen: SocketAddr,
    /// The transport it serves; a sender must ask for exactly this one.
    pub transport: TransportSpec,
    /// Rewrite this JSON file with every run served, after each run.
    pub json: Option<PathBuf>,
    /// Stop after this many runs (`None`: until stopped).
    pub runs: Option<u64>,
}

impl RecvCommand {
    /// Checks the files before anything opens.
    pub fn check(&self) -> Result<(), CommandError> {
        if let Some(p) = &self.json {
            check_writable(p)?;
        }
        Ok(())
    }
}

/// One run the receiver served, as `--json` lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunRecord {
    /// The run's id.
    pub run: u32,
    /// The sender's control connection.
    pub peer: String,
    /// `ok`, or why the run broke off.
    pub outcome: String,
    /// Distinct messages delivered.
    pub delivered: u64,
    /// Extra copies.
    pub duplicated: u64,
    /// Deliveries that were not messages of the run.
    pub malformed: u64,
    /// What the transport dropped as not its own.
    pub foreign: u64,
    /// What this side put on the wire.
    pub wire: WireCounts,
}

/// What a receiver served before it stopped.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RecvReport {
    /// The transport served.
    pub transport: String,
    /// Every run, in order.
    pub runs: Vec<RunRecord>,
    /// Connections that were not a sender's, or broke off before a run began.
    pub bad_connections: u64,
    /// Datagrams that came while no run was going on.
    pub stray_datagrams: u64,
}

/// A bound receiver: its listener, its datagram socket and its QUIC identity.
#[derive(Debug)]
pub struct Receiver {
    command: RecvCommand,
    listener: TcpListener,
    udp: UdpSocket,
    identity: Identity,
}

impl Receiver {
    /// Binds the listener and the datagram socket (the same port; with port 0 the listener's),
    /// and makes the QUIC certificate.
    pub fn bind(command: &RecvCommand) -> Result<Receiver, CommandError> {
        command.check()?;
        let flag = || format!("--listen {}", command.listen);
        let listener = TcpListener::bind(command.listen).map_err(CommandError::setup(flag()))?;
        let port = listener
            .local_addr()
            .map_err(CommandError::setup(flag()))?
            .port();
        let udp = UdpSocket::bind(SocketAddr::new(command.listen.ip(), port))
            .map_err(CommandError::setup(format!("{} (udp)", flag())))?;
        listener
            .set_nonblocking(true)
            .map_err(CommandError::setup(flag()))?;
        udp.set_nonblocking(true)
            .map_err(CommandError::setup(flag()))?;
        let identity = Identity::generate().map_err(CommandError::setup("quic certificate"))?;
        Ok(Receiver {
            command: command.clone(),
            listener,
            udp,
            identity,
        })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves runs until `stop` is raised or `--runs` have been served; notes to `log`.
    pub fn serve(&self, stop: &Stop, view: &mut dyn View) -> Result<RecvReport, CommandError> {
        let mut report = RecvReport {
            transport: self.command.transport.to_string(),
            ..RecvReport::default()
        };
        let fds = [self.listener.as_raw_fd(), self.udp.as_raw_fd()];
        let mut buf = vec![0u8; 65_536];
        while !stop.is_raised()
            && self
                .command
                .runs
                .is_none_or(|n| (report.runs.len() as u64) < n)
        {
            let ready = latlab_io::tcp::wait_readable(&fds, Some(Duration::from_millis(100)))
                .map_err(run_error)?;
            if ready[1] {
                report.stray_datagrams += drain(&self.udp, &mut buf);
            }
            let (conn, peer) = match self.listener.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Out of descriptors, a connection reset before accept: not ours to end on.
                    view.note(&format!("latlab stream recv: accept: {e}"));
                    report.bad_connections += 1;
                    continue;
                }
            };
            match self.serve_connection(conn, peer, stop, &mut report, view) {
                Ok(record) => {
                    view.note(&format!(
                        "latlab stream recv: run {:08x} from {peer}: {}, {} delivered",
                        record.run, record.outcome, record.delivered
                    ));
                    report.runs.push(record);
                    if let Some(path) = &self.command.json {
                        let text =
                            serde_json::to_string_pretty(&report).map_err(io::Error::other)?;
                        write_atomic(path, (text + "\n").as_bytes())?;
                    }
                }
                Err(e) => {
                    report.bad_connections += 1;
                    view.note(&format!("latlab stream recv: {peer}: {e}"));
                }
            }
        }
        Ok(report)
    }

    /// One connection: a run's control connection, or something that is counted and dropped.
    fn serve_connection(
        &self,
        mut conn: TcpStream,
        peer: SocketAddr,
        stop: &Stop,
        report: &mut RecvReport,
        view: &mut dyn View,
    ) -> io::Result<RunRecord> {
        conn.set_nonblocking(false)?;
        conn.set_nodelay(true)?;
        if let Some(run) = control::read_hello(&mut conn, Duration::from_secs(2))? {
            return Err(io::Error::other(format!(
                "a data connection for run {run:08x}, which is not going on"
            )));
        }
        let mut reader = ControlReader::new();
        let start = match reader.read::<ToReceiver>(&mut conn, Duration::from_secs(2))? {
            ToReceiver::Start(s) => s,
            ToReceiver::End { .. } => return Err(io::Error::other("an end with no run")),
        };
        if let Err(reason) = self.accepts(&start) {
            control::write_frame(
                &mut conn,
                &ToSender::Refused {
                    reason: reason.clone(),
                },
            )?;
            return Err(io::Error::other(format!("refused a run: {reason}")));
        }
        let mut buf = vec![0u8; 65_536];
        report.stray_datagrams += drain(&self.udp, &mut buf);
        let spec = &self.command.transport;
        let certificate_hex = matches!(spec, TransportSpec::Quic { .. })
            .then(|| control::to_hex(self.identity.certificate()));
        let mut endpoint = if spec.is_tcp() {
            control::write_frame(&mut conn, &ToSender::Ready { certificate_hex })?;
            let data = self.accept_data(start.run, report, view)?;
            spec.open_receiver(&self.udp, Some(data), start.run, &self.identity)?
        } else {
            let e = spec.open_receiver(&self.udp, None, start.run, &self.identity)?;
            control::write_frame(&mut conn, &ToSender::Ready { certificate_hex })?;
            e
        };
        let mut tally = Tally::new(start.run, start.messages);
        let outcome = self.measure(
            &mut conn,
            &mut reader,
            endpoint.as_mut(),
            &mut tally,
            &start,
            stop,
        );
        let results = Results {
            histogram_hex: control::histogram_hex(&tally.latency)?,
            foreign: endpoint.foreign(),
            wire: endpoint.wire(),
            ..tally.counts.clone()
        };
        let answered = control::write_frame(&mut conn, &ToSender::Results(results.clone()));
        endpoint.close();
        let outcome = match (outcome, answered) {
            (Ok(()), Ok(())) => "ok".to_string(),
            (Err(e), _) | (Ok(()), Err(e)) => format!("broke off: {e}"),
        };
        Ok(RunRecord {
            run: start.run,
            peer: peer.to_string(),
            outcome,
            delivered: results.delivered,
            duplicated: results.duplicated,
            malformed: results.malformed,
            foreign: results.foreign,
            wire: results.wire,
        })
    }

    /// Why this receiver will not run `start`, if it will not.
    fn accepts(&self, start: &Start) -> Result<(), String> {
        let ours = self.command.transport.to_string();
        if start.transport != ours {
            return Err(format!(
                "this receiver runs --transport {ours}, not {}",
                start.transport
            ));
        }
        if !(HEADER_LEN..=MAX_LEN).contains(&start.size) {
            return Err(format!("messages of {} bytes", start.size));
        }
        if start.messages > MAX_MESSAGES {
            return Err(format!(
                "{} messages (at most {MAX_MESSAGES})",
                start.messages
            ));
        }
        Ok(())
    }

    /// Waits (at most 5 s) for run `run`'s data connection; other connections are dropped.
    fn accept_data(
        &self,
        run: u32,
        report: &mut RecvReport,
        view: &mut dyn View,
    ) -> io::Result<TcpStream> {
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            latlab_io::tcp::wait_readable(
                &[self.listener.as_raw_fd()],
                Some(Duration::from_millis(50)),
            )?;
            let (mut data, peer) = match self.listener.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            };
            data.set_nonblocking(false)?;
            match control::read_hello(&mut data, Duration::from_secs(2)) {
                Ok(Some(r)) if r == run => {
                    data.set_read_timeout(None)?;
                    return Ok(data);
                }
                other => {
                    report.bad_connections += 1;
                    view.note(&format!(
                        "latlab stream recv: {peer}: not run {run:08x}'s data connection ({})",
                        match other {
                            Ok(_) => "another run or a control connection".to_string(),
                            Err(e) => e.to_string(),
                        }
                    ));
                    // Dropped here: closing it is all the answer it gets.
                }
            }
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("run {run:08x}'s tcp data connection did not come within 5s"),
        ))
    }

    /// Delivers the run's messages into `tally` until the sender's end and every message sent
    /// (or its grace period), or until the control connection breaks.
    fn measure(
        &self,
        conn: &mut TcpStream,
        reader: &mut ControlReader,
        endpoint: &mut dyn Endpoint,
        tally: &mut Tally,
        start: &Start,
        stop: &Stop,
    ) -> io::Result<()> {
        let give_up =
            Instant::now() + Duration::from_millis(start.duration_ms) + Duration::from_secs(60);
        let mut end: Option<(u64, Instant)> = None;
        loop {
            // A message wakes the wait as it arrives, and each endpoint shortens it to its own
            // timers: the bound is how soon the control connection's end of the run is seen.
            endpoint.poll(Duration::from_millis(10), &mut |bytes: &[u8]| {
                tally.deliver(bytes, now_ns())
            })?;
            if end.is_none() {
                match reader.try_read::<ToReceiver>(conn)? {
                    Some(ToReceiver::End { sent, grace_ms }) => {
                        end = Some((sent, Instant::now() + Duration::from_millis(grace_ms)));
                    }
                    Some(ToReceiver::Start(_)) => {
                        return Err(io::Error::other("a second start in one run"))
                    }
                    None => {}
                }
            }
            let now = Instant::now();
            if let Some((sent, deadline)) = end {
                if tally.delivered_of(sent) >= sent || now >= deadline {
                    return Ok(());
                }
            }
            if stop.is_raised() {
                return Err(io::Error::other("the receiver was stopped"));
            }
            if now >= give_up {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the sender went on a minute past its duration",
                ));
            }
        }
    }
}

fn run_error(source: io::Error) -> CommandError {
    CommandError::Run {
        engine: "stream receiver",
        source,
    }
}

/// Reads and drops every waiting datagram; how many.
fn drain(udp: &UdpSocket, buf: &mut [u8]) -> u64 {
    let mut n = 0;
    while udp.recv_from(buf).is_ok() {
        n += 1;
    }
    n
}

/// Binds and serves (see [`Receiver`]).
pub fn run(
    command: &RecvCommand,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<RecvReport, CommandError> {
    let receiver = Receiver::bind(command)?;
    if let Ok(addr) = receiver.local_addr() {
        view.note(&format!(
            "latlab stream recv: {} on {addr} (tcp control, {} data)",
            command.transport,
            if command.transport.is_tcp() {
                "tcp"
            } else {
                "udp"
            }
        ));
    }
    receiver.serve(stop, view)
}
