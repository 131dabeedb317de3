//! Integration tests of the simulated API server (docs/semantics.md section 3).
//!
//! Every request crosses the simulated network. The [`World`] helper gives the tests a
//! synchronous-looking client: `call` spawns a one-step [`Script`] process that sends the
//! request shortly after "now", runs the simulation until the answer is surely back and
//! returns it. Watches are opened by long-lived scripts whose `events` the tests read.

use reconsim_sim::{Fault, FaultPlan, ProcId, Sim, SimConfig, SimTime, TimedFault, TraceMode};
use reconsim_world::api::{ApiError, ApiOk, ApiOp, EventType, PatchOp, WatchEvent};
use reconsim_world::apiserver::{ApiServer, ApiServerConfig, POD_GRACE_PERIOD_SECONDS_DEFAULT};
use reconsim_world::object::Resource;
use reconsim_world::object::{
    Body, Kind, Node, OwnerReference, Pod, PodPhase, PodSpec, PodStatus, TaintEffect, Toleration,
    Uid,
};
use reconsim_world::script::{Script, Step};
use reconsim_world::{Object, ObjectKey, ObjectMeta, Proc, WorldFault};
use std::collections::BTreeSet;
use std::sync::Arc;

mod common;
use common::{Widget, WidgetFields, WidgetSet, WidgetStatus};

const NS: &str = "reconsim-test";
/// Longer than any network round trip (latency is 1-5 ms each way).
const ROUND_TRIP_MS: u64 = 50;

struct World {
    sim: Sim<Proc>,
    api: ProcId,
    calls: usize,
    /// The test's clock: where the last run stopped.
    t: u64,
}

impl World {
    fn new(config: ApiServerConfig) -> Self {
        Self::with_plan(1, config, FaultPlan::default())
    }

    fn with_plan(seed: u64, config: ApiServerConfig, plan: FaultPlan<WorldFault>) -> Self {
        let mut cfg = SimConfig::new(seed);
        cfg.trace = TraceMode::Full;
        let mut sim = Sim::new(cfg, plan);
        let h_api = sim.add_host("api");
        sim.add_host("client");
        let api = sim.spawn(h_api, "apiserver", Proc::ApiServer(ApiServer::new(config)));
        World {
            sim,
            api,
            calls: 0,
            t: 0,
        }
    }

    fn server(&self) -> &ApiServer {
        match self.sim.actor(self.api) {
            Proc::ApiServer(a) => a,
            p => panic!("not the API server: {p:?}"),
        }
    }

    fn script(&self, pid: ProcId) -> &Script {
        match self.sim.actor(pid) {
            Proc::Script(s) => s,
            p => panic!("not a script: {p:?}"),
        }
    }

    /// Send one request from a fresh client process and wait for its answer.
    fn call(&mut self, op: ApiOp) -> Result<ApiOk, ApiError> {
        self.calls += 1;
        let at_ms = self.t + 1;
        let host = self.sim.host_by_name("client").unwrap();
        let pid = self.sim.spawn(
            host,
            &format!("call-{}", self.calls),
            Proc::Script(Script::new(self.api, vec![Step { at_ms, op }])),
        );
        self.run_for(ROUND_TRIP_MS);
        self.script(pid)
            .response(0)
            .expect("the API server answers")
            .result
            .clone()
    }

    /// A call that must return an object.
    fn obj(&mut self, op: ApiOp) -> Arc<Object> {
        match self.call(op.clone()) {
            Ok(ApiOk::Object(o)) => o,
            r => panic!("{op:?} returned {r:?}"),
        }
    }

    /// Run `ms` past the test's clock.
    fn run_for(&mut self, ms: u64) {
        self.run_to(self.t + ms);
    }

    /// Run to `t_ms` (the kernel's `now` stays at the last event; the test's clock moves).
    fn run_to(&mut self, t_ms: u64) {
        self.sim.run_until(SimTime::from_ms(t_ms));
        self.t = self.t.max(t_ms);
    }

    /// A client that opens a watch at `at_ms` and keeps every event.
    fn watcher(&mut self, name: &str, at_ms: u64, kinds: Vec<Kind>, from_rv: u64) -> ProcId {
        let host = self.sim.host_by_name("client").unwrap();
        let op = ApiOp::Watch {
            stream: 0,
            kinds,
            from_rv,
        };
        self.sim.spawn(
            host,
            name,
            Proc::Script(Script::new(self.api, vec![Step { at_ms, op }])),
        )
    }

    fn events(&self, pid: ProcId) -> Vec<WatchEvent> {
        self.script(pid)
            .events
            .iter()
            .map(|(_, e)| e.clone())
            .collect()
    }

    fn stored(&self, key: &ObjectKey) -> Option<Arc<Object>> {
        self.server().get(key).cloned()
    }
}

fn widget(name: &str) -> Object {
    Object::new(ObjectMeta::named(NS, name), Body::new(Widget::default()))
}

fn widget_set(name: &str) -> Object {
    Object::new(ObjectMeta::named(NS, name), Body::new(WidgetSet::default()))
}

fn key(kind: Kind, name: &str) -> ObjectKey {
    ObjectKey::new(kind, NS, name)
}

fn wkey(name: &str) -> ObjectKey {
    key(Widget::KIND, name)
}

fn owner(o: &Object) -> OwnerReference {
    OwnerReference {
        kind: o.kind(),
        name: o.meta.name.clone(),
        uid: o.meta.uid,
        controller: true,
    }
}

fn patch(key: &ObjectKey, ops: Vec<PatchOp>) -> ApiOp {
    ApiOp::Patch {
        key: key.clone(),
        ops,
        resource_version: None,
    }
}

fn delete(key: &ObjectKey) -> ApiOp {
    ApiOp::Delete {
        key: key.clone(),
        uid: None,
        grace_period_seconds: None,
    }
}

fn widget_status(phase: &str) -> Body {
    Body::new(Widget {
        spec: Default::default(),
        status: WidgetStatus {
            phase: Some(phase.into()),
            ..Default::default()
        },
    })
}

fn widget_spec(provider_id: &str) -> Body {
    let mut m = Widget::default();
    m.spec.provider_id = Some(provider_id.into());
    Body::new(m)
}

// ----- metadata ---------------------------------------------------------------------------

#[test]
fn uids_are_unique_and_a_recreated_name_gets_a_new_uid() {
    let mut w = World::new(Default::default());
    let a1 = w.obj(ApiOp::Create(Box::new(widget("a"))));
    let b = w.obj(ApiOp::Create(Box::new(widget("b"))));
    assert_eq!(w.call(delete(&wkey("a"))), Ok(ApiOk::Deleted));
    let a2 = w.obj(ApiOp::Create(Box::new(widget("a"))));
    let uids: BTreeSet<Uid> = [a1.meta.uid, b.meta.uid, a2.meta.uid].into();
    assert_eq!(uids.len(), 3, "uids must be unique: {uids:?}");
    assert!(!uids.contains(&Uid(0)));
    assert_ne!(
        a1.meta.uid, a2.meta.uid,
        "a re-created name must not reuse the uid"
    );
    assert!(w.server().by_uid(a1.meta.uid).is_none());
    assert_eq!(w.server().by_uid(a2.meta.uid).unwrap().meta.name, "a");
}

