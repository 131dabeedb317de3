//! A run's abstract signature: for each process, the pairs (its previous step, this
//! step), each step as its process's role (the name without its trailing index), the
//! kind of event and the first two words of its message (`patch Machine`, `call
//! RunInstances`, `Modified Node`): which controller did what kind of thing after what,
//! names and times aside. Search's coverage guidance and the combined campaign's
//! adaptive split count the pairs a run reaches first (Mallory, CCS'23).
//!
//! The kernel folds each classified message in as it is sent
//! ([`SimConfig::record_signature`](crate::SimConfig::record_signature)), keeping no
//! decision point; [`of_decisions`] computes the same set from a recorded run.

use crate::StableHasher;
use crate::anchor::{DecisionPoint, EventClass};
use std::collections::BTreeSet;

/// A process's role: its name without the trailing index (`machine-controller-0` ->
/// `machine-controller`).
pub fn role(process: &str) -> &str {
    process.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-' || c == '.')
}

/// One step: a role, a kind of event and the first two words of the message.
pub fn step(role: &str, event: EventClass, label: &str) -> u64 {
    let mut words = label.split_whitespace();
    let first = words.next().unwrap_or("");
    let second = words.next().unwrap_or("");
    StableHasher::hash_one(&(role, event, first, second))
}

/// A step after the process's previous one (0 for its first).
pub fn pair(previous: u64, step: u64) -> u64 {
    StableHasher::hash_one(&(previous, step))
}

/// The signature of a recorded run's decision points.
pub fn of_decisions(decisions: &[DecisionPoint]) -> BTreeSet<u64> {
    let mut last: std::collections::BTreeMap<&str, u64> = Default::default();
    let mut out = BTreeSet::new();
    for d in decisions {
        let s = step(role(&d.process), d.event, &d.label);
        let previous = last.insert(d.process.as_str(), s).unwrap_or(0);
        out.insert(pair(previous, s));
    }
    out
}
