//! A fault plan checked against its scenario, as a scenario is checked against the
//! registry: a plan read from a failure file that names a host the world lacks, a
//! process no run starts, a time past the run's end or a fault that needs an anchor and
//! has none is refused with its JSON path, instead of running as a silent no-op whose
//! replay then says only "NOT reproduced".
//!
//! Hosts are static (the fixed hosts and the topology's nodes), and so are the times and
//! the cluster's own services, checked at load ([`check`]). Processes are not: a
//! Deployment's replacement pod gets a generated name, a restarted container a `#N`
//! suffix, a booting machine a process of its own, and search anchors faults to any of
//! them. So a process name is judged by runs ([`crate::failure::FailureFile::check_targets`]):
//! it must exist at some point of the plan's own run, or of its reference run (the plan
//! without its anchored faults, which is where search found the name).

use crate::format::{Plan, Scenario};
use crate::limits;
use reconsim_sim::Fault;
use reconsim_world::WorldFault;

/// Every process `plan` names, with the JSON path (under `at`) that names it.
pub fn process_names<'a>(plan: &'a Plan, at: &str) -> Vec<(String, &'a str)> {
    let mut names = Vec::new();
    for (i, f) in plan.faults.iter().enumerate() {
        match &f.fault {
            Fault::Pause { process }
            | Fault::Crash { process }
            | Fault::ClockSkew { process, .. }
            | Fault::Inject { process, .. } => {
                names.push((format!("{at}[{i}].fault.process"), process.as_str()))
            }
            _ => {}
        }
        if let Some(anchor) = &f.on {
            names.push((format!("{at}[{i}].on.process"), anchor.process.as_str()));
        }
    }
    names
}

/// `Err((json path under `at`, expected))` at the first entry of `plan` that cannot act
/// in a run of `scenario`.
pub fn check(scenario: &Scenario, plan: &Plan, at: &str) -> Result<(), (String, String)> {
    let err = |path: String, msg: String| Err((path, msg));
    if plan.faults.len() > limits::PLAN_FAULTS_MAX {
        return err(
            at.to_string(),
            format!(
                "at most {} faults (PLAN_FAULTS_MAX), not {}",
                limits::PLAN_FAULTS_MAX,
                plan.faults.len()
            ),
        );
    }
    let doc = serde_json::to_value(plan).expect("plans serialize");
    limits::check_values(&doc, limits::PLAN_FAULTS_MAX)
        .map_err(|(p, m)| (format!("{at}{}", p.trim_start_matches('.')), m))?;
    let hosts = scenario.hosts();
    let nodes: Vec<String> = scenario.nodes().cloned().collect();
    for (i, f) in plan.faults.iter().enumerate() {
        let here = |field: &str| format!("{at}[{i}].{field}");
        if f.at_ms > scenario.duration_ms {
            return err(
                here("at_ms"),
                format!(
                    "a time within the scenario's duration_ms ({} ms), not {}",
                    scenario.duration_ms, f.at_ms
                ),
            );
        }
        let host = |field: &str, h: &str| {
            if hosts.iter().any(|x| x == h) {
                Ok(())
            } else {
                err(
                    here(field),
                    format!("a host of the scenario ({}), not `{h}`", hosts.join(", ")),
                )
            }
        };
        let hosts_in = |field: &str, list: &[String]| {
            if list.is_empty() {
                return err(here(&format!("fault.{field}")), "a non-empty list".into());
            }
            for (j, h) in list.iter().enumerate() {
                host(&format!("fault.{field}[{j}]"), h)?;
            }
            Ok(())
        };
        match &f.fault {
            Fault::Partition {
                hosts_a, hosts_b, ..
            }
            | Fault::SlowLink {
                hosts_a, hosts_b, ..
            } => {
                hosts_in("hosts_a", hosts_a)?;
                hosts_in("hosts_b", hosts_b)?;
            }
            Fault::Pause { .. } | Fault::Crash { .. } | Fault::ClockSkew { .. } => {}
            Fault::PauseHost { host: h } => host("fault.host", h)?,
            Fault::Inject { process: p, fault } => {
                // The cluster's own services take only their own faults.
                let target = match fault {
                    WorldFault::KubeletStop => Some(("a kubelet", nodes_as_kubelets(&nodes))),
                    WorldFault::CloudDescribeLag { .. }
                    | WorldFault::NodeJoinDelay { .. }
                    | WorldFault::TerminateInstance { .. } => {
                        Some(("the cloud", vec!["cloud".to_string()]))
                    }
                    WorldFault::WatchLag { .. } => {
                        Some(("the API server", vec!["apiserver".to_string()]))
                    }
                    WorldFault::Operation(_) => {
                        Some(("the user's client", vec![crate::faults::USER.to_string()]))
                    }
                    _ => None,
                };
                if let WorldFault::Operation(op) = fault
                    && scenario
                        .operations_played(&Plan::new(vec![f.clone()]))
                        .is_empty()
                {
                    return err(
                        here("fault"),
                        format!(
                            "an operation the scenario's `operation` generators can make (on their \
                             objects, or their workload action; values in JSON), not `{op}`"
                        ),
                    );
                }
                if let Some((what, names)) = target
                    && !names.iter().any(|n| n == p)
                {
                    return err(
                        here("fault.process"),
                        format!("{what} ({}), not `{p}`", names.join(", ")),
                    );
                }
            }
            Fault::DropMessage | Fault::DelayMessage { .. } | Fault::LoseAnswer => {
                if f.on.is_none() {
                    return err(
                        here("on"),
                        "an anchor: this fault acts on the anchor's message".into(),
                    );
                }
            }
        }
        if f.on.as_ref().is_some_and(|anchor| anchor.nth == 0) {
            return err(here("on.nth"), "messages counted from 1".into());
        }
    }
    Ok(())
}

fn nodes_as_kubelets(nodes: &[String]) -> Vec<String> {
    nodes.iter().map(|n| format!("kubelet/{n}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use reconsim_sim::TimedFault;

    #[test]
    fn every_named_process_is_listed_with_its_path() {
        let plan = Plan::new(vec![
            TimedFault::at(
                0,
                Some(5),
                Fault::Crash {
                    process: "a".into(),
                },
            ),
            TimedFault::at(
                1,
                None,
                Fault::PauseHost {
                    host: "master-0".into(),
                },
            ),
        ]);
        assert_eq!(
            process_names(&plan, ".plan"),
            vec![(".plan[0].fault.process".to_string(), "a")]
        );
    }
}
