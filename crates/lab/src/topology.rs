//! Lab topologies: hosts as network namespaces joined by veth pairs, or loopback.
//!
//! Every namespace the lab makes is named `latlab-<pid>-<token>-<n>-<role>` (`<token>` is random
//! per process, so names are unique also across PID namespaces) and deleted when its
//! [`Namespace`] is dropped: on success, on error, on panic, and after a stopping signal (the
//! engines stop on the flag, and the drop runs on the way out). Its owner holds an exclusive lock
//! on `/run/latlab/<name>.lock` for the namespace's whole life; the kernel lets go of the lock
//! when the owner's process ends, however it ends. A namespace whose lock can be taken was left
//! by a run that ended (`kill -9`): [`crate::clean`] removes those, and never one whose lock is
//! held.
//!
//! A namespace is deleted without a child process ([`latlab_io::netns::delete`]), and the `ip`
//! commands that build one run in a process group of their own: a Ctrl-C at the terminal
//! reaches latlab only, and never cuts its clean-up short.
//!
//! Addresses come from 198.18.0.0/15, the range RFC 2544 sets aside for benchmarking, and exist
//! only inside the namespaces.

use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use latlab_io::lock::OwnerLock;

/// Errors building a topology.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// An `ip` command failed.
    #[error("`{command}` failed: {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// `ip` could not be started.
    #[error("cannot run `ip` (iproute2): {0}")]
    NoIp(std::io::Error),
    /// The owner lock of a namespace could not be had.
    #[error("owner lock of namespace {name}: {source}")]
    Lock {
        /// The namespace.
        name: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// Another live process holds the owner lock of a namespace of that name.
    #[error("namespace {0} belongs to another live process")]
    Taken(String),
}

/// The folder of the namespaces' owner locks.
pub const LOCK_DIR: &str = "/run/latlab";

/// The owner lock file of the namespace `name`: `/run/latlab/<name>.lock`.
pub fn lock_path(name: &str) -> PathBuf {
    Path::new(LOCK_DIR).join(format!("{name}.lock"))
}

/// A network namespace made by the lab, deleted on drop. Its owner lock is held as long as it
/// lives.
#[derive(Debug)]
pub struct Namespace {
    name: String,
    /// Taken before the namespace is added; `None` only after the drop has let go of it.
    lock: Option<OwnerLock>,
}

