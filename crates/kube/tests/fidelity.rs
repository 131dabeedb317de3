//! The API server's small fidelity defects that review fidelity-3 found (issue 59), each
//! driven as the review's probe drove it, with kube 5.0's own `Api` through the simulated
//! API server. Each test failed on the simulator before its fix: the simulator was wrong,
//! not the controller under test.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Resource;
use kube::api::{
    Api, ApiResource, DynamicObject, GetParams, ListParams, Patch, PatchParams, PostParams,
    VersionMatch,
};
use reconsim_kube::{Kinds, Program};
use reconsim_world::apiserver::ApiServerConfig;
use reconsim_world::watch_cache::DelayRange;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

mod common;

/// A program of `f`: its lines, or its error.
fn program<F, Fut>(f: F) -> Program
where
    F: Fn(kube::Client) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Vec<String>, kube::Error>> + Send + 'static,
{
    let f = Arc::new(f);
    Arc::new(move |client| {
        let f = f.clone();
        Box::pin(async move {
            match f(client).await {
                Ok(lines) => lines.join("\n"),
                Err(e) => format!("error: {e}"),
            }
        })
    })
}

fn config_map(name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.labels = Some(BTreeMap::from([("e".to_string(), "1".to_string())]));
    cm.data = Some(BTreeMap::from([("k".to_string(), "v1".to_string())]));
    cm
}

fn code<T>(r: Result<T, kube::Error>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(kube::Error::Api(s)) => format!("{} {}: {}", s.code, s.reason, s.message),
        Err(e) => format!("error {e}"),
    }
}

/// A workload of kind `K` with one container and no replicas, from JSON.
fn workload<K: serde::de::DeserializeOwned>(name: &str) -> K {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "image": "app:1"}]}}},
    }))
    .expect("a workload")
}

/// P-H: references as kube-rs makes them, and one with both flags an explicit `false`,
/// each read back.
async fn owners(client: kube::Client) -> Result<Vec<String>, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let pp = PostParams::default();
    let owner = api.create(&pp, &config_map("own")).await?;
    let plain = owner.owner_ref(&()).expect("a reference");
    let controller = owner.controller_owner_ref(&()).expect("a reference");
    let mut explicit = plain.clone();
    explicit.controller = Some(false);
    explicit.block_owner_deletion = Some(false);
    let mut out = Vec::new();
    for (name, sent) in [("kid", plain), ("ward", controller), ("guest", explicit)] {
        let mut kid = config_map(name);
        kid.metadata.owner_references = Some(vec![sent.clone()]);
        api.create(&pp, &kid).await?;
        let refs = api
            .get(name)
            .await?
            .metadata
            .owner_references
            .unwrap_or_default();
        out.push(format!(
            "{name}: controller {:?} blockOwnerDeletion {:?} contains {}",
            refs.first().and_then(|r| r.controller),
            refs.first().and_then(|r| r.block_owner_deletion),
            refs.contains(&sent)
        ));
    }
    Ok(out)
}

/// D6: `controller` and `blockOwnerDeletion` read back as sent: absent when unset, so
/// an "adopt unless already referenced" check finds its own reference.
#[test]
fn an_owner_reference_reads_back_exactly_as_written() {
    let kinds = Kinds::new().core::<ConfigMap>();
    let lines = common::result_lines(2, ApiServerConfig::default(), kinds, program(owners));
    assert_eq!(
        lines,
        [
            "kid: controller None blockOwnerDeletion None contains true",
            "ward: controller Some(true) blockOwnerDeletion None contains true",
            "guest: controller Some(false) blockOwnerDeletion Some(false) contains true",
        ]
    );
}