#[test]
fn client_supplied_server_metadata_is_ignored_on_create() {
    let mut w = World::new(Default::default());
    let mut m = widget("a");
    m.meta.uid = Uid(999);
    m.meta.resource_version = 999;
    m.meta.generation = 7;
    m.meta.creation_timestamp = SimTime::from_secs(999);
    m.meta.deletion_timestamp = Some(SimTime::from_secs(5));
    let a = w.obj(ApiOp::Create(Box::new(m)));
    assert_ne!(a.meta.uid, Uid(999));
    assert_eq!(a.meta.resource_version, w.server().resource_version());
    assert_eq!(a.meta.generation, 1);
    assert!(a.meta.creation_timestamp < SimTime::from_secs(1));
    assert_eq!(a.meta.deletion_timestamp, None);
}

#[test]
fn resource_version_is_one_global_increasing_counter() {
    let mut w = World::new(Default::default());
    let label = |name: &str| {
        patch(
            &wkey(name),
            vec![PatchOp::SetLabel("x".into(), Some("1".into()))],
        )
    };
    let ops = [
        ApiOp::Create(Box::new(widget("a"))),
        ApiOp::Create(Box::new(widget("b"))),
        label("a"),
        ApiOp::Create(Box::new(widget_set("s"))),
        label("b"),
    ];
    let rvs: Vec<u64> = ops
        .into_iter()
        .map(|op| w.obj(op).meta.resource_version)
        .collect();
    // A delete is a write too.
    assert_eq!(w.call(delete(&wkey("a"))), Ok(ApiOk::Deleted));
    let after_delete = w
        .obj(ApiOp::Create(Box::new(widget("c"))))
        .meta
        .resource_version;
    for pair in rvs.windows(2) {
        assert_eq!(
            pair[1],
            pair[0] + 1,
            "one counter across objects and kinds: {rvs:?}"
        );
    }
    assert_eq!(
        after_delete,
        rvs[4] + 2,
        "the delete took one resourceVersion"
    );
    assert_eq!(w.server().resource_version(), after_delete);
    // A list reports the store-wide resourceVersion.
    match w.call(ApiOp::List {
        kind: Widget::KIND,
        namespace: None,
        from_watch_cache: false,
    }) {
        Ok(ApiOk::List {
            items,
            resource_version,
        }) => {
            assert_eq!(resource_version, after_delete);
            let names: Vec<&str> = items.iter().map(|o| o.meta.name.as_str()).collect();
            assert_eq!(names, ["b", "c"]);
        }
        r => panic!("list: {r:?}"),
    }
}

#[test]
fn generation_bumps_on_spec_changes_only() {
    let mut w = World::new(Default::default());
    let k = wkey("a");
    let a = w.obj(ApiOp::Create(Box::new(widget("a"))));
    assert_eq!(a.meta.generation, 1);
    let s = w.obj(patch(
        &k,
        vec![PatchOp::Status(widget_status("Provisioning"))],
    ));
    assert_eq!(s.meta.generation, 1, "a status-only patch keeps generation");
    assert!(s.meta.resource_version > a.meta.resource_version);
    let l = w.obj(patch(
        &k,
        vec![
            PatchOp::SetLabel("l".into(), Some("v".into())),
            PatchOp::SetAnnotation("n".into(), Some("v".into())),
            PatchOp::AddFinalizer("f".into()),
        ],
    ));
    assert_eq!(l.meta.generation, 1, "metadata changes keep generation");
    let i = w.obj(patch(
        &k,
        vec![PatchOp::from(WidgetFields {
            provider_id: None,
            instance_id: Some("i-1".into()),
            phase: None,
        })],
    ));
    assert_eq!(i.meta.generation, 1, "instanceId is status");
    let p = w.obj(patch(&k, vec![PatchOp::Spec(widget_spec("aws:///z/i-1"))]));
    assert_eq!(p.meta.generation, 2, "a spec change bumps generation");
    assert_eq!(
        p.typed::<Widget>().unwrap().status.phase.as_deref(),
        Some("Provisioning")
    );
    // A full update that changes only status keeps it too.
    let mut upd = (*p).clone();
    upd.typed_mut::<Widget>().unwrap().status.phase = Some("Running".into());
    let u = w.obj(ApiOp::Update {
        object: Box::new(upd.clone()),
        precondition: true,
    });
    assert_eq!(u.meta.generation, 2);
    // ... and a client cannot set generation itself.
    let mut upd = (*u).clone();
    upd.meta.generation = 40;
    upd.typed_mut::<Widget>().unwrap().spec.provider_id = Some("aws:///z/i-2".into());
    let u2 = w.obj(ApiOp::Update {
        object: Box::new(upd),
        precondition: true,
    });
    assert_eq!(u2.meta.generation, 3);
}

#[test]
fn creation_timestamp_is_the_server_clock() {
    // The API server's clock runs 1000 s ahead: timestamps are its clock, not the client's.
    let plan = FaultPlan::new(vec![TimedFault {
        at_ms: 0,
        duration_ms: None,
        fault: Fault::ClockSkew {
            process: "apiserver".into(),
            offset_ms: 1_000_000,
        },
        on: None,
    }]);
    let mut w = World::with_plan(1, Default::default(), plan);
    w.run_to(2_000);
    let sent_at = w.t + 1;
    let a = w.obj(ApiOp::Create(Box::new(widget("a"))));
    let t = a.meta.creation_timestamp.as_ms();
    assert!(
        (1_000_000 + sent_at..1_000_000 + sent_at + ROUND_TRIP_MS).contains(&t),
        "creationTimestamp {t} is not the server's clock"
    );
    // Updates keep it.
    let mut upd = (*a).clone();
    upd.meta.creation_timestamp = SimTime::ZERO;
    upd.meta.labels.insert("x".into(), "y".into());
    let u = w.obj(ApiOp::Update {
        object: Box::new(upd),
        precondition: false,
    });
    assert_eq!(u.meta.creation_timestamp, a.meta.creation_timestamp);
}

// ----- create ------------------------------------------------------------------------------

#[test]
fn create_of_a_taken_name_is_already_exists() {
    let mut w = World::new(Default::default());
    let a = w.obj(ApiOp::Create(Box::new(widget("a"))));
    assert_eq!(
        w.call(ApiOp::Create(Box::new(widget("a")))),
        Err(ApiError::AlreadyExists)
    );
    // Same name in another kind or namespace is another object.
    w.obj(ApiOp::Create(Box::new(widget_set("a"))));
    w.obj(ApiOp::Create(Box::new(Object::new(
        ObjectMeta::named("other", "a"),
        Body::new(Widget::default()),
    ))));
    // A deleting object still holds its name.
    w.obj(patch(&wkey("a"), vec![PatchOp::AddFinalizer("f".into())]));
    w.obj(delete(&wkey("a")));
    assert_eq!(
        w.call(ApiOp::Create(Box::new(widget("a")))),
        Err(ApiError::AlreadyExists)
    );
    assert_eq!(w.stored(&wkey("a")).unwrap().meta.uid, a.meta.uid);
}

