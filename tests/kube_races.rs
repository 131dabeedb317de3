//! Races only a kube-rs program can have (issue 27): kube-runtime's `Controller`
//! reconciles different objects at once, and a `try_join!` sends its requests at once.
//! Each controller here runs two ways, from the same functions:
//! - the program path: the user's `Controller::new(..).run(..)` in a `KubeBridge`;
//! - the reconcile-only path: the same `reconcile` under reconsim's manager, which runs
//!   one reconcile at a time and sends a reconcile's requests one after another.
//!
//! The bug is caught on the program path, and the fix holds there; on the reconcile-only
//! path the bug cannot happen, so its campaign passes: what the program path adds. And
//! search's swaps reach the new interleavings: from a run that holds, the exhaustive
//! search reorders a `try_join!`'s two requests into the failing order.
//!
//! - `registry`: every Member adds its name to one shared ConfigMap by get, then replace.
//!   The bug drops the resourceVersion it read, so the replace is last-writer-wins and two
//!   reconciles at once lose one name; the fix keeps it, so the loser gets 409 Conflict
//!   and retries (optimistic concurrency, the API server's own answer to this race).
//! - `pointer`: every Member publishes a config and a pointer that names it. The bug
//!   makes both in one `try_join!`, so the pointer can land first and name a config that
//!   does not exist yet (the shape of the machine-config-operator's missing rendered
//!   config); the fix awaits the config before it writes the pointer.

use reconsim::check::{Check, View, Violation};
use reconsim::family::ParamError;
use reconsim::scenario::extension::{Custom, Extensions};
use reconsim::scenario::fuzz::{Campaign, Report, fuzz};
use reconsim::scenario::{Families, Scenario};
use reconsim_kube::kinds::{Kinds, ObjectError, kind_of};
use serde::Deserialize;
use serde_json::json;

/// The controllers, written as kube-rs users write them: no reconsim import.
mod user {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, PostParams};
    use kube::runtime::controller::{Action, Controller};
    use kube::runtime::watcher;
    use kube::{Client, CustomResource, ResourceExt};
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use std::sync::Arc;
    use std::time::Duration;

    #[derive(
        CustomResource, Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema,
    )]
    #[kube(
        group = "races.reconsim.dev",
        version = "v1",
        kind = "Member",
        namespaced
    )]
    pub struct MemberSpec {}

    /// The shared ConfigMap every Member registers in.
    pub const REGISTRY: &str = "registry";
    /// A pointer's key: the name of the config it points at.
    pub const POINTS_AT: &str = "config";

    pub struct Ctx {
        pub client: Client,
        pub fixed: bool,
    }

    #[derive(Debug, thiserror::Error)]
    pub enum Error {
        #[error("kube: {0}")]
        Kube(#[from] kube::Error),
    }

    /// Add this Member's name to the registry: get it, add the key, replace it.
    pub async fn register(m: Arc<Member>, ctx: Arc<Ctx>) -> Result<Action, Error> {
        let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), "default");
        let mut registry = cms.get(REGISTRY).await?;
        let data = registry.data.get_or_insert_with(Default::default);
        if data.contains_key(&m.name_any()) {
            return Ok(Action::await_change());
        }
        data.insert(m.name_any(), "registered".into());
        if !ctx.fixed {
            // The bug: an unconditional replace (no resourceVersion, last writer wins).
            registry.metadata.resource_version = None;
        }
        cms.replace(REGISTRY, &PostParams::default(), &registry)
            .await?;
        Ok(Action::await_change())
    }

    /// Publish this Member's config and a pointer naming it.
    pub async fn publish(m: Arc<Member>, ctx: Arc<Ctx>) -> Result<Action, Error> {
        let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), "default");
        let pp = PostParams::default();
        let config_name = format!("{}-config", m.name_any());
        let mut config = ConfigMap::default();
        config.metadata.name = Some(config_name.clone());
        let mut pointer = ConfigMap::default();
        pointer.metadata.name = Some(format!("{}-pointer", m.name_any()));
        pointer.data = Some([(POINTS_AT.to_string(), config_name)].into());
        if ctx.fixed {
            cms.create(&pp, &config).await?;
            cms.create(&pp, &pointer).await?;
        } else {
            // The bug: both at once, as if they did not depend on each other.
            futures::try_join!(cms.create(&pp, &config), cms.create(&pp, &pointer))?;
        }
        Ok(Action::await_change())
    }

    pub fn error_policy(_: Arc<Member>, _: &Error, _: Arc<Ctx>) -> Action {
        Action::requeue(Duration::from_secs(1))
    }

    /// The controller's `main`, past building its client.
    pub async fn run(client: Client, fixed: bool, pointer: bool) {
        let members: Api<Member> = Api::all(client.clone());
        let ctx = Arc::new(Ctx { client, fixed });
        let controller = Controller::new(members, watcher::Config::default());
        if pointer {
            controller
                .run(publish, error_policy, ctx)
                .for_each(|_| futures::future::ready(()))
                .await;
        } else {
            controller
                .run(register, error_policy, ctx)
                .for_each(|_| futures::future::ready(()))
                .await;
        }
    }
}

