//! Reconcilers in kube-runtime's shape: an async `reconcile` and an `error_policy`,
//! registered with their relations declared once (`Controller::new::<K>().owns::<P>()`),
//! calling the API server through typed clients with kube's names (`Api<K>`), reading
//! the informer cache through a reflector-like [`Store`].
//!
//! Design: the async layer sits on the step machine ([`crate::manager::Reconciler`]),
//! which stays the manager's one interface. The manager polls the reconcile's future
//! itself, with a waker that does nothing: no executor, no threads, no clock. A future
//! that awaits a request ([`Api`], [`Client::call`], [`Client::sleep`]) leaves it in the
//! [`Link`] it shares with its [`Client`] and returns `Pending`; the adapter hands the
//! request to the manager as one [`Step`], exactly where a step machine would, and polls
//! again with the reply. So every await on a request is an interleaving point, and
//! nothing else is: reads of the cache, the clock, the process's random stream and trace
//! notes are synchronous, as they are in kube-rs (`Store::get`) and controller-runtime.
//! A crash drops the future and the controller's context (the `context` closure makes a
//! fresh one); an unanswered request resolves with [`Error::Timeout`] after the
//! manager's request timeout.
//!
//! What kube-runtime does that this follows (kube-rs kube-runtime/src/controller/mod.rs
//! @ac95b19, `applier`): an object the store no longer has is not reconciled
//! (`Error::ObjectNotFound`, and the reconciler is not called); the
//! reconcile's `Ok(Action)` schedules its next run (`requeue(d)`, or none:
//! `await_change()`); its `Err(e)` goes to `error_policy(obj, &e, ctx)`, whose `Action`
//! schedules the retry. The work queue is the manager's, controller-runtime's (one key
//! at a time, dirty re-adds).
//!
//! A write that ends an object's life (its last finalizer removed while it is being
//! deleted) succeeds, as a Go client sees it: the server answers a Status of success,
//! not the object, so `replace` answers the object as written and a patch the cache's
//! copy.

use crate::api::{ApiError, ApiOk, ApiOp, PatchOp};
use crate::component::Message;
use crate::fault::FailpointAction;
use crate::informer::Cache;
use crate::manager::{Call, ReconcileCtx, Reconciler, Reply, Step, enqueue_for, enqueue_owner};
use crate::object::{Body, Kind, Object, ObjectKey, Resource, Uid};
use crate::reconcile_error::ReconcileError;
use reconsim_sim::{ProcId, SimRng, SimTime};
use std::cell::{Cell, RefCell};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Waker};
use std::time::Duration;

// ----- what a reconcile returns ------------------------------------------------------------

/// When to reconcile the object again (kube-runtime's `controller::Action`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action {
    next: Next,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    After(u64),
    Change,
    /// After the work queue's per-item backoff.
    RateLimited,
}

impl Action {
    /// Reconcile again after `duration` of the process's time, or earlier on a change.
    pub fn requeue(duration: Duration) -> Self {
        let ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        Action {
            next: Next::After(ms),
        }
    }

    /// Reconcile again only when a watched object changes.
    pub fn await_change() -> Self {
        Action { next: Next::Change }
    }

    /// Reconcile again after the work queue's per-item exponential backoff (5 ms
    /// doubling to 1000 s, forgotten on success): what a Go controller-runtime
    /// controller gets for an error or `Result{Requeue: true}`. Not in kube-runtime,
    /// whose `error_policy` picks the delay; here for controllers ported from Go.
    pub fn rate_limited() -> Self {
        Action {
            next: Next::RateLimited,
        }
    }

    /// The requeue delay, if a fixed one.
    pub fn requeue_after_ms(&self) -> Option<u64> {
        match self.next {
            Next::After(ms) => Some(ms),
            _ => None,
        }
    }
}

/// The status of a failed API call, as kube's `ErrorResponse` carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorResponse {
    /// The HTTP code: 404, 409, 410, 422.
    pub code: u16,
    /// `NotFound`, `AlreadyExists`, `Conflict`, `Gone`, `Invalid`.
    pub reason: &'static str,
    pub message: String,
}

