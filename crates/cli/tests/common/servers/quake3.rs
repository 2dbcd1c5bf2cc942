//! A Quake III engine server in a namespace: Debian's OpenArena dedicated server
//! (`openarena-server`, ioquake3's `ioq3ded` with OpenArena's data) on map `aggressor`, its
//! home folder (config, logs) in a temporary folder.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::Reaped;

/// Debian's wrapper: it sets OpenArena's base game and protocol and execs ioquake3's engine.
const OPENARENA_SERVER: &str = "/usr/games/openarena-server";

/// What the engine prints once the map is loaded and it serves.
const READY: &str = "AAS initialized.";

/// An engine server of the test's own, stopped (by its process id) on drop.
pub(crate) struct Quake3 {
    child: Reaped,
    /// Where it answers.
    pub(crate) addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Quake3 {
    /// The server on `ip:port` inside namespace `ns`, once its map is loaded; `None` (a skip,
    /// or a failure under `CI=true`) when OpenArena's server is not installed.
    pub(crate) fn start(ns: &str, ip: Ipv4Addr, port: u16) -> Option<Quake3> {
        if !Path::new(OPENARENA_SERVER).exists() {
            latlab_io::precondition::missing("openarena-server is not installed");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let out = std::fs::File::create(&log).unwrap();
        // `ip netns exec` and the wrapper both exec: the child's id is the engine's.
        let child = Command::new("ip")
            .args(["netns", "exec", ns, OPENARENA_SERVER])
            .args(["+set", "dedicated", "1", "+set", "net_ip", &ip.to_string()])
            .args(["+set", "net_port", &port.to_string(), "+set", "fs_homepath"])
            .arg(dir.path())
            .args(["+set", "sv_maxclients", "8", "+map", "aggressor"])
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        let mut server = Quake3 {
            child: Reaped::new(child),
            addr: SocketAddr::from((ip, port)),
            dir,
        };
        server.wait_ready();
        Some(server)
    }

    /// Waits until it says its map is loaded, up to 60 s, which only a broken start reaches.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.log().contains(READY) {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the server ended at once ({status}): {}", self.log());
            }
            assert!(Instant::now() < deadline, "never ready: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Its process id.
    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    /// What it printed.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}
