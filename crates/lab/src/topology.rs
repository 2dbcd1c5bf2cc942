//! Lab topologies: hosts as network namespaces joined by veth pairs, or loopback.
//!
//! Every namespace the lab makes is named `latlab-<pid>-<n>-<role>` and deleted when its
//! [`Namespace`] is dropped: on success, on error, on panic, and after Ctrl-C (the engines stop
//! on the flag, and the drop runs on the way out). Namespaces left by a latlab process that
//! was killed outright are removed the next time a topology is built.
//!
//! Addresses come from 198.18.0.0/15, the range RFC 2544 sets aside for benchmarking, and exist
//! only inside the namespaces.

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

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
}

/// A network namespace made by the lab, deleted on drop.
#[derive(Debug)]
pub struct Namespace {
    name: String,
}

impl Namespace {
    /// Creates a namespace called `name` with its loopback up.
    pub fn create(name: &str) -> Result<Namespace, TopologyError> {
        ip(&["netns", "add", name])?;
        let ns = Namespace {
            name: name.to_string(),
        };
        ip(&["-n", name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Its name, as `ip netns` knows it.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        // Deleting a namespace destroys the veth ends inside it, and with them their peers.
        let _ = ip(&["netns", "del", &self.name]);
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
        remove_stale();
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
    /// The emulator's interface towards the client.
    pub const EMU_A: &'static str = "emu-a";
    /// The emulator's interface towards the server.
    pub const EMU_B: &'static str = "emu-b";

    /// Builds the three namespaces (root only).
    pub fn build() -> Result<ClientEmuServer, TopologyError> {
        remove_stale();
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
            offloads_off(ns, dev)?;
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

fn unique_prefix() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "latlab-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Deletes `latlab-<pid>-…` namespaces whose process no longer exists.
fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix("latlab-") else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "del", name]);
        }
    }
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

/// Runs `ip ARGS` and returns its stdout.
fn ip(args: &[&str]) -> Result<String, TopologyError> {
    let out = Command::new("ip")
        .args(args)
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

/// Whether a namespace of this name exists now.
pub fn namespace_exists(name: &str) -> bool {
    latlab_io::netns::path(name).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_built_and_removed_on_drop() {
        if let Some(reason) = why_no_namespaces() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "namespaces must work under CI=true: {reason}"
            );
            eprintln!("skipped: {reason}");
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
    fn client_emu_server_is_built_with_offloads_off_and_removed_on_drop() {
        if let Some(reason) = why_no_namespaces() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "namespaces must work under CI=true: {reason}"
            );
            eprintln!("skipped: {reason}");
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
