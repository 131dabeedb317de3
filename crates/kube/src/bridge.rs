//! The bridge: a world process that runs a user's async kube-rs code. Its handler is
//! where the code runs: on start it builds the client and spawns the program, then
//! steps the runtime ([`crate::driver`]) and sends each request the client made
//! ([`crate::transport`]) to the simulated API server as an ordinary API message;
//! each answer completes its request's future and steps the runtime again. A watch's
//! answer is a stream: the server's watch events arrive as messages, and each becomes
//! a line of it. So the program's requests meet the network's latency, partitions and
//! faults, and its awaits resolve in virtual time, in the same order on every run.
//!
//! Time: every handler runs the program inside the process's [`Scope`] (its clocks at
//! the handler's instant, its entropy), and when the runtime parks on a timer the
//! bridge sets a timer of the simulation for that instant ([`crate::driver`]). All the
//! requests a step made go out at once, each its own message, so a `try_join!` of two
//! requests is two requests in flight together.

use crate::driver::{Delivery, Driver};
use crate::failpoints::{Armed, BridgeHook};
use crate::handle::{CallError, Handle};
use crate::intercept::{Park, Scope};
use crate::kinds::Kinds;
use crate::pool::{Conn, ConnId, Pool};
use crate::rest::{self, Routed, Selector, Shape};
use crate::transport::{Exchange, Queue, SimService, WireBody};
use bytes::Bytes;
use reconsim_sim::network::RETRANSMIT_OPEN_MS;
use reconsim_sim::{ProcId, SimTime, TimerId};
use reconsim_world::api::{ApiError, ApiOk, ApiOp, ApiRequest, ApiResponse};
use reconsim_world::component::{Component, Payload};
use reconsim_world::fault::WorldFault;
use reconsim_world::kubelet::KubeletTiming;
use reconsim_world::msg::{Lost, Msg, Timer};
use reconsim_world::object::Kind;
use reconsim_world::proc::WorldCtx;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

/// A user's program: given a client, what it does; its result in words. A factory,
/// called again on every start of its process (a restart after a crash runs it anew).
pub type Program =
    Arc<dyn Fn(kube::Client) -> Pin<Box<dyn Future<Output = String> + Send>> + Send + Sync>;

/// A [`Program`] of an async function of a client that runs until it returns, as a
/// user's `main` does (`Controller::new(..).run(..).for_each(..).await`).
pub fn program<F, Fut>(main: F) -> Program
where
    F: Fn(kube::Client) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    Arc::new(move |client| {
        let fut = main(client);
        Box::pin(async move {
            fut.await;
            "exited".to_string()
        })
    })
}

/// Rounds of stepping and answering at once (unsupported requests, a closed watch) in
/// one handler: a program that keeps asking what is not served is stopped, not spun.
const ROUNDS_PER_HANDLER_MAX: usize = 64;

type Answer = tokio::sync::oneshot::Sender<http::Response<WireBody>>;
type CallAnswer = tokio::sync::oneshot::Sender<Result<Payload, CallError>>;

/// A watch the program holds open: which events its stream takes.
struct Subscription {
    stream: u32,
    kind: Kind,
    namespace: Option<String>,
    selector: Selector,
    /// A streaming list whose initial events are not over yet: its next bookmark says
    /// they are.
    initial_events: bool,
    /// The connection it holds, back to the pool when the server ends the watch.
    conn_id: ConnId,
    lines: tokio::sync::mpsc::UnboundedSender<Bytes>,
}

/// A request at the API server.
struct Pending {
    answer: Answer,
    /// How to write its answer.
    shape: Shape,
    /// The watch stream it opens, if it is a watch.
    stream: u32,
    /// The connection it went on, and whether it was new then.
    conn: Conn,
    conn_id: ConnId,
    /// The request in words, kept only when notes are (full traces).
    said: Option<String>,
}

/// The simulation's timer for the runtime's next timer, due at `at_ms` (true time).
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
struct RuntimeTimer {
    at_ms: u64,
}

