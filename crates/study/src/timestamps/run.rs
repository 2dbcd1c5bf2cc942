//! Running the timestamp study: the lab, the reflector with each point's OS settings, the
//! emulator holding the reference delay, and the prober.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use latlab_engine::reflector::{self, ReflectorConfig, ReflectorCounters};
use latlab_engine::{PollMode, Stop};
use latlab_io::udp::{UdpOptions, UdpSocket};
use latlab_io::Io;
use latlab_link::LinkConfig;

use super::prober::{probe, probe_port, Probed};
use super::{plan, ForwarderSettings, Planned, ReflectorSettings, StampPoint, StampStudyOptions};
use crate::emulator::bridge::{with_bridge, Bridge};
use crate::points::{Existing, PointsDir};
use crate::{StudyError, StudyFile, StudyKind};
use latlab_emu::report::{EmuDirectionJson, EmuJson};
use latlab_lab::losses::{FarCounters, FarSide, LabCounters, LostByCause, SenderWatch};
use latlab_lab::progress::View;
use latlab_lab::topology::ClientEmuServer;

/// The reflector's port in the server namespace.
const PORT: u16 = 7777;

/// Which CPU runs what: the prober alone on the first allowed CPU; the reflector (when
/// pinned), its competitor and the blocking emulator on the last.
#[derive(Clone, Copy, Debug)]
struct Cores {
    prober: usize,
    shared: usize,
}

impl Cores {
    fn pick() -> Result<Cores, StudyError> {
        let cpus = latlab_io::cpu::allowed_cpus()?;
        let (Some(&prober), Some(&shared)) = (cpus.first(), cpus.last()) else {
            return Err(StudyError::Io(std::io::Error::other(
                "this process may run on no CPU",
            )));
        };
        Ok(Cores { prober, shared })
    }

    fn describe(self, reflector: &ReflectorSettings, forwarder: &ForwarderSettings) -> String {
        let r = if reflector.pinned {
            format!("cpu{}", self.shared)
        } else {
            "unpinned".to_string()
        };
        let mut competitor = if reflector.competitor || forwarder.competitor {
            format!(", competitor cpu{}", self.shared)
        } else {
            String::new()
        };
        if reflector.rps_elsewhere {
            competitor.push_str(&format!(", RPS cpu{}", self.prober));
        }
        if reflector.threaded_napi {
            competitor.push_str(", threaded NAPI on the reflector's veth");
        }
        if forwarder.rps_elsewhere {
            competitor.push_str(&format!(", emulator's veths RPS cpu{}", self.prober));
        }
        if forwarder.threaded_napi {
            competitor.push_str(", threaded NAPI on the emulator's veths");
        }
        let e = if forwarder.pinned {
            format!("cpu{}", self.shared)
        } else {
            "unpinned".to_string()
        };
        let poll = if forwarder.busy { "busy" } else { "blocking" };
        format!(
            "prober cpu{}, reflector {r}, emulator {e} ({poll}){competitor}",
            self.prober
        )
    }
}

