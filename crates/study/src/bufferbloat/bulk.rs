//! The bulk flows of a point: kernel TCP connections from the client namespace to the server
//! namespace, each sender writing as fast as its congestion control lets it, each receiver
//! counting what it reads (the goodput is the receiver's count).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use latlab_io::tcp::TcpInfo;
use latlab_lab::topology::ClientEmuServer;

/// How long a blocked read or write waits before it looks at the stop flags again.
const POLL: Duration = Duration::from_millis(100);

/// What a sender hands back when it stops: its socket (still open, so that it is closed
/// only after the receivers, and the kernel sends nothing more for it), its congestion
/// control as the socket reports it, and its `TCP_INFO`.
type Stopped = (TcpStream, String, TcpInfo);

/// Bulk flows running between the lab's client and server.
pub(super) struct BulkFlows {
    senders: Vec<JoinHandle<io::Result<Stopped>>>,
    receivers: Vec<JoinHandle<io::Result<()>>>,
    /// Bytes each receiver has read, in the order of the senders.
    received: Vec<Arc<AtomicU64>>,
    stop_senders: Arc<AtomicBool>,
    stop_receivers: Arc<AtomicBool>,
}

/// One flow's result.
pub(super) struct FlowEnd {
    /// The congestion control its sender ran.
    pub(super) cc: String,
    /// Its sender's `TCP_INFO` when it stopped.
    pub(super) info: TcpInfo,
}

impl BulkFlows {
    /// Starts `n` flows with congestion control `cc` from `lab`'s client to its server, their
    /// threads pinned to `cpu` (where the scheduler puts them with `None`); returns once every
    /// connection is up.
    pub(super) fn start(
        lab: &ClientEmuServer,
        n: u32,
        cc: &str,
        cpu: Option<usize>,
    ) -> io::Result<BulkFlows> {
        let mut flows = BulkFlows {
            senders: Vec::new(),
            receivers: Vec::new(),
            received: Vec::new(),
            stop_senders: Arc::new(AtomicBool::new(false)),
            stop_receivers: Arc::new(AtomicBool::new(false)),
        };
        if n == 0 {
            return Ok(flows);
        }
        let server_addr = lab.server_addr;
        let listener = latlab_io::netns::run_in(lab.server.name(), move || {
            TcpListener::bind(SocketAddr::from((server_addr, 0)))
        })??;
        let to = listener.local_addr()?;
        for _ in 0..n {
            let cc = cc.to_string();
            let sender = latlab_io::netns::run_in(lab.client.name(), move || {
                let s = TcpStream::connect_timeout(&to, Duration::from_secs(3))?;
                latlab_io::tcp::set_congestion(&s, &cc)
                    .map_err(|e| io::Error::new(e.kind(), format!("TCP_CONGESTION {cc:?}: {e}")))?;
                Ok::<_, io::Error>(s)
            })??;
            let (receiver, _) = listener.accept()?;
            let count = Arc::new(AtomicU64::new(0));
            flows.received.push(count.clone());
            let stop = flows.stop_receivers.clone();
            flows.receivers.push(std::thread::spawn(move || {
                receive(receiver, &count, &stop, cpu)
            }));
            let stop = flows.stop_senders.clone();
            flows
                .senders
                .push(std::thread::spawn(move || send(sender, &stop, cpu)));
        }
        Ok(flows)
    }

    /// The bytes each receiver has read so far.
    pub(super) fn received(&self) -> Vec<u64> {
        self.received.iter().map(|c| c.load(Relaxed)).collect()
    }

    /// Stops the senders (reading their `TCP_INFO`), then the receivers, whose close resets
    /// the connections, then closes the senders' sockets; returns each flow's end.
    pub(super) fn stop(mut self) -> io::Result<Vec<FlowEnd>> {
        self.stop_senders.store(true, Relaxed);
        let mut stopped = Vec::new();
        let mut failed = None;
        for s in std::mem::take(&mut self.senders) {
            match s.join() {
                Ok(Ok(end)) => stopped.push(end),
                Ok(Err(e)) => failed = failed.or(Some(e)),
                Err(_) => failed = failed.or(Some(io::Error::other("a bulk sender panicked"))),
            }
        }
        self.stop_receivers.store(true, Relaxed);
        for r in std::mem::take(&mut self.receivers) {
            match r.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failed = failed.or(Some(e)),
                Err(_) => failed = failed.or(Some(io::Error::other("a bulk receiver panicked"))),
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(stopped
            .into_iter()
            .map(|(_socket, cc, info)| FlowEnd { cc, info })
            .collect())
    }
}

impl Drop for BulkFlows {
    /// Flows not stopped (an error on the way) stop with it; their threads end within
    /// [`POLL`].
    fn drop(&mut self) {
        self.stop_senders.store(true, Relaxed);
        self.stop_receivers.store(true, Relaxed);
    }
}

/// Writes as fast as the connection takes it until `stop`.
fn send(mut s: TcpStream, stop: &AtomicBool, cpu: Option<usize>) -> io::Result<Stopped> {
    if let Some(cpu) = cpu {
        latlab_io::cpu::pin_current_thread(cpu)?;
    }
    s.set_write_timeout(Some(POLL))?;
    let buf = vec![0x5a_u8; 64 * 1024];
    while !stop.load(Relaxed) {
        match s.write(&buf) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io::Error::new(e.kind(), format!("bulk sender: {e}"))),
        }
    }
    let info = latlab_io::tcp::tcp_info(&s)?;
    let cc = latlab_io::tcp::congestion(&s)?;
    Ok((s, cc, info))
}

/// Reads and counts until the sender closes or `stop`.
fn receive(
    mut s: TcpStream,
    count: &AtomicU64,
    stop: &AtomicBool,
    cpu: Option<usize>,
) -> io::Result<()> {
    if let Some(cpu) = cpu {
        latlab_io::cpu::pin_current_thread(cpu)?;
    }
    s.set_read_timeout(Some(POLL))?;
    let mut buf = vec![0_u8; 256 * 1024];
    while !stop.load(Relaxed) {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                count.fetch_add(n as u64, Relaxed);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io::Error::new(e.kind(), format!("bulk receiver: {e}"))),
        }
    }
    Ok(())
}
