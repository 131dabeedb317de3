//! Seed incident 1 (OpenShift machine-api before 4.6): beyond "an invariant fails", the
//! buggy variant over-provisions and duplicates as the report (Bugzilla 1864352)
//! describes: scaling a MachineSet from 0 to 2 gave 3 Machines and 5 cloud instances.
//! That exact shape is rare in the model (about 2 % of runs; 4 and 4 is common):
//! tests/report_shapes.rs measures it.

use reconsim::cloud::InstanceState;
use reconsim::families::builtin;
use reconsim::scenario::build::build;
use reconsim::scenario::{faults, library};
use reconsim::sim::{SimTime, TraceMode};
use reconsim_machineapi::kinds::Machine;
use reconsim_world::object::{CertificateSigningRequest, Node, Pod, Resource};

/// The most Machines and the most live instances seen at once over a whole run, with
/// no checker stopping it.
fn peaks(name: &str, seed: u64) -> (usize, usize) {
    let (_, scenario) = library::load(name, &builtin()).unwrap();
    let plan = faults::generate(&scenario, seed);
    let mut world = build(&scenario, seed, plan, TraceMode::Hash);
    let (mut machines, mut instances) = (0, 0);
    while world
        .sim
        .step_until(SimTime(scenario.duration_ms))
        .is_some()
    {
        let view = reconsim::scenario::runner::view(&world);
        machines = machines.max(view.api.list(Machine::KIND).count());
        instances = instances.max(
            reconsim::cloud::instances(&view, &mut None)
                .filter(|i| {
                    !matches!(
                        i.state,
                        InstanceState::Terminated | InstanceState::ShuttingDown
                    )
                })
                .count(),
        );
    }
    (machines, instances)
}

#[test]
fn the_buggy_variant_shows_the_reports_shape() {
    // Some seed over-provisions Machines and launches more instances than Machines.
    let shapes: Vec<(u64, usize, usize)> = (0..20)
        .map(|seed| {
            let (m, i) = peaks("machineapi-no-leader-election", seed);
            (seed, m, i)
        })
        .collect();
    eprintln!("(seed, peak Machines, peak live instances): {shapes:?}");
    assert!(
        shapes.iter().any(|&(_, m, i)| m > 2 && i > m),
        "no seed had more Machines than replicas and more instances than Machines: {shapes:?}"
    );
}

#[test]
fn rescheduled_controllers_land_only_on_masters() {
    // The controllers' pods select and tolerate masters (machine-api-operator
    // newPodTemplateSpec), so an evicted controller's replacement never runs on a worker
    // the MachineSet made.
    // master-0's kubelet stops after the new workers joined, so its controllers'
    // replacements are scheduled while workers are there to take them.
    let path = "scenarios/machineapi-no-leader-election.json";
    let mut file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(file["faults"][0]["fault"]["kubelet_stop"].is_object());
    file["faults"][0]["at_ms"] = serde_json::json!([700000, 750000]);
    file["faults"][0]["duration_ms"] = serde_json::json!([900000, 1000000]);
    let scenario =
        reconsim::scenario::Scenario::parse(path, &file.to_string(), &builtin()).unwrap();
    let masters = &scenario.topology.control_plane_nodes;
    let mut replacements = 0;
    for seed in 0..10 {
        let plan = faults::generate(&scenario, seed);
        let mut world = build(&scenario, seed, plan, TraceMode::Hash);
        let mut seen = std::collections::BTreeSet::new();
        while world
            .sim
            .step_until(SimTime(scenario.duration_ms))
            .is_some()
        {
            let view = reconsim::scenario::runner::view(&world);
            for p in view.api.list(Pod::KIND) {
                let node = p.typed::<Pod>().unwrap().spec.node_name.clone();
                if let Some(node) = node {
                    assert!(
                        masters.contains(&node),
                        "seed {seed}: pod {} bound to {node}",
                        p.meta.name
                    );
                    seen.insert(p.meta.name.clone());
                }
            }
        }
        replacements += seen.iter().filter(|n| !n.ends_with("-0")).count();
    }
    assert!(replacements > 0, "some seed rescheduled a controller");
}

