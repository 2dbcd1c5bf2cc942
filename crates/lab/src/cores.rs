//! The core plan: how the latlab processes of one host give the CPUs out among themselves at
//! their defaults (`--poll auto`), so that at most one loop spins on each CPU and the
//! emulator, whose release error is the measurement, gets its CPU first.
//!
//! Every process sees the same claims: a loop about to spin on CPU N holds an
//! [`OwnerLock`] on `N.spin` in [`claims_dir`] (`/run/latlab/cpu`), the emulator one on `N.emu`,
//! for as long as it spins there; the kernel lets go of them however the process ends. From the
//! claims present and the CPUs it may run on, [`plan`] (pure, no lock) decides:
//!
//! - **the emulator** takes the highest CPU nobody claimed when another CPU stays free for
//!   the rest, else the highest CPU no emulator holds, whose spinning loop gives way; it
//!   sleeps (and spins only the last stretch before each departure) when it is allowed only
//!   one CPU. On its CPU it spins, or, where the process may ([`seat::Seat`] asks the
//!   kernel), sleeps between frames in `SCHED_FIFO`: whatever else runs there (a build, the
//!   kernel's deferred receive work in `ksoftirqd`) would otherwise take turns with a spinning
//!   loop a scheduler tick at a time, milliseconds of release error; a realtime thread that
//!   wakes runs at once;
//! - **a loop** (`gen`, `echo`, `serve`) spins on the highest free CPU when another free one is
//!   left after it (for the blocking loops and the kernel's work), else blocks on the CPUs
//!   nobody spins on.
//!
//! A spinning loop keeps watching ([`seat::Seat`]): when an emulator claims its CPU it moves to
//! a CPU the plan gives it or goes on blocking, without stopping its run. An explicit
//! `--poll busy|block` (or `--cpu`) wins over the plan and is recorded as such; a loop's
//! `--poll busy` without `--cpu` spins on a CPU nobody claimed ([`free_cpu`]), its claim taken,
//! or says that none is free. Where the
//! claims cannot be read or taken (`/run/latlab` not writable), `auto` spins only with
//! [`SPIN_CPUS_UNPLANNED`] CPUs or more and says why in the placement.
//!
//! ```
//! use latlab_lab::cores::{plan, Claims, Plan, Role};
//! let nobody = Claims::default();
//! // Two CPUs: the emulator spins on CPU 1; a loop then finds no second free CPU and blocks
//! // on CPU 0.
//! assert!(matches!(plan(Role::Emulator, &[0, 1], &nobody), Plan::Spin { cpu: 1, .. }));
//! let emu = Claims { emulator: [1].into(), spinning: Default::default() };
//! assert!(matches!(plan(Role::Loop, &[0, 1], &emu), Plan::Block { ref cpus, .. } if cpus == &[0]));
//! ```

pub mod seat;

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use latlab_engine::PollMode;
use latlab_io::lock::OwnerLock;

pub use seat::{Placement, Seat};

/// Where the claims live unless [`CLAIMS_ENV`] says otherwise.
pub const CLAIMS_DIR: &str = "/run/latlab/cpu";

/// The environment variable that moves the claims folder (tests that must not meet the
/// host's other latlab processes).
pub const CLAIMS_ENV: &str = "LATLAB_CPU_CLAIMS";

/// CPUs `auto` needs before a loop spins when the claims cannot be had: one for the
/// emulator and two for what sends and answers through it.
pub const SPIN_CPUS_UNPLANNED: usize = 3;

/// The claims folder: [`CLAIMS_ENV`] when set, else [`CLAIMS_DIR`].
pub fn claims_dir() -> PathBuf {
    std::env::var_os(CLAIMS_ENV)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(CLAIMS_DIR), PathBuf::from)
}

