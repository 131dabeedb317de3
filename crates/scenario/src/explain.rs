//! `explain`: a readable causal timeline of a failure.
//!
//! It replays the failure with a full trace and keeps only what leads to the violation:
//! the faults (with those still active at the violation marked), leadership changes,
//! every write, cloud call and reconcile that touches an object the violation names,
//! and the causal chain one step behind those writes (`Chain`: the reconciles that
//! made them, what their caches held or missed, why their processes run, who held
//! their leases). Each reconcile start shows what the controller's cache held against
//! what the API server held at that moment, so a decision taken on a stale view says so.

use crate::failure::{FailureFile, Replay};
use crate::runner::run_world;
use crate::timeline;
use reconsim_sim::{RecordKind, SimTime, TraceMode};
use std::collections::BTreeMap;

/// An explanation, ready to print.
#[derive(Clone, Debug)]
pub struct Explanation {
    pub headline: String,
    /// One line: every fault of the plan, active ones marked.
    pub faults: String,
    pub objects: Vec<String>,
    pub lines: Vec<String>,
    /// The trace record each of `lines` tells, by index into the run's records: what
    /// the failure page ([`crate::page`]) draws each line from.
    pub records: Vec<usize>,
    /// When the violation happened: where the story ends.
    pub at: SimTime,
}

/// Whether `line` names `name` as a whole word (so `ms-1` does not match `ms-10`).
fn mentions(line: &str, name: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    line.match_indices(name).any(|(i, _)| {
        let before = line[..i].chars().next_back();
        let rest = &line[i + name.len()..];
        // `<name>-*` is a create by generateName from `<name>`.
        let generated = rest.starts_with("-*");
        !before.is_some_and(word) && (generated || !rest.chars().next().is_some_and(word))
    })
}

/// Explain `failure`, from one run with a full trace that is also its replay: `Err`
/// with the replay's verdict if the file's failure does not happen (the same invariant
/// and trace hash), so an edited file is never explained by some other failure.
pub fn explain(failure: &FailureFile) -> Result<Explanation, Box<Replay>> {
    explain_world(failure).map(|(e, _)| e)
}