/// What the bridge is running.
struct Running {
    /// The process's clocks and entropy; a restart makes a new one.
    scope: Scope,
    driver: Driver,
    /// The simulation timer set for the runtime's next timer, if any.
    wake: Option<(SimTime, TimerId)>,
    queue: Queue,
    /// The program's failpoints' hook, installed while its runtime steps.
    hook: Rc<BridgeHook>,
    /// The program's handle on the world's services, current while its runtime steps.
    handle: Handle,
    /// Service calls sent and not yet answered, by request id, with the service called.
    calls: BTreeMap<u64, (ProcId, CallAnswer)>,
    done: Arc<Mutex<Option<String>>>,
    /// Requests at the API server, by request id.
    pending: BTreeMap<u64, Pending>,
    /// The client's idle connections.
    pool: Pool,
    /// Open watches, by the server's watch id.
    watches: BTreeMap<u64, Subscription>,
    next_stream: u32,
}

/// A program that returns restarts as its pod's container would: the kubelet's
/// CrashLoopBackOff, by the world kubelet's own figures (`KubeletTiming`: 10 s doubling
/// to 300 s, back to the first once a run lasted 10 min) and rule.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    next_ms: u64,
    /// When the container last started.
    pub started: SimTime,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Backoff {
    pub fn new() -> Self {
        Backoff {
            next_ms: KubeletTiming::default().restart_backoff_ms_min,
            started: SimTime::ZERO,
        }
    }

    /// The delay before the restart after a run that ends `now`.
    pub fn after_exit(&mut self, now: SimTime) -> u64 {
        let t = KubeletTiming::default();
        if now.since(self.started) >= t.restart_backoff_reset_ms {
            self.next_ms = t.restart_backoff_ms_min;
        }
        let delay = self.next_ms;
        self.next_ms = (delay * 2).min(t.restart_backoff_ms_max);
        delay
    }
}

pub struct KubeBridge {
    apiserver: ProcId,
    /// Survives a restart (it is the kubelet's, not the process's); `None`: the
    /// program runs once ([`KubeBridge::once`]).
    backoff: Option<Backoff>,
    kinds: Kinds,
    program: Program,
    /// The failpoints the fault plan armed (they outlive a crash of the process).
    failpoints: Rc<RefCell<Armed>>,
    /// The services the program may call ([`KubeBridge::service`]), by name.
    services: Arc<BTreeMap<String, ProcId>>,
    /// The kubelet of the pod whose container this is ([`KubeBridge::in_container`]).
    kubelet: Option<ProcId>,
    running: Option<Running>,
    next_id: u64,
    /// The program's results, one per run of it (a crash and restart runs it again).
    pub results: Vec<String>,
    /// Every request the client made, as `METHOD path`, in order, when recording
    /// ([`KubeBridge::recording`]; a campaign's runs do not keep them).
    pub requests: Vec<String>,
    record_requests: bool,
}

impl std::fmt::Debug for KubeBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeBridge")
            .field("results", &self.results)
            .field("requests", &self.requests.len())
            .finish()
    }
}

/// A service's name as the bridge was given it, for the trace's notes.
fn service_name(services: &BTreeMap<String, ProcId>, process: ProcId) -> String {
    services
        .iter()
        .find(|(_, p)| **p == process)
        .map_or_else(|| format!("{process:?}"), |(name, _)| name.clone())
}

fn response(status: u16, body: WireBody) -> http::Response<WireBody> {
    http::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(body)
        .expect("a status code and a header make a response")
}

fn json_response(status: u16, body: &serde_json::Value) -> http::Response<WireBody> {
    response(
        status,
        WireBody::full(serde_json::to_vec(body).expect("JSON values serialize")),
    )
}

impl KubeBridge {
    pub fn new(apiserver: ProcId, kinds: Kinds, program: Program) -> Self {
        KubeBridge {
            apiserver,
            backoff: Some(Backoff::new()),
            kinds,
            program,
            failpoints: Rc::default(),
            services: Arc::default(),
            kubelet: None,
            running: None,
            next_id: 0,
            results: Vec::new(),
            requests: Vec::new(),
            record_requests: false,
        }
    }

    /// The program runs once, as a Job's pod with `restartPolicy: Never`: when it
    /// returns, the process idles (by default it restarts as a Deployment's would).
    pub fn once(mut self) -> Self {
        self.backoff = None;
        self
    }

    /// The bridge as a pod's container, started by `kubelet` (an image's
    /// `ContainerEnv::kubelet`): when the program returns, the container exits and the
    /// kubelet restarts it (CrashLoopBackOff, `restartCount`); SIGTERM (the pod's
    /// deletion) ends it at once, as it ends a Rust program with no signal handler.
    pub fn in_container(mut self, kubelet: ProcId) -> Self {
        self.kubelet = Some(kubelet);
        self
    }