use k8s_openapi::api::core::v1::ConfigMap;
use user::{Member, MemberSpec, POINTS_AT, REGISTRY};

const REGISTRY_ENTRY: &str = "registry-controller";
const POINTER_ENTRY: &str = "pointer-controller";
const NO_DANGLING_POINTER: &str = "no_dangling_pointer";
const REGISTRY_KEEPS_NAMES: &str = "registry_keeps_every_name";
const MEMBERS: [&str; 3] = ["a", "b", "c"];

fn kinds() -> Kinds {
    Kinds::new().crd::<Member>().core::<ConfigMap>()
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Params {
    fixed: bool,
}

/// Which way the controller runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Program,
    ReconcileOnly,
}

fn entry(name: &'static str, path: Path) -> Custom<Params> {
    let pointer = name == POINTER_ENTRY;
    let controller = match path {
        Path::Program => reconsim_kube::custom(name, kinds(), move |p: &Params, _, client| {
            user::run(client, p.fixed, pointer)
        }),
        Path::ReconcileOnly => Custom::reconcilers(name, move |p: &Params| {
            let fixed = p.fixed;
            let make = move |client| user::Ctx { client, fixed };
            let controller = reconsim_kube::Controller::<Member>::new(name, kinds());
            vec![if pointer {
                controller.run(user::publish, user::error_policy, make)
            } else {
                controller.run(user::register, user::error_policy, make)
            }]
        }),
    };
    controller.objects(move |_| {
        let object = |o: Result<_, ObjectError>| o.map_err(|e| ParamError::at("", e.to_string()));
        let mut objects = Vec::new();
        for name in MEMBERS {
            let mut m = Member::new(name, MemberSpec {});
            m.metadata.namespace = Some("default".into());
            objects.push(object(kinds().object(&m))?);
        }
        if !pointer {
            let mut registry = ConfigMap::default();
            registry.metadata.name = Some(REGISTRY.into());
            registry.metadata.namespace = Some("default".into());
            objects.push(object(kinds().object(&registry))?);
        }
        Ok(objects)
    })
}

/// Every Member's name in the registry, at the end.
fn registered(view: &View<'_>) -> Result<(), String> {
    let names = registry_names(view).ok_or("no registry")?;
    let missing: Vec<&str> = MEMBERS
        .into_iter()
        .filter(|m| !names.iter().any(|n| n == m))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("the registry lost {missing:?}"))
    }
}

/// The registry's names now.
fn registry_names(view: &View<'_>) -> Option<Vec<String>> {
    let registry = view
        .api
        .list(kind_of::<ConfigMap>())
        .find(|o| o.meta.name == REGISTRY)?;
    let cm: ConfigMap = reconsim_kube::wire::decode(registry)?;
    Some(cm.data.unwrap_or_default().into_keys().collect())
}

/// `registry_keeps_every_name`: a name once in the registry stays in it (a lost
/// update takes one out).
#[derive(Clone, Debug, Default)]
struct RegistryKeepsNames {
    seen: std::collections::BTreeSet<String>,
}

impl Check for RegistryKeepsNames {
    fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        let names = registry_names(view)?;
        if let Some(lost) = self.seen.iter().find(|n| !names.contains(n)) {
            return Some(Violation {
                invariant: REGISTRY_KEEPS_NAMES.into(),
                time: view.now,
                message: format!("the registry lost {lost}"),
                objects: vec![format!("ConfigMap {REGISTRY}")],
            });
        }
        self.seen.extend(names);
        None
    }
}

/// `no_dangling_pointer`: a pointer never names a ConfigMap that does not exist.
#[derive(Clone, Debug, Default)]
struct NoDanglingPointer;

impl Check for NoDanglingPointer {
    fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        let cms: Vec<_> = view.api.list(kind_of::<ConfigMap>()).collect();
        for o in &cms {
            let Some(cm) = reconsim_kube::wire::decode::<ConfigMap>(o) else {
                continue;
            };
            let Some(target) = cm.data.as_ref().and_then(|d| d.get(POINTS_AT)) else {
                continue;
            };
            if !cms.iter().any(|c| &c.meta.name == target) {
                return Some(Violation {
                    invariant: NO_DANGLING_POINTER.into(),
                    time: view.now,
                    message: format!("ConfigMap {} points at missing {target}", o.meta.name),
                    objects: vec![format!("ConfigMap {}", o.meta.name)],
                });
            }
        }
        None
    }
}

