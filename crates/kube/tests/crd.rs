//! A `#[derive(CustomResource)]` kind through the simulated API server, as kube's typed
//! `Api<K>` speaks to it: its group path, its status subresource (a write of the object
//! leaves status alone and bumps generation on a spec change; a write of `/status`
//! touches status alone), a JSON patch and its failing `test`, owner references and the
//! garbage collector (a delete in the foreground, a stale resourceVersion precondition),
//! the clear answer for a kind not served, and the writes the real server refuses: a custom resource's PUT with no
//! resourceVersion (422), a create that names one (500), the status of a create (dropped).

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{CustomResource, Resource, ResourceExt};
use reconsim_kube::{Kinds, KubeWorld, Program};
use reconsim_sim::{SimTime, TraceMode};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "test.reconsim.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus"
)]
struct WidgetSpec {
    size: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
struct WidgetStatus {
    ready: bool,
}

fn code<T>(r: Result<T, kube::Error>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(kube::Error::Api(s)) => format!("{} {}: {}", s.code, s.reason, s.message),
        Err(e) => format!("error {e}"),
    }
}

fn seen(w: &Widget) -> String {
    format!(
        "size {} gen {} status {:?}",
        w.spec.size,
        w.metadata.generation.unwrap_or(0),
        w.status.as_ref().map(|s| s.ready)
    )
}

async fn widgets(client: kube::Client) -> Result<Vec<String>, kube::Error> {
    let pp = PostParams::default();
    let api: Api<Widget> = Api::namespaced(client.clone(), "default");
    let mut out = Vec::new();
    let w = api
        .create(&pp, &Widget::new("w", WidgetSpec { size: 1 }))
        .await?;
    out.push(format!("created: {}", seen(&w)));
    assert!(w.creation_timestamp().is_some());

    // A replace that changes spec and status: spec lands, status does not.
    let mut edit = w.clone();
    edit.spec.size = 2;
    edit.status = Some(WidgetStatus { ready: true });
    let w = api.replace("w", &pp, &edit).await?;
    out.push(format!("replaced: {}", seen(&w)));

    // The status subresource: status lands, spec and generation do not move.
    let status = json!({"spec": {"size": 9}, "status": {"ready": true}});
    let w = api
        .patch_status("w", &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    out.push(format!("status patched: {}", seen(&w)));

    // A custom resource's PUT must carry its resourceVersion; a create must not.
    let mut blind = w.clone();
    blind.metadata.resource_version = None;
    let r = api.replace("w", &pp, &blind).await;
    out.push(format!("blind replace: {}", code(r)));
    let mut copy = w.clone();
    copy.metadata.name = Some("w2".into());
    copy.metadata.uid = None;
    out.push(format!(
        "create with rv: {}",
        code(api.create(&pp, &copy).await)
    ));
    // Create cannot set the status of a kind with a status subresource.
    let mut born = Widget::new("w3", WidgetSpec { size: 3 });
    born.status = Some(WidgetStatus { ready: true });
    out.push(format!(
        "created with status: {}",
        seen(&api.create(&pp, &born).await?)
    ));

    // A JSON patch, then one whose test fails.
    let add = json!([{"op": "add", "path": "/metadata/labels", "value": {"tier": "gold"}}]);
    let w = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(add).unwrap()),
        )
        .await?;
    out.push(format!("labels: {:?}", w.labels()));
    let stale = json!([
        {"op": "test", "path": "/spec/size", "value": 1},
        {"op": "replace", "path": "/spec/size", "value": 5}
    ]);
    let r = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(stale).unwrap()),
        )
        .await;
    out.push(format!(
        "failed test: {}",
        code(r).split(':').next().unwrap()
    ));

    // A dependent, owned by the Widget: collected when the Widget goes.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("dependent".into());
    // kube's `controller_owner_ref` leaves blockOwnerDeletion unset (kube-core 5.0);
    // client-go's NewControllerRef sets it, as here.
    let mut owner = w.controller_owner_ref(&()).expect("a stored object");
    owner.block_owner_deletion = Some(true);
    cm.metadata.owner_references = Some(vec![owner]);
    let cm = cms.create(&pp, &cm).await?;
    out.push(format!(
        "configmap generation: {:?}",
        cm.metadata.generation
    ));
    // A built-in kind's PUT may leave it out: last writer wins.
    let mut blind = cm.clone();
    blind.metadata.resource_version = None;
    let r = cms.replace("dependent", &pp, &blind).await;
    out.push(format!("configmap blind replace: {}", code(r)));
    out.push(format!(
        "owner: {}",
        cm.owner_references()[0].kind.clone() + "/" + &cm.owner_references()[0].name
    ));
    // A resourceVersion precondition that is stale: 409, and nothing deleted.
    let stale = DeleteParams {
        preconditions: Some(Preconditions {
            resource_version: Some("1".into()),
            uid: None,
        }),
        ..DeleteParams::default()
    };
    let r = api.delete("w", &stale).await.map(|_| ());
    out.push(format!(
        "stale precondition: {}",
        code(r).split(':').next().unwrap()
    ));
    // In the foreground: the owner stays, marked, until its dependent (whose controller
    // reference blocks owner deletion) is gone.
    let marked = api.delete("w", &DeleteParams::foreground()).await?;
    out.push(format!(
        "foreground: {}",
        marked
            .map_left(|w| format!("marked, finalizers {:?}", w.finalizers()))
            .either(|l| l, |_| "gone".into())
    ));
    let mut order = Vec::new();
    for _ in 0..1000 {
        let (cm, owner) = (
            cms.get_opt("dependent").await?.is_some(),
            api.get_opt("w").await?.is_some(),
        );
        let now = format!("dependent {cm}, owner {owner}");
        if order.last() != Some(&now) {
            order.push(now);
        }
        if !cm && !owner {
            break;
        }
    }
    out.push(format!("collected: {}", order.join(" -> ")));

    // A kind the world does not serve: 404, naming what it serves.
    let services: Api<Service> = Api::namespaced(client, "default");
    out.push(format!("service: {}", code(services.get("s").await)));
    Ok(out)
}

