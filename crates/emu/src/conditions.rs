//! The settings a running emulator was given, shared by everything that changes them (the
//! HTTP API, the browser's panel), so that they never disagree: each direction's settings as
//! set (`base`), and the one-shot a person pressed on top of them (`Overlay`: the cable pulled,
//! a lag spike, an outage). What is in force is the base with the overlay applied
//! ([`Conditions::in_force`]); every change, whoever made it, goes to the engine through
//! [`EmulatorControl`] as the whole direction's new configuration, between two frames.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use latlab_engine::emulator::{EmulatorControl, LinkDirection};
use latlab_link::{Flows, LinkConfig, LossModel};

/// How long a change waits for the engine to apply it.
pub const ENGINE_WAIT: Duration = Duration::from_secs(2);

/// A one-shot on top of the settings.
#[derive(Clone, Debug, PartialEq)]
pub enum OverlayKind {
    /// Every frame lost, both ways, until released.
    Cable,
    /// `delay_ns` more delay both ways, for a while.
    Spike {
        /// The delay added, ns.
        delay_ns: u64,
    },
    /// Every frame lost, both ways, for a while.
    Outage,
}

impl OverlayKind {
    /// `cable`, `spike`, `outage`.
    pub fn name(&self) -> &'static str {
        match self {
            OverlayKind::Cable => "cable",
            OverlayKind::Spike { .. } => "spike",
            OverlayKind::Outage => "outage",
        }
    }
}

/// The one-shot in force.
#[derive(Clone, Debug)]
pub struct Overlay {
    /// What it does.
    pub kind: OverlayKind,
    /// When it began.
    pub since: Instant,
    /// When it ends by itself (`None`: the cable, until released).
    pub until: Option<Instant>,
}

/// Both directions' settings and the one-shot on top.
#[derive(Debug)]
pub struct Conditions {
    base: [Flows; 2],
    overlay: Option<Overlay>,
}

/// [`Conditions`] shared between threads.
#[derive(Debug)]
pub struct SharedConditions(Mutex<Conditions>);

impl SharedConditions {
    /// The settings a run starts with (A→B, B→A).
    pub fn new(links: [Flows; 2]) -> SharedConditions {
        SharedConditions(Mutex::new(Conditions {
            base: links,
            overlay: None,
        }))
    }

    /// The conditions, locked (for as long as a request takes; never by the engine).
    pub fn lock(&self) -> MutexGuard<'_, Conditions> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What happened to a change handed to the engine.
#[derive(Debug, PartialEq)]
pub enum Applied {
    /// In force.
    Yes,
    /// The engine did not take it within [`ENGINE_WAIT`] (it is not running).
    NotYet,
    /// The engine refused it: why (the settings were put back).
    Refused(String),
}

impl Conditions {
    /// The settings as set (the default link of each direction, and its per-flow rules).
    pub fn base(&self) -> &[Flows; 2] {
        &self.base
    }

    /// The one-shot in force.
    pub fn overlay(&self) -> Option<&Overlay> {
        self.overlay.as_ref()
    }

    /// Direction `d`'s default link as in force: its settings with the one-shot applied.
    pub fn in_force(&self, d: usize) -> LinkConfig {
        let mut config = self.base[d].default.clone();
        match self.overlay.as_ref().map(|o| &o.kind) {
            Some(OverlayKind::Cable | OverlayKind::Outage) => {
                config.loss = LossModel::Bernoulli { p: 1.0 };
            }
            Some(OverlayKind::Spike { delay_ns }) => {
                config.delay_ns = config.delay_ns.saturating_add(*delay_ns);
            }
            None => {}
        }
        config
    }

    /// Both directions as in force, rules included.
    pub fn in_force_flows(&self) -> [Flows; 2] {
        [0, 1].map(|d| Flows {
            default: self.in_force(d),
            rules: self.base[d].rules.clone(),
        })
    }

    /// Sets the given directions' settings (`None`: unchanged) and hands what is then in force
    /// to the engine as one change, recorded as made `by`. If the engine refuses either, both
    /// are put back as they were.
    pub fn set(
        &mut self,
        configs: [Option<LinkConfig>; 2],
        control: &EmulatorControl,
        by: &str,
    ) -> Applied {
        let before = [0, 1].map(|d| self.base[d].default.clone());
        for (d, config) in configs.iter().enumerate() {
            if let Some(config) = config {
                self.base[d].default = config.clone();
            }
        }
        let changed = [0, 1].map(|d| configs[d].as_ref().map(|_| self.in_force(d)));
        match self.hand_over(changed, control, by) {
            Applied::Refused(why) => {
                let undo = [0, 1].map(|d| configs[d].as_ref().map(|_| before[d].clone()));
                for (d, config) in undo.iter().enumerate() {
                    if let Some(config) = config {
                        self.base[d].default = config.clone();
                    }
                }
                let put_back = [0, 1].map(|d| configs[d].as_ref().map(|_| self.in_force(d)));
                self.hand_over(put_back, control, &format!("{by} (put back)"));
                Applied::Refused(why)
            }
            other => other,
        }
    }

    /// Starts a one-shot (replacing one in force) lasting `length` (`None`: until released).
    pub fn begin(
        &mut self,
        kind: OverlayKind,
        length: Option<Duration>,
        control: &EmulatorControl,
        by: &str,
    ) -> Applied {
        let now = Instant::now();
        self.overlay = Some(Overlay {
            kind,
            since: now,
            until: length.map(|l| now + l),
        });
        self.hand_over(
            [Some(self.in_force(0)), Some(self.in_force(1))],
            control,
            by,
        )
    }

    /// Ends the one-shot in force, if any, handing the settings back to the engine.
    pub fn end(&mut self, control: &EmulatorControl, by: &str) -> Option<Applied> {
        self.overlay.take()?;
        Some(self.hand_over(
            [Some(self.in_force(0)), Some(self.in_force(1))],
            control,
            by,
        ))
    }

    /// Ends a timed one-shot whose time is over at `now`; its log line names it.
    pub fn expire(&mut self, now: Instant, control: &EmulatorControl) -> Option<Applied> {
        let over = self.overlay.as_ref()?.until.is_some_and(|t| now >= t);
        if !over {
            return None;
        }
        let name = self.overlay.as_ref().map_or("", |o| o.kind.name());
        self.end(control, &format!("ui: {name} over"))
    }

    fn hand_over(
        &self,
        configs: [Option<LinkConfig>; 2],
        control: &EmulatorControl,
        by: &str,
    ) -> Applied {
        let count = configs.iter().flatten().count();
        let seen = control.changes().len();
        let ticket = control.submit_pair(configs, by);
        if !control.wait_applied(ticket, ENGINE_WAIT) {
            return Applied::NotYet;
        }
        let changes = control.changes();
        let refused = changes.iter().skip(seen).rev().take(count).find_map(|c| {
            c.refused
                .as_ref()
                .map(|e| format!("{}: {e}", c.direction.name()))
        });
        match refused {
            Some(why) => Applied::Refused(why),
            None => Applied::Yes,
        }
    }
}

/// Which direction an index is.
pub fn direction(d: usize) -> LinkDirection {
    LinkDirection::BOTH[d]
}
