//! Where a generator run's lost probes went, by cause, from the kernel's own counters (as
//! `latlab emu --json` places its frames, `latlab_emu::losses`): the generator's sockets and
//! namespace, the path's interfaces, the reflector's socket, the reflector, and what no
//! counter explains. Every run of [`crate::measure`] counts the generator's side; a run that
//! knows the far side too (the demo and the studies, which built the lab) reads it with
//! [`FarSide`] at the run's start and places the losses again at its end
//! ([`FarSide::place`]); an emulator on the path adds its own count once it has stopped
//! ([`LostByCause::with_path`]).
//!
//! The UDP MIB ([`latlab_io::udpmib`]) is a whole namespace's: in the namespaces latlab made
//! for a run it counts only the run's datagrams, elsewhere other traffic may add to it. What
//! the counters count beyond the run's losses is kept apart (`counted_beyond_loss`), so the
//! causes always add up to the loss.

use latlab_engine::generator::GeneratorResult;
use latlab_io::udp::UdpSocket;
use latlab_io::udpmib::{UdpCounters, UdpMib};
use serde::{Deserialize, Serialize};

mod far;
pub use far::{FarCounters, FarReading, FarSide, LabCounters, PathEnds};

/// A namespace's UDP MIB over a run (IPv4 and IPv6 summed), as results show it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UdpJson {
    /// Datagrams for a port no socket held (`NoPorts`).
    pub no_ports: u64,
    /// Datagrams dropped at a socket, any reason (`InErrors`, `rcvbuf_errors` included).
    pub in_errors: u64,
    /// Of `in_errors`, dropped for a full receive buffer (`RcvbufErrors`).
    pub rcvbuf_errors: u64,
    /// Sends refused for a full send buffer (`SndbufErrors`): a generator tries those again,
    /// so they are shown, not placed as losses.
    pub sndbuf_errors: u64,
}

impl From<UdpCounters> for UdpJson {
    fn from(c: UdpCounters) -> UdpJson {
        UdpJson {
            no_ports: c.no_ports,
            in_errors: c.in_errors,
            rcvbuf_errors: c.rcvbuf_errors,
            sndbuf_errors: c.sndbuf_errors,
        }
    }
}

/// The counters read over a run, each `None` where this run could not read it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LossCounters {
    /// Probes the generator's sockets could not send (counted as lost).
    pub send_failed: u64,
    /// Datagrams the kernel dropped at the generator's sockets (a full receive buffer; each
    /// socket's `sk_drops`, `SO_MEMINFO`): responses lost there.
    pub sender_socket_drops: u64,
    /// The UDP MIB of the generator's namespace (namespace-wide: exact in latlab's own).
    pub sender_udp: Option<UdpJson>,
    /// The reflector shares the generator's namespace (its target is an address of it): the
    /// MIB's drops beyond the generator's sockets are the reflector's.
    pub shared_namespace: bool,
    /// Datagrams the kernel dropped at the reflector's socket.
    pub reflector_socket_drops: Option<u64>,
    /// Probes the reflector read and did not send back (a full socket, a refused address).
    pub reflector_dropped: Option<u64>,
    /// The UDP MIB of the reflector's own namespace, when it is not the generator's.
    pub reflector_udp: Option<UdpJson>,
    /// Frames the path's interfaces dropped, both ends, both ways: for each direction the
    /// sending end's `tx_dropped` or the receiving end's `rx_dropped`, whichever is larger
    /// (on veth one drop for a full backlog shows in both); with an emulator on the path, the
    /// frames it lost too.
    pub interface_drops: Option<u64>,
    /// The path's count holds other traffic's frames too (the bufferbloat study's bulk flows
    /// share its bottleneck): it takes what the run's own counters leave, after the reflector.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub path_shared: bool,
    /// Copies the reflector sends of each probe (latlab's game server: one to every client);
    /// 0 for one answer. The counts of what was lost before it sent them (probes not sent,
    /// its socket's drops and its own, its namespace's MIB, the path's on the way there) are
    /// multiplied by it here: every count is in answers.
    #[serde(skip_serializing_if = "is_zero")]
    pub fan_out: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A run's lost probes by cause; the causes add up to `lost`. A cause this run could not