/// What `--poll` of `gen`, `echo` and `serve` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PollChoice {
    /// As the core plan says: spin on a CPU of its own when one is free, else block.
    #[default]
    Auto,
    /// Spin, whatever the plan (one core at 100%).
    Busy,
    /// Sleep until packets arrive or a deadline nears.
    Block,
}

impl PollChoice {
    /// Every choice, in the order the command line lists them.
    pub const ALL: [PollChoice; 3] = [PollChoice::Auto, PollChoice::Busy, PollChoice::Block];

    /// The name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            PollChoice::Auto => "auto",
            PollChoice::Busy => "busy",
            PollChoice::Block => "block",
        }
    }

    /// The mode an explicit choice names; `None` for [`PollChoice::Auto`].
    pub fn explicit(self) -> Option<PollMode> {
        match self {
            PollChoice::Auto => None,
            PollChoice::Busy => Some(PollMode::Busy),
            PollChoice::Block => Some(PollMode::Block),
        }
    }
}

impl std::str::FromStr for PollChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PollChoice::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown poll mode {s:?}: expected auto, busy or block"))
    }
}

/// Who asks for a CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `latlab emu`: first served, never gives way.
    Emulator,
    /// `gen`, `echo`, `serve`: spins only on a CPU nobody claimed, gives way to an emulator.
    Loop,
}

/// The CPUs claimed on this host, as the claims folder says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Claims {
    /// CPUs an emulator holds.
    pub emulator: BTreeSet<usize>,
    /// CPUs a loop spins on.
    pub spinning: BTreeSet<usize>,
}

impl Claims {
    /// Reads the claims on `cpus` in `dir` (a claim file whose lock can be taken is no claim).
    /// A missing folder is no claims.
    pub fn read(dir: &Path, cpus: &[usize]) -> io::Result<Claims> {
        let mut claims = Claims::default();
        for &cpu in cpus {
            if is_held(&claim_path(dir, cpu, Role::Emulator))? {
                claims.emulator.insert(cpu);
            }
            if is_held(&claim_path(dir, cpu, Role::Loop))? {
                claims.spinning.insert(cpu);
            }
        }
        Ok(claims)
    }

    /// These claims without a loop's own claim on `cpu` (what it plans against when it moves).
    pub fn without_spinning(mut self, cpu: usize) -> Claims {
        self.spinning.remove(&cpu);
        self
    }

    /// Whether anyone spins on `cpu`.
    pub fn is_claimed(&self, cpu: usize) -> bool {
        self.emulator.contains(&cpu) || self.spinning.contains(&cpu)
    }

    /// The claims in words: `emulator on CPU 1, a loop spinning on CPU 2`, or `no CPU
    /// claimed`.
    pub fn describe(&self) -> String {
        let list = |set: &BTreeSet<usize>| {
            set.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts = Vec::new();
        if !self.emulator.is_empty() {
            parts.push(format!("emulator on CPU {}", list(&self.emulator)));
        }
        if !self.spinning.is_empty() {
            parts.push(format!("a loop spinning on CPU {}", list(&self.spinning)));
        }
        if parts.is_empty() {
            "no CPU claimed".into()
        } else {
            parts.join(", ")
        }
    }
}

/// What [`plan`] decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Spin pinned to `cpu` (claimed first).
    Spin {
        /// The CPU.
        cpu: usize,
        /// Why, in words.
        reason: String,
    },
    /// Block, allowed on `cpus` (never empty).
    Block {
        /// The CPUs the blocking loop may run on.
        cpus: Vec<usize>,
        /// Why, in words.
        reason: String,
    },
}

