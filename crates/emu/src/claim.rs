//! The two interfaces a bridge holds: each checked to be one that can be bridged, and claimed
//! for as long as the bridge runs, so a second `latlab emu` on one of them is refused (two
//! bridges on one interface forward every frame twice).
//!
//! The claim is an [`OwnerLock`] on `/run/latlab/iface-<netns dev>-<netns inode>-<ifindex>.lock`
//! (the interface by its namespace's identity and its index, so the same name in two namespaces
//! is two interfaces), holding `latlab emu pid N`. The kernel lets go of the lock however its
//! owner ends, so a file left by a process that died does not block: the next bridge takes the
//! lock and writes its own pid; `latlab clean` removes such files.

use std::path::{Path, PathBuf};

use latlab_io::iface::LinkKind;
use latlab_io::lock::OwnerLock;
use latlab_io::netns::NetnsId;
use latlab_lab::command::CommandError;
use latlab_lab::topology;

use crate::options::EmuOptions;

/// The claim file of the interface with index `index` in the namespace `ns`.
pub fn claim_path(ns: NetnsId, index: u32) -> PathBuf {
    Path::new(topology::LOCK_DIR).join(format!("iface-{}-{}-{index}.lock", ns.dev, ns.ino))
}

/// The claims of a bridge's two interfaces; dropped, they are given back and their files
/// removed.
#[derive(Debug, Default)]
pub struct Claims(Vec<OwnerLock>);

impl Drop for Claims {
    fn drop(&mut self) {
        for lock in self.0.drain(..) {
            let _ = lock.remove();
        }
    }
}

/// Why an interface cannot be bridged, or `None` when it can.
pub fn unbridgeable(kind: &LinkKind) -> Option<String> {
    if kind.loopback {
        Some("is a loopback interface, which cannot be bridged".into())
    } else if kind.link_type != 1 {
        Some(format!(
            "is not an Ethernet-like link (link type {}), which cannot be bridged",
            kind.link_type
        ))
    } else {
        None
    }
}

/// Checks that `--iface-a` and `--iface-b` can be bridged and claims them; `note` hears of a
/// claim that could not be written (`/run/latlab` not writable), and the bridge goes on.
pub fn claim(options: &EmuOptions, note: &mut dyn FnMut(&str)) -> Result<Claims, CommandError> {
    let mut claims = Claims::default();
    for (flag, ifname) in [
        ("--iface-a", &options.iface_a),
        ("--iface-b", &options.iface_b),
    ] {
        let context = format!("{flag} {ifname}");
        let name = ifname.clone();
        let (kind, ns) = crate::in_netns(options, move || {
            let kind = latlab_io::iface::link_kind(&name)?;
            let ns = latlab_io::netns::id(Path::new("/proc/thread-self/ns/net"))?;
            Ok((kind, ns))
        })
        .map_err(CommandError::setup(context.clone()))?;
        if let Some(why) = unbridgeable(&kind) {
            return Err(CommandError::Options(format!(
                "{context}: {why}; latlab emu bridges two Ethernet-like interfaces (veth, NICs)"
            )));
        }
        let path = claim_path(ns, kind.index);
        match OwnerLock::create(&path) {
            Ok(Some(lock)) => {
                if let Err(e) = write_owner(&lock) {
                    note(&format!("{context}: claim not written: {e}"));
                }
                claims.0.push(lock);
            }
            Ok(None) => {
                let owner = std::fs::read_to_string(&path).unwrap_or_default();
                let owner = owner.trim();
                let owner = if owner.is_empty() {
                    format!("another latlab emu (claim {})", path.display())
                } else {
                    owner.to_string()
                };
                return Err(CommandError::Options(format!(
                    "{context}: already bridged by {owner}; a second bridge on it would forward \
                     every frame twice: stop that one first"
                )));
            }
            // Without the privileges a bridge needs, the sockets' own refusal follows and says
            // what to do: a note before it would only be a second line.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && !may_bridge() => {}
            Err(e) => note(&format!("{context}: not claimed: {e}")),
        }
    }
    Ok(claims)
}

/// Whether this process may open the bridge's sockets at all: `CAP_NET_RAW` in its effective
/// capabilities (`CapEff` of `/proc/self/status`), which root has unless it was taken away,
/// and without which root cannot open them either.
fn may_bridge() -> bool {
    has_net_raw(&std::fs::read_to_string("/proc/self/status").unwrap_or_default())
}

/// Whether `CapEff` in the text of `/proc/PID/status` holds `CAP_NET_RAW` (bit 13).
fn has_net_raw(status: &str) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 13) != 0)
}

/// Writes this process into its claim file, for whoever is refused the interface.
fn write_owner(lock: &OwnerLock) -> std::io::Result<()> {
    let file = lock.file();
    file.set_len(0)?;
    std::os::unix::fs::FileExt::write_at(
        file,
        format!("latlab emu pid {}\n", std::process::id()).as_bytes(),
        0,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_links_that_do_not_carry_ethernet_are_refused_with_why() {
        let lo = LinkKind {
            index: 1,
            link_type: 772,
            loopback: true,
        };
        assert!(unbridgeable(&lo).unwrap().contains("loopback"));
        let tun = LinkKind {
            index: 5,
            link_type: 65534,
            loopback: false,
        };
        let why = unbridgeable(&tun).unwrap();
        assert!(
            why.contains("not an Ethernet-like link (link type 65534)"),
            "{why}"
        );
        let veth = LinkKind {
            index: 7,
            link_type: 1,
            loopback: false,
        };
        assert_eq!(unbridgeable(&veth), None);
    }

    #[test]
    fn net_raw_is_read_from_the_effective_capabilities() {
        assert!(has_net_raw("Name:\tlatlab\nCapEff:\t000001ffffffffff\n"));
        assert!(has_net_raw("CapEff:\t0000000000002000\n"));
        assert!(!has_net_raw("CapEff:\t0000000000000000\n"));
        assert!(!has_net_raw("CapPrm:\t0000000000002000\n"));
    }
}
