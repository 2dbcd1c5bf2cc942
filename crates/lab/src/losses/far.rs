//! The far side of a run whose lab the caller built: the reflector's (or game server's) socket
//! and own counters, its namespace's UDP MIB and the path's interfaces, read at the run's start
//! ([`FarSide::read`]) and placing its losses at its end ([`FarSide::place`]).

use std::sync::atomic::Ordering;

use latlab_engine::game::ServerLive;
use latlab_engine::reflector::ReflectorCounters;
use latlab_io::ifstats::{DevCounters, DevStats};
use latlab_io::udp::UdpSocket;
use latlab_io::udpmib::{UdpCounters, UdpMib};

use super::{LostByCause, UdpJson};
use crate::results::RunSummary;
use crate::topology::{ClientEmuServer, ClientServer};

/// What the far side counts of its own drops.
#[derive(Clone, Copy, Debug)]
pub enum FarCounters<'a> {
    /// latlab's reflector: the answers it could not send.
    Reflector(&'a ReflectorCounters),
    /// latlab's game server, copying each probe to this many clients: the datagrams it
    /// dropped (each one every copy of a probe) and the copies it could not send.
    GameServer(&'a ServerLive, u64),
    /// A server latlab did not write: it tells nothing.
    Foreign,
}

/// The path's interfaces whose drops are the path's, each opened in its namespace.
#[derive(Debug)]
pub enum PathEnds {
    /// The two ends of the veth pair between the generator and the reflector (the
    /// generator's first): a drop for a full backlog shows at one or both, so each way takes
    /// the larger count.
    Veth(DevStats, DevStats),
    /// A middle's two interfaces, the generator's side first, each the peer of an end's
    /// veth: a drop crossing either pair shows at the middle's side, so each way takes the
    /// drops of both.
    Middle(DevStats, DevStats),
    /// The generator's own interface towards a server out of reach: its drops both ways.
    Near(DevStats),
}

impl PathEnds {
    /// The generator's interface towards `target` in the calling thread's namespace (as
    /// `ip route get` names it); `None` where it cannot be told.
    pub fn towards(target: std::net::IpAddr) -> Option<PathEnds> {
        let route = crate::topology::ip(&["-o", "route", "get", &target.to_string()]).ok()?;
        let mut words = route.split_whitespace();
        words.find(|w| *w == "dev")?;
        Some(PathEnds::Near(DevStats::open(words.next()?).ok()?))
    }

    fn read(&self) -> Option<[DevCounters; 2]> {
        match self {
            PathEnds::Veth(a, b) | PathEnds::Middle(a, b) => Some([a.read().ok()?, b.read().ok()?]),
            PathEnds::Near(a) => Some([a.read().ok()?, DevCounters::default()]),
        }
    }

    /// The frames dropped between `before` and `now`: on the way to the reflector, and back.
    fn dropped(&self, now: [DevCounters; 2], before: [DevCounters; 2]) -> (u64, u64) {
        let (g, r) = (now[0].since(&before[0]), now[1].since(&before[1]));
        match self {
            PathEnds::Veth(..) => (
                g.tx_dropped.max(r.rx_dropped),
                r.tx_dropped.max(g.rx_dropped),
            ),
            PathEnds::Middle(..) => (g.rx_dropped + r.tx_dropped, r.rx_dropped + g.tx_dropped),
            PathEnds::Near(..) => (g.tx_dropped, g.rx_dropped),
        }
    }
}

/// The far side of a run: the reflector's socket (`None`: not this process's) and counters,
/// the UDP MIB of its namespace when it has one of its own, and the path's interfaces.
#[derive(Clone, Copy, Debug)]
pub struct FarSide<'a> {
    /// The reflector's socket.
    pub socket: Option<&'a UdpSocket>,
    /// The reflector's counters.
    pub counters: FarCounters<'a>,
    /// The UDP MIB of the reflector's namespace, when it has one of its own.
    pub mib: Option<&'a UdpMib>,
    /// The path's interfaces (`None`: an emulator on the path counts its frames instead).
    pub ends: Option<&'a PathEnds>,
}