/// Where `role` goes on a host whose claims are `claims`, allowed the CPUs `allowed`
/// (ascending, not empty). Pure: the claims are read, and the chosen one taken, by the
/// caller.
pub fn plan(role: Role, allowed: &[usize], claims: &Claims) -> Plan {
    debug_assert!(!allowed.is_empty(), "a process is allowed at least one CPU");
    let seen = claims.describe();
    let free: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|&c| !claims.is_claimed(c))
        .collect();
    match role {
        Role::Emulator => {
            if allowed.len() < 2 {
                return Plan::Block {
                    cpus: allowed.to_vec(),
                    reason: "one CPU allowed: the emulator sleeps between frames".into(),
                };
            }
            if free.len() >= 2 {
                let cpu = *free.last().expect("two free CPUs");
                return Plan::Spin {
                    cpu,
                    reason: format!("{seen}; CPU {cpu} free"),
                };
            }
            match allowed.iter().rev().find(|c| !claims.emulator.contains(c)) {
                Some(&cpu) => Plan::Spin {
                    cpu,
                    reason: if claims.spinning.contains(&cpu) {
                        format!("{seen}; CPU {cpu} taken over, its loop gives way")
                    } else {
                        format!("{seen}; CPU {cpu} free")
                    },
                },
                None => Plan::Block {
                    cpus: allowed.to_vec(),
                    reason: format!("{seen}: every CPU allowed has an emulator"),
                },
            }
        }
        Role::Loop => {
            if free.len() >= 2 {
                let cpu = *free.last().expect("two free CPUs");
                return Plan::Spin {
                    cpu,
                    reason: format!("{seen}; CPU {cpu} free"),
                };
            }
            let unspun: Vec<usize> = free;
            let no_emulator: Vec<usize> = allowed
                .iter()
                .copied()
                .filter(|c| !claims.emulator.contains(c))
                .collect();
            let cpus = [unspun, no_emulator]
                .into_iter()
                .find(|set| !set.is_empty())
                .unwrap_or_else(|| allowed.to_vec());
            Plan::Block {
                reason: format!(
                    "{seen}: no CPU to spin on that leaves another free; blocking on CPU {}",
                    cpus.iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                cpus,
            }
        }
    }
}

/// The CPU an explicit `--poll busy` without `--cpu` spins on: the highest allowed CPU nobody
/// claimed (no emulator, no spinning loop), so that it never spins where another latlab loop
/// does; `Err` with the claims in words when every CPU allowed is claimed.
pub fn free_cpu(allowed: &[usize], claims: &Claims) -> Result<usize, String> {
    allowed
        .iter()
        .rev()
        .copied()
        .find(|&c| !claims.is_claimed(c))
        .ok_or_else(|| format!("{}: no CPU free", claims.describe()))
}

/// The claim file of `role` on `cpu`: `N.emu` or `N.spin`.
pub fn claim_path(dir: &Path, cpu: usize, role: Role) -> PathBuf {
    dir.join(match role {
        Role::Emulator => format!("{cpu}.emu"),
        Role::Loop => format!("{cpu}.spin"),
    })
}