/// A failed request (kube's `Error`, cut down to what the simulated cluster can answer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The API server answered with an error status.
    Api(ErrorResponse),
    /// No answer within the request timeout (a partition, a dead server).
    Timeout,
    /// A service answered with another type than the one asked for.
    UnexpectedAnswer(String),
    /// A family's service refused the request (its own error, as text), for a
    /// reconcile to return with `?`.
    Service(String),
    /// An armed failpoint returned an error ([`Client::failpoint`]).
    Failpoint(String),
}

impl Error {
    /// The HTTP code of an API error (`None` for a timeout).
    pub fn code(&self) -> Option<u16> {
        match self {
            Error::Api(r) => Some(r.code),
            _ => None,
        }
    }

    fn api(e: ApiError) -> Self {
        let (code, reason, message) = match e {
            ApiError::NotFound => (404, "NotFound", String::new()),
            ApiError::AlreadyExists => (409, "AlreadyExists", String::new()),
            ApiError::Conflict => (409, "Conflict", String::new()),
            ApiError::Gone => (410, "Gone", String::new()),
            ApiError::Invalid(m) => (422, "Invalid", m),
            ApiError::ApplyConflict(m) => (409, "Conflict", m),
            ApiError::NamespaceNotFound(ns) => {
                (404, "NotFound", format!("namespaces {ns:?} not found"))
            }
            e @ ApiError::NamespaceTerminating { .. } => (403, "Forbidden", e.forbidden()),
        };
        Error::Api(ErrorResponse {
            code,
            reason,
            message,
        })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Api(r) if r.message.is_empty() => write!(f, "{} ({})", r.reason, r.code),
            Error::Api(r) => write!(f, "{} ({}): {}", r.reason, r.code, r.message),
            Error::Timeout => f.write_str("timed out"),
            Error::UnexpectedAnswer(m) => write!(f, "unexpected answer: {m}"),
            Error::Service(m) => write!(f, "the service refused: {m}"),
            Error::Failpoint(name) => write!(f, "failpoint {name}"),
        }
    }
}

impl std::error::Error for Error {}

// ----- the link between a reconcile's future and the manager --------------------------------

/// What a request future leaves for the adapter to send.
#[derive(Debug)]
enum Effect {
    Call(Call),
    Sleep(u64),
    /// A failpoint crashes the process.
    Crash(u64),
}

/// Shared by a controller's [`Client`]s and its adapter: the request the future awaits,
/// the reply to it, and, only while the adapter polls, the manager's reconcile context.
#[derive(Default)]
struct Link {
    effect: RefCell<Option<Effect>>,
    reply: RefCell<Option<Reply>>,
    /// The `ReconcileCtx` of the poll in progress, or null between polls.
    ctx: Cell<*mut ()>,
    /// Set while a `with_ctx` closure runs (a guard against reentry).
    in_ctx: Cell<bool>,
}

