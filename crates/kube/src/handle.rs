//! A program's handle on the simulated world beyond the API server: the services a
//! family or the user provides (the cloud), called as real code calls its SDK. Each
//! call is a message on the network to the service's process and its answer one back,
//! so a cloud call is an interleaving point, meets partitions and is lost with a crash,
//! as an API request is.
//!
//! Found as tokio's runtime handle is: [`Handle::current`] inside the program (while
//! its runtime runs, and while its factory builds it), so code far from `main` reaches
//! it without plumbing. Typed clients take it: `reconsim_cloud::Ec2::new(handle,
//! cloud)` (it is a [`ServiceCaller`]).

use reconsim_sim::ProcId;
use reconsim_world::component::{Message, Payload, ServiceCaller};
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex};

/// Why a service call got no answer of the expected type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallError {
    /// The connection gave up (TCP's retransmissions under a partition) or the service's
    /// host reset it: no answer will come.
    ConnectionLost,
    /// The service answered with something else (its type, in words).
    UnexpectedAnswer(String),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::ConnectionLost => f.write_str("connection lost"),
            CallError::UnexpectedAnswer(a) => write!(f, "unexpected answer: {a}"),
        }
    }
}

impl std::error::Error for CallError {}

/// A call the program made, waiting for the bridge to send it.
pub(crate) struct Call {
    pub to: ProcId,
    pub body: Payload,
    pub answer: tokio::sync::oneshot::Sender<Result<Payload, CallError>>,
}

pub(crate) type Calls = Arc<Mutex<VecDeque<Call>>>;

/// The program's way to the world's services. Cheap to clone; `Send`, so it lives in a
/// controller's context.
#[derive(Clone)]
pub struct Handle {
    pub(crate) calls: Calls,
    services: Arc<BTreeMap<String, ProcId>>,
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("services", &self.services.keys().collect::<Vec<_>>())
            .finish()
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Handle>> = const { RefCell::new(None) };
}

impl Handle {
    pub(crate) fn new(services: Arc<BTreeMap<String, ProcId>>) -> Self {
        Handle {
            calls: Calls::default(),
            services,
        }
    }

    /// The handle of the program running on this thread.
    ///
    /// # Panics
    /// Outside a program run by a `KubeBridge` (as tokio's `Handle::current` panics
    /// outside a runtime).
    pub fn current() -> Handle {
        Handle::try_current().expect(
            "Handle::current() outside a reconsim program: call it from code a KubeBridge runs",
        )
    }

    /// The handle of the program running on this thread, if one is.
    pub fn try_current() -> Option<Handle> {
        CURRENT.with(|c| c.borrow().clone())
    }

    /// The process of the service the bridge was given under `name`
    /// (`KubeBridge::service`).
    pub fn service(&self, name: &str) -> Option<ProcId> {
        self.services.get(name).copied()
    }

    /// Call the service process `to` with `request`; its answer, a `T`.
    pub async fn call<T: Message>(
        &self,
        to: ProcId,
        request: impl Message,
    ) -> Result<T, CallError> {
        let (answer, rx) = tokio::sync::oneshot::channel();
        self.calls.lock().expect("the calls' lock").push_back(Call {
            to,
            body: Payload::new(request),
            answer,
        });
        // The sender drops only with the process (a crash), which never polls this again.
        let body = rx.await.map_err(|_| CallError::ConnectionLost)??;
        body.take::<T>()
            .map_err(|p| CallError::UnexpectedAnswer(format!("{p:?}")))
    }

    /// Run `f` with this handle as the thread's current one.
    pub(crate) fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        let before = CURRENT.with(|c| c.replace(Some(self.clone())));
        struct Restore(Option<Handle>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let before = self.0.take();
                CURRENT.with(|c| *c.borrow_mut() = before);
            }
        }
        let _restore = Restore(before);
        f()
    }
}

impl ServiceCaller for Handle {
    type Error = CallError;
    fn call<T: Message>(
        &self,
        to: ProcId,
        request: impl Message,
    ) -> impl std::future::Future<Output = Result<T, CallError>> {
        Handle::call(self, to, request)
    }
}
