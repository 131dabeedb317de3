//! The REST surface kube's typed `Api<ConfigMap>` uses, through the simulated API
//! server: list with label selectors (one namespace and all), replace with its
//! resourceVersion as a precondition, a JSON merge patch, delete; and the clear errors
//! for what the server refuses (an apply config that names no kind). Server-side apply
//! itself: tests/apply.rs.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use reconsim_kube::{Kinds, Program};
use reconsim_world::apiserver::ApiServerConfig;
use std::collections::BTreeMap;
use std::sync::Arc;

mod common;

fn config_map(name: &str, app: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.labels = Some(BTreeMap::from([("app".to_string(), app.to_string())]));
    cm.data = Some(BTreeMap::from([("k".to_string(), "v".to_string())]));
    cm
}

fn code(r: Result<impl std::fmt::Debug, kube::Error>) -> String {
    match r {
        Ok(v) => format!("ok {v:?}").chars().take(20).collect(),
        Err(kube::Error::Api(s)) => format!("{} {}", s.code, s.reason),
        Err(e) => format!("error {e}"),
    }
}

/// Create namespace `name`, as `kubectl create namespace` does.
async fn create_namespace(client: &kube::Client, name: &str) -> Result<(), kube::Error> {
    let mut ns = k8s_openapi::api::core::v1::Namespace::default();
    ns.metadata.name = Some(name.into());
    Api::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    Ok(())
}

