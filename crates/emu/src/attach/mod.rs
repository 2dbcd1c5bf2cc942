//! `latlab emu --attach NETNS` / `--attach-pid PID`: the emulated link spliced into a running
//! namespace's veth, without restarting anything, and the wiring put back as it was.
//!
//! A container on a Linux bridge (as Docker and Podman wire one) has a veth whose peer, the
//! host side H, is a port of the bridge BR. The splice:
//!
//! 1. takes a lock keyed on the target namespace (`/run/latlab/attach-<dev>-<ino>.lock`), so a
//!    second attach to it is refused while the first lives;
//! 2. finds H ([`find`]: the namespace's one veth whose peer is here; a macvlan, a physical NIC,
//!    a dummy or no interface but lo is refused naming it), and refuses an H that carries
//!    addresses or routes, is down, is a port of something other than a bridge, or whose bridge
//!    filters VLANs: none of those would be put back whole;
//! 3. makes the emulator's namespace (a lab [`Namespace`], `latlab-…-attach`) and writes what
//!    it is about to change to its state file (the kit's [`state`]) before changing anything;
//! 4. moves H into that namespace (H keeps its index, MAC and MTU; the container sees its link
//!    go down and come back), and makes a new pair: `latlab<index of H>`, which takes H's place
//!    on BR (H's MAC, MTU and port settings, so the bridge's own address stays as it was), and
//!    [`state::EMU_SIDE`] beside H in the emulator's namespace.
//!
//! The emulator then bridges H (side A, the container's) and [`state::EMU_SIDE`] (side B, the
//! bridge's): `--a-to-b` is what the container sends, `--b-to-a` what it receives.
//!
//! Putting it back ([`state::restore`]) moves H back here first, deletes the new pair, puts H
//! on BR with its port settings, and only then deletes the namespace: deleting a namespace
//! destroys the veths inside it, which would take the container's end with them. It runs on
//! the way out of every run (error and stopping signal included, through [`Spliced`]'s drop as
//! the last resort), and after `kill -9` from the state file, in [`latlab_lab::clean`], before
//! the emulator's namespace is removed. Nothing here touches an interface the splice did not
//! make or the target's veth did not name.

pub mod find;

use std::path::{Path, PathBuf};

use latlab_io::lock::OwnerLock;
use latlab_lab::clean::attach as state;

pub use find::Target;
use latlab_lab::topology::{self, ip, Namespace};
use state::AttachState;

/// Why a splice was refused or failed; each a line naming the flag or what was found.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// The target namespace does not exist (a name `ip netns` does not know, a process gone).
    #[error("{flag}: no such network namespace ({path}: {reason})")]
    Gone {
        /// The flag and its value.
        flag: String,
        /// The file looked for.
        path: String,
        /// The system's word for it.
        reason: String,
    },
    /// Another live `latlab emu` is attached to the target namespace.
    #[error("{0}: already attached by another running latlab emu")]
    Taken(String),
    /// The target's link cannot be spliced: what was found.
    #[error("{flag}: {found}")]
    Refused {
        /// The flag and its value.
        flag: String,
        /// What was found, in one sentence.
        found: String,
    },
    /// Building the splice failed (it was put back).
    #[error("{flag}: {reason}")]
    Failed {
        /// The flag and its value.
        flag: String,
        /// What failed.
        reason: String,
    },
    /// The wiring could not be put back whole; the state file is kept for `latlab clean`.
    #[error("putting back the wiring of {target}: {reason}; `latlab clean` tries again")]
    NotRestored {
        /// What was attached to.
        target: String,
        /// What failed.
        reason: String,
    },
}

/// The lock that marks `target` (by its namespace's identity) as attached to.
pub fn target_lock_path(id: latlab_io::netns::NetnsId) -> PathBuf {
    Path::new(topology::LOCK_DIR).join(format!("attach-{}-{}.lock", id.dev, id.ino))
}

/// A splice in place; dropped, it puts the wiring back (call [`Spliced::restore`] to hear how
/// that went).
#[derive(Debug)]
pub struct Spliced {
    state: AttachState,
    /// `None` once deleted, or once left for `latlab clean`.
    emu: Option<Namespace>,
    /// Held while the splice lasts.
    target_lock: Option<OwnerLock>,
}

