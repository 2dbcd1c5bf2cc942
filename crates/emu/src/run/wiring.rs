//! The wiring of `latlab run`: the command's namespace, the emulator's, and the one interface
//! this run adds to the namespace it was started in (the host side).
//!
//! ```text
//!   app namespace            emulator namespace                 this namespace (the host)
//!   veth0 (x.x.x.2/30) ── emu-a ══ latlab emu ══ emu-b ── llTOKEN-N (x.x.x.1/30, LATLAB_HOST)
//! ```
//!
//! The command's default route leads to the host side; nothing else leads out of its namespace.
//! Each run takes a /30 of its own from [`POOL`] (or the one `--subnet` names) under an owner
//! lock, `/run/latlab/run-A.B.C.D-LEN.lock`, so runs at once never share one, and a subnet any
//! address or route of this namespace already covers is never taken. Everything goes on drop:
//! the host side's interface first (at once: a namespace is destroyed by the kernel a moment
//! later, its interfaces with it), then both namespaces and the subnet's lock. After `kill -9`,
//! the namespaces' and the subnet's free locks tell `latlab clean` what to remove
//! ([`latlab_lab::clean`]).

use std::net::Ipv4Addr;

use latlab_io::lock::OwnerLock;

use latlab_lab::topology::{self, ip, Namespace, TopologyError};

/// The subnets runs take their /30s from when `--subnet` is not given: 198.19.0.0/16, the upper
/// half of the range RFC 2544 sets aside for benchmarking (the lab's own namespaces use the
/// lower half, and only inside themselves).
pub const POOL: (Ipv4Addr, u8) = (Ipv4Addr::new(198, 19, 0, 0), 16);

/// A subnet of this namespace: an address and a prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subnet {
    /// Its first address (the network).
    pub network: Ipv4Addr,
    /// Its prefix length, at most 30 (two addresses for hosts).
    pub len: u8,
}

impl Subnet {
    /// The subnet `text` names (`198.19.7.0/30`); the address is masked to its network.
    pub fn parse(text: &str) -> Result<Subnet, String> {
        let (addr, len) = text
            .split_once('/')
            .ok_or_else(|| format!("--subnet {text}: not ADDRESS/LENGTH (198.19.7.0/30)"))?;
        let addr: Ipv4Addr = addr
            .parse()
            .map_err(|_| format!("--subnet {text}: {addr} is not an IPv4 address"))?;
        let len: u8 = len
            .parse()
            .ok()
            .filter(|l| (8..=30).contains(l))
            .ok_or_else(|| format!("--subnet {text}: the length must be 8 to 30"))?;
        Ok(Subnet::new(addr, len))
    }

    fn new(addr: Ipv4Addr, len: u8) -> Subnet {
        let mask = u32::MAX << (32 - len);
        Subnet {
            network: Ipv4Addr::from(u32::from(addr) & mask),
            len,
        }
    }

    /// The host side's address: the subnet's first host address.
    pub fn host(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) + 1)
    }

    /// The command's address: the second.
    pub fn app(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) + 2)
    }

    /// Whether the two subnets share an address.
    pub fn overlaps(&self, other: &Subnet) -> bool {
        let len = self.len.min(other.len);
        Subnet::new(self.network, len) == Subnet::new(other.network, len)
    }

    /// The `i`th /30 of [`POOL`].
    fn of_pool(i: u32) -> Subnet {
        Subnet::new(Ipv4Addr::from(u32::from(POOL.0) + 4 * i), 30)
    }

    /// How many /30s [`POOL`] holds.
    fn pool_size() -> u32 {
        1 << (30 - POOL.1)
    }
}

impl std::fmt::Display for Subnet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.len)
    }
}

/// The owner lock file of a run's subnet.
pub fn subnet_lock_path(subnet: &Subnet) -> std::path::PathBuf {
    std::path::Path::new(topology::LOCK_DIR)
        .join(format!("run-{}-{}.lock", subnet.network, subnet.len))
}

/// The subnets this namespace's addresses and routes cover (the default route aside).
pub fn subnets_in_use() -> Result<Vec<Subnet>, TopologyError> {
    let mut used = Vec::new();
    for line in ip(&["-4", "-o", "addr", "show"])?.lines() {
        let mut words = line.split_whitespace();
        if words.any(|w| w == "inet") {
            if let Some(Ok(s)) = words.next().map(Subnet::parse_any) {
                used.push(s);
            }
        }
    }
    for line in ip(&["-4", "route", "show", "table", "all"])?.lines() {
        let mut words = line.split_whitespace();
        let first = match words.next() {
            // `local`, `broadcast`, `unicast`… come before the destination.
            Some(w) if w.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) => {
                if w == "default" {
                    continue;
                }
                words.next()
            }
            first => first,
        };
        if let Some(Ok(s)) = first.map(Subnet::parse_any) {
            used.push(s);
        }
    }
    Ok(used)
}

