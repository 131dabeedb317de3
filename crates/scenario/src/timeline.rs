//! A readable timeline of a run: the events that change what the invariants read.
//!
//! From a full trace it keeps faults, process starts, notes (leadership), writes to the
//! API server on the objects a scenario's controllers own, and the cloud calls. Each
//! request's line ends with what became of it ([`Outcomes`]): the API server's answer
//! (`ok`, `409 Conflict`, `404 Not Found`, ...), the cloud's (the instances it listed),
//! or `no answer` when none reached the caller (lost to a partition, or the caller gave
//! up first), so a write that never took effect does not read as one that did. Reads,
//! watch traffic and heartbeats are left out: they are most of the trace and none of
//! the story.

use crate::build::World;
use reconsim_cloud::{CloudOp, CloudResult};
use reconsim_sim::{Fault, ProcId, Record, RecordKind, SimTime};
use reconsim_world::Msg;
use reconsim_world::WorldFault;
use reconsim_world::api::{ApiError, ApiOk, ApiOp, PatchOp};
use reconsim_world::object::Kind;
use reconsim_world::object::{Deployment, Lease, Node, Resource};
use std::collections::BTreeMap;

/// One line per kept event, in order; `until` stops the listing (the violation time).
pub fn timeline(world: &World, until: SimTime) -> Vec<String> {
    let outcomes = Outcomes::of(world);
    world
        .sim
        .trace()
        .records()
        .iter()
        .take_while(|r| r.time <= until)
        .filter_map(|r| line(world, &outcomes, r))
        .collect()
}

/// What became of every request of a run: the answer that reached its caller, by
/// (caller, request id), from the trace's deliveries; and when the trace ends.
pub struct Outcomes {
    /// Per request: when its answer came, the answer in words, and the name of the
    /// object it returned (what a create by `generateName` was named).
    answers: BTreeMap<(ProcId, u64), (SimTime, String, Option<String>)>,
    end: SimTime,
}

impl Outcomes {
    pub fn of(world: &World) -> Outcomes {
        let mut answers = BTreeMap::new();
        for r in world.sim.trace().records() {
            let RecordKind::Deliver { from, to, msg } = &r.kind else {
                continue;
            };
            let answer = match msg {
                Msg::ApiResp(resp) if *from == world.apiserver => {
                    let name = match &resp.result {
                        Ok(ApiOk::Object(o)) => Some(o.meta.name.clone()),
                        _ => None,
                    };
                    Some((resp.id, api_answer(&resp.result), name))
                }
                Msg::Response { id, body } if *from == world.cloud => body
                    .typed::<CloudResult>()
                    .map(|result| (*id, cloud_answer(result), None)),
                _ => None,
            };
            if let Some((id, text, name)) = answer {
                answers.entry((*to, id)).or_insert((r.time, text, name));
            }
        }
        let end = world
            .sim
            .trace()
            .records()
            .last()
            .map_or(SimTime::ZERO, |r| r.time);
        Outcomes { answers, end }
    }

    /// ` => <answer> (at <time>)`, or ` => no answer by <end of the trace>`; with
    /// `generated`, a create by `generateName`, the answer says the name the server
    /// gave (` => ok, rv 12, named web-x7k2p (at ...)`).
    fn suffix(&self, caller: ProcId, id: u64, generated: bool) -> String {
        match self.answers.get(&(caller, id)) {
            Some((at, text, Some(name))) if generated => {
                format!(" => {text}, named {name} (at {at})")
            }
            Some((at, text, _)) => format!(" => {text} (at {at})"),
            None => format!(" => no answer by {}", self.end),
        }
    }
}

