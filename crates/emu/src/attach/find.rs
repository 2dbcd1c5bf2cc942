//! Which link of a namespace `latlab emu --attach` splices: its one veth whose peer is in the
//! namespace latlab runs in (the host side), read from `ip -d -j link` on both sides. Anything
//! else is refused with one line naming what was found.

use std::path::PathBuf;

use latlab_lab::clean::attach::Link;

/// The namespace to attach to, as the flags named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `--attach NETNS`: a namespace `ip netns` knows by name (`/run/netns/NETNS`).
    Named(String),
    /// `--attach-pid PID`: the namespace of a process (a container's).
    Pid(u32),
}

impl Target {
    /// The file of the namespace: `/run/netns/NAME` or `/proc/PID/ns/net`.
    pub fn path(&self) -> PathBuf {
        match self {
            Target::Named(name) => latlab_io::netns::path(name),
            Target::Pid(pid) => PathBuf::from(format!("/proc/{pid}/ns/net")),
        }
    }

    /// The flag and its value: `--attach NAME`, `--attach-pid PID`.
    pub fn flag(&self) -> String {
        match self {
            Target::Named(name) => format!("--attach {name}"),
            Target::Pid(pid) => format!("--attach-pid {pid}"),
        }
    }

    /// What a sentence calls it: `namespace NAME`, `the namespace of process PID`.
    pub fn describe(&self) -> String {
        match self {
            Target::Named(name) => format!("namespace {name}"),
            Target::Pid(pid) => format!("the namespace of process {pid}"),
        }
    }
}

/// What a splice takes: the namespace's veth and its peer in this namespace.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    /// The veth inside the target namespace (a container's `eth0`).
    pub inner: Link,
    /// Its peer here: the host side, which the splice moves into the emulator's namespace.
    pub host: Link,
}