impl Link {
    /// Run `f` on the reconcile context of the poll in progress.
    ///
    /// # Panics
    /// Outside a poll (a client kept and used after its reconcile, or from elsewhere),
    /// or from inside another `with_ctx`.
    fn with_ctx<R>(&self, f: impl FnOnce(&mut ReconcileCtx<'_>) -> R) -> R {
        let p = self.ctx.get();
        assert!(
            !p.is_null(),
            "a reconsim client is used outside the reconcile that polls it"
        );
        assert!(
            !self.in_ctx.replace(true),
            "a reentrant use of the reconcile context"
        );
        // SAFETY: `p` is set by the adapter's `reconcile` to its `&mut ReconcileCtx` just
        // before it polls the future (or calls the error policy) and reset to null right
        // after, within that call, so the context outlives every use; the future and the
        // error policy (the only users of clients) run only then, the adapter does not
        // touch the context meanwhile, and `in_ctx` rules out a second live reference.
        // The reference does not outlive `f`.
        let ctx = unsafe { &mut *(p as *mut ReconcileCtx<'_>) };
        let r = f(ctx);
        self.in_ctx.set(false);
        r
    }
}

/// A future that hands one request to the adapter and resolves with its reply.
struct Request {
    link: Rc<Link>,
    effect: Option<Effect>,
}

impl Future for Request {
    type Output = Reply;

    fn poll(mut self: Pin<&mut Self>, _: &mut TaskContext<'_>) -> Poll<Reply> {
        if let Some(effect) = self.effect.take() {
            let mut slot = self.link.effect.borrow_mut();
            assert!(
                slot.is_none(),
                "a reconcile awaits one request at a time (join! of requests is not modelled)"
            );
            *slot = Some(effect);
            return Poll::Pending;
        }
        match self.link.reply.borrow_mut().take() {
            Some(reply) => Poll::Ready(reply),
            None => Poll::Pending,
        }
    }
}

// ----- clients -----------------------------------------------------------------------------

/// A controller's handle on the world (kube's `Client`, plus what a process has: its
/// clock, its random stream, its trace notes). Cheap to clone; usable only while the
/// manager runs the controller's `reconcile` or `error_policy` (not in the closure that
/// makes the context).
#[derive(Clone)]
pub struct Client {
    link: Rc<Link>,
}

impl crate::component::ServiceCaller for Client {
    type Error = Error;
    fn call<T: Message>(
        &self,
        to: ProcId,
        request: impl Message,
    ) -> impl std::future::Future<Output = Result<T, Error>> {
        Client::call(self, to, request)
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Client")
    }
}

impl Client {
    async fn request(&self, call: Call) -> Reply {
        Request {
            link: self.link.clone(),
            effect: Some(Effect::Call(call)),
        }
        .await
    }

    async fn api(&self, op: ApiOp) -> Result<ApiOk, Error> {
        match self.request(Call::Api(op)).await {
            Reply::Api(Ok(ok)) => Ok(ok),
            Reply::Api(Err(e)) => Err(Error::api(e)),
            Reply::TimedOut => Err(Error::Timeout),
            other => Err(Error::UnexpectedAnswer(format!("{other:?}"))),
        }
    }

    /// Call a family's service process `to` (a cloud API) with `request`; the answer is
    /// a `T`. The same timeout and interleaving as an API call.
    pub async fn call<T: Message>(&self, to: ProcId, request: impl Message) -> Result<T, Error> {
        match self.request(Call::service(to, request)).await {
            Reply::Service(p) => p
                .take::<T>()
                .map_err(|p| Error::UnexpectedAnswer(format!("{p:?}"))),
            Reply::TimedOut => Err(Error::Timeout),
            other => Err(Error::UnexpectedAnswer(format!("{other:?}"))),
        }
    }

    /// Wait `ms` of the process's time inside the reconcile (a poll loop's sleep).
    pub async fn sleep(&self, ms: u64) {
        let reply = Request {
            link: self.link.clone(),
            effect: Some(Effect::Sleep(ms)),
        }
        .await;
        debug_assert_eq!(reply, Reply::Woke);
    }

    /// A named point in the code (FoundationDB's BUGGIFY, the fail crate's `fail_point!`):
    /// `ctx.client.failpoint("after-run-instances").await?`. Unless the fault plan armed
    /// it in this process, it returns at once and changes nothing, not even the history;
    /// armed, its chosen hit crashes the process there, returns `Error::Failpoint`, or
    /// stalls the reconcile for a while (`WorldFault::Failpoint`).
    pub async fn failpoint(&self, name: &str) -> Result<(), Error> {
        match self.link.with_ctx(|c| c.failpoint(name)) {
            None => Ok(()),
            Some(FailpointAction::Error) => Err(Error::Failpoint(name.to_string())),
            Some(FailpointAction::Stall { ms }) => {
                self.sleep(ms).await;
                Ok(())
            }
            Some(FailpointAction::Crash { restart_after_ms }) => {
                // The process dies here: this request is never answered.
                Request {
                    link: self.link.clone(),
                    effect: Some(Effect::Crash(restart_after_ms)),
                }
                .await;
                unreachable!("a crashed reconcile is never polled again")
            }
        }
    }

    /// The process's clock.
    pub fn now(&self) -> SimTime {
        self.link.with_ctx(|c| c.now)
    }

    /// The process's identity (its pod or process name).
    pub fn identity(&self) -> String {
        self.link.with_ctx(|c| c.identity.to_string())
    }

    /// A draw from the process's random stream (the only randomness a reconcile has).
    pub fn random<R>(&self, draw: impl FnOnce(&mut SimRng) -> R) -> R {
        self.link.with_ctx(|c| draw(&mut *c.rng))
    }

    /// A line for `reconsim explain` and `--timeline` (full traces only; `text` is not
    /// called otherwise).
    pub fn note(&self, text: impl FnOnce() -> String) {
        self.link.with_ctx(|c| c.note(text))
    }

    /// The informer cache's objects of kind `K` (a reflector's store).
    pub fn store<K: Resource>(&self) -> Store<K> {
        Store {
            link: self.link.clone(),
            kind: PhantomData,
        }
    }
}

/// The informer cache's view of kind `K` (kube-runtime's `reflector::Store`): reads are
/// synchronous and may lag the API server.
pub struct Store<K> {
    link: Rc<Link>,
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Store {
            link: self.link.clone(),
            kind: PhantomData,
        }
    }
}

impl<K: Resource> Store<K> {
    fn with_cache<R>(&self, f: impl FnOnce(&Cache) -> R) -> R {
        self.link.with_ctx(|c| f(c.cache))
    }

    /// The cached object `namespace/name` (`""` namespace for a cluster-scoped kind).
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<Object>> {
        let key = ObjectKey::new(K::KIND, namespace, name);
        self.with_cache(|c| c.get(&key).cloned())
    }

    /// Every cached object of the kind, in key order.
    pub fn state(&self) -> Vec<Arc<Object>> {
        self.with_cache(|c| c.list(K::KIND).cloned().collect())
    }

    /// The cached objects of the kind in `namespace` whose controller owner has `uid`.
    pub fn owned_by(&self, namespace: &str, uid: Uid) -> Vec<Arc<Object>> {
        self.with_cache(|c| {
            c.list(K::KIND)
                .filter(|o| o.meta.namespace == namespace)
                .filter(|o| o.meta.controller_ref().is_some_and(|r| r.uid == uid))
                .cloned()
                .collect()
        })
    }
}

/// Options of a list (kube's `ListParams`): an equality label selector, `k=v,k2=v2`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListParams {
    pub label_selector: Option<String>,
}

impl ListParams {
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = Some(selector.to_string());
        self
    }

