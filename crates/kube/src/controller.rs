//! A kube-rs controller's own functions under reconsim's manager: the `reconcile` and
//! `error_policy` a user passes to kube-runtime's `Controller::run`, and a context
//! holding a real `kube::Client`, run as one of the manager's reconcilers (its work
//! queue, informer cache, leader election, crash and restart; crates/world/manager.rs).
//!
//! Design: the adapter is a step machine ([`Reconciler`]) like every controller. A
//! reconcile of a key decodes the cached object into the user's type `K` (as
//! kube-runtime hands its store's `Arc<K>`), spawns the user's future on the process's
//! runtime ([`crate::driver`]) and steps it until it waits: each request the client
//! parks becomes the step's [`Call`] (routed by [`crate::rest`]), and its reply,
//! written back as HTTP, completes the request and steps the runtime again. So every
//! await on the API server is an interleaving point the scheduler owns, as in the
//! world's own async reconcilers. Requests made at once (a `try_join!`) go out one
//! after another; an unanswered one fails as a broken connection after the manager's
//! request timeout.
//!
//! What kube-runtime does that this follows (kube-rs kube-runtime/src/controller/mod.rs
//! @ac95b19): an object the store no longer has is not reconciled; `Ok(Action)`
//! schedules the next reconcile (`requeue(d)`, or none for `await_change()`); `Err(e)`
//! goes to `error_policy(obj, &e, ctx)`, whose `Action` schedules the retry. Why not
//! kube-runtime's own `Controller`: its runner polls in-flight reconciles through a std
//! `HashMap`, its store is a randomly seeded ahash map, and its watcher backoff is
//! jittered, each a source of runs that differ (docs/kube.md).

use crate::driver::{Delivery, Driver};
use crate::intercept::{Park, Scope};
use crate::kinds::{self, Kinds};
use crate::rest::{self, Routed, Shape};
use crate::transport::{Exchange, Queue, SimService, WireBody};
use kube::runtime::controller::Action;
use reconsim_world::api::ApiOp;
use reconsim_world::manager::{
    Call, ReconcileCtx, Reconciler, Reply, Step, enqueue_for, enqueue_owners,
};
use reconsim_world::object::{Kind, Object, ObjectKey};
use reconsim_world::reconcile_error::{ReconcileError, Unexpected};
use serde::de::DeserializeOwned;
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many requests answered at once (refused, unsupported) one step may take: a
/// reconcile that keeps asking what is not served is ended, not spun.
const ANSWERS_PER_STEP_MAX: usize = 64;

type Answer = tokio::sync::oneshot::Sender<http::Response<WireBody>>;

/// A controller's relations, declared once (kube-runtime's `Controller` builder): the
/// kind it reconciles and the kinds it owns, with the kinds the world serves.
pub struct Controller<K> {
    name: String,
    kind: Kind,
    owns: Vec<Kind>,
    kinds: Kinds,
    _k: PhantomData<fn() -> K>,
}

impl<K> Controller<K>
where
    K: kube::Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
    K::Scope: 'static,
{
    /// A controller named `name` reconciling objects of `K` (`For`), its client
    /// speaking the kinds in `kinds`.
    pub fn new(name: &str, kinds: Kinds) -> Self {
        Controller {
            name: name.to_string(),
            kind: kinds::kind_of::<K>(),
            owns: Vec::new(),
            kinds,
            _k: PhantomData,
        }
    }

    /// Reconcile an object's owners of kind `K` when the object changes
    /// (`Controller::owns`: by every owner reference of that kind, controller or not, as
    /// kube-runtime's `trigger_owners` maps them).
    pub fn owns<C>(mut self) -> Self
    where
        C: kube::Resource<DynamicType = ()>,
        C::Scope: 'static,
    {
        self.owns.push(kinds::kind_of::<C>());
        self
    }

    /// The controller with the user's `reconcile` and `error_policy`, and `context`,
    /// which makes its context from a fresh client at start and after every crash (a
    /// crash loses the process's memory, its context too).
    pub fn run<C, E, F, Fut, P, M>(
        self,
        reconcile: F,
        error_policy: P,
        context: M,
    ) -> Box<dyn Reconciler>
    where
        C: Send + Sync + 'static,
        E: std::error::Error + Send + 'static,
        F: FnMut(Arc<K>, Arc<C>) -> Fut + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        P: Fn(Arc<K>, &E, Arc<C>) -> Action + 'static,
        M: Fn(kube::Client) -> C + 'static,
    {
        Box::new(Adapter {
            relations: self,
            reconcile,
            error_policy,
            context,
            live: None,
            running: None,
        })
    }
}

