//! A scenario of your own world held to its `expect` from a `#[test]`: the campaign
//! `reconsim check` runs, as a library call, failing with the command that runs the
//! failing seed again.
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

use reconsim_scenario::fuzz::{Campaign, fuzz_streamed};
use reconsim_scenario::{Expect, Families, LoadError, Scenario};
use std::fmt;
use std::path::{Path, PathBuf};

/// How a scenario met its expectation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// The runs made (a violation scenario stops at its first failing seed).
    pub runs: u64,
    /// The first failing seed, for a scenario that expects a violation.
    pub caught_at_seed: Option<u64>,
}

/// Why a scenario did not meet its expectation.
#[derive(Debug)]
pub enum Broken {
    /// The file is not a scenario of these families (its path and field are in it).
    Load(LoadError),
    /// A clean scenario's seed violated an invariant.
    Violated {
        path: PathBuf,
        seed: u64,
        invariant: String,
        time: reconsim_sim::SimTime,
        message: String,
        /// The command that runs the seed again (`<runner> run <path> --seed <seed>`).
        rerun: String,
    },
    /// A violation scenario's seeds all held.
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
                seed,
                invariant,
                time,
                message,
                rerun,
            } => write!(
                f,
                "{} expects clean, but seed {seed} violates {invariant} at {time}: {message}\n  run it again: {rerun}",
                path.display()
            ),
            Broken::NotCaught { path, seeds } => write!(
                f,
                "{} expects a violation, but seeds 0..{seeds} all hold",
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

/// Run the scenario file at `path` (loaded with `families`) over its seed budget, as
/// `reconsim check` does, and say whether it meets its `expect`. `runner` is how a
/// person starts the binary that registers `families` (`cargo run --release --example
/// launcher --`), for the command a [`Broken::Violated`] gives. The first seed, and a
/// failing one, run twice and must give one trace hash.
pub fn holds(path: impl AsRef<Path>, families: &Families, runner: &str) -> Result<Held, Broken> {
    let path = path.as_ref();
    let scenario = Scenario::load(path, families).map_err(Broken::Load)?;
    let campaign = Campaign {
        start: 0,
        end: scenario.seeds,
        jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
        shard: None,
        stop_on_first: true,
        swarm: false,
    };
    let mut first = None;
    let report = fuzz_streamed(
        &scenario,
        campaign,
        None,
        &|_, _| {},
        &|_, _| {},
        &mut |f| {
            first.get_or_insert(f.seed);
        },
    );
    // Two runs of `seed`, one trace hash: the first run's outcome.
    let deterministic = |seed: u64| {
        let (outcome, _) = reconsim_scenario::run(&scenario, seed);
        if reconsim_scenario::run(&scenario, seed).0.trace_hash == outcome.trace_hash {
            Ok(outcome)
        } else {
            Err(Broken::Nondeterministic {
                path: path.to_path_buf(),
                seed,
            })
        }
    };
    if scenario.seeds > 0 {
        deterministic(0)?;
    }
    match (scenario.expect, first) {
        (Expect::Clean, None) => Ok(Held {
            runs: report.runs,
            caught_at_seed: None,
        }),
        (Expect::Violation, Some(seed)) => {
            deterministic(seed)?;
            Ok(Held {
                runs: report.runs,
                caught_at_seed: Some(seed),
            })
        }
        (Expect::Violation, None) => Err(Broken::NotCaught {
            path: path.to_path_buf(),
            seeds: scenario.seeds,
        }),
        (Expect::Clean, Some(seed)) => {
            let violation = deterministic(seed)?
                .violation
                .expect("the campaign's failing seed fails again (checked deterministic)");
            Err(Broken::Violated {
                path: path.to_path_buf(),
                seed,
                invariant: violation.invariant,
                time: violation.time,
                message: violation.message,
                rerun: format!(
                    "{runner} run {} --seed {seed}",
                    crate::cli::shell_word(&path.display().to_string())
                ),
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
