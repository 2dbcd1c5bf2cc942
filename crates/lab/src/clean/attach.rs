//! The wiring a splice changed, written down before anything is changed
//! (`/run/latlab/<emulator namespace>.attach`, atomically), and the one way it is put back:
//! [`restore`], which any stage of a splice, or of an earlier restore, can be left at (`kill -9`)
//! and which [`crate::clean`] runs again from the file. The splice itself is `latlab emu
//! --attach`'s (`latlab_emu::attach`); its state file and restore live in the kit so that
//! `latlab clean` puts a spliced link back without the emulator's command.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::topology::{self, ip};

/// The name of the emulator's end of the new pair, inside the emulator's namespace.
pub const EMU_SIDE: &str = "latlab-emu";

/// What a splice changed: enough to put the host side back where it was from any stage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttachState {
    /// What was attached to, as a sentence names it (`namespace c1`).
    pub target: String,
    /// The device and inode of the namespace latlab ran in, which holds the bridge: a restore
    /// runs there and nowhere else.
    pub host_netns: (u64, u64),
    /// The emulator's namespace, which holds the host side while the splice lasts.
    pub emu_netns: String,
    /// The host side of the container's veth: its name, index, MAC address and MTU.
    pub veth: String,
    /// Its index, the same before and after (a device moved back keeps its index).
    pub ifindex: u32,
    /// Its MAC address, which the veth taking its place borrows.
    pub mac: String,
    /// Its MTU.
    pub mtu: u32,
    /// Whether it was up.
    pub up: bool,
    /// The bridge it was a port of, if any.
    pub master: Option<String>,
    /// Its port settings on that bridge, as `ip -d -j link` showed them.
    pub port: Map<String, Value>,
    /// The new veth that takes its place here (on the bridge).
    pub bridge_side: String,
}

impl AttachState {
    /// The state file of the emulator namespace `emu_netns`, beside its owner lock.
    pub fn path(emu_netns: &str) -> PathBuf {
        Path::new(topology::LOCK_DIR).join(format!("{emu_netns}.attach"))
    }

    /// Writes it to [`AttachState::path`], whole or not at all.
    pub fn write(&self) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        crate::results::write_atomic(&AttachState::path(&self.emu_netns), &bytes)
    }

    /// Reads the state file of `emu_netns`; `Ok(None)` when it has none.
    pub fn read(emu_netns: &str) -> std::io::Result<Option<AttachState>> {
        let path = AttachState::path(emu_netns);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(std::io::Error::new(
                e.kind(),
                format!("{}: {e}", path.display()),
            )),
        }
    }
}

/// One interface as `ip -d -j link` shows it: the fields the splice reads.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    /// Its name.
    pub name: String,
    /// Its index in its namespace.
    pub index: u32,
    /// `linkinfo.info_kind` (`veth`, `macvlan`, `dummy`, `bridge`…); `None` for a device
    /// without one (a physical NIC, loopback).
    pub kind: Option<String>,
    /// `link_type` (`ether`, `loopback`, `none`…).
    pub link_type: String,
    /// For a veth, its peer's index (`link_index`, IFLA_LINK).
    pub peer_index: Option<u32>,
    /// For a veth whose peer is in another namespace, that namespace's id as this one knows it
    /// (`link_netnsid`).
    pub peer_netnsid: Option<i64>,
    /// The device it is a port of (`master`).
    pub master: Option<String>,
    /// What its master is (`linkinfo.info_slave_kind`: `bridge`, `bond`…).
    pub master_kind: Option<String>,
    /// Its port settings on its master (`linkinfo.info_slave_data`), as shown.
    pub port: serde_json::Map<String, Value>,
    /// Administratively up (`UP` among its flags).
    pub up: bool,
    /// Its MTU.
    pub mtu: u32,
    /// Its MAC address, when it has one.
    pub mac: Option<String>,
    /// A device on a bus (`parentbus`): a physical NIC or a virtual machine's.
    pub on_bus: bool,
}