/// [`explain`], with the world of its run (its full trace): what the failure page draws.
pub fn explain_world(
    failure: &FailureFile,
) -> Result<(Explanation, crate::build::World), Box<Replay>> {
    let (outcome, world) = run_world(
        &failure.scenario,
        failure.seed,
        failure.plan.clone(),
        TraceMode::Full,
    );
    // A differential finding breaks no invariant: its verdict is the comparison with
    // the reference run, as `replay` makes it; the full trace above tells the story.
    let outcome =
        if failure.judge() != crate::failure::Judge::Invariants && outcome.violation.is_none() {
            crate::failure::rerun(
                &failure.scenario,
                failure.seed,
                &failure.plan,
                failure.judge(),
                TraceMode::Hash,
            )
        } else {
            outcome
        };
    let judged = Replay::judge(failure, outcome);
    if !judged.reproduced {
        return Err(Box::new(judged));
    }
    let v = judged
        .outcome
        .violation
        .expect("a reproduced failure violates its invariant");
    let mut names: Vec<&str> = v
        .objects
        .iter()
        .filter_map(|o| o.split_once(' ').map(|(_, name)| name))
        .collect();
    let known = known_names(&world);
    if names.is_empty() {
        // A convergence failure names its objects in its message ("Node x ...").
        names = names_in(&v.message, &known);
    }
    if names.is_empty() && failure.invariant == crate::search::DIFFERENTIAL {
        // A differential finding names objects as the oracle masks them
        // (`default/controlplane-*`): the run's objects of those names.
        names = generated_in(&v.message, &known);
    }
    let at = v.time;
    // A fault beyond the scenario's declared envelope is said to be (judged anew: the
    // file's own label is what search said when it found it).
    let envelope = crate::envelope::Envelope::of_world(&failure.scenario, &world);
    let faults = failure
        .plan
        .faults
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let beyond = envelope
                .beyond(f)
                .map(|why| format!(" [BEYOND THE SCENARIO'S FAULT ENVELOPE: {why}]"))
                .unwrap_or_default();
            // An anchored fault's time is when its event came (never, if it did not).
            let start = match &f.on {
                None => Some(SimTime(f.at_ms)),
                Some(_) => world.sim.fired_at(i),
            };
            let what = match &f.on {
                None => timeline::fault_words(&f.fault),
                Some(anchor) => format!("{} {anchor}", timeline::fault_words(&f.fault)),
            };
            let Some(start) = start else {
                return format!("{what}: its event never came{beyond}");
            };
            let end = if f.fault.is_message_fault() {
                Some(start)
            } else {
                f.duration_ms.map(|d| start.plus_ms(d))
            };
            let active = start <= at && end.is_none_or(|e| e > at);
            format!(
                "{what} {start}-{}{}{beyond}",
                end.map_or("end".to_string(), |e| e.to_string()),
                if active { " (active)" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    // The API server's latest resourceVersion per object, and its write log, from the
    // notes it keeps in full traces.
    let mut server: BTreeMap<String, ServerState> = BTreeMap::new();
    let mut writes: Vec<(u64, String)> = Vec::new();
    // Processes inside a reconcile of one of the violation's objects: their notes are shown.
    let mut in_reconcile: std::collections::BTreeSet<reconsim_sim::ProcId> = Default::default();
    let mut lines = Vec::new();
    let mut records = Vec::new();
    let outcomes = timeline::Outcomes::of(&world);
    // Which object each write made (its resourceVersion is the server's count), so a
    // request answered `ok, rv N` is shown when write N made one of the named objects:
    // who created a `generateName` object, whose name the request did not know.
    let made: BTreeMap<u64, String> = world
        .sim
        .trace()
        .records()
        .iter()
        .take_while(|r| r.time <= at)
        .filter_map(|r| match &r.kind {
            RecordKind::Note { proc, text } if *proc == world.apiserver => server_write(text)
                .filter(|(_, _, stored)| *stored)
                .map(|(key, rv, _)| (rv, key.to_string())),
            _ => None,
        })
        .collect();
    let made_named = |line: &str| {
        answer_rv(line)
            .and_then(|rv| made.get(&rv))
            .is_some_and(|key| names.iter().any(|n| mentions(key, n)))
    };
    // A create by generateName still unanswered at the violation: the server named the
    // object its prefix and 5 characters (apiserver's SimpleNameGenerator), so one of
    // the named objects with that prefix is what it made.
    let prefixes: Vec<String> = names
        .iter()
        .filter(|n| n.len() > 5 && n.is_char_boundary(n.len() - 5))
        .map(|n| format!("{}*", &n[..n.len() - 5]))
        .filter(|p| p.len() > 2 && p.ends_with("-*"))
        .collect();
    let unanswered_create = |line: &str| {
        line.contains("no answer by") && prefixes.iter().any(|p| line.contains(p.as_str()))
    };
    let chain = Chain::of(&world, &outcomes, at, &|line: &str| {
        names.iter().any(|n| mentions(line, n)) || made_named(line) || unanswered_create(line)
    });
    // A request whose answer made a write on the chain: who wrote what a deciding read
    // saw, or missed.
    let made_on_chain = |line: &str| answer_rv(line).is_some_and(|rv| chain.writes.contains(&rv));
    for (index, r) in world.sim.trace().records().iter().enumerate() {
        if r.time > at {
            break;
        }
        // The lines the previous pass pushed tell its record.
        records.resize(lines.len(), index.saturating_sub(1));
        if let Some(lease) = chain.leases.get(&index) {
            lines.push(format!("{:>11}  {lease}", r.time.to_string()));
        }
        if let RecordKind::Note { proc, text } = &r.kind {
            if *proc == world.apiserver {
                if let Some((key, rv, stored)) = server_write(text) {
                    let state = if stored {
                        ServerState::Live(rv)
                    } else {
                        ServerState::Removed(rv)
                    };
                    server.insert(key.to_string(), state);
                    writes.push((rv, key.to_string()));
                    // Node heartbeats name the node but explain nothing, unless a
                    // deciding read saw or missed them (the chain).
                    let heartbeat = key.starts_with("Lease kube-node-lease/");
                    if (!heartbeat && names.iter().any(|n| mentions(key, n)))
                        || chain.writes.contains(&rv)
                        || chain.beats.contains(&index)
                    {
                        let why = if chain.beats.contains(&index) {
                            " (the node's last heartbeat before it was found silent)"
                        } else {
                            ""
                        };
                        lines.push(format!(
                            "{:>11}  api server: {text}{why}",
                            r.time.to_string()
                        ));
                    }
                } else if reconsim_world::apiserver::is_own_controller_note(text)
                    && names.iter().any(|n| mentions(text, n))
                {
                    // Deletions no request made: the server's own controllers.
                    lines.push(format!("{:>11}  api server: {text}", r.time.to_string()));
                }
                continue;
            }
            if let Some(start) = reconcile_start(text) {
                let key = start.key;
                if !names.iter().any(|n| mentions(key, n)) && !chain.reconciles.contains(&index) {
                    in_reconcile.remove(proc);
                    continue;
                }
                in_reconcile.insert(*proc);
                // A resourceVersion is the API server's counter of writes: an object's
                // is the count at its last write, so a smaller one in a cache is older.
                let mut verdict = cache_verdict(start.own_rv, server.get(key).copied());
                // Writes the server made to watched kinds that the cache has not seen.
                let mut missed: Vec<&str> = Vec::new();
                for (_, k) in unseen(&writes, &start.seen) {
                    if !missed.contains(&k.as_str()) {
                        missed.push(k);
                    }
                }
                if !missed.is_empty() {
                    missed.reverse();
                    verdict.push_str(&format!(
                        "; its cache has not yet seen the latest writes to {}",
                        missed.join(", ")
                    ));
                } else if verdict.is_empty() {
                    verdict.push_str("; its cache is up to date");
                }
                // The reconcile itself, without the cache's raw versions: the verdict
                // says what they mean.
                lines.push(format!(
                    "{:>11}  {}: {}{verdict}",
                    r.time.to_string(),
                    timeline::who(&world, *proc),
                    start.head
                ));
                continue;
            }
        }
        // What a reconciler noted (ReconcileCtx::note) during a reconcile shown above.
        if let RecordKind::Note { proc, text } = &r.kind
            && in_reconcile.contains(proc)
        {
            // The manager's end-of-reconcile notes close it; one that failed is shown.
            let (ended, failed) = reconcile_end(text);
            if ended || failed {
                in_reconcile.remove(proc);
            }
            if !ended {
                lines.push(format!(
                    "{:>11}  {}: {text}",
                    r.time.to_string(),
                    timeline::who(&world, *proc)
                ));
            }
            continue;
        }
        // A restarted process is in no reconcile.
        if let RecordKind::Start { proc } = &r.kind {
            in_reconcile.remove(proc);
        }
        let Some(line) = timeline::line(&world, &outcomes, r) else {
            continue;
        };
        let keep = matches!(
            r.kind,
            RecordKind::Fault { .. } | RecordKind::Crashed { .. }
        ) || line.contains("leading")
            || line.contains("lost the lease")
            || names.iter().any(|n| mentions(&line, n))
            || made_named(&line)
            || made_on_chain(&line)
            || chain.tells_why(&world, r, &line)
            || unanswered_create(&line);
        if keep {
            lines.push(line);
        }
    }
    // The last pass's lines: the last record at or before the violation.
    let last = world
        .sim
        .trace()
        .records()
        .partition_point(|r| r.time <= at)
        .saturating_sub(1);
    records.resize(lines.len(), last);
    Ok((
        Explanation {
            headline: format!(
                "{} seed {}: {} at t={}\n  {}",
                failure.scenario.name, failure.seed, v.invariant, v.time, v.message
            ),
            faults,
            objects: if v.objects.is_empty() {
                names.iter().map(|n| n.to_string()).collect()
            } else {
                v.objects.clone()
            },
            lines,
            records,
            at,
        },
        world,
    ))
}

/// The write a request's answer reports (`=> ok, rv N`): the server's count after it.
fn answer_rv(line: &str) -> Option<u64> {
    line.split_once("=> ok, rv ")
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|rv| rv.parse().ok())
}

/// An API server write note (`stored KEY rv N`, `removed KEY rv N`): the object's key,
/// the write's resourceVersion, and whether it was stored (else removed).
fn server_write(text: &str) -> Option<(&str, u64, bool)> {
    let (rest, stored) = match text.strip_prefix("stored ") {
        Some(rest) => (rest, true),
        None => (text.strip_prefix("removed ")?, false),
    };
    let (key, rv) = rest.rsplit_once(" rv ")?;
    Some((key, rv.parse().unwrap_or(0), stored))
}

/// A reconcile's start note as the manager writes it (`... reconcile #N of KEY (cache:
/// rv R; seen Kind@rv, ...)`).
struct ReconcileStart<'a> {
    /// The note without its cache's versions.
    head: &'a str,
    /// The reconciled object's key.
    key: &'a str,
    /// The version of that object its cache held.
    own_rv: Option<u64>,
    /// Each watched kind and the last write of it the cache had seen.
    seen: Vec<(&'a str, u64)>,
}

fn reconcile_start(text: &str) -> Option<ReconcileStart<'_>> {
    let (_, rest) = text.split_once(" reconcile #")?;
    let (_, key_part) = rest.split_once(" of ")?;
    let (key, cache) = key_part.split_once(" (cache: ")?;
    let head = text.split_once(" (cache: ").map_or(text, |(h, _)| h);
    let cache = cache.trim_end_matches(')');
    let (own, seen) = cache.split_once("; seen ").unwrap_or((cache, ""));
    Some(ReconcileStart {
        head,
        key,
        own_rv: own.strip_prefix("rv ").and_then(|r| r.parse().ok()),
        seen: seen
            .split(", ")
            .filter_map(|pair| pair.split_once('@'))
            .map(|(kind, rv)| (kind, rv.parse().unwrap_or(0)))
            .collect(),
    })
}

