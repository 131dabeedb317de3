//! Why a reconcile failed, typed to the end: a reconciler returns its own error type
//! (a family's enum, kube-runtime's `Err(e)`), and the manager keeps it as it is until
//! it writes the reconcile's note, where it reads as its `Display`.

use serde::Serialize;
use std::error::Error;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A reconcile's error: any `std::error::Error`, shared (a [`crate::manager::Step`] is
/// plain data: cloned, compared and hashed as its message).
///
/// ```
/// use reconsim_world::reconcile_error::ReconcileError;
///
/// #[derive(Debug, PartialEq)]
/// struct MinNodes;
/// impl std::fmt::Display for MinNodes {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("ErrControlPlaneMinNodes")
///     }
/// }
/// impl std::error::Error for MinNodes {}
///
/// let e = ReconcileError::new(MinNodes);
/// assert_eq!(e.to_string(), "ErrControlPlaneMinNodes");
/// assert_eq!(e.downcast_ref::<MinNodes>(), Some(&MinNodes));
/// ```
#[derive(Clone)]
pub struct ReconcileError(Arc<dyn Error>);

impl ReconcileError {
    pub fn new(error: impl Error + 'static) -> Self {
        ReconcileError(Arc::new(error))
    }

    /// The error as its own type, if it is one.
    pub fn downcast_ref<E: Error + 'static>(&self) -> Option<&E> {
        self.0.downcast_ref::<E>()
    }
}

/// The step machine's protocol with the manager broke (a reply with no reconcile in
/// progress, a future awaiting what the manager does not drive): a bug of the
/// reconciler's adapter, ending the reconcile in error rather than the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Protocol(pub &'static str);

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl Error for Protocol {}

/// A step's request was answered otherwise than the step needs (an API error, a
/// timeout, a service's refusal): the step that asked, and the answer as it came.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unexpected {
    pub during: String,
    pub answer: String,
}

impl Unexpected {
    pub fn new(during: impl Into<String>, answer: &impl fmt::Debug) -> Self {
        Unexpected {
            during: during.into(),
            answer: format!("{answer:?}"),
        }
    }
}

impl fmt::Display for Unexpected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.during, self.answer)
    }
}

impl Error for Unexpected {}

impl fmt::Display for ReconcileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for ReconcileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// Two errors are equal when they read the same (the note is what a run records).
impl PartialEq for ReconcileError {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.to_string() == other.to_string()
    }
}

impl Eq for ReconcileError {}

impl Hash for ReconcileError {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.to_string().hash(state);
    }
}

impl Serialize for ReconcileError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
