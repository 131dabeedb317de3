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
use std::io::Write;
use std::path::{Path, PathBuf};

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
    /// What its plan goes beyond of the scenario's fault envelope, as `search
    /// --beyond-envelope` judged it when it found it ([`crate::envelope`]; empty:
    /// within it). Written only when not empty; explain judges the plan anew.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub beyond_envelope: Vec<String>,
    /// A [`crate::search::DIVERGENCE`] failure: the seed whose fault-free run this
    /// (fault-free) run ends unlike. Written only then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diverges_from: Option<u64>,
}

/// How a failure's run is judged again: by the scenario's invariants, and for a
/// differential or divergence finding also against its reference run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judge {
    /// The scenario's invariants (with its convergence bound and event budget).
    Invariants,
    /// Sieve's differential oracle: against the same plan without its anchored faults.
    Differential,
    /// Kamera's divergence oracle: against the fault-free run of seed `from`.
    Divergence { from: u64 },
}

impl FailureFile {
    /// How this failure is judged again.
    pub fn judge(&self) -> Judge {
        match (self.invariant.as_str(), self.diverges_from) {
            (crate::search::DIFFERENTIAL, _) => Judge::Differential,
            (crate::search::DIVERGENCE, Some(from)) => Judge::Divergence { from },
            _ => Judge::Invariants,
        }
    }

    /// The failure of a run that violated an invariant.
    pub fn new(scenario: &Scenario, plan: &Plan, outcome: &Outcome) -> Option<FailureFile> {
        let v = outcome.violation.as_ref()?;
        let mut scenario = scenario.clone();
        // Written out, so the file keeps its world when the default latency changes.
        if scenario.apiserver.watch_delay_ms.is_none() {
            let d = reconsim_world::apiserver::DEFAULT_WATCH_DELAY_MS;
            scenario.apiserver.watch_delay_ms = Some(crate::format::Range {
                lo: d.lo_ms,
                hi: d.hi_ms,
            });
        }
        Some(FailureFile {
            reconsim_version: VERSION.to_string(),
            scenario,
            seed: outcome.seed,
            plan: plan.clone(),
            trace_hash: outcome.trace_hash_hex(),
            invariant: v.invariant.clone(),
            time_ms: v.time.as_ms(),
            message: v.message.clone(),
            beyond_envelope: Vec::new(),
            diverges_from: None,
        })
    }

    /// Load a failure file; its scenario's sections are parsed by `families` (replay a
    /// failure through a binary that registers its scenario's families). Checked as a
    /// scenario is: one JSON object, its plan against its scenario ([`crate::plan`]),
    /// its invariant one the scenario checks, its trace hash 16 hex digits.
    pub fn load(path: &Path, families: &Families) -> Result<FailureFile, LoadError> {
        let text = crate::json::read_text(path)?;
        Self::parse(&path.display().to_string(), &text, families)
    }

