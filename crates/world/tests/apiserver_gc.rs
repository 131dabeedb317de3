//! API server: garbage collection of dependents through their owner references.

use reconsim_sim::{Fault, FaultPlan, TimedFault};
use reconsim_world::api::{ApiError, ApiOk, ApiOp, DeleteOptions, PatchOp, Propagation};
use reconsim_world::apiserver::{ApiServerConfig, FINALIZER_FOREGROUND, FINALIZER_ORPHAN};
use reconsim_world::object::Pod;
use reconsim_world::object::Resource;
use reconsim_world::{Object, ObjectKey};
use std::sync::Arc;

mod common;
use common::apiserver::{World, delete, key, owner, patch, pod, widget, widget_set, wkey};
use common::{Widget, WidgetSet};

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
    let plain = w.stored(&wkey("plain")).expect("one owner is left");
    assert_eq!(
        plain.meta.owner_references,
        vec![owner(&other)],
        "the gone owner's reference is patched away (garbagecollector.go)"
    );
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

fn delete_with(k: &ObjectKey, options: DeleteOptions) -> ApiOp {
    ApiOp::Delete {
        key: k.clone(),
        uid: None,
        grace_period_seconds: None,
        options: Box::new(options),
    }
}

fn propagation(p: Propagation) -> DeleteOptions {
    DeleteOptions {
        resource_version: None,
        propagation: Some(p),
    }
}

/// The family, with both dependents' references blocking owner deletion.
fn blocking_family() -> Family {
    let Family { mut w, set } = family();
    for name in ["plain", "guarded"] {
        let mut r = owner(&set);
        r.block_owner_deletion = Some(true);
        w.obj(patch(
            &wkey(name),
            vec![PatchOp::SetOwnerReferences(vec![r])],
        ));
    }
    Family { w, set }
}

#[test]
fn a_foreground_deletion_keeps_the_owner_until_its_blocking_dependents_are_gone() {
    let Family { mut w, .. } = blocking_family();
    let s = key(WidgetSet::KIND, "s");
    let marked = w.obj(delete_with(&s, propagation(Propagation::Foreground)));
    assert!(marked.meta.is_deleting());
    assert_eq!(
        marked.meta.finalizers,
        vec![FINALIZER_FOREGROUND.to_string()]
    );
    w.run_for(10_000);
    assert!(w.stored(&wkey("plain")).is_none(), "a dependent goes first");
    assert!(w.stored(&wkey("guarded")).unwrap().meta.is_deleting());
    assert!(
        w.stored(&s).is_some(),
        "the owner waits for the dependent its finalizer holds"
    );
    let fin = PatchOp::RemoveFinalizer("test.reconsim.dev/widget".into());
    assert_eq!(
        w.call(patch(&wkey("guarded"), vec![fin])),
        Ok(ApiOk::Deleted)
    );
    w.run_for(10_000);
    assert!(w.stored(&s).is_none(), "then the owner goes");
}

#[test]
fn a_foreground_deletion_waits_only_for_blocking_references() {
    // The dependents' references do not block: the owner goes with the first pass.
    let Family { mut w, .. } = family();
    let s = key(WidgetSet::KIND, "s");
    w.obj(delete_with(&s, propagation(Propagation::Foreground)));
    w.run_for(1_000);
    assert!(w.stored(&s).is_some(), "held until the collector's pass");
    w.run_for(9_000);
    assert!(w.stored(&s).is_none());
    assert!(w.stored(&wkey("plain")).is_none());
    assert!(w.stored(&wkey("guarded")).unwrap().meta.is_deleting());
}

#[test]
fn an_orphaning_deletion_unhooks_the_dependents_and_they_live_on() {
    let Family { mut w, set } = blocking_family();
    let s = key(WidgetSet::KIND, "s");
    let marked = w.obj(delete_with(&s, propagation(Propagation::Orphan)));
    assert_eq!(marked.meta.finalizers, vec![FINALIZER_ORPHAN.to_string()]);
    w.run_for(20_000);
    assert!(
        w.stored(&s).is_none(),
        "the owner goes once it has orphaned"
    );
    for name in ["plain", "guarded"] {
        let o = w.stored(&wkey(name)).expect("an orphan lives on");
        assert!(!o.meta.is_deleting(), "{name}");
        assert!(
            o.meta
                .owner_references
                .iter()
                .all(|r| r.uid != set.meta.uid),
            "{name}: {:?}",
            o.meta.owner_references
        );
    }
}

#[test]
fn an_explicit_background_policy_drops_a_gc_finalizer_the_object_carries() {
    // registry/store.go: the policy decides over the finalizers already there.
    let Family { mut w, .. } = family();
    let s = key(WidgetSet::KIND, "s");
    w.obj(patch(
        &s,
        vec![PatchOp::AddFinalizer(FINALIZER_ORPHAN.into())],
    ));
    let r = w.call(delete_with(&s, propagation(Propagation::Background)));
    assert_eq!(r, Ok(ApiOk::Deleted));
    w.run_for(10_000);
    assert!(
        w.stored(&wkey("plain")).is_none(),
        "collected in the background"
    );
}

#[test]
fn a_delete_with_a_stale_resource_version_precondition_is_a_conflict() {
    let Family { mut w, .. } = family();
    let plain = w.stored(&wkey("plain")).unwrap();
    let stale = DeleteOptions {
        resource_version: Some(plain.meta.resource_version - 1),
        propagation: None,
    };
    assert_eq!(
        w.call(delete_with(&wkey("plain"), stale)),
        Err(ApiError::Conflict)
    );
    let current = DeleteOptions {
        resource_version: Some(plain.meta.resource_version),
        propagation: None,
    };
    assert_eq!(
        w.call(delete_with(&wkey("plain"), current)),
        Ok(ApiOk::Deleted)
    );
}

#[test]
fn an_owner_in_another_namespace_is_absent_to_the_collector() {
    // garbagecollector.go isDangling: the owner is looked up in the dependent's
    // namespace, so a reference across namespaces dangles and the dependent goes.
    let Family { mut w, set } = family();
    let mut far = widget("far");
    far.meta.namespace = "elsewhere".into();
    far.meta.owner_references.push(owner(&set));
    w.obj(ApiOp::Create(Box::new(far)));
    w.run_for(10_000);
    assert!(w.stored(&set.key()).is_some());
    assert!(
        w.stored(&ObjectKey::new(Widget::KIND, "elsewhere", "far"))
            .is_none(),
        "collected though its owner exists in another namespace"
    );
}

#[test]
fn a_foreground_owner_goes_once_its_blocking_dependent_lets_go_of_it() {
    // The dependent's controller removes its reference (or it is unhooked): the owner,
    // waiting in the foreground, is looked at again and goes.
    let Family { mut w, set } = blocking_family();
    let s = key(WidgetSet::KIND, "s");
    w.obj(delete_with(&s, propagation(Propagation::Foreground)));
    w.run_for(10_000);
    assert!(w.stored(&s).is_some(), "held by the guarded dependent");
    w.obj(patch(
        &wkey("guarded"),
        vec![PatchOp::RemoveOwnerReference(set.meta.uid)],
    ));
    w.run_for(10_000);
    assert!(w.stored(&s).is_none());
    assert!(
        w.stored(&wkey("guarded")).unwrap().meta.is_deleting(),
        "it was marked by the first pass and stays for its own finalizer"
    );
}
