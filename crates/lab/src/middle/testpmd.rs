//! DPDK's testpmd as a DUT: `dpdk-testpmd` from Debian's packages, in `io` forwarding mode
//! (frames from one port to the other as they are: the paper's L2FWD), over DPDK's AF_PACKET
//! or AF_XDP driver on the DUT namespace's two veths, its forwarding lcore on the DUT's CPU.
//!
//! testpmd is started as a child process of this one, by id: it forwards until a line comes on
//! its standard input, then prints its counters and exits. The kernel ends it with this process
//! (`PR_SET_PDEATHSIG`), so a killed run leaves no forwarder behind.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The Debian packages that carry testpmd and the two drivers it is run with here.
pub const PACKAGES: [&str; 4] = [
    "dpdk-dev",
    "librte-net-af-packet23",
    "librte-net-af-xdp23",
    "librte-mempool-ring23",
];

/// How long testpmd may take to start forwarding.
const START: Duration = Duration::from_secs(30);

/// Whether testpmd can be run here: `Err` says why not. Installs it from Debian's packages
/// when it is missing and `apt-get` can.
pub fn available() -> Result<(), String> {
    crate::command::debian_tool("dpdk-testpmd", &["--help"], &PACKAGES)
}

/// Which of DPDK's drivers testpmd opens the veths with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// `net_af_packet`.
    AfPacket,
    /// `net_af_xdp` (copy mode on veth).
    AfXdp,
}

/// A running testpmd.
#[derive(Debug)]
pub struct Testpmd {
    child: Child,
    stdin: Option<ChildStdin>,
    log: PathBuf,
    prefix: String,
}

/// What testpmd counted over its run (its "Accumulated forward statistics for all ports").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestpmdCounts {
    /// Frames its ports received.
    pub rx_packets: u64,
    /// Frames its ports dropped on receive (missed by the driver).
    pub rx_dropped: u64,
    /// Frames its ports sent.
    pub tx_packets: u64,
    /// Frames its ports could not send.
    pub tx_dropped: u64,
}

