//! The one interface of the world's processes: the core's components (the API server,
//! kubelets, controllers, managers) and those a family adds (a cloud API, an etcd
//! model, a config server, a user's external service) are each a [`Component`], run
//! by the kernel as a [`Proc`], with messages and timers of their own, without an enum
//! of the core to edit.
//!
//! A family's message is any [`Message`], carried as a [`Payload`]. Three envelopes of
//! [`crate::Msg`] carry payloads: `Request { id, body }` to a service, `Response { id,
//! body }` back to its caller (the `id` matches them, so a reconciler's call to a
//! service has the same timeout and interleaving semantics as an API call), and
//! `Family(body)` for one-way messages between a family's own processes; a family's
//! timers are `Timer::Family(body)`.
//!
//! This module names no component: they all import it (the kernel's side of a
//! [`Proc`], its `Actor` impl, is [`crate::proc`]).

use crate::fault::WorldFault;
use crate::msg::{Msg, Timer};
pub use crate::payload::{Message, Payload};
use reconsim_sim::ProcId;
use std::any::{Any, TypeId};
use std::fmt;

/// The kernel context as the world's components see it.
pub type WorldCtx<'a> = reconsim_sim::Ctx<'a, Proc>;

/// Where the shared services live; handed to every component at construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Endpoints {
    pub apiserver: ProcId,
}

/// A process of the world: one component behind the one interface, so the kernel's
/// process type never lists the components (a family adds its own without editing it).
///
/// ```
/// use reconsim_world::Proc;
/// use reconsim_world::script::Script;
///
/// let proc = Proc::new(Script::new(reconsim_sim::ProcId(0), vec![]));
/// assert!(proc.component::<Script>().is_some());
/// assert!(proc.component::<reconsim_world::kubelet::Container>().is_none());
///
/// let boxed: Box<dyn reconsim_world::Component> = Box::new(Script::new(reconsim_sim::ProcId(0), vec![]));
/// assert!(Proc::from(boxed).component::<Script>().is_some());
/// ```
pub struct Proc {
    /// The component's type, beside the box: a checker's scan for one type
    /// (`component::<T>()` over every process) reads no component but the one it finds.
    type_id: TypeId,
    component: Box<dyn Component>,
}

impl Proc {
    pub fn new(component: impl Component) -> Proc {
        Proc::from(Box::new(component) as Box<dyn Component>)
    }

    /// The component, as its own type: `sim.actor(p).component::<ApiServer>()`.
    pub fn component<T: Component>(&self) -> Option<&T> {
        if self.type_id != TypeId::of::<T>() {
            return None;
        }
        self.component.as_any().downcast_ref::<T>()
    }

    /// Its component's type: what a checker's [`Reads`] names.
    ///
    /// [`Reads`]: https://docs.rs/reconsim-check (reconsim_check::Reads)
    pub fn component_type(&self) -> TypeId {
        self.type_id
    }

    /// Its component's [`Component::changes`]: a runner checks invariants only after a
    /// step that changed what they read.
    pub fn changes(&self) -> Option<u64> {
        self.component.changes()
    }

    /// The component behind the interface, for the kernel's side ([`crate::proc`]).
    pub(crate) fn get(&self) -> &dyn Component {
        &*self.component
    }

    pub(crate) fn get_mut(&mut self) -> &mut dyn Component {
        &mut *self.component
    }
}

/// A component built behind a box already (a family's image or process factory).
impl From<Box<dyn Component>> for Proc {
    fn from(component: Box<dyn Component>) -> Proc {
        Proc {
            type_id: <dyn Any>::type_id(component.as_any()),
            component,
        }
    }
}

/// The component's own `Debug`: a process prints as what it runs.
impl fmt::Debug for Proc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.component.fmt(f)
    }
}

/// [`Component::changes`] of a component that holds nothing a checker reads (a kubelet,
/// a manager: what they do shows in the API server's store), so a runner checks nothing
/// after its steps. A count no component reaches.
pub const UNREAD: u64 = u64::MAX;