/// P-A: an annotation, then a label, merge-patched onto each workload kind; its
/// generation after each.
async fn generations(client: kube::Client) -> Result<Vec<String>, kube::Error> {
    async fn probe<K>(api: Api<K>, name: &str) -> Result<String, kube::Error>
    where
        K: Resource<DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::Serialize
            + serde::de::DeserializeOwned,
    {
        let created = api.create(&PostParams::default(), &workload(name)).await?;
        let mut seen = vec![created.meta().generation.unwrap_or(0)];
        let pp = PatchParams::default();
        for patch in [
            json!({"metadata": {"annotations": {"note": "a"}}}),
            json!({"metadata": {"labels": {"tier": "web"}}}),
            json!({"spec": {"replicas": 1}}),
        ] {
            let patched = api.patch(name, &pp, &Patch::Merge(&patch)).await?;
            seen.push(patched.meta().generation.unwrap_or(0));
        }
        Ok(format!("{name}: {seen:?}"))
    }
    let ns = "default";
    Ok(vec![
        probe::<Deployment>(Api::namespaced(client.clone(), ns), "deployment").await?,
        probe::<ReplicaSet>(Api::namespaced(client.clone(), ns), "replicaset").await?,
        probe::<StatefulSet>(Api::namespaced(client, ns), "statefulset").await?,
    ])
}

/// D5: a Deployment's generation counts its annotations (deployment/strategy.go,
/// PrepareForUpdate); ReplicaSet's and StatefulSet's count their spec alone, and no
/// kind's counts its labels.
#[test]
fn a_deployments_annotations_bump_its_generation_and_other_kinds_do_not() {
    let kinds = Kinds::new()
        .with::<ReplicaSet>(true)
        .with::<StatefulSet>(true);
    let lines = common::result_lines(1, ApiServerConfig::default(), kinds, program(generations));
    assert_eq!(
        lines,
        [
            "deployment: [1, 2, 2, 3]",
            "replicaset: [1, 1, 1, 2]",
            "statefulset: [1, 1, 1, 2]",
        ]
    );
}

/// A CRD whose `spec.policy` defaults to `{}`, and whose members have defaults of their
/// own.
fn policies_crd() -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "policies.test.reconsim.dev"},
        "spec": {
            "group": "test.reconsim.dev",
            "names": {"kind": "Policy", "plural": "policies"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {
                        "type": "object",
                        "properties": {"policy": {
                            "type": "object",
                            "default": {},
                            "properties": {
                                "mode": {"type": "string", "default": "safe"},
                                "retry": {
                                    "type": "object",
                                    "default": {},
                                    "properties": {"limit": {"type": "integer", "default": 3}}
                                }
                            }
                        }}
                    }}
                }}
            }]
        }
    })
}

async fn policies(client: kube::Client) -> Result<Vec<String>, kube::Error> {
    let resource = ApiResource {
        group: "test.reconsim.dev".into(),
        version: "v1".into(),
        api_version: "test.reconsim.dev/v1".into(),
        kind: "Policy".into(),
        plural: "policies".into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
    let mut out = Vec::new();
    for (name, spec) in [
        ("bare", json!({})),
        ("half", json!({"policy": {"mode": "fast"}})),
    ] {
        let o: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "test.reconsim.dev/v1", "kind": "Policy",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec,
        }))
        .expect("a DynamicObject");
        let created = api.create(&PostParams::default(), &o).await?;
        out.push(format!("{name}: {}", created.data["spec"]));
    }
    Ok(out)
}

/// D9: a default the server inserts gets its own members' defaults, as
/// apiextensions-apiserver's `Default` recurses into every member, inserted ones
/// included.
#[test]
fn a_crds_default_object_gains_its_own_members_defaults() {
    let kinds = Kinds::new()
        .crd_manifest(&policies_crd())
        .expect("the CRD is served");
    let lines = common::result_lines(5, ApiServerConfig::default(), kinds, program(policies));
    assert_eq!(
        lines,
        [
            r#"bare: {"policy":{"mode":"safe","retry":{"limit":3}}}"#,
            r#"half: {"policy":{"mode":"fast","retry":{"limit":3}}}"#,
        ]
    );
}

