//! API server: the metadata it assigns (uid, resourceVersion, generation, timestamps) and create.

use reconsim_sim::{Fault, FaultPlan, SimTime, TimedFault};
use reconsim_world::api::{ApiError, ApiOk, ApiOp, PatchOp};
use reconsim_world::object::Resource;
use reconsim_world::object::{Body, Node, Uid};
use reconsim_world::{Object, ObjectMeta};
use std::collections::BTreeSet;

mod common;
use common::apiserver::{
    NS, ROUND_TRIP_MS, World, delete, patch, widget, widget_set, widget_spec, widget_status, wkey,
};
use common::{Widget, WidgetFields};

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
