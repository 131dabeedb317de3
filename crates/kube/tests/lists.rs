//! Lists by their list type, from kube-rs code (crates/kube/src/list_types.rs,
//! managed.rs, strategic.rs; docs/semantics.md 4.9; issue 59's D3 and D4, fidelity
//! review 3's probes P-B, P-C and P-D): server-side apply merges a built-in kind's
//! associative lists item by item (containers by name, ownerReferences by uid, a CRD's
//! `x-kubernetes-list-type: map` by its keys, a `set` by value), so two managers' items
//! live side by side without a conflict; a strategic merge patch merges every
//! built-in kind's lists by their Go types' merge keys.

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use reconsim_kube::{Kinds, Program};
use reconsim_world::apiserver::ApiServerConfig;
use serde_json::{Value, json};
use std::sync::Arc;

mod common;

fn outcome<T>(r: Result<T, kube::Error>, show: impl Fn(T) -> String) -> String {
    match r {
        Ok(v) => show(v),
        Err(kube::Error::Api(s)) => format!("{} {}: {}", s.code, s.reason, s.message),
        Err(e) => format!("error {e}"),
    }
}

fn apply(who: &str, force: bool) -> PatchParams {
    let mut p = PatchParams::apply(who);
    p.force = force;
    p
}

/// Run `story` in a world serving `kinds`: its lines.
fn run<F>(kinds: Kinds, story: fn(kube::Client) -> F) -> Vec<String>
where
    F: std::future::Future<Output = Vec<String>> + Send + 'static,
{
    let program: Program =
        Arc::new(move |client| Box::pin(async move { story(client).await.join("\n") }));
    common::result_lines(1, ApiServerConfig::default(), kinds, program)
}

fn containers(d: Deployment) -> String {
    let names: Vec<String> = d
        .spec
        .and_then(|s| s.template.spec)
        .map(|s| {
            s.containers
                .into_iter()
                .map(|c| format!("{}={}", c.name, c.image.unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    format!("containers {names:?}")
}

/// P-B: two managers' containers in one Deployment.
async fn two_managers_containers(client: kube::Client) -> Vec<String> {
    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    let config = |containers: Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d2"},
               "spec": {"template": {"spec": {"containers": containers}}}})
    };
    let full = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d2"},
        "spec": {"selector": {"matchLabels": {"app": "d2"}},
                 "template": {"metadata": {"labels": {"app": "d2"}},
                              "spec": {"containers": [{"name": "a", "image": "a:1"}]}}}});
    let mut out = Vec::new();
    let mut step = async |who: &str, force: bool, config: Value| {
        let r = deployments
            .patch("d2", &apply(who, force), &Patch::Apply(config))
            .await;
        out.push(outcome(r, containers));
    };
    step("mgr-a", false, full.clone()).await;
    // mgr-b's own container: no conflict, mgr-a's stays.
    step(
        "mgr-b",
        false,
        config(json!([{"name": "b", "image": "b:1"}])),
    )
    .await;
    // Forced, the same: nothing of mgr-a's is taken, nothing lost.
    step(
        "mgr-b",
        true,
        config(json!([{"name": "b", "image": "b:2"}])),
    )
    .await;
    // mgr-b's image for mgr-a's container: a conflict on that field alone.
    step(
        "mgr-b",
        false,
        config(json!([{"name": "b", "image": "b:2"}, {"name": "a", "image": "x"}])),
    )
    .await;
    // mgr-b applies a's image as it is: shared; then stops naming b: b goes, a stays.
    step(
        "mgr-b",
        false,
        config(json!([{"name": "b", "image": "b:2"}, {"name": "a", "image": "a:1"}])),
    )
    .await;
    step(
        "mgr-b",
        false,
        config(json!([{"name": "a", "image": "a:1"}])),
    )
    .await;
    // mgr-a stops naming a: mgr-b still applies it, so it stays; then mgr-b stops too.
    let mut without_a = full.clone();
    without_a["spec"]["template"]["spec"]["containers"] = json!([{"name": "c", "image": "c:1"}]);
    step("mgr-a", false, without_a).await;
    step("mgr-b", false, config(json!([]))).await;
    out
}

#[test]
fn two_managers_apply_their_own_containers_without_a_conflict() {
    let lines = run(Kinds::new(), two_managers_containers);
    assert_eq!(
        lines,
        [
            r#"containers ["a=a:1"]"#,
            r#"containers ["a=a:1", "b=b:1"]"#,
            r#"containers ["a=a:1", "b=b:2"]"#,
            r#"409 Conflict: Apply failed with 1 conflict: conflict with "mgr-a": .spec.template.spec.containers[name="a"].image"#,
            // The items both have, in the config's order (typed/merge.go).
            r#"containers ["b=b:2", "a=a:1"]"#,
            r#"containers ["a=a:1"]"#,
            r#"containers ["a=a:1", "c=c:1"]"#,
            r#"containers ["c=c:1"]"#,
        ]
    );
}

