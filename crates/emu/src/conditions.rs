//! The settings a running emulator was given, shared by everything that changes them (the
//! HTTP API, the browser's panel), so that they never disagree: each direction's settings as
//! set (`base`), and the one-shot a person asked for on top of them (`Overlay`: the cable
//! pulled, a lag spike, an outage, a flapping link). Every change of settings, whoever made
//! it, goes to the engine through [`EmulatorControl`] as the whole direction's new
//! configuration, between two frames; a one-shot goes as an engine event
//! ([`EmulatorControl::submit_event`]), which the link applies on top of whatever is set
//! and ends by itself on time, so what is applied during a spike stays when it ends.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use latlab_engine::emulator::{EmulatorControl, LinkDirection};
use latlab_link::{Event, Flows, LinkConfig};

/// How long a change waits for the engine to apply it.
pub const ENGINE_WAIT: Duration = Duration::from_secs(2);

/// A one-shot on top of the settings, both ways.
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
    /// Up `up_ns`, down `down_ns`, over and over, for a while or until released.
    Flap {
        /// Up, ns.
        up_ns: u64,
        /// Down, ns.
        down_ns: u64,
    },
}

impl OverlayKind {
    /// `cable`, `spike`, `outage`, `flap`.
    pub fn name(&self) -> &'static str {
        match self {
            OverlayKind::Cable => "cable",
            OverlayKind::Spike { .. } => "spike",
            OverlayKind::Outage => "outage",
            OverlayKind::Flap { .. } => "flap",
        }
    }

    /// The engine's event for this one-shot lasting `length` (`None`: until released).
    pub fn event(&self, length: Option<Duration>) -> Event {
        let length_ns = length.map(|l| l.as_nanos().min(u128::from(u64::MAX)) as u64);
        match *self {
            OverlayKind::Cable => Event::Outage { length_ns: None },
            OverlayKind::Spike { delay_ns } => Event::Spike {
                delay_ns,
                length_ns: length_ns.unwrap_or(u64::MAX),
            },
            OverlayKind::Outage => Event::Outage { length_ns },
            OverlayKind::Flap { up_ns, down_ns } => Event::Flap {
                up_ns,
                down_ns,
                length_ns,
            },
        }
    }

    /// The one-shot an engine event stands for.
    pub fn of(event: &Event) -> OverlayKind {
        match *event {
            Event::Spike { delay_ns, .. } => OverlayKind::Spike { delay_ns },
            Event::Outage { length_ns: None } => OverlayKind::Cable,
            Event::Outage { .. } => OverlayKind::Outage,
            Event::Flap { up_ns, down_ns, .. } => OverlayKind::Flap { up_ns, down_ns },
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

    /// Direction `d`'s default link as in force: its settings (a one-shot is the engine's
    /// event on top of them, shown by [`Conditions::overlay`]).
    pub fn in_force(&self, d: usize) -> LinkConfig {
        self.base[d].default.clone()
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

    /// Starts a one-shot both ways lasting `length` (`None`: until released), replacing the
    /// one in force: the engine ends the events in force, then begins this one.
    pub fn begin(
        &mut self,
        kind: OverlayKind,
        length: Option<Duration>,
        control: &EmulatorControl,
        by: &str,
    ) -> Applied {
        self.event([true, true], Some(kind.event(length)), control, by)
    }

    /// Hands `event` to the engine for the directions marked (`None`: ends the events in
    /// force), first ending the one-shot in force if any; records it as the overlay shown.
    pub fn event(
        &mut self,
        directions: [bool; 2],
        event: Option<Event>,
        control: &EmulatorControl,
        by: &str,
    ) -> Applied {
        if self.overlay.take().is_some() && event.is_some() {
            control.submit_event(directions, None, by);
        }
        if let Some(event) = event {
            let now = Instant::now();
            self.overlay = Some(Overlay {
                kind: OverlayKind::of(&event),
                since: now,
                until: event
                    .length_ns()
                    .filter(|&l| l < u64::MAX)
                    .map(|l| now + Duration::from_nanos(l)),
            });
        }
        let ticket = control.submit_event(directions, event, by);
        if control.wait_applied(ticket, ENGINE_WAIT) {
            Applied::Yes
        } else {
            Applied::NotYet
        }
    }

    /// Ends the one-shot in force, if any (the engine ends the events in force).
    pub fn end(&mut self, control: &EmulatorControl, by: &str) -> Option<Applied> {
        self.overlay.as_ref()?;
        Some(self.event([true, true], None, control, by))
    }

    /// Forgets a timed one-shot whose time is over at `now` (the engine ended it on time);
    /// true if it did.
    pub fn expire(&mut self, now: Instant) -> bool {
        let over = self
            .overlay
            .as_ref()
            .is_some_and(|o| o.until.is_some_and(|t| now >= t));
        if over {
            self.overlay = None;
        }
        over
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