#[test]
fn generate_name_gives_unique_names_from_the_real_alphabet() {
    const ALPHABET: &str = "bcdfghjklmnpqrstvwxz2456789";
    let mut w = World::new(Default::default());
    let mut names = BTreeSet::new();
    for _ in 0..60 {
        let mut m = widget("");
        m.meta.generate_name = Some("worker-".into());
        let o = w.obj(ApiOp::Create(Box::new(m)));
        let name = o.meta.name.clone();
        let suffix = name.strip_prefix("worker-").expect("keeps the prefix");
        assert_eq!(suffix.len(), 5, "{name}");
        assert!(suffix.chars().all(|c| ALPHABET.contains(c)), "{name}");
        assert!(
            names.insert(name.clone()),
            "duplicate generated name {name}"
        );
        assert_eq!(o.meta.generate_name.as_deref(), Some("worker-"));
    }
    // The suffixes are random, not a counter: many distinct characters show up.
    let chars: BTreeSet<char> = names.iter().flat_map(|n| n[7..].chars()).collect();
    assert!(chars.len() > 15, "{chars:?}");
    // A long prefix is cut to 58 characters (63 with the suffix).
    let mut m = widget("");
    m.meta.generate_name = Some("p".repeat(80));
    let o = w.obj(ApiOp::Create(Box::new(m)));
    assert_eq!(o.meta.name.len(), 63);
    assert!(o.meta.name.starts_with(&"p".repeat(58)));
}

#[test]
fn create_without_name_or_generate_name_is_invalid() {
    let mut w = World::new(Default::default());
    assert!(matches!(
        w.call(ApiOp::Create(Box::new(widget("")))),
        Err(ApiError::Invalid(_))
    ));
    // Namespaced kinds need a namespace; cluster-scoped ones must not have one.
    let no_ns = Object::new(ObjectMeta::named("", "m"), Body::new(Widget::default()));
    assert!(matches!(
        w.call(ApiOp::Create(Box::new(no_ns))),
        Err(ApiError::Invalid(_))
    ));
    let node_ns = Object::new(ObjectMeta::named(NS, "n"), Body::new(Node::default()));
    assert!(matches!(
        w.call(ApiOp::Create(Box::new(node_ns))),
        Err(ApiError::Invalid(_))
    ));
    let node = Object::new(ObjectMeta::named("", "n"), Body::new(Node::default()));
    w.obj(ApiOp::Create(Box::new(node)));
    assert_eq!(w.server().objects().count(), 1);
    assert_eq!(
        w.server().resource_version(),
        1,
        "rejected creates write nothing"
    );
}

// ----- update and patch -----------------------------------------------------------------

#[test]
fn update_with_a_stale_resource_version_is_a_conflict() {
    let mut w = World::new(Default::default());
    let a = w.obj(ApiOp::Create(Box::new(widget("a"))));
    let mut first = (*a).clone();
    first.meta.labels.insert("writer".into(), "first".into());
    let mut second = (*a).clone();
    second.meta.labels.insert("writer".into(), "second".into());
    let f = w.obj(ApiOp::Update {
        object: Box::new(first),
        precondition: true,
    });
    // Both read the same version; the second writer is stale now.
    assert_eq!(
        w.call(ApiOp::Update {
            object: Box::new(second.clone()),
            precondition: true,
        }),
        Err(ApiError::Conflict)
    );
    assert_eq!(w.stored(&wkey("a")).unwrap(), f);
    // GET and retry succeeds.
    second.meta.resource_version = f.meta.resource_version;
    let s = w.obj(ApiOp::Update {
        object: Box::new(second),
        precondition: true,
    });
    assert_eq!(s.meta.labels["writer"], "second");
    assert!(s.meta.resource_version > f.meta.resource_version);
}

#[test]
fn update_without_precondition_last_writer_wins() {
    let mut w = World::new(Default::default());
    let a = w.obj(ApiOp::Create(Box::new(widget("a"))));
    let mut first = (*a).clone();
    first.meta.labels.insert("writer".into(), "first".into());
    let mut second = (*a).clone();
    second
        .meta
        .annotations
        .insert("writer".into(), "second".into());
    w.obj(ApiOp::Update {
        object: Box::new(first),
        precondition: false,
    });
    let s = w.obj(ApiOp::Update {
        object: Box::new(second),
        precondition: false,
    });
    // A PUT replaces the whole object: the first writer's label is gone.
    assert!(s.meta.labels.is_empty());
    assert_eq!(s.meta.annotations["writer"], "second");
    assert_eq!(w.stored(&wkey("a")).unwrap(), s);
}

#[test]
fn update_of_a_recreated_object_is_a_conflict_by_uid() {
    let mut w = World::new(Default::default());
    let old = w.obj(ApiOp::Create(Box::new(widget("a"))));
    w.call(delete(&wkey("a"))).unwrap();
    let new = w.obj(ApiOp::Create(Box::new(widget("a"))));
    let mut stale = (*old).clone();
    stale.meta.labels.insert("x".into(), "y".into());
    assert_eq!(
        w.call(ApiOp::Update {
            object: Box::new(stale),
            precondition: false,
        }),
        Err(ApiError::Conflict)
    );
    assert_eq!(w.stored(&wkey("a")).unwrap(), new);
    // Update of a missing object is NotFound.
    assert_eq!(
        w.call(ApiOp::Update {
            object: Box::new(widget("zz")),
            precondition: false,
        }),
        Err(ApiError::NotFound)
    );
}

#[test]
fn patch_ops_change_only_their_fields() {
    let mut w = World::new(Default::default());
    let k = wkey("a");
    let set = w.obj(ApiOp::Create(Box::new(widget_set("s"))));
    let other = w.obj(ApiOp::Create(Box::new(widget_set("t"))));
    w.obj(ApiOp::Create(Box::new(widget("a"))));

    let o = w.obj(patch(
        &k,
        vec![
            PatchOp::AddFinalizer("f1".into()),
            PatchOp::AddFinalizer("f2".into()),
            PatchOp::AddFinalizer("f1".into()),
        ],
    ));
    assert_eq!(
        o.meta.finalizers,
        ["f1", "f2"],
        "AddFinalizer is idempotent"
    );
    let o = w.obj(patch(&k, vec![PatchOp::RemoveFinalizer("f1".into())]));
    assert_eq!(o.meta.finalizers, ["f2"]);

    let o = w.obj(patch(
        &k,
        vec![
            PatchOp::SetLabel("a".into(), Some("1".into())),
            PatchOp::SetLabel("b".into(), Some("2".into())),
            PatchOp::SetAnnotation("n".into(), Some("x".into())),
        ],
    ));
    assert_eq!(o.meta.labels.len(), 2);
    assert_eq!(o.meta.annotations["n"], "x");
    let o = w.obj(patch(
        &k,
        vec![
            PatchOp::SetLabel("a".into(), None),
            PatchOp::SetAnnotation("n".into(), None),
        ],
    ));
    assert_eq!(o.meta.labels.keys().collect::<Vec<_>>(), ["b"]);
    assert!(o.meta.annotations.is_empty());

    let o = w.obj(patch(
        &k,
        vec![PatchOp::SetOwnerReferences(vec![
            owner(&set),
            owner(&other),
        ])],
    ));
    assert_eq!(o.meta.owner_references.len(), 2);
    let o = w.obj(patch(&k, vec![PatchOp::RemoveOwnerReference(set.meta.uid)]));
    assert_eq!(o.meta.owner_references, [owner(&other)]);

    let o = w.obj(patch(&k, vec![PatchOp::Status(widget_status("Running"))]));
    assert_eq!(
        o.typed::<Widget>().unwrap().status.phase.as_deref(),
        Some("Running")
    );
    let o = w.obj(patch(&k, vec![PatchOp::Spec(widget_spec("aws:///z/i-9"))]));
    let m = o.typed::<Widget>().unwrap();
    assert_eq!(m.spec.provider_id.as_deref(), Some("aws:///z/i-9"));
    assert_eq!(
        m.status.phase.as_deref(),
        Some("Running"),
        "a spec patch keeps status"
    );

    // A typed merge patch sets only what it carries.
    let o = w.obj(patch(
        &k,
        vec![PatchOp::from(WidgetFields {
            provider_id: None,
            instance_id: Some("i-9".into()),
            phase: None,
        })],
    ));
    let m = o.typed::<Widget>().unwrap();
    assert_eq!(m.spec.provider_id.as_deref(), Some("aws:///z/i-9"));
    assert_eq!(m.status.instance_id.as_deref(), Some("i-9"));
    assert_eq!(m.status.phase.as_deref(), Some("Running"));
    // Kinds must match.
    let r = w.call(patch(&k, vec![PatchOp::Status(Body::new(Pod::default()))]));
    assert!(matches!(r, Err(ApiError::Invalid(_))), "{r:?}");
    let r = w.call(patch(
        &key(WidgetSet::KIND, "s"),
        vec![PatchOp::from(WidgetFields {
            provider_id: Some("p".into()),
            instance_id: None,
            phase: None,
        })],
    ));
    assert!(matches!(r, Err(ApiError::Invalid(_))), "{r:?}");
    // A failed patch applies none of its ops.
    let before = w.stored(&k).unwrap();
    let r = w.call(patch(
        &k,
        vec![
            PatchOp::SetLabel("c".into(), Some("3".into())),
            PatchOp::Spec(Body::new(Pod::default())),
        ],
    ));
    assert!(matches!(r, Err(ApiError::Invalid(_))));
    assert_eq!(w.stored(&k).unwrap(), before);
    assert_eq!(w.call(patch(&wkey("zz"), vec![])), Err(ApiError::NotFound));
}

