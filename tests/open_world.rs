//! A user's family from outside the workspace's crates, as a user's crate would write it:
//! a kind of its own (`storage.example.dev/v1` Bucket), a service process of its own (a
//! storage API with its own request, answer and timer types), a controller that calls
//! that service with the same timeout and interleaving as an API call, its own typed
//! section of scenario files (`controllers.storage`), its own workload action
//! (`create_bucket`), its own invariant (`no_duplicate_buckets`) and convergence check.
//! It is registered like the builtin families (`builtin().with(StorageFamily)`) and
//! fuzzed through an ordinary scenario file.
//!
//! A crash of the controller between the storage create and its status write makes a
//! second bucket unless the create is idempotent (a client token, the Bucket's uid):
//! over a range of seeds the first variant duplicates and the second never does, and a
//! failure file replays to the same trace hash.

use reconsim::check::{Check, NamedCheck, View, Violation};
use reconsim::family::{
    Context, Family, FamilySection, ParamError, Services, WorkloadAction, params,
};
use reconsim::scenario::failure::FailureFile;
use reconsim::scenario::fuzz::{Campaign, Report, fuzz};
use reconsim::scenario::{Families, Scenario, runner};
use reconsim::sim::{ProcId, Sim, TraceMode};
use reconsim::world::api::ApiOp;
use reconsim::world::apiserver::ApiServer;
use reconsim::world::manager::{Manager, ManagerConfig};
use reconsim::world::msg::{Msg, Timer};
use reconsim::world::object::{Kind, KindInfo, Object, ObjectMeta, Resource};
use reconsim::world::runtime::{Action, Api, Client, Controller, Error, PatchParams};
use reconsim::world::{Component, Proc, WorldCtx};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

// ----- the kind ---------------------------------------------------------------------------

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
struct BucketSpec {
    region: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
struct BucketStatus {
    bucket_id: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
struct Bucket {
    spec: BucketSpec,
    status: BucketStatus,
}

impl Resource for Bucket {
    const KIND: Kind = Kind::new(&KindInfo::namespaced(
        "storage.example.dev",
        "v1",
        "Bucket",
        "buckets",
    ));
    reconsim::world::status_subresource!();
}

// ----- the service ------------------------------------------------------------------------

/// A request to the storage API.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
enum StorageOp {
    /// Create a bucket for `name`; with a `token`, a retry returns the first bucket.
    Create { name: String, token: Option<String> },
}

/// The storage API's answer: the bucket's id.
type StorageResult = Result<String, String>;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
enum StorageTimer {
    /// A request's service time is over: apply it and answer.
    Answer {
        from: ProcId,
        id: u64,
        op: StorageOp,
    },
}

/// The storage service: durable state (a crash of a client never touches it).
#[derive(Debug, Default)]
struct Storage {
    /// Bucket ids by the name they were created for, in creation order.
    buckets: Vec<(String, String)>,
    tokens: BTreeMap<String, String>,
}

impl Storage {
    fn count(&self, name: &str) -> usize {
        self.buckets.iter().filter(|(n, _)| n == name).count()
    }
}

impl Component for Storage {
    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        let Msg::Request { id, body } = msg else {
            return;
        };
        let Ok(op) = body.take::<StorageOp>() else {
            return;
        };
        let service_ms = ctx.draw_ms(5, 50);
        let timer = StorageTimer::Answer { from, id, op };
        ctx.set_timer(service_ms, Msg::family_timer(timer));
    }