impl Spliced {
    /// Splices the emulator's namespace into `target`'s veth, as the module says, for frames
    /// of at most `max_frame` bytes (a link whose MTU needs more is refused); on any failure
    /// what was done is put back before the error is returned.
    pub fn splice(target: &Target, max_frame: usize) -> Result<Spliced, AttachError> {
        let flag = target.flag();
        let refused = |found: String| AttachError::Refused {
            flag: flag.clone(),
            found,
        };
        let failed = |reason: String| AttachError::Failed {
            flag: flag.clone(),
            reason,
        };
        let path = target.path();
        let id = latlab_io::netns::id(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => AttachError::Gone {
                flag: flag.clone(),
                path: path.display().to_string(),
                reason: std::io::Error::from(e.kind()).to_string(),
            },
            _ => failed(e.to_string()),
        })?;
        let here = latlab_io::netns::id(Path::new("/proc/thread-self/ns/net"))
            .map_err(|e| failed(e.to_string()))?;
        if id == here {
            return Err(refused(format!(
                "{} is the namespace latlab runs in; run latlab where the other end of its veth is",
                target.describe()
            )));
        }
        let target_lock = OwnerLock::create(&target_lock_path(id))
            .map_err(|e| failed(e.to_string()))?
            .ok_or_else(|| AttachError::Taken(flag.clone()))?;
        let prepared = (|| {
            let inside = latlab_io::netns::run_in_path(&path, || ip(&["-d", "-j", "link", "show"]))
                .map_err(|e| failed(e.to_string()))?
                .map_err(|e| failed(e.to_string()))?;
            let inside = state::Link::parse_all(&inside).map_err(&failed)?;
            let ours = ip(&["-d", "-j", "link", "show"]).map_err(|e| failed(e.to_string()))?;
            let ours = state::Link::parse_all(&ours).map_err(&failed)?;
            let found = find::choose(&target.describe(), &inside, &ours).map_err(&refused)?;
            check_host_side(&found, max_frame).map_err(&refused)?;
            // Were it to die with this process (`kill -9`), the host side inside would die
            // too, and the container's end with it.
            if !topology::namespaces_outlive_this_process() {
                return Err(refused(
                    "latlab runs in a mount namespace of its own (as under `ip netns exec`), \
                     where the namespace the link is spliced through would die with it; run it \
                     in the host's (`nsenter --net=/run/netns/NAME latlab …` enters a network \
                     namespace alone)"
                        .into(),
                ));
            }
            let emu = Namespace::create(&format!("{}-attach", topology::unique_prefix()))
                .map_err(|e| failed(e.to_string()))?;
            Ok((found.host, emu))
        })();
        let (host, emu) = match prepared {
            Ok(prepared) => prepared,
            Err(e) => {
                // Nothing was changed: the target's lock file goes too.
                let _ = target_lock.remove();
                return Err(e);
            }
        };
        let state = AttachState {
            target: target.describe(),
            host_netns: (here.dev, here.ino),
            emu_netns: emu.name().to_string(),
            veth: host.name.clone(),
            ifindex: host.index,
            mac: host.mac.clone().unwrap_or_default(),
            mtu: host.mtu,
            up: host.up,
            master: host.master.clone(),
            port: host.port.clone(),
            bridge_side: format!("latlab{}", host.index),
        };
        // Written before anything is changed: from here a `kill -9` leaves what clean needs.
        if let Err(e) = state.write() {
            drop(emu);
            let _ = target_lock.remove();
            return Err(failed(e.to_string()));
        }
        let spliced = Spliced {
            state,
            emu: Some(emu),
            target_lock: Some(target_lock),
        };
        if let Err(reason) = spliced.wire() {
            return Err(match spliced.restore() {
                Ok(()) => failed(reason),
                Err(e) => e,
            });
        }
        Ok(spliced)
    }

    /// Step 4 of the module's list: H into the emulator's namespace, the new pair in its place.
    fn wire(&self) -> Result<(), String> {
        let s = &self.state;
        let (emu, veth, x) = (
            s.emu_netns.as_str(),
            s.veth.as_str(),
            s.bridge_side.as_str(),
        );
        let run = |args: &[&str]| ip(args).map(|_| ()).map_err(|e| e.to_string());
        // No IPv6 in the emulator's namespace: H sends nothing of its own toward the container
        // (router solicitations, MLD) while it is there.
        let _ = latlab_io::netns::run_in(emu, || {
            for conf in ["all", "default"] {
                let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{conf}/disable_ipv6"), "1");
            }
        });
        // Moved before anything else is made there, so its index is free and it keeps it.
        run(&["link", "set", "dev", veth, "netns", emu])?;
        run(&["-n", emu, "link", "set", "dev", veth, "up"])?;
        let mtu = s.mtu.to_string();
        run(&[
            "link",
            "add",
            x,
            "mtu",
            &mtu,
            "type",
            "veth",
            "peer",
            "name",
            state::EMU_SIDE,
            "mtu",
            &mtu,
            "netns",
            emu,
        ])?;
        if !s.mac.is_empty() {
            run(&["link", "set", "dev", x, "address", &s.mac])?;
        }
        run(&["-n", emu, "link", "set", "dev", state::EMU_SIDE, "up"])?;
        if let Some(bridge) = &s.master {
            run(&["link", "set", "dev", x, "master", bridge])?;
            state::set_port(x, &s.port)?;
        }
        run(&["link", "set", "dev", x, "up"])
    }

    /// Side A of the emulator: the host side of the target's veth (the container's side).
    pub fn iface_a(&self) -> &str {
        &self.state.veth
    }

    /// Side B of the emulator: its end of the new pair (the bridge's side).
    pub fn iface_b(&self) -> &str {
        state::EMU_SIDE
    }

    /// The emulator's namespace, where both sides are.
    pub fn netns(&self) -> &str {
        &self.state.emu_netns
    }

    /// One line saying what was spliced where.
    pub fn describe(&self) -> String {
        let s = &self.state;
        format!(
            "latlab emu: {} spliced: A = {} (toward the container: --b-to-a; from it: \
             --a-to-b), B = {} ({} in its place{}), in namespace {}",
            s.target,
            s.veth,
            state::EMU_SIDE,
            s.bridge_side,
            s.master
                .as_ref()
                .map(|b| format!(" on bridge {b}"))
                .unwrap_or_default(),
            s.emu_netns
        )
    }

    /// Puts the wiring back and removes the emulator's namespace; when that cannot be done
    /// whole, the namespace and the state file are left for `latlab clean`, and the error says
    /// what failed.
    pub fn restore(mut self) -> Result<(), AttachError> {
        self.restore_now()
    }

    fn restore_now(&mut self) -> Result<(), AttachError> {
        let Some(emu) = self.emu.take() else {
            return Ok(());
        };
        let not_restored = |reason: String| AttachError::NotRestored {
            target: self.state.target.clone(),
            reason,
        };
        let put_back =
            state::restore(&self.state).and_then(|()| match state::still_held(&self.state)? {
                true => Err(format!(
                    "{} is still in {}",
                    self.state.veth, self.state.emu_netns
                )),
                false => Ok(()),
            });
        match put_back {
            Ok(()) => {
                let _ = std::fs::remove_file(AttachState::path(emu.name()));
                drop(emu);
                if let Some(lock) = self.target_lock.take() {
                    let _ = lock.remove();
                }
                Ok(())
            }
            Err(reason) => {
                // Deleting the namespace would destroy the container's veth: it stays, its
                // lock let go of, for `latlab clean` to put back from the state file.
                emu.leave();
                Err(not_restored(reason))
            }
        }
    }
}

