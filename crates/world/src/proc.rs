//! The world's process type: the core's components, and any family's.
//!
//! The core's components are variants (static dispatch on the hot path); a family's
//! process is a [`Component`] behind `Proc::Component`. User reconcilers plug in
//! through [`crate::manager::Manager`], which hosts any [`crate::manager::Reconciler`].

use crate::api::{ApiOp, ApiRequest};
use crate::component::Component;
use crate::fault::WorldFault;
use crate::msg::{Lost, Msg, Timer};
use crate::object::{Lease, ObjectKey, Resource};
use crate::{apiserver, informer, kubelet, leader, lifecycle, manager, script, workloads};
use reconsim_sim::{Actor, EventClass, ProcId, TimerId};

/// The kernel context as the world's components see it.
pub type WorldCtx<'a> = reconsim_sim::Ctx<'a, Proc>;

/// Where the shared services live; handed to every component at construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Endpoints {
    pub apiserver: ProcId,
}

#[derive(Debug)]
pub enum Proc {
    ApiServer(apiserver::ApiServer),
    Kubelet(kubelet::Kubelet),
    Lifecycle(lifecycle::NodeLifecycle),
    Workloads(workloads::Workloads),
    Manager(manager::Manager),
    Script(script::Script),
    /// A pod's container with no logic of its own (idles, or exits after a while).
    Container(kubelet::Container),
    /// A process that only takes part in a leader election.
    Candidate(leader::Candidate),
    /// A process that only runs an informer and logs its cache changes.
    Informer(informer::Watcher),
    /// A family's process (a cloud API, an etcd model, a config server, ...).
    Component(Box<dyn Component>),
}

impl Proc {
    /// A family's component, as its own type: `sim.actor(p).component::<Cloud>()`.
    pub fn component<T: Component>(&self) -> Option<&T> {
        match self {
            Proc::Component(c) => c.as_any().downcast_ref::<T>(),
            _ => None,
        }
    }
}

macro_rules! each {
    ($self:ident, $p:ident => $e:expr) => {
        match $self {
            Proc::ApiServer($p) => $e,
            Proc::Kubelet($p) => $e,
            Proc::Lifecycle($p) => $e,
            Proc::Workloads($p) => $e,
            Proc::Manager($p) => $e,
            Proc::Script($p) => $e,
            Proc::Container($p) => $e,
            Proc::Candidate($p) => $e,
            Proc::Informer($p) => $e,
            Proc::Component($p) => $e,
        }
    };
}

