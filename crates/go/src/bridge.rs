//! The bridge: a world process that runs a Go program. Its handler is where the
//! program runs: each step sets the program's clocks to the step's instant, hands its
//! sockets what the network brought, and resumes it until it waits; then every whole
//! HTTP request it wrote goes to the simulated API server as an ordinary API message,
//! on its connection's lane, and the time it waits for becomes a simulation timer.
//! Answers come back as HTTP/1.1 bytes on the socket they were asked on; a watch's
//! events as chunks of its response. So the program's requests meet the network's
//! latency, partitions and faults, and its timers fire in virtual time, in order with
//! its messages, the same way on every run.
//!
//! Connections are the program's own (Go's `http.Transport` keeps and reuses them):
//! the first request on a socket is a new connection's (it fails at the connect
//! timeout under a partition), a later one an open connection's (TCP retransmits
//! until it gives up), as `reconsim_kube::pool` says for kube-rs.

use crate::files::Files;
use crate::guest::{Program, Running, Stop};
use crate::host::{Host, MONOTONIC_BASE_NS, SocketId, Stream};
use crate::http1;
use reconsim_kube::Backoff;
use reconsim_kube::Kinds;
use reconsim_kube::pool::{Conn, ConnId};
use reconsim_kube::rest::{self, Routed, Selector, Shape};
use reconsim_sim::network::RETRANSMIT_OPEN_MS;
use reconsim_sim::{ProcId, SimTime, TimerId};
use reconsim_world::api::{ApiError, ApiOk, ApiOp, ApiRequest, ApiResponse};
use reconsim_world::component::Component;
use reconsim_world::msg::{Lost, Msg, Timer};
use reconsim_world::object::Kind;
use reconsim_world::proc::WorldCtx;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The API server's address in the program's kubeconfig.
pub const APISERVER_ADDR: &str = "kubernetes.default.svc:80";
/// Where the program finds its kubeconfig (`KUBECONFIG`).
pub const KUBECONFIG_PATH: &str = "/etc/reconsim/kubeconfig";

/// Where a pod finds its namespace.
pub const SERVICE_ACCOUNT_NAMESPACE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The kubeconfig every Go program gets: the simulated API server over plain HTTP,
/// no credentials, namespace `default`. client-go then uses `http.DefaultTransport`
/// (`transport/cache.go`: no TLS, no dial holder, no proxy), which dials through
/// the simulation.
pub const KUBECONFIG: &str = "apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster:
    server: http://kubernetes.default.svc:80
contexts:
- name: sim
  context:
    cluster: sim
    user: sim
    namespace: default
current-context: sim
users:
- name: sim
  user: {}
";

/// Rounds of resuming and answering at once in one handler: a program that keeps
/// asking what is not served is stopped, not spun.
const ROUNDS_PER_HANDLER_MAX: usize = 64;

/// The simulation's timer for the program's next deadline, due at `at_ms` (true time).
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
struct GoTimer {
    at_ms: u64,
}

/// A request at the API server.
struct Inflight {
    socket: SocketId,
    /// A discovery document, sent when the server's answer comes (the request is a
    /// round trip to the server, under the network's latency and faults).
    discovery: Option<(u16, Vec<u8>)>,
    shape: Shape,
    stream: u32,
    conn: Conn,
    said: Option<String>,
}

/// A watch the program holds open on a socket.
struct Watching {
    socket: SocketId,
    stream: u32,
    kind: Kind,
    namespace: Option<String>,
    selector: Selector,
    initial_events: bool,
}

/// What the bridge knows of one of the program's connections.
struct Connection {
    lane: ConnId,
    /// A request went on it already: the next is an open connection's.
    used: bool,
    /// Bytes the program wrote that do not make a whole request yet.
    buf: Vec<u8>,
}

/// One start of the program.
struct Run {
    guest: Running,
    wake: Option<(SimTime, TimerId)>,
    conns: BTreeMap<SocketId, Connection>,
    inflight: BTreeMap<u64, Inflight>,
    watches: BTreeMap<u64, Watching>,
    next_stream: u32,
    next_lane: u32,
}