    /// [`FailureFile::load`] of the text of a file named `file`.
    pub fn parse(file: &str, text: &str, families: &Families) -> Result<FailureFile, LoadError> {
        let raw: RawFailureFile = crate::json::parse_object(file, text, "a failure file")?;
        let input: serde_json::Value = crate::json::parse(file, text)?;
        let at = |(path, message): (String, String)| LoadError {
            file: file.to_string(),
            path,
            message,
        };
        let mut scenario = Scenario::from_value(file, ".scenario", &raw.scenario, families)?;
        // A file that does not say its watch latency was written before there was one by
        // default (0.7.0 writes it out): it ran where every event left with its write.
        if scenario.apiserver.watch_delay_ms.is_none() {
            scenario.apiserver.watch_delay_ms = Some(crate::format::Range { lo: 0, hi: 0 });
        }
        crate::plan::check(&scenario, &raw.plan, ".plan").map_err(at)?;
        let judged = [
            crate::runner::CONVERGENCE,
            crate::runner::EVENT_BUDGET,
            crate::search::DIFFERENTIAL,
            crate::search::DIVERGENCE,
        ];
        if !scenario.invariants.contains(&raw.invariant)
            && !judged.contains(&raw.invariant.as_str())
        {
            return Err(at((
                ".invariant".into(),
                format!(
                    "an invariant the scenario checks ({}, or {}), not `{}`",
                    scenario.invariants.join(", "),
                    judged.join(", "),
                    raw.invariant
                ),
            )));
        }
        if raw.trace_hash.len() != 16 || !raw.trace_hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(at((
                ".trace_hash".into(),
                format!("16 hex digits, not `{}`", raw.trace_hash),
            )));
        }
        if raw.beyond_envelope.len() > raw.plan.faults.len() {
            return Err(at((
                ".beyond_envelope".into(),
                format!(
                    "at most one entry per fault of the plan ({}), not {}",
                    raw.plan.faults.len(),
                    raw.beyond_envelope.len()
                ),
            )));
        }
        // A divergence compares two fault-free runs: it names the other seed, and has
        // no faults of its own.
        if (raw.invariant == crate::search::DIVERGENCE) != raw.diverges_from.is_some() {
            return Err(at((
                ".diverges_from".into(),
                if raw.diverges_from.is_some() {
                    format!("only with the invariant `{}`", crate::search::DIVERGENCE)
                } else {
                    "the seed whose fault-free run this one ends unlike (a divergence names it)"
                        .to_string()
                },
            )));
        }
        if raw.invariant == crate::search::DIVERGENCE && !raw.plan.faults.is_empty() {
            return Err(at((
                ".plan".into(),
                "no faults: a divergence is between two fault-free runs".to_string(),
            )));
        }
        let f = FailureFile {
            reconsim_version: raw.reconsim_version,
            scenario,
            seed: raw.seed,
            plan: raw.plan,
            trace_hash: raw.trace_hash,
            invariant: raw.invariant,
            time_ms: raw.time_ms,
            message: raw.message,
            beyond_envelope: raw.beyond_envelope,
            diverges_from: raw.diverges_from,
        };
        let canonical = serde_json::to_value(&f).expect("failure files serialize");
        crate::json::check_objects(&input, &canonical, "").map_err(at)?;
        Ok(f)
    }

    /// `Err` at the first process the plan names that exists at no point of its own run
    /// nor of its reference run (the plan without its anchored faults): a fault that can
    /// only be a no-op ([`crate::plan`]). Costs a run, two if a name is missing from the
    /// first. `file` names the file in the error.
    pub fn check_targets(&self, file: &str) -> Result<(), LoadError> {
        let names = crate::plan::process_names(&self.plan, ".plan");
        if names.is_empty() {
            return Ok(());
        }
        let seen = |plan: Plan| {
            let (_, world) = run_world(&self.scenario, self.seed, plan, TraceMode::Hash);
            (0..world.sim.proc_count())
                .map(|i| {
                    world
                        .sim
                        .proc_name(reconsim_sim::ProcId(i as u32))
                        .to_string()
                })
                .collect::<Vec<String>>()
        };
        let own = seen(self.plan.clone());
        if names.iter().all(|(_, n)| own.iter().any(|p| p == n)) {
            return Ok(());
        }
        let reference = seen(Plan::new(
            self.plan
                .faults
                .iter()
                .filter(|f| f.on.is_none())
                .cloned()
                .collect(),
        ));
        for (path, name) in names {
            if !own.iter().chain(&reference).any(|p| p == name) {
                let mut known: Vec<&str> = own.iter().map(String::as_str).collect();
                known.sort_unstable();
                known.dedup();
                const SHOWN: usize = 16;
                let more = known.len().saturating_sub(SHOWN);
                known.truncate(SHOWN);
                return Err(LoadError {
                    file: file.to_string(),
                    path,
                    message: format!(
                        "a process that exists in this run ({}{}), not `{name}`",
                        known.join(", "),
                        if more > 0 {
                            format!(", and {more} more")
                        } else {
                            String::new()
                        }
                    ),
                });
            }
        }
        Ok(())
    }

    /// The file's text.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("failure files serialize") + "\n"
    }

    /// The text a save writes: [`FailureFile::to_json`], or the same document without
    /// indentation when that is longer than replay reads ([`crate::limits::FILE_BYTES_MAX`]); `Err`
    /// when even that is, so nothing is ever saved that cannot be replayed.
    pub fn file_text(&self) -> std::io::Result<String> {
        use crate::limits::FILE_BYTES_MAX;
        let pretty = self.to_json();
        if pretty.len() as u64 <= FILE_BYTES_MAX {
            return Ok(pretty);
        }
        let compact = serde_json::to_string(self).expect("failure files serialize") + "\n";
        if compact.len() as u64 <= FILE_BYTES_MAX {
            return Ok(compact);
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "the failure file would be {} bytes, more than the {FILE_BYTES_MAX} that replay reads (FILE_BYTES_MAX); nothing was written",
                compact.len()
            ),
        ))
    }

    /// Write atomically, replacing whatever `path` held: a temporary file of a name no
    /// other process uses, in the same directory, then a rename. For an output a user
    /// asked to replace (`shrink --force`); saves of found failures use
    /// [`FailureFile::save_new`].
    /// A character device is written in place and anything else that is not a regular
    /// file refused, never replaced ([`crate::output`]).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        crate::output::write(path, self.file_text()?.as_bytes())
    }

    /// Write atomically unless `path` exists: `Ok(true)` if it now holds this failure
    /// (written now, or already there byte for byte), `Ok(false)` if it holds anything
    /// else, left as it was.
    /// A character device (`/dev/stdout`) holds no failure to keep: it is written.
    pub fn save_if_absent(&self, path: &Path) -> std::io::Result<bool> {
        if crate::output::target(path) == crate::output::Target::CharDevice {
            return self.save(path).map(|()| true);
        }
        create_new(path, &self.file_text()?)
    }

    /// Write atomically without ever replacing a different failure: if `path` already
    /// holds this failure byte for byte, nothing is written; if it holds anything else,
    /// the failure goes to `<stem>-<trace hash>.json` beside it (the same rule again, then
    /// `<stem>-<trace hash>-2.json` and on).
    /// Returns where the failure now is. A temporary file is linked into place, so two
    /// campaigns saving into one directory at once never see each other's half files,
    /// and the one that comes second keeps its failure too.
    pub fn save_new(&self, path: &Path) -> std::io::Result<PathBuf> {
        const ALTERNATIVES: usize = crate::limits::ALTERNATIVE_NAMES_MAX;
        let text = self.file_text()?;
        if create_new(path, &text)? {
            return Ok(path.to_path_buf());
        }
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        for k in 1..=ALTERNATIVES {
            let name = match k {
                1 => format!("{stem}-{}.json", self.trace_hash),
                k => format!("{stem}-{}-{k}.json", self.trace_hash),
            };
            let candidate = path.with_file_name(name);
            if create_new(&candidate, &text)? {
                return Ok(candidate);
            }
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!(
                "{} and {ALTERNATIVES} alternative names beside it hold other failures; nothing was replaced",
                path.display()
            ),
        ))
    }

    /// Re-run the failure.
    pub fn replay(&self, trace: TraceMode) -> Replay {
        let outcome = rerun(&self.scenario, self.seed, &self.plan, self.judge(), trace);
        Replay::judge(self, outcome)
    }

    /// The command that replays this file, for people.
    pub fn replay_command(path: &Path) -> String {
        format!("reconsim replay {}", path.display())
    }
}

