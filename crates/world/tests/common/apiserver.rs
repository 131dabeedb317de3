//! The API server tests' client (docs/semantics.md section 3).
//!
//! Every request crosses the simulated network. The [`World`] helper gives the tests a
//! synchronous-looking client: `call` spawns a one-step [`Script`] process that sends the
//! request shortly after "now", runs the simulation until the answer is surely back and
//! returns it. Watches are opened by long-lived scripts whose `events` the tests read.

use super::{Widget, WidgetSet, WidgetStatus};
use reconsim_sim::{FaultPlan, ProcId, Sim, SimConfig, SimTime, TraceMode};
use reconsim_world::api::{ApiError, ApiOk, ApiOp, PatchOp, WatchEvent};
use reconsim_world::apiserver::{ApiServer, ApiServerConfig};
use reconsim_world::object::Resource;
use reconsim_world::object::{Body, Kind, OwnerReference, Pod, PodSpec, PodStatus};
use reconsim_world::script::{Script, Step};
use reconsim_world::{Object, ObjectKey, ObjectMeta, Proc, WorldFault};
use std::sync::Arc;

pub const NS: &str = "reconsim-test";
/// Longer than any network round trip (latency is 1-5 ms each way).
pub const ROUND_TRIP_MS: u64 = 50;

pub struct World {
    pub sim: Sim<Proc>,
    pub api: ProcId,
    calls: usize,
    /// The test's clock: where the last run stopped.
    pub t: u64,
}

impl World {
    pub fn new(config: ApiServerConfig) -> Self {
        Self::with_plan(1, config, FaultPlan::default())
    }

    pub fn with_plan(seed: u64, config: ApiServerConfig, plan: FaultPlan<WorldFault>) -> Self {
        let mut cfg = SimConfig::new(seed);
        cfg.trace = TraceMode::Full;
        let mut sim = Sim::new(cfg, plan);
        let h_api = sim.add_host("api");
        sim.add_host("client");
        let api = sim.spawn(h_api, "apiserver", Proc::new(ApiServer::new(config)));
        World {
            sim,
            api,
            calls: 0,
            t: 0,
        }
    }

    pub fn server(&self) -> &ApiServer {
        let p = self.sim.actor(self.api);
        p.component::<ApiServer>()
            .unwrap_or_else(|| panic!("not the API server: {p:?}"))
    }

    pub fn script(&self, pid: ProcId) -> &Script {
        let p = self.sim.actor(pid);
        p.component::<Script>()
            .unwrap_or_else(|| panic!("not a script: {p:?}"))
    }

    /// Send one request from a fresh client process and wait for its answer.
    pub fn call(&mut self, op: ApiOp) -> Result<ApiOk, ApiError> {
        self.calls += 1;
        let at_ms = self.t + 1;
        let host = self.sim.host_by_name("client").unwrap();
        let pid = self.sim.spawn(
            host,
            &format!("call-{}", self.calls),
            Proc::new(Script::new(self.api, vec![Step { at_ms, op }])),
        );
        self.run_for(ROUND_TRIP_MS);
        self.script(pid)
            .response(0)
            .expect("the API server answers")
            .result
            .clone()
    }

    /// A call that must return an object.
    pub fn obj(&mut self, op: ApiOp) -> Arc<Object> {
        match self.call(op.clone()) {
            Ok(ApiOk::Object(o)) => o,
            r => panic!("{op:?} returned {r:?}"),
        }
    }

    /// Run `ms` past the test's clock.
    pub fn run_for(&mut self, ms: u64) {
        self.run_to(self.t + ms);
    }

    /// Run to `t_ms` (the kernel's `now` stays at the last event; the test's clock moves).
    pub fn run_to(&mut self, t_ms: u64) {
        self.sim.run_until(SimTime::from_ms(t_ms));
        self.t = self.t.max(t_ms);
    }

    /// A client that opens a watch at `at_ms` and keeps every event.
    pub fn watcher(&mut self, name: &str, at_ms: u64, kinds: Vec<Kind>, from_rv: u64) -> ProcId {
        let host = self.sim.host_by_name("client").unwrap();
        let op = ApiOp::Watch {
            stream: 0,
            kinds,
            from_rv,
            options: Default::default(),
        };
        self.sim.spawn(
            host,
            name,
            Proc::new(Script::new(self.api, vec![Step { at_ms, op }])),
        )
    }

    pub fn events(&self, pid: ProcId) -> Vec<WatchEvent> {
        self.script(pid)
            .events
            .iter()
            .map(|(_, e)| e.clone())
            .collect()
    }

    pub fn stored(&self, key: &ObjectKey) -> Option<Arc<Object>> {
        self.server().get(key).cloned()
    }
}

pub fn widget(name: &str) -> Object {
    Object::new(ObjectMeta::named(NS, name), Body::new(Widget::default()))
}

pub fn widget_set(name: &str) -> Object {
    Object::new(ObjectMeta::named(NS, name), Body::new(WidgetSet::default()))
}

pub fn key(kind: Kind, name: &str) -> ObjectKey {
    ObjectKey::new(kind, NS, name)
}

pub fn wkey(name: &str) -> ObjectKey {
    key(Widget::KIND, name)
}

pub fn owner(o: &Object) -> OwnerReference {
    OwnerReference {
        kind: o.kind(),
        name: o.meta.name.clone(),
        uid: o.meta.uid,
        controller: Some(true),
        block_owner_deletion: None,
    }
}

pub fn patch(key: &ObjectKey, ops: Vec<PatchOp>) -> ApiOp {
    ApiOp::Patch {
        key: key.clone(),
        ops,
        resource_version: None,
    }
}

pub fn delete(key: &ObjectKey) -> ApiOp {
    ApiOp::Delete {
        key: key.clone(),
        uid: None,
        grace_period_seconds: None,
        options: Default::default(),
    }
}

pub fn widget_status(phase: &str) -> Body {
    Body::new(Widget {
        spec: Default::default(),
        status: WidgetStatus {
            phase: Some(phase.into()),
            ..Default::default()
        },
    })
}

pub fn widget_spec(provider_id: &str) -> Body {
    let mut m = Widget::default();
    m.spec.provider_id = Some(provider_id.into());
    Body::new(m)
}

pub fn pod(name: &str, node: Option<&str>) -> Object {
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
