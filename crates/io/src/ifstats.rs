//! An interface's own counters (frames and drops, as `ip -s link` shows them), read from the
//! network namespace the reader was opened in, whichever thread reads them later.
//!
//! The kernel's `/proc/<task>/net/dev` belongs to the namespace of the task at the time the
//! file is opened: [`DevStats::open`] opens it for the calling thread (as a socket is opened
//! inside a namespace), and every [`DevStats::read`] reads it again from the start.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// What `/proc/net/dev` says of one interface. Its drop columns are the kernel's
/// `rx_dropped + rx_missed_errors` and `tx_dropped`, which include the core's own drops
/// (a full per-CPU backlog, for instance) besides the driver's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DevCounters {
    /// Frames received.
    pub rx_packets: u64,
    /// Frames dropped on receive (driver, backlog, missed).
    pub rx_dropped: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Frames dropped on transmit (on veth: the peer could not take them).
    pub tx_dropped: u64,
}

impl DevCounters {
    /// What happened between `earlier` and `self` (counters that went backwards, as after
    /// the interface was made again, count from 0).
    pub fn since(&self, earlier: &DevCounters) -> DevCounters {
        let d = |now: u64, then: u64| now.checked_sub(then).unwrap_or(now);
        DevCounters {
            rx_packets: d(self.rx_packets, earlier.rx_packets),
            rx_dropped: d(self.rx_dropped, earlier.rx_dropped),
            tx_packets: d(self.tx_packets, earlier.tx_packets),
            tx_dropped: d(self.tx_dropped, earlier.tx_dropped),
        }
    }
}

/// A reader of one interface's counters in the namespace it was opened in.
#[derive(Debug)]
pub struct DevStats {
    ifname: String,
    file: File,
}

impl DevStats {
    /// Opens the counters of `ifname` in the calling thread's network namespace; fails naming
    /// the interface if it has none there.
    pub fn open(ifname: &str) -> io::Result<DevStats> {
        let file = File::open("/proc/thread-self/net/dev")
            .map_err(|e| io::Error::new(e.kind(), format!("/proc/thread-self/net/dev: {e}")))?;
        let stats = DevStats {
            ifname: ifname.to_string(),
            file,
        };
        stats.read()?;
        Ok(stats)
    }

    /// The interface's counters now.
    pub fn read(&self) -> io::Result<DevCounters> {
        let mut text = Vec::with_capacity(4096);
        let mut chunk = [0u8; 4096];
        loop {
            let n = self.file.read_at(&mut chunk, text.len() as u64)?;
            if n == 0 {
                break;
            }
            text.extend_from_slice(&chunk[..n]);
        }
        parse(&String::from_utf8_lossy(&text), &self.ifname).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: no such interface in /proc/net/dev", self.ifname),
            )
        })
    }
}

/// The counters of `ifname` in the text of `/proc/net/dev`, if it has a well-formed line.
fn parse(text: &str, ifname: &str) -> Option<DevCounters> {
    text.lines().find_map(|line| {
        let (name, rest) = line.split_once(':')?;
        if name.trim() != ifname {
            return None;
        }
        let fields: Vec<u64> = rest
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        // rx: bytes packets errs drop fifo frame compressed multicast; tx: bytes packets errs
        // drop fifo colls carrier compressed.
        (fields.len() >= 16).then(|| DevCounters {
            rx_packets: fields[1],
            rx_dropped: fields[3],
            tx_packets: fields[9],
            tx_dropped: fields[11],
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
emu-a: 9876543  123456    1   42    0     0          0         0   555555    4321    0    7    0     0       0          0
";

    #[test]
    fn an_interfaces_line_gives_its_packets_and_drops() {
        assert_eq!(
            parse(DEV, "emu-a"),
            Some(DevCounters {
                rx_packets: 123_456,
                rx_dropped: 42,
                tx_packets: 4321,
                tx_dropped: 7,
            })
        );
        assert_eq!(parse(DEV, "emu"), None);
        assert_eq!(parse("emu-a: 1 2 3\n", "emu-a"), None, "a short line");
    }

    #[test]
    fn loopback_is_read_in_this_namespace() {
        let stats = DevStats::open("lo").unwrap();
        let before = stats.read().unwrap();
        let after = stats.read().unwrap();
        assert!(after.rx_packets >= before.rx_packets);
        assert_eq!(
            DevStats::open("latlab-none").unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn a_counter_that_went_back_counts_from_zero() {
        let then = DevCounters {
            rx_packets: 10,
            rx_dropped: 5,
            tx_packets: 10,
            tx_dropped: 0,
        };
        let now = DevCounters {
            rx_packets: 15,
            rx_dropped: 2,
            tx_packets: 10,
            tx_dropped: 1,
        };
        let d = now.since(&then);
        assert_eq!(
            (d.rx_packets, d.rx_dropped, d.tx_packets, d.tx_dropped),
            (5, 2, 0, 1)
        );
    }
}