impl Testpmd {
    /// Starts testpmd in namespace `ns` forwarding between `a` and `b` with `driver`, its
    /// forwarding lcore on CPU `cpu` and its main lcore (which only waits on standard input) on
    /// `main_cpu`, `burst` frames per receive call; returns once it forwards.
    pub fn start(
        ns: &str,
        (a, b): (&str, &str),
        driver: Driver,
        (main_cpu, cpu): (usize, usize),
        burst: usize,
    ) -> Result<Testpmd, String> {
        static RUNS: AtomicU32 = AtomicU32::new(0);
        let prefix = format!(
            "latlab-{}-{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed)
        );
        let log = std::env::temp_dir().join(format!("{prefix}.log"));
        let out = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let vdev = |i: usize, dev: &str| match driver {
            Driver::AfPacket => format!("net_af_packet{i},iface={dev}"),
            Driver::AfXdp => format!("net_af_xdp{i},iface={dev}"),
        };
        let mut command = Command::new("ip");
        command
            // Line-buffered, so its "Press enter to exit" reaches the log when printed.
            .args(["netns", "exec", ns, "stdbuf", "-oL", "dpdk-testpmd"])
            // No hugepages here: 512 MB of ordinary memory, and no PCI devices to probe.
            .args([
                "--no-huge",
                "-m",
                "512",
                "--no-pci",
                "--file-prefix",
                &prefix,
            ])
            .arg(format!("--lcores=0@{main_cpu},1@{cpu}"))
            .args(["--main-lcore", "0"])
            .args(["--vdev", &vdev(0, a), "--vdev", &vdev(1, b)])
            .arg("--")
            .args(["--forward-mode=io", "--auto-start", "--nb-cores=1"])
            .args([
                "--total-num-mbufs=16384",
                &format!("--burst={}", burst.clamp(1, 512)),
            ])
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err);
        latlab_io::signal::end_child_with_parent(&mut command);
        let mut child = command
            .spawn()
            .map_err(|e| format!("dpdk-testpmd did not start: {e}"))?;
        let stdin = child.stdin.take();
        let mut testpmd = Testpmd {
            child,
            stdin,
            log,
            prefix,
        };
        let started = Instant::now();
        loop {
            let text = std::fs::read_to_string(&testpmd.log).unwrap_or_default();
            if text.contains("Press enter to exit") {
                return Ok(testpmd);
            }
            let exited = testpmd.child.try_wait().ok().flatten();
            if exited.is_some() || started.elapsed() > START {
                let why = last_error(&text);
                testpmd.end();
                return Err(match exited {
                    Some(status) => format!("dpdk-testpmd exited ({status}): {why}"),
                    None => format!("dpdk-testpmd did not start forwarding in {START:?}: {why}"),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Ends testpmd (a line on its standard input, then SIGKILL after 5 s) and returns what it
    /// counted.
    pub fn stop(mut self) -> Result<TestpmdCounts, String> {
        self.end();
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        parse_counts(&text).ok_or_else(|| {
            format!(
                "dpdk-testpmd printed no forward statistics: {}",
                last_error(&text)
            )
        })
    }

    fn end(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"\n");
        }
        let asked = Instant::now();
        while asked.elapsed() < Duration::from_secs(5) {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        self.end();
        let _ = std::fs::remove_file(&self.log);
        // EAL's runtime folder for this run's file prefix.
        let _ = std::fs::remove_dir_all(PathBuf::from("/var/run/dpdk").join(&self.prefix));
    }
}

/// The last line of testpmd's output that says what went wrong (or its last line).
fn last_error(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines
        .iter()
        .rev()
        .find(|l| l.contains("Cause:") || l.contains("Error") || l.contains("error"))
        .or(lines.last())
        .map_or_else(|| "no output".to_string(), |l| l.to_string())
}

/// Reads the totals after "Accumulated forward statistics for all ports".
fn parse_counts(text: &str) -> Option<TestpmdCounts> {
    let at = text.find("Accumulated forward statistics for all ports")?;
    let rest = &text[at..];
    let field = |name: &str| -> Option<u64> {
        let i = rest.find(name)? + name.len();
        rest[i..].split_whitespace().next()?.parse().ok()
    };
    Some(TestpmdCounts {
        rx_packets: field("RX-packets:")?,
        rx_dropped: field("RX-dropped:")?,
        tx_packets: field("TX-packets:")?,
        tx_dropped: field("TX-dropped:")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accumulated_totals_are_read_not_a_ports_own() {
        let text = "\
  ---------------------- Forward statistics for port 0  ----------------------
  RX-packets: 7              RX-dropped: 0             RX-total: 7
  TX-packets: 5              TX-dropped: 0             TX-total: 5
  ----------------------------------------------------------------------------

  +++++++++++++++ Accumulated forward statistics for all ports+++++++++++++++
  RX-packets: 1200345        RX-dropped: 12            RX-total: 1200357
  TX-packets: 1200001        TX-dropped: 344           TX-total: 1200345
  ++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++
";
        assert_eq!(
            parse_counts(text),
            Some(TestpmdCounts {
                rx_packets: 1_200_345,
                rx_dropped: 12,
                tx_packets: 1_200_001,
                tx_dropped: 344,
            })
        );
        assert_eq!(parse_counts("Port 0 is closed\n"), None);
        assert_eq!(
            parse_counts("Accumulated forward statistics for all ports\nRX-packets: x"),
            None
        );
    }

    #[test]
    fn the_reason_testpmd_gave_is_the_line_kept() {
        let text = "EAL: Detected CPU lcores: 2\nEAL: Error - exiting with code: 1\n  Cause: Creation of mbuf pool for socket 0 failed: Cannot allocate memory\nPort 0 is closed\n";
        assert_eq!(
            last_error(text),
            "Cause: Creation of mbuf pool for socket 0 failed: Cannot allocate memory"
        );
        assert_eq!(last_error(""), "no output");
    }
}
