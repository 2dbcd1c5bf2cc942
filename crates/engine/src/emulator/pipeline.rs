//! The pipelined bridge: an RX stage and a TX stage on their own pinned cores, joined per
//! direction by a lock-free single-producer single-consumer ring.

use super::*;

/// Largest frame the pipeline's rings carry; longer frames are cut to it.
pub const PIPE_FRAME: usize = 2048;

/// A frame on its way from the RX stage to the TX stage, with its receive stamp.
struct Slot {
    rx_ns: u64,
    len: usize,
    data: [u8; PIPE_FRAME],
}

/// What the pipeline's TX stage hands back: its reports, the rings from the RX stage (whose
/// frames are still on their way at exit), its CPU time, its time in its sends and its stalls.
type TxStageEnd = (
    [DirectionReport; 2],
    [Consumer<Slot>; 2],
    (u64, u64, Stalls),
);

/// What the pipeline's RX stage hands back: per direction, `[frames, bytes]` read and
/// dropped for a full ring, its sockets, and its CPU time.
type RxStageEnd = (
    [[u64; 2]; 2],
    [[u64; 2]; 2],
    PacketSocket,
    PacketSocket,
    u64,
);

/// The sockets of a pipelined bridge: each interface has a socket read by the RX stage and
/// another written by the TX stage, so the two stages never share one.
#[derive(Debug)]
pub struct PipelineSockets {
    /// Read by the RX stage: frames arriving on interface A.
    pub rx_a: PacketSocket,
    /// Read by the RX stage: frames arriving on interface B.
    pub rx_b: PacketSocket,
    /// Written by the TX stage: frames leaving on interface A.
    pub tx_a: PacketSocket,
    /// Written by the TX stage: frames leaving on interface B.
    pub tx_b: PacketSocket,
}