/// What [`FarSide::read`] read.
#[derive(Clone, Copy, Debug)]
pub struct FarReading {
    socket_drops: Option<u64>,
    /// Datagrams the reflector read and dropped, and answers it could not send.
    dropped: Option<(u64, u64)>,
    udp: Option<UdpCounters>,
    ends: Option<[DevCounters; 2]>,
}

impl FarSide<'_> {
    /// The far side's counters now.
    pub fn read(&self) -> FarReading {
        let dropped = match self.counters {
            FarCounters::Reflector(c) => Some((0, c.snapshot().send_dropped)),
            FarCounters::GameServer(live, _) => Some((
                live.dropped.load(Ordering::Relaxed),
                live.send_failed.load(Ordering::Relaxed) + live.unroutable.load(Ordering::Relaxed),
            )),
            FarCounters::Foreign => None,
        };
        // Once the game server has ended, its port's own count: over AF_XDP its frames never
        // reach the UDP socket (before it started, neither held anything dropped).
        let port_drops = match self.counters {
            FarCounters::GameServer(live, _) => live.kernel_drops(),
            _ => None,
        };
        FarReading {
            socket_drops: port_drops.or_else(|| self.socket.map(|s| s.kernel_drops().unwrap_or(0))),
            dropped,
            udp: self.mib.and_then(|m| m.read().ok()),
            ends: self.ends.and_then(PathEnds::read),
        }
    }

    /// `lost` placed again with what the far side counted since `before`, each count in
    /// answers ([`super::LossCounters::fan_out`]).
    pub fn place(&self, before: &FarReading, lost: &LostByCause) -> LostByCause {
        let now = self.read();
        let k = match self.counters {
            FarCounters::GameServer(_, clients) => clients.max(1),
            _ => 1,
        };
        let mut c = lost.counters;
        c.fan_out = if k > 1 { k } else { 0 };
        c.send_failed *= k;
        let since = |n: Option<u64>, b: Option<u64>| Some(n?.saturating_sub(b?));
        if let Some(d) = since(now.socket_drops, before.socket_drops) {
            c.reflector_socket_drops = Some(d * k);
        }
        if let Some(((n_in, n_out), (b_in, b_out))) = now.dropped.zip(before.dropped) {
            c.reflector_dropped = Some(n_in.saturating_sub(b_in) * k + n_out.saturating_sub(b_out));
        }
        if let Some((n, b)) = now.udp.zip(before.udp) {
            let u = n.since(&b);
            c.reflector_udp = Some(UdpJson {
                no_ports: u.no_ports * k,
                in_errors: u.in_errors * k,
                rcvbuf_errors: u.rcvbuf_errors * k,
                sndbuf_errors: u.sndbuf_errors,
            });
        }
        if let (Some(ends), Some((n, b))) = (self.ends, now.ends.zip(before.ends)) {
            let (to, back) = ends.dropped(n, b);
            c.interface_drops = Some(to * k + back);
        }
        LostByCause::place(lost.lost, c)
    }

    /// The lost probes of `summary` placed again with what the far side counted since
    /// `before`.
    pub fn place_in(&self, before: &FarReading, summary: &mut RunSummary) {
        if let Some(lost) = &summary.lost_by_cause {
            summary.lost_by_cause = Some(self.place(before, lost));
        }
    }
}

/// The kernel's counters of a lab, each opened in its end's namespace: each end's UDP MIB and
/// the path's interfaces; none on loopback (the host's namespace is not the run's alone, and
/// the sockets' own counts are exact).
#[derive(Debug)]
pub struct LabCounters {
    /// The client's (the generator's) UDP MIB.
    pub client_mib: Option<UdpMib>,
    /// The server's (the reflector's) UDP MIB.
    pub server_mib: Option<UdpMib>,
    /// The path's interfaces.
    pub ends: Option<PathEnds>,
}

