//! The receive work of the bridge's interfaces on the emulator's own CPU (RPS), for as long as
//! it runs there.
//!
//! A veth receives on the core of whoever sent the frame: the frame is stamped as the sender
//! hands it over, then waits in that core's backlog until its softirq runs. When the sender's
//! core is busy (a blocking generator and reflector share it), a frame reaches the emulator's
//! ring milliseconds after its stamp, and the emulator counts that wait as its own release
//! error. With RPS the backlog is the emulator's CPU's, served at once (an interrupt on a CPU
//! that spins), as the emulator study steers it. The old masks are put back when dropped.

use std::fs;
use std::path::{Path, PathBuf};

/// RPS masks set on the receive queues of some interfaces, put back when dropped.
#[derive(Debug, Default)]
pub struct Steered {
    /// Each `rps_cpus` file written, with what it held.
    restore: Vec<(PathBuf, String)>,
}

impl Steered {
    /// Sets the `rps_cpus` of every receive queue of `ifaces` (under `net`, the
    /// `/sys/class/net` this process sees) to `cpu` alone. Returns what it set, and what it
    /// could not (one line, for the placement), never failing the run for it.
    pub fn receive_work(net: &Path, ifaces: &[&str], cpu: usize) -> (Steered, String) {
        let mut steered = Steered::default();
        let mask = format!("{:x}", 1u64 << cpu.min(63));
        let mut failed = Vec::new();
        for iface in ifaces {
            let queues = net.join(iface).join("queues");
            let files: Vec<PathBuf> = fs::read_dir(&queues)
                .map(|dir| {
                    dir.flatten()
                        .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                        .map(|e| e.path().join("rps_cpus"))
                        .collect()
                })
                .unwrap_or_default();
            if files.is_empty() {
                failed.push(format!(
                    "{iface}: no receive queues in {}",
                    queues.display()
                ));
            }
            for file in files {
                let old = fs::read_to_string(&file).map(|s| s.trim().to_string());
                match old.and_then(|old| fs::write(&file, &mask).map(|()| old)) {
                    Ok(old) => steered.restore.push((file, old)),
                    Err(e) => failed.push(format!("{}: {e}", file.display())),
                }
            }
        }
        let said = if failed.is_empty() {
            format!(
                "receive work of {} on CPU {cpu} (RPS)",
                ifaces.join(" and ")
            )
        } else {
            format!("receive work not steered ({})", failed.join("; "))
        };
        (steered, said)
    }
}

impl Drop for Steered {
    fn drop(&mut self) {
        for (file, old) in self.restore.drain(..) {
            // Best effort: an interface gone with its namespace has nothing to put back.
            let _ = fs::write(&file, old);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_receive_queue_is_steered_and_put_back() {
        let net = tempfile::tempdir().unwrap();
        for q in ["rx-0", "rx-1", "tx-0"] {
            let dir = net.path().join("veth-a/queues").join(q);
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join("rps_cpus"), "0\n").unwrap();
        }
        let file = |q: &str| net.path().join("veth-a/queues").join(q).join("rps_cpus");
        let (steered, said) = Steered::receive_work(net.path(), &["veth-a"], 1);
        assert_eq!(said, "receive work of veth-a on CPU 1 (RPS)");
        assert_eq!(fs::read_to_string(file("rx-0")).unwrap(), "2");
        assert_eq!(fs::read_to_string(file("rx-1")).unwrap(), "2");
        assert_eq!(
            fs::read_to_string(file("tx-0")).unwrap(),
            "0\n",
            "not a receive queue"
        );
        drop(steered);
        assert_eq!(fs::read_to_string(file("rx-0")).unwrap(), "0");
        // An interface that is not there is said, not fatal.
        let (_, said) = Steered::receive_work(net.path(), &["nowhere"], 0);
        assert!(
            said.starts_with("receive work not steered (nowhere: "),
            "{said}"
        );
    }
}