/// count is `None` (its probes are in `unanswered`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LostByCause {
    /// Probes lost, the warm-up's included (the counters cannot tell them apart).
    pub lost: u64,
    /// At the generator's sockets and stack: probes not sent, responses dropped at its
    /// sockets, and, from its namespace's MIB, responses dropped in its stack otherwise.
    pub sender: u64,
    /// On the path: dropped by the interfaces at either end.
    pub path: Option<u64>,
    /// At the reflector's socket: dropped for a full receive buffer before it read them.
    pub reflector_socket: Option<u64>,
    /// By the reflector: read and not sent back, or no reflector listening (`NoPorts`), or
    /// dropped in its namespace's stack beyond its socket.
    pub reflector: Option<u64>,
    /// Unanswered for no counted reason: still held somewhere, late, or lost where nothing
    /// counts.
    pub unanswered: u64,
    /// Drops the counters counted beyond the run's losses (other traffic on a namespace-wide
    /// counter, the check's probes): left out of the causes.
    pub counted_beyond_loss: u64,
    /// The counters the causes come from.
    pub counters: LossCounters,
}

impl LostByCause {
    /// The `lost` probes placed by `counters`: each cause takes what its counters say, in
    /// the probe's order (sender, path, reflector's socket, reflector; a shared path last)
    /// and never more than is left; the rest is unanswered.
    pub fn place(lost: u64, counters: LossCounters) -> LostByCause {
        let c = &counters;
        let mut sender = c.send_failed + c.sender_socket_drops;
        let mut reflector_socket = c.reflector_socket_drops;
        let mut reflector = c.reflector_dropped;
        if let Some(u) = c.sender_udp {
            let beyond = u.in_errors.saturating_sub(c.sender_socket_drops);
            if c.shared_namespace {
                let full = u.rcvbuf_errors.saturating_sub(c.sender_socket_drops);
                reflector_socket.get_or_insert(full);
                sender += beyond.saturating_sub(full);
                reflector = Some(reflector.unwrap_or(0) + u.no_ports);
            } else {
                sender += beyond + u.no_ports;
            }
        }
        if let Some(u) = c.reflector_udp {
            let at_socket = c.reflector_socket_drops.unwrap_or(0);
            let stack = u.in_errors.saturating_sub(at_socket) + u.no_ports;
            reflector = Some(reflector.unwrap_or(0) + stack);
        }
        let counted = sender
            + c.interface_drops.unwrap_or(0)
            + reflector_socket.unwrap_or(0)
            + reflector.unwrap_or(0);
        let mut left = lost;
        let mut take = |n: u64| {
            let t = n.min(left);
            left -= t;
            t
        };
        let sender = take(sender);
        let path = c.interface_drops.filter(|_| !c.path_shared).map(&mut take);
        let reflector_socket = reflector_socket.map(&mut take);
        let reflector = reflector.map(&mut take);
        let path = path.or(c.interface_drops.filter(|_| c.path_shared).map(&mut take));
        LostByCause {
            lost,
            sender,
            path,
            reflector_socket,
            reflector,
            unanswered: left,
            counted_beyond_loss: counted - (lost - left),
            counters,
        }
    }

    /// These losses placed again with `frames` more lost on the path, as an emulator on it
    /// counted them (known once it has stopped); `shared`: its count holds other traffic's
    /// frames too.
    pub fn with_path(&self, frames: u64, shared: bool) -> LostByCause {
        let mut c = self.counters;
        c.interface_drops = Some(c.interface_drops.unwrap_or(0) + frames);
        c.path_shared |= shared;
        LostByCause::place(self.lost, c)
    }

