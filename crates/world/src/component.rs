//! Open components: the processes a family adds to the world (a cloud API, an etcd
//! model, a config server, a user's external service), with messages and timers of
//! their own, without an enum of the core to edit.
//!
//! A family's message is any plain-data type ([`Message`]: cloneable, comparable,
//! hashable, serializable); it travels as a [`Payload`], a type-erased, reference-counted
//! value that hashes into the trace as its own derived `Hash` does. Three envelopes of
//! [`crate::Msg`] carry payloads: `Request { id, body }` to a service, `Response { id,
//! body }` back to its caller (the `id` matches them, so a reconciler's call to a
//! service has the same timeout and interleaving semantics as an API call), and
//! `Family(body)` for one-way messages between a family's own processes; a family's
//! timers are `Timer::Family(body)`. A family's process implements [`Component`] and
//! runs as `Proc::Component`.

use crate::fault::WorldFault;
use crate::msg::{Msg, Timer};
use crate::proc::WorldCtx;
use reconsim_sim::ProcId;
use serde::Serialize;
use std::any::Any;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// What a family's message, answer or timer is: plain data.
pub trait Message: Clone + fmt::Debug + Eq + Hash + Serialize + Send + Sync + 'static {}

impl<T: Clone + fmt::Debug + Eq + Hash + Serialize + Send + Sync + 'static> Message for T {}

trait DynMessage: Send + Sync + fmt::Debug + 'static {
    fn as_any(&self) -> &dyn Any;
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
    fn eq_dyn(&self, other: &dyn DynMessage) -> bool;
    /// The derived `Hash` through a concrete stable hasher (no virtual call per field).
    fn stable_hash(&self) -> u64;
    fn as_serialize(&self) -> &dyn erased_serde::Serialize;
}

impl<T: Message> DynMessage for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
    fn eq_dyn(&self, other: &dyn DynMessage) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
    fn stable_hash(&self) -> u64 {
        reconsim_sim::StableHasher::hash_one(self)
    }
    fn as_serialize(&self) -> &dyn erased_serde::Serialize {
        self
    }
}

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

/// A family's message as the core carries it: any [`Message`], typed again at the
/// receiver.
///
/// ```
/// use reconsim_world::component::Payload;
///
/// #[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
/// struct Launch {
///     vm: String,
/// }
///
/// let p = Payload::new(Launch { vm: "web".into() });
/// assert!(p.is::<Launch>() && !p.is::<u32>());
/// assert_eq!(p.typed::<Launch>().map(|l| l.vm.as_str()), Some("web"));
/// assert_eq!(p.take::<Launch>().unwrap(), Launch { vm: "web".into() });
/// ```
#[derive(Clone)]
pub struct Payload(Arc<dyn DynMessage>);

impl Payload {
    pub fn new<T: Message>(message: T) -> Self {
        Payload(Arc::new(message))
    }

    /// The message as `T`, if it is one.
    pub fn typed<T: Message>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref::<T>()
    }

    pub fn is<T: Message>(&self) -> bool {
        self.typed::<T>().is_some()
    }

    /// The message as `T`, moved out (cloned only if the payload is shared), or the
    /// payload back if it is of another type.
    pub fn take<T: Message>(self) -> Result<T, Payload> {
        if !self.is::<T>() {
            return Err(self);
        }
        let typed = self.0.into_any().downcast::<T>().expect("checked above");
        Ok(Arc::try_unwrap(typed).unwrap_or_else(|shared| (*shared).clone()))
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Payload) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.eq_dyn(&*other.0)
    }
}

impl Eq for Payload {}

impl Hash for Payload {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.stable_hash());
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        erased_serde::serialize(self.0.as_serialize(), s)
    }
}

/// The payload envelopes, built from a family's own message.
impl Msg {
    /// A call of `request` to a service; `id` matches its [`Msg::response`].
    pub fn request<T: Message>(id: u64, request: T) -> Msg {
        Msg::Request {
            id,
            body: Payload::new(request),
        }
    }

    /// A service's answer to the request with `id`.
    pub fn response<T: Message>(id: u64, answer: T) -> Msg {
        Msg::Response {
            id,
            body: Payload::new(answer),
        }
    }

    /// A one-way message between a family's own processes.
    pub fn family<T: Message>(message: T) -> Msg {
        Msg::Family(Payload::new(message))
    }

    /// A family's timer, to set with `ctx.set_timer`.
    pub fn family_timer<T: Message>(timer: T) -> Msg {
        Msg::Timer(Timer::Family(Payload::new(timer)))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
    struct Ping(String);

    #[test]
    fn payloads_compare_hash_and_move_out_as_their_message() {
        let a = Payload::new(Ping("x".into()));
        let b = Payload::new(Ping("x".into()));
        let hash = |p: &Payload| reconsim_sim::StableHasher::hash_one(p);
        assert_eq!(a, b);
        assert_eq!(hash(&a), hash(&b));
        assert_ne!(a, Payload::new(Ping("y".into())));
        assert_ne!(a, Payload::new(7u32), "another type is another message");
        assert_eq!(a.typed::<Ping>(), Some(&Ping("x".into())));
        assert!(a.typed::<u32>().is_none());
        let shared = a.clone();
        assert_eq!(
            a.take::<Ping>(),
            Ok(Ping("x".into())),
            "a shared payload clones"
        );
        assert_eq!(shared.clone().take::<u32>(), Err(shared.clone()));
        assert_eq!(
            shared.take::<Ping>(),
            Ok(Ping("x".into())),
            "the last one moves"
        );
    }
}
