//! `latlab run --nat`: the command reaches whatever this namespace reaches, its address
//! masqueraded behind this namespace's own.
//!
//! Each run adds one nftables table of its own (`ip latlab_…`, named after its namespace), with
//! one rule: what comes from the run's subnet and leaves by another interface is masqueraded.
//! Forwarding (`net.ipv4.ip_forward`, per namespace) is turned on while at least one run with
//! `--nat` lives in this namespace, and put back as it was by the last one: the first writes
//! the value it found to `/run/latlab/nat-INODE.saved` (INODE: this network namespace's), each
//! holds an owner lock `/run/latlab/nat-INODE-TABLE.lock` while it lives, and the last to go
//! (no other lock held) writes the saved value back. After `kill -9`, `latlab clean` removes the
//! tables whose namespace's lock is free and puts forwarding back once no run holds a lock
//! ([`remove_stale`]).

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use latlab_io::lock::OwnerLock;

use super::wiring::Subnet;
use latlab_lab::topology;

const FORWARD: &str = "/proc/sys/net/ipv4/ip_forward";

/// Why `--nat` cannot work here (no `nft`), or `None`.
pub fn why_no_nft() -> Option<String> {
    match Command::new("nft").arg("--version").output() {
        Ok(o) if o.status.success() => None,
        _ => Some(
            "--nat needs nftables' `nft` (Debian's package nftables), which is not installed"
                .into(),
        ),
    }
}

/// A run's masquerade and its hold on forwarding, removed on drop.
#[derive(Debug)]
pub struct Nat {
    table: String,
    holder: Option<OwnerLock>,
    ns: u64,
}

impl Nat {
    /// Masquerades what comes from `subnet` and leaves by an interface other than `host_if`,
    /// in a table named after `namespace` (the run's), and turns forwarding on.
    pub fn add(namespace: &str, subnet: Subnet, host_if: &str) -> io::Result<Nat> {
        let ns = this_namespace()?;
        let table = table_name(namespace);
        let holder = OwnerLock::create(&holder_path(ns, &table))?
            .ok_or_else(|| io::Error::other(format!("nftables table {table} is held")))?;
        let nat = Nat {
            table,
            holder: Some(holder),
            ns,
        };
        nft(&format!(
            "table ip {t} {{\n  chain postrouting {{\n    type nat hook postrouting priority srcnat; policy accept;\n    ip saddr {subnet} oifname != \"{host_if}\" masquerade\n  }}\n}}\n",
            t = nat.table
        ))?;
        with_mutex(ns, || {
            let saved = saved_path(ns);
            if !saved.exists() {
                let now = fs::read_to_string(FORWARD)?;
                latlab_lab::results::write_atomic(&saved, now.trim().as_bytes())?;
            }
            fs::write(FORWARD, "1")
        })?;
        Ok(nat)
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }
}

impl Drop for Nat {
    fn drop(&mut self) {
        let _ = nft(&format!("delete table ip {}\n", self.table));
        if let Some(holder) = self.holder.take() {
            let _ = holder.remove();
        }
        let _ = with_mutex(self.ns, || restore_if_last(self.ns));
    }
}

/// The nftables table of the run whose namespace is `namespace`: its name with `_` for `-`
/// (nft's names take no `-` unquoted).
pub fn table_name(namespace: &str) -> String {
    namespace.replace('-', "_")
}

/// What [`remove_stale`] removed.
#[derive(Debug, Default)]
pub struct StaleNat {
    /// The tables removed.
    pub tables: Vec<String>,
    /// Whether forwarding was put back as it was.
    pub forwarding_restored: bool,
}

/// Removes, in this namespace, the `latlab_*` tables whose run is gone (its namespace's owner
/// lock is free, or its namespace is gone), the holders' lock files left by runs killed with
/// `kill -9`, and puts forwarding back as it was when no run holds a lock. Without `nft`,
/// nothing (no run could have made a table).
pub fn remove_stale() -> io::Result<StaleNat> {
    let mut stale = StaleNat::default();
    if why_no_nft().is_some() {
        return Ok(stale);
    }
    let ns = this_namespace()?;
    let listed = nft_output(&["list", "tables", "ip"])?;
    for table in listed
        .lines()
        .filter_map(|l| l.strip_prefix("table ip "))
        .map(str::trim)
        .filter(|t| t.starts_with("latlab_"))
    {
        let namespace = table.replace('_', "-");
        let alive = OwnerLock::open(&topology::lock_path(&namespace)).is_ok_and(|l| l.is_none());
        if !alive {
            nft(&format!("delete table ip {table}\n"))?;
            stale.tables.push(table.to_string());
        }
    }
    with_mutex(ns, || {
        stale.forwarding_restored = restore_if_last(ns)?;
        Ok(())
    })?;
    Ok(stale)
}

/// With no holder's lock held in namespace `ns`: removes the holders' lock files and puts the
/// saved forwarding value back. Whether it did.
fn restore_if_last(ns: u64) -> io::Result<bool> {
    let prefix = format!("nat-{ns}-");
    let mut free = Vec::new();
    if let Ok(entries) = fs::read_dir(topology::LOCK_DIR) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !(name.starts_with(&prefix) && name.ends_with(".lock")) {
                continue;
            }
            match OwnerLock::open(&entry.path()) {
                Ok(Some(lock)) => free.push(lock),
                Ok(None) => return Ok(false),
                Err(_) => {}
            }
        }
    }
    for lock in free {
        let _ = lock.remove();
    }
    let saved = saved_path(ns);
    match fs::read_to_string(&saved) {
        Ok(value) => {
            fs::write(FORWARD, value.trim())?;
            fs::remove_file(&saved)?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Runs `f` while holding the NAT mutex (one for every namespace: one file, never many),
/// waiting up to 5 s for it.
fn with_mutex<T>(_ns: u64, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    let path = Path::new(topology::LOCK_DIR).join("nat.mutex");
    let deadline = Instant::now() + Duration::from_secs(5);
    let _held = loop {
        match OwnerLock::create(&path)? {
            Some(lock) => break lock,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            None => return Err(io::Error::other(format!("{} stays locked", path.display()))),
        }
    };
    f()
}

/// The inode of this process's network namespace: what tells namespaces apart in the files of
/// `/run/latlab`, which all namespaces share.
fn this_namespace() -> io::Result<u64> {
    Ok(fs::metadata("/proc/self/ns/net")?.ino())
}

fn saved_path(ns: u64) -> PathBuf {
    Path::new(topology::LOCK_DIR).join(format!("nat-{ns}.saved"))
}

fn holder_path(ns: u64, table: &str) -> PathBuf {
    Path::new(topology::LOCK_DIR).join(format!("nat-{ns}-{table}.lock"))
}

/// Runs `nft -f -` with `script` on its standard input.
fn nft(script: &str) -> io::Result<()> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run nft: {e}")))?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(script.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "nft: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// Runs `nft ARGS` and returns its standard output.
fn nft_output(args: &[&str]) -> io::Result<String> {
    let out = Command::new("nft").args(args).process_group(0).output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "nft {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

use std::os::unix::process::CommandExt;
