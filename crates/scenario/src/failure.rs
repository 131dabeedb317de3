//! Failure files: everything needed to replay a violation, in one JSON document.
//!
//! A failure file holds the scenario itself (not a path to it), the seed, the exact fault
//! plan, the trace hash and the violated invariant, and the version of reconsim that
//! found it. `replay` re-runs it and checks the trace hash and the invariant; a file is
//! written to a temporary name and renamed, so a crash never leaves half a failure.

use crate::format::{LoadError, Plan, Scenario};
use crate::runner::{Outcome, run_world};
use reconsim_family::Families;
use reconsim_sim::TraceMode;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The version written into failure files.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FailureFile {
    pub reconsim_version: String,
    pub scenario: Scenario,
    pub seed: u64,
    pub plan: Plan,
    /// 16 hex digits.
    pub trace_hash: String,
    pub invariant: String,
    pub time_ms: u64,
    pub message: String,
}

impl FailureFile {
    /// The failure of a run that violated an invariant.
    pub fn new(scenario: &Scenario, plan: &Plan, outcome: &Outcome) -> Option<FailureFile> {
        let v = outcome.violation.as_ref()?;
        Some(FailureFile {
            reconsim_version: VERSION.to_string(),
            scenario: scenario.clone(),
            seed: outcome.seed,
            plan: plan.clone(),
            trace_hash: outcome.trace_hash_hex(),
            invariant: v.invariant.clone(),
            time_ms: v.time.as_ms(),
            message: v.message.clone(),
        })
    }

    /// Load a failure file; its scenario's sections are parsed by `families` (replay a
    /// failure through a binary that registers its scenario's families).
    pub fn load(path: &Path, families: &Families) -> Result<FailureFile, LoadError> {
        let file = path.display().to_string();
        let raw: RawFailureFile = crate::format::read_json(path)?;
        Ok(FailureFile {
            reconsim_version: raw.reconsim_version,
            scenario: Scenario::from_value(&file, ".scenario", &raw.scenario, families)?,
            seed: raw.seed,
            plan: raw.plan,
            trace_hash: raw.trace_hash,
            invariant: raw.invariant,
            time_ms: raw.time_ms,
            message: raw.message,
        })
    }

    /// Write atomically: a temporary file in the same directory, then a rename.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let json = serde_json::to_string_pretty(self).expect("failure files serialize");
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, json + "\n")?;
        std::fs::rename(&tmp, path)
    }

    /// Re-run the failure.
    pub fn replay(&self, trace: TraceMode) -> Replay {
        let outcome = rerun(
            &self.scenario,
            self.seed,
            &self.plan,
            &self.invariant,
            trace,
        );
        Replay::judge(self, outcome)
    }

    /// The command that replays this file, for people.
    pub fn replay_command(path: &Path) -> String {
        format!("reconsim replay {}", path.display())
    }
}

/// Run `plan` and judge it as a failure of `invariant` was judged: by the scenario's
/// invariants, and for a [`crate::search::DIFFERENTIAL`] failure also against its
/// reference, the same plan without its anchored faults (what search perturbed).
pub fn rerun(
    scenario: &Scenario,
    seed: u64,
    plan: &Plan,
    invariant: &str,
    trace: TraceMode,
) -> Outcome {
    if invariant != crate::search::DIFFERENTIAL {
        return run_world(scenario, seed, plan.clone(), trace).0;
    }
    let reference = Plan::new(
        plan.faults
            .iter()
            .filter(|f| f.on.is_none())
            .cloned()
            .collect(),
    );
    let (_, state) = crate::oracle::run(scenario, seed, reference);
    crate::search::judge_differential(scenario, seed, plan, &state)
}

/// A failure file as serde reads it, before its scenario's families parse it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFailureFile {
    reconsim_version: String,
    scenario: serde_json::Value,
    seed: u64,
    plan: Plan,
    trace_hash: String,
    invariant: String,
    time_ms: u64,
    message: String,
}

/// What a replay found.
#[derive(Clone, Debug, Serialize)]
pub struct Replay {
    /// The same invariant failed and the trace hash matched.
    pub reproduced: bool,
    /// The same invariant failed, whatever the hash: a file written by another version
    /// whose messages hash differently still shows its bug.
    pub same_violation: bool,
    pub trace_hash: String,
    pub invariant: Option<String>,
    pub outcome: Outcome,
}

impl Replay {
    /// Compare a re-run's outcome with the failure file.
    pub fn judge(f: &FailureFile, outcome: Outcome) -> Replay {
        let invariant = outcome.violation.as_ref().map(|v| v.invariant.clone());
        let trace_hash = outcome.trace_hash_hex();
        let same_violation = invariant.as_deref() == Some(f.invariant.as_str());
        Replay {
            reproduced: same_violation && trace_hash == f.trace_hash,
            same_violation,
            trace_hash,
            invariant,
            outcome,
        }
    }
}