/// Whether some process holds the lock on the claim file at `path` (a missing file: no).
/// Looking takes the lock for a moment when it is free.
pub fn is_held(path: &Path) -> io::Result<bool> {
    match OwnerLock::open(path) {
        Ok(lock) => Ok(lock.is_none()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Takes `role`'s claim on `cpu` in `dir`, writing who holds it into the file; `Ok(None)` when
/// it is held. A loop's claim is given back at once if an emulator holds the CPU.
pub fn take_claim(dir: &Path, cpu: usize, role: Role, who: &str) -> io::Result<Option<OwnerLock>> {
    let path = claim_path(dir, cpu, role);
    // An emulator's claim may be held for a moment by a loop looking at it: a few tries.
    let tries = if role == Role::Emulator { 5 } else { 1 };
    for attempt in 0..tries {
        if let Some(lock) = OwnerLock::create(&path)? {
            if role == Role::Loop && is_held(&claim_path(dir, cpu, Role::Emulator))? {
                return Ok(None);
            }
            write_owner(&lock, who)?;
            return Ok(Some(lock));
        }
        if attempt + 1 < tries {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    Ok(None)
}

/// Writes `who` (and this process's id) into a claim file, for whoever looks at the folder.
fn write_owner(lock: &OwnerLock, who: &str) -> io::Result<()> {
    use std::io::Write;
    let mut file = lock.file();
    file.set_len(0)?;
    std::os::unix::fs::FileExt::write_at(
        file,
        format!("{who} pid {}\n", std::process::id()).as_bytes(),
        0,
    )?;
    file.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(emulator: &[usize], spinning: &[usize]) -> Claims {
        Claims {
            emulator: emulator.iter().copied().collect(),
            spinning: spinning.iter().copied().collect(),
        }
    }

    #[test]
    fn an_explicit_busy_loop_takes_the_highest_cpu_nobody_claimed_or_says_none_is_free() {
        // Two CPUs, a reflector at its defaults spinning on CPU 1: the generator's busy loop
        // goes to CPU 0, never beside it.
        assert_eq!(free_cpu(&[0, 1], &claims(&[], &[1])), Ok(0));
        assert_eq!(free_cpu(&[0, 1], &claims(&[], &[])), Ok(1));
        // An emulator's CPU is never taken either; the highest of the rest is.
        assert_eq!(free_cpu(&[0, 1, 2, 3], &claims(&[3], &[1])), Ok(2));
        // Only the CPUs allowed count.
        assert_eq!(free_cpu(&[1], &claims(&[], &[0])), Ok(1));
        assert_eq!(
            free_cpu(&[0, 1], &claims(&[1], &[0])),
            Err("emulator on CPU 1, a loop spinning on CPU 0: no CPU free".into())
        );
    }

    fn spin_cpu(p: &Plan) -> Option<usize> {
        match p {
            Plan::Spin { cpu, .. } => Some(*cpu),
            Plan::Block { .. } => None,
        }
    }

    fn block_cpus(p: &Plan) -> Option<Vec<usize>> {
        match p {
            Plan::Spin { .. } => None,
            Plan::Block { cpus, .. } => Some(cpus.clone()),
        }
    }

    #[test]
    fn on_two_cpus_the_emulator_spins_and_the_loops_block_beside_it() {
        let two = [0, 1];
        let nobody = claims(&[], &[]);
        assert_eq!(spin_cpu(&plan(Role::Emulator, &two, &nobody)), Some(1));
        // Once the emulator holds CPU 1, echo and gen both block on CPU 0.
        let emu = claims(&[1], &[]);
        assert_eq!(block_cpus(&plan(Role::Loop, &two, &emu)), Some(vec![0]));
        // Without an emulator, the first loop spins and keeps the other CPU free.
        assert_eq!(spin_cpu(&plan(Role::Loop, &two, &nobody)), Some(1));
        let one_spins = claims(&[], &[1]);
        assert_eq!(
            block_cpus(&plan(Role::Loop, &two, &one_spins)),
            Some(vec![0])
        );
    }

    #[test]
    fn the_emulator_takes_a_spinning_loops_cpu_rather_than_the_last_free_one() {
        // A loop spins on CPU 1 of two: taking CPU 0 would leave no CPU for the blocking
        // loops, so the emulator takes CPU 1 and the loop gives way.
        let p = plan(Role::Emulator, &[0, 1], &claims(&[], &[1]));
        assert_eq!(spin_cpu(&p), Some(1));
        let Plan::Spin { reason, .. } = p else {
            unreachable!()
        };
        assert!(reason.contains("gives way"), "{reason}");
        // The loop, planning again without its own claim, finds nothing to spin on.
        let after = claims(&[1], &[1]).without_spinning(1);
        assert_eq!(
            block_cpus(&plan(Role::Loop, &[0, 1], &after)),
            Some(vec![0])
        );
        // With four CPUs and one loop spinning, the emulator takes a free CPU instead.
        let four = plan(Role::Emulator, &[0, 1, 2, 3], &claims(&[], &[3]));
        assert_eq!(spin_cpu(&four), Some(2));
    }

    #[test]
    fn on_four_cpus_everyone_spins_on_a_cpu_of_its_own_and_one_stays_free() {
        let four = [0, 1, 2, 3];
        let mut held = claims(&[], &[]);
        let emu = spin_cpu(&plan(Role::Emulator, &four, &held)).unwrap();
        held.emulator.insert(emu);
        let echo = spin_cpu(&plan(Role::Loop, &four, &held)).unwrap();
        held.spinning.insert(echo);
        let gen = spin_cpu(&plan(Role::Loop, &four, &held)).unwrap();
        held.spinning.insert(gen);
        assert_eq!((emu, echo, gen), (3, 2, 1));
        // A third loop blocks on the CPU left free.
        assert_eq!(block_cpus(&plan(Role::Loop, &four, &held)), Some(vec![0]));
    }

    #[test]
    fn one_cpu_blocks_everyone_and_a_full_host_blocks_off_the_emulators_cpu() {
        assert_eq!(
            block_cpus(&plan(Role::Emulator, &[0], &claims(&[], &[]))),
            Some(vec![0])
        );
        assert_eq!(
            block_cpus(&plan(Role::Loop, &[0], &claims(&[], &[]))),
            Some(vec![0])
        );
        // Every CPU claimed: a loop blocks where no emulator is.
        let full = claims(&[1], &[0]);
        assert_eq!(block_cpus(&plan(Role::Loop, &[0, 1], &full)), Some(vec![0]));
        // Every CPU an emulator's: a second emulator sleeps, anywhere.
        let emus = claims(&[0, 1], &[]);
        assert_eq!(
            block_cpus(&plan(Role::Emulator, &[0, 1], &emus)),
            Some(vec![0, 1])
        );
        // A process allowed only some CPUs plans among those.
        assert_eq!(
            spin_cpu(&plan(Role::Emulator, &[2, 5], &claims(&[], &[]))),
            Some(5)
        );
    }

    #[test]
    fn claims_are_read_from_locks_held_and_die_with_their_holder() {
        let dir = tempfile::tempdir().unwrap();
        let none = Claims::read(dir.path(), &[0, 1]).unwrap();
        assert_eq!(none, Claims::default(), "a folder without claim files");
        let emu = take_claim(dir.path(), 1, Role::Emulator, "latlab emu")
            .unwrap()
            .expect("free");
        let text = std::fs::read_to_string(claim_path(dir.path(), 1, Role::Emulator)).unwrap();
        assert_eq!(text, format!("latlab emu pid {}\n", std::process::id()));
        // A loop cannot claim the emulator's CPU; it can claim the other.
        assert!(take_claim(dir.path(), 1, Role::Loop, "latlab gen")
            .unwrap()
            .is_none());
        let spin = take_claim(dir.path(), 0, Role::Loop, "latlab gen")
            .unwrap()
            .expect("free");
        assert_eq!(
            Claims::read(dir.path(), &[0, 1]).unwrap(),
            claims(&[1], &[0])
        );
        assert!(take_claim(dir.path(), 1, Role::Emulator, "another emu")
            .unwrap()
            .is_none());
        drop((emu, spin));
        assert_eq!(
            Claims::read(dir.path(), &[0, 1]).unwrap(),
            Claims::default()
        );
    }

    #[test]
    fn poll_choices_are_named_as_typed() {
        for c in PollChoice::ALL {
            assert_eq!(c.name().parse::<PollChoice>(), Ok(c));
        }
        assert_eq!(PollChoice::default(), PollChoice::Auto);
        assert_eq!(PollChoice::Busy.explicit(), Some(PollMode::Busy));
        assert_eq!(PollChoice::Auto.explicit(), None);
        assert!("spin"
            .parse::<PollChoice>()
            .unwrap_err()
            .contains("auto, busy or block"));
    }
}
