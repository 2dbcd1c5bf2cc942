//! What an emulator run cost in CPU ([`CpuUse`]).

/// The CPU an emulator run used: its threads' CPU time (the kernel's work inside their
/// system calls included) over the time it ran, and how a blocking loop waited.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuUse {
    /// Wall-clock time from start to stop, ns.
    pub elapsed_ns: u64,
    /// CPU time of the emulator's threads, ns (both stages for the pipeline).
    pub cpu_ns: u64,
    /// Threads that ran the emulator (1 run to completion, 2 pipelined).
    pub threads: u32,
    /// Wall-clock time its loop (the TX stage's, pipelined) spent handing its queued frames
    /// to the kernel (flushing its TX queues), ns: on veth the receiver's kernel work runs
    /// inside these calls, on the emulator's core. Its own work, left out of its host stalls.
    pub send_ns: u64,
    /// With [`crate::PollMode::Block`], the spin before each departure it had learned at the end
    /// and what it learned it from ([`crate::wait::SleepSpin`]); `None` for a loop that
    /// spins.
    pub sleeps: Option<crate::wait::SleepReport>,
}

impl CpuUse {
    /// CPU time over elapsed time: 1.0 is one core busy all the time.
    pub fn cores(&self) -> f64 {
        self.cpu_ns as f64 / self.elapsed_ns.max(1) as f64
    }

    /// The share of the run its loop spent in its sends ([`CpuUse::send_ns`]), 0 to 1.
    pub fn send_share(&self) -> f64 {
        self.send_ns as f64 / self.elapsed_ns.max(1) as f64
    }
}
