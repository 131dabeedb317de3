//! Chrome Trace Event JSON of a run, for Perfetto (ui.perfetto.dev) and chrome://tracing.
//!
//! Layout: a process track per host, a thread track per simulated process on it, and
//! one more thread per controller inside a manager. Reconciles are complete slices
//! ("X"); faults and the violation are instant events; flow arrows go from each write a
//! process makes to the watch events it causes, and from a watch event to the next
//! reconcile it wakes on the receiving process; each Lease gets a counter track whose
//! series are the candidates (1 for the holder). Times are simulated microseconds.
//! The format: the Trace Event Format document (Google, "Trace Event Format").

use crate::build::World;
use reconsim_check::Violation;
use reconsim_sim::{ProcId, RecordKind, SimTime};
use reconsim_world::Msg;
use reconsim_world::api::{ApiOk, ApiOp};
use reconsim_world::object::Kind;
use reconsim_world::object::{Lease, Node, Resource};
use serde_json::{Value, json};
use std::collections::BTreeMap;

fn us(t: SimTime) -> u64 {
    t.as_ms() * 1000
}

/// The trace document of a run made with a full trace.
pub fn chrome_trace(world: &World, violation: Option<&Violation>) -> Value {
    let sim = &world.sim;
    let mut events: Vec<Value> = Vec::new();
    let pid = |p: ProcId| sim.proc_host(p).0;
    for (h, name) in sim.hosts() {
        events.push(json!({"ph": "M", "name": "process_name", "pid": h.0, "tid": 0, "args": {"name": name}}));
    }
    let mut threads: BTreeMap<(u32, u32), String> = BTreeMap::new();
    for i in 0..sim.proc_count() as u32 {
        let p = ProcId(i);
        threads.insert((pid(p), i * 16), sim.proc_name(p).to_string());
    }
    // Controller threads: (process, reconciler name) -> tid.
    let mut controller_tid: BTreeMap<(u32, String), u32> = BTreeMap::new();
    let mut open: BTreeMap<u32, (u64, String)> = BTreeMap::new();
    // Writes by resourceVersion: where each stored version came from.
    let mut pending_write: Option<(u32, u32, u64)> = None;
    let mut write_of_rv: BTreeMap<u64, (u32, u32, u64)> = BTreeMap::new();
    let mut flow_id = 0u64;
    // Per receiving process: the last watch event (its slice), for the reconcile it wakes.
    let mut woke: BTreeMap<u32, (u64, u32, u32)> = BTreeMap::new();
    let mut leases: BTreeMap<String, (Vec<String>, Option<String>)> = BTreeMap::new();
    let end = sim.now();
    for r in sim.trace().records() {
        let ts = us(r.time);
        // A stored version is attributed to the write delivered just before it, never
        // to an older one (the garbage collector writes on its own).
        if !matches!(&r.kind, RecordKind::Note { proc, .. } if *proc == world.apiserver) {
            pending_write = None;
        }
        match &r.kind {
            RecordKind::Fault {
                index,
                active,
                applied,
            } => {
                let f = &sim.plan().faults[*index];
                events.push(json!({
                    "ph": "i", "s": "g", "ts": ts, "pid": 0, "tid": 0,
                    "name": format!("fault {} {}", if *active { "starts" } else { "ends" }, fault_name(&f.fault)),
                    "args": {"fault": serde_json::to_value(&f.fault).unwrap_or(Value::Null), "applied": applied},
                }));
            }
            RecordKind::Note { proc, text } => {
                if *proc == world.apiserver {
                    // "stored KEY rv N": the write just delivered made version N.
                    if let (Some(rv), Some(w)) = (
                        text.rsplit_once(" rv ")
                            .and_then(|(_, rv)| rv.parse::<u64>().ok()),
                        pending_write,
                    ) {
                        write_of_rv.insert(rv, w);
                    }
                    continue;
                }
                let Some((name, rest)) = text.split_once(" reconcile ") else {
                    continue;
                };
                let p = pid(*proc);
                let next = controller_tid.len() as u32;
                let tid = *controller_tid
                    .entry((proc.0, name.to_string()))
                    .or_insert_with(|| proc.0 * 16 + 1 + next % 15);
                threads
                    .entry((p, tid))
                    .or_insert_with(|| format!("{} {name}", sim.proc_name(*proc)));
                if rest.starts_with('#') {
                    let label = rest.split(" (cache").next().unwrap_or(rest).to_string();
                    open.insert(tid, (ts, label));
                    if let Some((wts, wp, wt)) = woke.remove(&proc.0) {
                        flow_id += 1;
                        events.push(json!({"ph": "s", "id": flow_id, "ts": wts, "pid": wp, "tid": wt, "name": "wakes", "cat": "watch"}));
                        events.push(json!({"ph": "f", "bp": "e", "id": flow_id, "ts": ts, "pid": p, "tid": tid, "name": "wakes", "cat": "watch"}));
                    }
                } else if let Some((start, label)) = open.remove(&tid) {
                    events.push(json!({
                        "ph": "X", "ts": start, "dur": ts - start, "pid": p, "tid": tid,
                        "name": label, "cat": "reconcile", "args": {"end": rest},
                    }));
                }
            }
            RecordKind::Deliver { from, to, msg } => match msg {
                Msg::Api(req) if *to == world.apiserver => {
                    let kind = match &req.op {
                        ApiOp::Create(o) => Some(o.kind()),
                        ApiOp::Update { object, .. } => Some(object.kind()),
                        ApiOp::Patch { key, .. }
                        | ApiOp::Delete { key, .. }
                        | ApiOp::Bind { key, .. } => Some(key.kind),
                        _ => None,
                    };
                    pending_write = None;
                    if kind.is_some_and(traced) {
                        // A write: a 1 µs slice on the writer's track, where its arrows start.
                        let (wp, wt) = (pid(*from), from.0 * 16);
                        events.push(json!({"ph": "X", "ts": ts, "dur": 1, "pid": wp, "tid": wt, "name": op_name(&req.op), "cat": "write"}));
                        pending_write = Some((wp, wt, ts));
                    }
                }
                Msg::Watch(ev) if traced(ev.object.kind()) => {
                    if let Some((wp, wt, wts)) =
                        write_of_rv.get(&ev.object.meta.resource_version).copied()
                    {
                        flow_id += 1;
                        let (rp, rt) = (pid(*to), to.0 * 16);
                        let name = format!("{} {}", ev.object.kind(), ev.object.meta.name);
                        events.push(json!({"ph": "X", "ts": ts, "dur": 1, "pid": rp, "tid": rt, "name": format!("watch {name}"), "cat": "watch"}));
                        events.push(json!({"ph": "s", "id": flow_id, "ts": wts, "pid": wp, "tid": wt, "name": name, "cat": "watch"}));
                        events.push(json!({"ph": "f", "bp": "e", "id": flow_id, "ts": ts, "pid": rp, "tid": rt, "name": name, "cat": "watch"}));
                        woke.insert(to.0, (ts, rp, rt));
                    }
                }
                Msg::ApiResp(resp) => {
                    if let Ok(ApiOk::Object(o)) = &resp.result
                        && o.kind() == Lease::KIND
                        && o.meta.namespace != reconsim_world::kubelet::NODE_LEASE_NAMESPACE
                        && let Some(l) = o.typed::<Lease>()
                    {
                        let entry = leases.entry(o.meta.name.clone()).or_default();
                        let holder = l.holder_identity.clone();
                        if let Some(h) = &holder
                            && !entry.0.contains(h)
                        {
                            entry.0.push(h.clone());
                        }
                        if entry.1 != holder {
                            entry.1 = holder.clone();
                            let args: serde_json::Map<String, Value> = entry
                                .0
                                .iter()
                                .map(|c| (c.clone(), json!(u8::from(Some(c) == holder.as_ref()))))
                                .collect();
                            events.push(json!({"ph": "C", "ts": ts, "pid": 0, "tid": 0, "name": format!("lease {}", o.meta.name), "args": args}));
                        }
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }
    // Reconciles still running when the run stopped.
    for (tid, (start, label)) in open {
        let p = threads
            .keys()
            .find(|(_, t)| *t == tid)
            .map_or(0, |(p, _)| *p);
        events.push(json!({"ph": "X", "ts": start, "dur": us(end) - start, "pid": p, "tid": tid, "name": label, "cat": "reconcile", "args": {"end": "unfinished"}}));
    }
    for ((p, tid), name) in &threads {
        events.push(
            json!({"ph": "M", "name": "thread_name", "pid": p, "tid": tid, "args": {"name": name}}),
        );
    }
    if let Some(v) = violation {
        events.push(json!({
            "ph": "i", "s": "g", "ts": us(v.time), "pid": 0, "tid": 0,
            "name": format!("VIOLATION {}", v.invariant),
            "args": {"message": v.message, "objects": v.objects},
        }));
    }
    json!({"traceEvents": events, "displayTimeUnit": "ms"})
}

/// Kinds whose writes get flow arrows (not the heartbeats: Leases, Nodes).
fn traced(kind: Kind) -> bool {
    !(kind == Lease::KIND || kind == Node::KIND)
}

fn op_name(op: &ApiOp) -> String {
    match op {
        ApiOp::Create(o) => format!("create {}", o.kind()),
        ApiOp::Update { object, .. } => format!("update {} {}", object.kind(), object.meta.name),
        ApiOp::Patch { key, .. } => format!("patch {} {}", key.kind, key.name),
        ApiOp::Delete { key, .. } => format!("delete {} {}", key.kind, key.name),
        ApiOp::Bind { key, node_name, .. } => {
            format!("bind {} {} to {node_name}", key.kind, key.name)
        }
        _ => "request".into(),
    }
}

fn fault_name<F>(f: &reconsim_sim::Fault<F>) -> &'static str {
    use reconsim_sim::Fault;
    match f {
        Fault::Partition { .. } => "partition",
        Fault::SlowLink { .. } => "slow link",
        Fault::Pause { .. } => "pause",
        Fault::PauseHost { .. } => "freeze host",
        Fault::Crash { .. } => "crash",
        Fault::ClockSkew { .. } => "clock skew",
        Fault::Inject { .. } => "world fault",
        Fault::DropMessage => "drop message",
        Fault::DelayMessage { .. } => "delay message",
        Fault::LoseAnswer => "lose answer",
    }
}