fn families(path: Path) -> Families {
    let extensions = Extensions::new()
        .controller(entry(REGISTRY_ENTRY, path).convergence(registered))
        .controller(entry(POINTER_ENTRY, path))
        .invariant(NO_DANGLING_POINTER, || Box::new(NoDanglingPointer))
        .invariant(REGISTRY_KEEPS_NAMES, || {
            Box::new(RegistryKeepsNames::default())
        })
        .host(reconsim_kube::intercept::host);
    reconsim::families::builtin().with(extensions)
}

fn scenario(entry: &str, fixed: bool, path: Path) -> Scenario {
    let invariants = if entry == POINTER_ENTRY {
        [NO_DANGLING_POINTER]
    } else {
        [REGISTRY_KEEPS_NAMES]
    };
    let mut doc = json!({
        "name": format!("{entry}-{}", if fixed { "fixed" } else { "buggy" }),
        "description": "issue 27's races of concurrency as written",
        "expect": if fixed { "clean" } else { "violation" },
        "seeds": 200,
        "duration_ms": 30000,
        "net": { "latency_ms": [1, 10] },
        "topology": { "control_plane_nodes": ["master-0"], "worker_nodes": [] },
        "controllers": { "custom": [
            { "name": entry, "node": "master-0", "params": { "fixed": fixed } }
        ] },
        "invariants": invariants,
    });
    if entry == REGISTRY_ENTRY {
        doc["convergence"] = json!({ "within_ms": 20000 });
    }
    Scenario::from_value("kube_races", "", &doc, &families(path)).expect("the scenario loads")
}

fn campaign(s: &Scenario) -> Report {
    fuzz(
        s,
        Campaign {
            start: 0,
            end: s.seeds,
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
            shard: None,
            stop_on_first: false,
            swarm: false,
        },
        &|_, _| {},
        &|_, _| {},
    )
}

/// The bug caught on the program path (by `invariant`), its fix clean there, and the
/// same bug clean on the reconcile-only path: the buggy program's scenario and report.
fn caught_only_in_the_program(entry: &str, invariant: &str) -> (Scenario, Report) {
    let s = scenario(entry, false, Path::Program);
    let buggy = campaign(&s);
    let first = buggy.failures.first().expect("a failure within 200 seeds");
    assert_eq!(first.invariant, invariant);
    eprintln!(
        "{entry}: {} of 200 seeds fail, first {}",
        buggy.failures.len(),
        first.seed
    );
    let fixed = campaign(&scenario(entry, true, Path::Program));
    assert!(fixed.failures.is_empty(), "{:?}", fixed.failures.first());
    let serial = campaign(&scenario(entry, false, Path::ReconcileOnly));
    assert!(serial.failures.is_empty(), "{:?}", serial.failures.first());
    (s, buggy)
}

#[test]
fn concurrent_reconciles_of_two_objects_lose_an_update_only_in_the_program() {
    // On the reconcile-only path, one reconcile at a time: the buggy replace never
    // races another.
    let (s, buggy) = caught_only_in_the_program(REGISTRY_ENTRY, REGISTRY_KEEPS_NAMES);
    let (outcome, _) = reconsim::scenario::run(&s, buggy.failures[0].seed);
    let v = outcome.violation.expect("the seed fails again");
    assert!(v.message.contains("the registry lost"), "{}", v.message);
}

#[test]
fn a_try_join_of_two_requests_lets_the_pointer_land_first_only_in_the_program() {
    // On the reconcile-only path, requests go one after another, in the order written:
    // the config always lands first.
    caught_only_in_the_program(POINTER_ENTRY, NO_DANGLING_POINTER);
}

#[test]
fn search_swaps_a_try_joins_two_requests_from_a_clean_reference_run() {
    // A seed whose run holds (both creates of every Member landed config first): the
    // exhaustive search's swaps of two requests in flight at once reach the other order.
    let s = scenario(POINTER_ENTRY, false, Path::Program);
    let report = campaign(&s);
    let clean = (0..s.seeds)
        .find(|seed| report.failures.iter().all(|f| f.seed != *seed))
        .expect("a seed whose run holds");
    let config = reconsim::scenario::search::SearchConfig {
        seed: clean,
        seeds: 1,
        max_plans: 200,
        exhaustive: Some(1),
        stop_on_first: true,
        jobs: 1,
        ..Default::default()
    };
    let found = reconsim::scenario::search::search(&s, &config, &|_, _, _, _, _| {});
    let one = &found.seeds[0];
    assert!(one.reference.violation.is_none(), "seed {clean}");
    let failure = found
        .failures
        .first()
        .expect("a swap that lands the pointer first");
    assert_eq!(failure.invariant, NO_DANGLING_POINTER);
    eprintln!(
        "search: seed {clean}, first failure after {:?} runs",
        found.runs_to_first_failure
    );
}