impl Subnet {
    /// `A.B.C.D/LEN` or `A.B.C.D` (a /32) of any length, for what this namespace holds.
    fn parse_any(text: &str) -> Result<Subnet, ()> {
        let (addr, len) = text.split_once('/').unwrap_or((text, "32"));
        let addr: Ipv4Addr = addr.parse().map_err(|_| ())?;
        let len: u8 = len.parse().map_err(|_| ())?;
        if len == 0 || len > 32 {
            return Err(());
        }
        let mask = u32::MAX.checked_shl(32 - len as u32).unwrap_or(0);
        Ok(Subnet {
            network: Ipv4Addr::from(u32::from(addr) & mask),
            len,
        })
    }
}

/// A subnet this run holds, with its owner lock.
#[derive(Debug)]
struct HeldSubnet {
    subnet: Subnet,
    lock: Option<OwnerLock>,
}

impl Drop for HeldSubnet {
    fn drop(&mut self) {
        if let Some(lock) = self.lock.take() {
            let _ = lock.remove();
        }
    }
}

/// Takes `wanted`, or the first free /30 of [`POOL`]: one no other live run holds and no
/// address or route of this namespace covers.
fn take_subnet(wanted: Option<Subnet>) -> Result<HeldSubnet, RunWiringError> {
    let used = subnets_in_use()?;
    let take = |subnet: Subnet| -> Result<Option<HeldSubnet>, RunWiringError> {
        let path = subnet_lock_path(&subnet);
        let lock = OwnerLock::create(&path).map_err(|source| TopologyError::Lock {
            name: path.display().to_string(),
            source,
        })?;
        Ok(lock.map(|lock| HeldSubnet {
            subnet,
            lock: Some(lock),
        }))
    };
    if let Some(subnet) = wanted {
        if let Some(by) = used.iter().find(|u| u.overlaps(&subnet)) {
            return Err(RunWiringError::SubnetInUse {
                subnet,
                by: format!("{by} is already an address or route here"),
            });
        }
        return take(subnet)?.ok_or(RunWiringError::SubnetInUse {
            subnet,
            by: "another latlab run holds it".into(),
        });
    }
    for i in 0..Subnet::pool_size() {
        let subnet = Subnet::of_pool(i);
        if used.iter().any(|u| u.overlaps(&subnet)) {
            continue;
        }
        if let Some(held) = take(subnet)? {
            return Ok(held);
        }
    }
    Err(RunWiringError::PoolFull)
}

/// Errors wiring a run.
#[derive(Debug, thiserror::Error)]
pub enum RunWiringError {
    /// Building a namespace, an interface or an address failed.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// The subnet asked for is taken.
    #[error("--subnet {subnet}: {by}")]
    SubnetInUse {
        /// The subnet.
        subnet: Subnet,
        /// What holds it.
        by: String,
    },
    /// Every /30 of the pool is taken.
    #[error("every /30 of {}/{} is taken; give one with --subnet", POOL.0, POOL.1)]
    PoolFull,
}

/// A run's wiring, removed on drop.
#[derive(Debug)]
pub struct RunWiring {
    /// The command's namespace.
    pub app: Namespace,
    /// The emulator's namespace.
    pub emu: Namespace,
    /// The host side's interface, in this namespace.
    pub host_if: String,
    subnet: HeldSubnet,
}

impl RunWiring {
    /// The emulator's interface towards the command.
    pub const EMU_APP: &'static str = "emu-a";
    /// The emulator's interface towards the host side.
    pub const EMU_HOST: &'static str = "emu-b";
    /// The command's interface.
    pub const APP_IF: &'static str = "veth0";

    /// Builds the wiring in this namespace, on `subnet` or on a free /30 of the pool.
    /// Offloads are left as a new veth has them, as containers are wired: the emulator hands
    /// frames over as they were on the wire.
    pub fn build(subnet: Option<Subnet>) -> Result<RunWiring, RunWiringError> {
        let held = take_subnet(subnet)?;
        let prefix = topology::unique_prefix();
        let app = Namespace::create(&format!("{prefix}-run"))?;
        let emu = Namespace::create(&format!("{prefix}-runemu"))?;
        // `ll` + the process's random token + this process's count of topologies: at most 15
        // bytes, and unique among the runs of this namespace.
        let mut parts = prefix.rsplit('-');
        let (n, token) = (parts.next().unwrap_or("0"), parts.next().unwrap_or(""));
        let host_if = format!("ll{token}{n}");
        let wiring = RunWiring {
            app,
            emu,
            host_if,
            subnet: held,
        };
        wiring.wire()?;
        Ok(wiring)
    }