impl Actor for Proc {
    type Msg = Msg;
    type Fault = WorldFault;

    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        each!(self, p => p.on_start(ctx))
    }

    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        if matches!(msg, Msg::Terminate) {
            // SIGTERM: exit now and tell the kubelet that sent it (graceful shutdown,
            // controller-runtime 0.7's GracefulShutdownTimeout, is not modelled).
            ctx.note(|| "SIGTERM: exiting".to_string());
            ctx.send(from, Msg::ContainerExited);
            ctx.stop(ctx.me());
            return;
        }
        each!(self, p => p.on_msg(from, msg, ctx))
    }

    fn on_timer(&mut self, _id: TimerId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        let Msg::Timer(timer) = msg else {
            panic!("a timer carried a non-timer message: {msg:?}");
        };
        match (self, timer) {
            (Proc::ApiServer(p), Timer::ApiServer(t)) => p.on_timer(t, ctx),
            (Proc::Kubelet(p), t) => p.on_timer(t, ctx),
            (Proc::Lifecycle(p), t) => p.on_timer(t, ctx),
            (Proc::Workloads(p), t) => p.on_timer(t, ctx),
            (Proc::Manager(p), t) => p.on_timer(t, ctx),
            (Proc::Script(p), Timer::Script(t)) => p.on_timer(t, ctx),
            (Proc::Container(p), t) => p.on_timer(t, ctx),
            (Proc::Candidate(p), Timer::Leader(t)) => p.on_timer(t, ctx),
            (Proc::Informer(p), Timer::Informer(t)) => p.on_timer(t, ctx),
            (Proc::Component(p), t) => p.on_timer(t, ctx),
            (p, t) => panic!("timer {t:?} reached the wrong component {p:?}"),
        }
    }

    fn on_crash(&mut self) {
        each!(self, p => p.on_crash())
    }

    fn on_fault(&mut self, fault: &WorldFault, active: bool, ctx: &mut WorldCtx<'_>) {
        each!(self, p => p.on_fault(fault, active, ctx))
    }

    /// Decision points for event anchors: API writes (a Lease's are renewals), reads,
    /// service calls and watch events. Watch opens, pings and timers are not decisions.
    fn classify(msg: &Msg) -> Option<EventClass> {
        match msg {
            Msg::Api(ApiRequest { op, .. }) => {
                let written = match op {
                    ApiOp::Get(_) | ApiOp::List { .. } => return Some(EventClass::Read),
                    ApiOp::Watch { .. } | ApiOp::Unwatch { .. } | ApiOp::Ping => return None,
                    ApiOp::Create(o) | ApiOp::Update { object: o, .. } => o.kind(),
                    ApiOp::Patch { key, .. }
                    | ApiOp::Delete { key, .. }
                    | ApiOp::Bind { key, .. } => key.kind,
                };
                Some(if written == Lease::KIND {
                    EventClass::Renewal
                } else {
                    EventClass::Write
                })
            }
            Msg::Request { .. } => Some(EventClass::Call),
            Msg::Watch(_) => Some(EventClass::WatchEvent),
            _ => None,
        }
    }

    /// A reconcile's sleep between two of its steps (GetWorkloadCluster's connect).
    fn continues(timer: &Msg) -> bool {
        matches!(
            timer,
            Msg::Timer(Timer::Manager(manager::Timer::Wake { .. }))
        )
    }

    /// The kind of object a request reads or writes, or a watch event reports on.
    fn subject(msg: &Msg) -> Option<String> {
        let kind = match msg {
            Msg::Api(ApiRequest { op, .. }) => match op {
                ApiOp::Get(key)
                | ApiOp::Patch { key, .. }
                | ApiOp::Delete { key, .. }
                | ApiOp::Bind { key, .. } => key.kind,
                ApiOp::List { kind, .. } => *kind,
                ApiOp::Create(o) | ApiOp::Update { object: o, .. } => o.kind(),
                ApiOp::Watch { .. } | ApiOp::Unwatch { .. } | ApiOp::Ping => return None,
            },
            Msg::Watch(ev) => ev.object.kind(),
            _ => return None,
        };
        Some(kind.to_string())
    }

    fn request_id(msg: &Msg) -> Option<u64> {
        match msg {
            Msg::Api(req) => Some(req.id),
            Msg::Request { id, .. } => Some(*id),
            _ => None,
        }
    }

    fn answer_id(msg: &Msg) -> Option<u64> {
        match msg {
            Msg::ApiResp(resp) => Some(resp.id),
            Msg::Response { id, .. } => Some(*id),
            _ => None,
        }
    }

    fn retransmits_ms(&self, msg: &Msg, sent: bool) -> Option<u64> {
        match self {
            Proc::Component(c) => c.retransmits_ms(msg, sent),
            _ => None,
        }
    }

    fn lane(&self, msg: &Msg) -> u32 {
        match self {
            Proc::Component(c) => c.lane(msg),
            _ => 0,
        }
    }

    /// A client's connection gave up: its request failed, or its watch broke.
    fn gave_up(msg: &Msg) -> Option<Msg> {
        match msg {
            Msg::Api(req) => Some(Msg::ConnectionLost(Lost::Request(req.id))),
            Msg::ApiResp(resp) => Some(Msg::ConnectionLost(Lost::Request(resp.id))),
            Msg::Watch(ev) => Some(Msg::ConnectionLost(Lost::Watch(ev.watch_id))),
            // A service call (a program's cloud call) and its answer, as an API request.
            Msg::Request { id, .. } | Msg::Response { id, .. } => {
                Some(Msg::ConnectionLost(Lost::Request(*id)))
            }
            _ => None,
        }
    }

    /// A watch event lost is its HTTP/2 connection broken: the client's reads fail and
    /// every reflector on it relists, as on a reset (informer.rs).
    fn broken_by_drop(msg: &Msg) -> Option<Msg> {
        matches!(msg, Msg::Watch(_)).then_some(Msg::ConnectionReset)
    }

    fn describe(msg: &Msg) -> String {
        match msg {
            Msg::Api(ApiRequest { op, .. }) => match op {
                ApiOp::Get(key) => format!("get {}", key),
                ApiOp::List { kind, .. } => format!("list {kind}"),
                ApiOp::Create(o) => {
                    let name = if o.meta.name.is_empty() {
                        format!("{}*", o.meta.generate_name.as_deref().unwrap_or_default())
                    } else {
                        o.meta.name.clone()
                    };
                    format!("create {}", ObjectKey { name, ..o.key() })
                }
                ApiOp::Update { object, .. } => format!("update {}", object.key()),
                ApiOp::Patch { key, .. } => format!("patch {}", key),
                ApiOp::Delete { key, .. } => format!("delete {}", key),
                ApiOp::Bind { key, node_name, .. } => {
                    format!("bind {} to {node_name}", key)
                }
                other => format!("{other:?}"),
            },
            Msg::Request { body, .. } => {
                let text = format!("{body:?}");
                let short: String = text.chars().take(80).collect();
                format!("call {short}")
            }
            Msg::Watch(ev) => format!("{:?} {}", ev.event, ev.object.key()),
            other => format!("{other:?}").chars().take(80).collect(),
        }
    }
}