/// Runs the bridge as a pipeline: an RX stage pinned to `rx_cpu` reads both interfaces and
/// passes each frame with its receive stamp, per direction, through a lock-free
/// single-producer single-consumer ring of `ring_frames` frames to a TX stage pinned to
/// `tx_cpu`, which runs the two directions' pipes (link model and delay queue; with per-flow
/// rules, a pipe per rule) and sends frames when due.
/// A frame the ring has no room for is dropped by the RX stage and counted in
/// [`DirectionReport::queue_slots_full`]; it never reaches the link model.
#[allow(clippy::too_many_arguments)]
pub fn run_pipeline(
    sockets: PipelineSockets,
    a_to_b: impl Into<Flows>,
    b_to_a: impl Into<Flows>,
    ring_frames: usize,
    (rx_cpu, tx_cpu): (Option<usize>, Option<usize>),
    stop: &Stop,
    live: &EmulatorLive,
) -> io::Result<EmulatorReport> {
    let PipelineSockets {
        mut rx_a,
        mut rx_b,
        mut tx_a,
        mut tx_b,
    } = sockets;
    let start = now_ns();
    let mut pipes = [
        FlowPipes::new(a_to_b.into(), start).map_err(invalid_config)?,
        FlowPipes::new(b_to_a.into(), start).map_err(invalid_config)?,
    ];
    let (to_tx_ab, from_rx_ab) = rtrb::RingBuffer::<Slot>::new(ring_frames.max(16));
    let (to_tx_ba, from_rx_ba) = rtrb::RingBuffer::<Slot>::new(ring_frames.max(16));
    let lives = [live.a_to_b.clone(), live.b_to_a.clone()];
    let tx_lives = lives.clone();
    std::thread::scope(|s| {
        let tx_stage = s.spawn(move || -> io::Result<TxStageEnd> {
            if let Some(cpu) = tx_cpu {
                latlab_io::cpu::pin_current_thread(cpu)?;
            }
            let cpu_start = latlab_io::clock::thread_cpu_ns();
            let mut reports = [
                DirectionReport::new(&pipes[0]),
                DirectionReport::new(&pipes[1]),
            ];
            let mut from_rx = [from_rx_ab, from_rx_ba];
            let mut watch = StallWatch::new(now_ns());
            let mut send_ns = 0;
            while !stop.is_raised() {
                for (d, ring) in from_rx.iter_mut().enumerate() {
                    let Ok(chunk) = ring.read_chunk(ring.slots()) else {
                        continue;
                    };
                    let (first, second) = chunk.as_slices();
                    for slot in first.iter().chain(second) {
                        let frame = &slot.data[..slot.len];
                        arrive(
                            &mut pipes[d],
                            &mut reports[d],
                            &tx_lives[d],
                            frame,
                            |pipe| pipe.handle_arrival(slot.rx_ns, frame),
                        );
                    }
                    chunk.commit_all();
                }
                let now = now_ns();
                watch.tick(now);
                for (d, tx) in [&mut tx_b, &mut tx_a].into_iter().enumerate() {
                    let send = |f: &[u8]| {
                        let mut queued = tx.try_queue_tx(f)?;
                        if queued == FrameQueued::Full {
                            tx.flush_tx()?;
                            queued = tx.try_queue_tx(f)?;
                        }
                        Ok(queued)
                    };
                    let (pipe, report, live) = (&mut pipes[d], &mut reports[d], &tx_lives[d]);
                    let sent = release(pipe, now, report, live, send, |_, _, _| {})?;
                    if sent > 0 {
                        // Timed apart, and not a stall: see `CpuUse::send_ns`.
                        let flushing = now_ns();
                        tx.flush_tx()?;
                        let flushed = now_ns();
                        send_ns += flushed.saturating_sub(flushing);
                        watch.resumed(flushed);
                    }
                }
                std::hint::spin_loop();
            }
            let [ab, ba] = reports;
            // The rings go back with the reports: what the RX stage still hands them until it
            // stops is counted as queued at exit.
            let cpu_ns = latlab_io::clock::thread_cpu_ns() - cpu_start;
            Ok((
                [finish(ab, &pipes[0]), finish(ba, &pipes[1])],
                from_rx,
                (cpu_ns, send_ns, watch.finish(now_ns())),
            ))
        });
        let rx_stage = s.spawn(move || -> io::Result<RxStageEnd> {
            if let Some(cpu) = rx_cpu {
                latlab_io::cpu::pin_current_thread(cpu)?;
            }
            let cpu_start = latlab_io::clock::thread_cpu_ns();
            let mut full = [[0u64; 2]; 2];
            let mut arrived = [[0u64; 2]; 2];
            let mut to_tx = [to_tx_ab, to_tx_ba];
            while !stop.is_raised() {
                for (d, rx) in [&mut rx_a, &mut rx_b].into_iter().enumerate() {
                    let (ring, live, full) = (&mut to_tx[d], &lives[d], &mut full[d]);
                    let arrived = &mut arrived[d];
                    rx.recv_batch(|frame, rx_ns, _| {
                        *arrived = [arrived[0] + 1, arrived[1] + frame.len() as u64];
                        live.arrived.fetch_add(1, Ordering::Relaxed);
                        let len = frame.len().min(PIPE_FRAME);
                        let mut slot = Slot {
                            rx_ns,
                            len,
                            data: [0; PIPE_FRAME],
                        };
                        slot.data[..len].copy_from_slice(&frame[..len]);
                        if ring.push(slot).is_err() {
                            *full = [full[0] + 1, full[1] + frame.len() as u64];
                            live.dropped.fetch_add(1, Ordering::Relaxed);
                        }
                    })?;
                }
            }
            let cpu_ns = latlab_io::clock::thread_cpu_ns() - cpu_start;
            Ok((arrived, full, rx_a, rx_b, cpu_ns))
        });
        let ([ab, ba], rings, (tx_cpu_ns, send_ns, host_stalls)) = tx_stage
            .join()
            .map_err(|_| io::Error::other("the TX stage panicked"))??;
        let (arrived, full, rx_a, rx_b, rx_cpu_ns) = rx_stage
            .join()
            .map_err(|_| io::Error::other("the RX stage panicked"))??;
        let report = |mut d: DirectionReport, i: usize, rx: &PacketSocket| {
            [d.arrived, d.bytes.arrived] = arrived[i];
            d.queue_slots_full += full[i][0];
            d.bytes.queue_slots_full += full[i][1];
            d.queued_at_exit += rings[i].slots() as u64;
            // The receiving socket's (the TX stage's sockets' refusals are not read here).
            d.socket.rx_dropped = rx.statistics().map(|s| s.drops).unwrap_or(0);
            d.kernel_drops = d.socket.rx_lost();
            d.wire = rx.wire_frame_stats();
            d
        };
        Ok(EmulatorReport {
            a_to_b: report(ab, 0, &rx_a),
            b_to_a: report(ba, 1, &rx_b),
            changes: Vec::new(),
            event_changes: Vec::new(),
            start_ns: start,
            tap_full: 0,
            fates: None,
            cpu: CpuUse {
                elapsed_ns: now_ns().saturating_sub(start),
                cpu_ns: tx_cpu_ns + rx_cpu_ns,
                threads: 2,
                send_ns,
                sleeps: None,
            },
            host_stalls,
        })
    })
}