/// Whether a manager's note ends a reconcile: (it ended, it ended in error).
fn reconcile_end(text: &str) -> (bool, bool) {
    let of = text.contains(" reconcile of ");
    (
        of && text.ends_with(" ends"),
        of && text.contains(" ends in error: "),
    )
}

/// The writes of `log` (resourceVersion, key; in order) to the kinds of `seen` that
/// came after what a cache had seen of each: newest first, kind by kind.
fn unseen<'l>(
    log: &'l [(u64, String)],
    seen: &[(&str, u64)],
) -> impl Iterator<Item = &'l (u64, String)> {
    let seen: Vec<(String, u64)> = seen.iter().map(|(k, rv)| (format!("{k} "), *rv)).collect();
    seen.into_iter().flat_map(move |(prefix, rv)| {
        log.iter()
            .rev()
            .take_while(move |(w, _)| *w > rv)
            .filter(move |(_, k)| k.starts_with(&prefix))
    })
}

/// The causal chain one step back from the story's own writes, so that what decided a
/// violation is shown even when the violation does not name it. A *deciding read* is
/// a reconcile during which its process made a request the story keeps (one on a named
/// object); the chain is those reconciles (whatever object they reconcile) and the
/// writes they read: the last write of the reconciled object their cache held, and
/// every write to a kind they watch that their cache had not seen yet (heartbeats
/// included: a Node's missed renewal is evidence). One step only, so the story stays
/// bounded by the reads that made its writes.
///
/// The processes that made the story's requests are on it too, with why they run:
/// their starts, the node lifecycle controller's lines about their pods and nodes (a
/// node that stopped posting status, a pod evicted while its process runs on), and
/// that node's last heartbeat before it was marked silent: the evidence of the
/// silence.
struct Chain {
    /// Trace indices of the deciding reconciles' start notes.
    reconciles: std::collections::BTreeSet<usize>,
    /// The writes (resourceVersions) those reconciles read or missed.
    writes: std::collections::BTreeSet<u64>,
    /// The processes that made the story's requests.
    processes: std::collections::BTreeSet<reconsim_sim::ProcId>,
    /// Their names and their hosts' (a pod's process is named for its pod, a host for
    /// its Node).
    names: Vec<String>,
    /// Trace indices of the last heartbeat of a chain host before the lifecycle
    /// controller marked it silent.
    beats: std::collections::BTreeSet<usize>,
    /// Leader election on the chain: lines for the writes of a Lease (not a node's)
    /// that a chain process wrote, where its holder changed, and the last renewal of
    /// each holder before it; by the trace index of the write's answer.
    leases: BTreeMap<usize, String>,
}

