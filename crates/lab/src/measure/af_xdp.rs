//! The generator over AF_XDP: its endpoint (socket, addresses, next hop) and its run.

use super::*;

/// A generator's AF_XDP socket and the addresses its frames carry.
#[derive(Debug)]
pub struct XdpEndpoint {
    /// The socket; its program redirects UDP to `addrs.src`'s port.
    pub socket: latlab_io::xdp::XdpSocket,
    /// Source and destination MAC, address and port of every probe.
    pub addrs: generator::FrameAddrs,
    /// A kernel socket bound to the source port for the run, so no other socket of this host
    /// gets it.
    _port: UdpSocket,
}

/// Prepares a generator over AF_XDP on `iface` towards `target` (IPv4): reserves a source
/// port, takes the source address from the route to `target` (or `bind`), learns the next
/// hop's MAC address from the kernel's neighbour table (sending one probe through the kernel
/// first when the table has none, so the kernel resolves it), and attaches the program.
/// `frames` UMEM frames (see [`latlab_io::xdp::XdpOptions::frame_count`]). Call it inside the
/// namespace the generator lives in, after [`check_target`].
pub fn open_xdp(
    iface: &str,
    target: SocketAddr,
    bind: IpAddr,
    frames: u32,
) -> Result<XdpEndpoint, MeasureError> {
    use crate::middle::ports::{open_endpoint, EndpointSettings};
    use latlab_io::neigh;
    let SocketAddr::V4(target4) = target else {
        return Err(MeasureError::Unreachable {
            target,
            reason: "--io xdp sends IPv4 only".into(),
        });
    };
    let port = UdpSocket::bind(SocketAddr::new(bind, 0), &UdpOptions::default())
        .map_err(io_err("bind a source port"))?;
    let src_port = port
        .local_addr()
        .map_err(io_err("bind a source port"))?
        .port();
    let route = UdpSocket::bind(SocketAddr::new(bind, 0), &UdpOptions::default())
        .map_err(io_err("route lookup"))?;
    route
        .connect(target)
        .map_err(|e| MeasureError::Unreachable {
            target,
            reason: e.to_string(),
        })?;
    let src_ip = match route.local_addr().map_err(io_err("route lookup"))?.ip() {
        IpAddr::V4(ip) => ip,
        IpAddr::V6(_) => {
            return Err(MeasureError::Unreachable {
                target,
                reason: "--io xdp sends IPv4 only".into(),
            })
        }
    };
    let hop = neigh::next_hop(iface, *target4.ip()).map_err(|e| MeasureError::Unreachable {
        target,
        reason: format!("{e} (--iface names the interface towards the target)"),
    })?;
    let mut dst_mac = neigh::neighbour_mac(iface, hop).map_err(io_err("neighbour table"))?;
    if dst_mac.is_none() {
        // One probe of a throw-away run through the kernel makes it resolve the next hop.
        let mut buf = [0u8; probe::HEADER_LEN];
        let now = latlab_io::clock::now_ns();
        probe::Repr {
            run_id: run_id(0x0061_7270),
            flow: 0,
            seq: 0,
            intended_send_ns: now,
            actual_send_ns: now,
            responder: None,
            responder_clock: probe::ResponderClock::NotAsked,
        }
        .emit(&mut probe::Packet::new_unchecked(&mut buf[..]));
        let _ = route.send_one(&buf, None);
        for _ in 0..100 {
            std::thread::sleep(Duration::from_millis(10));
            dst_mac = neigh::neighbour_mac(iface, hop).map_err(io_err("neighbour table"))?;
            if dst_mac.is_some() {
                break;
            }
        }
    }
    let dst_mac = dst_mac.ok_or_else(|| MeasureError::Unreachable {
        target,
        reason: format!("{iface}: the kernel could not resolve {hop}'s MAC address (ARP)"),
    })?;
    let src_mac = neigh::interface_mac(iface).map_err(io_err("--iface"))?;
    let endpoint = EndpointSettings {
        frames: Some(frames),
        ..EndpointSettings::port(src_port)
    };
    let socket = open_endpoint(iface, &endpoint).map_err(io_err("--io xdp"))?;
    Ok(XdpEndpoint {
        socket,
        addrs: generator::FrameAddrs {
            src_mac,
            dst_mac,
            src: SocketAddr::from((src_ip, src_port)),
            dst: target,
        },
        _port: port,
    })
}

impl XdpEndpoint {
    /// The socket as a datagram port with the route to the target in it (IPv4 only), and the
    /// kernel socket that keeps the source port reserved while the port is in use.
    pub fn into_port(
        self,
        sizes: latlab_io::port::PortSizes,
    ) -> std::io::Result<(latlab_io::port::XdpEndpoint, UdpSocket)> {
        let XdpEndpoint {
            socket,
            addrs,
            _port,
        } = self;
        let (SocketAddr::V4(src), IpAddr::V4(dst)) = (addrs.src, addrs.dst.ip()) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "--io xdp sends IPv4 only",
            ));
        };
        let mut port = latlab_io::port::XdpEndpoint::new(socket, src.port(), sizes)?;
        port.add_route(
            dst,
            latlab_io::port::LinkRoute {
                peer_mac: addrs.dst_mac,
                local_mac: addrs.src_mac,
                local_ip: *src.ip(),
            },
        );
        Ok((port, _port))
    }
}

/// Runs the generator over AF_XDP and summarizes the run (the endpoint's socket becomes the
/// generator's port; its source port stays reserved until the run is over).
pub fn run_xdp(
    options: &GenOptions,
    endpoint: XdpEndpoint,
    threads: Threads,
    setup: RunSetup,
    stop: &Stop,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<(RunSummary, GeneratorResult), MeasureError> {
    let XdpEndpoint {
        socket,
        addrs,
        _port,
    } = endpoint;
    summarized(options, &[], threads, setup, |config| {
        generator::run_xdp(socket, &addrs, config, stop, progress)
    })
}