impl Drop for Spliced {
    fn drop(&mut self) {
        if let Err(e) = self.restore_now() {
            eprintln!("latlab: {e}");
        }
    }
}

/// Refuses a host side that a splice could not put back whole (down, a port of something
/// other than a Linux bridge, on a bridge that filters VLANs, or carrying addresses or routes)
/// or whose frames are longer than `max_frame`.
fn check_host_side(found: &find::Found, max_frame: usize) -> Result<(), String> {
    let host = &found.host;
    let name = &host.name;
    // An Ethernet header and an 802.1Q tag on top of the MTU.
    let needed = host.mtu as usize + 18;
    if needed > max_frame {
        return Err(format!(
            "{name}'s MTU is {}: frames of up to {needed} bytes need --frame-size {needed}",
            host.mtu
        ));
    }
    if !host.up {
        return Err(format!(
            "{name} (the peer of {}) is down: there is no link to splice",
            found.inner.name
        ));
    }
    if let (Some(master), Some(kind)) = (&host.master, &host.master_kind) {
        if kind != "bridge" {
            return Err(format!(
                "{name} is a port of {master}, a {kind}: latlab emu splices veths on a Linux \
                 bridge or on none"
            ));
        }
        let bridge = ip(&["-d", "-j", "link", "show", "dev", master]).map_err(|e| e.to_string())?;
        if bridge.contains("\"vlan_filtering\":1") {
            return Err(format!(
                "bridge {master} filters VLANs (vlan_filtering 1): {name}'s VLANs would not be \
                 put back"
            ));
        }
    }
    let json = |args: &[&str]| -> Result<Vec<serde_json::Value>, String> {
        let out = ip(args).map_err(|e| e.to_string())?;
        let v: serde_json::Value = serde_json::from_str(&out).map_err(|e| e.to_string())?;
        Ok(v.as_array().cloned().unwrap_or_default())
    };
    let addrs: Vec<String> = json(&["-j", "addr", "show", "dev", name])?
        .iter()
        .flat_map(|l| l["addr_info"].as_array().cloned().unwrap_or_default())
        .filter(|a| !(a["family"] == "inet6" && a["scope"] == "link"))
        .map(|a| format!("{}/{}", a["local"].as_str().unwrap_or("?"), a["prefixlen"]))
        .collect();
    if !addrs.is_empty() {
        return Err(format!(
            "{name} carries addresses ({}): latlab emu splices veths without addresses (a \
             bridge port, or an unaddressed peer)",
            addrs.join(", ")
        ));
    }
    let mut routes: Vec<String> =
        json(&["-4", "-j", "route", "show", "table", "all", "dev", name])?
            .iter()
            .map(|r| r["dst"].as_str().unwrap_or("?").to_string())
            .collect();
    routes.extend(
        json(&["-6", "-j", "route", "show", "table", "all", "dev", name])?
            .iter()
            .filter(|r| r["protocol"] != "kernel")
            .map(|r| r["dst"].as_str().unwrap_or("?").to_string()),
    );
    if !routes.is_empty() {
        return Err(format!(
            "routes go through {name} ({}): they would be lost; not spliced",
            routes.join(", ")
        ));
    }
    Ok(())
}
