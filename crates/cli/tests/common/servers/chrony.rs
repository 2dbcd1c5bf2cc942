//! chronyd serving NTP in a namespace: `chronyd -x -d` (`-x`: the system clock is never
//! touched; `-d`: in the foreground, logging to standard error), `local stratum 8` so that it
//! answers synchronized without a source, no rate limit, no command port, every file it
//! writes in a temporary folder.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::Reaped;

/// Where Debian installs chronyd.
const CHRONYD: &str = "/usr/sbin/chronyd";

/// A chronyd of the test's own, stopped (by its process id) on drop.
pub(crate) struct Chrony {
    child: Reaped,
    /// Where it answers.
    pub(crate) addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Chrony {
    /// chronyd serving NTP on `ip:port` inside namespace `ns`, once its socket is bound;
    /// `None` (a skip, or a failure under `CI=true`) when chronyd is not installed.
    pub(crate) fn start(ns: &str, ip: Ipv4Addr, port: u16) -> Option<Chrony> {
        if !Path::new(CHRONYD).exists() {
            latlab_io::precondition::missing("chrony's chronyd is not installed");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display();
        let conf = dir.path().join("chrony.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbindaddress {ip}\nallow 198.18.0.0/24\nallow 127.0.0.0/8\n\
                 local stratum 8\ncmdport 0\nbindcmdaddress /\npidfile {d}/chronyd.pid\n\
                 driftfile {d}/drift\n"
            ),
        )
        .unwrap();
        // `-u root`: it stays root, so that it may write its files in the folder.
        let child = Command::new("ip")
            .args(["netns", "exec", ns, CHRONYD, "-x", "-d", "-u", "root", "-f"])
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("chronyd.log")).unwrap())
            .spawn()
            .unwrap();
        let mut chrony = Chrony {
            child: Reaped::new(child),
            addr: SocketAddr::from((ip, port)),
            _dir: dir,
        };
        chrony.wait_bound(ns);
        Some(chrony)
    }

    /// Waits until its NTP socket is bound (`ss` in the namespace), up to 60 s, which only a
    /// broken start reaches.
    fn wait_bound(&mut self, ns: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let port = self.addr.port().to_string();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("chronyd ended at once ({status}): {}", self.log());
            }
            let ss = Command::new("ip")
                .args(["netns", "exec", ns, "ss", "-Hnul", "sport", "=", &port])
                .output()
                .unwrap();
            if !String::from_utf8_lossy(&ss.stdout).trim().is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "chronyd never bound: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its process id (`ip netns exec` execs it).
    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    /// What it logged.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("chronyd.log")).unwrap_or_default()
    }
}