    /// The container exits: the kubelet hears of it and the process stops.
    fn exit_container(&mut self, kubelet: ProcId, ctx: &mut WorldCtx<'_>) {
        ctx.send(kubelet, Msg::ContainerExited);
        let me = ctx.me();
        ctx.stop(me);
    }

    /// The program may call the service process `process` as `name`
    /// (`Handle::current().service(name)`): the cloud of a family's world, or the user's
    /// own external service.
    pub fn service(mut self, name: &str, process: ProcId) -> Self {
        Arc::make_mut(&mut self.services).insert(name.to_string(), process);
        self
    }

    /// The bridge keeping every request in [`KubeBridge::requests`] (for tests).
    pub fn recording(mut self) -> Self {
        self.record_requests = true;
        self
    }

    /// The bridge as a world component, for `Extensions::process`.
    pub fn boxed(self) -> Box<dyn Component> {
        Box::new(self)
    }

    /// Step the program, and send or answer what it asked, until it waits on the
    /// simulation alone; then set the simulation's timer for its next timer.
    fn pump(&mut self, ctx: &mut WorldCtx<'_>) {
        let Some(run) = &mut self.running else {
            return;
        };
        run.scope.set_time(ctx.true_now(), ctx.now());
        let mut park = Park::Idle;
        for _ in 0..ROUNDS_PER_HANDLER_MAX {
            park = {
                let _hook = reconsim_failpoint::hook::install(run.hook.clone());
                let (driver, scope) = (&mut run.driver, &mut run.scope);
                run.handle.enter(|| driver.step(scope))
            };
            let crash = {
                let mut armed = self.failpoints.borrow_mut();
                for note in armed.notes.drain(..) {
                    ctx.note(|| note);
                }
                armed.crash.take()
            };
            if crash.is_none()
                && let Some(r) = run.done.lock().expect("the result's lock").take()
            {
                if let Some(kubelet) = self.kubelet {
                    // The container exits; its kubelet restarts it.
                    ctx.note(|| format!("kube program: {r}; its container exits"));
                    self.results.push(r);
                    ctx.send(kubelet, Msg::ContainerExited);
                    let me = ctx.me();
                    ctx.stop(me);
                    return;
                }
                if let Some(backoff) = &mut self.backoff {
                    // The container exited: it restarts cold after the kubelet's
                    // backoff, what it sent so far sent (restartPolicy Always).
                    let delay = backoff.after_exit(ctx.true_now());
                    ctx.note(|| format!("kube program: {r}; restarting in {} s", delay / 1000));
                    self.results.push(r);
                    ctx.crash_self(delay);
                    return;
                }
                ctx.note(|| format!("kube program: {r}"));
                self.results.push(r);
            }
            // Watches whose stream the program dropped: closed at the server too.
            let closed: Vec<u64> = run
                .watches
                .iter()
                .filter(|(_, w)| w.lines.is_closed())
                .map(|(id, _)| *id)
                .collect();
            for id in closed {
                let w = run.watches.remove(&id).expect("listed");
                self.next_id += 1;
                let op = ApiOp::Unwatch { stream: w.stream };
                ctx.send(
                    self.apiserver,
                    Msg::Api(ApiRequest {
                        id: self.next_id,
                        op,
                    }),
                );
            }
            let mut taken: Vec<Exchange> = run
                .queue
                .lock()
                .expect("the queue's lock")
                .drain(..)
                .collect();
            let mut calls: Vec<_> = run
                .handle
                .calls
                .lock()
                .expect("the calls' lock")
                .drain(..)
                .collect();
            if let Some(c) = crash {
                // What the program asked after the hit, it never asked.
                taken.truncate(c.requests_before);
                calls.truncate(c.calls_before);
            }
            for call in calls {
                self.next_id += 1;
                let id = self.next_id;
                let services = &self.services;
                ctx.note(|| format!("call {}: {:?}", service_name(services, call.to), call.body));
                run.calls.insert(id, (call.to, call.answer));
                ctx.send(
                    call.to,
                    Msg::Request {
                        id,
                        body: call.body,
                    },
                );
            }
            if taken.is_empty() && crash.is_none() {
                break;
            }
            let mut answered_at_once = false;
            for x in taken {
                if self.record_requests {
                    self.requests.push(format!("{} {}", x.method, x.uri));
                }
                let said = ctx
                    .notes_enabled()
                    .then(|| rest::summary(&x.method, &x.uri, &x.body));
                if let Some(said) = &said {
                    ctx.note(|| said.clone());
                }
                match rest::route(
                    &x.method,
                    &x.uri,
                    x.content_type.as_deref(),
                    &x.body,
                    &self.kinds,
                ) {
                    Routed::Op { mut op, shape } => {
                        self.next_id += 1;
                        let id = self.next_id;
                        let mut opened = 0;
                        if let ApiOp::Watch { stream, .. } | ApiOp::WatchState { stream, .. } =
                            &mut op
                        {
                            run.next_stream += 1;
                            *stream = run.next_stream;
                            opened = run.next_stream;
                        }
                        let (conn, conn_id) = run.pool.checkout(ctx.true_now());
                        run.pending.insert(
                            id,
                            Pending {
                                answer: x.answer,
                                shape,
                                stream: opened,
                                conn,
                                conn_id,
                                said,
                            },
                        );
                        ctx.send(self.apiserver, Msg::Api(ApiRequest { id, op }));
                    }
                    Routed::Answer { status, body } => {
                        run.driver
                            .hand(Delivery::Http(x.answer, json_response(status, &body)));
                        answered_at_once = true;
                    }
                }
            }
            if let Some(c) = crash {
                // The process dies at the failpoint; the kernel restarts it cold.
                ctx.crash_self(c.restart_after_ms);
                return;
            }
            if !answered_at_once {
                break;
            }
        }
        let due = match park {
            Park::Timer { after_ms } => Some(ctx.true_now().plus_ms(after_ms)),
            // A task that never waits takes time all the same: a millisecond a round.
            Park::Busy => Some(ctx.true_now().plus_ms(1)),
            Park::Idle => None,
        };
        if run.wake.map(|(at, _)| at) != due {
            if let Some((_, id)) = run.wake.take() {
                ctx.cancel_timer(id);
            }
            if let Some(at) = due {
                let id = ctx.set_timer(
                    at.since(ctx.true_now()),
                    Msg::family_timer(RuntimeTimer { at_ms: at.as_ms() }),
                );
                run.wake = Some((at, id));
            }
        }
    }

