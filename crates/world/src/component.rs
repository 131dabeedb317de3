//! Open components: the processes a family adds to the world (a cloud API, an etcd
//! model, a config server, a user's external service), with messages and timers of
//! their own, without an enum of the core to edit.
//!
//! A family's message is any [`Message`], carried as a [`Payload`]. Three envelopes of
//! [`crate::Msg`] carry payloads: `Request { id, body }` to a service, `Response { id,
//! body }` back to its caller (the `id` matches them, so a reconciler's call to a
//! service has the same timeout and interleaving semantics as an API call), and
//! `Family(body)` for one-way messages between a family's own processes; a family's
//! timers are `Timer::Family(body)`. A family's process implements [`Component`] and
//! runs as `Proc::Component`.

use crate::fault::WorldFault;
use crate::msg::{Msg, Timer};
pub use crate::payload::{Message, Payload};
use crate::proc::WorldCtx;
use reconsim_sim::ProcId;
use std::any::Any;
use std::fmt;

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

/// A family's process: the same handlers the core's components have. Effects go
/// through `ctx` only (send, set a timer, draw randomness), so the kernel owns every
/// interleaving.
pub trait Component: fmt::Debug + 'static {
    fn on_start(&mut self, _ctx: &mut WorldCtx<'_>) {}
    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>);
    /// A timer this component set (`Timer::Family`, or a core helper's timer such as an
    /// informer's).
    fn on_timer(&mut self, _timer: Timer, _ctx: &mut WorldCtx<'_>) {}
    /// The process lost its memory (its restart calls `on_start` again).
    fn on_crash(&mut self) {}
    fn on_fault(&mut self, _fault: &WorldFault, _active: bool, _ctx: &mut WorldCtx<'_>) {}
    /// A count that grows whenever state a checker may read changes, and only then: a
    /// step after which it stands still (a poll answered, a read served) needs no check.
    /// `None` (the default): unknown, so checkers run after every step of the component.
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
    /// Which of this component's connections to its receiver `msg` goes on: see
    /// [`reconsim_sim::Actor::lane`]. 0, the default: one connection per receiver.
    fn lane(&self, _msg: &Msg) -> u32 {
        0
    }
    /// For tests and checkers that read a component's state: `proc.component::<T>()`.
    fn as_any(&self) -> &dyn Any;
}