#[test]
fn conditional_patch_with_a_stale_resource_version_is_a_conflict() {
    let mut w = World::new(Default::default());
    let k = wkey("a");
    let a = w.obj(ApiOp::Create(Box::new(widget("a"))));
    let b = w.obj(patch(
        &k,
        vec![PatchOp::SetLabel("x".into(), Some("1".into()))],
    ));
    let stale = ApiOp::Patch {
        key: k.clone(),
        ops: vec![PatchOp::SetLabel("y".into(), Some("1".into()))],
        resource_version: Some(a.meta.resource_version),
    };
    assert_eq!(w.call(stale), Err(ApiError::Conflict));
    assert_eq!(w.stored(&k).unwrap(), b);
    let fresh = ApiOp::Patch {
        key: k.clone(),
        ops: vec![PatchOp::SetLabel("y".into(), Some("1".into()))],
        resource_version: Some(b.meta.resource_version),
    };
    assert_eq!(w.obj(fresh).meta.labels.len(), 2);
}

#[test]
fn a_no_op_write_bumps_nothing_and_emits_no_event() {
    let mut w = World::new(Default::default());
    let k = wkey("a");
    let watch = w.watcher("watch", 1, vec![Widget::KIND], 0);
    w.run_to(100);
    w.obj(ApiOp::Create(Box::new(widget("a"))));
    let a = w.obj(patch(
        &k,
        vec![
            PatchOp::AddFinalizer("f".into()),
            PatchOp::SetLabel("l".into(), Some("v".into())),
        ],
    ));
    let rv = w.server().resource_version();
    let writes = w.server().writes();
    let events = w.events(watch).len();
    assert_eq!(events, 2);

    let same = vec![
        w.obj(patch(&k, vec![PatchOp::AddFinalizer("f".into())])),
        w.obj(patch(
            &k,
            vec![PatchOp::SetLabel("l".into(), Some("v".into()))],
        )),
        w.obj(patch(&k, vec![PatchOp::RemoveFinalizer("absent".into())])),
        w.obj(patch(
            &k,
            vec![PatchOp::SetAnnotation("absent".into(), None)],
        )),
        w.obj(patch(
            &k,
            vec![PatchOp::Status(Body::new(Widget::default()))],
        )),
        w.obj(ApiOp::Update {
            object: Box::new((*a).clone()),
            precondition: true,
        }),
    ];
    for o in same {
        assert_eq!(o, a);
    }
    w.run_for(100);
    assert_eq!(w.server().resource_version(), rv);
    assert_eq!(w.server().writes(), writes);
    assert_eq!(w.events(watch).len(), events, "no event for a no-op write");
}

// ----- delete ------------------------------------------------------------------------------

#[test]
fn delete_with_finalizers_marks_then_the_last_finalizer_removes() {
    let mut w = World::new(Default::default());
    let k = wkey("a");
    let watch = w.watcher("watch", 1, vec![Widget::KIND], 0);
    w.run_to(100);
    w.obj(ApiOp::Create(Box::new(widget("a"))));
    let a = w.obj(patch(
        &k,
        vec![
            PatchOp::AddFinalizer("f1".into()),
            PatchOp::AddFinalizer("f2".into()),
        ],
    ));
    w.run_to(5_000);
    let before = w.t;
    let d = w.obj(delete(&k));
    let ts = d
        .meta
        .deletion_timestamp
        .expect("deletionTimestamp set")
        .as_ms();
    assert!(
        (before..before + ROUND_TRIP_MS).contains(&ts),
        "{ts} vs {before}"
    );
    assert_eq!(
        d.meta.generation,
        a.meta.generation + 1,
        "deletion bumps generation once"
    );
    assert_eq!(
        w.stored(&k).unwrap(),
        d,
        "the object stays while finalizers remain"
    );

    // Deleting again changes nothing.
    assert_eq!(w.obj(delete(&k)), d);
    // No finalizer may be added now (422), not by patch nor by update.
    let r = w.call(patch(&k, vec![PatchOp::AddFinalizer("f3".into())]));
    assert!(matches!(r, Err(ApiError::Invalid(_))), "{r:?}");
    let mut upd = (*d).clone();
    upd.meta.finalizers.push("f3".into());
    let r = w.call(ApiOp::Update {
        object: Box::new(upd),
        precondition: true,
    });
    assert!(matches!(r, Err(ApiError::Invalid(_))), "{r:?}");
    // deletionTimestamp cannot be cleared by a client.
    let mut upd = (*d).clone();
    upd.meta.deletion_timestamp = None;
    upd.meta.labels.insert("x".into(), "y".into());
    let u = w.obj(ApiOp::Update {
        object: Box::new(upd),
        precondition: true,
    });
    assert_eq!(u.meta.deletion_timestamp, d.meta.deletion_timestamp);
    // Other writes still work; removing one finalizer keeps it.
    let one = w.obj(patch(&k, vec![PatchOp::RemoveFinalizer("f1".into())]));
    assert_eq!(one.meta.finalizers, ["f2"]);
    assert!(w.stored(&k).is_some());
    // The last one goes: the object goes, with a DELETED event.
    assert_eq!(
        w.call(patch(&k, vec![PatchOp::RemoveFinalizer("f2".into())])),
        Ok(ApiOk::Deleted)
    );
    assert!(w.stored(&k).is_none());
    w.run_for(100);
    let evs = w.events(watch);
    let last = evs.last().unwrap();
    assert_eq!(last.event, EventType::Deleted);
    assert!(last.object.meta.finalizers.is_empty());
    assert_eq!(
        last.object.meta.resource_version,
        w.server().resource_version()
    );
    let types: Vec<EventType> = evs.iter().map(|e| e.event).collect();
    use EventType::*;
    assert_eq!(
        types,
        [Added, Modified, Modified, Modified, Modified, Deleted]
    );
}