    fn on_timer(&mut self, timer: Timer, ctx: &mut WorldCtx<'_>) {
        let Timer::Family(p) = timer else { return };
        let Ok(StorageTimer::Answer { from, id, op }) = p.take::<StorageTimer>() else {
            return;
        };
        let StorageOp::Create { name, token } = op;
        let known = token.as_ref().and_then(|t| self.tokens.get(t)).cloned();
        let bucket = known.unwrap_or_else(|| {
            let bucket = format!("bkt-{}", self.buckets.len() + 1);
            self.buckets.push((name, bucket.clone()));
            if let Some(t) = token {
                self.tokens.insert(t, bucket.clone());
            }
            bucket
        });
        let result: StorageResult = Ok(bucket);
        ctx.send(from, Msg::response(id, result));
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

// ----- the controller ---------------------------------------------------------------------

/// The controller's context: its client, where the storage service is, its variant.
struct BucketCtx {
    client: Client,
    storage: ProcId,
    idempotent: bool,
}

/// Gives every Bucket a storage bucket and records its id in the status.
async fn reconcile(bucket: Arc<Object>, ctx: Arc<BucketCtx>) -> Result<Action, Error> {
    let b = bucket.typed::<Bucket>().expect("a Bucket");
    if b.status.bucket_id.is_some() {
        return Ok(Action::await_change());
    }
    let token = ctx.idempotent.then(|| bucket.meta.uid.0.to_string());
    let op = StorageOp::Create {
        name: bucket.meta.name.clone(),
        token,
    };
    let created: StorageResult = ctx.client.call(ctx.storage, op).await?;
    // Between the storage create and the status write: where a crash hurts.
    ctx.client.failpoint("after-create").await?;
    let id = created.map_err(Error::Service)?;
    let buckets: Api<Bucket> = Api::namespaced(ctx.client.clone(), &bucket.meta.namespace);
    let status = Bucket {
        status: BucketStatus {
            bucket_id: Some(id),
        },
        ..Default::default()
    };
    buckets
        .patch_status(&bucket.meta.name, &PatchParams::default(), status)
        .await?;
    Ok(Action::await_change())
}

fn error_policy(_: Arc<Object>, _: &Error, _: Arc<BucketCtx>) -> Action {
    Action::requeue(Duration::from_secs(1))
}

// ----- the family ----------------------------------------------------------------------

/// `controllers.storage` of a scenario file, parsed into this type once.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StorageSection {
    /// `token`: creates carry the Bucket's uid as client token; `no-token`: they do not.
    variant: Variant,
    /// The node whose host runs the controller; the service gets a host of its own.
    node: String,
    /// Buckets at t = 0.
    #[serde(default)]
    buckets: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Variant {
    Token,
    NoToken,
}

/// `create_bucket`: the user creates a Bucket.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBucket {
    name: String,
}

fn bucket(name: &str) -> Object {
    Object::new(
        ObjectMeta::named("default", name),
        Bucket {
            spec: BucketSpec {
                region: "eu-west-1".into(),
            },
            status: BucketStatus::default(),
        },
    )
}

impl FamilySection for StorageSection {
    fn validate(&self, context: &Context<'_>) -> Result<(), ParamError> {
        context.node(".node", &self.node)?;
        if context.hosts.iter().any(|h| h == "storage") {
            return Err(ParamError::at(".node", "no node named `storage`"));
        }
        Ok(())
    }

    fn processes(&self) -> Vec<String> {
        vec!["storage".into(), "bucket-controller".into()]
    }

    fn seed(&self, server: &mut ApiServer) {
        for b in &self.buckets {
            server.seed_object(bucket(b));
        }
    }

    fn spawn(&self, sim: &mut Sim<Proc>, services: &Services) {
        let host = sim.add_host("storage");
        let storage = sim.spawn(host, "storage", Proc::new(Storage::default()));
        let idempotent = self.variant == Variant::Token;
        let controller = Controller::new::<Bucket>("bucket-controller").run(
            reconcile,
            error_policy,
            move |client| BucketCtx {
                client,
                storage,
                idempotent,
            },
        );
        let node = sim.host_by_name(&self.node).expect("validated");
        sim.spawn(
            node,
            "bucket-controller",
            Proc::new(Manager::new(
                ManagerConfig {
                    identity: "bucket-controller".into(),
                    leader: None,
                    kubelet: None,
                    pod: None,
                    ..Default::default()
                },
                services.endpoints,
                vec![controller],
            )),
        );
    }

    fn converged(&self, view: &View<'_>) -> Result<(), String> {
        for b in view.api.list(Bucket::KIND) {
            if b.typed::<Bucket>()
                .is_some_and(|b| b.status.bucket_id.is_none())
            {
                return Err(format!("Bucket {} has no bucket id", b.meta.name));
            }
        }
        Ok(())
    }