impl Chain {
    fn of(
        world: &crate::build::World,
        outcomes: &timeline::Outcomes,
        at: SimTime,
        kept: &dyn Fn(&str) -> bool,
    ) -> Chain {
        let mut chain = Chain {
            reconciles: Default::default(),
            writes: Default::default(),
            processes: Default::default(),
            names: Vec::new(),
            beats: Default::default(),
            leases: BTreeMap::new(),
        };
        // Leader-election Leases: each write's request (by caller and id), and each
        // answered write in order (its answer's index, the writer, the lease, the holder).
        let mut lease_asks: std::collections::BTreeSet<(reconsim_sim::ProcId, u64)> =
            Default::default();
        let mut lease_writes: Vec<(usize, reconsim_sim::ProcId, String, Option<String>)> =
            Vec::new();
        // Each node's last heartbeat so far (its Lease's renewal), and the last one
        // before each time the lifecycle controller said the node went silent.
        let mut last_beat: BTreeMap<String, usize> = BTreeMap::new();
        let mut silenced: Vec<(String, usize)> = Vec::new();
        let lease_prefix = format!("Lease {}/", reconsim_world::kubelet::NODE_LEASE_NAMESPACE);
        // The server's write log so far, and each process's reconcile in progress: its
        // start's index, the version of its object its cache held, and the writes it
        // had not seen.
        let mut log: Vec<(u64, String)> = Vec::new();
        let mut current: BTreeMap<reconsim_sim::ProcId, (usize, Option<u64>, Vec<u64>)> =
            BTreeMap::new();
        for (index, r) in world.sim.trace().records().iter().enumerate() {
            if r.time > at {
                break;
            }
            match &r.kind {
                RecordKind::Note { proc, text } if *proc == world.apiserver => {
                    if let Some((key, rv, _)) = server_write(text) {
                        log.push((rv, key.to_string()));
                        if let Some(node) = key.strip_prefix(&lease_prefix) {
                            last_beat.insert(node.to_string(), index);
                        }
                    }
                }
                RecordKind::Note { proc, text }
                    if world.sim.proc_name(*proc) == reconsim_world::lifecycle::NAME =>
                {
                    if let Some(node) = text
                        .strip_prefix("lifecycle: node ")
                        .and_then(|t| t.split_once(" stopped posting status"))
                        .map(|(node, _)| node)
                        && let Some(beat) = last_beat.get(node)
                    {
                        silenced.push((node.to_string(), *beat));
                    }
                }
                RecordKind::Note { proc, text } => {
                    if let Some(start) = reconcile_start(text) {
                        let missed = unseen(&log, &start.seen).map(|(w, _)| *w).collect();
                        current.insert(*proc, (index, start.own_rv, missed));
                    } else if reconcile_end(text) != (false, false) {
                        current.remove(proc);
                    }
                }
                RecordKind::Start { proc } => {
                    current.remove(proc);
                }
                RecordKind::Deliver { from, to, msg } => {
                    use reconsim_world::api::{ApiOk, ApiOp};
                    use reconsim_world::object::{Lease, Resource};
                    let election = |kind, namespace: &str| {
                        kind == Lease::KIND
                            && namespace != reconsim_world::kubelet::NODE_LEASE_NAMESPACE
                    };
                    match msg {
                        reconsim_world::Msg::Api(req) if *to == world.apiserver => {
                            let writes_lease = match &req.op {
                                ApiOp::Create(o) => election(o.kind(), &o.meta.namespace),
                                ApiOp::Update { object, .. } => {
                                    election(object.kind(), &object.meta.namespace)
                                }
                                ApiOp::Patch { key, .. } => election(key.kind, &key.namespace),
                                _ => false,
                            };
                            if writes_lease {
                                lease_asks.insert((*from, req.id));
                            }
                        }
                        reconsim_world::Msg::ApiResp(resp) if *from == world.apiserver => {
                            if lease_asks.remove(&(*to, resp.id))
                                && let Ok(ApiOk::Object(o)) = &resp.result
                                && let Some(lease) = o.typed::<Lease>()
                            {
                                lease_writes.push((
                                    index,
                                    *to,
                                    format!("{}/{}", o.meta.namespace, o.meta.name),
                                    lease.holder_identity.clone(),
                                ));
                            }
                        }
                        _ => {}
                    }
                    // A request the story keeps: its reconcile and its process are on
                    // the chain.
                    if *from != world.apiserver
                        && timeline::line(world, outcomes, r).is_some_and(|l| kept(&l))
                    {
                        if let Some((start, own, missed)) = current.get(from) {
                            chain.reconciles.insert(*start);
                            chain.writes.extend(own.iter().copied());
                            chain.writes.extend(missed.iter().copied());
                        }
                        chain.processes.insert(*from);
                    }
                }
                _ => {}
            }
        }
        let sim = &world.sim;
        for p in &chain.processes {
            let host = sim.host_name(sim.proc_host(*p)).to_string();
            for name in [sim.proc_name(*p).to_string(), host] {
                if !chain.names.contains(&name) {
                    chain.names.push(name);
                }
            }
        }
        for (node, beat) in silenced {
            if chain.names.contains(&node) {
                chain.beats.insert(beat);
            }
        }
        // Per Lease a chain process wrote: who took it, and each holder's last renewal
        // before another took it (the deposed leader's last word).
        let on_chain: std::collections::BTreeSet<&str> = lease_writes
            .iter()
            .filter(|(_, p, _, _)| chain.processes.contains(p))
            .map(|(_, _, l, _)| l.as_str())
            .collect();
        let mut last: BTreeMap<&str, (usize, reconsim_sim::ProcId, Option<&str>)> = BTreeMap::new();
        for (index, writer, lease, holder) in &lease_writes {
            if !on_chain.contains(lease.as_str()) {
                continue;
            }
            let holder = holder.as_deref();
            let who = timeline::who(world, *writer);
            match last.get(lease.as_str()) {
                Some((_, _, before)) if *before == holder => {}
                previous => {
                    if let Some((at, by, Some(before))) = previous {
                        chain.leases.entry(*at).or_insert_with(|| {
                            format!(
                                "{} renews Lease {lease} (holder {before}): its last renewal before {who} changes the holder",
                                timeline::who(world, *by)
                            )
                        });
                    }
                    let what = match holder {
                        Some(h) => format!("takes Lease {lease} (holder {h})"),
                        None => format!("writes Lease {lease} with no holder"),
                    };
                    chain.leases.insert(*index, format!("{who} {what}"));
                }
            }
            last.insert(lease, (*index, *writer, holder));
        }
        chain
    }