#[test]
fn delete_with_a_uid_precondition_spares_a_recreated_object() {
    let mut w = World::new(Default::default());
    let k = wkey("a");
    let old = w.obj(ApiOp::Create(Box::new(widget("a"))));
    w.call(delete(&k)).unwrap();
    let new = w.obj(ApiOp::Create(Box::new(widget("a"))));
    let by_old_uid = ApiOp::Delete {
        key: k.clone(),
        uid: Some(old.meta.uid),
        grace_period_seconds: None,
    };
    assert_eq!(w.call(by_old_uid), Err(ApiError::Conflict));
    assert_eq!(w.stored(&k).unwrap(), new);
    let by_new_uid = ApiOp::Delete {
        key: k.clone(),
        uid: Some(new.meta.uid),
        grace_period_seconds: None,
    };
    assert_eq!(w.call(by_new_uid), Ok(ApiOk::Deleted));
    assert_eq!(w.call(delete(&k)), Err(ApiError::NotFound));
}

fn pod(name: &str, node: Option<&str>) -> Object {
    Object::new(
        ObjectMeta::named(NS, name),
        Body::new(Pod {
            spec: PodSpec {
                node_name: node.map(str::to_string),
                image: "controller".into(),
                ..Default::default()
            },
            status: PodStatus::default(),
        }),
    )
}

#[test]
fn bound_pods_are_deleted_gracefully_unless_grace_is_zero() {
    let mut w = World::new(Default::default());
    let pk = |n: &str| key(Pod::KIND, n);
    w.obj(ApiOp::Create(Box::new(pod("unbound", None))));
    w.obj(ApiOp::Create(Box::new(pod("bound", Some("node-1")))));
    w.obj(ApiOp::Create(Box::new(pod("forced", Some("node-1")))));
    w.run_to(10_000);

    // Unbound: gone at once.
    assert_eq!(w.call(delete(&pk("unbound"))), Ok(ApiOk::Deleted));
    // Bound, grace 0 (force): gone at once.
    let force = ApiOp::Delete {
        key: pk("forced"),
        uid: None,
        grace_period_seconds: Some(0),
    };
    assert_eq!(w.call(force), Ok(ApiOk::Deleted));
    // Bound: marked, deletionTimestamp = now + 30 s (semantics 3.6), and it stays.
    let before = w.t;
    let d = w.obj(delete(&pk("bound")));
    let ts = d.meta.deletion_timestamp.unwrap().as_ms();
    let grace_ms = POD_GRACE_PERIOD_SECONDS_DEFAULT * 1000;
    assert!(
        (before + grace_ms..before + grace_ms + ROUND_TRIP_MS).contains(&ts),
        "{ts}"
    );
    w.run_for(60_000);
    assert!(
        w.stored(&pk("bound")).is_some(),
        "the grace period alone removes nothing"
    );
    // Writes to the terminating pod (its status, a label) do not remove it (it has no
    // finalizers, but it waits for its kubelet).
    let status = Body::new(Pod {
        spec: PodSpec::default(),
        status: PodStatus {
            phase: PodPhase::Failed,
            restart_count: 0,
            ..Default::default()
        },
    });
    let s = w.obj(patch(&pk("bound"), vec![PatchOp::Status(status)]));
    assert!(s.meta.is_deleting());
    w.obj(patch(
        &pk("bound"),
        vec![PatchOp::SetLabel("x".into(), Some("y".into()))],
    ));
    assert!(w.stored(&pk("bound")).is_some());
    // The kubelet confirms with grace 0: gone.
    let confirm = ApiOp::Delete {
        key: pk("bound"),
        uid: Some(d.meta.uid),
        grace_period_seconds: Some(0),
    };
    assert_eq!(w.call(confirm), Ok(ApiOk::Deleted));
    assert!(w.stored(&pk("bound")).is_none());
}

#[test]
fn pod_spec_updates_may_change_only_the_image_and_add_tolerations() {
    let mut w = World::new(Default::default());
    let pk = key(Pod::KIND, "p");
    let created = w.obj(ApiOp::Create(Box::new(pod("p", None))));
    let created_spec = created.typed::<Pod>().unwrap().spec.clone();
    // DefaultTolerationSeconds gave the pod its two NoExecute tolerations.
    assert_eq!(created_spec.tolerations.len(), 2);
    let with = |f: &dyn Fn(&mut PodSpec)| {
        let mut spec = created_spec.clone();
        f(&mut spec);
        patch(
            &pk,
            vec![PatchOp::Spec(Body::new(Pod {
                spec,
                status: PodStatus::default(),
            }))],
        )
    };
    let forbidden = |r: Result<ApiOk, ApiError>| matches!(r, Err(ApiError::Invalid(m)) if m.contains("Forbidden"));
    // nodeName only through the binding subresource.
    assert!(forbidden(
        w.call(with(&|s| s.node_name = Some("node-1".into())))
    ));
    assert!(forbidden(w.call(with(&|s| {
        s.node_selector.insert("disk".into(), "ssd".into());
    }))));
    assert!(forbidden(w.call(with(&|s| {
        s.tolerations.pop();
    }))));
    // The image, an added toleration and a changed tolerationSeconds are allowed.
    let updated = w.obj(with(&|s| {
        s.image = "controller:v2".into();
        s.tolerations[0].toleration_seconds = Some(5);
        s.tolerations.push(Toleration {
            key: "dedicated".into(),
            effect: TaintEffect::NoSchedule,
            toleration_seconds: None,
        });
    }));
    let spec = &updated.typed::<Pod>().unwrap().spec;
    assert_eq!(spec.image, "controller:v2");
    assert_eq!(spec.tolerations.len(), 3);
    let bind = ApiOp::Bind {
        key: pk.clone(),
        uid: Some(created.meta.uid),
        node_name: "node-1".into(),
    };
    let bound = w.obj(bind.clone());
    assert_eq!(
        bound.typed::<Pod>().unwrap().spec.node_name.as_deref(),
        Some("node-1")
    );
    assert_eq!(w.call(bind), Err(ApiError::Conflict), "already assigned");
}