    fn matches(&self, o: &Object) -> bool {
        let Some(s) = &self.label_selector else {
            return true;
        };
        s.split(',').filter(|t| !t.is_empty()).all(|term| {
            let (k, v) = term.split_once('=').unwrap_or((term, ""));
            o.meta.labels.get(k.trim()).map(String::as_str) == Some(v.trim())
        })
    }
}

/// Options of a create or replace (kube's `PostParams`); nothing is modelled yet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PostParams {}

/// Options of a patch (kube's `PatchParams`); nothing is modelled yet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PatchParams {}

/// Options of a delete (kube's `DeleteParams`): a uid precondition and a grace period.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteParams {
    pub uid: Option<Uid>,
    pub grace_period_seconds: Option<u64>,
}

/// Requests for objects of kind `K` in one namespace, or cluster-wide (kube's `Api<K>`).
/// Each method is one request to the API server, and each await an interleaving point.
pub struct Api<K> {
    client: Client,
    namespace: Option<String>,
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Api<K> {
    fn clone(&self) -> Self {
        Api {
            client: self.client.clone(),
            namespace: self.namespace.clone(),
            kind: PhantomData,
        }
    }
}

impl<K: Resource + Default> Api<K> {
    /// Objects of `namespace`.
    pub fn namespaced(client: Client, namespace: &str) -> Self {
        Api {
            client,
            namespace: Some(namespace.to_string()),
            kind: PhantomData,
        }
    }

    /// Cluster-scoped objects, or for a list, every namespace.
    pub fn all(client: Client) -> Self {
        Api {
            client,
            namespace: None,
            kind: PhantomData,
        }
    }

    fn key(&self, name: &str) -> ObjectKey {
        ObjectKey::new(K::KIND, self.namespace.as_deref().unwrap_or(""), name)
    }

    fn object(ok: ApiOk) -> Result<Arc<Object>, Error> {
        match ok {
            ApiOk::Object(o) => Ok(o),
            other => Err(Error::UnexpectedAnswer(format!("{other:?}"))),
        }
    }