    /// Whether `line`, the timeline's line of `r`, tells why a chain process runs: its
    /// start, or the node lifecycle controller on its pod or node.
    fn tells_why(
        &self,
        world: &crate::build::World,
        r: &reconsim_sim::Record<reconsim_world::Msg>,
        line: &str,
    ) -> bool {
        let by = match &r.kind {
            RecordKind::Start { proc } => return self.processes.contains(proc),
            RecordKind::Note { proc, .. } => *proc,
            RecordKind::Deliver { from, .. } => *from,
            _ => return false,
        };
        world.sim.proc_name(by) == reconsim_world::lifecycle::NAME
            && self.names.iter().any(|n| mentions(line, n))
    }
}

/// Every name a message can mention: the objects the API server stored during the run,
/// the processes and the hosts.
fn known_names(world: &crate::build::World) -> std::collections::BTreeSet<String> {
    let mut known = std::collections::BTreeSet::new();
    for r in world.sim.trace().records() {
        if let RecordKind::Note { proc, text } = &r.kind
            && *proc == world.apiserver
            && let Some(key) = text.strip_prefix("stored ")
            && let Some((key, _)) = key.rsplit_once(" rv ")
            && let Some((_kind, name)) = key.split_once(' ')
        {
            let name = name.rsplit_once('/').map_or(name, |(_, n)| n);
            known.insert(name.to_string());
        }
    }
    for p in 0..world.sim.proc_count() {
        let p = reconsim_sim::ProcId(u32::try_from(p).expect("process ids are u32"));
        known.insert(world.sim.proc_name(p).to_string());
        known.insert(world.sim.host_name(world.sim.proc_host(p)).to_string());
    }
    known
}

