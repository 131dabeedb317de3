//! API server: delete, finalizers, uid preconditions, and the graceful deletion of pods.

use reconsim_world::api::{ApiError, ApiOk, ApiOp, EventType, PatchOp};
use reconsim_world::apiserver::POD_GRACE_PERIOD_SECONDS_DEFAULT;
use reconsim_world::object::Resource;
use reconsim_world::object::{Body, Pod, PodPhase, PodSpec, PodStatus, TaintEffect, Toleration};

mod common;
use common::Widget;
use common::apiserver::{ROUND_TRIP_MS, World, delete, key, patch, pod, widget, wkey};

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
        options: Default::default(),
    };
    assert_eq!(w.call(by_old_uid), Err(ApiError::Conflict));
    assert_eq!(w.stored(&k).unwrap(), new);
    let by_new_uid = ApiOp::Delete {
        key: k.clone(),
        uid: Some(new.meta.uid),
        grace_period_seconds: None,
        options: Default::default(),
    };
    assert_eq!(w.call(by_new_uid), Ok(ApiOk::Deleted));
    assert_eq!(w.call(delete(&k)), Err(ApiError::NotFound));
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
        options: Default::default(),
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
        options: Default::default(),
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
        options: Default::default(),
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
