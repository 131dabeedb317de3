//! Object names the real API server refuses (issue 31): a scenario that declares one,
//! in a family's section or in a workload action's params, is refused at load with
//! exit 2, naming the file, the JSON path of the field and what its kind expects, the
//! name shown bounded; a valid name still runs. The simulated API server's own 422 is
//! crates/world/tests/apiserver_names.rs's.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

mod common;
use common::{BIN, root, scratch};

/// The names the real server refuses for a subdomain kind, each with a tag for its file.
fn bad_names() -> Vec<(&'static str, String)> {
    vec![
        ("space", "my set".into()),
        ("slash", "a/b".into()),
        ("dotdot", "..".into()),
        ("upper", "Worker".into()),
        ("long", "a".repeat(254)),
        ("huge", "x".repeat(1 << 20)),
    ]
}

fn shipped(name: &str) -> Value {
    let path = root().join("scenarios").join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Run `reconsim run <file>` in `dir`: (exit code, stderr).
fn run(dir: &Path, file: &str) -> (Option<i32>, String) {
    let out = Command::new(BIN)
        .args(["run", file])
        .current_dir(dir)
        .output()
        .expect("the binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// `scenario` with `set` applied is refused at `path`, expecting `expected`, for every
/// bad name; the message stays short whatever the name's size.
fn refused_everywhere(
    tag: &str,
    scenario: &Value,
    set: impl Fn(&mut Value, &str),
    path: &str,
    expected: &str,
) {
    let dir = scratch(tag);
    for (what, name) in bad_names() {
        let mut s = scenario.clone();
        set(&mut s, &name);
        let file = format!("{what}.json");
        std::fs::write(dir.join(&file), serde_json::to_string(&s).unwrap()).unwrap();
        let (code, stderr) = run(&dir, &file);
        assert_eq!(code, Some(2), "{what}: {stderr}");
        let head = format!("{file}: at {path}: expected {expected}");
        assert!(
            stderr.contains(&head),
            "{what}: expected `{head}` in {stderr}"
        );
        let shown = format!("not \"{}", &name[..name.len().min(20)]);
        assert!(
            stderr.contains(&shown),
            "{what}: expected `{shown}` in {stderr}"
        );
        assert!(
            stderr.len() < 1_000,
            "{what}: {} bytes of error",
            stderr.len()
        );
    }
}

#[test]
fn a_bad_name_in_a_family_section_is_refused_at_its_field() {
    let base = shipped("machineapi-no-leader-election");
    refused_everywhere(
        "object-names-section",
        &base,
        |s, name| s["controllers"]["machine_api"]["machine_sets"][0]["name"] = name.into(),
        ".controllers.machine_api.machine_sets[0].name",
        "a MachineSet name (DNS-1123 subdomain",
    );
    // A machine of the MCO family is a Node: its name too.
    refused_everywhere(
        "object-names-node",
        &shipped("mco-bootstrap-mismatch"),
        |s, name| s["controllers"]["mco"]["machines"][0]["names"][1] = name.into(),
        ".controllers.mco.machines[0].names[1]",
        "a Node name (DNS-1123 subdomain",
    );
}

#[test]
fn a_bad_name_in_a_workload_action_is_refused_at_its_param() {
    let base = shipped("mco-bootstrap-mismatch");
    let last = base["workload"].as_array().unwrap().len() - 1;
    assert!(base["workload"][last]["action"]["create_machine_config"].is_object());
    refused_everywhere(
        "object-names-action",
        &base,
        |s, name| s["workload"][last]["action"]["create_machine_config"]["name"] = name.into(),
        &format!(".workload[{last}].action.create_machine_config.name"),
        "a MachineConfig name (DNS-1123 subdomain",
    );
    // An action that names an object the section declares: refused bounded too.
    let base = shipped("machineapi-no-leader-election");
    let dir = scratch("object-names-scale");
    let mut s = base.clone();
    s["workload"][0]["action"]["scale_machine_set"]["machine_set"] = "y".repeat(1 << 20).into();
    std::fs::write(dir.join("s.json"), serde_json::to_string(&s).unwrap()).unwrap();
    let (code, stderr) = run(&dir, "s.json");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("s.json: at .workload[0].action.scale_machine_set.machine_set: "),
        "{stderr}"
    );
    assert!(stderr.len() < 1_000, "{} bytes of error", stderr.len());
}

#[test]
fn valid_names_still_run() {
    let dir = scratch("object-names-valid");
    // At the limits: a 253-byte subdomain of dot-separated labels for the MachineSet
    // (its Machines' names take 6 more: keep room), a dotted one for the config.
    let mut s = shipped("machineapi-no-leader-election");
    let name = "web.example-1";
    s["controllers"]["machine_api"]["machine_sets"][0]["name"] = name.into();
    s["workload"][0]["action"]["scale_machine_set"]["machine_set"] = name.into();
    std::fs::write(dir.join("ma.json"), serde_json::to_string(&s).unwrap()).unwrap();
    let (code, stderr) = run(&dir, "ma.json");
    assert!(matches!(code, Some(0 | 1)), "{code:?}: {stderr}");
    let mut s = shipped("mco-bootstrap-mismatch");
    let last = s["workload"].as_array().unwrap().len() - 1;
    let long = format!("{}.b", "a".repeat(251));
    s["workload"][last]["action"]["create_machine_config"]["name"] = long.into();
    std::fs::write(dir.join("mco.json"), serde_json::to_string(&s).unwrap()).unwrap();
    let (code, stderr) = run(&dir, "mco.json");
    assert!(matches!(code, Some(0 | 1)), "{code:?}: {stderr}");
}