/// A Go program as a world process.
pub struct GoBridge {
    apiserver: ProcId,
    program: Program,
    kinds: Kinds,
    args: Vec<String>,
    env: Vec<String>,
    files: Arc<Files>,
    /// `None`: the program runs once.
    backoff: Option<Backoff>,
    kubelet: Option<ProcId>,
    run: Option<Run>,
    next_id: u64,
    /// How each run of the program ended, in words.
    pub results: Vec<String>,
    /// Every request, as `METHOD uri`, when recording.
    pub requests: Vec<String>,
    /// Every log line, when recording.
    pub lines: Vec<String>,
    recording: bool,
}

impl std::fmt::Debug for GoBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoBridge")
            .field("program", &self.program)
            .field("results", &self.results)
            .finish()
    }
}

impl GoBridge {
    /// `program` against the API server `apiserver`, serving `kinds`, as process
    /// `name` (its `POD_NAME`).
    pub fn new(apiserver: ProcId, kinds: Kinds, program: Program, name: &str) -> Self {
        GoBridge {
            apiserver,
            args: vec![name.to_string()],
            env: vec![
                format!("KUBECONFIG={KUBECONFIG_PATH}"),
                format!("POD_NAME={name}"),
                "POD_NAMESPACE=default".to_string(),
                "HOME=/".to_string(),
            ],
            // A pod's service account namespace, which controller-runtime's leader
            // election reads when no LeaderElectionNamespace is given
            // (pkg/leaderelection, getInClusterNamespace).
            files: Arc::new(
                Files::default()
                    .with(KUBECONFIG_PATH, KUBECONFIG)
                    .with(SERVICE_ACCOUNT_NAMESPACE, "default"),
            ),
            program,
            kinds,
            backoff: Some(Backoff::new()),
            kubelet: None,
            run: None,
            next_id: 0,
            results: Vec::new(),
            requests: Vec::new(),
            lines: Vec::new(),
            recording: false,
        }
    }

    /// The program runs once: when it exits, the process idles.
    pub fn once(mut self) -> Self {
        self.backoff = None;
        self
    }

    /// The program as a pod's container, started by `kubelet`: when it exits, the
    /// container exits and the kubelet restarts it.
    pub fn in_container(mut self, kubelet: ProcId) -> Self {
        self.kubelet = Some(kubelet);
        self
    }

    /// Keeps every request and log line (for tests).
    pub fn recording(mut self) -> Self {
        self.recording = true;
        self
    }

    /// The program's arguments after its name.
    pub fn args(mut self, args: &[String]) -> Self {
        self.args.truncate(1);
        self.args.extend(args.iter().cloned());
        self
    }

    /// One more environment variable, `NAME=value`.
    pub fn env(mut self, var: &str) -> Self {
        self.env.push(var.to_string());
        self
    }