impl Link {
    /// Reads every interface of `ip -d -j link`'s output.
    pub fn parse_all(json: &str) -> Result<Vec<Link>, String> {
        let value: Value =
            serde_json::from_str(json).map_err(|e| format!("`ip -d -j link` printed {e}"))?;
        let links = value.as_array().ok_or("`ip -d -j link` printed no array")?;
        links.iter().map(Link::from_json).collect()
    }

    fn from_json(v: &Value) -> Result<Link, String> {
        let text = |key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
        let number = |key: &str| v.get(key).and_then(Value::as_u64);
        let info = v.get("linkinfo");
        let info_text = |key: &str| {
            info.and_then(|i| i.get(key))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let name = text("ifname").ok_or("an interface without ifname in `ip -d -j link`")?;
        let index = number("ifindex")
            .and_then(|i| u32::try_from(i).ok())
            .ok_or_else(|| format!("{name}: no ifindex in `ip -d -j link`"))?;
        let flags = v.get("flags").and_then(Value::as_array);
        Ok(Link {
            index,
            kind: info_text("info_kind"),
            link_type: text("link_type").unwrap_or_default(),
            peer_index: number("link_index").and_then(|i| u32::try_from(i).ok()),
            peer_netnsid: v.get("link_netnsid").and_then(Value::as_i64),
            master: text("master"),
            master_kind: info_text("info_slave_kind"),
            port: info
                .and_then(|i| i.get("info_slave_data"))
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            up: flags.is_some_and(|f| f.iter().any(|f| f == "UP")),
            mtu: number("mtu")
                .and_then(|m| u32::try_from(m).ok())
                .unwrap_or(0),
            mac: text("address"),
            on_bus: v.get("parentbus").is_some(),
            name,
        })
    }
}

/// The bridge port settings a splice carries over, by their `ip -d -j link` key (the same word
/// as `ip link set … type bridge_slave` takes): booleans set `on`/`off`, numbers as they are.
const PORT_SETTINGS: &[&str] = &[
    "priority",
    "cost",
    "hairpin",
    "guard",
    "root_block",
    "fastleave",
    "learning",
    "flood",
    "proxy_arp",
    "proxy_arp_wifi",
    "mcast_flood",
    "bcast_flood",
    "mcast_to_unicast",
    "neigh_suppress",
    "vlan_tunnel",
    "isolated",
    "locked",
];

/// The interface `name` in namespace `ns` (`None`: this one), if it exists.
pub fn link(ns: Option<&str>, name: &str) -> Result<Option<Link>, String> {
    let mut args = Vec::new();
    if let Some(ns) = ns {
        args.extend(["-n", ns]);
    }
    args.extend(["-d", "-j", "link", "show", "dev", name]);
    match ip(&args) {
        Ok(json) => Ok(Link::parse_all(&json)?.into_iter().next()),
        Err(topology::TopologyError::Command { stderr, .. })
            if stderr.contains("does not exist") =>
        {
            Ok(None)
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Makes `dev`'s port settings on its bridge those of `wanted`, setting only what differs.
pub fn set_port(dev: &str, wanted: &Map<String, Value>) -> Result<(), String> {
    let now = link(None, dev)?.map(|l| l.port).unwrap_or_default();
    let mut args = vec![
        "link".to_string(),
        "set".into(),
        "dev".into(),
        dev.into(),
        "type".into(),
        "bridge_slave".into(),
    ];
    for key in PORT_SETTINGS {
        let Some(value) = wanted.get(*key) else {
            continue;
        };
        if now.get(*key) == Some(value) {
            continue;
        }
        let value = match value {
            Value::Bool(true) => "on".to_string(),
            Value::Bool(false) => "off".to_string(),
            Value::Number(n) => n.to_string(),
            _ => continue,
        };
        args.extend([key.to_string(), value]);
    }
    if args.len() > 6 {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ip(&args).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Puts the wiring `state` describes back, from whatever stage a splice or an earlier restore
/// got to, in the namespace the calling thread is in (which must be the one the splice ran
/// in): the host side moved back here from the emulator's namespace, the veth that took its
/// place deleted, then the host side put on its bridge with its port settings, MTU and up
/// state. The emulator's namespace is left for the caller to delete, once [`still_held`] says
/// the host side is no longer in it. A host side that is gone (its container stopped, which
/// destroys the pair) is not an error: there is nothing to put back. An interface of its name
/// with another index is not the spliced one, and is not touched.
pub fn restore(state: &AttachState) -> Result<(), String> {
    let emu = state.emu_netns.as_str();
    let veth = state.veth.as_str();
    if still_held(state)? {
        let here = latlab_io::netns::current_thread_path().map_err(|e| e.to_string())?;
        let here = here.to_string_lossy();
        ip(&["-n", emu, "link", "set", "dev", veth, "netns", &here])
            .map_err(|e| format!("moving {veth} back from {emu}: {e}"))?;
    }
    // The new pair goes before the host side rejoins the bridge, which then gives it the port
    // number the new veth had taken over from it (the lowest free one).
    if link(None, &state.bridge_side)?.is_some() {
        // Its peer in the emulator's namespace goes with it.
        ip(&["link", "del", "dev", &state.bridge_side]).map_err(|e| e.to_string())?;
    }
    match link(None, veth)? {
        Some(host) if host.index == state.ifindex => {
            let mtu = state.mtu.to_string();
            ip(&["link", "set", "dev", veth, "mtu", &mtu]).map_err(|e| e.to_string())?;
            // A bridge deleted meanwhile cannot have its port back.
            let bridge = state
                .master
                .as_ref()
                .filter(|b| link(None, b).is_ok_and(|l| l.is_some()));
            if let Some(bridge) = bridge {
                if host.master.as_deref() != Some(bridge) {
                    ip(&["link", "set", "dev", veth, "master", bridge])
                        .map_err(|e| format!("putting {veth} back on {bridge}: {e}"))?;
                }
                set_port(veth, &state.port)?;
            }
            let up = if state.up { "up" } else { "down" };
            ip(&["link", "set", "dev", veth, up]).map_err(|e| e.to_string())?;
        }
        // Another interface of that name is not ours to touch; the host side is gone.
        Some(_) | None => {}
    }
    Ok(())
}

/// Whether the emulator's namespace still holds the host side (then deleting the namespace
/// would destroy it, and the container's end with it).
pub fn still_held(state: &AttachState) -> Result<bool, String> {
    if !topology::namespace_exists(&state.emu_netns) {
        return Ok(false);
    }
    Ok(link(Some(&state.emu_netns), &state.veth)?.is_some())
}

/// A path to the namespace `(dev, ino)` that this process can open, if one is known: this
/// process's own, a named one, or the first process's.
pub fn find_netns(id: (u64, u64)) -> Option<PathBuf> {
    let mut candidates = vec![PathBuf::from("/proc/thread-self/ns/net")];
    if let Ok(entries) = std::fs::read_dir(latlab_io::netns::DIR) {
        candidates.extend(entries.flatten().map(|e| e.path()));
    }
    candidates.push(PathBuf::from("/proc/1/ns/net"));
    candidates
        .into_iter()
        .find(|path| latlab_io::netns::id(path).is_ok_and(|found| (found.dev, found.ino) == id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_file_reads_back_as_written() {
        let state = AttachState {
            target: "namespace c".into(),
            host_netns: (4, 4026531840),
            emu_netns: "latlab-1-ab-0-attach".into(),
            veth: "veth1a2b".into(),
            ifindex: 7,
            mac: "de:37:57:e7:1b:24".into(),
            mtu: 1450,
            up: true,
            master: Some("br0".into()),
            port: serde_json::json!({"hairpin": true, "cost": 2})
                .as_object()
                .unwrap()
                .clone(),
            bridge_side: "latlab7".into(),
        };
        let json = serde_json::to_string(&state).unwrap();
        let back: AttachState = serde_json::from_str(&json).unwrap();
        assert_eq!(back, state);
        assert_eq!(
            AttachState::path(&state.emu_netns),
            Path::new("/run/latlab/latlab-1-ab-0-attach.attach")
        );
    }
}
