//! `--chrome-trace`: the file follows the Trace Event Format that Perfetto and
//! chrome://tracing load: known phases with their required fields, named processes and
//! threads, slices that nest on each thread, flow arrows whose ends sit on slices, and
//! an instant event for the violation.

use reconsim::families::builtin;
use reconsim::scenario::chrome::chrome_trace;
use reconsim::scenario::{faults, library, runner};
use reconsim::sim::TraceMode;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

fn trace(name: &str, seed: u64) -> Value {
    let (_, scenario) = library::load(name, &builtin()).unwrap();
    let plan = faults::generate(&scenario, seed);
    let (outcome, world) = runner::run_world(&scenario, seed, plan, TraceMode::Full);
    chrome_trace(&world, outcome.violation.as_ref())
}

fn u(e: &Value, f: &str) -> u64 {
    e[f].as_u64()
        .unwrap_or_else(|| panic!("{f} missing or not a number: {e}"))
}

fn check_structure(doc: &Value) -> BTreeMap<String, usize> {
    let events = doc["traceEvents"]
        .as_array()
        .expect("traceEvents is an array");
    let mut phases: BTreeMap<String, usize> = BTreeMap::new();
    let mut named_threads = BTreeSet::new();
    let mut named_procs = BTreeSet::new();
    let mut slices: BTreeMap<(u64, u64), Vec<(u64, u64)>> = BTreeMap::new();
    let mut flows: BTreeMap<u64, Vec<(&str, u64, u64, u64)>> = BTreeMap::new();
    for e in events {
        let ph = e["ph"].as_str().expect("every event has a phase");
        *phases.entry(ph.to_string()).or_default() += 1;
        assert!(e["name"].is_string(), "every event has a name: {e}");
        let (pid, tid) = (u(e, "pid"), e["tid"].as_u64().unwrap_or(0));
        match ph {
            "M" => {
                assert!(e["args"]["name"].is_string(), "{e}");
                match e["name"].as_str().unwrap() {
                    "process_name" => {
                        named_procs.insert(pid);
                    }
                    "thread_name" => {
                        named_threads.insert((pid, tid));
                    }
                    other => panic!("unknown metadata {other}"),
                }
            }
            "X" => slices
                .entry((pid, tid))
                .or_default()
                .push((u(e, "ts"), u(e, "dur"))),
            "i" => {
                u(e, "ts");
                assert!(["g", "p", "t"].contains(&e["s"].as_str().unwrap()), "{e}");
            }
            "C" => {
                u(e, "ts");
                let args = e["args"].as_object().expect("counter args");
                assert!(
                    !args.is_empty() && args.values().all(Value::is_number),
                    "{e}"
                );
            }
            "s" | "f" => flows.entry(u(e, "id")).or_default().push((
                if ph == "s" { "s" } else { "f" },
                u(e, "ts"),
                pid,
                tid,
            )),
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    // Slices nest on each thread: sorted by start, each one ends before the next starts
    // or encloses it.
    for (thread, list) in &mut slices {
        assert!(
            named_threads.contains(thread),
            "slice on an unnamed thread {thread:?}"
        );
        assert!(named_procs.contains(&thread.0));
        list.sort();
        let mut stack: Vec<u64> = Vec::new();
        for &(ts, dur) in list.iter() {
            while stack.last().is_some_and(|end| *end <= ts) {
                stack.pop();
            }
            if let Some(end) = stack.last() {
                assert!(ts + dur <= *end, "slices overlap on {thread:?} at {ts}");
            }
            stack.push(ts + dur);
        }
    }
    // Every flow has one start and one finish, in time order, each on a slice.
    let on_slice = |pid: u64, tid: u64, ts: u64| {
        slices
            .get(&(pid, tid))
            .is_some_and(|l| l.iter().any(|&(s, d)| s <= ts && ts <= s + d))
    };
    for (id, ends) in &flows {
        assert_eq!(ends.len(), 2, "flow {id}: {ends:?}");
        let (s, f) = (ends[0], ends[1]);
        assert_eq!((s.0, f.0), ("s", "f"), "flow {id}");
        assert!(s.1 <= f.1, "flow {id} goes back in time");
        assert!(
            on_slice(s.2, s.3, s.1) && on_slice(f.2, f.3, f.1),
            "flow {id} ends off a slice"
        );
    }
    phases
}

#[test]
fn a_violation_trace_has_reconciles_flows_leases_faults_and_the_violation() {
    let doc = trace("machineapi-lease-expiry-pause", 5);
    let phases = check_structure(&doc);
    for ph in ["M", "X", "s", "f", "C", "i"] {
        assert!(
            phases.get(ph).is_some_and(|n| *n > 0),
            "no {ph} events: {phases:?}"
        );
    }
    let events = doc["traceEvents"].as_array().unwrap();
    assert!(events.iter().any(|e| {
        e["name"]
            .as_str()
            .unwrap()
            .starts_with("VIOLATION no_duplicate_machines")
    }));
    assert!(
        events
            .iter()
            .any(|e| e["name"] == "fault starts freeze host")
    );
    assert!(
        events
            .iter()
            .any(|e| e["cat"] == "reconcile" && e["name"].as_str().unwrap().contains("Machine"))
    );
    // The lease counter shows the takeover: two candidates, each holder at some point.
    let lease: Vec<&Value> = events
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "lease cluster-api-provider-aws-leader")
        .collect();
    assert!(lease.len() >= 2, "{lease:?}");
}

#[test]
fn a_clean_trace_is_well_formed_too() {
    let doc = trace("machineapi-leader-election", 0);
    let phases = check_structure(&doc);
    assert!(phases.get("X").is_some_and(|n| *n > 0));
    let events = doc["traceEvents"].as_array().unwrap();
    assert!(
        !events
            .iter()
            .any(|e| e["name"].as_str().unwrap().starts_with("VIOLATION"))
    );
}