/// Put `text` at `path` unless something is there: `Ok(true)` if it now holds `text`
/// (written now, or already there byte for byte), `Ok(false)` if it holds other bytes.
fn create_new(path: &Path, text: &str) -> std::io::Result<bool> {
    // Only a regular file of the same size is read: a device or FIFO holds "something
    // else" without being opened.
    let same = |path: &Path| crate::output::holds(path, text.as_bytes());
    if crate::output::target(path) != crate::output::Target::Missing {
        return same(path);
    }
    let tmp = crate::output::temporary(path, text.as_bytes())?;
    // A hard link fails if the name exists: no check-then-write race with another
    // process. A file system without links falls back to an exclusive create.
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => same(path),
        Err(_) => match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
        {
            Ok(mut f) => {
                f.write_all(text.as_bytes())?;
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => same(path),
            Err(e) => Err(e),
        },
    }
}

/// Run `plan` and judge it as its failure was judged ([`Judge`]): by the scenario's
/// invariants; a differential failure also against its reference, the same plan without
/// its anchored faults (what search perturbed); a divergence against the fault-free run
/// of the seed it diverges from.
pub fn rerun(
    scenario: &Scenario,
    seed: u64,
    plan: &Plan,
    judge: Judge,
    trace: TraceMode,
) -> Outcome {
    match judge {
        Judge::Invariants => run_world(scenario, seed, plan.clone(), trace).0,
        Judge::Differential => {
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
        Judge::Divergence { from } => {
            let (_, reference) = crate::oracle::run(scenario, from, Plan::default());
            let (outcome, state) = crate::oracle::run(scenario, seed, plan.clone());
            crate::search::differ(
                outcome,
                &state,
                &reference,
                crate::search::DIVERGENCE,
                &format!("seed {from}'s fault-free run"),
            )
        }
    }
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
    #[serde(default)]
    beyond_envelope: Vec<String>,
    #[serde(default)]
    diverges_from: Option<u64>,
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
            // A hash is hexadecimal: one written in capitals is the same hash.
            reproduced: same_violation && trace_hash.eq_ignore_ascii_case(&f.trace_hash),
            same_violation,
            trace_hash,
            invariant,
            outcome,
        }
    }
}