fn api_answer(result: &Result<ApiOk, ApiError>) -> String {
    match result {
        Ok(ApiOk::Deleted) => "ok, removed".into(),
        Ok(ApiOk::Object(o)) if o.meta.is_deleting() => "ok, deleting".into(),
        Ok(ApiOk::Object(o)) => format!("ok, rv {}", o.meta.resource_version),
        Ok(_) => "ok".into(),
        Err(ApiError::NotFound) => "404 Not Found".into(),
        Err(ApiError::AlreadyExists) => "409 AlreadyExists".into(),
        Err(ApiError::Conflict) => "409 Conflict".into(),
        Err(ApiError::Gone) => "410 Gone".into(),
        Err(ApiError::Invalid(why)) => format!("422 Invalid ({why})"),
        Err(ApiError::ApplyConflict(why)) => format!("409 Conflict ({why})"),
        Err(ApiError::NamespaceNotFound(ns)) => format!("404 Not Found (namespaces {ns:?})"),
        Err(e @ ApiError::NamespaceTerminating { .. }) => {
            format!("403 Forbidden ({})", e.forbidden())
        }
    }
}

fn cloud_answer(result: &CloudResult) -> String {
    match result {
        Ok(list) if list.is_empty() => "none".to_string(),
        Ok(list) => list
            .iter()
            .map(|i| format!("{} ({:?})", i.id, i.state))
            .collect::<Vec<_>>()
            .join(", "),
        Err(e) => format!("{e:?}"),
    }
}

/// "name@host" of a process.
pub fn who(world: &World, p: ProcId) -> String {
    let sim = &world.sim;
    format!("{}@{}", sim.proc_name(p), sim.host_name(sim.proc_host(p)))
}

/// A fault in words, the same in explain's fault list, the timeline and its start and
/// end lines (`freeze host master-0`, `stop the kubelet of master-0`).
pub fn fault_words(f: &Fault<WorldFault>) -> String {
    match f {
        Fault::Partition {
            hosts_a,
            hosts_b,
            mode,
            one_way,
        } => format!(
            "partition {} {} {} ({})",
            hosts_a.join(","),
            if *one_way { "->" } else { "|" },
            hosts_b.join(","),
            match mode {
                reconsim_sim::PartitionMode::Drop => "messages dropped",
                reconsim_sim::PartitionMode::Hold => "messages held",
            }
        ),
        Fault::SlowLink {
            hosts_a,
            hosts_b,
            extra_latency_ms,
            ..
        } => format!(
            "slow link {} | {} +{}",
            hosts_a.join(","),
            hosts_b.join(","),
            SimTime(*extra_latency_ms)
        ),
        Fault::Pause { process } => format!("pause {process}"),
        Fault::PauseHost { host } => format!("freeze host {host}"),
        Fault::Crash { process } => format!("crash {process}"),
        Fault::ClockSkew { process, offset_ms } => {
            format!("clock of {process} off by {offset_ms:+} ms")
        }
        Fault::Inject { process, fault } => match fault {
            WorldFault::KubeletStop => format!(
                "stop the kubelet of {}",
                process.strip_prefix("kubelet/").unwrap_or(process)
            ),
            WorldFault::CloudDescribeLag { lag_ms } => format!(
                "new instances invisible to DescribeInstances {} longer",
                SimTime(*lag_ms)
            ),
            WorldFault::NodeJoinDelay { extra_ms } => {
                format!("booted instances join {} later", SimTime(*extra_ms))
            }
            WorldFault::TerminateInstance { launch, tag } => {
                let which = match launch {
                    Some(n) => format!("instance #{n}"),
                    None => "the oldest live instance".to_string(),
                };
                match tag {
                    Some(t) => format!("an outside actor terminates {which}, if tagged {t}"),
                    None => format!("an outside actor terminates {which}"),
                }
            }
            WorldFault::WatchLag {
                lag_ms,
                of_kind: None,
            } => {
                format!(
                    "watch events leave the API server {} late",
                    SimTime(*lag_ms)
                )
            }
            WorldFault::WatchLag {
                lag_ms,
                of_kind: Some(kind),
            } => {
                format!(
                    "{kind} watch events leave the API server {} late",
                    SimTime(*lag_ms)
                )
            }
            WorldFault::WatchStall { lag_ms } => {
                format!("watch events reach {process} {} late", SimTime(*lag_ms))
            }
            WorldFault::Resync => format!("resync every cache of {process}"),
            WorldFault::Failpoint { name, hit, action } => {
                format!("failpoint {name} in {process}: hit #{hit} does {action}")
            }
            WorldFault::Operation(op) => format!("the user's operation: {op}"),
        },
        Fault::DropMessage => "drop the message".into(),
        Fault::DelayMessage { extra_ms } => format!("delay the message {}", SimTime(*extra_ms)),
        Fault::LoseAnswer => "lose the answer".into(),
    }
}