    pub fn boxed(self) -> Box<dyn Component> {
        Box::new(self)
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Resume the program and send what it asked, until it waits on the simulation
    /// alone; then act on why it stopped.
    fn pump(&mut self, ctx: &mut WorldCtx<'_>) {
        let mut stop = None;
        for _ in 0..ROUNDS_PER_HANDLER_MAX {
            let Some(run) = &mut self.run else {
                return;
            };
            run.guest
                .host
                .lock()
                .expect("the host's lock")
                .set_time(ctx.true_now(), ctx.now());
            let s = run.guest.resume();
            let answered_at_once = self.after_resume(ctx);
            stop = Some(s);
            if !answered_at_once || !matches!(stop, Some(Stop::Waiting(_))) {
                break;
            }
        }
        match stop {
            Some(Stop::Waiting(w)) => {
                let due = w.deadline_ns.map(|d| {
                    // Rounded up to the simulation's millisecond, so Go's timers are
                    // due when the step comes.
                    SimTime::from_ms(d.saturating_sub(MONOTONIC_BASE_NS).div_ceil(1_000_000))
                        .max(ctx.true_now())
                });
                self.set_wake(due, ctx);
            }
            Some(Stop::Exited(code)) => self.exited(format!("exit status {code}"), ctx),
            Some(Stop::Trapped(why)) => self.exited(format!("the runtime failed: {why}"), ctx),
            Some(Stop::Busy) => self.exited(
                "it ran without waiting past the step's bound (a loop that never blocks)".into(),
                ctx,
            ),
            None => {}
        }
    }

    fn set_wake(&mut self, due: Option<SimTime>, ctx: &mut WorldCtx<'_>) {
        let Some(run) = &mut self.run else {
            return;
        };
        if run.wake.map(|(at, _)| at) == due {
            return;
        }
        if let Some((_, id)) = run.wake.take() {
            ctx.cancel_timer(id);
        }
        if let Some(at) = due {
            let id = ctx.set_timer(
                at.since(ctx.true_now()),
                Msg::family_timer(GoTimer { at_ms: at.as_ms() }),
            );
            run.wake = Some((at, id));
        }
    }

    /// The program's run ended: its container exits (a pod's), or it restarts after
    /// the kubelet's backoff, or (once) it idles.
    fn exited(&mut self, why: String, ctx: &mut WorldCtx<'_>) {
        self.run = None;
        if let Some(kubelet) = self.kubelet {
            ctx.note(|| format!("go program: {why}; its container exits"));
            self.results.push(why);
            ctx.send(kubelet, Msg::ContainerExited);
            let me = ctx.me();
            ctx.stop(me);
            return;
        }
        if let Some(b) = &mut self.backoff {
            let delay = b.after_exit(ctx.true_now());
            ctx.note(|| format!("go program: {why}; restarting in {} s", delay / 1000));
            self.results.push(why);
            ctx.crash_self(delay);
            return;
        }
        ctx.note(|| format!("go program: {why}"));
        self.results.push(why);
    }

    /// What the program did since it was resumed: its log lines to the timeline, its
    /// whole requests to the API server, its closed sockets' watches ended. Whether a
    /// request was answered at once (the program has more to read).
    fn after_resume(&mut self, ctx: &mut WorldCtx<'_>) -> bool {
        let Some(run) = &mut self.run else {
            return false;
        };
        let (lines, dialled, written, closed) = {
            let mut h = run.guest.host.lock().expect("the host's lock");
            let lines = h.take_lines();
            let dialled = std::mem::take(&mut h.dialled);
            let mut written = Vec::new();
            let mut closed = Vec::new();
            for (id, s) in h.sockets.iter_mut() {
                if !s.tx.is_empty() {
                    written.push((*id, std::mem::take(&mut s.tx)));
                }
                if s.closed {
                    closed.push(*id);
                }
            }
            for id in &closed {
                h.sockets.remove(id);
            }
            (lines, dialled, written, closed)
        };
        for (stream, line) in lines {
            let tag = match stream {
                Stream::Stdout => "stdout",
                Stream::Stderr => "stderr",
            };
            if self.recording {
                self.lines.push(line.clone());
            }
            ctx.note(|| format!("go {tag}: {line}"));
        }
        for id in dialled {
            run.next_lane = run.next_lane.wrapping_add(1).max(1);
            run.conns.insert(
                id,
                Connection {
                    lane: ConnId(run.next_lane),
                    used: false,
                    buf: Vec::new(),
                },
            );
        }
        let mut at_once = Vec::new();
        let mut broken = Vec::new();
        let mut sends = Vec::new();
        for (socket, bytes) in written {
            let Some(c) = run.conns.get_mut(&socket) else {
                continue;
            };
            c.buf.extend_from_slice(&bytes);
            loop {
                match http1::take_request(&mut c.buf) {
                    Ok(Some(req)) => {
                        let conn = if c.used { Conn::Pooled } else { Conn::New };
                        c.used = true;
                        sends.push((socket, conn, req));
                    }
                    Ok(None) => break,
                    Err(why) => {
                        broken.push((socket, why));
                        break;
                    }
                }
            }
        }
        for (socket, why) in broken {
            ctx.note(|| format!("go program: its connection broke: {why}"));
            self.reset_socket(socket);
        }
        for (socket, conn, req) in sends {
            if self.recording {
                self.requests.push(format!("{} {}", req.method, req.uri));
            }
            let said = ctx
                .notes_enabled()
                .then(|| rest::summary(&req.method, &req.uri, &req.body));
            if let Some(said) = &said {
                ctx.note(|| said.clone());
            }
            let path = req.uri.split('?').next().unwrap_or("");
            let discovery = (req.method == http::Method::GET)
                .then(|| reconsim_kube::discovery::document(path, &self.kinds))
                .flatten();
            if let Some((status, doc)) = discovery {
                let id = self.next_id();
                let run = self.run.as_mut().expect("running");
                let body = serde_json::to_vec(&doc).expect("JSON values serialize");
                run.inflight.insert(
                    id,
                    Inflight {
                        socket,
                        discovery: Some((status, body)),
                        shape: Shape::Object,
                        stream: 0,
                        conn,
                        said: None,
                    },
                );
                ctx.send(
                    self.apiserver,
                    Msg::Api(ApiRequest {
                        id,
                        op: ApiOp::Ping,
                    }),
                );
                continue;
            }
            match rest::route(
                &req.method,
                &req.uri,
                req.content_type.as_deref(),
                &req.body,
                &self.kinds,
            ) {
                Routed::Op { mut op, shape } => {
                    let id = self.next_id();
                    let run = self.run.as_mut().expect("running");
                    let mut stream = 0;
                    if let ApiOp::Watch { stream: s, .. } | ApiOp::WatchState { stream: s, .. } =
                        &mut op
                    {
                        run.next_stream += 1;
                        *s = run.next_stream;
                        stream = run.next_stream;
                    }
                    run.inflight.insert(
                        id,
                        Inflight {
                            socket,
                            discovery: None,
                            shape,
                            stream,
                            conn,
                            said,
                        },
                    );
                    ctx.send(self.apiserver, Msg::Api(ApiRequest { id, op }));
                }
                Routed::Answer { status, body } => {
                    let bytes = serde_json::to_vec(&body).expect("JSON values serialize");
                    self.deliver(socket, &http1::response(status, &bytes));
                    at_once.push(socket);
                }
            }
        }
        for socket in closed {
            self.socket_closed(socket, ctx);
        }
        !at_once.is_empty()
    }

    /// The program closed a socket: a watch on it ends at the server too.
    fn socket_closed(&mut self, socket: SocketId, ctx: &mut WorldCtx<'_>) {
        let Some(run) = &mut self.run else {
            return;
        };
        run.conns.remove(&socket);
        let ended: Vec<u64> = run
            .watches
            .iter()
            .filter(|(_, w)| w.socket == socket)
            .map(|(id, _)| *id)
            .collect();
        let streams: Vec<u32> = ended
            .iter()
            .filter_map(|id| run.watches.remove(id))
            .map(|w| w.stream)
            .collect();
        for stream in streams {
            let rid = self.next_id();
            ctx.send(
                self.apiserver,
                Msg::Api(ApiRequest {
                    id: rid,
                    op: ApiOp::Unwatch { stream },
                }),
            );
        }
    }

    /// Bytes from the peer, for the program to read.
    fn deliver(&mut self, socket: SocketId, bytes: &[u8]) {
        let Some(run) = &mut self.run else {
            return;
        };
        let mut h = run.guest.host.lock().expect("the host's lock");
        if let Some(s) = h.sockets.get_mut(&socket) {
            s.rx.extend(bytes);
        }
    }

    /// The connection broke: the program's reads and writes on it fail.
    fn reset_socket(&mut self, socket: SocketId) {
        let Some(run) = &mut self.run else {
            return;
        };
        let mut h = run.guest.host.lock().expect("the host's lock");
        if let Some(s) = h.sockets.get_mut(&socket) {
            s.reset = true;
        }
    }

    /// The API server answered request `id`: its bytes on the request's socket.
    fn answered(
        &mut self,
        id: u64,
        result: &Result<ApiOk, ApiError>,
        ctx: &mut WorldCtx<'_>,
    ) -> bool {
        let Some(run) = &mut self.run else {
            return false;
        };
        let Some(Inflight {
            socket,
            discovery,
            shape,
            stream,
            said,
            ..
        }) = run.inflight.remove(&id)
        else {
            return false;
        };
        if let Some((status, body)) = discovery {
            self.deliver(socket, &http1::response(status, &body));
            return true;
        }
        if let Some(said) = said
            && let Some(got) = rest::outcome(&shape, result)
        {
            ctx.note(|| format!("{said} => {got}"));
        }
        let bytes = match (&shape, result) {
            (
                Shape::Watch {
                    kind,
                    namespace,
                    selector,
                    initial_events,
                },
                Ok(ApiOk::Watching { watch_id }),
            ) => {
                run.watches.insert(
                    *watch_id,
                    Watching {
                        socket,
                        stream,
                        kind: *kind,
                        namespace: namespace.clone(),
                        selector: selector.clone(),
                        initial_events: *initial_events,
                    },
                );
                http1::stream_head(200)
            }
            (Shape::Watch { .. }, Err(ApiError::Gone)) => {
                let mut b = http1::stream_head(200);
                http1::chunk(&mut b, &rest::gone_line());
                b.extend_from_slice(http1::LAST_CHUNK);
                b
            }
            (_, result) => {
                let (status, body) = rest::answer_text(result, &shape);
                http1::response(status, &body)
            }
        };
        self.deliver(socket, &bytes);
        true
    }

    /// A line of watch `watch_id`'s stream.
    fn watch_line(
        &mut self,
        watch_id: u64,
        line: impl FnOnce(&mut Watching) -> Option<Vec<u8>>,
    ) -> bool {
        let Some(run) = &mut self.run else {
            return false;
        };
        let Some(w) = run.watches.get_mut(&watch_id) else {
            return false;
        };
        let socket = w.socket;
        let Some(line) = line(w) else {
            return false;
        };
        let mut b = Vec::with_capacity(line.len() + 12);
        http1::chunk(&mut b, &line);
        self.deliver(socket, &b);
        true
    }
}

impl Component for GoBridge {
    /// The API server's host closed the program's connections to it: as a reset of
    /// them all.
    fn on_peer_closed(&mut self, peer: ProcId, ctx: &mut WorldCtx<'_>) {
        if peer == self.apiserver {
            self.on_msg(peer, Msg::ConnectionReset, ctx);
        }
    }

