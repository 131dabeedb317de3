//! Fault plans from a scenario's fault generators and a seed.
//!
//! Generator `i` draws only from the stream `("faults", i)` of the run's seed, in a fixed
//! order (count; then per fault: time, duration, target, parameters), so adding,
//! removing or editing one generator never moves another's faults, and the plan is the
//! same on every machine. The plan is plain data: it is saved in failure files, shrunk
//! and replayed as is.
//!
//! Swarm mode ([`generate_swarm`]) switches each generator on or off per seed, from the
//! seed's own `swarm` stream, so one hand-tuned mix of faults does not mask the failures
//! that only show without some of them (swarm testing, Groce et al., ISSTA 2012: a random
//! subset of features per test found more distinct failures than all of them at once).

use crate::format::{FaultKind, PartitionChoice, Plan, Range, Scenario};
use rand::Rng;
use reconsim_sim::{Fault, PartitionMode, SimRng, Streams, TimedFault};
use reconsim_world::WorldFault;

/// The choices a generator makes for one fault: random for a seed's plan, fixed for a
/// search's plans (which enumerate targets and take the strongest parameters).
pub trait Choose {
    /// One of `n` targets.
    fn pick(&mut self, n: usize) -> usize;
    /// A value of a range.
    fn draw(&mut self, r: Range) -> u64;
    /// A partition's mode when the generator allows either.
    fn hold(&mut self) -> bool;
}

impl Choose for SimRng {
    fn pick(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    fn draw(&mut self, r: Range) -> u64 {
        if r.hi <= r.lo {
            return r.lo;
        }
        r.lo + self.next_u64() % (r.hi - r.lo + 1)
    }

    fn hold(&mut self) -> bool {
        self.next_u32() & 1 != 0
    }
}

fn pick<'a>(c: &mut impl Choose, list: &'a [String]) -> &'a String {
    &list[c.pick(list.len())]
}

/// The ranges [`fault_of`] draws for `kind`, in the order it draws them.
pub fn ranges(kind: &FaultKind) -> Vec<Range> {
    match kind {
        FaultKind::SlowLink {
            extra_latency_ms, ..
        } => vec![*extra_latency_ms],
        FaultKind::CloudDescribeLag { lag_ms }
        | FaultKind::WatchLag { lag_ms, .. }
        | FaultKind::WatchStall { lag_ms, .. } => vec![*lag_ms],
        FaultKind::NodeJoinDelay { extra_ms } => vec![*extra_ms],
        FaultKind::TerminateInstance { launch, .. } => launch.iter().copied().collect(),
        FaultKind::Failpoint { hit, for_ms, .. } => vec![*hit, *for_ms],
        FaultKind::KubeletStop { .. }
        | FaultKind::Operation { .. }
        | FaultKind::Partition { .. }
        | FaultKind::Pause { .. }
        | FaultKind::PauseHost { .. }
        | FaultKind::Crash { .. } => vec![],
    }
}

/// How many targets a generator picks among (1 for a fault with no target).
pub fn targets(kind: &FaultKind) -> usize {
    match kind {
        FaultKind::KubeletStop { nodes } => nodes.len(),
        FaultKind::Partition { hosts_a, .. } | FaultKind::SlowLink { hosts_a, .. } => hosts_a.len(),
        FaultKind::Pause { processes }
        | FaultKind::Crash { processes }
        | FaultKind::WatchStall { processes, .. }
        | FaultKind::Failpoint { processes, .. } => processes.len(),
        FaultKind::PauseHost { hosts } => hosts.len(),
        FaultKind::WatchLag { kinds, .. } => kinds.len().max(1),
        FaultKind::CloudDescribeLag { .. }
        | FaultKind::NodeJoinDelay { .. }
        | FaultKind::TerminateInstance { .. } => 1,
        // Each operation before its values (a target, a choice, a field).
        FaultKind::Operation {
            operations, space, ..
        } => space.count(operations),
    }
}

/// The fault plan of `scenario` for `seed`, sorted by time (ties keep generator order).
pub fn generate(scenario: &Scenario, seed: u64) -> Plan {
    generate_with(scenario, seed, None)
}

/// Which of the scenario's generators swarm mode switches on for `seed`: each with
/// probability 1/2, and at least one (a scenario with generators always gets faults).
pub fn swarm_mask(scenario: &Scenario, seed: u64) -> Vec<bool> {
    let n = scenario.faults.len();
    let mut rng = Streams::new(seed).stream("swarm");
    let mut mask: Vec<bool> = (0..n).map(|_| rng.next_u32() & 1 == 1).collect();
    if n > 0 && !mask.contains(&true) {
        mask[(rng.next_u64() % n as u64) as usize] = true;
    }
    mask
}

/// The plan of `seed` in swarm mode: the generators [`swarm_mask`] switches on draw
/// exactly what they would in [`generate`]; the others draw nothing.
pub fn generate_swarm(scenario: &Scenario, seed: u64) -> Plan {
    generate_with(scenario, seed, Some(&swarm_mask(scenario, seed)))
}