    /// The losses of several runs together (`latlab merge`): every count summed, a cause
    /// counted where any run counted it (the others' probes are in their `unanswered`), so
    /// the causes still add up; `None` when a run did not count its losses at all.
    pub fn merged<'a>(
        runs: impl IntoIterator<Item = Option<&'a LostByCause>>,
    ) -> Option<LostByCause> {
        fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            a.or(b).map(|_| a.unwrap_or(0) + b.unwrap_or(0))
        }
        fn add_udp(a: Option<UdpJson>, b: Option<UdpJson>) -> Option<UdpJson> {
            let (x, y) = (a.unwrap_or_default(), b.unwrap_or_default());
            a.or(b).map(|_| UdpJson {
                no_ports: x.no_ports + y.no_ports,
                in_errors: x.in_errors + y.in_errors,
                rcvbuf_errors: x.rcvbuf_errors + y.rcvbuf_errors,
                sndbuf_errors: x.sndbuf_errors + y.sndbuf_errors,
            })
        }
        let mut m = LostByCause::default();
        for r in runs {
            let r = r?;
            let (c, rc) = (&mut m.counters, &r.counters);
            m.lost += r.lost;
            m.sender += r.sender;
            m.path = add(m.path, r.path);
            m.reflector_socket = add(m.reflector_socket, r.reflector_socket);
            m.reflector = add(m.reflector, r.reflector);
            m.unanswered += r.unanswered;
            m.counted_beyond_loss += r.counted_beyond_loss;
            c.send_failed += rc.send_failed;
            c.sender_socket_drops += rc.sender_socket_drops;
            c.sender_udp = add_udp(c.sender_udp, rc.sender_udp);
            c.shared_namespace |= rc.shared_namespace;
            c.reflector_socket_drops = add(c.reflector_socket_drops, rc.reflector_socket_drops);
            c.reflector_dropped = add(c.reflector_dropped, rc.reflector_dropped);
            c.reflector_udp = add_udp(c.reflector_udp, rc.reflector_udp);
            c.interface_drops = add(c.interface_drops, rc.interface_drops);
            c.path_shared |= rc.path_shared;
            c.fan_out = c.fan_out.max(rc.fan_out);
        }
        Some(m)
    }

    /// One line for a terminal; `-`: not counted by this run.
    pub fn text(&self) -> String {
        self.text_as(
            "lost",
            ["sender's socket/stack", "reflector's socket", "reflector"],
        )
    }

    /// [`LostByCause::text`] in other words: `lost` for what was lost, then the names of the
    /// sender's, the reflector's socket's and the reflector's causes (a game server's
    /// clients and server).
    pub fn text_as(&self, lost: &str, [sender, socket, reflector]: [&str; 3]) -> String {
        let n = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        let mut line = format!(
            "{lost} {} (warm-up included): {sender} {}, path {}, {socket} {}, {reflector} {}, \
             unanswered for no counted reason {}",
            self.lost,
            self.sender,
            n(self.path),
            n(self.reflector_socket),
            n(self.reflector),
            self.unanswered
        );
        if self.counted_beyond_loss > 0 {
            line.push_str(&format!(
                " (the counters counted {} drops more: other traffic shares them)",
                self.counted_beyond_loss
            ));
        }
        line
    }
}

/// The generator's side read at a run's start: its sockets' drops and its namespace's MIB.
#[derive(Debug)]
pub struct SenderWatch<'a> {
    mib: Option<&'a UdpMib>,
    udp_before: Option<UdpCounters>,
    drops_before: u64,
    shared_namespace: bool,
}

/// The drops of `sockets`, summed (a socket whose count cannot be read counts 0).
fn socket_drops(sockets: &[UdpSocket]) -> u64 {
    sockets.iter().map(|s| s.kernel_drops().unwrap_or(0)).sum()
}

impl<'a> SenderWatch<'a> {
    /// Reads the counters of `sockets` and of `mib` (opened in the generator's namespace;
    /// `None`: not read) now; `shared_namespace`: the reflector is in that namespace too.
    pub fn start(
        sockets: &[UdpSocket],
        mib: Option<&'a UdpMib>,
        shared_namespace: bool,
    ) -> SenderWatch<'a> {
        SenderWatch {
            mib,
            udp_before: mib.and_then(|m| m.read().ok()),
            drops_before: socket_drops(sockets),
            shared_namespace,
        }
    }

    /// The run's losses by cause, as far as the generator's side tells them.
    pub fn finish(&self, sockets: &[UdpSocket], result: &GeneratorResult) -> LostByCause {
        let counters = self.counted(sockets, result.send_failed.total());
        LostByCause::place(lost_in(result), counters)
    }

    /// What the generator's side counted since the start, `send_failed` probes not sent.
    pub fn counted(&self, sockets: &[UdpSocket], send_failed: u64) -> LossCounters {
        let udp = self
            .mib
            .zip(self.udp_before)
            .and_then(|(m, before)| Some(m.read().ok()?.since(&before)));
        LossCounters {
            send_failed,
            sender_socket_drops: socket_drops(sockets).saturating_sub(self.drops_before),
            sender_udp: udp.map(UdpJson::from),
            shared_namespace: self.shared_namespace,
            ..LossCounters::default()
        }
    }
}