#[test]
fn a_terminating_pod_needs_both_its_kubelet_and_its_finalizers() {
    let mut w = World::new(Default::default());
    let confirm = |name: &str| ApiOp::Delete {
        key: key(Pod::KIND, name),
        uid: None,
        grace_period_seconds: Some(0),
    };
    for name in ["kubelet-last", "finalizer-last"] {
        let mut p = pod(name, Some("node-1"));
        p.meta.finalizers.push("f".into());
        w.obj(ApiOp::Create(Box::new(p)));
        w.obj(delete(&key(Pod::KIND, name)));
    }
    // Finalizer removed first: still waiting for the kubelet.
    let k = key(Pod::KIND, "kubelet-last");
    let r = w.obj(patch(&k, vec![PatchOp::RemoveFinalizer("f".into())]));
    assert!(r.meta.is_deleting() && r.meta.finalizers.is_empty());
    assert_eq!(w.call(confirm("kubelet-last")), Ok(ApiOk::Deleted));
    // Kubelet first: still held by the finalizer, then the finalizer's removal ends it.
    let k = key(Pod::KIND, "finalizer-last");
    assert!(matches!(
        w.call(confirm("finalizer-last")),
        Ok(ApiOk::Object(_))
    ));
    assert!(w.stored(&k).is_some());
    assert_eq!(
        w.call(patch(&k, vec![PatchOp::RemoveFinalizer("f".into())])),
        Ok(ApiOk::Deleted)
    );
}

// ----- garbage collection ----------------------------------------------------------------

struct Family {
    w: World,
    set: Arc<Object>,
}

/// A WidgetSet owning "plain" (no finalizer) and "guarded" (a finalizer).
fn family() -> Family {
    let mut w = World::new(ApiServerConfig {
        gc_delay_ms: 2_000,
        ..Default::default()
    });
    let set = w.obj(ApiOp::Create(Box::new(widget_set("s"))));
    for (name, fin) in [
        ("plain", None),
        ("guarded", Some("test.reconsim.dev/widget")),
    ] {
        let mut m = widget(name);
        m.meta.owner_references.push(owner(&set));
        if let Some(f) = fin {
            m.meta.finalizers.push(f.into());
        }
        w.obj(ApiOp::Create(Box::new(m)));
    }
    w.run_to(5_000);
    Family { w, set }
}

#[test]
fn deleting_an_owner_collects_its_dependents_in_the_background() {
    let Family { mut w, .. } = family();
    let t0 = w.t;
    assert_eq!(
        w.call(delete(&key(WidgetSet::KIND, "s"))),
        Ok(ApiOk::Deleted)
    );
    // Background: the owner goes at once, dependents stay until the collector runs.
    w.run_to(t0 + 1_900);
    assert!(w.stored(&wkey("plain")).is_some());
    assert!(!w.stored(&wkey("guarded")).unwrap().meta.is_deleting());
    w.run_to(t0 + 2_100);
    assert!(
        w.stored(&wkey("plain")).is_none(),
        "collected after gc_delay_ms"
    );
    let g = w.stored(&wkey("guarded")).expect("held by its finalizer");
    assert!(
        g.meta.is_deleting(),
        "a dependent with finalizers is marked"
    );
    // Its controller removes the finalizer: gone.
    let fin = PatchOp::RemoveFinalizer("test.reconsim.dev/widget".into());
    assert_eq!(
        w.call(patch(&wkey("guarded"), vec![fin])),
        Ok(ApiOk::Deleted)
    );
    assert!(w.stored(&wkey("guarded")).is_none());
}

#[test]
fn collection_cascades_through_generations() {
    let Family { mut w, .. } = family();
    let plain = w.stored(&wkey("plain")).unwrap();
    let mut p = pod("grandchild", None);
    p.meta.owner_references.push(owner(&plain));
    w.obj(ApiOp::Create(Box::new(p)));
    w.call(delete(&key(WidgetSet::KIND, "s"))).unwrap();
    w.run_for(10_000);
    assert!(w.stored(&wkey("plain")).is_none());
    assert!(w.stored(&key(Pod::KIND, "grandchild")).is_none());
}

#[test]
fn an_object_with_two_owners_lives_until_both_are_gone() {
    let Family { mut w, set } = family();
    let other = w.obj(ApiOp::Create(Box::new(widget_set("t"))));
    w.obj(patch(
        &wkey("plain"),
        vec![PatchOp::SetOwnerReferences(vec![
            owner(&set),
            owner(&other),
        ])],
    ));
    w.call(delete(&key(WidgetSet::KIND, "s"))).unwrap();
    w.run_for(10_000);
    assert!(w.stored(&wkey("plain")).is_some(), "one owner is left");
    assert!(w.stored(&wkey("guarded")).unwrap().meta.is_deleting());
    w.call(delete(&key(WidgetSet::KIND, "t"))).unwrap();
    w.run_for(10_000);
    assert!(w.stored(&wkey("plain")).is_none());
}

#[test]
fn an_owner_that_is_only_marked_keeps_its_dependents() {
    let Family { mut w, .. } = family();
    let s = key(WidgetSet::KIND, "s");
    w.obj(patch(&s, vec![PatchOp::AddFinalizer("hold".into())]));
    w.obj(delete(&s));
    w.run_for(10_000);
    assert!(
        w.stored(&wkey("plain")).is_some(),
        "a deleting owner still exists"
    );
    w.obj(patch(
        &wkey("plain"),
        vec![PatchOp::SetLabel("x".into(), Some("y".into()))],
    ));
    w.call(patch(&s, vec![PatchOp::RemoveFinalizer("hold".into())]))
        .unwrap();
    w.run_for(10_000);
    assert!(w.stored(&wkey("plain")).is_none());
}

#[test]
fn removing_the_owner_reference_orphans_the_dependent() {
    let Family { mut w, set } = family();
    let o = w.obj(patch(
        &wkey("plain"),
        vec![PatchOp::RemoveOwnerReference(set.meta.uid)],
    ));
    assert!(o.meta.owner_references.is_empty());
    w.call(delete(&key(WidgetSet::KIND, "s"))).unwrap();
    w.run_for(20_000);
    let o = w
        .stored(&wkey("plain"))
        .expect("an orphan is never collected");
    assert!(!o.meta.is_deleting());
    assert!(w.stored(&wkey("guarded")).unwrap().meta.is_deleting());
}

#[test]
fn an_object_created_with_only_dangling_owners_is_collected() {
    // A controller acting on a stale cache creates a child of an owner already gone.
    let Family { mut w, set } = family();
    w.call(delete(&key(WidgetSet::KIND, "s"))).unwrap();
    w.run_for(10_000);
    let mut late = widget("late");
    late.meta.owner_references.push(owner(&set));
    w.obj(ApiOp::Create(Box::new(late)));
    w.run_for(10_000);
    assert!(
        w.stored(&wkey("late")).is_none(),
        "its owner is gone: collected"
    );
    // A dependent of a re-created owner (same name, new uid) is collected too.
    let new_set = w.obj(ApiOp::Create(Box::new(widget_set("s"))));
    assert_ne!(new_set.meta.uid, set.meta.uid);
    let mut stale = widget("stale");
    stale.meta.owner_references.push(owner(&set));
    w.obj(ApiOp::Create(Box::new(stale)));
    w.run_for(10_000);
    assert!(w.stored(&wkey("stale")).is_none());
}