/// The process's memory: its clocks and entropy, its runtime, its client's queue, the
/// user's context.
struct Live<C> {
    scope: Scope,
    driver: Driver,
    queue: Queue,
    ctx: Arc<C>,
}

impl<C> Live<C> {
    fn new(context: &impl Fn(kube::Client) -> C, rctx: &mut ReconcileCtx<'_>) -> Self {
        let mut scope = Scope::seeded_by(rctx.rng);
        scope.set_time(rctx.true_now, rctx.now);
        let driver = Driver::new(&mut scope);
        let queue: Queue = Arc::default();
        let ctx = driver.enter(&mut scope, || {
            let client = kube::Client::new(
                SimService {
                    queue: queue.clone(),
                },
                "default",
            );
            Arc::new(context(client))
        });
        Live {
            scope,
            driver,
            queue,
            ctx,
        }
    }
}

type Outcome<E> = Arc<Mutex<Option<Result<Action, E>>>>;

/// A reconcile in progress.
struct Running<K, E> {
    object: Arc<K>,
    outcome: Outcome<E>,
    /// The request at the API server, and how its answer is written.
    pending: Option<(Answer, Shape)>,
    /// Requests made while another was out: sent one after another.
    backlog: VecDeque<Exchange>,
}

struct Adapter<K, C, E, F, P, M> {
    relations: Controller<K>,
    reconcile: F,
    error_policy: P,
    context: M,
    /// Made at the first reconcile, and again after a crash.
    live: Option<Live<C>>,
    running: Option<Running<K, E>>,
}

impl<K, C, E, F, P, M> fmt::Debug for Adapter<K, C, E, F, P, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeController")
            .field("name", &self.relations.name)
            .field("kind", &self.relations.kind)
            .field("running", &self.running.is_some())
            .finish()
    }
}

fn response(status: u16, body: Vec<u8>) -> http::Response<WireBody> {
    http::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(WireBody::full(body))
        .expect("a status code and a header make a response")
}

fn json_response(status: u16, body: &serde_json::Value) -> http::Response<WireBody> {
    response(
        status,
        serde_json::to_vec(body).expect("JSON values serialize"),
    )
}

/// Why the adapter ended a reconcile in error when the reconcile itself did not fail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriveError {
    /// The cached object is not served on the wire, or does not decode as the
    /// controller's type.
    Undecodable(String),
    /// kube's `Action` (its `Debug`) whose delay this reconsim cannot read: a kube
    /// version it does not know.
    UnknownAction(String),
    /// The reconcile did what reconsim cannot drive (never waits, awaits something
    /// else than its client and tokio's timers, makes endless immediate requests).
    Unsupported(String),
}

impl std::fmt::Display for DriveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriveError::Undecodable(m) | DriveError::Unsupported(m) => f.write_str(m),
            DriveError::UnknownAction(action) => write!(
                f,
                "cannot read the delay of kube's {action} (a kube version this reconsim does not know)"
            ),
        }
    }
}

impl std::error::Error for DriveError {}

/// The delay of kube-runtime's `Action`, whose field is private: read from its `Debug`
/// (`Action { requeue_after: Some(1.5s) }`) and checked by rebuilding it, so a change
/// of kube's format is an error, never a wrong delay.
pub fn requeue_after(action: &Action) -> Result<Option<Duration>, DriveError> {
    if *action == Action::await_change() {
        return Ok(None);
    }
    let text = format!("{action:?}");
    let parsed = text
        .split_once("Some(")
        .and_then(|(_, rest)| rest.split_once(')'))
        .and_then(|(d, _)| parse_duration(d));
    match parsed {
        Some(d) if Action::requeue(d) == *action => Ok(Some(d)),
        _ => Err(DriveError::UnknownAction(text)),
    }
}