/// What a kube-rs user writes.
async fn lifecycle(client: kube::Client) -> Result<Vec<String>, kube::Error> {
    let pp = PostParams::default();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let other: Api<ConfigMap> = Api::namespaced(client.clone(), "other");
    let all: Api<ConfigMap> = Api::all(client.clone());
    let mut out = Vec::new();
    api.create(&pp, &config_map("web", "web")).await?;
    api.create(&pp, &config_map("db", "db")).await?;
    // A namespace must exist before anything is created in it.
    match other.create(&pp, &config_map("web", "web")).await {
        Err(kube::Error::Api(s)) => out.push(format!("{} {} {}", s.code, s.reason, s.message)),
        answer => out.push(format!("created in a missing namespace: {answer:?}")),
    }
    create_namespace(&client, "other").await?;
    other.create(&pp, &config_map("web", "web")).await?;
    let names = |l: kube::core::ObjectList<ConfigMap>| {
        l.items
            .iter()
            .map(|c| {
                format!(
                    "{}/{}",
                    c.metadata.namespace.clone().unwrap(),
                    c.metadata.name.clone().unwrap()
                )
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    out.push(names(
        api.list(&ListParams::default().labels("app=web")).await?,
    ));
    out.push(names(all.list(&ListParams::default()).await?));
    out.push(names(
        all.list(&ListParams::default().labels("app!=web")).await?,
    ));
    // Replace: with the current resourceVersion it lands; with a stale one, 409.
    let stale = api.get("web").await?;
    let mut fresh = stale.clone();
    fresh.data = Some(BTreeMap::from([("k".to_string(), "v2".to_string())]));
    let replaced = api.replace("web", &pp, &fresh).await?;
    out.push(format!("replaced: {:?}", replaced.data.unwrap_or_default()));
    out.push(format!(
        "stale replace: {}",
        code(api.replace("web", &pp, &stale).await)
    ));
    // A merge patch of data and labels.
    let patch = serde_json::json!({
        "metadata": {"labels": {"tier": "front"}},
        "data": {"k": null, "added": "yes"},
    });
    let patched = api
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    out.push(format!(
        "patched: {:?} {:?}",
        patched.data.unwrap_or_default(),
        patched.metadata.labels.unwrap_or_default()
    ));
    // Delete, then it is gone.
    let deleted = api.delete("db", &DeleteParams::default()).await?;
    out.push(format!("deleted: {}", deleted.is_right()));
    out.push(format!(
        "after delete: {:?}",
        api.get_opt("db").await?.is_none()
    ));
    // An apply config must name its kind (apiVersion and kind), as the real server
    // says with a 400.
    let apply = api
        .patch("web", &PatchParams::apply("me"), &Patch::Apply(&patch))
        .await;
    out.push(format!("apply: {}", code(apply)));
    Ok(out)
}

/// Run `program` in a world of its own for a minute of virtual time: its result lines.
fn run(seed: u64, apiserver: ApiServerConfig, program: Program) -> Vec<String> {
    common::result_lines(seed, apiserver, Kinds::new().core::<ConfigMap>(), program)
}

/// A program of `f`, its result lines or its error.
fn program<F, Fut, T>(f: F) -> Program
where
    F: Fn(kube::Client) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<T, kube::Error>> + Send + 'static,
    T: Text,
{
    let f = Arc::new(f);
    Arc::new(move |client| {
        let f = f.clone();
        Box::pin(async move {
            match f(client).await {
                Ok(t) => t.into_text(),
                Err(e) => format!("error: {e}"),
            }
        })
    })
}

trait Text {
    fn into_text(self) -> String;
}

impl Text for Vec<String> {
    fn into_text(self) -> String {
        self.join("\n")
    }
}

impl Text for String {
    fn into_text(self) -> String {
        self
    }
}

#[test]
fn list_replace_patch_and_delete_behave_as_the_api_server_does() {
    let lines = run(11, ApiServerConfig::default(), program(lifecycle));
    assert_eq!(
        lines,
        [
            r#"404 NotFound namespaces "other" not found"#,
            "default/web",
            "default/db,default/web,other/web",
            "default/db",
            r#"replaced: {"k": "v2"}"#,
            "stale replace: 409 Conflict",
            r#"patched: {"added": "yes"} {"app": "web", "tier": "front"}"#,
            "deleted: true",
            "after delete: true",
            "apply: 400 BadRequest",
        ]
    );
}

/// A watch as a kube-rs user holds one: events in order, filtered by namespace and
/// labels, while the same program writes.
async fn watching(client: kube::Client) -> Result<Vec<String>, kube::Error> {
    use futures::StreamExt;
    use kube::api::{WatchEvent, WatchParams};
    let pp = PostParams::default();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create_namespace(&client, "other").await?;
    let other: Api<ConfigMap> = Api::namespaced(client, "other");
    api.create(&pp, &config_map("first", "web")).await?;
    let mut events = api
        .watch(&WatchParams::default().labels("app=web"), "0")
        .await?
        .boxed();
    let mut out = Vec::new();
    let mut next = async || match events.next().await {
        Some(Ok(WatchEvent::Added(c))) => format!("ADDED {}", c.metadata.name.unwrap()),
        Some(Ok(WatchEvent::Modified(c))) => format!("MODIFIED {}", c.metadata.name.unwrap()),
        Some(Ok(WatchEvent::Deleted(c))) => format!("DELETED {}", c.metadata.name.unwrap()),
        other => format!("{other:?}"),
    };
    out.push(next().await);
    // Not in the watch: another namespace, another label.
    other.create(&pp, &config_map("elsewhere", "web")).await?;
    api.create(&pp, &config_map("db", "db")).await?;
    api.create(&pp, &config_map("second", "web")).await?;
    out.push(next().await);
    let patch = serde_json::json!({"data": {"k": "v2"}});
    api.patch("first", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    out.push(next().await);
    api.delete("second", &DeleteParams::default()).await?;
    out.push(next().await);
    Ok(out)
}

#[test]
fn a_watch_streams_the_servers_events_filtered_by_namespace_and_labels() {
    let lines = run(5, ApiServerConfig::default(), program(watching));
    assert_eq!(
        lines,
        [
            "ADDED first",
            "ADDED second",
            "MODIFIED first",
            "DELETED second"
        ]
    );
}

/// A label-selector watch while objects start and stop matching it.
async fn relabeling(client: kube::Client) -> Result<Vec<String>, kube::Error> {
    use futures::StreamExt;
    use kube::api::{WatchEvent, WatchParams};
    let pp = PostParams::default();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    api.create(&pp, &config_map("first", "web")).await?;
    api.create(&pp, &config_map("db", "db")).await?;
    let mut events = api
        .watch(&WatchParams::default().labels("app=web"), "0")
        .await?
        .boxed();
    let mut out = Vec::new();
    let mut next = async || match events.next().await {
        Some(Ok(WatchEvent::Added(c))) => format!("ADDED {}", c.metadata.name.unwrap()),
        Some(Ok(WatchEvent::Modified(c))) => format!("MODIFIED {}", c.metadata.name.unwrap()),
        Some(Ok(WatchEvent::Deleted(c))) => format!(
            "DELETED {} app={} rv={}",
            c.metadata.name.unwrap(),
            c.metadata.labels.unwrap_or_default()["app"],
            c.metadata.resource_version.unwrap()
        ),
        other => format!("{other:?}"),
    };
    let relabel =
        |app: &str| Patch::Merge(serde_json::json!({"metadata": {"labels": {"app": app}}}));
    out.push(next().await);
    // db starts matching: the watch sees it appear.
    api.patch("db", &PatchParams::default(), &relabel("web"))
        .await?;
    out.push(next().await);
    // first stops matching: the watch sees it go, as it was, at the write's version.
    let moved = api
        .patch("first", &PatchParams::default(), &relabel("api"))
        .await?;
    out.push(format!(
        "(first now rv={})",
        moved.metadata.resource_version.unwrap()
    ));
    out.push(next().await);
    // Changes and the deletion of an object that no longer matches: nothing.
    let data = Patch::Merge(serde_json::json!({"data": {"k": "v3"}}));
    api.patch("first", &PatchParams::default(), &data).await?;
    api.delete("first", &DeleteParams::default()).await?;
    api.delete("db", &DeleteParams::default()).await?;
    out.push(next().await);
    Ok(out)
}

#[test]
fn a_label_selector_watch_hears_objects_start_and_stop_matching() {
    // Before (issue 29 item 7): db's relabel came as MODIFIED of an object the watch
    // never had, and first's went unheard, so a watcher kept it forever.
    let lines = run(5, ApiServerConfig::default(), program(relabeling));
    let rv = lines[2]
        .strip_prefix("(first now rv=")
        .and_then(|l| l.strip_suffix(')'))
        .expect("first's new version")
        .to_string();
    assert_eq!(
        lines,
        [
            "ADDED first".to_string(),
            "ADDED db".to_string(),
            format!("(first now rv={rv})"),
            format!("DELETED first app=web rv={rv}"),
            "DELETED db app=web rv=".to_string() + lines[4].rsplit('=').next().unwrap(),
        ]
    );
}

/// Watches from "0" and from no resourceVersion, after writes the history no longer
/// holds (it keeps one event): each starts from the current state.
async fn from_now(client: kube::Client) -> Result<Vec<String>, kube::Error> {
    use futures::StreamExt;
    use kube::api::{WatchEvent, WatchParams};
    let pp = PostParams::default();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let data = |v: &str| Patch::Merge(serde_json::json!({"data": {"k": v}}));
    api.create(&pp, &config_map("a", "web")).await?;
    api.patch("a", &PatchParams::default(), &data("v2")).await?;
    api.create(&pp, &config_map("gone", "web")).await?;
    api.delete("gone", &DeleteParams::default()).await?;
    let mut out = Vec::new();
    for (i, version) in ["0", ""].into_iter().enumerate() {
        let mut events = api
            .watch(&WatchParams::default().labels("app=web"), version)
            .await?
            .boxed();
        let mut next = async || match events.next().await {
            Some(Ok(WatchEvent::Added(c))) => format!("ADDED {}", c.data.unwrap()["k"]),
            Some(Ok(WatchEvent::Modified(c))) => format!("MODIFIED {}", c.data.unwrap()["k"]),
            other => format!("{other:?}"),
        };
        out.push(format!("from {version:?}: {}", next().await));
        let v = format!("v{}", i + 3);
        api.patch("a", &PatchParams::default(), &data(&v)).await?;
        out.push(next().await);
    }
    Ok(out)
}

#[test]
fn a_watch_from_0_or_no_version_starts_from_the_current_state() {
    // api-concepts, "Semantics for watch": synthetic ADDED events of what exists, then
    // the changes. Before (issue 29 item 5), "0" after the history moved on answered
    // 410, and none replayed raw history: a's first version, gone's ADDED and DELETED.
    let config = ApiServerConfig {
        watch_cache: one_event(),
        ..Default::default()
    };
    let lines = run(5, config, program(from_now));
    assert_eq!(
        lines,
        [
            r#"from "0": ADDED v2"#,
            "MODIFIED v3",
            r#"from "": ADDED v3"#,
            "MODIFIED v4"
        ]
    );
}

/// A watch from a resourceVersion the server's history no longer holds.
async fn too_old(client: kube::Client) -> Result<String, kube::Error> {
    use futures::StreamExt;
    use kube::api::{WatchEvent, WatchParams};
    let pp = PostParams::default();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    for name in ["a", "b", "c"] {
        api.create(&pp, &config_map(name, "web")).await?;
    }
    let mut events = api.watch(&WatchParams::default(), "1").await?.boxed();
    Ok(match events.next().await {
        Some(Ok(WatchEvent::Error(e))) => format!("{} {}", e.code, e.reason),
        other => format!("{other:?}"),
    })
}

#[test]
fn a_watch_from_a_compacted_resource_version_gets_the_servers_410() {
    // The watch cache keeps one event: rv 1 is gone once rv 3 is written.
    let config = ApiServerConfig {
        watch_cache: one_event(),
        ..Default::default()
    };
    let lines = run(5, config, program(too_old));
    assert_eq!(lines, ["410 Expired"]);
}

/// Set-based label selectors and field selectors, on a list and on a watch.
async fn selecting(client: kube::Client) -> Result<Vec<String>, kube::Error> {
    use futures::StreamExt;
    use kube::api::{WatchEvent, WatchParams};
    let pp = PostParams::default();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for (name, app) in [("web", "web"), ("db", "db"), ("cache", "cache")] {
        api.create(&pp, &config_map(name, app)).await?;
    }
    let names = |l: kube::core::ObjectList<ConfigMap>| {
        l.items
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut out = Vec::new();
    out.push(names(
        api.list(&ListParams::default().labels("app in (web,db)"))
            .await?,
    ));
    out.push(names(
        api.list(&ListParams::default().labels("app notin (web)"))
            .await?,
    ));
    out.push(names(
        api.list(&ListParams::default().fields("metadata.name=db"))
            .await?,
    ));
    out.push(names(
        api.list(
            &ListParams::default()
                .fields("metadata.name!=db")
                .labels("app!=cache"),
        )
        .await?,
    ));
    out.push(format!(
        "unknown field: {}",
        code(api.list(&ListParams::default().fields("data.k=v")).await)
    ));
    // A watch on one object by name, as kube-runtime's `watch_object` makes it.
    let mut events = api
        .watch(&WatchParams::default().fields("metadata.name=web"), "0")
        .await?
        .boxed();
    let patch = serde_json::json!({"data": {"k": "v2"}});
    api.patch("db", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    api.patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    for _ in 0..2 {
        out.push(match events.next().await {
            Some(Ok(WatchEvent::Added(c))) => format!("ADDED {}", c.metadata.name.unwrap()),
            Some(Ok(WatchEvent::Modified(c))) => format!("MODIFIED {}", c.metadata.name.unwrap()),
            other => format!("{other:?}"),
        });
    }
    Ok(out)
}

#[test]
fn set_based_and_field_selectors_filter_lists_and_watches() {
    let lines = run(3, ApiServerConfig::default(), program(selecting));
    assert_eq!(
        lines,
        [
            "db,web",
            "cache,db",
            "db",
            "web",
            "unknown field: 400 BadRequest",
            "ADDED web",
            "MODIFIED web",
        ]
    );
}

/// A list in pages: `limit` and `continue`, each page at the first one's
/// resourceVersion, and a token the history has moved past.
async fn paging(client: kube::Client) -> Result<Vec<String>, kube::Error> {
    let pp = PostParams::default();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for name in ["a", "b", "c", "d", "e"] {
        api.create(&pp, &config_map(name, "web")).await?;
    }
    let mut out = Vec::new();
    let first = api.list(&ListParams::default().limit(2)).await?;
    let token = first.metadata.continue_.clone().unwrap_or_default();
    let page = |l: &kube::core::ObjectList<ConfigMap>| {
        format!(
            "{} rv {} more {}",
            l.items
                .iter()
                .map(|c| c.metadata.name.clone().unwrap())
                .collect::<Vec<_>>()
                .join(","),
            l.metadata.resource_version.clone().unwrap_or_default(),
            l.metadata.remaining_item_count.unwrap_or(0),
        )
    };
    out.push(page(&first));
    // Written between the pages: the next page is still the first one's snapshot.
    api.delete("c", &DeleteParams::default()).await?;
    api.create(&pp, &config_map("bb", "web")).await?;
    let second = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await?;
    out.push(page(&second));
    let token = second.metadata.continue_.clone().unwrap_or_default();
    let last = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await?;
    out.push(format!(
        "{} continue {:?}",
        page(&last),
        last.metadata.continue_
    ));
    // A selector fills each page with matching items.
    out.push(page(
        &api.list(&ListParams::default().limit(2).fields("metadata.name!=a"))
            .await?,
    ));
    // Once the history has moved past the first page's version, its token is 410.
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    api.create(&pp, &config_map("f", "web")).await?;
    out.push(format!(
        "stale token: {}",
        code(
            api.list(&ListParams::default().limit(2).continue_token(&token))
                .await
        )
    ));
    Ok(out)
}

#[test]
fn a_list_in_pages_is_one_snapshot_and_an_old_token_is_gone() {
    let config = ApiServerConfig {
        compaction_ms: 2_000,
        ..ApiServerConfig::default()
    };
    let lines = run(7, config, program(paging));
    assert_eq!(
        lines,
        [
            "a,b rv 5 more 3",
            "c,d rv 5 more 1",
            "e rv 5 more 0 continue None",
            "b,bb rv 7 more 0",
            "stale token: 410 Expired",
        ]
    );
}

/// Creates whose names the real server refuses (semantics 4.18).
async fn names(client: kube::Client) -> Result<Vec<String>, kube::Error> {
    let pp = PostParams::default();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    fn message<T>(r: Result<T, kube::Error>) -> String {
        match r {
            Ok(_) => "created".to_string(),
            Err(kube::Error::Api(s)) => format!("{} {}", s.code, s.message),
            Err(e) => format!("error {e}"),
        }
    }
    let mut out = vec![message(api.create(&pp, &config_map("Bad_Name", "x")).await)];
    let mut generated = config_map("", "x");
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("web.v1-".into());
    out.push(message(api.create(&pp, &generated).await));
    generated.metadata.generate_name = Some("Web-".into());
    out.push(message(api.create(&pp, &generated).await));
    let mut ns = k8s_openapi::api::core::v1::Namespace::default();
    ns.metadata.name = Some("team.a".into());
    out.push(message(namespaces.create(&pp, &ns).await));
    Ok(out)
}

#[test]
fn a_name_the_server_refuses_is_422_with_its_rule() {
    // The server generates a name before it validates: the 422 names it (masked here).
    let lines: Vec<String> = run(2, ApiServerConfig::default(), program(names))
        .into_iter()
        .map(|l| {
            let mut out = l.clone();
            for (at, _) in l.match_indices("\"Web-") {
                let suffix = at + 5..at + 10;
                if l.get(suffix.end..suffix.end + 1) == Some("\"") {
                    out.replace_range(suffix, "?????");
                }
            }
            out
        })
        .collect();
    let subdomain = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    let label = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    assert_eq!(
        lines,
        [
            format!(
                r#"422 ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": {subdomain}"#
            ),
            "created".to_string(),
            format!(
                r#"422 ConfigMap "Web-?????" is invalid: [metadata.generateName: Invalid value: "Web-": {subdomain}, metadata.name: Invalid value: "Web-?????": {subdomain}]"#
            ),
            format!(
                r#"422 Namespace "team.a" is invalid: metadata.name: Invalid value: "team.a": {label}"#
            ),
        ]
    );
}

/// A watch cache that keeps one event per type.
fn one_event() -> reconsim_world::apiserver::WatchWindowConfig {
    reconsim_world::apiserver::WatchWindowConfig {
        capacity_min: 1,
        capacity_max: 1,
        ..Default::default()
    }
}
