//! What a checker reports.

use reconsim_sim::SimTime;
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The invariant's name, as in scenario files (`no_leaked_instances`, `convergence`).
    pub invariant: String,
    pub time: SimTime,
    /// One sentence a person can read.
    pub message: String,
    /// The objects involved (`Machine ns/name`, `instance i-...`).
    pub objects: Vec<String>,
}