/// P-E: lists at the version `e-a` was created at, exact and (a `limit` with a
/// version and no match) legacy exact, then once the history has moved past it.
async fn exact(client: kube::Client) -> Result<Vec<String>, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let pp = PostParams::default();
    let a = api.create(&pp, &config_map("e-a")).await?;
    let at = a.metadata.resource_version.clone().unwrap_or_default();
    api.create(&pp, &config_map("e-b")).await?;
    let shown = |l: kube::core::ObjectList<ConfigMap>| {
        let names: Vec<String> = l
            .items
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        format!(
            "{} at the version asked: {}",
            names.join(","),
            l.metadata.resource_version.as_deref() == Some(at.as_str())
        )
    };
    let mut out = Vec::new();
    let lp = ListParams::default().labels("e=1");
    out.push(format!(
        "exact: {}",
        shown(
            api.list(&lp.clone().at(&at).matching(VersionMatch::Exact))
                .await?
        )
    ));
    out.push(format!(
        "limit: {}",
        shown(api.list(&lp.clone().limit(10).at(&at)).await?)
    ));
    out.push(format!(
        "not older than: {}",
        shown(api.list(&lp.clone().at(&at)).await?)
    ));
    // The history is kept 2 s here: a version from before it is gone.
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    api.create(&pp, &config_map("e-c")).await?;
    out.push(format!(
        "compacted: {}",
        code(api.list(&lp.at(&at).matching(VersionMatch::Exact)).await)
    ));
    Ok(out)
}

/// D7: an exact list answers the data as of its version, stamped with it, or 410 once
/// that version is compacted; "not older than" may answer newer data.
#[test]
fn an_exact_list_is_the_data_at_its_version_or_gone() {
    let config = ApiServerConfig {
        compaction_ms: 2_000,
        ..ApiServerConfig::default()
    };
    let kinds = Kinds::new().core::<ConfigMap>();
    let lines = common::result_lines(3, config, kinds, program(exact));
    assert_eq!(
        lines,
        [
            "exact: e-a at the version asked: true",
            "limit: e-a at the version asked: true",
            "not older than: e-a,e-b at the version asked: false",
            "compacted: 410 Expired: The resourceVersion for the provided list is too old.",
        ]
    );
}

/// GETs with resourceVersion "0" and N while the watch cache is 5 s behind the store.
async fn cached_gets(client: kube::Client) -> Result<Vec<String>, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let data = |c: Result<ConfigMap, kube::Error>| match c {
        Ok(c) => c.data.and_then(|d| d.get("k").cloned()).unwrap_or_default(),
        Err(e) => code::<()>(Err(e)),
    };
    let mut out = Vec::new();
    let created = api.create(&PostParams::default(), &config_map("c")).await?;
    let first = created
        .metadata
        .resource_version
        .clone()
        .unwrap_or_default();
    out.push(format!(
        "any, at once: {}",
        data(api.get_with("c", &GetParams::any()).await)
    ));
    out.push(format!("unset, at once: {}", data(api.get("c").await)));
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    out.push(format!(
        "any, 6 s on: {}",
        data(api.get_with("c", &GetParams::any()).await)
    ));
    let patch = json!({"data": {"k": "v2"}});
    let patched = api
        .patch("c", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let second = patched
        .metadata
        .resource_version
        .clone()
        .unwrap_or_default();
    out.push(format!(
        "any, after a patch: {}",
        data(api.get_with("c", &GetParams::any()).await)
    ));
    out.push(format!(
        "not older than the create: {}",
        data(api.get_with("c", &GetParams::at(&first)).await)
    ));
    out.push(format!(
        "not older than the patch: {}",
        data(api.get_with("c", &GetParams::at(&second)).await)
    ));
    Ok(out)
}

/// D8: a GET with a resourceVersion is the watch cache's answer, as the real cacher's
/// `Get`: "0" however far behind (404 for an object its events have not brought yet),
/// N once the cache has reached N (else, for want of the real wait, the store's).
#[test]
fn a_get_with_a_resource_version_reads_the_lagging_watch_cache() {
    let config = ApiServerConfig {
        watch_delay_ms: Some(DelayRange {
            lo_ms: 5_000,
            hi_ms: 5_000,
        }),
        ..ApiServerConfig::default()
    };
    let kinds = Kinds::new().core::<ConfigMap>();
    let lines = common::result_lines(4, config, kinds, program(cached_gets));
    assert_eq!(
        lines,
        [
            "any, at once: 404 NotFound: not found",
            "unset, at once: v1",
            "any, 6 s on: v1",
            "any, after a patch: v1",
            "not older than the create: v1",
            "not older than the patch: v2",
        ]
    );
}
