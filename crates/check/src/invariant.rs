//! The invariants by name, and the checker each one runs.
//!
//! Scenario files name invariants in snake_case; [`Invariant::checker`] makes the
//! checker (with its own state) for one run. Adding an invariant: a variant here, its
//! checker in the incident's module, one line in each match.

use crate::{View, Violation, machineapi};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Invariant {
    /// Incident 1: no instance outlives its Machine.
    NoLeakedInstances,
    /// Incident 1: no Machine has two instances; no over-provisioning create.
    NoDuplicateMachines,
}

impl Invariant {
    pub fn name(self) -> &'static str {
        match self {
            Invariant::NoLeakedInstances => machineapi::NoLeakedInstances::NAME,
            Invariant::NoDuplicateMachines => machineapi::NoDuplicateMachines::NAME,
        }
    }

    /// A fresh checker for one run.
    pub fn checker(self) -> Checker {
        match self {
            Invariant::NoLeakedInstances => Checker::Leaks(machineapi::NoLeakedInstances::new(0)),
            Invariant::NoDuplicateMachines => {
                Checker::Duplicates(machineapi::NoDuplicateMachines::default())
            }
        }
    }
}

/// One invariant's checker and its memory between events.
#[derive(Clone, Debug)]
pub enum Checker {
    Leaks(machineapi::NoLeakedInstances),
    Duplicates(machineapi::NoDuplicateMachines),
}

impl Checker {
    pub fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        match self {
            Checker::Leaks(c) => c.check(view),
            Checker::Duplicates(c) => c.check(view),
        }
    }
}