/// P-C: two controllers' owner references on one child.
async fn two_owners(client: kube::Client) -> Vec<String> {
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut uids = Vec::new();
    for name in ["owner1", "owner2"] {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        let made = cms.create(&PostParams::default(), &cm).await.expect("made");
        uids.push(made.metadata.uid.unwrap_or_default());
    }
    let owners = |cm: ConfigMap| {
        let names: Vec<String> = cm
            .metadata
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.name)
            .collect();
        format!("owners {names:?}")
    };
    let child = |name: &str, owner: Option<usize>| {
        let refs: Vec<Value> = owner
            .map(|i| {
                json!({"apiVersion": "v1", "kind": "ConfigMap", "name": format!("owner{}", i + 1),
                       "uid": uids[i]})
            })
            .into_iter()
            .collect();
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "ownerReferences": refs}})
    };
    let mut out = Vec::new();
    for (name, force) in [("child", false), ("forced", true)] {
        for (who, owner) in [("ctl-1", 0), ("ctl-2", 1)] {
            let r = cms
                .patch(
                    name,
                    &apply(who, force),
                    &Patch::Apply(child(name, Some(owner))),
                )
                .await;
            out.push(outcome(r, owners));
        }
    }
    // ctl-1 no longer names its reference: only its own goes.
    let r = cms
        .patch(
            "child",
            &apply("ctl-1", false),
            &Patch::Apply(child("child", None)),
        )
        .await;
    out.push(outcome(r, owners));
    out
}

#[test]
fn two_controllers_each_keep_their_owner_reference_with_or_without_force() {
    let lines = run(Kinds::new().core::<ConfigMap>(), two_owners);
    assert_eq!(
        lines,
        [
            r#"owners ["owner1"]"#,
            r#"owners ["owner1", "owner2"]"#,
            r#"owners ["owner1"]"#,
            r#"owners ["owner1", "owner2"]"#,
            r#"owners ["owner2"]"#,
        ]
    );
}

/// P-D: strategic merge patches of kinds beyond Pod and Deployment.
async fn strategic_elsewhere(client: kube::Client) -> Vec<String> {
    let sts: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let svcs: Api<Service> = Api::namespaced(client, "default");
    let mut out = Vec::new();
    let set: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                 "template": {"metadata": {"labels": {"app": "db"}},
                              "spec": {"containers": [
                                  {"name": "app", "image": "app:1"},
                                  {"name": "sidecar", "image": "side:1"}]}}}
    }))
    .expect("a StatefulSet");
    sts.create(&PostParams::default(), &set)
        .await
        .expect("made");
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}}});
    let r = sts
        .patch("db", &PatchParams::default(), &Patch::Strategic(patch))
        .await;
    out.push(outcome(r, |s| {
        let names: Vec<String> = s
            .spec
            .and_then(|s| s.template.spec)
            .map(|p| {
                p.containers
                    .into_iter()
                    .map(|c| format!("{}={}", c.name, c.image.unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default();
        format!("containers {names:?}")
    }));
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]}
    }))
    .expect("a Service");
    svcs.create(&PostParams::default(), &svc)
        .await
        .expect("made");
    let patch = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}]}});
    let r = svcs
        .patch("web", &PatchParams::default(), &Patch::Strategic(patch))
        .await;
    out.push(outcome(r, |s| {
        let ports: Vec<String> = s
            .spec
            .and_then(|s| s.ports)
            .unwrap_or_default()
            .into_iter()
            .map(|p| {
                format!(
                    "{}->{}",
                    p.port,
                    p.target_port.map(|t| format!("{t:?}")).unwrap_or_default()
                )
            })
            .collect();
        format!("ports {ports:?}")
    }));
    out
}

#[test]
fn a_strategic_merge_patch_merges_every_built_in_kinds_keyed_lists() {
    let lines = run(
        Kinds::new().core::<StatefulSet>().core::<Service>(),
        strategic_elsewhere,
    );
    assert_eq!(
        lines,
        [
            r#"containers ["app=app:2", "sidecar=side:1"]"#,
            r#"ports ["80->Int(8080)", "443->"]"#,
        ]
    );
}

