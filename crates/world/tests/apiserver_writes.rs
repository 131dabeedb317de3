//! API server: update and patch, their preconditions and conflicts, and no-op writes.

use reconsim_world::api::{ApiError, ApiOp, PatchOp};
use reconsim_world::object::Resource;
use reconsim_world::object::{Body, Pod};

mod common;
use common::apiserver::{
    World, delete, key, owner, patch, widget, widget_set, widget_spec, widget_status, wkey,
};
use common::{Widget, WidgetFields, WidgetSet};

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