fn generate_with(scenario: &Scenario, seed: u64, mask: Option<&[bool]>) -> Plan {
    let streams = Streams::new(seed);
    let mut faults = Vec::new();
    for (i, g) in scenario.faults.iter().enumerate() {
        if mask.is_some_and(|m| !m[i]) {
            continue;
        }
        let mut rng = streams.indexed("faults", i as u64);
        let count = rng.draw(g.count);
        for _ in 0..count {
            let at_ms = rng.draw(g.at_ms);
            let duration_ms = rng.draw(g.duration_ms);
            let fault = fault_of(&g.fault, &mut rng);
            faults.push(TimedFault {
                at_ms,
                duration_ms: Some(duration_ms),
                fault,
                on: None,
            });
        }
    }
    faults.sort_by_key(|f| f.at_ms);
    Plan::new(faults)
}

/// The process that plays users' operations: the scripted client of the workload.
pub const USER: &str = "user";

/// One fault of a generator, its choices made by `c` in the generator's fixed order
/// (target first, then parameters).
pub fn fault_of(kind: &FaultKind, c: &mut impl Choose) -> Fault<WorldFault> {
    match kind {
        FaultKind::Operation {
            operations, space, ..
        } => Fault::Inject {
            process: USER.into(),
            fault: WorldFault::Operation(space.draw(operations, c)),
        },
        FaultKind::KubeletStop { nodes } => Fault::Inject {
            process: format!("kubelet/{}", pick(c, nodes)),
            fault: WorldFault::KubeletStop,
        },
        FaultKind::Partition {
            hosts_a,
            hosts_b,
            mode,
            one_way,
        } => {
            let a = pick(c, hosts_a).clone();
            let mode = match mode {
                PartitionChoice::Drop => PartitionMode::Drop,
                PartitionChoice::Hold => PartitionMode::Hold,
                PartitionChoice::Either => {
                    if c.hold() {
                        PartitionMode::Hold
                    } else {
                        PartitionMode::Drop
                    }
                }
            };
            Fault::Partition {
                hosts_b: hosts_b.iter().filter(|h| **h != a).cloned().collect(),
                hosts_a: vec![a],
                mode,
                one_way: *one_way,
            }
        }
        FaultKind::SlowLink {
            hosts_a,
            hosts_b,
            extra_latency_ms,
        } => {
            let a = pick(c, hosts_a).clone();
            Fault::SlowLink {
                hosts_b: hosts_b.iter().filter(|h| **h != a).cloned().collect(),
                hosts_a: vec![a],
                extra_latency_ms: c.draw(*extra_latency_ms),
                one_way: false,
            }
        }
        FaultKind::Pause { processes } => Fault::Pause {
            process: pick(c, processes).clone(),
        },
        FaultKind::PauseHost { hosts } => Fault::PauseHost {
            host: pick(c, hosts).clone(),
        },
        FaultKind::Crash { processes } => Fault::Crash {
            process: pick(c, processes).clone(),
        },
        FaultKind::CloudDescribeLag { lag_ms } => Fault::Inject {
            process: "cloud".into(),
            fault: WorldFault::CloudDescribeLag {
                lag_ms: c.draw(*lag_ms),
            },
        },
        FaultKind::NodeJoinDelay { extra_ms } => Fault::Inject {
            process: "cloud".into(),
            fault: WorldFault::NodeJoinDelay {
                extra_ms: c.draw(*extra_ms),
            },
        },
        FaultKind::TerminateInstance { launch, tag } => Fault::Inject {
            process: "cloud".into(),
            fault: WorldFault::TerminateInstance {
                launch: launch.map(|r| c.draw(r)),
                tag: tag.clone(),
            },
        },
        FaultKind::WatchLag { lag_ms, kinds } => {
            // One of the kinds first (none drawn without them: plans stay as they were).
            let of_kind = (!kinds.is_empty()).then(|| pick(c, kinds).clone());
            Fault::Inject {
                process: "apiserver".into(),
                fault: WorldFault::WatchLag {
                    lag_ms: c.draw(*lag_ms),
                    of_kind,
                },
            }
        }
        FaultKind::WatchStall { processes, lag_ms } => Fault::Inject {
            process: pick(c, processes).clone(),
            fault: WorldFault::WatchStall {
                lag_ms: c.draw(*lag_ms),
            },
        },
        FaultKind::Failpoint {
            processes,
            name,
            hit,
            action,
            for_ms,
        } => {
            let process = pick(c, processes).clone();
            let hit = u32::try_from(c.draw(*hit)).unwrap_or(u32::MAX);
            let ms = c.draw(*for_ms);
            Fault::Inject {
                process,
                fault: WorldFault::Failpoint {
                    name: name.clone(),
                    hit,
                    action: action.action(ms),
                },
            }
        }
    }
}