    /// The answer to a write of `name`. A write that removes the last finalizer of an
    /// object being deleted ends its life, and the API server answers a `Status` of
    /// success, not the object (apiserver `registry/generic/registry/store.go`: Update
    /// returns `finalizeDelete`'s Status unless the resource returns deleted objects).
    /// Go clients take that as success, and controllers ported from Go expect it; the
    /// cache's copy of the object, or once the cache has seen the deletion a tombstone
    /// (the name, a deletion time, a default body), stands in for the object.
    fn written(&self, name: &str, ok: ApiOk) -> Result<Arc<Object>, Error> {
        let ns = self.namespace.as_deref().unwrap_or("");
        match ok {
            ApiOk::Deleted => Ok(self.client.store::<K>().get(ns, name).unwrap_or_else(|| {
                let mut meta = crate::object::ObjectMeta::named(ns, name);
                meta.deletion_timestamp = Some(self.client.now());
                Arc::new(Object::new(meta, K::default()))
            })),
            ok => Self::object(ok),
        }
    }

    /// GET: the object as the API server holds it now.
    pub async fn get(&self, name: &str) -> Result<Arc<Object>, Error> {
        Self::object(self.client.api(ApiOp::Get(self.key(name))).await?)
    }

    /// GET, with `None` for 404.
    pub async fn get_opt(&self, name: &str) -> Result<Option<Arc<Object>>, Error> {
        match self.get(name).await {
            Ok(o) => Ok(Some(o)),
            Err(e) if e.code() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// LIST, filtered by the label selector (the server answers a whole list at once, so
    /// filtering the answer is what a server-side selector gives).
    pub async fn list(&self, params: &ListParams) -> Result<Vec<Arc<Object>>, Error> {
        let op = ApiOp::List {
            kind: K::KIND,
            namespace: self.namespace.clone(),
            // kube's ListParams without a resourceVersion: a consistent read.
            from_watch_cache: false,
        };
        match self.client.api(op).await? {
            ApiOk::List { items, .. } => {
                Ok(items.into_iter().filter(|o| params.matches(o)).collect())
            }
            other => Err(Error::UnexpectedAnswer(format!("{other:?}"))),
        }
    }

    /// POST: create `object` (a name, or a `generate_name`, in its metadata).
    pub async fn create(&self, _: &PostParams, object: Object) -> Result<Arc<Object>, Error> {
        Self::object(self.client.api(ApiOp::Create(Box::new(object))).await?)
    }

    /// PUT: replace the object with `object`, conditional on its resourceVersion. A
    /// replace that removes the last finalizer of an object being deleted ends its life
    /// and answers the object as written.
    pub async fn replace(&self, _: &PostParams, object: Object) -> Result<Arc<Object>, Error> {
        let name = object.meta.name.clone();
        let sent = object.meta.is_deleting().then(|| object.clone());
        let op = ApiOp::Update {
            object: Box::new(object),
            precondition: true,
        };
        match (self.client.api(op).await?, sent) {
            (ApiOk::Deleted, Some(o)) => Ok(Arc::new(o)),
            (ok, _) => self.written(&name, ok),
        }
    }

    /// One PATCH of `name`, conditional on `resource_version` if given.
    async fn patch_ops(
        &self,
        name: &str,
        ops: Vec<PatchOp>,
        resource_version: Option<u64>,
    ) -> Result<Arc<Object>, Error> {
        let op = ApiOp::Patch {
            key: self.key(name),
            ops,
            resource_version,
        };
        let ok = self.client.api(op).await?;
        self.written(name, ok)
    }

    /// PATCH: apply `ops` (metadata edits, a typed merge patch, a spec) to the object.
    pub async fn patch(
        &self,
        name: &str,
        _: &PatchParams,
        ops: Vec<PatchOp>,
    ) -> Result<Arc<Object>, Error> {
        self.patch_ops(name, ops, None).await
    }

    /// PATCH conditional on `resource_version` (a patch that carries
    /// `metadata.resourceVersion`): 409 Conflict if the object was written since.
    pub async fn patch_conditional(
        &self,
        name: &str,
        resource_version: u64,
        _: &PatchParams,
        ops: Vec<PatchOp>,
    ) -> Result<Arc<Object>, Error> {
        self.patch_ops(name, ops, Some(resource_version)).await
    }

    /// PATCH of the status subresource: `status`'s status part replaces the object's.
    pub async fn patch_status(
        &self,
        name: &str,
        _: &PatchParams,
        status: K,
    ) -> Result<Arc<Object>, Error> {
        let ops = vec![PatchOp::Status(Body::new(status))];
        self.patch_ops(name, ops, None).await
    }

    /// PUT of the status subresource, conditional on `resource_version`.
    pub async fn replace_status(
        &self,
        name: &str,
        resource_version: u64,
        status: K,
    ) -> Result<Arc<Object>, Error> {
        let ops = vec![PatchOp::Status(Body::new(status))];
        self.patch_ops(name, ops, Some(resource_version)).await
    }

    /// DELETE. `Ok(Some(object))` when the deletion only marked it (finalizers),
    /// `Ok(None)` when it is gone.
    pub async fn delete(
        &self,
        name: &str,
        params: &DeleteParams,
    ) -> Result<Option<Arc<Object>>, Error> {
        let op = ApiOp::Delete {
            key: self.key(name),
            uid: params.uid,
            grace_period_seconds: params.grace_period_seconds,
            options: Default::default(),
        };
        match self.client.api(op).await? {
            ApiOk::Object(o) => Ok(Some(o)),
            ApiOk::Deleted => Ok(None),
            other => Err(Error::UnexpectedAnswer(format!("{other:?}"))),
        }
    }
}

// ----- the controller builder ----------------------------------------------------------------

/// Maps a changed object of a watched kind to the keys to reconcile.
pub type Mapper = fn(&Object, &mut Vec<ObjectKey>);

/// A controller's relations, declared once (kube-runtime's `Controller` builder):
/// the kind it reconciles, the kinds it owns, the kinds it watches with a mapper.
#[derive(Clone, Debug)]
pub struct Controller {
    name: String,
    kind: Kind,
    owns: Vec<Kind>,
    watches: Vec<(Kind, Mapper)>,
}

impl Controller {
    /// A controller named `name` reconciling objects of kind `K` (`For`).
    pub fn new<K: Resource>(name: &str) -> Self {
        Controller {
            name: name.to_string(),
            kind: K::KIND,
            owns: Vec::new(),
            watches: Vec::new(),
        }
    }

    /// Reconcile an object's controller owner of kind `K` when the object changes
    /// (`Owns`: `EnqueueRequestForOwner{IsController: true}`).
    pub fn owns<C: Resource>(mut self) -> Self {
        self.owns.push(C::KIND);
        self
    }

    /// Reconcile the keys `mapper` gives when an object of kind `W` changes.
    pub fn watches<W: Resource>(mut self, mapper: Mapper) -> Self {
        self.watches.push((W::KIND, mapper));
        self
    }

    /// The controller with its `reconcile` and `error_policy`, and `context`, which makes
    /// its context from a client at start and after every crash.
    pub fn run<C, E, F, Fut, P, M>(
        self,
        reconcile: F,
        error_policy: P,
        context: M,
    ) -> Box<dyn Reconciler>
    where
        C: 'static,
        E: std::error::Error + 'static,
        F: Fn(Arc<Object>, Arc<C>) -> Fut + 'static,
        Fut: Future<Output = Result<Action, E>> + 'static,
        P: Fn(Arc<Object>, &E, Arc<C>) -> Action + 'static,
        M: Fn(Client) -> C + 'static,
    {
        let link = Rc::new(Link::default());
        let ctx = Arc::new(context(Client { link: link.clone() }));
        Box::new(Adapter {
            relations: self,
            reconcile,
            error_policy,
            context,
            link,
            ctx,
            running: None,
        })
    }
}

type Running<C, E> = (
    Arc<Object>,
    Pin<Box<dyn Future<Output = Result<Action, E>>>>,
    PhantomData<C>,
);

/// A controller as the manager sees it: a step machine that polls the reconcile.
struct Adapter<C, E, F, P, M> {
    relations: Controller,
    reconcile: F,
    error_policy: P,
    context: M,
    link: Rc<Link>,
    ctx: Arc<C>,
    /// The reconcile in progress: its object and its future.
    running: Option<Running<C, E>>,
}

impl<C, E, F, P, M> fmt::Debug for Adapter<C, E, F, P, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controller")
            .field("relations", &self.relations)
            .field("running", &self.running.as_ref().map(|r| r.0.key()))
            .finish()
    }
}

impl<C, E, F, Fut, P, M> Reconciler for Adapter<C, E, F, P, M>
where
    C: 'static,
    E: std::error::Error + 'static,
    F: Fn(Arc<Object>, Arc<C>) -> Fut + 'static,
    Fut: Future<Output = Result<Action, E>> + 'static,
    P: Fn(Arc<Object>, &E, Arc<C>) -> Action + 'static,
    M: Fn(Client) -> C + 'static,
{
    fn name(&self) -> &str {
        &self.relations.name
    }

    fn watches(&self) -> Vec<Kind> {
        let r = &self.relations;
        let mut kinds = vec![r.kind];
        kinds.extend(&r.owns);
        kinds.extend(r.watches.iter().map(|(k, _)| *k));
        kinds.sort();
        kinds.dedup();
        kinds
    }

    fn keys_for(&self, object: &Object, keys: &mut Vec<ObjectKey>) {
        let r = &self.relations;
        enqueue_for(object, r.kind, keys);
        if r.owns.contains(&object.kind()) {
            enqueue_owner(object, r.kind, keys);
        }
        for (kind, mapper) in &r.watches {
            if object.kind() == *kind {
                mapper(object, keys);
            }
        }
    }

    fn reconcile(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        match ctx.reply.take() {
            None => {
                // A new reconcile: of the object as the store has it, if it has it.
                let Some(object) = ctx.cache.get(ctx.key).cloned() else {
                    return Step::done();
                };
                let future = (self.reconcile)(object.clone(), self.ctx.clone());
                self.running = Some((object, Box::pin(future), PhantomData));
                *self.link.reply.borrow_mut() = None;
            }
            Some(reply) => *self.link.reply.borrow_mut() = Some(reply),
        }
        let Some((_, future, _)) = &mut self.running else {
            return Step::protocol("a reply without a reconcile in progress");
        };
        self.link.ctx.set(ctx as *mut ReconcileCtx<'_> as *mut ());
        let polled = future
            .as_mut()
            .poll(&mut TaskContext::from_waker(Waker::noop()));
        self.link.ctx.set(std::ptr::null_mut());
        match polled {
            Poll::Pending => match self.link.effect.borrow_mut().take() {
                Some(Effect::Call(call)) => Step::Call(call),
                Some(Effect::Sleep(ms)) => Step::Sleep { ms },
                Some(Effect::Crash(restart_after_ms)) => Step::Crash { restart_after_ms },
                None => {
                    self.running = None;
                    Step::protocol(
                        "the reconcile awaited something reconsim does not drive (only its clients' requests are)",
                    )
                }
            },
            Poll::Ready(result) => {
                let (object, _, _) = self.running.take().expect("polled above");
                match result {
                    Ok(Action { next }) => match next {
                        Next::After(ms) => Step::requeue_after(ms),
                        Next::Change => Step::done(),
                        Next::RateLimited => Step::RateLimited,
                    },
                    Err(e) => {
                        // The error policy may use the client too (a note, the clock).
                        self.link.ctx.set(ctx as *mut ReconcileCtx<'_> as *mut ());
                        let action = (self.error_policy)(object, &e, self.ctx.clone());
                        self.link.ctx.set(std::ptr::null_mut());
                        match action.next {
                            Next::RateLimited => Step::error(e),
                            next => Step::Failed {
                                reason: ReconcileError::new(e),
                                requeue_after_ms: match next {
                                    Next::After(ms) => Some(ms),
                                    _ => None,
                                },
                            },
                        }
                    }
                }
            }
        }
    }

    /// A crash: the reconcile in progress and the context are gone; a fresh context.
    fn reset(&mut self) {
        self.running = None;
        self.link = Rc::new(Link::default());
        self.ctx = Arc::new((self.context)(Client {
            link: self.link.clone(),
        }));
    }
}
