//! Server-side apply and strategic merge patches from kube-rs code (crates/kube/src/
//! managed.rs, strategic.rs; docs/semantics.md 4.9): field ownership decides what an apply may change,
//! what it removes when a config stops naming a field, and who may take a field over.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use reconsim_kube::{Kinds, Program};
use reconsim_world::apiserver::ApiServerConfig;
use serde_json::json;
use std::sync::Arc;

mod common;

fn outcome<T>(r: Result<T, kube::Error>, show: impl Fn(T) -> String) -> String {
    match r {
        Ok(v) => show(v),
        Err(kube::Error::Api(s)) => format!("{} {}: {}", s.code, s.reason, s.message),
        Err(e) => format!("error {e}"),
    }
}

fn data(cm: ConfigMap) -> String {
    format!("{:?}", cm.data.unwrap_or_default())
}

async fn story(client: kube::Client) -> Vec<String> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let leases: Api<Lease> = Api::namespaced(client, "default");
    let mut out = Vec::new();
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("app".into());
    let created = cms.create(&PostParams::default(), &cm).await;
    out.push(outcome(created, |_| "created".into()));
    let config = |pairs: serde_json::Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"}, "data": pairs});
    let apply = |who: &str, force: bool| {
        let mut p = PatchParams::apply(who);
        p.force = force;
        p
    };
    // One manager's apply of the ConfigMap's data: what the server answers.
    let applied = async |who: &str, force: bool, pairs: serde_json::Value| {
        let r = cms
            .patch("app", &apply(who, force), &Patch::Apply(config(pairs)))
            .await;
        outcome(r, data)
    };
    // alice applies a and b; bob applies a different a: a conflict with alice.
    out.push(applied("alice", false, json!({"a": "1", "b": "2"})).await);
    out.push(applied("bob", false, json!({"a": "9"})).await);
    // bob applies the value alice has: shared, no conflict; then forces b.
    out.push(applied("bob", false, json!({"a": "1"})).await);
    out.push(applied("bob", true, json!({"a": "1", "b": "7"})).await);
    // alice stops applying a and b: a stays (bob shares it), b is bob's.
    out.push(applied("alice", false, json!({"c": "3"})).await);
    // bob stops applying a: no one owns it now, so it goes.
    out.push(applied("bob", false, json!({"b": "7"})).await);
    // A merge patch (an update by kube's default manager, "": kube-client sends no
    // User-Agent) takes c from alice; alice's next apply of another c conflicts with it.
    let r = cms
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"c": "4"}})),
        )
        .await;
    out.push(outcome(r, data));
    out.push(applied("alice", false, json!({"c": "5"})).await);
    // A strategic merge patch of a built-in kind's map: null removes.
    let r = cms
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Strategic(json!({"data": {"b": null, "d": "6"}})),
        )
        .await;
    out.push(outcome(r, data));
    // A strategic merge of a list: finalizers merge as a union (ObjectMeta's
    // `patchStrategy:"merge"`), the patch's new item first; a delete list removes one.
    for patch in [
        json!({"metadata": {"finalizers": ["x"]}}),
        json!({"metadata": {"finalizers": ["y"]}}),
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}),
    ] {
        let r = cms
            .patch("app", &PatchParams::default(), &Patch::Strategic(patch))
            .await;
        out.push(outcome(r, |cm| {
            format!(
                "finalizers {:?}",
                cm.metadata.finalizers.unwrap_or_default()
            )
        }));
    }
    // kube-lease-manager's lock: an apply of the holder, a conflict for the next.
    let mut lease = Lease::default();
    lease.metadata.name = Some("lock".into());
    let _ = leases.create(&PostParams::default(), &lease).await;
    let hold = |who: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "spec": {"holderIdentity": who, "leaseDurationSeconds": 10}})
    };
    let holder = |l: Lease| format!("holder {:?}", l.spec.and_then(|s| s.holder_identity));
    let r = leases
        .patch("lock", &apply("m-a", false), &Patch::Apply(hold("a")))
        .await;
    out.push(outcome(r, holder));
    let r = leases
        .patch("lock", &apply("m-b", false), &Patch::Apply(hold("b")))
        .await;
    out.push(outcome(r, holder));
    out
}

fn run(seed: u64) -> Vec<String> {
    let program: Program = Arc::new(|client| Box::pin(async { story(client).await.join("\n") }));
    common::result_lines(
        seed,
        ApiServerConfig::default(),
        Kinds::new().core::<ConfigMap>().core::<Lease>(),
        program,
    )
}

#[test]
fn field_ownership_decides_what_an_apply_changes_removes_and_conflicts_on() {
    let lines = run(1);
    let expected = [
        "created",
        r#"{"a": "1", "b": "2"}"#,
        r#"409 Conflict: Apply failed with 1 conflict: conflict with "alice": .data.a"#,
        r#"{"a": "1", "b": "2"}"#,
        r#"{"a": "1", "b": "7"}"#,
        r#"{"a": "1", "b": "7", "c": "3"}"#,
        r#"{"b": "7", "c": "3"}"#,
        r#"{"b": "7", "c": "4"}"#,
        r#"409 Conflict: Apply failed with 1 conflict: conflict with "" using v1: .data.c"#,
        r#"{"c": "4", "d": "6"}"#,
        r#"finalizers ["x"]"#,
        r#"finalizers ["y", "x"]"#,
        r#"finalizers ["y"]"#,
        r#"holder Some("a")"#,
        // The duration is the same value: shared, not a conflict.
        r#"409 Conflict: Apply failed with 1 conflict: conflict with "m-a": .spec.holderIdentity"#,
    ];
    assert_eq!(lines.join("\n"), expected.join("\n"));
}

/// An apply of an object that does not exist creates it, its manager owning what its
/// config names (apiserver `patch.go`, an apply's `createOnUpdate`); an apply of
/// `/status` does not.
async fn apply_creates(client: kube::Client) -> Vec<String> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client, "default");
    let config = |who: &str, v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fresh"}, "data": {"k": v, "by": who}});
    let mut out = Vec::new();
    let r = cms
        .patch(
            "fresh",
            &PatchParams::apply("alice"),
            &Patch::Apply(config("alice", "1")),
        )
        .await;
    out.push(outcome(r, data));
    out.push(outcome(cms.get("fresh").await, data));
    // alice owns what she created: bob's different value conflicts.
    let r = cms
        .patch(
            "fresh",
            &PatchParams::apply("bob"),
            &Patch::Apply(config("bob", "2")),
        )
        .await;
    out.push(outcome(r, data));
    let status = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "absent"}, "status": {"phase": "Running"}});
    let r = pods
        .patch_status(
            "absent",
            &PatchParams::apply("alice"),
            &Patch::Apply(status),
        )
        .await;
    out.push(outcome(r, |_| "created".into()));
    out
}

#[test]
fn an_apply_of_a_missing_object_creates_it() {
    let program: Program =
        Arc::new(|client| Box::pin(async move { apply_creates(client).await.join("\n") }));
    let kinds = Kinds::new();
    let lines = common::result_lines(2, ApiServerConfig::default(), kinds, program);
    assert_eq!(
        lines,
        [
            r#"{"by": "alice", "k": "1"}"#,
            r#"{"by": "alice", "k": "1"}"#,
            "409 Conflict: Apply failed with 2 conflicts: conflict with \"alice\": .data.by",
            "conflict with \"alice\": .data.k",
            "404 NotFound: not found",
        ]
    );
}