/// The timeline line of one record, if the timeline keeps it.
pub fn line(world: &World, outcomes: &Outcomes, r: &Record<Msg>) -> Option<String> {
    let sim = &world.sim;
    let t = r.time.to_string();
    match &r.kind {
        RecordKind::Fault {
            index,
            active,
            applied,
        } => {
            let f = &sim.plan().faults[*index];
            let what = fault_words(&f.fault);
            // An injection for a process not started yet takes effect at its start (a
            // record of its own, later): say so, not that it has no target.
            let awaits_start = *active
                && !*applied
                && sim.trace().records().iter().any(|later| {
                    later.time >= r.time
                        && matches!(later.kind, RecordKind::Fault { index: i, active: true, applied: true } if i == *index)
                });
            let note = match (*applied, awaits_start) {
                (true, _) => "",
                (false, true) => " (its process has not started: it takes effect when it does)",
                (false, false) => " (no such target)",
            };
            Some(format!(
                "{t:>11}  fault {}: {what}{note}",
                if *active { "starts" } else { "ends" },
            ))
        }
        RecordKind::Crashed {
            proc,
            restart_after_ms,
        } => Some(format!(
            "{t:>11}  {} crashes at a failpoint (restarts {} later)",
            who(world, *proc),
            SimTime(*restart_after_ms)
        )),
        RecordKind::Start { proc } if sim.proc_name(*proc).contains("controller") => {
            Some(format!("{t:>11}  {} starts", who(world, *proc)))
        }
        // The API server's own controllers' deletions (garbage collector, namespace
        // controller): no request shows them.
        RecordKind::Note { proc, text }
            if *proc == world.apiserver
                && reconsim_world::apiserver::is_own_controller_note(text) =>
        {
            Some(format!("{t:>11}  api server: {text}"))
        }
        // The API server's write log and reconcile starts are for `explain`.
        RecordKind::Note { proc, text }
            if *proc != world.apiserver
                && *proc != world.cloud
                && !text.contains(" reconcile #")
                && !text.contains(" reconcile of ") =>
        {
            Some(format!("{t:>11}  {}: {text}", who(world, *proc)))
        }
        // A request, where it arrives, with what became of it; answers are not lines of
        // their own.
        RecordKind::Deliver { from, to, msg } if *to == world.apiserver || *to == world.cloud => {
            let d = describe(msg)?;
            let id = match msg {
                Msg::Api(req) => req.id,
                Msg::Request { id, .. } => *id,
                _ => return None,
            };
            let generated = matches!(msg, Msg::Api(req) if matches!(&req.op, ApiOp::Create(o) if o.meta.name.is_empty()));
            let outcome = outcomes.suffix(*from, id, generated);
            Some(format!("{t:>11}  {} -> {d}{outcome}", who(world, *from)))
        }
        _ => None,
    }
}

/// Every kind but the cluster's own background writes (leases renewed, Nodes'
/// heartbeats, Deployments' status): a family's kinds and a user's are all shown.
fn interesting(kind: Kind) -> bool {
    ![Lease::KIND, Node::KIND, Deployment::KIND].contains(&kind)
}

/// A patch that sets or clears a Node's annotations or labels: what families record on
/// Nodes (a node's current config, a hand-out, a role label) is shown although Nodes'
/// other writes (heartbeats, conditions) are not.
fn annotates(ops: &[PatchOp]) -> bool {
    ops.iter()
        .any(|o| matches!(o, PatchOp::SetAnnotation(..) | PatchOp::SetLabel(..)))
}

