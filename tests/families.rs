//! The builtin registry and the one grammar scenario files have for every family:
//! sections keyed by family, actions by name, invariants of any registered family, and
//! the errors for what no registered family knows.

use reconsim::families::builtin;
use reconsim::scenario::Scenario;
use serde_json::{Value, json};

fn doc() -> Value {
    let text = std::fs::read_to_string("scenarios/machineapi-leader-election.json").unwrap();
    serde_json::from_str(&text).unwrap()
}

fn error(doc: &Value) -> (String, String) {
    let e = Scenario::parse("x.json", &doc.to_string(), &builtin()).unwrap_err();
    (e.path, e.message)
}

#[test]
fn the_builtin_registry_spawns_machine_api_then_mco_then_kcp_then_go() {
    let families = builtin();
    let mut names = vec!["machine_api", "mco", "kcp"];
    if cfg!(feature = "go") {
        names.push("go");
    }
    assert_eq!(families.names(), names);
    let actions: Vec<(&str, &str)> = families.action_names();
    let mut expected = vec![
        ("scale_machine_set", "machine_api"),
        ("create_machine_config", "mco"),
        ("scale_kcp", "kcp"),
        ("upgrade_kcp", "kcp"),
    ];
    if cfg!(feature = "go") {
        expected.push(("go", "go"));
    }
    assert_eq!(actions, expected);
    assert_eq!(families.invariant_names().len(), 10);
    for name in [
        "no_leaked_instances",
        "no_missing_referenced_config",
        "etcd_quorum",
    ] {
        assert!(families.invariant(name).is_some(), "{name}");
    }
}

#[test]
fn sections_of_families_not_run_may_be_null_and_in_any_order() {
    // What files written by 0.3.0 hold: every builtin family, `null` when not run.
    let mut d = doc();
    d["controllers"]["kcp"] = Value::Null;
    d["controllers"]["mco"] = Value::Null;
    let s = Scenario::parse("x.json", &d.to_string(), &builtin()).unwrap();
    assert_eq!(s.controllers.len(), 1);
    // A serialized scenario writes only the sections it runs, and loads back equal.
    let back = serde_json::to_value(&s).unwrap();
    assert_eq!(back["controllers"].as_object().unwrap().len(), 1);
    assert_eq!(
        Scenario::parse("y.json", &back.to_string(), &builtin()).unwrap(),
        s
    );
}

#[test]
fn what_no_registered_family_knows_is_refused_with_the_known_names() {
    let mut d = doc();
    d["controllers"]["bogus"] = json!({});
    let (path, msg) = error(&d);
    assert_eq!(path, ".controllers.bogus");
    assert!(
        msg.contains("(machine_api, mco, kcp, go), not `bogus`"),
        "{msg}"
    );

    let mut d = doc();
    d["controllers"] = json!({});
    assert_eq!(error(&d).0, ".controllers");

    let mut d = doc();
    d["workload"][0]["action"] = json!({"scale_everything": {}});
    let (path, msg) = error(&d);
    assert_eq!(path, ".workload[0].action");
    assert!(
        msg.contains("scale_machine_set (machine_api)") && msg.contains("not `scale_everything`"),
        "{msg}"
    );

    let mut d = doc();
    d["workload"][0]["action"] = json!({"scale_kcp": {"replicas": 2}});
    let (path, msg) = error(&d);
    assert_eq!(path, ".workload[0].action.scale_kcp");
    assert!(msg.contains("controllers.kcp"), "{msg}");

    let mut d = doc();
    d["workload"][0]["action"] =
        json!({"scale_machine_set": {"machine_set": "nope", "replicas": 2}});
    assert_eq!(
        error(&d).0,
        ".workload[0].action.scale_machine_set.machine_set"
    );

    let mut d = doc();
    d["workload"][0]["action"] =
        json!({"scale_machine_set": {"machine_set": "x"}, "scale_kcp": {}});
    let (path, msg) = error(&d);
    assert_eq!(path, ".workload[0].action");
    assert!(msg.contains("one key"), "{msg}");

    let mut d = doc();
    d["controllers"]["machine_api"]["lease"] =
        json!({"lease_duration_ms": 10, "renew_deadline_ms": 20, "retry_period_ms": 1});
    assert_eq!(error(&d).0, ".controllers.machine_api.lease");

    let mut d = doc();
    d["invariants"] = json!(["no_such_invariant"]);
    let (path, msg) = error(&d);
    assert_eq!(path, ".invariants[0]");
    assert!(msg.contains("no_leaked_instances"), "{msg}");
}