#[test]
fn only_nodes_a_machine_waits_for_join_and_the_others_pile_up_csrs() {
    // cluster-machine-approver approves a node's client certificate only for a node a
    // Machine lists as its NodeInternalDNS address: a duplicate instance of the race
    // boots, but its node never registers, and its kubelet keeps asking.
    let (_, scenario) = library::load("machineapi-no-leader-election", &builtin()).unwrap();
    let mut duplicated = 0;
    for seed in 0..20 {
        let plan = faults::generate(&scenario, seed);
        let mut world = build(&scenario, seed, plan, TraceMode::Hash);
        world.sim.run_until(SimTime(scenario.duration_ms));
        let view = reconsim::scenario::runner::view(&world);
        let addresses: std::collections::BTreeSet<String> = view
            .api
            .list(Machine::KIND)
            .filter_map(|m| m.typed::<Machine>().unwrap().status.internal_dns.clone())
            .collect();
        let joined: Vec<String> = view
            .api
            .list(Node::KIND)
            .filter(|n| n.typed::<Node>().unwrap().spec.provider_id.is_some())
            .map(|n| n.meta.name.clone())
            .collect();
        for n in &joined {
            assert!(
                addresses.contains(n),
                "seed {seed}: {n} joined for no Machine"
            );
        }
        let csrs = view.api.list(CertificateSigningRequest::KIND).count();
        let booted = reconsim::cloud::instances(&view, &mut None)
            .filter(|i| i.state == InstanceState::Running)
            .count();
        if booted > joined.len() {
            duplicated += 1;
            assert!(
                csrs > booted,
                "seed {seed}: the instances no Machine tracks keep making CSRs ({csrs} for {booted} instances)"
            );
        }
    }
    assert!(
        duplicated > 0,
        "some seed ran an instance no Machine tracks"
    );
}

#[test]
fn the_node_of_a_terminated_instance_is_deleted() {
    // Scale to 2, then back to 0: the Machines' instances terminate, their kubelets stop,
    // the Nodes go NotReady, and the cloud node lifecycle controller deletes them.
    let path = "scenarios/machineapi-leader-election.json";
    let mut file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    file["faults"] = serde_json::json!([]);
    file["workload"].as_array_mut().unwrap().push(
        serde_json::json!({"at_ms": 1_200_000, "action": {"scale_machine_set": {
            "machine_set": "worker-us-west-2b", "replicas": 0}}}),
    );
    let scenario =
        reconsim::scenario::Scenario::parse(path, &file.to_string(), &builtin()).unwrap();
    let plan = faults::generate(&scenario, 0);
    let mut world = build(&scenario, 0, plan, TraceMode::Hash);
    let joined = |world: &reconsim::scenario::build::World| {
        let view = reconsim::scenario::runner::view(world);
        view.api
            .list(Node::KIND)
            .filter(|n| n.typed::<Node>().unwrap().spec.provider_id.is_some())
            .count()
    };
    world.sim.run_until(SimTime(1_100_000));
    assert_eq!(joined(&world), 2, "both workers joined");
    world.sim.run_until(SimTime(scenario.duration_ms));
    let view = reconsim::scenario::runner::view(&world);
    assert_eq!(view.api.list(Machine::KIND).count(), 0, "scaled to 0");
    assert_eq!(
        joined(&world),
        0,
        "the terminated instances' Nodes are gone"
    );
}

#[test]
fn the_fixed_variant_never_exceeds_two_of_each() {
    for seed in 0..20 {
        let (m, i) = peaks("machineapi-leader-election-idempotent", seed);
        assert!(m <= 2 && i <= 2, "seed {seed}: {m} Machines, {i} instances");
    }
}

/// Each checker can fail on its own: with only `no_leaked_instances` checked, the buggy
/// variant leaks an instance on some seed (the report's "extra instance from the machine
/// that was immediately terminated"), and some seed fails convergence instead.
#[test]
fn leaks_and_convergence_failures_are_caught_on_their_own() {
    use reconsim::scenario::fuzz::{Campaign, fuzz};
    let (_, mut scenario) = library::load("machineapi-no-leader-election", &builtin()).unwrap();
    scenario.invariants = vec!["no_leaked_instances".to_string()];
    let campaign = Campaign {
        start: 0,
        end: 60,
        jobs: 2,
        shard: None,
        stop_on_first: false,
        swarm: false,
    };
    let report = fuzz(&scenario, campaign, &|_, _| {}, &|_, _| {});
    let count = |name: &str| {
        report
            .failures
            .iter()
            .filter(|f| f.invariant == name)
            .count()
    };
    assert!(count("no_leaked_instances") > 0, "{:?}", report.failures);
    assert!(count("convergence") > 0, "{:?}", report.failures);
}