fn describe(msg: &Msg) -> Option<String> {
    match msg {
        Msg::Api(req) => match &req.op {
            ApiOp::Create(o) if interesting(o.kind()) => Some(format!(
                "create {} {}",
                o.kind(),
                if o.meta.name.is_empty() {
                    format!("{}*", o.meta.generate_name.clone().unwrap_or_default())
                } else {
                    o.meta.name.clone()
                }
            )),
            ApiOp::Create(o) if o.kind() == Node::KIND => {
                Some(format!("create Node {}", o.meta.name))
            }
            ApiOp::Patch { key, ops, .. } if key.kind == Node::KIND && annotates(ops) => {
                let what: Vec<String> = ops.iter().map(patch_summary).collect();
                Some(format!("patch Node {}: {}", key.name, what.join(", ")))
            }
            ApiOp::Update { object, .. } if interesting(object.kind()) => {
                Some(match object.body.summary() {
                    Some(s) => format!("update {} {}: {s}", object.kind(), object.meta.name),
                    None => format!("update {} {}", object.kind(), object.meta.name),
                })
            }
            ApiOp::Patch { key, ops, .. } if interesting(key.kind) => {
                let what: Vec<String> = ops.iter().map(patch_summary).collect();
                Some(format!(
                    "patch {} {}: {}",
                    key.kind,
                    key.name,
                    what.join(", ")
                ))
            }
            ApiOp::Delete { key, .. } if interesting(key.kind) || key.kind == Node::KIND => {
                Some(format!("delete {} {}", key.kind, key.name))
            }
            ApiOp::Bind { key, node_name, .. } => {
                Some(format!("bind {} {} to {node_name}", key.kind, key.name))
            }
            _ => None,
        },
        Msg::Request { body, .. } => match body.typed::<CloudOp>()? {
            CloudOp::RunInstances { tags, client_token } => Some(format!(
                "RunInstances Name={}{}",
                tags.get("Name").map_or("?", |s| s.as_str()),
                client_token
                    .as_ref()
                    .map(|t| format!(" token={t}"))
                    .unwrap_or_default()
            )),
            CloudOp::TerminateInstances { ids } => {
                Some(format!("TerminateInstances {}", ids.join(", ")))
            }
            CloudOp::DescribeInstances {
                ids, tag_filters, ..
            } => Some(format!(
                "DescribeInstances {}",
                if ids.is_empty() {
                    format!(
                        "Name={}",
                        tag_filters.get("Name").map_or("*", |s| s.as_str())
                    )
                } else {
                    ids.join(", ")
                }
            )),
        },
        _ => None,
    }
}

fn patch_summary(op: &PatchOp) -> String {
    match op {
        PatchOp::Merge(patch) => patch.summary(),
        PatchOp::Object(patch) => patch.summary(),
        PatchOp::Spec(b) => b.summary().unwrap_or_else(|| "spec".into()),
        PatchOp::Status(_) => "status".into(),
        PatchOp::AddFinalizer(f) => format!("+finalizer {f}"),
        PatchOp::RemoveFinalizer(f) => format!("-finalizer {f}"),
        PatchOp::SetAnnotation(k, v) => {
            // `prefix/name`: the name alone (the prefix is the owner's DNS domain).
            let k = k.split_once('/').map_or(k.as_str(), |(_, name)| name);
            match v {
                Some(v) => format!("{k}={v}"),
                None => format!("-{k}"),
            }
        }
        PatchOp::RemoveOwnerReference(uid) => format!("-ownerReference {}", uid.0),
        PatchOp::SetLabel(k, Some(v)) => format!("+label {k}={v:?}"),
        PatchOp::SetLabel(k, None) => format!("-label {k}"),
        PatchOp::SetOwnerReferences(refs) => format!(
            "ownerReferences={}",
            refs.iter()
                .map(|r| format!("{} {}", r.kind, r.name))
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}