#[test]
fn a_custom_resource_has_its_status_subresource_json_patches_and_owner_references() {
    let program: Program = Arc::new(|client| {
        Box::pin(async move {
            match widgets(client).await {
                Ok(lines) => lines.join("\n"),
                Err(e) => format!("error: {e}"),
            }
        })
    });
    let kinds = Kinds::new().crd::<Widget>().core::<ConfigMap>();
    let mut w = KubeWorld::new(3, TraceMode::Hash, Default::default(), kinds, program);
    w.sim.run_until(SimTime(120_000));
    let results = &w.bridge().results;
    assert_eq!(results.len(), 1, "{results:?}");
    let lines: Vec<&str> = results[0].lines().collect();
    assert_eq!(
        lines,
        [
            "created: size 1 gen 1 status None",
            "replaced: size 2 gen 2 status None",
            "status patched: size 2 gen 2 status Some(true)",
            r#"blind replace: 422 Invalid: widgets.test.reconsim.dev "w" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"#,
            "create with rv: 500 : resourceVersion should not be set on objects to be created",
            "created with status: size 3 gen 1 status None",
            r#"labels: {"tier": "gold"}"#,
            "failed test: 422 Invalid",
            "configmap generation: None",
            "configmap blind replace: ok",
            "owner: Widget/w",
            "stale precondition: 409 Conflict",
            r#"foreground: marked, finalizers ["foregroundDeletion"]"#,
            "collected: dependent true, owner true -> dependent false, owner true -> dependent false, owner false",
            "service: 404 NotFound: the world serves no services in v1; it serves: configmaps (v1), events (v1), namespaces (v1), nodes (v1), pods (v1), secrets (v1), deployments (apps/v1), certificatesigningrequests (certificates.k8s.io/v1), leases (coordination.k8s.io/v1), events (events.k8s.io/v1), widgets (test.reconsim.dev/v1) (register a kind with Kinds::with, docs/kube.md)",
        ]
    );
}