impl Namespace {
    /// Takes the owner lock of `name`, then creates the namespace with its loopback up.
    pub fn create(name: &str) -> Result<Namespace, TopologyError> {
        let lock = OwnerLock::create(&lock_path(name))
            .map_err(|source| TopologyError::Lock {
                name: name.to_string(),
                source,
            })?
            .ok_or_else(|| TopologyError::Taken(name.to_string()))?;
        if let Err(e) = ip(&["netns", "add", name]) {
            // Nothing was made: the lock file goes too.
            let _ = lock.remove();
            return Err(e);
        }
        let ns = Namespace {
            name: name.to_string(),
            lock: Some(lock),
        };
        ip(&["-n", name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Its name, as `ip netns` knows it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Lets go of the namespace without deleting it: its lock is let go of and its lock file
    /// stays, so that [`crate::clean`] knows it as left by a run that ended. For a namespace
    /// whose deletion would destroy what is not the lab's (a container's veth moved into it).
    pub fn leave(mut self) {
        // Dropping the lock lets go of it; the file stays.
        self.lock.take();
        self.name.clear();
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if self.name.is_empty() {
            // Left by `leave`.
            return;
        }
        // Deleting a namespace destroys the veth ends inside it, and with them their peers.
        let deleted = latlab_io::netns::delete(&self.name).is_ok();
        if let Some(lock) = self.lock.take() {
            if deleted {
                let _ = lock.remove();
            }
            // Not deleted: the lock file stays (its lock is let go of here), so that the next
            // clean-up knows the namespace as one left by a run that ended.
        }
    }
}

/// Where the two ends of a client—server topology live.
#[derive(Debug)]
pub enum ClientServer {
    /// Both ends on 127.0.0.1 in the current namespace.
    Loopback {
        /// Why namespaces were not used.
        reason: String,
    },
    /// Two namespaces joined by a veth pair.
    Namespaces {
        /// The client (generator) host.
        client: Namespace,
        /// The server (reflector) host.
        server: Namespace,
        /// The client's address.
        client_addr: Ipv4Addr,
        /// The server's address.
        server_addr: Ipv4Addr,
    },
}

impl ClientServer {
    /// Builds two namespaces joined by a veth pair when `namespaces` is asked for and this
    /// process may, loopback otherwise (with the reason).
    pub fn build(namespaces: bool) -> Result<ClientServer, TopologyError> {
        if !namespaces {
            return Ok(ClientServer::Loopback {
                reason: "loopback was asked for".into(),
            });
        }
        if let Some(reason) = why_no_namespaces() {
            return Ok(ClientServer::Loopback { reason });
        }
        Self::namespaces()
    }

    /// Builds the namespace pair, or fails.
    pub fn namespaces() -> Result<ClientServer, TopologyError> {
        let prefix = unique_prefix();
        let client = Namespace::create(&format!("{prefix}-client"))?;
        let server = Namespace::create(&format!("{prefix}-server"))?;
        let (client_addr, server_addr) =
            (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
        ip(&[
            "-n",
            client.name(),
            "link",
            "add",
            "veth0",
            "type",
            "veth",
            "peer",
            "name",
            "veth0",
            "netns",
            server.name(),
        ])?;
        for (ns, addr) in [(&client, client_addr), (&server, server_addr)] {
            ip(&[
                "-n",
                ns.name(),
                "addr",
                "add",
                &format!("{addr}/30"),
                "dev",
                "veth0",
            ])?;
            ip(&["-n", ns.name(), "link", "set", "veth0", "up"])?;
        }
        // Static neighbour entries: no ARP round trip inside a measurement.
        static_neighbours((&client, client_addr), (&server, server_addr))?;
        Ok(ClientServer::Namespaces {
            client,
            server,
            client_addr,
            server_addr,
        })
    }

    /// A one-line description for results and terminals.
    pub fn describe(&self) -> String {
        match self {
            ClientServer::Loopback { reason } => format!("loopback 127.0.0.1 ({reason})"),
            ClientServer::Namespaces {
                client,
                server,
                client_addr,
                server_addr,
            } => format!(
                "namespaces {} ({client_addr}) and {} ({server_addr}) joined by a veth pair",
                client.name(),
                server.name()
            ),
        }
    }

    /// The short name for results: `loopback` or `veth-namespaces`.
    pub fn kind(&self) -> &'static str {
        match self {
            ClientServer::Loopback { .. } => "loopback",
            ClientServer::Namespaces { .. } => "veth-namespaces",
        }
    }
}

/// What a topology does with the interface offloads of its veth ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offloads {
    /// Checksum and segmentation offload and GRO turned off: every frame is a finished frame
    /// of at most the MTU, as on a wire. The lab's own measurements use this, so that the
    /// bridge's work per frame is the same whatever the sender does.
    Off,
    /// Left as a new veth has them (on), as containers are wired: senders hand over frames
    /// with unfinished checksums and TCP segments of up to 64 KiB.
    Defaults,
}

/// A client and a server joined through an emulator namespace: `client — emu — server`.
///
/// The client's and the server's veth ends carry 198.18.0.1/24 and 198.18.0.2/24; their peers,
/// `emu-a` and `emu-b`, sit in the emulator's namespace without addresses, for a layer-2 bridge
/// (`latlab emu --iface-a emu-a --iface-b emu-b`) to join them. Offloads are off on all four
/// ends, so every frame is a finished frame of at most the MTU. Neighbour entries are static:
/// nothing crosses the bridge before it runs, and no ARP needs to.
#[derive(Debug)]
pub struct ClientEmuServer {
    /// The client host.
    pub client: Namespace,
    /// The emulator host.
    pub emu: Namespace,
    /// The server host.
    pub server: Namespace,
    /// The client's address.
    pub client_addr: Ipv4Addr,
    /// The server's address.
    pub server_addr: Ipv4Addr,
}

impl ClientEmuServer {
    /// Enables IPv4 forwarding in the middle namespace between two subnets of their own
    /// (198.18.2.0/24 on the client's side, 198.18.1.0/24 on the server's), so the kernel
    /// forwards between client and server (a DUT, or a study's baseline) while the bridged
    /// addresses stay as they are; the middle knows the server's MAC for good (no ARP under
    /// load). Returns the client's and the server's routed addresses.
    pub fn route_through_middle(&self) -> Result<(Ipv4Addr, Ipv4Addr), TopologyError> {
        let (c, e, s) = (self.client.name(), self.emu.name(), self.server.name());
        let (a, b) = (ClientEmuServer::EMU_A, ClientEmuServer::EMU_B);
        ip(&["-n", e, "addr", "add", "198.18.2.254/24", "dev", a])?;
        ip(&["-n", e, "addr", "add", "198.18.1.254/24", "dev", b])?;
        ip(&["-n", c, "addr", "add", "198.18.2.1/24", "dev", "veth0"])?;
        ip(&["-n", s, "addr", "add", "198.18.1.2/24", "dev", "veth0"])?;
        // From the routed address, not the bridged one the same veth also has.
        ip(&[
            "-n",
            c,
            "route",
            "add",
            "198.18.1.0/24",
            "via",
            "198.18.2.254",
            "src",
            "198.18.2.1",
        ])?;
        ip(&[
            "-n",
            s,
            "route",
            "add",
            "198.18.2.0/24",
            "via",
            "198.18.1.254",
            "src",
            "198.18.1.2",
        ])?;
        let server_mac = mac_of(s, "veth0")?;
        ip(&[
            "-n",
            e,
            "neigh",
            "replace",
            "198.18.1.2",
            "lladdr",
            &server_mac,
            "dev",
            b,
            "nud",
            "permanent",
        ])?;
        latlab_io::netns::run_in(e, || std::fs::write("/proc/sys/net/ipv4/ip_forward", "1"))
            .and_then(|r| r)
            .map_err(|err| TopologyError::Command {
                command: format!("ip_forward on in {e}"),
                stderr: err.to_string(),
            })?;
        Ok((Ipv4Addr::new(198, 18, 2, 1), Ipv4Addr::new(198, 18, 1, 2)))
    }

    /// The emulator's interface towards the client.
    pub const EMU_A: &'static str = "emu-a";
    /// The emulator's interface towards the server.
    pub const EMU_B: &'static str = "emu-b";

    /// Builds the three namespaces (root only), offloads off on all four ends.
    pub fn build() -> Result<ClientEmuServer, TopologyError> {
        ClientEmuServer::build_with(Offloads::Off)
    }

    /// Builds the three namespaces (root only), with the offloads `offloads` says.
    pub fn build_with(offloads: Offloads) -> Result<ClientEmuServer, TopologyError> {
        let prefix = unique_prefix();
        let client = Namespace::create(&format!("{prefix}-client"))?;
        let emu = Namespace::create(&format!("{prefix}-emu"))?;
        let server = Namespace::create(&format!("{prefix}-server"))?;
        let (client_addr, server_addr) =
            (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
        for (host, emu_end) in [(&client, Self::EMU_A), (&server, Self::EMU_B)] {
            ip(&[
                "-n",
                host.name(),
                "link",
                "add",
                "veth0",
                "type",
                "veth",
                "peer",
                "name",
                emu_end,
                "netns",
                emu.name(),
            ])?;
        }
        for (host, addr) in [(&client, client_addr), (&server, server_addr)] {
            ip(&[
                "-n",
                host.name(),
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "veth0",
            ])?;
        }
        let offloads_off = |ns: &Namespace, dev: &'static str| -> Result<(), TopologyError> {
            latlab_io::netns::run_in(ns.name(), move || latlab_io::ethtool::disable_offloads(dev))
                .and_then(|r| r)
                .map_err(|e| TopologyError::Command {
                    command: format!("ethtool offloads off on {dev} in {}", ns.name()),
                    stderr: e.to_string(),
                })
        };
        for (ns, dev) in [
            (&client, "veth0"),
            (&server, "veth0"),
            (&emu, Self::EMU_A),
            (&emu, Self::EMU_B),
        ] {
            if offloads == Offloads::Off {
                offloads_off(ns, dev)?;
            }
            ip(&["-n", ns.name(), "link", "set", dev, "up"])?;
        }
        static_neighbours((&client, client_addr), (&server, server_addr))?;
        Ok(ClientEmuServer {
            client,
            emu,
            server,
            client_addr,
            server_addr,
        })
    }

    /// A one-line description for results and terminals.
    pub fn describe(&self) -> String {
        format!(
            "namespaces {} ({}) — {} (bridge {} ↔ {}) — {} ({})",
            self.client.name(),
            self.client_addr,
            self.emu.name(),
            Self::EMU_A,
            Self::EMU_B,
            self.server.name(),
            self.server_addr
        )
    }

    /// Puts the receive work of both of the emulator namespace's veths on `cpu` with RPS (veth
    /// otherwise receives on the sender's core, which would hand what runs there a free core,
    /// or make it wait behind the sender), and that of the client's and the server's veths on
    /// `ends_cpu` (else their receive work runs on the middle's core, inside its transmit);
    /// says what was set.
    pub fn steer_receive_work(
        &self,
        cpu: usize,
        ends_cpu: Option<usize>,
    ) -> Result<String, TopologyError> {
        let mask = |cpu: usize| format!("{:x}", 1u64 << cpu.min(63));
        let mut steered = vec![
            (self.emu.name(), ClientEmuServer::EMU_A, cpu),
            (self.emu.name(), ClientEmuServer::EMU_B, cpu),
        ];
        if let Some(ends) = ends_cpu {
            steered.push((self.client.name(), "veth0", ends));
            steered.push((self.server.name(), "veth0", ends));
        }
        for &(ns, dev, cpu) in &steered {
            set_net_sysfs(ns, dev, "queues/rx-0/rps_cpus", &mask(cpu))?;
        }
        let mut said = format!(
            "RPS: receive work of {} and {} on CPU {cpu} (rps_cpus {})",
            ClientEmuServer::EMU_A,
            ClientEmuServer::EMU_B,
            mask(cpu)
        );
        if let Some(ends) = ends_cpu {
            said += &format!(", of the client's and the server's veth0 on CPU {ends}");
        }
        Ok(said)
    }
}

/// Makes each of two hosts (each with its `veth0`) know the other's MAC address for good.
fn static_neighbours(
    (a, a_addr): (&Namespace, Ipv4Addr),
    (b, b_addr): (&Namespace, Ipv4Addr),
) -> Result<(), TopologyError> {
    let a_mac = mac_of(a.name(), "veth0")?;
    let b_mac = mac_of(b.name(), "veth0")?;
    for (ns, peer, mac) in [(a, b_addr, &b_mac), (b, a_addr, &a_mac)] {
        let peer = peer.to_string();
        ip(&[
            "-n",
            ns.name(),
            "neigh",
            "replace",
            &peer,
            "lladdr",
            mac,
            "dev",
            "veth0",
            "nud",
            "permanent",
        ])?;
    }
    Ok(())
}

/// Why this process cannot build namespaces, or `None` when it can.
pub fn why_no_namespaces() -> Option<String> {
    if !is_root() {
        return Some("not root: network namespaces need CAP_NET_ADMIN".into());
    }
    match Command::new("ip").arg("-V").output() {
        Err(_) => return Some("`ip` (iproute2) is not installed".into()),
        Ok(o) if !o.status.success() => return Some("`ip -V` failed".into()),
        Ok(_) => {}
    }
    let probe = format!("{}-probe", unique_prefix());
    match Namespace::create(&probe) {
        Ok(_) => None,
        Err(e) => Some(format!("network namespaces do not work here: {e}")),
    }
}

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// `latlab-<pid>-<token>-<n>`: the pid says which process made it, the token (random per process)
/// keeps names apart across PID namespaces, `n` counts this process's topologies.
pub fn unique_prefix() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "latlab-{}-{}-{}",
        std::process::id(),
        process_token(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Eight hex digits drawn once per process from the standard library's randomly keyed hasher
/// (seeded by the operating system's random source).
fn process_token() -> &'static str {
    static TOKEN: OnceLock<String> = OnceLock::new();
    TOKEN.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(latlab_io::clock::now_ns());
        format!("{:08x}", hasher.finish() as u32)
    })
}

