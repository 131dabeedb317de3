//! A scenario of your own world held to its `expect` from a `#[test]`: the campaign
//! `reconsim check` runs (random seeds, swarm seeds and search plans), as a library
//! call, failing with the command that shows the failing run again.
//!
//! ```no_run
//! use reconsim::prelude::*;
//!
//! #[test]
//! fn two_replicas_never_duplicate_a_vm() {
//!     let families = builtin().with(Extensions::new() /* .controller(..) */);
//!     reconsim::testing::assert_holds(
//!         "scenarios/launcher-client-token.json",
//!         &families,
//!         "cargo run --release --bin my-reconsim --",
//!     );
//! }
//! ```

use reconsim_scenario::combined::{self, Arm, Config, Trial};
use reconsim_scenario::{Expect, Families, LoadError, Scenario};
use std::fmt;
use std::path::{Path, PathBuf};

/// How a scenario met its expectation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// The runs made (a violation scenario stops at its first failing run).
    pub runs: u64,
    /// The seed of the first failing run, for a scenario that expects a violation (a
    /// search plan runs with its reference seed).
    pub caught_at_seed: Option<u64>,
    /// That run in words: `seed 3`, `swarm seed 3`, `search plan #1 of reference seed
    /// 0 (...)`.
    pub caught_by: Option<String>,
}

/// Why a scenario did not meet its expectation.
#[derive(Debug)]
pub enum Broken {
    /// The file is not a scenario of these families (its path and field are in it).
    Load(LoadError),
    /// A clean scenario's run violated an invariant.
    Violated {
        path: PathBuf,
        /// The run's seed (a search plan's: its reference seed).
        seed: u64,
        /// The run in words (`seed 3`, `search plan #1 of reference seed 0 (...)`).
        found_by: String,
        invariant: String,
        time: reconsim_sim::SimTime,
        message: String,
        /// The command that shows the run again (`<runner> run <path> --seed <seed>`, with
        /// `--swarm` for a swarm seed, or the search that finds the plan first).
        rerun: String,
    },
    /// A violation scenario's runs all held.
    NotCaught { path: PathBuf, seeds: u64 },
    /// One seed gave two trace hashes: something outside the seed reached the run.
    Nondeterministic { path: PathBuf, seed: u64 },
}

impl fmt::Display for Broken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Broken::Load(e) => write!(f, "{e}"),
            Broken::Violated {
                path,
                found_by,
                invariant,
                time,
                message,
                rerun,
                ..
            } => write!(
                f,
                "{} expects clean, but {found_by} violates {invariant} at {time}: {message}\n  run it again: {rerun}",
                path.display()
            ),
            Broken::NotCaught { path, seeds } => write!(
                f,
                "{} expects a violation, but all {seeds} runs hold (random seeds, swarm seeds and search plans)",
                path.display()
            ),
            Broken::Nondeterministic { path, seed } => write!(
                f,
                "{}: seed {seed} gave two trace hashes in two runs; see docs/determinism.md",
                path.display()
            ),
        }
    }
}

impl std::error::Error for Broken {}

/// Run the scenario file at `path` (loaded with `families`) over its budget of runs, as
/// `reconsim check` does (the combined campaign), and say whether it meets its `expect`.
/// `runner` is how a person starts the binary that registers `families` (`cargo run
/// --release --example launcher --`), for the command a [`Broken::Violated`] gives. Seed
/// 0, and a failing run, run twice and must give one trace hash.
// A `Broken` is made once per failing test, never in a loop: its size costs nothing.
#[allow(clippy::result_large_err)]
pub fn holds(path: impl AsRef<Path>, families: &Families, runner: &str) -> Result<Held, Broken> {
    let path = path.as_ref();
    let scenario = Scenario::load(path, families).map_err(Broken::Load)?;
    let config = Config {
        stop_on_first: true,
        ..Config::new(
            scenario.seeds,
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        )
    };
    let report = combined::run(&scenario, &config, &mut |_, _, _| {}, &|_, _| {});
    // Two runs of `trial`, one trace hash (the campaign's, when given): the first
    // run's outcome.
    let deterministic = |trial: &Trial, hash: Option<&str>| {
        let outcome = combined::rerun(&scenario, &config, trial);
        let again = combined::rerun(&scenario, &config, trial);
        match (outcome, again) {
            (Some(o), Some(a))
                if o.trace_hash == a.trace_hash && hash.is_none_or(|h| h == o.trace_hash_hex()) =>
            {
                Ok(o)
            }
            _ => Err(Broken::Nondeterministic {
                path: path.to_path_buf(),
                seed: trial.seed,
            }),
        }
    };
    if scenario.seeds > 0 {
        let seed_0 = Trial {
            arm: Arm::Seeds,
            seed: 0,
            plan: None,
            description: None,
        };
        deterministic(&seed_0, None)?;
    }
    let first = report.first_failure();
    match (scenario.expect, first) {
        (Expect::Clean, None) => Ok(Held {
            runs: report.runs,
            caught_at_seed: None,
            caught_by: None,
        }),
        (Expect::Violation, Some(f)) => {
            deterministic(&f.trial, Some(&f.trace_hash))?;
            Ok(Held {
                runs: report.runs,
                caught_at_seed: Some(f.trial.seed),
                caught_by: Some(f.trial.label()),
            })
        }
        (Expect::Violation, None) => Err(Broken::NotCaught {
            path: path.to_path_buf(),
            seeds: scenario.seeds,
        }),
        (Expect::Clean, Some(f)) => {
            let violation = deterministic(&f.trial, Some(&f.trace_hash))?
                .violation
                .expect("the campaign's failing run fails again (checked deterministic)");
            let file = crate::cli::shell_word(&path.display().to_string());
            let rerun = match f.trial.arm {
                Arm::Seeds => format!("{runner} run {file} --seed {}", f.trial.seed),
                Arm::Swarm => format!("{runner} run {file} --seed {} --swarm", f.trial.seed),
                Arm::Search => format!(
                    "{runner} search {file} --seeds {}..{} --max-plans {} --no-pairs --stop-on-first",
                    f.trial.seed,
                    f.trial.seed + 1,
                    config.plans_per_reference
                ),
            };
            Err(Broken::Violated {
                path: path.to_path_buf(),
                seed: f.trial.seed,
                found_by: f.trial.label(),
                invariant: violation.invariant,
                time: violation.time,
                message: violation.message,
                rerun,
            })
        }
    }
}

/// [`holds`], panicking with what broke (and the command that shows it) unless the
/// scenario meets its expectation: the one line a `#[test]` needs.
///
/// # Panics
/// If the scenario does not load, or does not meet its expectation.
pub fn assert_holds(path: impl AsRef<Path>, families: &Families, runner: &str) -> Held {
    match holds(path, families, runner) {
        Ok(held) => held,
        Err(broken) => panic!("{broken}"),
    }
}
