//! Every shipped scenario meets its expectation within its budget of runs, under the
//! campaign `reconsim check` runs: random seeds, swarm seeds and search plans
//! (crates/scenario/src/combined.rs).
//!
//! The budget comes from the file; `RECONSIM_SEED_SCALE` multiplies it (CI runs 1, a
//! quick local loop can use 0.1, a nightly run 10). A `violation` scenario must fail on
//! some run of its budget; a `clean` one must hold on every run of it.

use reconsim::families::builtin;
use reconsim::scenario::combined::{self, Config};
use reconsim::scenario::{Expect, Scenario, library};

fn scale() -> f64 {
    std::env::var("RECONSIM_SEED_SCALE")
        .ok()
        .map(|s| {
            s.parse()
                .expect("RECONSIM_SEED_SCALE: a number such as 0.1 or 10")
        })
        .unwrap_or(1.0)
}

fn check(name: &str) {
    let (_, scenario): (_, Scenario) =
        library::load(name, &builtin()).expect("a shipped scenario loads");
    let runs = ((scenario.seeds as f64 * scale()).ceil() as u64).max(1);
    let config = Config {
        stop_on_first: scenario.expect == Expect::Violation,
        ..Config::new(
            runs,
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        )
    };
    let report = combined::run(&scenario, &config, &mut |_, _, _| {}, &|_, _| {});
    match scenario.expect {
        Expect::Violation => assert!(
            report.first_failure().is_some(),
            "{name}: expected a violation within {runs} runs, all were clean"
        ),
        Expect::Clean => assert!(
            report.failures.is_empty(),
            "{name}: expected clean over {runs} runs; failing: {:?}\n  see: reconsim check {name} --failures-dir failures",
            report.failures
        ),
    }
}

#[test]
fn every_shipped_scenario_is_tested() {
    let names: Vec<String> = library::files()
        .expect("scenarios/ lists")
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    let tested = [
        "machineapi-no-leader-election",
        "machineapi-leader-election",
        "machineapi-leader-election-idempotent",
        "machineapi-lease-expiry-pause",
        "machineapi-lease-expiry-idempotent",
        "machineapi-leader-election-watch-lag",
        "machineapi-idempotent-watch-lag",
        "machineapi-leader-election-watch-stall",
        "kcp-upgrade-counts-deleting-1",
        "kcp-upgrade-counts-deleting-3",
        "kcp-upgrade-waits-for-deletion-1",
        "kcp-upgrade-waits-for-deletion-3",
        "kcp-upgrade-stale-leader-candidate",
        "kcp-upgrade-scale-races-upgrade",
        "kcp-upgrade-health-recheck-race",
        "kcp-upgrade-watch-lag",
        "kcp-upgrade-machine-count",
        "kcp-upgrade-machine-fix-only-1",
        "kcp-upgrade-kcp-fix-only-1",
        "kcp-init-watch-latency",
        "mco-gc-keep-latest-only",
        "mco-bootstrap-mismatch",
        "mco-gc-older-than-1h",
        "mco-gc-in-use",
        "mco-gc-in-use-and-in-flight",
        "mco-gc-churn-after-join-keep-latest-only",
        "mco-gc-churn-after-join-older-than-1h",
        "mco-gc-churn-after-join-in-use",
        "mco-gc-churn-after-join-in-use-and-in-flight",
        "mco-gc-churn-operations-in-use-and-in-flight",
        "mco-gc-churn-operations-in-use-and-recorded",
    ];
    for n in &names {
        assert!(
            tested.contains(&n.as_str()),
            "scenario {n} has no test in tests/scenarios.rs"
        );
    }
}

#[test]
fn machineapi_no_leader_election_duplicates() {
    check("machineapi-no-leader-election");
}

#[test]
fn machineapi_leader_election_duplicates_from_a_cache_behind_its_own_patch() {
    check("machineapi-leader-election");
}

#[test]
fn machineapi_leader_election_idempotent_holds() {
    check("machineapi-leader-election-idempotent");
}

#[test]
fn machineapi_lease_expiry_pause_duplicates() {
    check("machineapi-lease-expiry-pause");
}

