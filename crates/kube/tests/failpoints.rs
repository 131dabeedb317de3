//! A program's failpoints (`reconsim_failpoint::fail_point!`), armed by the fault plan's
//! `Failpoint` faults as a manager's are: unarmed, a hit changes nothing, not even the
//! history; armed, its hit errors, stalls in virtual time, or crashes the process there
//! (what it sent before is sent, what it would have sent after is not) and restarts it.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use reconsim_kube::{Kinds, KubeWorld, Program, intercept};
use reconsim_sim::{Fault, FaultPlan, RecordKind, SimTime, TimedFault, TraceMode};
use reconsim_world::apiserver::{ApiServer, ApiServerConfig};
use reconsim_world::fault::{FailpointAction, WorldFault};
use std::sync::Arc;

#[derive(Debug)]
enum Error {
    // Read through `Debug`, in the program's result.
    #[allow(dead_code)]
    Kube(String),
    Injected,
}

async fn create(api: &Api<ConfigMap>, name: &str) -> Result<(), Error> {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    match api.create(&PostParams::default(), &cm).await {
        Ok(_) => Ok(()),
        // A restart finds what the run before it wrote.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(Error::Kube(e.to_string())),
    }
}

/// Create `first`, pass the failpoint `between`, create `second`.
async fn two_creates(client: kube::Client, with_failpoint: bool) -> Result<(), Error> {
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    create(&api, "first").await?;
    if with_failpoint {
        reconsim_failpoint::fail_point!("between", Err(Error::Injected));
    }
    create(&api, "second").await
}

fn program(with_failpoint: bool) -> Program {
    Arc::new(move |client| {
        Box::pin(async move { format!("{:?}", two_creates(client, with_failpoint).await) })
    })
}

struct Run {
    results: Vec<String>,
    hash: u64,
    /// When each ConfigMap was created (ms), by name.
    created_ms: Vec<(String, u64)>,
    crashes: usize,
    notes: Vec<String>,
}

fn run(with_failpoint: bool, armed: Option<FailpointAction>) -> Run {
    intercept::on_own_thread(3, || {
        let faults = armed
            .map(|action| {
                let fault = Fault::Inject {
                    process: "kube-program".into(),
                    fault: WorldFault::Failpoint {
                        name: "between".into(),
                        hit: 1,
                        action,
                    },
                };
                vec![TimedFault::at(0, None, fault)]
            })
            .unwrap_or_default();
        let mut w = KubeWorld::with_faults(
            3,
            TraceMode::Full,
            ApiServerConfig::default(),
            Kinds::new(),
            program(with_failpoint),
            FaultPlan::new(faults),
        );
        w.sim.run_until(SimTime::from_secs(60));
        let Some(server) = w.sim.actor(w.apiserver).component::<ApiServer>() else {
            unreachable!("the API server's process")
        };
        let mut created_ms: Vec<(String, u64)> = server
            .objects()
            .filter(|o| o.meta.namespace == "default")
            .map(|o| (o.meta.name.clone(), o.meta.creation_timestamp.as_ms()))
            .collect();
        created_ms.sort();
        let records = w.sim.trace().records();
        Run {
            results: w.bridge().results.clone(),
            hash: w.sim.trace().hash(),
            created_ms,
            crashes: records
                .iter()
                .filter(|r| matches!(r.kind, RecordKind::Crashed { .. }))
                .count(),
            notes: records
                .iter()
                .filter_map(|r| match &r.kind {
                    RecordKind::Note { text, .. } if text.starts_with("failpoint") => {
                        Some(text.clone())
                    }
                    _ => None,
                })
                .collect(),
        }
    })
}

fn names(r: &Run) -> Vec<&str> {
    r.created_ms.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn an_unarmed_failpoint_changes_nothing_not_even_the_history() {
    let without = run(false, None);
    let with = run(true, None);
    assert_eq!(with.results, ["Ok(())"]);
    assert_eq!(names(&with), ["first", "second"]);
    assert_eq!(with.hash, without.hash);
    assert!(with.notes.is_empty());
}

#[test]
fn an_armed_error_returns_the_programs_own_value() {
    let r = run(true, Some(FailpointAction::Error));
    assert_eq!(r.results, ["Err(Injected)"]);
    assert_eq!(names(&r), ["first"]);
    assert_eq!(r.notes, ["failpoint between hit #1: error"]);
}

#[test]
fn an_armed_stall_waits_in_virtual_time() {
    let plain = run(true, None);
    let r = run(true, Some(FailpointAction::Stall { ms: 5_000 }));
    assert_eq!(r.results, ["Ok(())"]);
    let gap = |r: &Run| r.created_ms[1].1 - r.created_ms[0].1;
    assert_eq!(
        gap(&r),
        gap(&plain) + 5_000,
        "{:?} {:?}",
        r.created_ms,
        plain.created_ms
    );
}

#[test]
fn an_armed_crash_ends_the_process_there_and_its_restart_goes_on() {
    let r = run(
        true,
        Some(FailpointAction::Crash {
            restart_after_ms: 10_000,
        }),
    );
    assert_eq!(r.crashes, 1);
    assert_eq!(
        r.notes,
        ["failpoint between hit #1: crash (restart after 10000 ms)"]
    );
    // The run before the crash never returned; the one after it passed the failpoint
    // (its first hit was the one armed) and created `second` after the restart.
    assert_eq!(r.results, ["Ok(())"]);
    assert_eq!(names(&r), ["first", "second"]);
    let (first, second) = (r.created_ms[0].1, r.created_ms[1].1);
    assert!(second >= first + 10_000, "{:?}", r.created_ms);
    // The same seed, the same story.
    let again = run(
        true,
        Some(FailpointAction::Crash {
            restart_after_ms: 10_000,
        }),
    );
    assert_eq!(again.hash, r.hash);
}