impl LabCounters {
    /// Opens the counters of `lab`: the veth pair's two ends are the path's.
    pub fn open(lab: &ClientServer) -> std::io::Result<LabCounters> {
        let ClientServer::Namespaces { client, server, .. } = lab else {
            return Ok(LabCounters {
                client_mib: None,
                server_mib: None,
                ends: None,
            });
        };
        let open = || (UdpMib::open().ok(), DevStats::open("veth0").ok());
        let (client_mib, client_end) = latlab_io::netns::run_in(client.name(), open)?;
        let (server_mib, server_end) = latlab_io::netns::run_in(server.name(), open)?;
        Ok(LabCounters {
            client_mib,
            server_mib,
            ends: client_end
                .zip(server_end)
                .map(|(c, s)| PathEnds::Veth(c, s)),
        })
    }

    /// Opens the counters of `lab`: the middle's two interfaces are the path's.
    pub fn open_middle(lab: &ClientEmuServer) -> std::io::Result<LabCounters> {
        let mib = |ns: &crate::topology::Namespace| {
            latlab_io::netns::run_in(ns.name(), || UdpMib::open().ok())
        };
        let (a, b) = (ClientEmuServer::EMU_A, ClientEmuServer::EMU_B);
        let ends = latlab_io::netns::run_in(lab.emu.name(), move || {
            Some(PathEnds::Middle(
                DevStats::open(a).ok()?,
                DevStats::open(b).ok()?,
            ))
        })?;
        Ok(LabCounters {
            client_mib: mib(&lab.client)?,
            server_mib: mib(&lab.server)?,
            ends,
        })
    }

    /// The far side of a run to `socket` with `counters`, in this lab.
    pub fn far<'a>(&'a self, socket: &'a UdpSocket, counters: FarCounters<'a>) -> FarSide<'a> {
        FarSide {
            socket: Some(socket),
            counters,
            mib: self.server_mib.as_ref(),
            ends: self.ends.as_ref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::losses::LossCounters;

    #[test]
    fn a_game_servers_drops_before_its_copies_count_once_per_client() {
        let socket = UdpSocket::bind(
            std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            &latlab_io::udp::UdpOptions::default(),
        )
        .unwrap();
        let live = ServerLive::default();
        let far = FarSide {
            socket: Some(&socket),
            counters: FarCounters::GameServer(&live, 4),
            mib: None,
            ends: None,
        };
        let before = far.read();
        // Two probes rate-limited (8 copies) and three copies refused by the kernel; one probe
        // not sent at all (4 copies) and five copies dropped at the clients' sockets.
        live.dropped.store(2, Ordering::Relaxed);
        live.send_failed.store(2, Ordering::Relaxed);
        live.unroutable.store(1, Ordering::Relaxed);
        let lost = LostByCause::place(
            30,
            LossCounters {
                send_failed: 1,
                sender_socket_drops: 5,
                ..LossCounters::default()
            },
        );
        let placed = far.place(&before, &lost);
        assert_eq!(
            (placed.sender, placed.reflector_socket, placed.reflector),
            (4 + 5, Some(0), Some(8 + 3))
        );
        assert_eq!((placed.unanswered, placed.counters.fan_out), (10, 4));
    }

    #[test]
    fn each_kind_of_ends_counts_a_drop_once_each_way() {
        let lo = || DevStats::open("lo").unwrap();
        let c = |rx_dropped, tx_dropped| DevCounters {
            rx_dropped,
            tx_dropped,
            ..DevCounters::default()
        };
        let zero = [DevCounters::default(); 2];
        // The generator's end dropped 2 going out and 1 coming in; the reflector's end 2 in,
        // 4 out.
        let now = [c(1, 2), c(2, 4)];
        assert_eq!(PathEnds::Veth(lo(), lo()).dropped(now, zero), (2, 4));
        assert_eq!(
            PathEnds::Middle(lo(), lo()).dropped(now, zero),
            (1 + 4, 2 + 2)
        );
        assert_eq!(PathEnds::Near(lo()).dropped(now, zero), (2, 1));
    }
}
