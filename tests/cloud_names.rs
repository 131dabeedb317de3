//! The cloud's reused names through a scenario file (docs/semantics.md 6.8): the
//! `cloud.subnet_size` field and the `terminate_instance` fault reach the cloud, and a
//! terminated instance's name comes back.

use reconsim::cloud::{Cloud, InstanceState};
use reconsim::families::builtin;
use reconsim::scenario::build::build;
use reconsim::scenario::{Scenario, faults};
use reconsim::sim::{Fault, SimTime, TraceMode};
use reconsim_world::WorldFault;
use serde_json::{Value, json};

/// machineapi-no-leader-election (it scales a MachineSet 0 -> 2 and launches) with a
/// `subnet_size` subnet and one outside termination of the first instance at `at_ms`.
fn scenario(subnet_size: u32, at_ms: u64) -> Scenario {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join("machineapi-no-leader-election.json");
    let mut s: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    s["cloud"]["subnet_size"] = json!(subnet_size);
    s["faults"] = json!([{"count": [1, 1], "at_ms": [at_ms, at_ms], "duration_ms": [1000, 1000],
        "fault": {"terminate_instance": {"launch": [1, 1]}}}]);
    Scenario::parse("cloud-names.json", &s.to_string(), &builtin()).expect("a valid scenario")
}

#[test]
fn a_scenarios_outside_termination_frees_a_name_the_next_launch_takes() {
    // One address: the second Machine's launches fail (no free address) until the
    // first instance, terminated from outside at 1,200 s, releases it ~30 s later.
    let scenario = scenario(1, 1_200_000);
    let plan = faults::generate(&scenario, 0);
    assert!(
        plan.faults.iter().any(|f| matches!(
            &f.fault,
            Fault::Inject {
                process,
                fault: WorldFault::TerminateInstance {
                    launch: Some(1),
                    tag: None
                }
            } if process == "cloud"
        )),
        "{plan:?}"
    );
    let mut world = build(&scenario, 0, plan, TraceMode::Hash);
    world.sim.run_until(SimTime(scenario.duration_ms));
    let cloud = world
        .sim
        .actor(world.cloud)
        .component::<Cloud>()
        .expect("the cloud");
    assert_eq!(cloud.config().subnet_size, 1);
    let all: Vec<(String, String, InstanceState)> = cloud
        .instances()
        .map(|i| (i.id.clone(), i.private_dns_name.clone(), i.state))
        .collect();
    let first = &all[0];
    assert_eq!(first.2, InstanceState::Terminated, "{all:?}");
    assert!(
        all[1..].iter().any(|i| i.1 == first.1),
        "a later instance got {}'s name: {all:?}",
        first.1
    );
}
