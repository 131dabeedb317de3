//! proptest strategies over a scenario: fault plans within its fault profile, and
//! perturbations of its parameters, for property tests in CI and in users' own crates.
//!
//! - [`plan`]: each of the scenario's fault generators becomes a vector of faults whose
//!   count, times, durations, targets and parameters range over exactly what the
//!   generator allows. proptest shrinks it the way `reconsim shrink` does: fewer faults
//!   (vectors shrink by dropping elements), shorter and earlier ones (numbers shrink
//!   toward the low end of their range), the first target of each list.
//! - [`perturbed`]: the scenario with the cloud's DescribeInstances lag moved within
//!   sensible bounds; every value it produces validates. A family's own parameters are
//!   its to perturb: compose with `prop_map` over `scenario.controllers.get_mut::<T>()`
//!   (tests/properties.rs does it for machine-api's lease timings).
//! - [`case`]: a seed, a perturbed scenario and a plan drawn for it, plus
//!   [`Case::failure`] to turn a failing case into a failure file that `reconsim replay`
//!   runs.

use crate::failure::FailureFile;
use crate::faults::{self, Choose};
use crate::format::{FaultGen, Plan, Range, Scenario};
use crate::runner::{Outcome, run_world};
use proptest::prelude::*;
use reconsim_sim::{TimedFault, TraceMode};
use reconsim_world::WorldFault;
use std::path::{Path, PathBuf};

fn within(r: Range) -> impl Strategy<Value = u64> + Clone + use<> {
    r.lo..=r.hi
}

/// A generator's choices given by proptest: its target, its partition mode, and the
/// values of its ranges in [`faults::fault_of`]'s order, so one mapping from generator
/// to fault serves seeds, search and properties.
struct Given {
    target: usize,
    hold: bool,
    values: std::vec::IntoIter<u64>,
}

impl Choose for Given {
    fn pick(&mut self, n: usize) -> usize {
        self.target % n.max(1)
    }

    fn draw(&mut self, r: Range) -> u64 {
        self.values
            .next()
            .unwrap_or(r.lo)
            .clamp(r.lo, r.hi.max(r.lo))
    }

    fn hold(&mut self) -> bool {
        self.hold
    }
}

/// The faults one generator may produce.
fn generator(g: &FaultGen) -> BoxedStrategy<Vec<TimedFault<WorldFault>>> {
    let kind = g.fault.clone();
    let values: Vec<_> = faults::ranges(&kind).into_iter().map(within).collect();
    let fault = (0..faults::targets(&kind).max(1), any::<bool>(), values).prop_map(
        move |(target, hold, values)| {
            let mut given = Given {
                target,
                // proptest shrinks `true` to `false`: a drop, as before.
                hold,
                values: values.into_iter(),
            };
            faults::fault_of(&kind, &mut given)
        },
    );
    let one =
        (within(g.at_ms), within(g.duration_ms), fault).prop_map(|(at_ms, d, fault)| TimedFault {
            at_ms,
            duration_ms: Some(d),
            fault,
            on: None,
        });
    proptest::collection::vec(one, g.count.lo as usize..=g.count.hi as usize).boxed()
}

/// Fault plans within `scenario`'s fault profile.
pub fn plan(scenario: &Scenario) -> impl Strategy<Value = Plan> + use<> {
    let generators: Vec<BoxedStrategy<Vec<TimedFault<WorldFault>>>> =
        scenario.faults.iter().map(generator).collect();
    generators.prop_map(|parts| {
        let mut faults: Vec<TimedFault<WorldFault>> = parts.into_iter().flatten().collect();
        faults.sort_by_key(|f| f.at_ms);
        Plan::new(faults)
    })
}

/// `scenario` with the cloud's DescribeInstances lag moved (its upper bound up to twice
/// what the file says).
pub fn perturbed(scenario: &Scenario) -> impl Strategy<Value = Scenario> + use<> {
    let base = scenario.clone();
    let lag = base.cloud.describe_lag_ms;
    (lag.lo..=lag.hi.saturating_mul(2).max(lag.lo))
        .prop_map(move |lag_hi| {
            let mut s = base.clone();
            s.cloud.describe_lag_ms.hi = lag_hi;
            s
        })
        .prop_filter("perturbed scenarios validate", |s| s.validate().is_ok())
}

/// One property-test case: a seed, a scenario and a plan.
#[derive(Clone, Debug)]
pub struct Case {
    pub seed: u64,
    pub scenario: Scenario,
    pub plan: Plan,
}

/// Cases of `scenario`: any seed, its own parameters, any plan within its profile.
pub fn case(scenario: &Scenario) -> impl Strategy<Value = Case> + use<> {
    let s = scenario.clone();
    (any::<u64>(), plan(scenario)).prop_map(move |(seed, plan)| Case {
        seed,
        scenario: s.clone(),
        plan,
    })
}

impl Case {
    /// Run the case.
    pub fn run(&self) -> Outcome {
        run_world(
            &self.scenario,
            self.seed,
            self.plan.clone(),
            TraceMode::Hash,
        )
        .0
    }

    /// Save a failing case as a failure file (in the system's temporary directory) and
    /// return the command that replays it, for a property test's failure message.
    pub fn failure(&self, outcome: &Outcome) -> Option<String> {
        self.failure_for(outcome, "reconsim")
    }

    /// [`Case::failure`] with the replay line naming `program`: the binary that
    /// registers the scenario's extensions (e.g. `cargo run --release --example podset --`).
    pub fn failure_for(&self, outcome: &Outcome, program: &str) -> Option<String> {
        self.failure_in(
            &std::env::temp_dir().join("reconsim-proptest"),
            outcome,
            program,
        )
    }

    /// [`Case::failure_for`] saving into `dir` (made if missing): a test suite passes
    /// cargo's scratch folder (`env!("CARGO_TARGET_TMPDIR")`), so the failures proptest
    /// meets while it shrinks stay under `target/`, not in the system's temporary folder.
    pub fn failure_in(&self, dir: &Path, outcome: &Outcome, program: &str) -> Option<String> {
        let f = FailureFile::new(&self.scenario, &self.plan, outcome)?;
        std::fs::create_dir_all(dir).ok()?;
        let path: PathBuf = dir.join(format!("{}-{}.json", self.scenario.name, f.trace_hash));
        f.save(&path).ok()?;
        Some(format!(
            "{} at t={}: {}\n  replay: {program} replay {}\n",
            f.invariant,
            reconsim_sim::SimTime(f.time_ms),
            f.message,
            path.display()
        ))
    }
}