/// Probes of `result` lost, the warm-up's included.
pub fn lost_in(result: &GeneratorResult) -> u64 {
    let r = &result.report;
    r.lost + r.warmup_sent.saturating_sub(r.warmup_received)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp(no_ports: u64, in_errors: u64, rcvbuf_errors: u64) -> Option<UdpJson> {
        Some(UdpJson {
            no_ports,
            in_errors,
            rcvbuf_errors,
            sndbuf_errors: 0,
        })
    }

    fn sum(l: &LostByCause) -> u64 {
        l.sender
            + l.path.unwrap_or(0)
            + l.reflector_socket.unwrap_or(0)
            + l.reflector.unwrap_or(0)
            + l.unanswered
    }

    #[test]
    fn the_generators_side_alone_leaves_the_rest_unanswered() {
        let c = LossCounters {
            send_failed: 2,
            sender_socket_drops: 5,
            // Two more receive drops in its stack (a bad checksum) and one late response.
            sender_udp: udp(1, 7, 5),
            ..LossCounters::default()
        };
        let l = LostByCause::place(20, c);
        assert_eq!(l.sender, 2 + 5 + 2 + 1);
        assert_eq!(
            (l.path, l.reflector_socket, l.reflector),
            (None, None, None)
        );
        assert_eq!((l.unanswered, l.counted_beyond_loss, sum(&l)), (10, 0, 20));
    }

    #[test]
    fn in_a_shared_namespace_the_mibs_drops_beyond_the_generators_are_the_reflectors() {
        let c = LossCounters {
            sender_socket_drops: 3,
            sender_udp: udp(4, 13, 13),
            shared_namespace: true,
            ..LossCounters::default()
        };
        let l = LostByCause::place(20, c);
        assert_eq!(
            (l.sender, l.reflector_socket, l.reflector, l.unanswered),
            (3, Some(10), Some(4), 3)
        );
    }

    #[test]
    fn both_ends_known_place_every_cause_and_more_counted_than_lost_is_kept_apart() {
        let c = LossCounters {
            send_failed: 1,
            sender_udp: udp(0, 0, 0),
            reflector_socket_drops: Some(6),
            reflector_dropped: Some(2),
            reflector_udp: udp(1, 7, 6),
            interface_drops: Some(3),
            ..LossCounters::default()
        };
        let l = LostByCause::place(20, c);
        assert_eq!(
            (l.sender, l.path, l.reflector_socket, l.reflector),
            (1, Some(3), Some(6), Some(2 + 1 + 1))
        );
        assert_eq!((l.unanswered, sum(&l)), (6, 20));
        // Fewer lost than counted (another flow's drops in the counters): the causes still
        // add up, the reflector's share cut and the surplus shown.
        let l = LostByCause::place(8, c);
        assert_eq!(
            (l.sender, l.path, l.reflector_socket, l.reflector),
            (1, Some(3), Some(4), Some(0))
        );
        assert_eq!((l.unanswered, l.counted_beyond_loss, sum(&l)), (0, 6, 8));
        assert!(l
            .text()
            .ends_with("counted 6 drops more: other traffic shares them)"));
    }

    #[test]
    fn merged_runs_still_add_up_and_a_run_that_did_not_count_leaves_no_count() {
        let both = LostByCause::place(
            20,
            LossCounters {
                reflector_socket_drops: Some(6),
                interface_drops: Some(3),
                ..LossCounters::default()
            },
        );
        let alone = LostByCause::place(
            5,
            LossCounters {
                sender_socket_drops: 2,
                ..LossCounters::default()
            },
        );
        let m = LostByCause::merged([Some(&both), Some(&alone)]).unwrap();
        assert_eq!(
            (m.lost, m.sender, m.path, m.reflector_socket, m.reflector),
            (25, 2, Some(3), Some(6), None)
        );
        assert_eq!((m.unanswered, sum(&m)), (14, 25));
        assert_eq!(m.counters.sender_socket_drops, 2);
        assert_eq!(LostByCause::merged([Some(&both), None]), None);
    }

    #[test]
    fn a_shared_path_takes_what_the_runs_own_counters_leave() {
        // An emulator counted 500 frames lost, most of them a bulk flow's; the reflector's
        // socket dropped 4 of the run's 20 probes.
        let c = LossCounters {
            reflector_socket_drops: Some(4),
            reflector_dropped: Some(0),
            ..LossCounters::default()
        };
        let alone = LostByCause::place(20, c);
        let shared = alone.with_path(500, true);
        assert_eq!(
            (shared.path, shared.reflector_socket, shared.unanswered),
            (Some(16), Some(4), 0)
        );
        assert_eq!((shared.counted_beyond_loss, sum(&shared)), (484, 20));
        // Not shared, the path comes first, in the probe's order, and squeezes the socket out.
        let first = alone.with_path(500, false);
        assert_eq!((first.path, first.reflector_socket), (Some(20), Some(0)));
        // An emulator's count adds to the ends' drops.
        let ends = LostByCause::place(
            20,
            LossCounters {
                interface_drops: Some(2),
                ..c
            },
        );
        assert_eq!(ends.with_path(3, false).counters.interface_drops, Some(5));
    }

    #[test]
    fn text_as_names_a_game_servers_causes() {
        let l = LostByCause::place(
            8,
            LossCounters {
                sender_socket_drops: 3,
                ..LossCounters::default()
            },
        );
        assert_eq!(
            l.text_as(
                "copies lost",
                ["clients' sockets", "server's socket", "server"]
            ),
            "copies lost 8 (warm-up included): clients' sockets 3, path -, server's socket -, \
             server -, unanswered for no counted reason 5"
        );
    }
}