/// Picks the one veth of the namespace `target` (its interfaces `inside`) whose peer is among
/// the interfaces `here`, or says in one line why there is none.
pub fn choose(target: &str, inside: &[Link], here: &[Link]) -> Result<Found, String> {
    let others: Vec<&Link> = inside
        .iter()
        .filter(|l| l.link_type != "loopback")
        .collect();
    if others.is_empty() {
        return Err(format!("{target} has no interface but lo"));
    }
    let peer_here = |inner: &Link| {
        inner.peer_netnsid?;
        here.iter().find(|h| {
            Some(h.index) == inner.peer_index
                && h.kind.as_deref() == Some("veth")
                && h.peer_index == Some(inner.index)
                && h.peer_netnsid.is_some()
        })
    };
    let veths: Vec<&Link> = others
        .iter()
        .copied()
        .filter(|l| l.kind.as_deref() == Some("veth"))
        .collect();
    let spliceable: Vec<Found> = veths
        .iter()
        .filter_map(|inner| {
            peer_here(inner).map(|host| Found {
                inner: (*inner).clone(),
                host: host.clone(),
            })
        })
        .collect();
    match spliceable.len() {
        1 => Ok(spliceable.into_iter().next().expect("one was counted")),
        0 if veths.is_empty() => Err(format!(
            "{target} has no veth: {}",
            others
                .iter()
                .map(|l| what(l))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        0 => Err(format!(
            "{target} has no veth whose peer is in this namespace: {}",
            veths
                .iter()
                .map(|l| match l.peer_netnsid {
                    None => format!("{}'s peer is in {target} too", l.name),
                    Some(_) => format!("{}'s peer is in another namespace", l.name),
                })
                .collect::<Vec<_>>()
                .join(", ")
        )),
        n => Err(format!(
            "{target} has {n} veths whose peers are here ({}): latlab emu splices one link",
            spliceable
                .iter()
                .map(|f| format!("{} ↔ {}", f.inner.name, f.host.name))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// What `link` is, for a refusal: `eth0 is a macvlan`, `eth0 is a physical NIC`.
fn what(link: &Link) -> String {
    match (&link.kind, link.on_bus) {
        (Some(kind), _) => format!("{} is a {kind}", link.name),
        (None, true) => format!("{} is a physical NIC", link.name),
        (None, false) => format!("{} is a {} device", link.name, link.link_type),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LO: &str = r#"{"ifindex":1,"ifname":"lo","flags":["LOOPBACK","UP"],"mtu":65536,
        "link_type":"loopback","address":"00:00:00:00:00:00"}"#;

    fn links(entries: &[&str]) -> Vec<Link> {
        Link::parse_all(&format!("[{}]", entries.join(","))).unwrap()
    }

    /// A container's eth0 (index 2) whose peer is index 7 in the namespace it knows as 0.
    const ETH0: &str = r#"{"ifindex":2,"link_index":7,"ifname":"eth0","flags":["UP"],
        "mtu":1500,"link_type":"ether","address":"06:0f:81:dc:b9:4b","link_netnsid":0,
        "linkinfo":{"info_kind":"veth"}}"#;

    /// Its host side, a port of br0.
    const HOST_SIDE: &str = r#"{"ifindex":7,"link_index":2,"ifname":"veth1a2b","flags":
        ["BROADCAST","UP","LOWER_UP"],"mtu":1450,"master":"br0","link_type":"ether",
        "address":"de:37:57:e7:1b:24","link_netnsid":3,"linkinfo":{"info_kind":"veth",
        "info_slave_kind":"bridge","info_slave_data":{"hairpin":true,"cost":2}}}"#;

    #[test]
    fn a_containers_veth_is_found_with_its_host_side_and_what_that_side_is_wired_to() {
        let found = choose("namespace c", &links(&[LO, ETH0]), &links(&[LO, HOST_SIDE])).unwrap();
        assert_eq!(found.inner.name, "eth0");
        let host = &found.host;
        assert_eq!(
            (host.name.as_str(), host.index, host.mtu, host.up),
            ("veth1a2b", 7, 1450, true)
        );
        assert_eq!(host.master.as_deref(), Some("br0"));
        assert_eq!(host.master_kind.as_deref(), Some("bridge"));
        assert_eq!(host.port["hairpin"], true);
        assert_eq!(host.mac.as_deref(), Some("de:37:57:e7:1b:24"));
    }

    #[test]
    fn what_cannot_be_spliced_is_refused_naming_what_was_found() {
        let macvlan = r#"{"ifindex":2,"link_index":4,"ifname":"eth0","mtu":1500,
            "link_type":"ether","link_netnsid":0,"linkinfo":{"info_kind":"macvlan"}}"#;
        let nic = r#"{"ifindex":3,"ifname":"enp1s0","mtu":1500,"link_type":"ether",
            "parentbus":"pci","parentdev":"0000:01:00.0"}"#;
        let dummy = r#"{"ifindex":4,"ifname":"d0","mtu":1500,"link_type":"ether",
            "linkinfo":{"info_kind":"dummy"}}"#;
        let here = links(&[LO, HOST_SIDE]);
        for (inside, want) in [
            (vec![LO], "namespace c has no interface but lo"),
            (
                vec![LO, macvlan],
                "namespace c has no veth: eth0 is a macvlan",
            ),
            (
                vec![LO, nic, dummy],
                "namespace c has no veth: enp1s0 is a physical NIC, d0 is a dummy",
            ),
        ] {
            assert_eq!(
                choose("namespace c", &links(&inside), &here).unwrap_err(),
                want
            );
        }
    }

    #[test]
    fn a_veth_whose_peer_is_not_here_is_refused() {
        // Peer index 7 here belongs to another pair (its peer is index 9, not 2).
        let other = HOST_SIDE.replace(r#""link_index":2"#, r#""link_index":9"#);
        let e = choose("namespace c", &links(&[ETH0]), &links(&[&other])).unwrap_err();
        assert_eq!(
            e,
            "namespace c has no veth whose peer is in this namespace: eth0's peer is in \
             another namespace"
        );
        let pair_inside = ETH0.replace(r#","link_netnsid":0"#, "");
        let e = choose("namespace c", &links(&[&pair_inside]), &links(&[HOST_SIDE])).unwrap_err();
        assert!(e.ends_with("eth0's peer is in namespace c too"), "{e}");
    }

    #[test]
    fn two_spliceable_veths_are_refused_naming_both() {
        let eth1 = ETH0
            .replace(r#""ifindex":2"#, r#""ifindex":3"#)
            .replace(r#""link_index":7"#, r#""link_index":8"#)
            .replace("eth0", "eth1");
        let host1 = HOST_SIDE
            .replace(r#""ifindex":7"#, r#""ifindex":8"#)
            .replace(r#""link_index":2"#, r#""link_index":3"#)
            .replace("veth1a2b", "veth3c4d");
        let e = choose(
            "namespace c",
            &links(&[ETH0, &eth1]),
            &links(&[HOST_SIDE, &host1]),
        )
        .unwrap_err();
        assert_eq!(
            e,
            "namespace c has 2 veths whose peers are here (eth0 ↔ veth1a2b, eth1 ↔ veth3c4d): \
             latlab emu splices one link"
        );
    }
}