    fn on_start(&mut self, ctx: &mut WorldCtx<'_>) {
        if let Some(b) = &mut self.backoff {
            b.started = ctx.true_now();
        }
        let mut host = Host::new(
            ctx.rng(),
            self.args.clone(),
            self.env.clone(),
            self.files.clone(),
        );
        host.reachable.push(APISERVER_ADDR.to_string());
        host.set_time(ctx.true_now(), ctx.now());
        self.run = Some(Run {
            guest: Running::start(&self.program, host),
            wake: None,
            conns: BTreeMap::new(),
            inflight: BTreeMap::new(),
            watches: BTreeMap::new(),
            next_stream: 0,
            next_lane: 0,
        });
        ctx.note(|| format!("go program {} starts", self.program.sha256_hex()));
        self.pump(ctx);
    }

    fn on_msg(&mut self, _from: ProcId, msg: Msg, ctx: &mut WorldCtx<'_>) {
        let woke = match msg {
            Msg::ApiResp(ApiResponse { id, result }) => self.answered(id, &result, ctx),
            Msg::Watch(ev) => self.watch_line(ev.watch_id, |w| {
                rest::event_line(&ev, w.namespace.as_deref(), &w.selector)
            }),
            Msg::WatchBookmark {
                watch_id,
                resource_version,
            } => self.watch_line(watch_id, |w| {
                let end = std::mem::take(&mut w.initial_events);
                Some(rest::bookmark_line(w.kind, resource_version, end))
            }),
            Msg::WatchEnd { watch_id } => {
                // The response ends as a whole chunked body does: the connection is
                // idle again, for Go's transport to reuse.
                let Some(run) = &mut self.run else {
                    return;
                };
                match run.watches.remove(&watch_id) {
                    Some(w) => {
                        self.deliver(w.socket, http1::LAST_CHUNK);
                        true
                    }
                    None => false,
                }
            }
            Msg::ConnectionLost(Lost::Request(id)) => {
                // The connection gave up (connect timeout, or TCP's retransmissions):
                // the program's read fails.
                let Some(run) = &mut self.run else {
                    return;
                };
                match run.inflight.remove(&id) {
                    Some(r) => {
                        self.reset_socket(r.socket);
                        true
                    }
                    None => false,
                }
            }
            Msg::ConnectionLost(Lost::Watch(watch_id)) => {
                let Some(run) = &mut self.run else {
                    return;
                };
                match run.watches.remove(&watch_id) {
                    Some(w) => {
                        let id = self.next_id();
                        ctx.send(
                            self.apiserver,
                            Msg::Api(ApiRequest {
                                id,
                                op: ApiOp::Unwatch { stream: w.stream },
                            }),
                        );
                        self.reset_socket(w.socket);
                        true
                    }
                    None => false,
                }
            }
            Msg::ConnectionReset => {
                // The server's host reset its connections: every one breaks.
                let Some(run) = &mut self.run else {
                    return;
                };
                run.watches.clear();
                run.inflight.clear();
                let sockets: Vec<SocketId> = run.conns.keys().copied().collect();
                for s in sockets {
                    self.reset_socket(s);
                }
                true
            }
            _ => false,
        };
        if woke {
            self.pump(ctx);
        }
    }