#[test]
fn collection_pending_at_an_api_server_crash_runs_after_restart() {
    let plan = FaultPlan::new(vec![TimedFault {
        at_ms: 10_100,
        duration_ms: Some(5_000),
        fault: Fault::Crash {
            process: "apiserver".into(),
        },
        on: None,
    }]);
    let mut w = World::with_plan(
        1,
        ApiServerConfig {
            gc_delay_ms: 2_000,
            ..Default::default()
        },
        plan,
    );
    let set = w.obj(ApiOp::Create(Box::new(widget_set("s"))));
    let mut m = widget("plain");
    m.meta.owner_references.push(owner(&set));
    w.obj(ApiOp::Create(Box::new(m)));
    w.run_to(10_000);
    w.call(delete(&key(WidgetSet::KIND, "s"))).unwrap();
    // The crash (at 10.1 s) kills the sweep armed for ~12 s; the store survives.
    w.run_to(14_000);
    assert!(w.stored(&wkey("plain")).is_some());
    w.run_to(30_000);
    assert!(
        w.stored(&wkey("plain")).is_none(),
        "collected after the restart"
    );
}

// ----- watches -----------------------------------------------------------------------------

#[test]
fn watchers_receive_ordered_numbered_events_over_the_network() {
    let mut w = World::new(Default::default());
    let k = wkey("a");
    let w1 = w.watcher("w1", 1, vec![Widget::KIND], 0);
    let w2 = w.watcher("w2", 2, vec![Widget::KIND], 0);
    let sets = w.watcher("sets", 3, vec![WidgetSet::KIND], 0);
    w.run_to(100);
    assert_eq!(w.server().watcher_count(), 3);
    assert!(matches!(
        w.script(w1).response(0).unwrap().result,
        Ok(ApiOk::Watching { .. })
    ));
    w.obj(ApiOp::Create(Box::new(widget("a"))));
    w.obj(ApiOp::Create(Box::new(widget_set("s"))));
    for i in 0..20 {
        w.obj(patch(
            &k,
            vec![PatchOp::SetLabel("i".into(), Some(i.to_string()))],
        ));
    }
    w.obj(ApiOp::Create(Box::new(widget("b"))));
    w.call(delete(&k)).unwrap();
    w.run_for(100);
    let e1 = w.events(w1);
    assert_eq!(e1.len(), 23);
    let watch_id = e1[0].watch_id;
    for (i, e) in e1.iter().enumerate() {
        assert_eq!(e.seq, i as u64, "seq counts from 0 without gaps");
        assert_eq!(e.watch_id, watch_id);
        assert_eq!(e.object.kind(), Widget::KIND);
    }
    assert!(
        e1.windows(2)
            .all(|p| p[0].object.meta.resource_version < p[1].object.meta.resource_version)
    );
    assert_eq!(e1[0].event, EventType::Added);
    assert_eq!(e1[5].object.meta.labels["i"], "4");
    assert_eq!(e1[22].event, EventType::Deleted);
    assert_eq!(e1[22].object.meta.name, "a");
    // Every watcher sees the same stream, under its own watch id.
    let e2 = w.events(w2);
    assert_ne!(e2[0].watch_id, watch_id);
    let strip = |v: &[WatchEvent]| -> Vec<_> {
        v.iter()
            .map(|e| (e.seq, e.event, e.object.clone()))
            .collect()
    };
    assert_eq!(strip(&e1), strip(&e2));
    // Kinds filter the stream.
    let es = w.events(sets);
    assert_eq!(es.len(), 1);
    assert_eq!((es[0].seq, es[0].object.kind()), (0, WidgetSet::KIND));
    // Events arrive after the write, over the network: never at the write's instant.
    let arrivals = &w.script(w1).events;
    assert!(
        arrivals
            .iter()
            .all(|(t, e)| t.as_ms() > e.object.meta.creation_timestamp.as_ms())
    );
}

#[test]
fn a_watch_replays_from_a_resource_version() {
    let mut w = World::new(Default::default());
    let k = wkey("a");
    w.obj(ApiOp::Create(Box::new(widget("a"))));
    let mid = w.obj(patch(
        &k,
        vec![PatchOp::SetLabel("x".into(), Some("1".into()))],
    ));
    w.obj(patch(
        &k,
        vec![PatchOp::SetLabel("x".into(), Some("2".into()))],
    ));
    w.obj(ApiOp::Create(Box::new(widget("b"))));
    let from = mid.meta.resource_version;
    let at = w.t + 10;
    let late = w.watcher("late", at, vec![Widget::KIND], from);
    w.run_for(100);
    w.call(delete(&wkey("b"))).unwrap();
    w.run_for(100);
    let evs = w.events(late);
    let got: Vec<(u64, EventType, u64)> = evs
        .iter()
        .map(|e| (e.seq, e.event, e.object.meta.resource_version))
        .collect();
    assert_eq!(
        got,
        [
            (0, EventType::Modified, from + 1),
            (1, EventType::Added, from + 2),
            (2, EventType::Deleted, from + 3),
        ],
        "replay strictly after from_rv, then live events, one numbering"
    );
    // Re-opening the same stream replaces the watch.
    assert_eq!(w.server().watcher_count(), 1);
}

#[test]
fn a_watch_from_before_the_history_is_gone() {
    let mut w = World::new(ApiServerConfig {
        watch_history_ms: 10_000,
        watch_history_max: 1_000,
        ..Default::default()
    });
    let k = wkey("a");
    let a = w.obj(ApiOp::Create(Box::new(widget("a"))));
    w.run_to(5_000);
    w.obj(patch(
        &k,
        vec![PatchOp::SetLabel("x".into(), Some("1".into()))],
    ));
    // Within the window: fine.
    let ok = w.watcher("ok", 6_000, vec![Widget::KIND], a.meta.resource_version);
    w.run_to(6_100);
    assert!(matches!(
        w.script(ok).response(0).unwrap().result,
        Ok(ApiOk::Watching { .. })
    ));
    assert_eq!(w.events(ok).len(), 1);
    // 20 s later, with no write since, the create (and the patch) aged out: 410 Gone.
    let gone = w.watcher("gone", 26_000, vec![Widget::KIND], a.meta.resource_version);
    let current = w.watcher(
        "cur",
        26_500,
        vec![Widget::KIND],
        w.server().resource_version(),
    );
    w.run_to(27_000);
    assert_eq!(
        w.script(gone).response(0).unwrap().result,
        Err(ApiError::Gone)
    );
    assert!(w.events(gone).is_empty());
    // From the current resourceVersion a watch still opens.
    assert!(matches!(
        w.script(current).response(0).unwrap().result,
        Ok(ApiOk::Watching { .. })
    ));
}

#[test]
fn a_watch_beyond_the_bounded_history_is_gone() {
    let mut w = World::new(ApiServerConfig {
        watch_history_ms: 300_000,
        watch_history_max: 3,
        ..Default::default()
    });
    let k = wkey("a");
    w.obj(ApiOp::Create(Box::new(widget("a"))));
    for i in 0..5 {
        w.obj(patch(
            &k,
            vec![PatchOp::SetLabel("i".into(), Some(i.to_string()))],
        ));
    }
    let rv = w.server().resource_version(); // 6; the history holds 4..=6
    let at = w.t + 10;
    let gone = w.watcher("gone", at, vec![Widget::KIND], rv - 4);
    let edge = w.watcher("edge", at + 5, vec![Widget::KIND], rv - 3);
    w.run_for(100);
    assert_eq!(
        w.script(gone).response(0).unwrap().result,
        Err(ApiError::Gone)
    );
    let got: Vec<u64> = w
        .events(edge)
        .iter()
        .map(|e| e.object.meta.resource_version)
        .collect();
    assert_eq!(got, [rv - 2, rv - 1, rv]);
}