#[test]
fn machineapi_lease_expiry_idempotent_holds() {
    check("machineapi-lease-expiry-idempotent");
}

#[test]
fn machineapi_leader_election_watch_lag_duplicates() {
    check("machineapi-leader-election-watch-lag");
}

#[test]
fn machineapi_idempotent_watch_lag_holds() {
    check("machineapi-idempotent-watch-lag");
}

#[test]
fn machineapi_leader_election_watch_stall_duplicates() {
    check("machineapi-leader-election-watch-stall");
}

#[test]
fn kcp_upgrade_counts_deleting_1_violates() {
    check("kcp-upgrade-counts-deleting-1");
}

#[test]
fn kcp_upgrade_counts_deleting_3_violates() {
    check("kcp-upgrade-counts-deleting-3");
}

#[test]
fn kcp_upgrade_waits_for_deletion_1_holds() {
    check("kcp-upgrade-waits-for-deletion-1");
}

#[test]
fn kcp_upgrade_waits_for_deletion_3_holds() {
    check("kcp-upgrade-waits-for-deletion-3");
}

#[test]
fn kcp_upgrade_stale_leader_candidate_violates() {
    check("kcp-upgrade-stale-leader-candidate");
}

#[test]
fn kcp_upgrade_scale_races_upgrade_holds() {
    check("kcp-upgrade-scale-races-upgrade");
}

#[test]
fn kcp_upgrade_health_recheck_race_violates() {
    check("kcp-upgrade-health-recheck-race");
}

#[test]
fn kcp_upgrade_watch_lag_violates() {
    check("kcp-upgrade-watch-lag");
}

#[test]
fn kcp_upgrade_machine_count_holds() {
    check("kcp-upgrade-machine-count");
}

#[test]
fn kcp_upgrade_machine_fix_only_1_violates() {
    check("kcp-upgrade-machine-fix-only-1");
}

#[test]
fn kcp_upgrade_kcp_fix_only_1_violates() {
    check("kcp-upgrade-kcp-fix-only-1");
}

#[test]
fn kcp_init_watch_latency_initializes_twice() {
    check("kcp-init-watch-latency");
}

#[test]
fn mco_gc_keep_latest_only_deletes_a_served_config() {
    check("mco-gc-keep-latest-only");
}

#[test]
fn mco_bootstrap_mismatch_names_a_config_never_rendered() {
    check("mco-bootstrap-mismatch");
}

#[test]
fn mco_gc_older_than_1h_deletes_the_running_config() {
    check("mco-gc-older-than-1h");
}

#[test]
fn mco_gc_in_use_deletes_a_config_in_flight() {
    check("mco-gc-in-use");
}

#[test]
fn mco_gc_in_use_and_in_flight_holds() {
    check("mco-gc-in-use-and-in-flight");
}

// Configs that keep changing after the nodes registered (issue 13, item 10): which GC
// rules hold, as measured (docs/seeds/mco.md, "Configs changing after registration").

#[test]
fn mco_gc_churn_after_join_keep_latest_only_deletes_the_running_config() {
    check("mco-gc-churn-after-join-keep-latest-only");
}

#[test]
fn mco_gc_churn_after_join_older_than_1h_deletes_a_config_mid_rollout() {
    check("mco-gc-churn-after-join-older-than-1h");
}

#[test]
fn mco_gc_churn_after_join_in_use_deletes_a_config_handed_to_a_joining_worker() {
    check("mco-gc-churn-after-join-in-use");
}

#[test]
fn mco_gc_churn_after_join_in_use_and_in_flight_holds() {
    check("mco-gc-churn-after-join-in-use-and-in-flight");
}

#[test]
fn mco_gc_churn_operations_in_use_and_in_flight_deletes_a_config_a_node_was_just_pointed_at() {
    check("mco-gc-churn-operations-in-use-and-in-flight");
}

#[test]
fn mco_gc_churn_operations_in_use_and_recorded_holds() {
    check("mco-gc-churn-operations-in-use-and-recorded");
}