    fn answered(
        &mut self,
        id: u64,
        result: &Result<ApiOk, ApiError>,
        ctx: &mut WorldCtx<'_>,
    ) -> bool {
        let now = ctx.true_now();
        let Some(run) = &mut self.running else {
            return false;
        };
        let Some(Pending {
            answer,
            shape,
            stream,
            said,
            conn_id,
            ..
        }) = run.pending.remove(&id)
        else {
            return false;
        };
        // What a list found, or why a request failed, so a story told from the trace
        // can count it (the kernel's own lines tell the rest).
        if let Some(said) = said
            && let Some(got) = rest::outcome(&shape, result)
        {
            ctx.note(|| format!("{said} => {got}"));
        }
        // A watch keeps its connection until it ends; any other answer is read whole and
        // its connection goes back to the pool, unless the program dropped the request
        // (hyper closes a connection whose response is not read).
        let watching = matches!(result, Ok(ApiOk::Watching { .. }));
        if !watching && !answer.is_closed() {
            run.pool.checkin(now, conn_id);
        }
        match (&shape, result) {
            (
                Shape::Watch {
                    kind,
                    namespace,
                    selector,
                    initial_events,
                },
                Ok(ApiOk::Watching { watch_id }),
            ) => {
                let (lines, rx) = tokio::sync::mpsc::unbounded_channel();
                run.watches.insert(
                    *watch_id,
                    Subscription {
                        stream,
                        kind: *kind,
                        namespace: namespace.clone(),
                        selector: selector.clone(),
                        initial_events: *initial_events,
                        conn_id,
                        lines,
                    },
                );
                run.driver
                    .hand(Delivery::Http(answer, response(200, WireBody::stream(rx))));
            }
            (Shape::Watch { .. }, Err(ApiError::Gone)) => {
                let gone = response(200, WireBody::full(rest::gone_line()));
                run.driver.hand(Delivery::Http(answer, gone));
            }
            (_, result) => {
                let (status, body) = rest::answer_text(result, &shape);
                run.driver.hand(Delivery::Http(
                    answer,
                    response(status, WireBody::full(body)),
                ));
            }
        }
        true
    }
}