#[test]
fn unwatch_stops_the_stream() {
    let mut w = World::new(Default::default());
    let host = w.sim.host_by_name("client").unwrap();
    let watch = ApiOp::Watch {
        stream: 7,
        kinds: vec![Widget::KIND],
        from_rv: 0,
    };
    let pid = w.sim.spawn(
        host,
        "watch",
        Proc::Script(Script::new(
            w.api,
            vec![
                Step {
                    at_ms: 1,
                    op: watch,
                },
                Step {
                    at_ms: 1_000,
                    op: ApiOp::Unwatch { stream: 7 },
                },
            ],
        )),
    );
    w.run_to(100);
    w.obj(ApiOp::Create(Box::new(widget("a"))));
    w.run_to(2_000);
    assert_eq!(w.server().watcher_count(), 0);
    w.obj(ApiOp::Create(Box::new(widget("b"))));
    w.run_for(100);
    assert_eq!(w.events(pid).len(), 1);
}

// ----- determinism -------------------------------------------------------------------------

fn scenario_hash(seed: u64) -> u64 {
    let mut w = World::with_plan(seed, Default::default(), FaultPlan::default());
    w.watcher("watch", 1, vec![Widget::KIND, WidgetSet::KIND], 0);
    let set = w.obj(ApiOp::Create(Box::new(widget_set("s"))));
    for i in 0..10 {
        let mut m = widget("");
        m.meta.generate_name = Some("m-".into());
        m.meta.owner_references.push(owner(&set));
        w.obj(ApiOp::Create(Box::new(m)));
        w.run_for(i * 7);
    }
    w.call(delete(&key(WidgetSet::KIND, "s"))).unwrap();
    w.run_for(5_000);
    assert!(w.server().list(Widget::KIND).next().is_none());
    w.sim.trace().hash()
}

#[test]
fn same_seed_same_trace_hash() {
    assert_eq!(scenario_hash(7), scenario_hash(7));
    assert_eq!(scenario_hash(8), scenario_hash(8));
    assert_ne!(
        scenario_hash(7),
        scenario_hash(8),
        "the seed reaches the run"
    );
}

#[test]
fn with_a_watch_lag_a_reflector_list_is_served_from_the_lagging_watch_cache() {
    // 3.15: a reflector's list (resourceVersion "0" or its last) is served from the watch
    // cache, which follows etcd by the lag; a consistent read is not.
    let plan = FaultPlan::new(vec![TimedFault {
        at_ms: 50,
        duration_ms: Some(1_000),
        fault: Fault::Inject {
            process: "apiserver".into(),
            fault: WorldFault::WatchLag { lag_ms: 500 },
        },
        on: None,
    }]);
    let mut w = World::with_plan(1, Default::default(), plan);
    let host = w.sim.host_by_name("client").unwrap();
    let list = |at_ms: u64, from_watch_cache: bool| Step {
        at_ms,
        op: ApiOp::List {
            kind: Widget::KIND,
            namespace: None,
            from_watch_cache,
        },
    };
    let steps = vec![
        Step {
            at_ms: 100,
            op: ApiOp::Create(Box::new(widget("a"))),
        },
        list(200, true),
        list(200, false),
        list(700, true),
        Step {
            at_ms: 1_200,
            op: ApiOp::Create(Box::new(widget("b"))),
        },
        list(1_300, true),
    ];
    let pid = w
        .sim
        .spawn(host, "lister", Proc::Script(Script::new(w.api, steps)));
    w.run_to(3_000);
    let s = w.script(pid);
    let names = |step: usize| -> (Vec<String>, u64) {
        match &s.response(step).expect("answered").result {
            Ok(ApiOk::List {
                items,
                resource_version,
            }) => (
                items.iter().map(|o| o.meta.name.clone()).collect(),
                *resource_version,
            ),
            other => panic!("{other:?}"),
        }
    };
    let (cached, cached_rv) = names(1);
    let (fresh, fresh_rv) = names(2);
    assert!(
        cached.is_empty(),
        "the create is not in the watch cache yet"
    );
    assert!(cached_rv < fresh_rv, "and the list says how old it is");
    assert_eq!(fresh, ["a"], "a consistent read sees it");
    assert_eq!(names(3).0, ["a"], "released 500 ms later");
    assert_eq!(
        names(5).0,
        ["a", "b"],
        "no lag: the watch cache is the store"
    );
}

#[test]
fn with_a_watch_lag_the_writer_gets_its_response_before_the_event() {
    // The watch cache lags etcd (3.11): a controller can read its own write's response
    // and start its next reconcile before its informer has the event.
    let plan = FaultPlan::new(vec![TimedFault {
        at_ms: 50,
        duration_ms: Some(1_000),
        fault: Fault::Inject {
            process: "apiserver".into(),
            fault: WorldFault::WatchLag { lag_ms: 500 },
        },
        on: None,
    }]);
    let mut w = World::with_plan(1, Default::default(), plan);
    let host = w.sim.host_by_name("client").unwrap();
    let k = wkey("a");
    let steps = vec![
        Step {
            at_ms: 1,
            op: ApiOp::Watch {
                stream: 0,
                kinds: vec![Widget::KIND],
                from_rv: 0,
            },
        },
        Step {
            at_ms: 100,
            op: ApiOp::Create(Box::new(widget("a"))),
        },
        Step {
            at_ms: 120,
            op: patch(&k, vec![PatchOp::SetLabel("i".into(), Some("1".into()))]),
        },
        // In the lag's last moments, and just after it ends: the second waits behind
        // the first (order), then writes are prompt again.
        Step {
            at_ms: 1_040,
            op: patch(&k, vec![PatchOp::SetLabel("i".into(), Some("2".into()))]),
        },
        Step {
            at_ms: 1_060,
            op: patch(&k, vec![PatchOp::SetLabel("i".into(), Some("2b".into()))]),
        },
        Step {
            at_ms: 2_000,
            op: patch(&k, vec![PatchOp::SetLabel("i".into(), Some("3".into()))]),
        },
    ];
    let pid = w
        .sim
        .spawn(host, "writer", Proc::Script(Script::new(w.api, steps)));
    w.run_to(3_000);
    let s = w.script(pid);
    let answered = |step: usize| s.responses.iter().find(|r| r.0 == step).unwrap().1;
    let events = &s.events;
    assert_eq!(events.len(), 5);
    // Order and numbering hold through the lag.
    for (i, (_, e)) in events.iter().enumerate() {
        assert_eq!(e.seq, i as u64);
    }
    // The create and the first patch: answered at once, their events 500 ms later.
    for (step, ev) in [(1, 0), (2, 1)] {
        let (at, _) = events[ev];
        assert!(answered(step).as_ms() < 130, "answered at once");
        assert!(
            at.as_ms() >= answered(step).as_ms() + 450,
            "event {ev} at {at} after its answer at {}",
            answered(step)
        );
    }
    // Written in the lag's last moments: its event waits its full lag, and the next
    // one, written after the lag ended, does not overtake it.
    assert!(events[2].0.as_ms() >= 1_040 + 450);
    assert!(events[3].0 >= events[2].0);
    assert!(events[3].0.as_ms() < 1_040 + 600);
    // Long after: an event follows its write within a round trip.
    assert!(events[4].0.as_ms() < 2_000 + 50);
    assert_eq!(events[4].1.object.meta.labels["i"], "3");
}