    fn workload(&self, actions: &[WorkloadAction<'_>]) -> Result<Vec<ApiOp>, ParamError> {
        actions
            .iter()
            .map(|a| {
                let CreateBucket { name } = a.params()?;
                if name.is_empty() || self.buckets.contains(&name) {
                    return Err(ParamError::at(a.path(".name"), "a new bucket's name"));
                }
                Ok(ApiOp::Create(Box::new(bucket(&name))))
            })
            .collect()
    }
}

/// No Bucket has two storage buckets.
#[derive(Clone, Debug, Default)]
struct NoDuplicateBuckets {
    storage: Option<ProcId>,
}

impl Check for NoDuplicateBuckets {
    fn check(&mut self, view: &View<'_>) -> Option<Violation> {
        let storage = view.find_cached::<Storage>(&mut self.storage)?;
        let mut names: Vec<&str> = storage.buckets.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        let twice = names.windows(2).find(|w| w[0] == w[1])?[0];
        Some(Violation {
            invariant: "no_duplicate_buckets".into(),
            time: view.now,
            message: format!(
                "Bucket {twice} has {} storage buckets",
                storage.count(twice)
            ),
            objects: vec![format!("Bucket default/{twice}")],
        })
    }
}

/// The family, registered like the builtin ones.
struct StorageFamily;

impl Family for StorageFamily {
    fn name(&self) -> &str {
        "storage"
    }

    fn parse(&self, section: &serde_json::Value) -> Result<Box<dyn FamilySection>, ParamError> {
        Ok(Box::new(params::parse::<StorageSection>(section)?))
    }

    fn actions(&self) -> &[&str] {
        &["create_bucket"]
    }

    fn invariants(&self) -> Vec<NamedCheck> {
        vec![NamedCheck::new("no_duplicate_buckets", || {
            Box::new(NoDuplicateBuckets::default())
        })]
    }
}

// ----- the scenario and the campaign -------------------------------------------------------

fn families() -> Families {
    reconsim::families::builtin().with(StorageFamily)
}

/// A scenario file of the family: one Bucket at t = 0, one the user creates at 2 s, and
/// one crash of the controller within its first 300 ms, for 1 s.
fn scenario(variant: &str) -> Scenario {
    let crash = r#"{"count": [1, 1], "at_ms": [0, 300], "duration_ms": [1000, 1000],
                    "fault": {"crash": {"processes": ["bucket-controller"]}}}"#;
    scenario_with(variant, crash)
}

fn scenario_with(variant: &str, faults: &str) -> Scenario {
    let text = format!(
        r#"{{
          "name": "storage-{variant}", "expect": "clean", "seeds": 300,
          "duration_ms": 10000,
          "topology": {{"control_plane_nodes": ["node"]}},
          "controllers": {{"storage": {{"variant": "{variant}", "node": "node", "buckets": ["b1"]}}}},
          "workload": [{{"at_ms": 2000, "action": {{"create_bucket": {{"name": "b2"}}}}}}],
          "faults": [{faults}],
          "invariants": ["no_duplicate_buckets"],
          "convergence": {{"within_ms": 5000}}
        }}"#
    );
    Scenario::parse("storage.json", &text, &families()).expect("the family's scenario loads")
}

/// Seeds 0..300 with every failure kept as a failure file.
fn campaign(s: &Scenario) -> (Report, Vec<FailureFile>) {
    let files = Mutex::new(Vec::new());
    let report = fuzz(
        s,
        Campaign {
            start: 0,
            end: 300,
            jobs: 2,
            shard: None,
            stop_on_first: false,
            swarm: false,
        },
        &|outcome, plan| {
            let f = FailureFile::new(s, plan, outcome).expect("a failing run");
            files.lock().unwrap().push(f);
        },
        &|_, _| {},
    );
    (report, files.into_inner().unwrap())
}

