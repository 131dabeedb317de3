//! The failure files a campaign (`fuzz`, `check`) saves, counted in seed order so that
//! what it reports does not depend on `--jobs`.

use crate::scenario::Scenario;
use crate::scenario::failure::FailureFile;
use crate::scenario::runner;
use std::path::{Path, PathBuf};

/// What a campaign saved, counted in seed order so that what it reports is the same for
/// any `--jobs`: a save is recorded as it happens (on the thread that found the failure)
/// and settled when the campaign hands that seed's failure on in order ([`Saves::settle`]);
/// a save of a seed past a `--stop-on-first` cut is never settled nor reported. Bounded:
/// at most a window of saves waits to be settled.
#[derive(Default)]
pub(super) struct Saves {
    /// Saves of seeds not handed on yet.
    pending: std::collections::BTreeMap<u64, Result<PathBuf, String>>,
    pub(super) saved: u64,
    pub(super) errors: u64,
    pub(super) first_errors: Vec<String>,
    /// The first settled seed (the smallest failing one), and how its save went.
    first: Option<(u64, Result<PathBuf, String>)>,
}

impl Saves {
    const ERRORS_SHOWN: usize = 5;

    /// Save the failure of `outcome` in `dir` as `<scenario>-seed-<N>.json` (never over
    /// a different one) and record how it went.
    pub(super) fn save(
        saves: &std::sync::Mutex<Saves>,
        dir: &Path,
        scenario: &Scenario,
        plan: &crate::scenario::Plan,
        outcome: &runner::Outcome,
    ) {
        let Some(f) = FailureFile::new(scenario, plan, outcome) else {
            return;
        };
        let path = dir.join(format!("{}-seed-{}.json", scenario.name, outcome.seed));
        let result = f
            .save_new(&path)
            .map_err(|e| format!("{}: {e}", path.display()));
        saves
            .lock()
            .expect("no thread panics holding it")
            .pending
            .insert(outcome.seed, result);
    }

    /// Count the save of `seed`, whose failure the campaign now reports (in seed order).
    pub(super) fn settle(&mut self, seed: u64) {
        let Some(result) = self.pending.remove(&seed) else {
            return;
        };
        match &result {
            Ok(_) => self.saved += 1,
            Err(e) => {
                self.errors += 1;
                if self.first_errors.len() < Self::ERRORS_SHOWN {
                    self.first_errors.push(e.clone());
                }
            }
        }
        if self.first.is_none() {
            self.first = Some((seed, result));
        }
    }

    /// Where the failure of `seed` was saved, if it was.
    pub(super) fn path_of(&self, seed: u64) -> Option<&Path> {
        match &self.first {
            Some((s, Ok(p))) if *s == seed => Some(p),
            _ => None,
        }
    }

    /// Print the errors on stderr; `true` if there were any.
    pub(super) fn report_errors(&self, program: &str) -> bool {
        for e in &self.first_errors {
            eprintln!("{program}: error: cannot write the failure file {e}");
        }
        if self.errors > self.first_errors.len() as u64 {
            eprintln!(
                "{program}: error: ... and {} more failure files not written",
                self.errors - self.first_errors.len() as u64
            );
        }
        self.errors > 0
    }
}