/// What calls a family's service process (the cloud): a reconciler's
/// [`crate::runtime::Client`], or a real program's handle (reconsim-kube's `Handle`).
/// A typed service client (the cloud's `Ec2`) is written once over it and serves both.
pub trait ServiceCaller: Clone + 'static {
    /// Why a call got no answer of the expected type.
    type Error: fmt::Debug + 'static;
    /// Send `request` to the service process `to`; its answer, a `T`.
    fn call<T: Message>(
        &self,
        to: ProcId,
        request: impl Message,
    ) -> impl std::future::Future<Output = Result<T, Self::Error>>;
}

/// A process's logic: the core's (the API server, a kubelet, a manager) and a family's
/// alike. Effects go through `ctx` only (send, set a timer, draw randomness), so the
/// kernel owns every interleaving.
pub trait Component: fmt::Debug + 'static {
    fn on_start(&mut self, _ctx: &mut WorldCtx<'_>) {}
    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>);
    /// A timer this component set (`Timer::Family`, or a core helper's timer such as an
    /// informer's). Another component's timer here is a broken invariant: the kernel
    /// fires a timer only in the process that set it.
    fn on_timer(&mut self, _timer: Timer, _ctx: &mut WorldCtx<'_>) {}
    /// The process lost its memory (its restart calls `on_start` again).
    fn on_crash(&mut self) {}
    /// SIGTERM from the kubelet that runs it: `true` when the component shuts down on
    /// its own and tells the kubelet (`ContainerExited`) once it has, within the pod's
    /// grace period or killed at its end; `false` (the default) ends the process now,
    /// as SIGTERM's default action ends a process with no handler.
    fn on_terminate(&mut self, _from: ProcId, _ctx: &mut WorldCtx<'_>) -> bool {
        false
    }
    /// Process `peer` ended (crashed, or exited with its host up) and its host closed
    /// every connection this process had with it ([`Msg::PeerClosed`]): a client's
    /// requests to it fail and its watches on it end now, not when it starts again, and
    /// its new connections are refused until it does (docs/semantics.md 4.6). A server
    /// forgets what the peer had open. The default does nothing: a component with no
    /// connection worth telling.
    fn on_peer_closed(&mut self, _peer: ProcId, _ctx: &mut WorldCtx<'_>) {}
    fn on_fault(&mut self, _fault: &WorldFault, _active: bool, _ctx: &mut WorldCtx<'_>) {}
    /// A count that grows whenever state a checker may read changes, and only then: a
    /// step after which it stands still (a poll answered, a read served) needs no check.
    /// `None` (the default): unknown, so checkers run after every step of the component.
    /// `Some(UNREAD)`: it holds nothing a checker reads ([`UNREAD`]).
    fn changes(&self) -> Option<u64> {
        None
    }
    /// How long this component's connections keep trying to carry `msg` across a
    /// partition, if they retransmit under either mode (a kube-rs client: no health
    /// check closes them): see [`reconsim_sim::Actor::retransmits_ms`]. `None`, the
    /// default: a client-go client's connections, as the partition's mode says.
    fn retransmits_ms(&self, _msg: &Msg, _sent: bool) -> Option<u64> {
        None
    }
    /// What this component, the client end of the connection that carried `msg`,
    /// hears when a fault or a dropping partition loses it: see
    /// [`reconsim_sim::Actor::broken_by_drop`]. The default, a client-go client's: its
    /// requests and watches share one HTTP/2 connection to the API server, so the loss
    /// of any of them breaks it, as a reset ([`Msg::ConnectionReset`]: every reflector
    /// relists, every request on it fails). A service call's connection is its own.
    fn broken_by_drop(&self, msg: &Msg) -> Option<Msg> {
        matches!(
            msg,
            Msg::Api(_)
                | Msg::ApiResp(_)
                | Msg::Watch(_)
                | Msg::WatchBookmark { .. }
                | Msg::WatchEnd { .. }
        )
        .then_some(Msg::ConnectionReset)
    }
    /// Which of this component's connections to its receiver `msg` goes on: see
    /// [`reconsim_sim::Actor::lane`]. 0, the default: one connection per receiver.
    fn lane(&self, _msg: &Msg) -> u32 {
        0
    }
    /// For tests and checkers that read a component's state: `proc.component::<T>()`.
    fn as_any(&self) -> &dyn Any;
}
