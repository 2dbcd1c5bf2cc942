//! A process's place in the core plan while it runs: the claim it holds, how its loop waits,
//! where it runs, and the watch that makes a spinning loop give way to an emulator.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use latlab_engine::{PollMode, PollSwitch};
use latlab_io::cpu;
use latlab_io::lock::OwnerLock;
use serde::{Deserialize, Serialize};

use super::{claims_dir, is_held, plan, take_claim, Claims, Plan, PollChoice, Role};

/// How often a spinning loop looks whether an emulator claimed its CPU.
pub const WATCH_EVERY: Duration = Duration::from_millis(100);

/// Where a process's loop ran and why, as its report records it (`"placement"` in `--json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// How the loop waited at the start: `busy` or `block`.
    pub poll: String,
    /// The CPU it spun (or was pinned) on at the start; `None`: not pinned.
    pub cpu: Option<usize>,
    /// Why, in words: the claims it found, or the flag that decided.
    pub reason: String,
    /// What changed while it ran (it gave its CPU to an emulator), in order.
    #[serde(default)]
    pub changes: Vec<String>,
    /// Whether the loop ran in the `SCHED_FIFO` class: asleep between frames, woken ahead of
    /// every ordinary thread on its CPU (the emulator at `auto`, where it may).
    #[serde(default)]
    pub realtime: bool,
}

impl Placement {
    /// The placement in one line, for the start line of a command.
    pub fn line(&self) -> String {
        match (self.poll.as_str(), self.cpu) {
            ("busy", Some(cpu)) => format!("spinning on CPU {cpu} ({})", self.reason),
            ("busy", None) => format!("spinning ({})", self.reason),
            (_, Some(cpu)) if self.realtime => format!(
                "asleep between frames at realtime priority, pinned to CPU {cpu} ({})",
                self.reason
            ),
            (_, Some(cpu)) => format!("blocking, pinned to CPU {cpu} ({})", self.reason),
            _ => format!("blocking ({})", self.reason),
        }
    }

    /// The placement as JSON, for the reports written through `serde_json::Value`.
    pub fn to_value(&self) -> serde_json::Value {
        // A struct of strings, numbers and a list: serializing cannot fail.
        serde_json::to_value(self).expect("a placement is plain data")
    }
}

/// A process's place in the core plan: the claim it holds (given back when dropped), how its
/// loop waits (a [`PollSwitch`] the loop reads every turn) and the CPUs it runs on.
#[derive(Debug)]
pub struct Seat {
    role: Role,
    who: String,
    dir: PathBuf,
    /// The CPUs the process was allowed when it took its seat.
    allowed: Vec<usize>,
    switch: PollSwitch,
    /// The claims held, with the CPU each is on.
    claims: Mutex<Vec<(usize, OwnerLock)>>,
    /// Where the loop runs: one CPU when pinned, several when blocking off others' CPUs.
    cpus: Mutex<Vec<usize>>,
    /// Whether the loop gives way when an emulator claims its CPU.
    yields: bool,
    /// Whether [`Seat::place`] puts the loop in `SCHED_FIFO` (it then blocks on its CPU).
    realtime: bool,
    placement: Mutex<Placement>,
}

/// The `SCHED_FIFO` priority of a realtime loop: the lowest, below the kernel's own realtime
/// threads (migration, watchdogs).
pub const REALTIME_PRIORITY: i32 = 1;

