//! A family's messages as the core carries them: any plain-data type ([`Message`]:
//! cloneable, comparable, hashable, serializable), type-erased in a [`Payload`], a
//! reference-counted value that hashes into the trace as its own derived `Hash` does.
//!
//! A leaf: the core's message enum ([`crate::msg`]) carries payloads without knowing
//! any family's types.

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