/// A `Duration` as its `Debug` writes it (`300s`, `1.5s`, `20ms`, `7µs`, `3ns`).
fn parse_duration(text: &str) -> Option<Duration> {
    let (number, unit_ns) = [
        ("ns", 1u128),
        ("µs", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
    ]
    .into_iter()
    .find_map(|(u, ns)| {
        let n = text.strip_suffix(u)?;
        n.chars()
            .all(|c| c.is_ascii_digit() || c == '.')
            .then_some((n, ns))
    })?;
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    let mut nanos = whole.parse::<u128>().ok()?.checked_mul(unit_ns)?;
    if !frac.is_empty() {
        let scale = 10u128.checked_pow(u32::try_from(frac.len()).ok()?)?;
        nanos += frac.parse::<u128>().ok()? * unit_ns / scale;
    }
    Some(Duration::from_nanos(u64::try_from(nanos).ok()?))
}

fn ms_ceil(d: Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

impl<K, C, E, F, Fut, P, M> Adapter<K, C, E, F, P, M>
where
    K: kube::Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
    C: Send + Sync + 'static,
    E: std::error::Error + Send + 'static,
    F: FnMut(Arc<K>, Arc<C>) -> Fut + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    P: Fn(Arc<K>, &E, Arc<C>) -> Action + 'static,
    M: Fn(kube::Client) -> C + 'static,
{
    /// Start a reconcile of the cached `object`.
    fn start(&mut self, object: &Object, ctx: &mut ReconcileCtx<'_>) -> Result<(), Step> {
        let decoded: K = crate::wire::to_json(object)
            .ok_or_else(|| format!("{} is not served on the wire", object.kind()))
            .and_then(|v| {
                serde_json::from_value(v).map_err(|e| {
                    format!(
                        "the cached {} {} does not decode as the controller's type: {e}",
                        object.kind(),
                        object.meta.name
                    )
                })
            })
            .map_err(|m| Step::error(DriveError::Undecodable(m)))?;
        let object = Arc::new(decoded);
        let outcome: Outcome<E> = Arc::default();
        let context = &self.context;
        let live = self.live.get_or_insert_with(|| Live::new(context, ctx));
        live.scope.set_time(ctx.true_now, ctx.now);
        let reconcile = &mut self.reconcile;
        let future = live.driver.enter(&mut live.scope, || {
            reconcile(object.clone(), live.ctx.clone())
        });
        let slot = outcome.clone();
        live.driver.spawn(&mut live.scope, async move {
            let r = future.await;
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
        });
        self.running = Some(Running {
            object,
            outcome,
            pending: None,
            backlog: VecDeque::new(),
        });
        Ok(())
    }

    /// Step the reconcile until it sends a request or ends.
    fn pump(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        for _ in 0..ANSWERS_PER_STEP_MAX {
            let (Some(run), Some(live)) = (&mut self.running, &mut self.live) else {
                return Step::protocol("no reconcile in progress");
            };
            live.scope.set_time(ctx.true_now, ctx.now);
            let park = live.driver.step(&mut live.scope);
            run.backlog.extend(
                live.queue
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .drain(..),
            );
            let done = run.outcome.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(result) = done {
                let run = self.running.take().expect("checked above");
                return self.ended(run.object, result, ctx);
            }
            let Some(x) = run.backlog.pop_front() else {
                return match park {
                    // A tokio timer (`sleep`, `interval`, `timeout`): the reconcile
                    // waits in virtual time, the key still in processing.
                    Park::Timer { after_ms } => Step::Sleep { ms: after_ms },
                    Park::Busy => {
                        self.running = None;
                        Step::error(DriveError::Unsupported(
                            "the reconcile never waits (a task polls without an await that waits)"
                                .into(),
                        ))
                    }
                    Park::Idle => {
                        self.running = None;
                        Step::error(DriveError::Unsupported(
                            "the reconcile awaited something reconsim does not drive (only its client's requests and tokio's timers are; docs/kube.md)"
                                .into(),
                        ))
                    }
                };
            };
            ctx.note(|| crate::rest::summary(&x.method, &x.uri, &x.body));
            match rest::route(
                &x.method,
                &x.uri,
                x.content_type.as_deref(),
                &x.body,
                &self.relations.kinds,
            ) {
                Routed::Op {
                    op: ApiOp::Watch { .. } | ApiOp::WatchState { .. },
                    ..
                } => {
                    let body = rest::status(
                        405,
                        "MethodNotAllowed",
                        "reconsim does not serve a watch inside a reconcile (the manager's informer watches; docs/kube.md)",
                    );
                    live.driver
                        .hand(Delivery::Http(x.answer, json_response(405, &body)));
                }
                Routed::Op { op, shape } => {
                    run.pending = Some((x.answer, shape));
                    return Step::Call(Call::Api(op));
                }
                Routed::Answer { status, body } => {
                    ctx.note(|| format!("answered at once: {status}"));
                    live.driver
                        .hand(Delivery::Http(x.answer, json_response(status, &body)));
                }
            }
        }
        self.running = None;
        Step::error(DriveError::Unsupported(format!(
            "the reconcile made {ANSWERS_PER_STEP_MAX} requests in a row that reconsim answers at once (unsupported ones?)"
        )))
    }

    fn ended(
        &mut self,
        object: Arc<K>,
        result: Result<Action, E>,
        ctx: &mut ReconcileCtx<'_>,
    ) -> Step {
        match result {
            Ok(action) => match requeue_after(&action) {
                Ok(after) => Step::Done {
                    requeue_after_ms: after.map(ms_ceil),
                },
                Err(e) => Step::error(e),
            },
            Err(e) => {
                let Some(live) = &mut self.live else {
                    return Step::protocol("no reconcile in progress");
                };
                let policy = &self.error_policy;
                let action = live
                    .driver
                    .enter(&mut live.scope, || policy(object, &e, live.ctx.clone()));
                ctx.note(|| format!("error_policy after: {e}"));
                match requeue_after(&action) {
                    Ok(after) => Step::Failed {
                        reason: ReconcileError::new(e),
                        requeue_after_ms: after.map(ms_ceil),
                    },
                    Err(e) => Step::error(e),
                }
            }
        }
    }
}

impl<K, C, E, F, Fut, P, M> Reconciler for Adapter<K, C, E, F, P, M>
where
    K: kube::Resource<DynamicType = ()> + DeserializeOwned + Send + Sync + 'static,
    C: Send + Sync + 'static,
    E: std::error::Error + Send + 'static,
    F: FnMut(Arc<K>, Arc<C>) -> Fut + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    P: Fn(Arc<K>, &E, Arc<C>) -> Action + 'static,
    M: Fn(kube::Client) -> C + 'static,
{
    fn name(&self) -> &str {
        &self.relations.name
    }

    fn watches(&self) -> Vec<Kind> {
        let mut kinds = vec![self.relations.kind];
        kinds.extend(&self.relations.owns);
        kinds.sort();
        kinds.dedup();
        kinds
    }

    fn keys_for(&self, object: &Object, keys: &mut Vec<ObjectKey>) {
        let r = &self.relations;
        enqueue_for(object, r.kind, keys);
        if r.owns.contains(&object.kind()) {
            enqueue_owners(object, r.kind, keys);
        }
    }

    fn reconcile(&mut self, ctx: &mut ReconcileCtx<'_>) -> Step {
        match ctx.reply.take() {
            None => {
                // A new reconcile: of the object as the store has it, if it has it.
                let Some(object) = ctx.cache.get(ctx.key).cloned() else {
                    return Step::done();
                };
                if let Err(step) = self.start(&object, ctx) {
                    return step;
                }
            }
            Some(Reply::Woke) => {
                // A tokio timer is due: the pump below fires it.
            }
            Some(reply) => {
                let (Some(run), Some(live)) = (self.running.as_mut(), self.live.as_mut()) else {
                    return Step::protocol("a reply without a request in progress");
                };
                let Some((answer, shape)) = run.pending.take() else {
                    return Step::protocol("a reply without a request in progress");
                };
                match reply {
                    Reply::Api(result) => {
                        let (status, body) = rest::answer_text(&result, &shape);
                        ctx.note(|| format!("answer {status}"));
                        live.driver
                            .hand(Delivery::Http(answer, response(status, body)));
                    }
                    // Dropping the answer breaks the request's connection: kube's call
                    // fails with a service error, as over a dead connection.
                    Reply::TimedOut => live.driver.hand(Delivery::Drop(Box::new(answer))),
                    other => {
                        self.running = None;
                        return Step::error(Unexpected::new(
                            "a reply reconsim-kube never asked for",
                            &other,
                        ));
                    }
                }
            }
        }
        self.pump(ctx)
    }

    /// A crash: the reconcile in progress, the runtime, the client and the context are
    /// gone; a fresh client and context, as a restarted process builds them.
    fn reset(&mut self) {
        self.running = None;
        self.live = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_of_an_action_is_read_exactly() {
        for d in [
            Duration::from_secs(300),
            Duration::from_millis(1500),
            Duration::from_millis(20),
            Duration::from_micros(7),
            Duration::from_nanos(3),
            Duration::from_nanos(1_000_000_001),
            Duration::ZERO,
        ] {
            assert_eq!(requeue_after(&Action::requeue(d)), Ok(Some(d)), "{d:?}");
        }
        assert_eq!(requeue_after(&Action::await_change()), Ok(None));
        assert_eq!(ms_ceil(Duration::from_micros(7)), 1);
    }
}