#[test]
fn a_users_family_fuzzes_through_a_scenario_file_like_the_seed_families() {
    let (report, files) = campaign(&scenario("no-token"));
    assert!(
        report
            .failures
            .iter()
            .all(|f| f.invariant == "no_duplicate_buckets"),
        "{:?}",
        report.failures
    );
    // Measured: 33 of these 300 seeds (0.5.0) duplicate.
    assert!(report.failures.len() > 10, "{:?}", report.failures);
    // A failure file of a user's family replays through the registry that knows it.
    let f = &files[0];
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "open-world-{}-{}.json",
        std::process::id(),
        f.seed
    ));
    f.save(&path).unwrap();
    let loaded = FailureFile::load(&path, &families()).unwrap();
    assert_eq!(&loaded, f);
    let replay = loaded.replay(TraceMode::Hash);
    assert!(replay.reproduced, "{:?}", replay.invariant);
    // Without the family, the file is refused with the field and the known families.
    let err = FailureFile::load(&path, &reconsim::families::builtin()).unwrap_err();
    assert_eq!(err.path, ".scenario.controllers.storage", "{err}");
    assert!(err.message.contains("(machine_api, mco, kcp, go)"), "{err}");
    std::fs::remove_file(&path).ok();

    let (report, _) = campaign(&scenario("token"));
    assert!(report.failures.is_empty(), "{:?}", report.failures);
}

#[test]
fn a_users_family_replays_to_the_same_hash_and_checks_its_fields() {
    for variant in ["no-token", "token"] {
        let s = scenario(variant);
        for seed in [0, 7, 42] {
            let (a, _) = runner::run(&s, seed);
            let (b, _) = runner::run(&s, seed);
            assert_eq!(a.trace_hash, b.trace_hash);
        }
    }
    let text = serde_json::to_string(&scenario("token")).unwrap();
    let bad = text.replace("\"token\"", "\"tokens\"");
    let err = Scenario::parse("x.json", &bad, &families()).unwrap_err();
    assert_eq!(err.path, ".controllers.storage.variant", "{err}");
    let bad = text.replace("\"b2\"", "\"b1\"");
    let err = Scenario::parse("x.json", &bad, &families()).unwrap_err();
    assert_eq!(err.path, ".workload[0].action.create_bucket.name", "{err}");
}

#[test]
fn a_failpoint_crash_between_the_create_and_the_status_write_duplicates_without_a_token() {
    // The failpoint `after-create` armed from t = 0 for 4 s: its 1st or 2nd hit (one per
    // bucket created) crashes the controller there, for 0.5-2 s.
    let failpoint = r#"{"count": [1, 1], "at_ms": [0, 0], "duration_ms": [4000, 4000],
        "fault": {"failpoint": {"processes": ["bucket-controller"], "name": "after-create",
                                "hit": [1, 2], "action": "crash", "for_ms": [500, 2000]}}}"#;
    for (variant, duplicates) in [("no-token", true), ("token", false)] {
        let s = scenario_with(variant, failpoint);
        for seed in 0..40 {
            let plan = reconsim::scenario::faults::generate(&s, seed);
            let (outcome, world) = runner::run_world(&s, seed, plan, TraceMode::Full);
            let hit = world
                .sim
                .trace()
                .records()
                .iter()
                .any(|r| matches!(r.kind, reconsim::sim::RecordKind::Crashed { .. }));
            assert!(
                hit,
                "{variant} seed {seed}: the failpoint is hit in every run"
            );
            let invariant = outcome.violation.as_ref().map(|v| v.invariant.as_str());
            if duplicates {
                assert_eq!(invariant, Some("no_duplicate_buckets"), "seed {seed}");
                if seed == 0 {
                    // explain shows the hit and the crash.
                    let f = FailureFile::new(&s, world.sim.plan(), &outcome).unwrap();
                    let e = reconsim::scenario::explain::explain(&f).expect("it fails");
                    let text = e.lines.join("\n");
                    assert!(text.contains("failpoint after-create hit #"), "{text}");
                    assert!(text.contains("crashes at a failpoint"), "{text}");
                    // It shrinks and replays like any failure.
                    let (small, _) = reconsim::scenario::shrink::shrink(&f, 100);
                    assert_eq!(small.invariant, "no_duplicate_buckets");
                    assert_eq!(small.plan.len(), 1);
                    assert!(small.replay(TraceMode::Hash).reproduced);
                }
            } else {
                assert_eq!(invariant, None, "seed {seed}: {:?}", outcome.violation);
            }
        }
    }
}
