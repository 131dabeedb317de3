//! The kernel's side of a world process: [`Proc`]'s `Actor` impl hands each event to
//! the process's component, answers SIGTERM the same way for every process, and tells
//! the kernel what the world's messages are (decision points, request ids, what a
//! connection that gave up or dropped a message means).
//!
//! User reconcilers plug in through [`crate::manager::Manager`], which hosts any
//! [`crate::manager::Reconciler`]; every process is a [`crate::Component`].

use crate::api::{ApiOp, ApiRequest};
pub use crate::component::{Endpoints, Proc, WorldCtx};
use crate::fault::WorldFault;
use crate::msg::{Lost, Msg, Timer};
use crate::object::{Lease, ObjectKey, Resource};
use crate::timer::ManagerTimer;
use reconsim_sim::{Actor, EventClass, ProcId, TimerId};

impl Actor for Proc {
    type Msg = Msg;
    type Fault = WorldFault;

    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        self.get_mut().on_start(ctx)
    }

    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        if matches!(msg, Msg::Terminate) {
            // SIGTERM: a component with a handler shuts down on its own (a Go program's
            // manager, `Component::on_terminate`); any other exits now and tells the
            // kubelet that sent it.
            if self.get_mut().on_terminate(from, ctx) {
                return;
            }
            ctx.note(|| "SIGTERM: exiting".to_string());
            ctx.send(from, Msg::ContainerExited);
            ctx.stop(ctx.me());
            return;
        }
        if matches!(msg, Msg::PeerClosed) {
            return self.get_mut().on_peer_closed(from, ctx);
        }
        self.get_mut().on_msg(from, msg, ctx)
    }

    fn on_timer(&mut self, _id: TimerId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        let Msg::Timer(timer) = msg else {
            panic!("a timer carried a non-timer message: {msg:?}");
        };
        self.get_mut().on_timer(timer, ctx)
    }

    fn on_crash(&mut self) {
        self.get_mut().on_crash()
    }

    fn on_fault(&mut self, fault: &WorldFault, active: bool, ctx: &mut WorldCtx<'_>) {
        self.get_mut().on_fault(fault, active, ctx)
    }

    /// Decision points for event anchors: API writes (a Lease's are renewals), reads,
    /// service calls and watch events. Watch opens, pings and timers are not decisions.
    fn classify(msg: &Msg) -> Option<EventClass> {
        match msg {
            Msg::Api(ApiRequest { op, .. }) => {
                let written = match op {
                    ApiOp::Get(_)
                    | ApiOp::GetCached { .. }
                    | ApiOp::List { .. }
                    | ApiOp::ListAt { .. } => {
                        return Some(EventClass::Read);
                    }
                    ApiOp::Watch { .. }
                    | ApiOp::WatchState { .. }
                    | ApiOp::Unwatch { .. }
                    | ApiOp::Ping => return None,
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
        matches!(timer, Msg::Timer(Timer::Manager(ManagerTimer::Wake { .. })))
    }

    /// The kind of object a request reads or writes, or a watch event reports on.
    fn subject(msg: &Msg) -> Option<String> {
        let kind = match msg {
            Msg::Api(ApiRequest { op, .. }) => match op {
                ApiOp::Get(key)
                | ApiOp::GetCached { key, .. }
                | ApiOp::Patch { key, .. }
                | ApiOp::Delete { key, .. }
                | ApiOp::Bind { key, .. } => key.kind,
                ApiOp::List { kind, .. } | ApiOp::ListAt { kind, .. } => *kind,
                ApiOp::Create(o) | ApiOp::Update { object: o, .. } => o.kind(),
                ApiOp::Watch { .. }
                | ApiOp::WatchState { .. }
                | ApiOp::Unwatch { .. }
                | ApiOp::Ping => return None,
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
        self.get().retransmits_ms(msg, sent)
    }

    fn lane(&self, msg: &Msg) -> u32 {
        self.get().lane(msg)
    }

    /// A client's connection gave up: its request failed, or its watch broke.
    fn gave_up(msg: &Msg) -> Option<Msg> {
        match msg {
            Msg::Api(req) => Some(Msg::ConnectionLost(Lost::Request(req.id))),
            Msg::ApiResp(resp) => Some(Msg::ConnectionLost(Lost::Request(resp.id))),
            Msg::Watch(ev) => Some(Msg::ConnectionLost(Lost::Watch(ev.watch_id))),
            Msg::WatchBookmark { watch_id, .. } | Msg::WatchEnd { watch_id } => {
                Some(Msg::ConnectionLost(Lost::Watch(*watch_id)))
            }
            // A service call (a program's cloud call) and its answer, as an API request.
            Msg::Request { id, .. } | Msg::Response { id, .. } => {
                Some(Msg::ConnectionLost(Lost::Request(*id)))
            }
            _ => None,
        }
    }

    fn broken_by_drop(&self, msg: &Msg) -> Option<Msg> {
        self.get().broken_by_drop(msg)
    }

    /// A world process's peers hear [`Msg::PeerClosed`] when it ends.
    fn closed() -> Option<Msg> {
        Some(Msg::PeerClosed)
    }

    fn describe(msg: &Msg) -> String {
        match msg {
            Msg::Api(ApiRequest { op, .. }) => match op {
                ApiOp::Get(key) | ApiOp::GetCached { key, .. } => format!("get {}", key),
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