/// What the API server holds of an object at an instant: its last write, or its
/// removal (the write that deleted it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ServerState {
    Live(u64),
    Removed(u64),
}

/// How a cache's copy of an object (its resourceVersion, or none) stands against the
/// server's, true at that instant: a cache without an object the server deleted is up
/// to date, not missing it.
fn cache_verdict(cached_rv: Option<u64>, server: Option<ServerState>) -> String {
    match (cached_rv, server) {
        (Some(c), Some(ServerState::Live(s))) if c < s => format!(
            "; its cache is STALE: it holds this object as of write {c}, the API server as of write {s}"
        ),
        (None, Some(ServerState::Live(_))) => {
            "; its cache is MISSING this object, which the API server has".to_string()
        }
        (Some(c), Some(ServerState::Removed(s))) => format!(
            "; its cache is STALE: it still holds this object as of write {c}, which the API server deleted at write {s}"
        ),
        _ => String::new(),
    }
}

/// The names the run knows that a message's masked names stand for: `ns/prefix-*`
/// (a differential finding's generated names, docs/oracle.md) stands for every known
/// name `prefix-...`.
fn generated_in<'k>(message: &str, known: &'k std::collections::BTreeSet<String>) -> Vec<&'k str> {
    let prefixes: Vec<&str> = message
        .split_whitespace()
        .map(|w| w.trim_end_matches([':', ',', '.', ';', ')']))
        .filter_map(|w| w.strip_suffix('*'))
        .map(|w| w.rsplit_once('/').map_or(w, |(_, n)| n))
        .filter(|p| p.len() > 1 && p.ends_with('-'))
        .collect();
    known
        .iter()
        .filter(|k| prefixes.iter().any(|p| k.starts_with(p)))
        .map(String::as_str)
        .collect()
}