/// Builds the lab, measures this job's points into `<out>/points` and writes `study.json`;
/// returns the lab's description.
pub(super) fn measure_all(
    options: &StampStudyOptions,
    stop: &Stop,
    progress: &mut dyn View,
) -> Result<String, StudyError> {
    let existing = if options.resume || !options.shard.is_whole() {
        StudyFile::check_resume(&options.out, StudyKind::Timestamps, &options.parameters())?;
        Existing::Continue
    } else {
        Existing::RefuseResumable
    };
    let points = PointsDir::create(&options.out, existing)?;
    let lab = ClientEmuServer::build()?;
    let topology = lab.describe();
    progress.note(&format!("lab: {topology}"));
    StudyFile::new(StudyKind::Timestamps, &topology)
        .with_parameters(options.parameters())
        .write(&options.out)?;
    let cores = Cores::pick()?;
    let plan = plan();
    let total = options.shard.share_of(plan.len());
    let mine = plan
        .into_iter()
        .enumerate()
        .filter(|&(i, _)| options.shard.owns(i));
    for (done, (_, planned)) in mine.enumerate() {
        let Planned {
            key,
            group,
            setting,
            prober_busy,
            prober_xdp,
            reflector,
            forwarder,
        } = planned;
        if stop.is_raised() {
            break;
        }
        if points.resumed::<StampPoint>(key).is_some() {
            progress.note(&format!("{setting}: measured before, kept"));
            continue;
        }
        progress.point(setting, done, total);
        let cores_text = if group == "outside" {
            format!(
                "sockperf ping-pong cpu{}, sockperf server cpu{}, emulator cpu{} (blocking)",
                cores.prober, cores.shared, cores.shared
            )
        } else {
            cores.describe(&reflector, &forwarder)
        };
        progress.note(&format!("measuring {setting} ({cores_text})"));
        let (probed, emulator, left_out) = if group == "outside" {
            match measure_sockperf(&lab, options, cores)? {
                (Ok(probes), emulator) => (
                    Probed {
                        sent: probes.len() as u64,
                        probes,
                        lost_by_cause: None,
                    },
                    emulator,
                    None,
                ),
                (Err(why), emulator) => {
                    progress.note(&format!("sockperf left out: {why}"));
                    (Probed::default(), emulator, Some(why))
                }
            }
        } else {
            let receive = receive_settings(&lab, cores, &reflector, &forwarder);
            match apply_all(&receive) {
                Ok(()) => {
                    let prober = if prober_xdp {
                        Prober::Xdp
                    } else if prober_busy {
                        Prober::Busy
                    } else {
                        Prober::Block
                    };
                    let settings = (prober, &reflector, forwarder);
                    let measured = measure_point(&lab, options, cores, settings, stop);
                    undo_all(&receive).map_err(|why| {
                        StudyError::Io(std::io::Error::other(format!(
                            "{why} (turning it off again)"
                        )))
                    })?;
                    let (probed, emulator) = measured?;
                    (probed, Some(emulator), None)
                }
                Err(why) => {
                    progress.note(&format!("{setting} left out: {why}"));
                    (Probed::default(), None, Some(why))
                }
            }
        };

        let release = |d: &EmuDirectionJson| {
            let p50 = d.release_error_ns.percentile("p50");
            p50.and_then(|p| p.estimate.value_ns())
        };
        let point = StampPoint {
            group: group.into(),
            setting: setting.into(),
            prober_poll: match (group, prober_xdp, prober_busy) {
                ("outside", _, _) => "sockperf",
                (_, true, _) => "xdp",
                (_, false, true) => "busy",
                (_, false, false) => "block",
            }
            .into(),
            reflector,
            forwarder,
            cores: cores_text,
            delay_ns: delay_ns(options, forwarder),
            release_error_ns: emulator.as_ref().map_or(0, |e| {
                release(&e.a_to_b).unwrap_or(0) + release(&e.b_to_a).unwrap_or(0)
            }),
            sent: probed.sent,
            probes: probed.probes,
            emulator,
            left_out,
            lost_by_cause: probed.lost_by_cause,
        };
        points.write_measured(key, &point, None, stop)?;
    }
    progress.finish();
    Ok(topology)
}

/// A receive-side setting of one interface of the lab, turned on for a point and off after.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Receive {
    /// RPS: the interface's receive work steered to the CPUs of this mask.
    Rps(u64),
    /// Threaded NAPI (with GRO on, which a veth needs for a NAPI instance).
    ThreadedNapi,
}

/// (namespace, interface, setting): what a point's reflector and emulator settings ask of the
/// lab's interfaces (the server's veth receives the probes; the emulator's two veths the
/// frames it forwards).
fn receive_settings(
    lab: &ClientEmuServer,
    cores: Cores,
    reflector: &ReflectorSettings,
    forwarder: &ForwarderSettings,
) -> Vec<(String, &'static str, Receive)> {
    let (server, emu) = (lab.server.name().to_string(), lab.emu.name().to_string());
    let elsewhere = Receive::Rps(1 << cores.prober);
    let mut settings = Vec::new();
    if reflector.rps_elsewhere {
        settings.push((server.clone(), "veth0", elsewhere.clone()));
    }
    if reflector.threaded_napi {
        settings.push((server, "veth0", Receive::ThreadedNapi));
    }
    for iface in ["emu-a", "emu-b"] {
        if forwarder.rps_elsewhere {
            settings.push((emu.clone(), iface, elsewhere.clone()));
        }
        if forwarder.threaded_napi {
            settings.push((emu.clone(), iface, Receive::ThreadedNapi));
        }
    }
    settings
}

