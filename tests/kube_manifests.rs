//! A kube-rs program's `custom` entry reads manifests (issue 28): its `objects` are in
//! the API server at t = 0 and its workload actions `create`, `patch` and `delete` the
//! objects they name, as kubectl would, with no hook of the user's; what the file gets
//! wrong is refused with the field's path.

mod common;

use common::{HOLDS, Holds};
use k8s_openapi::api::core::v1::ConfigMap;
use reconsim::scenario::Scenario;
use reconsim::scenario::build::World;
use reconsim::scenario::extension::{Custom, Extensions};
use reconsim::scenario::faults::generate;
use reconsim::scenario::runner::run_world;
use reconsim::sim::TraceMode;
use reconsim::world::object::{Lease, Object, ObjectKey, ObjectMeta};
use reconsim_kube::Kinds;
use reconsim_kube::kinds::kind_of;
use serde_json::{Value, json};
use std::collections::BTreeMap;

const IDLE: &str = "idle";
const HOOKED: &str = "hooked";

fn extensions() -> Extensions {
    Extensions::new()
        // A program that never returns: the entry is here for its manifests.
        .controller(reconsim_kube::custom(IDLE, Kinds::new(), |_: &(), _, _| {
            std::future::pending::<()>()
        }))
        // A reconciler entry with no manifests, only an objects hook.
        .controller(
            Custom::reconcilers(HOOKED, |_: &()| Vec::new()).objects(|_| {
                Ok(vec![Object::new(
                    ObjectMeta::named("default", "l"),
                    Lease::default(),
                )])
            }),
        )
        .invariant(HOLDS, || Box::new(Holds))
        .host(reconsim_kube::intercept::host)
}

fn config_map(name: &str, data: Value) -> Value {
    json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name }, "data": data })
}

/// A scenario of the `idle` entry with these `objects` and workload actions.
fn doc(objects: Value, actions: Value) -> Value {
    let workload: Vec<Value> = actions
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let mut custom = json!({ "controller": IDLE });
            custom
                .as_object_mut()
                .unwrap()
                .extend(a.as_object().unwrap().clone());
            json!({ "at_ms": 1000 * (i as u64 + 1), "action": { "custom": custom } })
        })
        .collect();
    json!({
        "name": "kube-manifests",
        "description": "manifests as objects and actions",
        "expect": "clean",
        "seeds": 1,
        "duration_ms": 10000,
        "net": { "latency_ms": [1, 10] },
        "topology": { "control_plane_nodes": ["master-0"], "worker_nodes": [] },
        "controllers": { "custom": [
            { "name": IDLE, "node": "master-0", "objects": objects }
        ] },
        "invariants": [HOLDS],
        "workload": workload,
    })
}

fn load(doc: &Value) -> Result<Scenario, String> {
    let families = reconsim::families::builtin().with(extensions());
    Scenario::from_value("kube_manifests", "", doc, &families).map_err(|e| e.to_string())
}

fn data(world: &World, name: &str) -> Option<BTreeMap<String, String>> {
    let key = ObjectKey::new(kind_of::<ConfigMap>(), "default", name);
    let cm: ConfigMap = reconsim_kube::wire::decode(world.api().get(&key)?)?;
    Some(cm.data.unwrap_or_default())
}

#[test]
fn objects_are_seeded_and_actions_create_patch_and_delete_what_their_manifests_name() {
    let s = load(&doc(
        json!([
            config_map("a", json!({ "x": "1" })),
            config_map("b", json!({}))
        ]),
        json!([
            { "patch": config_map("a", json!({ "y": "2" })) },
            { "delete": config_map("b", json!(null)) },
            { "create": config_map("c", json!({ "z": "3" })) },
            { "patch": { "apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": { "name": "c", "labels": { "l": "v" } } } },
        ]),
    ))
    .expect("loads");
    let (outcome, world) = run_world(&s, 0, generate(&s, 0), TraceMode::Hash);
    assert_eq!(outcome.violation, None);
    let map = |kv: &[(&str, &str)]| {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>()
    };
    // A merge patch merges key by key.
    assert_eq!(data(&world, "a"), Some(map(&[("x", "1"), ("y", "2")])));
    assert_eq!(data(&world, "b"), None);
    assert_eq!(data(&world, "c"), Some(map(&[("z", "3")])));
    let c = world
        .api()
        .get(&ObjectKey::new(kind_of::<ConfigMap>(), "default", "c"))
        .expect("c");
    assert_eq!(c.meta.labels.get("l").map(String::as_str), Some("v"));
}

#[test]
fn what_a_manifest_gets_wrong_is_refused_with_its_path() {
    let refused = |objects: Value, actions: Value| load(&doc(objects, actions)).unwrap_err();
    let e = refused(
        json!([{ "apiVersion": "v1", "kind": "Gadget", "metadata": { "name": "g" } }]),
        json!([]),
    );
    assert!(
        e.contains(".controllers.custom[0].objects[0].kind") && e.contains("v1 Gadget"),
        "{e}"
    );
    let e = refused(
        json!([{ "apiVersion": "v1", "kind": "ConfigMap" }]),
        json!([]),
    );
    assert!(
        e.contains(".controllers.custom[0].objects[0].metadata.name"),
        "{e}"
    );
    let e = refused(
        json!([config_map("a", json!({})), config_map("a", json!({}))]),
        json!([]),
    );
    assert!(
        e.contains(".controllers.custom[0].objects[1].metadata.name") && e.contains("twice"),
        "{e}"
    );
    let mut stale = config_map("a", json!({}));
    stale["metadata"]["resourceVersion"] = json!("7");
    let e = refused(json!([stale]), json!([]));
    assert!(
        e.contains(".controllers.custom[0].objects[0]") && e.contains("resourceVersion"),
        "{e}"
    );
    let e = refused(json!([config_map("a", json!({ "k": 1 }))]), json!([]));
    assert!(e.contains(".controllers.custom[0].objects[0]"), "{e}");
    let e = refused(
        json!([]),
        json!([{ "patch": config_map("a", json!({})), "delete": config_map("a", json!({})) }]),
    );
    assert!(
        e.contains(".workload[0].action.custom.delete") && e.contains("one of"),
        "{e}"
    );
    let e = refused(
        json!([]),
        json!([{ "patch": config_map("a", json!({})), "params": 1 }]),
    );
    assert!(
        e.contains(".workload[0].action.custom.patch") && e.contains("not both"),
        "{e}"
    );
    let e = refused(
        json!([]),
        json!([{ "delete": { "apiVersion": "v1", "kind": "Node", "metadata": { "name": "n", "namespace": "x" } } }]),
    );
    assert!(
        e.contains(".workload[0].action.custom.delete.metadata.namespace")
            && e.contains("cluster-scoped"),
        "{e}"
    );
}

#[test]
fn an_entry_whose_controller_reads_no_manifests_says_how_to_seed_objects() {
    let mut d = doc(json!([]), json!([]));
    d["controllers"]["custom"] = json!([
        { "name": HOOKED, "node": "master-0", "objects": [config_map("a", json!({}))] }
    ]);
    let e = load(&d).unwrap_err();
    assert!(
        e.contains(".controllers.custom[0].objects") && e.contains("Custom::manifests"),
        "{e}"
    );
}