impl Component for KubeBridge {
    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        if let Some(b) = &mut self.backoff {
            b.started = ctx.true_now();
        }
        let mut scope = Scope::seeded_by(ctx.rng());
        scope.set_time(ctx.true_now(), ctx.now());
        let driver = Driver::new(&mut scope);
        let queue: Queue = Arc::default();
        let done: Arc<Mutex<Option<String>>> = Arc::default();
        let handle = Handle::new(self.services.clone());
        let program = driver.enter(&mut scope, || {
            let client = kube::Client::new(
                SimService {
                    queue: queue.clone(),
                },
                "default",
            );
            handle.enter(|| (self.program)(client))
        });
        let hook = Rc::new(BridgeHook {
            armed: self.failpoints.clone(),
            queue: queue.clone(),
            calls: handle.calls.clone(),
        });
        let result = done.clone();
        driver.spawn(&mut scope, async move {
            let r = program.await;
            *result.lock().expect("the result's lock") = Some(r);
        });
        self.running = Some(Running {
            scope,
            driver,
            wake: None,
            queue,
            hook,
            handle,
            calls: BTreeMap::new(),
            done,
            pending: BTreeMap::new(),
            pool: Pool::default(),
            watches: BTreeMap::new(),
            next_stream: 0,
        });
        self.pump(ctx);
    }

    fn on_msg(&mut self, from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        match msg {
            Msg::ApiResp(ApiResponse { id, result }) if self.answered(id, &result, ctx) => {
                self.pump(ctx);
            }
            Msg::Terminate => {
                // SIGTERM's default action: the process ends (kube-runtime's
                // `shutdown_on_signal` would need tokio's signal driver, not modelled).
                if let Some(kubelet) = self.kubelet {
                    ctx.note(|| "kube program: SIGTERM ends it".to_string());
                    self.running = None;
                    self.exit_container(kubelet, ctx);
                }
            }
            Msg::Response { id, body } => {
                let Some(run) = &mut self.running else {
                    return;
                };
                if let Some((_, answer)) = run.calls.remove(&id) {
                    let service = service_name(&self.services, from);
                    ctx.note(|| format!("answer from {service}: {body:?}"));
                    run.driver.hand(Delivery::Call(answer, Ok(body)));
                    self.pump(ctx);
                }
            }
            Msg::ConnectionLost(lost) => {
                let Some(run) = &mut self.running else {
                    return;
                };
                match lost {
                    // Its answer's sender dropped: the client's request fails with a
                    // transport error, as hyper's would (a connect timeout, ETIMEDOUT).
                    Lost::Request(id) => {
                        if let Some(p) = run.pending.remove(&id) {
                            run.driver.hand(Delivery::Drop(Box::new(p.answer)));
                        }
                        if let Some((_, answer)) = run.calls.remove(&id) {
                            run.driver
                                .hand(Delivery::Call(answer, Err(CallError::ConnectionLost)));
                        }
                    }
                    // The watch's stream ends; the server hears of it when the link heals.
                    Lost::Watch(watch_id) => {
                        if let Some(w) = run.watches.remove(&watch_id) {
                            run.driver.hand(Delivery::Drop(Box::new(w.lines)));
                            self.next_id += 1;
                            ctx.send(
                                self.apiserver,
                                Msg::Api(ApiRequest {
                                    id: self.next_id,
                                    op: ApiOp::Unwatch { stream: w.stream },
                                }),
                            );
                        }
                    }
                }
                self.pump(ctx);
            }
            Msg::Watch(ev) => {
                let Some(run) = &mut self.running else {
                    return;
                };
                let Some(w) = run.watches.get(&ev.watch_id) else {
                    return;
                };
                if let Some(line) = rest::event_line(&ev, w.namespace.as_deref(), &w.selector) {
                    let lines = w.lines.clone();
                    run.driver.hand(Delivery::Line(lines, line.into()));
                    self.pump(ctx);
                }
            }
            Msg::WatchBookmark {
                watch_id,
                resource_version,
            } => {
                let Some(run) = &mut self.running else {
                    return;
                };
                let Some(w) = run.watches.get_mut(&watch_id) else {
                    return;
                };
                let end = std::mem::take(&mut w.initial_events);
                let line = rest::bookmark_line(w.kind, resource_version, end);
                let lines = w.lines.clone();
                run.driver.hand(Delivery::Line(lines, line.into()));
                self.pump(ctx);
            }
            Msg::WatchEnd { watch_id } => {
                // The response ends as a whole chunked body does: its connection is
                // idle again, back to the pool; the program's stream ends.
                let Some(run) = &mut self.running else {
                    return;
                };
                if let Some(w) = run.watches.remove(&watch_id) {
                    run.pool.checkin(ctx.true_now(), w.conn_id);
                    run.driver.hand(Delivery::Drop(Box::new(w.lines)));
                }
                self.pump(ctx);
            }
            Msg::ConnectionReset => {
                // The server's host reset its connections: every watch stream ends (the
                // watcher re-lists or re-watches), every request in flight fails (each
                // had a connection of its own), and the pool's idle ones are gone.
                if let Some(run) = &mut self.running {
                    let watches = std::mem::take(&mut run.watches).into_values();
                    let pending = std::mem::take(&mut run.pending).into_values();
                    for w in watches {
                        run.driver.hand(Delivery::Drop(Box::new(w.lines)));
                    }
                    for p in pending {
                        run.driver.hand(Delivery::Drop(Box::new(p.answer)));
                    }
                    run.pool.clear();
                    self.pump(ctx);
                }
            }
            _ => {}
        }
    }

    /// The API server's host closed the program's connections to it: as a reset of
    /// them all. A service's: every call in flight to it fails, as hyper's request on a
    /// connection reset by its peer does.
    fn on_peer_closed(&mut self, peer: ProcId, ctx: &mut WorldCtx<'_>) {
        if peer == self.apiserver {
            return self.on_msg(peer, Msg::ConnectionReset, ctx);
        }
        let Some(run) = &mut self.running else {
            return;
        };
        let failed: Vec<u64> = run
            .calls
            .iter()
            .filter(|(_, (to, _))| *to == peer)
            .map(|(id, _)| *id)
            .collect();
        for id in failed {
            if let Some((_, answer)) = run.calls.remove(&id) {
                run.driver
                    .hand(Delivery::Call(answer, Err(CallError::ConnectionLost)));
            }
        }
        self.pump(ctx);
    }

    fn on_timer(&mut self, timer: Timer, ctx: &mut WorldCtx<'_>) {
        let Timer::Family(p) = timer else {
            return;
        };
        let Some(t) = p.typed::<RuntimeTimer>() else {
            return;
        };
        let Some(run) = &mut self.running else {
            return;
        };
        if run.wake.map(|(at, _)| at.as_ms()) == Some(t.at_ms) {
            run.wake = None;
            self.pump(ctx);
        }
    }

    /// A `Failpoint` fault arms (or, at its end, disarms) one of the program's
    /// failpoints (`reconsim_failpoint::fail_point!`).
    fn on_fault(&mut self, f: &WorldFault, active: bool, _ctx: &mut WorldCtx<'_>) {
        if let WorldFault::Failpoint { name, hit, action } = f {
            let points = &mut self.failpoints.borrow_mut().points;
            if active {
                points.arm(name, *hit, *action);
            } else {
                points.disarm(name, *hit, *action);
            }
        }
    }

    /// kube-rs has no read timeout and no health check: under either partition mode,
    /// TCP retransmits on an open connection until `tcp_retries2` gives up, and a new
    /// connection tries until kube's connect timeout (crate::pool).
    fn retransmits_ms(&self, msg: &Msg, sent: bool) -> Option<u64> {
        if sent
            && let Msg::Api(req) = msg
            && let Some(run) = &self.running
            && let Some(p) = run.pending.get(&req.id)
        {
            return Some(p.conn.retransmits_ms());
        }
        Some(RETRANSMIT_OPEN_MS)
    }

    /// HTTP/1.1: each request and each watch has a connection of its own, so a lost
    /// message breaks that one only (its request fails, its watch ends: what
    /// `gave_up` says), not every connection as a client-go client's shared HTTP/2 one.
    fn broken_by_drop(&self, _msg: &Msg) -> Option<Msg> {
        None
    }

    /// HTTP/1.1: each request in flight has a connection of its own, so two sent at
    /// once (a `try_join!`, two reconciles) may reach the server in either order.
    fn lane(&self, msg: &Msg) -> u32 {
        match (msg, &self.running) {
            (Msg::Api(req), Some(run)) => run.pending.get(&req.id).map_or(0, |p| p.conn_id.0),
            _ => 0,
        }
    }

    fn on_crash(&mut self) {
        // The process's memory: its runtime, its client, every request in flight and
        // every watch it held.
        self.running = None;
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