/// Turns every setting on; when one cannot be, turns those before it off again and says why.
fn apply_all(settings: &[(String, &'static str, Receive)]) -> Result<(), String> {
    for (i, (ns, iface, setting)) in settings.iter().enumerate() {
        if let Err(why) = set_receive(ns, iface, setting, true) {
            undo_all(&settings[..i])?;
            return Err(why);
        }
    }
    Ok(())
}

/// Turns every setting off again.
fn undo_all(settings: &[(String, &'static str, Receive)]) -> Result<(), String> {
    for (ns, iface, setting) in settings.iter().rev() {
        set_receive(ns, iface, setting, false)?;
    }
    Ok(())
}

/// Turns `setting` of `iface` in namespace `ns` on or off, from inside the namespace (`ip
/// netns exec` mounts that namespace's sysfs); the error says what and why not.
fn set_receive(ns: &str, iface: &str, setting: &Receive, on: bool) -> Result<(), String> {
    let sysfs =
        |file: &str, value: String| latlab_lab::topology::set_net_sysfs(ns, iface, file, &value);
    match *setting {
        Receive::Rps(mask) => {
            let mask = if on { mask } else { 0 };
            sysfs("queues/rx-0/rps_cpus", format!("{mask:x}"))
                .map_err(|e| format!("RPS on {iface} could not be set: {e}"))
        }
        Receive::ThreadedNapi => {
            let gro = |on: bool| {
                let name = iface.to_string();
                latlab_io::netns::run_in(ns, move || latlab_io::ethtool::set_gro(&name, on))
                    .and_then(|r| r)
                    .map_err(|e| format!("GRO on {iface} could not be set: {e}"))
            };
            let threaded = |on: bool| {
                sysfs("threaded", u8::from(on).to_string()).map_err(|e| {
                    format!("threaded NAPI on {iface} could not be set (the kernel needs 5.12 or later, and a veth needs GRO on for a NAPI instance): {e}")
                })
            };
            if on {
                gro(true)?;
                threaded(true).inspect_err(|_| {
                    let _ = gro(false);
                })
            } else {
                threaded(false)?;
                gro(false)
            }
        }
    }
}

/// sockperf's ping-pong through the emulated path (as long as the prober's probes take, and a
/// second for its warm-up), or why it could not run; and the emulator's report (`None` when
/// sockperf could not be had and the emulator did not run).
#[allow(clippy::type_complexity)]
fn measure_sockperf(
    lab: &ClientEmuServer,
    options: &StampStudyOptions,
    cores: Cores,
) -> Result<(Result<Vec<super::ProbeStamps>, String>, Option<EmuJson>), StudyError> {
    if let Err(why) = super::sockperf::available() {
        return Ok((Err(why), None));
    }
    let seconds = (options.probes as f64 / options.rate_pps).ceil() as u64 + 1;
    let log = std::env::temp_dir().join(format!(
        "latlab-sockperf-{}-{}.log",
        std::process::id(),
        latlab_io::clock::now_ns()
    ));
    let server = lab.server_addr.to_string();
    let (got, emulator) = with_bridge(
        lab,
        bridge(cores, ForwarderSettings::REFERENCE),
        a_to_b(options, ForwarderSettings::REFERENCE),
        LinkConfig::default(),
        || -> Result<_, StudyError> {
            Ok(super::sockperf::ping_pong(
                (lab.client.name(), cores.prober),
                (lab.server.name(), cores.shared, &server),
                seconds,
                options.rate_pps,
                &log,
            ))
        },
    )?;
    Ok((got, Some(emulator)))
}

/// The bridge as `settings` say, its CPU the shared one.
fn bridge(cores: Cores, settings: ForwarderSettings) -> Bridge {
    Bridge {
        io: Io::Packet,
        poll: if settings.busy {
            PollMode::Busy
        } else {
            PollMode::Block
        },
        cpu: settings.pinned.then_some(cores.shared),
        timer_slack_ns: settings.timer_slack_ns,
    }
}

/// The delay the emulator holds on the client→server direction with `settings`.
fn delay_ns(options: &StampStudyOptions, settings: ForwarderSettings) -> u64 {
    if settings.delayed {
        options.delay_ns
    } else {
        0
    }
}

/// The client→server direction with `settings`.
fn a_to_b(options: &StampStudyOptions, settings: ForwarderSettings) -> LinkConfig {
    LinkConfig {
        delay_ns: delay_ns(options, settings),
        ..LinkConfig::default()
    }
}

/// How the prober sends and waits for answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Prober {
    /// A UDP socket, blocking in `ppoll`.
    Block,
    /// A UDP socket, busy polling.
    Busy,
    /// AF_XDP on the client's veth, busy polling its rings.
    Xdp,
}

/// UMEM frames of the AF_XDP prober: one probe in flight needs few.
const XDP_FRAMES: u32 = 256;

/// One point: the reflector with `settings`, the emulator with `forwarder`'s, the prober as
/// `prober` says.
fn measure_point(
    lab: &ClientEmuServer,
    options: &StampStudyOptions,
    cores: Cores,
    (prober, settings, forwarder): (Prober, &ReflectorSettings, ForwarderSettings),
    stop: &Stop,
) -> Result<(Probed, EmuJson), StudyError> {
    let so_busy_poll = settings.so_busy_poll_us;
    let echo_socket = Arc::new(latlab_io::netns::run_in(lab.server.name(), move || {
        UdpSocket::bind(
            SocketAddr::from(([0, 0, 0, 0], PORT)),
            &UdpOptions {
                rx_timestamps: true,
                busy_poll_us: so_busy_poll,
                ..UdpOptions::default()
            },
        )
    })??);
    let client = lab.client_addr;
    let prober_socket = latlab_io::netns::run_in(lab.client.name(), move || {
        UdpSocket::bind(
            SocketAddr::from((client, 0)),
            &UdpOptions {
                rx_timestamps: true,
                tx_timestamps: true,
                ..UdpOptions::default()
            },
        )
    })??;
    let target = SocketAddr::from((lab.server_addr, PORT));
    let xdp_prober = match prober {
        Prober::Xdp => Some(latlab_io::netns::run_in(lab.client.name(), move || {
            latlab_lab::measure::open_xdp("veth0", target, client.into(), XDP_FRAMES)?
                .into_port(latlab_io::port::PortSizes::new(4, 2048))
                .map_err(|e| latlab_lab::measure::MeasureError::Io {
                    context: "--io xdp".into(),
                    source: e,
                })
        })??),
        Prober::Block | Prober::Busy => None,
    };
    let echo_stop = Arc::new(Stop::new());
    let compete = settings.competitor || forwarder.competitor;
    let spinning = Arc::new(AtomicBool::new(compete));
    let competitor = compete.then(|| {
        let spinning = spinning.clone();
        let cpu = cores.shared;
        std::thread::spawn(move || {
            let _ = latlab_io::cpu::pin_current_thread(cpu);
            while spinning.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    });
    let counting = LabCounters::open_middle(lab)?;
    let counters = Arc::new(ReflectorCounters::default());
    // The emulator's interfaces are the ends' peers: it counts the path's frames.
    let far = FarSide {
        ends: None,
        ..counting.far(&echo_socket, FarCounters::Reflector(&counters))
    };
    let prober_sockets = std::slice::from_ref(&prober_socket);
    let watch = SenderWatch::start(prober_sockets, counting.client_mib.as_ref(), false);
    let far_before = far.read();
    let echo = {
        let (s, echo_socket, counters) = (echo_stop.clone(), echo_socket.clone(), counters.clone());
        let settings = settings.clone();
        let cpu = cores.shared;
        std::thread::spawn(move || -> std::io::Result<()> {
            if settings.pinned {
                latlab_io::cpu::pin_current_thread(cpu)?;
            }
            if let Some(ns) = settings.timer_slack_ns {
                latlab_io::cpu::set_timer_slack_ns(ns)?;
            }
            let config = ReflectorConfig {
                poll: if settings.busy {
                    PollMode::Busy
                } else {
                    PollMode::Block
                },
                ..ReflectorConfig::default()
            };
            reflector::run_udp(&echo_socket, &config, &s, &counters)
        })
    };
    let (count, rate) = (options.probes, options.rate_pps);
    let measured = with_bridge(
        lab,
        bridge(cores, forwarder),
        a_to_b(options, forwarder),
        LinkConfig::default(),
        || {
            std::thread::scope(|scope| {
                scope
                    .spawn(|| -> Result<Probed, StudyError> {
                        latlab_io::cpu::pin_current_thread(cores.prober)?;
                        Ok(match xdp_prober {
                            Some((mut port, _reserved)) => {
                                probe_port(&mut port, target, count, rate, stop)?
                            }
                            None => probe(
                                &prober_socket,
                                target,
                                count,
                                rate,
                                prober == Prober::Busy,
                                stop,
                            )?,
                        })
                    })
                    .join()
                    .map_err(|_| StudyError::Io(std::io::Error::other("the prober panicked")))?
            })
        },
    );
    echo_stop.raise();
    spinning.store(false, Ordering::Relaxed);
    let echoed = echo
        .join()
        .map_err(|_| std::io::Error::other("the reflector panicked"));
    if let Some(c) = competitor {
        let _ = c.join();
    }
    let (mut probed, emulator) = measured?;
    echoed??;
    let lost = probed.sent.saturating_sub(probed.probes.len() as u64);
    let lost = LostByCause::place(lost, watch.counted(prober_sockets, 0));
    let lost = far.place(&far_before, &lost);
    probed.lost_by_cause = Some(lost.with_path(emulator.frames_lost(), false));
    Ok((probed, emulator))
}