    fn on_timer(&mut self, timer: Timer, ctx: &mut WorldCtx<'_>) {
        let Timer::Family(p) = timer else {
            return;
        };
        let Some(t) = p.typed::<GoTimer>() else {
            return;
        };
        let Some(run) = &mut self.run else {
            return;
        };
        if run.wake.map(|(at, _)| at.as_ms()) == Some(t.at_ms) {
            run.wake = None;
            self.pump(ctx);
        }
    }

    /// Go's `http.Transport` has no read timeout: under either partition mode TCP
    /// retransmits on an open connection until `tcp_retries2` gives up, and a new
    /// connection tries until the dialer's 30 s timeout (`http.DefaultTransport`).
    fn retransmits_ms(&self, msg: &Msg, sent: bool) -> Option<u64> {
        if sent
            && let Msg::Api(req) = msg
            && let Some(run) = &self.run
            && let Some(r) = run.inflight.get(&req.id)
        {
            return Some(r.conn.retransmits_ms());
        }
        Some(RETRANSMIT_OPEN_MS)
    }

    /// HTTP/1.1: a lost message breaks its own connection only.
    fn broken_by_drop(&self, _msg: &Msg) -> Option<Msg> {
        None
    }

    /// Each connection is a FIFO link of its own.
    fn lane(&self, msg: &Msg) -> u32 {
        match (msg, &self.run) {
            (Msg::Api(req), Some(run)) => run
                .inflight
                .get(&req.id)
                .and_then(|r| run.conns.get(&r.socket))
                .map_or(0, |c| c.lane.0),
            _ => 0,
        }
    }

    fn on_crash(&mut self) {
        self.run = None;
    }

    /// SIGTERM reaches the program (reconsim's overlay hands it to the Go runtime's
    /// signal queue, so `signal.Notify` and controller-runtime's
    /// `SetupSignalHandler` see it): a manager cancels its context, stops its
    /// controllers (and releases its Lease if it was told to) and returns; its
    /// container exits when the program does, or the kubelet kills it when the grace
    /// period ends. A program that asked for no signal ends at once, as SIGTERM's
    /// default action ends a process (exit status 143).
    fn on_terminate(&mut self, _from: ProcId, ctx: &mut WorldCtx<'_>) -> bool {
        if self.kubelet.is_none() {
            return false;
        }
        let Some(run) = &mut self.run else {
            return false;
        };
        if !run
            .guest
            .host
            .lock()
            .expect("the host's lock")
            .signal(crate::host::SIGTERM)
        {
            return false;
        }
        ctx.note(|| "go program: SIGTERM delivered to it".to_string());
        self.pump(ctx);
        true
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
