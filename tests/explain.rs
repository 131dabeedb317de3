//! `reconsim explain`: the causal timeline names the objects and processes at fault and
//! marks a decision taken on a stale cache.

use reconsim::families::builtin;
use reconsim::scenario::explain::explain;
use reconsim::scenario::failure::FailureFile;
use reconsim::scenario::{library, runner};

fn failure(name: &str, seed: u64) -> FailureFile {
    let (_, scenario) = library::load(name, &builtin()).unwrap();
    let (outcome, plan) = runner::run(&scenario, seed);
    FailureFile::new(&scenario, &plan, &outcome).expect("the seed fails")
}

#[test]
fn two_machineset_controllers_and_the_stale_cache_are_named() {
    let e = explain(&failure("machineapi-no-leader-election", 0)).expect("reproduces");
    assert!(e.headline.contains("no_duplicate_machines"));
    assert!(e.faults.contains("stop the kubelet of master-0") && e.faults.contains("(active)"));
    let text = e.lines.join("\n");
    // Both MachineSet controllers reconcile and create; one did so on a stale cache.
    assert!(
        text.contains("machineset-controller-0@master-0 -> create Machine"),
        "{text}"
    );
    // The replacement, on another master (the pods select masters).
    assert!(
        text.lines().any(|l| l.contains("-> create Machine")
            && l.contains("machineset-controller-")
            && !l.contains("machineset-controller-0@")
            && (l.contains("@master-1") || l.contains("@master-2"))),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("machineset-controller-0@master-0")
                && l.contains("has not yet seen the latest writes to Machine")),
        "{text}"
    );
    // Only the objects involved: no line about the node leases or kubelets.
    assert!(!text.contains("kube-node-lease"), "{text}");
}

#[test]
fn the_thawed_leader_and_its_late_create_are_named() {
    let e = explain(&failure("machineapi-lease-expiry-pause", 5)).expect("reproduces");
    assert!(e.faults.contains("freeze host master-0"), "{}", e.faults);
    let text = e.lines.join("\n");
    let creates: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("RunInstances Name="))
        .collect();
    assert!(
        creates
            .iter()
            .any(|l| l.contains("machine-controller-0@master-0")),
        "{text}"
    );
    assert!(
        creates
            .iter()
            .any(|l| !l.contains("machine-controller-0@master-0")),
        "the replacement's create is there too: {text}"
    );
    assert!(text.contains("started leading"), "{text}");
    // The answer that decided the race: the old leader's lookup, before it froze, found
    // no instance.
    assert!(
        text.lines().any(|l| l
            .contains("machine-controller-0@master-0 -> DescribeInstances Name=")
            && l.contains("=> none")),
        "{text}"
    );
}

#[test]
fn timelines_show_what_became_of_each_request() {
    let (_, scenario) = library::load("machineapi-leader-election", &builtin()).unwrap();
    let plan = reconsim::scenario::faults::generate(&scenario, 0);
    let (_, world) = runner::run_world(&scenario, 0, plan, reconsim::sim::TraceMode::Full);
    let lines = reconsim::scenario::timeline::timeline(&world, reconsim::sim::SimTime(u64::MAX));
    let requests: Vec<&String> = lines.iter().filter(|l| l.contains(" -> ")).collect();
    assert!(requests.len() > 20, "{lines:#?}");
    assert!(
        requests.iter().all(|l| l.contains(" => ")),
        "every request line says what became of it: {requests:#?}"
    );
    // The restarted kubelet registers again: the Node is there already.
    assert!(
        requests
            .iter()
            .any(|l| l.contains("-> create Node master-0 => 409 AlreadyExists")),
        "{requests:#?}"
    );
    assert!(
        requests.iter().any(|l| l.contains("=> ok, rv ")),
        "{requests:#?}"
    );
}

#[test]
fn a_reconcilers_notes_tell_why_it_created() {
    // ReconcileCtx::note lines of the reconcile that made the needless Machine: the
    // deleting machine still counted, the Node count already dropped, the health check
    // re-read a cache in which the Machine was gone.
    let e = explain(&failure("kcp-upgrade-counts-deleting-3", 31)).expect("reproduces");
    let text = e.lines.join("\n");
    assert!(
        text.contains("upgrade: 1 Machines need it (1 deleting); ClusterStatus: 3 control-plane Nodes, replicas 3: scale up"),
        "{text}"
    );
    assert!(text.contains("control plane healthy: 3 Nodes"), "{text}");
}
