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
use crate::format::{FaultGen, FaultKind, PartitionChoice, Plan, Range, Scenario};
use crate::runner::{Outcome, run_world};
use proptest::prelude::*;
use reconsim_sim::{Fault, PartitionMode, TimedFault, TraceMode};
use reconsim_world::WorldFault;
use std::path::PathBuf;

fn within(r: Range) -> impl Strategy<Value = u64> + Clone + use<> {
    r.lo..=r.hi
}

fn one_of(list: &[String]) -> impl Strategy<Value = String> + Clone + use<> {
    let list = list.to_vec();
    (0..list.len()).prop_map(move |i| list[i].clone())
}

fn others(list: &[String], picked: &str) -> Vec<String> {
    list.iter().filter(|h| *h != picked).cloned().collect()
}

/// The faults one generator may produce.
fn generator(g: &FaultGen) -> BoxedStrategy<Vec<TimedFault<WorldFault>>> {
    let fault: BoxedStrategy<Fault<WorldFault>> = match &g.fault {
        FaultKind::KubeletStop { nodes } => one_of(nodes)
            .prop_map(|n| Fault::Inject {
                process: format!("kubelet/{n}"),
                fault: WorldFault::KubeletStop,
            })
            .boxed(),
        FaultKind::Partition {
            hosts_a,
            hosts_b,
            mode,
            one_way,
        } => {
            let (hosts_b, one_way) = (hosts_b.clone(), *one_way);
            let modes = match mode {
                PartitionChoice::Drop => vec![PartitionMode::Drop],
                PartitionChoice::Hold => vec![PartitionMode::Hold],
                PartitionChoice::Either => vec![PartitionMode::Drop, PartitionMode::Hold],
            };
            (one_of(hosts_a), 0..modes.len())
                .prop_map(move |(a, m)| Fault::Partition {
                    hosts_b: others(&hosts_b, &a),
                    hosts_a: vec![a],
                    mode: modes[m],
                    one_way,
                })
                .boxed()
        }
        FaultKind::SlowLink {
            hosts_a,
            hosts_b,
            extra_latency_ms,
        } => {
            let hosts_b = hosts_b.clone();
            (one_of(hosts_a), within(*extra_latency_ms))
                .prop_map(move |(a, ms)| Fault::SlowLink {
                    hosts_b: others(&hosts_b, &a),
                    hosts_a: vec![a],
                    extra_latency_ms: ms,
                    one_way: false,
                })
                .boxed()
        }
        FaultKind::Pause { processes } => one_of(processes)
            .prop_map(|process| Fault::Pause { process })
            .boxed(),
        FaultKind::PauseHost { hosts } => one_of(hosts)
            .prop_map(|host| Fault::PauseHost { host })
            .boxed(),
        FaultKind::Crash { processes } => one_of(processes)
            .prop_map(|process| Fault::Crash { process })
            .boxed(),
        FaultKind::CloudDescribeLag { lag_ms } => within(*lag_ms)
            .prop_map(|lag_ms| Fault::Inject {
                process: "cloud".into(),
                fault: WorldFault::CloudDescribeLag { lag_ms },
            })
            .boxed(),
        FaultKind::NodeJoinDelay { extra_ms } => within(*extra_ms)
            .prop_map(|extra_ms| Fault::Inject {
                process: "cloud".into(),
                fault: WorldFault::NodeJoinDelay { extra_ms },
            })
            .boxed(),
        FaultKind::WatchLag { lag_ms } => within(*lag_ms)
            .prop_map(|lag_ms| Fault::Inject {
                process: "apiserver".into(),
                fault: WorldFault::WatchLag { lag_ms },
            })
            .boxed(),
        FaultKind::WatchStall { processes, lag_ms } => (one_of(processes), within(*lag_ms))
            .prop_map(|(process, lag_ms)| Fault::Inject {
                process,
                fault: WorldFault::WatchStall { lag_ms },
            })
            .boxed(),
        FaultKind::Failpoint {
            processes,
            name,
            hit,
            action,
            for_ms,
        } => {
            let (name, action) = (name.clone(), *action);
            (one_of(processes), within(*hit), within(*for_ms))
                .prop_map(move |(process, hit, ms)| Fault::Inject {
                    process,
                    fault: WorldFault::Failpoint {
                        name: name.clone(),
                        hit: u32::try_from(hit).unwrap_or(u32::MAX),
                        action: action.action(ms),
                    },
                })
                .boxed()
        }
    };
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
        let f = FailureFile::new(&self.scenario, &self.plan, outcome)?;
        let dir = std::env::temp_dir().join("reconsim-proptest");
        std::fs::create_dir_all(&dir).ok()?;
        let path: PathBuf = dir.join(format!("{}-{}.json", self.scenario.name, f.trace_hash));
        f.save(&path).ok()?;
        Some(format!(
            "{} at t={}: {}\n  replay: {program} replay {}",
            f.invariant,
            reconsim_sim::SimTime(f.time_ms),
            f.message,
            path.display()
        ))
    }
}
