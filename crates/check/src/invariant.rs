//! The invariant machinery: a [`Check`] per invariant and the [`Checker`] that runs one
//! for a run under its name.
//!
//! Every invariant, a family's or a user's, is a [`Check`] registered by name; scenario
//! files name the invariants they check, and each run makes fresh checkers (their
//! memory between events is their own state).

use crate::reads::{Gate, Reads};
use crate::{View, Violation};
use reconsim_sim::SimTime;

/// An invariant a family registers: its name in scenario files and what makes a fresh
/// checker for each run (a function or a closure; shared, so cheap to clone).
#[derive(Clone)]
pub struct NamedCheck {
    pub name: String,
    make: std::sync::Arc<dyn Fn() -> Box<dyn Check> + Send + Sync>,
}

impl NamedCheck {
    pub fn new(
        name: impl Into<String>,
        make: impl Fn() -> Box<dyn Check> + Send + Sync + 'static,
    ) -> Self {
        NamedCheck {
            name: name.into(),
            make: std::sync::Arc::new(make),
        }
    }

    /// A fresh checker for one run, under this name.
    pub fn checker(&self) -> Checker {
        Checker::new(&self.name, (self.make)())
    }
}

impl std::fmt::Debug for NamedCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamedCheck")
            .field("name", &self.name)
            .finish()
    }
}

/// One invariant's checker, under its name, and its memory between events.
#[derive(Clone, Debug)]
pub struct Checker {
    name: String,
    check: Box<dyn Check>,
    /// Its inputs' change counts at its last check; `None`: it reads everything.
    gate: Option<Gate>,
}

/// An invariant. `check` runs after every
/// event that can change what checkers read (the API server's writes, the cloud, faults)
/// and keeps whatever memory it needs in `self`; the first `Some` stops the run. Read
/// only the [`View`]: ground truth, never a controller's cache. Derive `Clone` and
/// `Debug` and [`CheckClone`] comes for free.
///
/// ```
/// use reconsim_check::{Check, View, Violation};
///
/// /// `at_most_objects`: the API server never holds more than `max` objects.
/// #[derive(Clone, Debug)]
/// struct AtMostObjects {
///     max: usize,
/// }
///
/// impl Check for AtMostObjects {
///     fn check(&mut self, view: &View<'_>) -> Option<Violation> {
///         let n = view.api.objects().count();
///         (n > self.max).then(|| Violation {
///             invariant: "at_most_objects".into(),
///             time: view.now,
///             message: format!("{n} objects, at most {} allowed", self.max),
///             objects: Vec::new(),
///         })
///     }
/// }
///
/// // A family or a user's binary registers it by name, made anew for every run:
/// let make = || -> Box<dyn Check> { Box::new(AtMostObjects { max: 100 }) };
/// let _fresh = make();
/// ```
pub trait Check: CheckClone + std::fmt::Debug {
    fn check(&mut self, view: &View<'_>) -> Option<Violation>;
    /// What `check` reads ([`Reads`]): a run asks again only after a step that changed
    /// some of it, or once [`Check::due`] has come. The default reads everything. Name
    /// every kind listed and every component type read, or a violation may be seen late.
    fn reads(&self) -> Reads {
        Reads::everything()
    }
    /// When a check of unchanged inputs could first answer otherwise: a grace period
    /// that runs out. `None` (the default): never.
    fn due(&self) -> Option<SimTime> {
        None
    }
}

/// Cloning a boxed [`Check`]; implemented for every `Check + Clone`.
pub trait CheckClone {
    fn clone_box(&self) -> Box<dyn Check>;
}

impl<T: Check + Clone + 'static> CheckClone for T {
    fn clone_box(&self) -> Box<dyn Check> {
        Box::new(self.clone())
    }
}

impl Clone for Box<dyn Check> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

impl Checker {
    pub fn new(name: &str, check: Box<dyn Check>) -> Self {
        Checker {
            name: name.to_string(),
            gate: Gate::new(check.reads()),
            check,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// When its grace period runs out ([`Check::due`]): a run wakes it then.
    pub fn due(&self) -> Option<SimTime> {
        self.check.due()
    }

    /// Check the world if anything it reads changed since its last check, or its
    /// [`Check::due`] time has come; `Gating::Off` checks regardless (the reference the
    /// tests hold gating to: the same verdicts, at the same steps).
    pub fn check_changed(&mut self, view: &View<'_>, gating: Gating) -> Option<Violation> {
        if gating == Gating::On
            && let Some(gate) = &mut self.gate
        {
            // Counts are brought up to date on every call, checked or not.
            let changed = gate.changed(view);
            if !changed && self.check.due().is_none_or(|due| view.now < due) {
                return None;
            }
        }
        self.check(view)
    }

    /// Check the world; a violation carries this checker's name, whatever its own
    /// `invariant` field said.
    pub fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        let name = &self.name;
        self.check.check(view).map(|mut v| {
            if v.invariant != *name {
                v.invariant.clone_from(name);
            }
            v
        })
    }
}

/// Whether a run skips a checker whose inputs did not change ([`Checker::check_changed`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Gating {
    /// Skip it: what runs do.
    #[default]
    On,
    /// Check it after every step that changed anything: the reference for tests.
    Off,
}
