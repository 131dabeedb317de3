//! A namespace's termination, as a kube-rs program meets it (docs/semantics.md 4.13):
//! a deleted namespace stays `Terminating` while the namespace controller deletes its
//! content, refuses new content with 403, waits for its objects' finalizers, and goes;
//! then a create into it is 404.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use reconsim_kube::{Kinds, Program};
use reconsim_world::apiserver::ApiServerConfig;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

mod common;

fn config_map(name: &str, finalizer: Option<&str>) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.finalizers = finalizer.map(|f| vec![f.to_string()]);
    cm
}

fn outcome<T>(r: Result<T, kube::Error>, show: impl Fn(T) -> String) -> String {
    match r {
        Ok(v) => show(v),
        Err(kube::Error::Api(s)) => format!("{} {}: {}", s.code, s.reason, s.message),
        Err(e) => format!("error {e}"),
    }
}

async fn story(client: kube::Client) -> Vec<String> {
    let pp = PostParams::default();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    let mut out = Vec::new();
    let mut ns = Namespace::default();
    ns.metadata.name = Some("team".into());
    let phase = |n: Namespace| {
        format!(
            "{:?} {:?}",
            n.status.and_then(|s| s.phase),
            n.spec.and_then(|s| s.finalizers)
        )
    };
    out.push(outcome(namespaces.create(&pp, &ns).await, phase));
    for (name, finalizer) in [("a", None), ("b", None), ("held", Some("example.dev/keep"))] {
        let created = cms.create(&pp, &config_map(name, finalizer)).await;
        out.push(outcome(created, |_| format!("created {name}")));
    }
    // The delete answers the namespace, terminating.
    let deleted = namespaces.delete("team", &DeleteParams::default()).await;
    out.push(outcome(deleted, |e| match e.left() {
        Some(n) => phase(n),
        None => "gone at once".into(),
    }));
    // No new content meanwhile, whatever its name.
    out.push(outcome(
        cms.create(&pp, &config_map("late", None)).await,
        |_| "created late".into(),
    ));
    // The namespace controller takes it up 5 s later: the ConfigMaps without a
    // finalizer go, the held one is deleting; the namespace waits for it.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let names = |l: kube::core::ObjectList<ConfigMap>| {
        l.items
            .iter()
            .map(|c| {
                format!(
                    "{}{}",
                    c.metadata.name.clone().unwrap_or_default(),
                    if c.metadata.deletion_timestamp.is_some() {
                        " (deleting)"
                    } else {
                        ""
                    }
                )
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    out.push(outcome(cms.list(&Default::default()).await, names));
    out.push(outcome(namespaces.get("team").await, phase));
    // Its finalizer off, the last ConfigMap goes, and the namespace after it.
    let off = json!({"metadata": {"finalizers": null}});
    let patched = cms
        .patch("held", &PatchParams::default(), &Patch::Merge(&off))
        .await;
    out.push(outcome(patched, |_| "finalizer off".into()));
    tokio::time::sleep(Duration::from_secs(5)).await;
    out.push(outcome(namespaces.get("team").await, phase));
    out.push(outcome(
        cms.create(&pp, &config_map("after", None)).await,
        |_| "created after".into(),
    ));
    out
}

#[test]
fn a_deleted_namespace_terminates_its_content_refuses_new_content_and_goes() {
    let program: Program = Arc::new(|client| Box::pin(async { story(client).await.join("\n") }));
    let lines = common::result_lines(3, ApiServerConfig::default(), Kinds::new(), program);
    let expected = [
        r#"Some("Active") Some(["kubernetes"])"#,
        "created a",
        "created b",
        "created held",
        r#"Some("Terminating") Some(["kubernetes"])"#,
        r#"403 Forbidden: configmaps "late" is forbidden: unable to create new content in namespace team because it is being terminated"#,
        "held (deleting)",
        r#"Some("Terminating") Some(["kubernetes"])"#,
        "finalizer off",
        r#"404 NotFound: not found"#,
        r#"404 NotFound: namespaces "team" not found"#,
    ];
    assert_eq!(lines.join("\n"), expected.join("\n"));
}
