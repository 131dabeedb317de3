//! API server: the same seed gives the same trace, and another seed another.

use reconsim_sim::FaultPlan;
use reconsim_world::api::ApiOp;
use reconsim_world::object::Resource;

mod common;
use common::apiserver::{World, delete, key, owner, widget, widget_set};
use common::{Widget, WidgetSet};

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