/// The CPUs this process's helper threads may run on: the CPUs it was allowed less the one its
/// loop spins on; empty while no loop of it spins pinned.
static HELPER_CPUS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// Moves the calling thread, a helper (a watcher, a live line: anything but the loop), off the
/// CPU this process's loop spins on. A thread starts on the CPUs of the thread that started
/// it, so a watcher started by a pinned loop would wake on the loop's CPU at every tick and,
/// being a sleeper, run before it: the loop's release error would carry the watcher's work.
pub fn place_helper_thread() {
    let cpus = lock(&HELPER_CPUS).clone();
    if !cpus.is_empty() {
        let _ = cpu::set_thread_cpus(0, &cpus);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Seat {
    /// Takes a seat for `who` (`latlab gen`, …) in `role`: as `choice` and an explicit `cpu`
    /// (`--cpu`) say, the plan deciding `auto`. Never fails: claims that cannot be had make
    /// the safe choice, and the placement says why.
    pub fn take(role: Role, who: &str, choice: PollChoice, cpu: Option<usize>) -> Seat {
        Seat::take_in(claims_dir(), role, who, choice, cpu)
    }

    /// [`Seat::take`] with the claims in `dir`.
    pub fn take_in(
        dir: PathBuf,
        role: Role,
        who: &str,
        choice: PollChoice,
        cpu: Option<usize>,
    ) -> Seat {
        let allowed = cpu::allowed_cpus().unwrap_or_default();
        let mut seat = Seat {
            role,
            who: who.to_string(),
            dir,
            allowed: allowed.clone(),
            switch: PollSwitch::new(PollMode::Block),
            claims: Mutex::new(Vec::new()),
            cpus: Mutex::new(Vec::new()),
            yields: false,
            realtime: false,
            placement: Mutex::new(Placement {
                poll: "block".into(),
                cpu: None,
                reason: String::new(),
                changes: Vec::new(),
                realtime: false,
            }),
        };
        let (poll, cpus, reason) = match (choice.explicit(), cpu) {
            (Some(mode), Some(n)) => {
                // Explicit wins; a loop spinning where it was told still claims the CPU, so
                // the plans of others see it.
                let claimed = mode == PollMode::Busy && seat.claim(n).is_some();
                let how = if claimed { ", claimed" } else { "" };
                (
                    mode,
                    vec![n],
                    format!("--poll {} and --cpu {n} given{how}", mode.name()),
                )
            }
            (Some(PollMode::Busy), None) if role == Role::Loop => seat.explicit_busy(),
            (Some(mode), None) => (mode, Vec::new(), format!("--poll {} given", mode.name())),
            (None, Some(n)) => match seat.claim(n) {
                Some(()) => {
                    seat.yields = role == Role::Loop;
                    (PollMode::Busy, vec![n], format!("--cpu {n} given, free"))
                }
                None => (
                    PollMode::Block,
                    vec![n],
                    format!("--cpu {n} given, claimed by another"),
                ),
            },
            (None, None) => {
                let (poll, cpus, reason) = seat.planned();
                // The emulator's CPU is its own only among latlab's processes: whatever else
                // runs there (a build, the kernel's deferred receive work) takes turns with a
                // spinning loop a scheduler tick (4 ms at 250 Hz) at a time. In SCHED_FIFO it
                // sleeps between frames instead and is woken ahead of all of them.
                if role == Role::Emulator
                    && poll == PollMode::Busy
                    && cpus.len() == 1
                    && cpu::may_run_realtime()
                {
                    seat.realtime = true;
                    let reason = format!("{reason}; SCHED_FIFO allowed");
                    (PollMode::Block, cpus, reason)
                } else {
                    (poll, cpus, reason)
                }
            }
        };
        seat.switch.set(poll);
        *lock(&seat.cpus) = cpus.clone();
        *lock(&seat.placement) = Placement {
            poll: poll.name().into(),
            cpu: (cpus.len() == 1).then(|| cpus[0]),
            reason,
            changes: Vec::new(),
            realtime: seat.realtime,
        };
        seat
    }

    /// The plan's choice for `auto`, its claim taken: (mode, CPUs, reason).
    fn planned(&mut self) -> (PollMode, Vec<usize>, String) {
        if self.allowed.is_empty() {
            return (
                PollMode::Block,
                Vec::new(),
                "no CPU list from the kernel".into(),
            );
        }
        for _ in 0..3 {
            let claims = match Claims::read(&self.dir, &self.allowed) {
                Ok(claims) => claims,
                Err(e) => return self.unplanned(&e.to_string()),
            };
            match plan(self.role, &self.allowed, &claims) {
                Plan::Spin { cpu, reason } => match self.try_claim(cpu) {
                    Ok(true) => {
                        self.yields = self.role == Role::Loop;
                        return (PollMode::Busy, vec![cpu], reason);
                    }
                    // Taken since the claims were read: read them again.
                    Ok(false) => continue,
                    Err(e) => return self.unplanned(&e.to_string()),
                },
                Plan::Block { cpus, reason } => return (PollMode::Block, cpus, reason),
            }
        }
        (
            PollMode::Block,
            self.allowed.clone(),
            "the CPUs the plan gave were claimed by others as it looked".into(),
        )
    }

    /// A loop's `--poll busy` without `--cpu`: pinned to a CPU nobody claimed, its claim taken
    /// (so the plans of others see it), or unpinned, saying that none is free.
    fn explicit_busy(&mut self) -> (PollMode, Vec<usize>, String) {
        let given = "--poll busy given";
        let unpinned = |why: String| (PollMode::Busy, Vec::new(), format!("{given}; {why}"));
        if self.allowed.is_empty() {
            return unpinned("no CPU list from the kernel".into());
        }
        for _ in 0..3 {
            let claims = match Claims::read(&self.dir, &self.allowed) {
                Ok(claims) => claims,
                Err(e) => return unpinned(format!("no core plan ({e})")),
            };
            let cpu = match super::free_cpu(&self.allowed, &claims) {
                Ok(cpu) => cpu,
                Err(why) => return unpinned(format!("{why}: spinning where the kernel puts it")),
            };
            match self.try_claim(cpu) {
                Ok(true) => {
                    let seen = claims.describe();
                    let reason = format!("{given}; {seen}; CPU {cpu} free, claimed");
                    return (PollMode::Busy, vec![cpu], reason);
                }
                // Taken since the claims were read: read them again.
                Ok(false) => continue,
                Err(e) => return unpinned(format!("no core plan ({e})")),
            }
        }
        unpinned("the free CPUs were claimed by others as it looked".into())
    }

    /// `auto` without claims (the folder cannot be written): spin only with enough CPUs.
    fn unplanned(&self, error: &str) -> (PollMode, Vec<usize>, String) {
        let n = self.allowed.len();
        let spin = n >= super::SPIN_CPUS_UNPLANNED;
        let reason = format!(
            "no core plan ({error}): {} with {n} CPUs",
            if spin { "spinning" } else { "blocking" }
        );
        let poll = if spin {
            PollMode::Busy
        } else {
            PollMode::Block
        };
        (poll, Vec::new(), reason)
    }

    /// Takes this seat's claim on `cpu`; `None` when held by another (or not to be had).
    fn claim(&self, cpu: usize) -> Option<()> {
        self.try_claim(cpu).ok().filter(|&taken| taken).map(drop)
    }

    fn try_claim(&self, cpu: usize) -> std::io::Result<bool> {
        match take_claim(&self.dir, cpu, self.role, &self.who)? {
            Some(held) => {
                lock(&self.claims).push((cpu, held));
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// How the loop waits now; hand it to the engine, which reads it every turn.
    pub fn switch(&self) -> &PollSwitch {
        &self.switch
    }

    /// How the loop waits at the start.
    pub fn poll(&self) -> PollMode {
        self.switch.mode()
    }

    /// The one CPU the loop is pinned to, if it is.
    pub fn cpu(&self) -> Option<usize> {
        let cpus = lock(&self.cpus);
        (cpus.len() == 1).then(|| cpus[0])
    }

    /// Where the loop ran and why, with what changed so far.
    pub fn placement(&self) -> Placement {
        lock(&self.placement).clone()
    }

    /// Adds `what` to the placement's reason (what else was placed with the loop).
    pub fn add_reason(&self, what: &str) {
        let mut placement = lock(&self.placement);
        placement.reason = format!("{}; {what}", placement.reason);
    }

    /// Puts the thread `tid` (0: the calling thread) where the seat says: pinned to its CPU,
    /// or allowed the CPUs the plan leaves to blocking loops.
    pub fn place(&self, tid: i32) -> std::io::Result<()> {
        let cpus = lock(&self.cpus).clone();
        if cpus.is_empty() {
            return Ok(());
        }
        if let [spun] = cpus.as_slice() {
            if self.realtime || self.poll() == PollMode::Busy {
                let rest: Vec<usize> = self.allowed.iter().copied().filter(|c| c != spun).collect();
                *lock(&HELPER_CPUS) = rest;
            }
        }
        cpu::set_thread_cpus(tid, &cpus)?;
        if self.realtime {
            if let Err(e) = cpu::set_thread_realtime(tid, REALTIME_PRIORITY) {
                // Allowed when the seat was taken, refused now: the loop sleeps between frames
                // as an ordinary thread, and the report says so.
                let mut placement = lock(&self.placement);
                placement.realtime = false;
                placement
                    .changes
                    .push(format!("SCHED_FIFO refused ({e}): an ordinary thread"));
            }
        }
        Ok(())
    }

    /// Runs `engine` on the calling thread, placed as the seat says; a spinning loop that
    /// yields is watched meanwhile (every [`WATCH_EVERY`]) and gives way to an emulator that
    /// claims its CPU.
    pub fn run<T>(&self, engine: impl FnOnce() -> T) -> std::io::Result<T> {
        self.place(0)?;
        let tid = cpu::current_thread_id();
        let done = AtomicBool::new(false);
        let out = std::thread::scope(|s| {
            if self.yields {
                s.spawn(|| {
                    place_helper_thread();
                    self.watch(tid, &done)
                });
            }
            let out = engine();
            done.store(true, Ordering::Relaxed);
            out
        });
        Ok(out)
    }

    /// Looks every [`WATCH_EVERY`] until `done` whether an emulator claimed the CPU the loop
    /// `tid` spins on; then gives way once and stops looking.
    fn watch(&self, tid: i32, done: &AtomicBool) {
        let start = Instant::now();
        let mut next = start + WATCH_EVERY;
        while !done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
            if Instant::now() < next {
                continue;
            }
            next += WATCH_EVERY;
            if self.give_way_if_asked(tid, start.elapsed()) {
                return;
            }
        }
    }

    /// When an emulator holds the CPU this seat spins on: moves the loop `tid` to a CPU the
    /// plan gives it, else switches it to blocking off the emulator's CPU, and records it.
    /// Returns whether it gave way.
    pub fn give_way_if_asked(&self, tid: i32, after: Duration) -> bool {
        let Some(cpu) = self.cpu() else {
            return false;
        };
        let emulator = super::claim_path(&self.dir, cpu, Role::Emulator);
        if !is_held(&emulator).unwrap_or(false) {
            return false;
        }
        let claims = Claims::read(&self.dir, &self.allowed)
            .unwrap_or_else(|_| Claims {
                emulator: [cpu].into(),
                ..Claims::default()
            })
            .without_spinning(cpu);
        let moved = match plan(Role::Loop, &self.allowed, &claims) {
            Plan::Spin { cpu: to, .. } if self.claim(to).is_some() => {
                let _ = cpu::pin_thread(tid, to);
                *lock(&self.cpus) = vec![to];
                format!("spinning on CPU {to}")
            }
            Plan::Spin { .. } => self.block(tid, &claims),
            Plan::Block { cpus, .. } => {
                *lock(&self.cpus) = cpus;
                self.block(tid, &claims)
            }
        };
        lock(&self.claims).retain(|(c, _)| *c != cpu);
        lock(&self.placement).changes.push(format!(
            "after {:.1} s an emulator claimed CPU {cpu}: {moved}",
            after.as_secs_f64()
        ));
        true
    }

    /// Switches the loop `tid` to blocking on the CPUs no emulator holds.
    fn block(&self, tid: i32, claims: &Claims) -> String {
        let mut cpus: Vec<usize> = self
            .allowed
            .iter()
            .copied()
            .filter(|c| !claims.emulator.contains(c))
            .collect();
        if cpus.is_empty() {
            cpus = self.allowed.clone();
        }
        self.switch.set(PollMode::Block);
        let _ = cpu::set_thread_cpus(tid, &cpus);
        let list = cpus
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        *lock(&self.cpus) = cpus;
        format!("blocking on CPU {list}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_busy_loop_is_pinned_to_a_cpu_nobody_claimed_and_claims_it() {
        let cpus = cpu::allowed_cpus().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let take =
            |choice, cpu| Seat::take_in(dir.path().into(), Role::Loop, "latlab gen", choice, cpu);
        // Another loop spins on the last CPU (a reflector at its defaults).
        let last = *cpus.last().unwrap();
        let echo = take(PollChoice::Busy, Some(last));
        assert_eq!(echo.cpu(), Some(last));
        let gen = take(PollChoice::Busy, None);
        assert_eq!(gen.poll(), PollMode::Busy);
        let placement = gen.placement();
        if cpus.len() >= 2 {
            let below = cpus[cpus.len() - 2];
            assert_eq!(gen.cpu(), Some(below), "{placement:?}");
            assert_eq!(
                placement.reason,
                format!(
                    "--poll busy given; a loop spinning on CPU {last}; CPU {below} free, claimed"
                )
            );
            let claims = Claims::read(dir.path(), &cpus).unwrap();
            assert!(claims.spinning.contains(&below) && claims.spinning.contains(&last));
            // Every CPU claimed now (on two CPUs): a third busy loop spins unpinned, saying so.
            if cpus.len() == 2 {
                let third = take(PollChoice::Busy, None);
                assert_eq!((third.poll(), third.cpu()), (PollMode::Busy, None));
                assert!(
                    third
                        .placement()
                        .reason
                        .ends_with("no CPU free: spinning where the kernel puts it"),
                    "{:?}",
                    third.placement()
                );
            }
        } else {
            assert_eq!(gen.cpu(), None, "{placement:?}");
            assert!(placement.reason.contains("no CPU free"), "{placement:?}");
        }
        // An explicit choice does not give way: only the plan's spinning loops do.
        assert!(!gen.yields);
    }

    #[test]
    fn a_spinning_loop_gives_way_to_an_emulator_that_claims_its_cpu() {
        let cpus = cpu::allowed_cpus().unwrap();
        if cpus.len() < 2 {
            latlab_io::precondition::missing("one CPU: no loop spins at auto");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let seat = Seat::take_in(
            dir.path().into(),
            Role::Loop,
            "latlab gen",
            PollChoice::Auto,
            None,
        );
        let last = *cpus.last().unwrap();
        assert_eq!(seat.poll(), PollMode::Busy, "{:?}", seat.placement());
        assert_eq!(seat.cpu(), Some(last));
        assert!(Claims::read(dir.path(), &cpus)
            .unwrap()
            .spinning
            .contains(&last));
        // A thread standing for the loop, which the seat moves.
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let loop_thread = std::thread::spawn(move || {
            tid_tx.send(cpu::current_thread_id()).unwrap();
            go_rx.recv().unwrap();
            cpu::allowed_cpus().unwrap()
        });
        let tid = tid_rx.recv().unwrap();
        assert!(!seat.give_way_if_asked(tid, Duration::ZERO), "nobody asked");
        let emu = take_claim(dir.path(), last, Role::Emulator, "latlab emu")
            .unwrap()
            .expect("an emulator may claim a loop's CPU");
        assert!(seat.give_way_if_asked(tid, Duration::from_millis(300)));
        go_tx.send(()).unwrap();
        let now_on = loop_thread.join().unwrap();
        assert!(!now_on.contains(&last), "moved off the emulator's CPU");
        let p = seat.placement();
        assert_eq!(p.changes.len(), 1, "{p:?}");
        assert!(
            p.changes[0].contains(&format!("claimed CPU {last}")),
            "{p:?}"
        );
        if cpus.len() == 2 {
            assert_eq!(
                seat.switch().mode(),
                PollMode::Block,
                "no second CPU to spin on"
            );
        }
        assert!(
            !Claims::read(dir.path(), &cpus)
                .unwrap()
                .spinning
                .contains(&last),
            "its old claim is given back"
        );
        drop(emu);
    }

    #[test]
    fn helper_threads_of_a_spinning_loop_keep_off_its_cpu() {
        let cpus = cpu::allowed_cpus().unwrap();
        if cpus.len() < 2 {
            latlab_io::precondition::missing("one CPU: no loop spins at auto");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let seat = Seat::take_in(
            dir.path().into(),
            Role::Emulator,
            "latlab emu",
            PollChoice::Auto,
            None,
        );
        // Where the process may (root), the emulator sleeps between frames in SCHED_FIFO;
        // elsewhere it spins.
        let realtime = cpu::may_run_realtime();
        let expected = if realtime {
            PollMode::Block
        } else {
            PollMode::Busy
        };
        assert_eq!(seat.poll(), expected, "{:?}", seat.placement());
        assert_eq!(seat.placement().realtime, realtime);
        let spun = seat.cpu().unwrap();
        // The loop's thread, pinned by the seat, starts a watcher as the commands do.
        let (loop_cpus, loop_policy, helper_cpus, helper_policy) = std::thread::scope(|s| {
            s.spawn(|| {
                seat.run(|| {
                    let helper = std::thread::spawn(|| {
                        let inherited = cpu::allowed_cpus().unwrap();
                        place_helper_thread();
                        let policy = cpu::thread_is_realtime(0).unwrap();
                        (inherited, cpu::allowed_cpus().unwrap(), policy)
                    });
                    let (inherited, placed, policy) = helper.join().unwrap();
                    assert_eq!(
                        inherited,
                        vec![spun],
                        "a new thread starts on the loop's CPU"
                    );
                    let own = cpu::thread_is_realtime(0).unwrap();
                    (cpu::allowed_cpus().unwrap(), own, placed, policy)
                })
                .unwrap()
            })
            .join()
            .unwrap()
        });
        assert_eq!(loop_cpus, vec![spun]);
        assert_eq!(loop_policy, realtime);
        assert!(!helper_policy, "helpers are ordinary threads");
        let rest: Vec<usize> = cpus.iter().copied().filter(|&c| c != spun).collect();
        assert_eq!(helper_cpus, rest, "the helper moved off CPU {spun}");
    }

    #[test]
    fn explicit_flags_win_and_are_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let busy = Seat::take_in(
            dir.path().into(),
            Role::Loop,
            "latlab echo",
            PollChoice::Busy,
            None,
        );
        assert_eq!(busy.poll(), PollMode::Busy);
        let last = *cpu::allowed_cpus().unwrap().last().unwrap();
        assert_eq!(
            busy.placement().reason,
            format!("--poll busy given; no CPU claimed; CPU {last} free, claimed")
        );
        drop(busy);
        let first = cpu::allowed_cpus().unwrap()[0];
        let pinned = Seat::take_in(
            dir.path().into(),
            Role::Loop,
            "latlab echo",
            PollChoice::Busy,
            Some(first),
        );
        assert_eq!(pinned.placement().cpu, Some(first));
        assert!(pinned.placement().reason.ends_with("claimed"));
        // Its CPU is claimed now: a loop told --cpu there at auto blocks.
        let second = Seat::take_in(
            dir.path().into(),
            Role::Loop,
            "latlab gen",
            PollChoice::Auto,
            Some(first),
        );
        assert_eq!(second.poll(), PollMode::Block);
        assert!(second
            .placement()
            .line()
            .starts_with("blocking, pinned to CPU"));
    }

    #[test]
    fn without_a_claims_folder_auto_is_safe_and_says_why() {
        // A file where the folder should be: no claim can be read or taken.
        let file = tempfile::NamedTempFile::new().unwrap();
        let seat = Seat::take_in(
            file.path().join("cpu"),
            Role::Loop,
            "latlab gen",
            PollChoice::Auto,
            None,
        );
        let n = cpu::allowed_cpus().unwrap().len();
        let p = seat.placement();
        assert!(p.reason.starts_with("no core plan ("), "{p:?}");
        let expected = if n >= 3 { "busy" } else { "block" };
        assert_eq!(p.poll, expected, "{p:?}");
    }
}