/// The MAC address of `dev` in namespace `ns`, as `aa:bb:cc:dd:ee:ff`.
pub fn mac_of(ns: &str, dev: &str) -> Result<String, TopologyError> {
    let out = ip(&["-n", ns, "-o", "link", "show", dev])?;
    out.split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .map(str::to_string)
        .ok_or_else(|| TopologyError::Command {
            command: format!("ip -n {ns} -o link show {dev}"),
            stderr: "no link/ether address in its output".into(),
        })
}

/// Runs `ip ARGS` in a process group of its own (a Ctrl-C at the terminal does not reach it)
/// and returns its stdout.
pub fn ip(args: &[&str]) -> Result<String, TopologyError> {
    let out = Command::new("ip")
        .args(args)
        .process_group(0)
        .output()
        .map_err(TopologyError::NoIp)?;
    if !out.status.success() {
        return Err(TopologyError::Command {
            command: format!("ip {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Writes `value` to `/sys/class/net/DEV/FILE` as namespace `ns` sees it (sysfs shows a
/// namespace's devices only when mounted in it, which `ip netns exec` does).
pub fn set_net_sysfs(ns: &str, dev: &str, file: &str, value: &str) -> Result<(), TopologyError> {
    let write = format!("echo {value} > /sys/class/net/{dev}/{file}");
    ip(&["netns", "exec", ns, "sh", "-c", &write]).map(|_| ())
}

/// Whether the namespaces this process makes outlive it: its mount of `/run/netns` (where
/// `ip netns add` mounts each, which keeps it alive) is shared, so that what it mounts there
/// is mounted in the mount namespaces it was copied from too. Under `ip netns exec`, whose
/// mounts are a private copy (a slave), a namespace made here dies with this process. No
/// `/run/netns` mount yet: `ip netns add` makes a shared one.
pub fn namespaces_outlive_this_process() -> bool {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return true;
    };
    // `ID PARENT MAJ:MIN ROOT MOUNT-POINT OPTIONS [OPTIONAL FIELDS…] - TYPE SOURCE …`
    let netns = mounts.lines().rev().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.get(4) == Some(&latlab_io::netns::DIR)).then_some(fields)
    });
    match netns {
        None => true,
        Some(fields) => fields
            .iter()
            .skip(6)
            .take_while(|f| **f != "-")
            .any(|f| f.starts_with("shared:")),
    }
}

/// Whether a namespace of this name exists now.
pub fn namespace_exists(name: &str) -> bool {
    latlab_io::netns::path(name).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether namespaces work here; when they do not, says why and the test is skipped, but
    /// never under `CI=true`, where namespaces must work.
    fn namespaces_or_skip() -> bool {
        latlab_io::precondition::met(why_no_namespaces())
    }

    #[test]
    fn namespaces_are_built_and_removed_on_drop() {
        if !namespaces_or_skip() {
            return;
        }
        let topo = ClientServer::namespaces().unwrap();
        let names = match &topo {
            ClientServer::Namespaces { client, server, .. } => {
                (client.name().to_string(), server.name().to_string())
            }
            ClientServer::Loopback { .. } => unreachable!("namespaces() builds namespaces"),
        };
        assert!(namespace_exists(&names.0) && namespace_exists(&names.1));
        assert!(topo.describe().contains("veth"));
        drop(topo);
        assert!(!namespace_exists(&names.0) && !namespace_exists(&names.1));
    }

    #[test]
    fn a_live_namespace_holds_its_owner_lock_and_its_removal_takes_the_lock_file() {
        if !namespaces_or_skip() {
            return;
        }
        let ns = Namespace::create(&format!("{}-lock", unique_prefix())).unwrap();
        let name = ns.name().to_string();
        assert!(
            name.starts_with(&format!(
                "latlab-{}-{}-",
                std::process::id(),
                process_token()
            )),
            "{name}"
        );
        assert!(
            OwnerLock::open(&lock_path(&name)).unwrap().is_none(),
            "the lock of a live namespace is held"
        );
        assert!(matches!(
            Namespace::create(&name),
            Err(TopologyError::Taken(_))
        ));
        assert!(
            namespace_exists(&name),
            "a refused create leaves the owner's namespace"
        );
        drop(ns);
        assert!(!namespace_exists(&name));
        assert!(!lock_path(&name).exists(), "the lock file goes with it");
    }

    #[test]
    fn client_emu_server_is_built_with_offloads_off_and_removed_on_drop() {
        if !namespaces_or_skip() {
            return;
        }
        let topo = ClientEmuServer::build().unwrap();
        let names: Vec<String> = [&topo.client, &topo.emu, &topo.server]
            .iter()
            .map(|n| n.name().to_string())
            .collect();
        assert!(names.iter().all(|n| namespace_exists(n)));
        let offloads = latlab_io::netns::run_in(topo.emu.name(), || {
            latlab_io::ethtool::offloads(ClientEmuServer::EMU_A)
        })
        .unwrap()
        .unwrap();
        assert!(offloads.iter().all(|(_, on)| !on), "{offloads:?}");
        assert!(topo.describe().contains("emu-a"));
        drop(topo);
        assert!(names.iter().all(|n| !namespace_exists(n)));
    }

    #[test]
    fn loopback_says_why() {
        let topo = ClientServer::build(false).unwrap();
        assert_eq!(topo.kind(), "loopback");
        assert!(topo.describe().contains("asked for"));
    }
}