    fn wire(&self) -> Result<(), TopologyError> {
        let (app, emu, host_if) = (self.app.name(), self.emu.name(), self.host_if.as_str());
        let subnet = self.subnet.subnet;
        let (host_addr, app_addr) = (subnet.host(), subnet.app());
        ip(&[
            "link",
            "add",
            Self::APP_IF,
            "netns",
            app,
            "type",
            "veth",
            "peer",
            "name",
            Self::EMU_APP,
            "netns",
            emu,
        ])?;
        ip(&[
            "link",
            "add",
            host_if,
            "type",
            "veth",
            "peer",
            "name",
            Self::EMU_HOST,
            "netns",
            emu,
        ])?;
        let len = subnet.len.to_string();
        ip(&[
            "-n",
            app,
            "addr",
            "add",
            &format!("{app_addr}/{len}"),
            "dev",
            Self::APP_IF,
        ])?;
        ip(&["addr", "add", &format!("{host_addr}/{len}"), "dev", host_if])?;
        for dev in [Self::EMU_APP, Self::EMU_HOST] {
            ip(&["-n", emu, "link", "set", dev, "up"])?;
        }
        ip(&["-n", app, "link", "set", Self::APP_IF, "up"])?;
        ip(&["link", "set", host_if, "up"])?;
        ip(&[
            "-n",
            app,
            "route",
            "add",
            "default",
            "via",
            &host_addr.to_string(),
        ])?;
        // Static neighbours: no ARP round trip through the emulated link inside the first
        // exchange the command measures.
        let app_mac = topology::mac_of(app, Self::APP_IF)?;
        let host_mac = local_mac(host_if)?;
        ip(&[
            "-n",
            app,
            "neigh",
            "replace",
            &host_addr.to_string(),
            "lladdr",
            &host_mac,
            "dev",
            Self::APP_IF,
            "nud",
            "permanent",
        ])?;
        ip(&[
            "neigh",
            "replace",
            &app_addr.to_string(),
            "lladdr",
            &app_mac,
            "dev",
            host_if,
            "nud",
            "permanent",
        ])?;
        Ok(())
    }

    /// The run's subnet.
    pub fn subnet(&self) -> Subnet {
        self.subnet.subnet
    }
}

impl Drop for RunWiring {
    fn drop(&mut self) {
        // At once, not when the kernel gets round to destroying the emulator's namespace.
        let _ = ip(&["link", "del", &self.host_if]);
        // The namespaces and the subnet's lock go with the fields, in that order.
    }
}

/// The MAC address of `dev` in this namespace.
fn local_mac(dev: &str) -> Result<String, TopologyError> {
    let out = ip(&["-o", "link", "show", "dev", dev])?;
    out.split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .map(str::to_string)
        .ok_or_else(|| TopologyError::Command {
            command: format!("ip -o link show dev {dev}"),
            stderr: "no link/ether address in its output".into(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnets_parse_mask_and_overlap() {
        let s = Subnet::parse("198.19.7.5/30").unwrap();
        assert_eq!(s.to_string(), "198.19.7.4/30");
        assert_eq!(s.host(), Ipv4Addr::new(198, 19, 7, 5));
        assert_eq!(s.app(), Ipv4Addr::new(198, 19, 7, 6));
        assert!(s.overlaps(&Subnet::parse("198.19.0.0/16").unwrap()));
        assert!(!s.overlaps(&Subnet::parse("198.19.7.8/30").unwrap()));
        for bad in [
            "198.19.7.0",
            "198.19.7.0/31",
            "198.19.7/30",
            "x/30",
            "10.0.0.0/7",
        ] {
            let e = Subnet::parse(bad).unwrap_err();
            assert!(e.starts_with(&format!("--subnet {bad}: ")), "{e}");
        }
        assert_eq!(Subnet::of_pool(0).to_string(), "198.19.0.0/30");
        assert_eq!(Subnet::of_pool(65).to_string(), "198.19.1.4/30");
        assert_eq!(
            Subnet::of_pool(Subnet::pool_size() - 1).to_string(),
            "198.19.255.252/30"
        );
        assert_eq!(
            Subnet::parse_any("10.1.2.3").unwrap(),
            Subnet::parse("10.1.2.3/30")
                .map(|_| Subnet {
                    network: Ipv4Addr::new(10, 1, 2, 3),
                    len: 32
                })
                .unwrap()
        );
    }
}