/// Object names a message mentions as `<word> <name>`: a name the run knows (an object,
/// a process, a host) or an `instance <id>` of the cloud.
fn names_in<'m>(message: &'m str, known: &std::collections::BTreeSet<String>) -> Vec<&'m str> {
    let words: Vec<&str> = message.split_whitespace().collect();
    let mut names: Vec<&str> = words
        .windows(2)
        .map(|w| (w[0], w[1].trim_end_matches([':', ',', '.', ';', ')'])))
        // Object names carry a dash or a digit, or follow their kind ("StepSet web");
        // plain words ("Node was left") do neither.
        .filter(|(word, n)| {
            n.contains(|c: char| c == '-' || c.is_ascii_digit())
                || (word.starts_with(|c: char| c.is_ascii_uppercase())
                    && word.chars().all(|c| c.is_ascii_alphanumeric()))
        })
        .filter(|(word, n)| *word == "instance" || known.contains(*n))
        .map(|(_, n)| n)
        .collect();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::{ServerState, cache_verdict};

    #[test]
    fn a_cache_verdict_holds_at_its_instant_deletions_included() {
        assert_eq!(cache_verdict(Some(5), Some(ServerState::Live(5))), "");
        assert!(cache_verdict(Some(4), Some(ServerState::Live(5))).contains("STALE"));
        assert!(cache_verdict(None, Some(ServerState::Live(5))).contains("MISSING"));
        // Deleted on the server: a cache without it is right, one with it is behind.
        assert_eq!(cache_verdict(None, Some(ServerState::Removed(9))), "");
        let behind = cache_verdict(Some(5), Some(ServerState::Removed(9)));
        assert!(behind.contains("deleted at write 9"), "{behind}");
        assert_eq!(cache_verdict(None, None), "");
    }
}
