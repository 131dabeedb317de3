//! Fault plans from a scenario's fault generators and a seed.
//!
//! Generator `i` draws only from the stream `("faults", i)` of the run's seed, in a fixed
//! order (count; then per fault: time, duration, target, parameters), so adding,
//! removing or editing one generator never moves another's faults, and the plan is the
//! same on every machine. The plan is plain data: it is saved in failure files, shrunk
//! and replayed as is.

use crate::format::{FaultKind, PartitionChoice, Plan, Range, Scenario};
use rand::Rng;
use reconsim_sim::{Fault, PartitionMode, SimRng, Streams, TimedFault};
use reconsim_world::WorldFault;

fn draw(rng: &mut SimRng, r: Range) -> u64 {
    if r.hi <= r.lo {
        return r.lo;
    }
    r.lo + rng.next_u64() % (r.hi - r.lo + 1)
}

fn pick<'a>(rng: &mut SimRng, list: &'a [String]) -> &'a String {
    &list[(rng.next_u64() % list.len() as u64) as usize]
}

/// The fault plan of `scenario` for `seed`, sorted by time (ties keep generator order).
pub fn generate(scenario: &Scenario, seed: u64) -> Plan {
    let streams = Streams::new(seed);
    let mut faults = Vec::new();
    for (i, g) in scenario.faults.iter().enumerate() {
        let mut rng = streams.indexed("faults", i as u64);
        let count = draw(&mut rng, g.count);
        for _ in 0..count {
            let at_ms = draw(&mut rng, g.at_ms);
            let duration_ms = draw(&mut rng, g.duration_ms);
            let fault = match &g.fault {
                FaultKind::KubeletStop { nodes } => Fault::Inject {
                    process: format!("kubelet/{}", pick(&mut rng, nodes)),
                    fault: WorldFault::KubeletStop,
                },
                FaultKind::Partition {
                    hosts_a,
                    hosts_b,
                    mode,
                    one_way,
                } => {
                    let a = pick(&mut rng, hosts_a).clone();
                    let mode = match mode {
                        PartitionChoice::Drop => PartitionMode::Drop,
                        PartitionChoice::Hold => PartitionMode::Hold,
                        PartitionChoice::Either => {
                            if rng.next_u32() & 1 == 0 {
                                PartitionMode::Drop
                            } else {
                                PartitionMode::Hold
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
                    let a = pick(&mut rng, hosts_a).clone();
                    Fault::SlowLink {
                        hosts_b: hosts_b.iter().filter(|h| **h != a).cloned().collect(),
                        hosts_a: vec![a],
                        extra_latency_ms: draw(&mut rng, *extra_latency_ms),
                        one_way: false,
                    }
                }
                FaultKind::Pause { processes } => Fault::Pause {
                    process: pick(&mut rng, processes).clone(),
                },
                FaultKind::PauseHost { hosts } => Fault::PauseHost {
                    host: pick(&mut rng, hosts).clone(),
                },
                FaultKind::Crash { processes } => Fault::Crash {
                    process: pick(&mut rng, processes).clone(),
                },
                FaultKind::CloudDescribeLag { lag_ms } => Fault::Inject {
                    process: "cloud".into(),
                    fault: WorldFault::CloudDescribeLag {
                        lag_ms: draw(&mut rng, *lag_ms),
                    },
                },
                FaultKind::NodeJoinDelay { extra_ms } => Fault::Inject {
                    process: "cloud".into(),
                    fault: WorldFault::NodeJoinDelay {
                        extra_ms: draw(&mut rng, *extra_ms),
                    },
                },
                FaultKind::WatchLag { lag_ms } => Fault::Inject {
                    process: "apiserver".into(),
                    fault: WorldFault::WatchLag {
                        lag_ms: draw(&mut rng, *lag_ms),
                    },
                },
                FaultKind::WatchStall { processes, lag_ms } => Fault::Inject {
                    process: pick(&mut rng, processes).clone(),
                    fault: WorldFault::WatchStall {
                        lag_ms: draw(&mut rng, *lag_ms),
                    },
                },
                FaultKind::Failpoint {
                    processes,
                    name,
                    hit,
                    action,
                    for_ms,
                } => {
                    let process = pick(&mut rng, processes).clone();
                    let hit = u32::try_from(draw(&mut rng, *hit)).unwrap_or(u32::MAX);
                    let ms = draw(&mut rng, *for_ms);
                    Fault::Inject {
                        process,
                        fault: WorldFault::Failpoint {
                            name: name.clone(),
                            hit,
                            action: action.action(ms),
                        },
                    }
                }
            };
            faults.push(TimedFault {
                at_ms,
                duration_ms: Some(duration_ms),
                fault,
            });
        }
    }
    faults.sort_by_key(|f| f.at_ms);
    Plan::new(faults)
}