#[test]
fn the_4_6_stale_cache_duplicate_found_by_proptest_still_replays() {
    // A wide fuzz of machineapi-leader-election (seeds 2000..42000 under 0.5.0: 4 fail,
    // 1 in 10,000) found the 4.6 race of docs/seeds/machine-api.md ("one leader, a
    // stale cache"); seed 28692 shrinks to no fault at all: the reconcile right after the
    // create reads a cache without the instanceId (the watch event is a few ms behind the
    // write's answer), DescribeInstances answers none (the new instance is invisible for
    // its first seconds), and a second instance is launched. Since every world has a
    // watch latency (0.7.0) it is the scenario's common failure; this file, written
    // before, says no latency and replays in the world it was found in (its trace hash
    // re-recorded when cloud answers came to hash as their instances' digests, 0.7.0:
    // the same events, violation and time; and again when a process's end came to close its
    // connections and each type's watch cache to keep its own history, issue 59: the same
    // violation, 9 ms later). The idempotent variant is the fix.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/failures/machineapi-leader-election-stale-cache.json");
    let f = reconsim::scenario::failure::FailureFile::load(&path, &builtin()).unwrap();
    let replay = f.replay(TraceMode::Hash);
    assert!(replay.reproduced, "{:?}", replay.invariant);
    assert_eq!(replay.invariant.as_deref(), Some("no_duplicate_machines"));
    let mut fixed = f.clone();
    fixed
        .scenario
        .controllers
        .get_mut::<reconsim::families::machineapi::MachineApiSpec>()
        .unwrap()
        .idempotent_create = true;
    assert!(fixed.replay(TraceMode::Hash).outcome.violation.is_none());
}

/// machineapi-leader-election (or, `leader_election: false`, its 4.5 variant) with one
/// fault only: the Machine controller's failpoint
/// `after-run-instances` (between RunInstances and the write of the instance's id)
/// crashes it at its `hit`-th hit, restarting it `for_ms` later (armed from 60 s, once the
/// controller's pod runs).
fn with_failpoint(leader_election: bool, idempotent: bool) -> reconsim::scenario::Scenario {
    let text = std::fs::read_to_string("scenarios/machineapi-leader-election.json").unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["controllers"]["machine_api"]["idempotent_create"] = idempotent.into();
    if !leader_election {
        doc["controllers"]["machine_api"]["variant"] = "no-leader-election".into();
    } else if !idempotent {
        // 4.6 without the token: the crash's own effect, in a world where every watch
        // event leaves with its write, so the stale-cache race of the test above (which
        // a watch latency gives this variant on its own) stays out of the verdict.
        doc["apiserver"] = serde_json::json!({"watch_delay_ms": [0, 0]});
    }
    doc["faults"] = serde_json::json!([{
        "count": [1, 1], "at_ms": [60000, 60000], "duration_ms": [1140000, 1140000],
        "fault": {"failpoint": {"processes": ["machine-controller-0"],
                                "name": "after-run-instances", "hit": [1, 2],
                                "action": "crash", "for_ms": [10, 500]}}
    }]);
    reconsim::scenario::Scenario::parse("failpoint.json", &doc.to_string(), &builtin()).unwrap()
}

#[test]
fn a_failpoint_crash_after_run_instances_duplicates_without_a_client_token_and_never_with_one() {
    // 4.5 (no leader election): after the crash the id is not recorded; the restarted
    // controller looks the Machine's instance up by tag at once, while DescribeInstances
    // does not show it yet (1-5 s), and launches another, unless the launch carried the
    // Machine's uid as client token. 4.6: the restarted process is a new candidate and
    // waits out its former self's lease (120 s); by then the lookup finds the instance.
    use reconsim::scenario::{faults, run_world};
    for (leader_election, idempotent, duplicates) in [
        (false, false, true),
        (false, true, false),
        (true, false, false),
    ] {
        let s = with_failpoint(leader_election, idempotent);
        for seed in 0..20 {
            let plan = faults::generate(&s, seed);
            let (outcome, world) = run_world(&s, seed, plan, TraceMode::Full);
            let hit = world
                .sim
                .trace()
                .records()
                .iter()
                .any(|r| matches!(r.kind, reconsim::sim::RecordKind::Crashed { .. }));
            assert!(
                hit,
                "seed {seed}: the scale-up's launches hit the failpoint"
            );
            let invariant = outcome.violation.as_ref().map(|v| v.invariant.as_str());
            if duplicates {
                assert_eq!(invariant, Some("no_duplicate_machines"), "seed {seed}");
            } else {
                assert_eq!(invariant, None, "seed {seed}: {:?}", outcome.violation);
            }
        }
    }
}
