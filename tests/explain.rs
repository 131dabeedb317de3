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
    let e = explain(&failure("machineapi-no-leader-election", 1)).expect("reproduces");
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
    // Why a second controller runs (the causal chain behind the processes that
    // wrote): master-0's heartbeats stop, the node lifecycle controller finds it
    // silent and evicts the controller's pod, a replacement starts on another master,
    // and the first runs on. Of the heartbeats, only master-0's last is shown, before
    // the node was found silent: the evidence of the silence.
    let at = |needle: &str| {
        text.lines()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?}:\n{text}"))
    };
    let beat = at("stored Lease kube-node-lease/master-0");
    let silent = at("lifecycle: node master-0 stopped posting status");
    let evicted = at("evicting pod Pod openshift-machine-api/machineset-controller-0");
    let replacement = text
        .lines()
        .position(|l| {
            l.contains("machineset-controller-") && l.ends_with(" starts") && !l.contains("-0@")
        })
        .unwrap_or_else(|| panic!("no replacement's start:\n{text}"));
    assert!(
        beat < silent && silent < evicted && evicted < replacement,
        "{text}"
    );
    assert!(
        text.lines()
            .nth(beat)
            .unwrap()
            .ends_with("(the node's last heartbeat before it was found silent)")
    );
    assert_eq!(text.matches("kube-node-lease").count(), 1, "{text}");
    // No kubelet's lines: they are not on the chain.
    assert!(!text.contains("kubelet/"), "{text}");
}

#[test]
fn the_reconcile_that_made_the_machine_is_shown_though_the_violation_names_only_it() {
    // The violation names one Machine and its two instances; the MachineSet's scale-up
    // and the reconcile that created the Machine decide the story all the same.
    let e = explain(&failure("machineapi-leader-election", 4)).expect("reproduces");
    assert!(
        !e.objects.iter().any(|o| o.starts_with("MachineSet")),
        "{:?}",
        e.objects
    );
    let text = e.lines.join("\n");
    assert!(
        text.contains("user@user -> patch MachineSet worker-us-west-2b: replicas=2"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("machineset-controller reconcile #")
                && l.contains("of MachineSet openshift-machine-api/worker-us-west-2b")),
        "{text}"
    );
    assert!(
        text.contains("-> create Machine worker-us-west-2b-*"),
        "{text}"
    );
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

#[test]
fn a_create_by_generate_name_says_the_name_the_server_gave() {
    // The request only knows its prefix (`worker-us-west-2b-*`); its answer names the
    // object, and that is the object the API server stored at that write.
    let e = explain(&failure("machineapi-no-leader-election", 0)).expect("reproduces");
    let text = e.lines.join("\n");
    let named: Vec<(&str, &str)> = text
        .lines()
        .filter(|l| l.contains("-> create Machine worker-us-west-2b-* => ok, rv "))
        .map(|l| {
            let rest = l.split_once("=> ok, rv ").unwrap().1;
            let (rv, rest) = rest.split_once(", named ").expect("the name it was given");
            (rv, rest.split_once(' ').unwrap().0)
        })
        .collect();
    assert_eq!(named.len(), 2, "{text}");
    for (rv, name) in named {
        let stored = format!("stored Machine openshift-machine-api/{name} rv {rv}");
        assert!(text.contains(&stored), "{stored} not in:\n{text}");
    }
}

#[test]
fn a_deleted_object_is_not_yet_seen_never_missing() {
    // kcp-upgrade-counts-deleting-3 seed 31: the old Machine controlplane-4bll4 is
    // removed at 689.648 s over a slow link. The KCP's next reconcile has not seen the
    // removal yet, and says so; no verdict ever calls the Machine MISSING from a cache
    // (the server no longer has it, so a cache without it is right).
    let e = explain(&failure("kcp-upgrade-counts-deleting-3", 31)).expect("reproduces");
    let lines = &e.lines;
    let machine = "Machine default/controlplane-4bll4";
    let removed = lines
        .iter()
        .position(|l| l.contains(&format!("api server: removed {machine} rv ")))
        .unwrap_or_else(|| panic!("no removal:\n{}", lines.join("\n")));
    let next = lines[removed..]
        .iter()
        .find(|l| l.contains("kcp-controller reconcile #"))
        .unwrap_or_else(|| panic!("no reconcile after the removal"));
    assert!(
        next.contains(&format!("has not yet seen the latest writes to {machine}")),
        "{next}"
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("MISSING") && l.contains("controlplane-4bll4")),
        "{}",
        lines.join("\n")
    );
}