fn widgets_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.lists.reconsim.dev"},
        "spec": {
            "group": "lists.reconsim.dev", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "tags": {"type": "array", "x-kubernetes-list-type": "set",
                                 "items": {"type": "string"}},
                        "plain": {"type": "array", "items": {"type": "string"}}}},
                    "status": {"type": "object", "properties": {
                        "conditions": {"type": "array",
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["type"],
                            "items": {"type": "object", "required": ["type"], "properties": {
                                "type": {"type": "string"},
                                "status": {"type": "string"}}}}}}}}}
            }]
        }
    })
}

/// A CRD's own list types: conditions a map by type, tags a set, plain atomic.
async fn crd_lists(client: kube::Client) -> Vec<String> {
    let resource = ApiResource {
        group: "lists.reconsim.dev".into(),
        version: "v1".into(),
        api_version: "lists.reconsim.dev/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let widgets: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
    let config = |body: Value| {
        let mut c = json!({"apiVersion": "lists.reconsim.dev/v1", "kind": "Widget",
                           "metadata": {"name": "w"}});
        if let (Value::Object(c), Value::Object(b)) = (&mut c, body) {
            c.extend(b);
        }
        c
    };
    let show = |part: &'static str| move |w: DynamicObject| format!("{part} {}", w.data[part]);
    let mut out = Vec::new();
    for (who, tags, plain) in [("a", ["x"], ["p"]), ("b", ["y"], ["q"])] {
        let body = json!({"spec": {"tags": tags, "plain": plain}});
        let r = widgets
            .patch("w", &apply(who, false), &Patch::Apply(config(body)))
            .await;
        out.push(outcome(r, show("spec")));
    }
    // b forces its plain list (atomic: a's value goes), then stops naming its tag.
    let r = widgets
        .patch(
            "w",
            &apply("b", true),
            &Patch::Apply(config(json!({"spec": {"tags": ["y"], "plain": ["q"]}}))),
        )
        .await;
    out.push(outcome(r, show("spec")));
    let r = widgets
        .patch(
            "w",
            &apply("b", false),
            &Patch::Apply(config(json!({"spec": {"plain": ["q"]}}))),
        )
        .await;
    out.push(outcome(r, show("spec")));
    // Two controllers' conditions in the status: each its own type.
    for (who, kind) in [("ctl-ready", "Ready"), ("ctl-synced", "Synced")] {
        let body = json!({"status": {"conditions": [{"type": kind, "status": "True"}]}});
        let r = widgets
            .patch_status("w", &apply(who, false), &Patch::Apply(config(body)))
            .await;
        out.push(outcome(r, show("status")));
    }
    // Another's condition: a conflict on its status; an item without its key: refused.
    for body in [
        json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
        json!({"status": {"conditions": [{"status": "False"}]}}),
    ] {
        let r = widgets
            .patch_status(
                "w",
                &apply("ctl-synced", false),
                &Patch::Apply(config(body)),
            )
            .await;
        out.push(outcome(r, show("status")));
    }
    // ctl-ready stops naming Ready: only Ready goes.
    let r = widgets
        .patch_status(
            "w",
            &apply("ctl-ready", false),
            &Patch::Apply(config(json!({"status": {"conditions": []}}))),
        )
        .await;
    out.push(outcome(r, show("status")));
    out
}

#[test]
fn a_crds_list_types_decide_how_two_managers_applies_merge() {
    let kinds = Kinds::new()
        .crd_manifest(&widgets_crd())
        .expect("the CRD is served");
    let lines = run(kinds, crd_lists);
    assert_eq!(
        lines,
        [
            r#"spec {"plain":["p"],"tags":["x"]}"#,
            r#"409 Conflict: Apply failed with 1 conflict: conflict with "a": .spec.plain"#,
            r#"spec {"plain":["q"],"tags":["x","y"]}"#,
            r#"spec {"plain":["q"],"tags":["x"]}"#,
            r#"status {"conditions":[{"status":"True","type":"Ready"}]}"#,
            r#"status {"conditions":[{"status":"True","type":"Ready"},{"status":"True","type":"Synced"}]}"#,
            r#"409 Conflict: Apply failed with 1 conflict: conflict with "ctl-ready": .status.conditions[type="Ready"].status"#,
            r#"422 Invalid: failed to create typed patch object (default/w; lists.reconsim.dev/v1, Kind=Widget): .status.conditions: element 0: associative list with keys has an element that omits all key fields ["type"] (and doesn't have default values for any key fields)"#,
            r#"status {"conditions":[{"status":"True","type":"Synced"}]}"#,
        ]
    );
}
