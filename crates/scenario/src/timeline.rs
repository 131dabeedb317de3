//! A readable timeline of a run: the events that change what the invariants read.
//!
//! From a full trace it keeps faults, process starts, notes (leadership), writes to the
//! API server on the objects a scenario's controllers own, and the cloud calls that
//! launch or terminate instances with their answers. Reads, watch traffic and
//! heartbeats are left out: they are most of the trace and none of the story.

use crate::build::World;
use reconsim_cloud::{CloudOp, CloudResult};
use reconsim_sim::{ProcId, Record, RecordKind, SimTime};
use reconsim_world::Msg;
use reconsim_world::api::{ApiOp, PatchOp};
use reconsim_world::object::Kind;
use reconsim_world::object::{Deployment, Lease, Node, Resource};

/// One line per kept event, in order; `until` stops the listing (the violation time).
pub fn timeline(world: &World, until: SimTime) -> Vec<String> {
    world
        .sim
        .trace()
        .records()
        .iter()
        .take_while(|r| r.time <= until)
        .filter_map(|r| line(world, r))
        .collect()
}

/// "name@host" of a process.
pub fn who(world: &World, p: ProcId) -> String {
    let sim = &world.sim;
    format!("{}@{}", sim.proc_name(p), sim.host_name(sim.proc_host(p)))
}

/// The timeline line of one record, if the timeline keeps it.
pub fn line(world: &World, r: &Record<Msg>) -> Option<String> {
    let sim = &world.sim;
    let t = r.time.to_string();
    match &r.kind {
        RecordKind::Fault {
            index,
            active,
            applied,
        } => {
            let f = &sim.plan().faults[*index];
            let what = serde_json::to_string(&f.fault).unwrap_or_default();
            Some(format!(
                "{t:>11}  fault {} {what}{}",
                if *active { "starts" } else { "ends  " },
                if *applied { "" } else { " (no such target)" }
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
        // The API server's write log and reconcile starts are for `explain`.
        RecordKind::Note { proc, text }
            if *proc != world.apiserver
                && *proc != world.cloud
                && !text.contains(" reconcile #")
                && !text.contains(" reconcile of ") =>
        {
            Some(format!("{t:>11}  {}: {text}", who(world, *proc)))
        }
        RecordKind::Deliver { from, to, msg } => describe(msg).map(|d| {
            let (actor, dir) = if *to == world.apiserver || *to == world.cloud {
                (who(world, *from), "->")
            } else {
                (who(world, *to), "<-")
            };
            format!("{t:>11}  {actor} {dir} {d}")
        }),
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
        Msg::Response { body, .. } => Some(match body.typed::<CloudResult>()? {
            Ok(list) if list.is_empty() => "cloud answers: none".to_string(),
            Ok(list) => format!(
                "cloud answers: {}",
                list.iter()
                    .map(|i| format!("{} ({:?})", i.id, i.state))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Err(e) => format!("cloud answers: {e:?}"),
        }),
        _ => None,
    }
}

fn patch_summary(op: &PatchOp) -> String {
    match op {
        PatchOp::Merge(patch) => patch.summary(),
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
        other => format!("{other:?}").chars().take(40).collect(),
    }
}
