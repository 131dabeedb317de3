//! A kube-rs client's requests across a partition, as its real stack fares (crate::pool,
//! docs/semantics.md 4.8): kube has no read timeout and hyper's HTTP/1.1 connections no
//! health check, so under either partition mode a request on an open connection waits
//! for the heal (TCP retransmits it) until `tcp_retries2` gives up at 924.6 s, and one
//! that needs a new connection fails at kube's 30 s connect timeout.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use reconsim_kube::{Kinds, KubeWorld, Program, intercept};
use reconsim_sim::{Fault, FaultPlan, PartitionMode, SimTime, TimedFault, TraceMode};
use reconsim_world::apiserver::ApiServerConfig;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Milliseconds on the run's wall clock (0 at the start of the run).
fn now_ms() -> u64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    since_epoch.as_millis() as u64 - intercept::EPOCH_UNIX_SECS * 1000
}

/// A program that reads a ConfigMap every `every_s` seconds: each read's (sent, done,
/// result) in ms of the run.
fn reader(every_s: u64, log: Arc<Mutex<Vec<(u64, u64, bool)>>>) -> Program {
    Arc::new(move |client: kube::Client| {
        let log = log.clone();
        Box::pin(async move {
            let cms: Api<ConfigMap> = Api::namespaced(client, "default");
            loop {
                let sent = now_ms();
                let ok = cms.get_opt("absent").await.is_ok();
                log.lock().unwrap().push((sent, now_ms(), ok));
                tokio::time::sleep(Duration::from_secs(every_s)).await;
            }
        })
    })
}

/// The reads of a run with the user's host cut off from the API server over `cut_s`.
fn reads(
    every_s: u64,
    cut_s: (u64, u64),
    mode: PartitionMode,
    until_s: u64,
) -> Vec<(u64, u64, bool)> {
    intercept::on_own_thread(7, || {
        let log = Arc::new(Mutex::new(Vec::new()));
        let partition = Fault::Partition {
            hosts_a: vec!["user".into()],
            hosts_b: vec!["api".into()],
            mode,
            one_way: false,
        };
        let plan = FaultPlan::new(vec![TimedFault::at(
            cut_s.0 * 1000,
            Some((cut_s.1 - cut_s.0) * 1000),
            partition,
        )]);
        let mut w = KubeWorld::with_faults(
            7,
            TraceMode::Hash,
            ApiServerConfig::default(),
            Kinds::new().core::<ConfigMap>(),
            reader(every_s, log.clone()),
            plan,
        );
        w.sim.run_until(SimTime::from_secs(until_s));
        log.lock().unwrap().clone()
    })
}

/// The read sent first at or after `at_ms`.
fn read_at(log: &[(u64, u64, bool)], at_ms: u64) -> (u64, u64, bool) {
    *log.iter().find(|r| r.0 >= at_ms).expect("a read then")
}

#[test]
fn a_request_on_an_open_connection_waits_for_the_heal_under_either_mode() {
    for mode in [PartitionMode::Drop, PartitionMode::Hold] {
        // Reads every 10 s; the link is cut from 15 s to 75 s. The read of 20 s goes on
        // the connection pooled since the 10 s read: TCP retransmits it, and it is
        // answered just after the heal, not lost, not failed.
        let log = reads(10, (15, 75), mode, 120);
        let (sent, done, ok) = read_at(&log, 20_000);
        assert!(ok, "{mode:?}: {log:?}");
        assert!(sent < 21_000, "{mode:?}: {log:?}");
        assert!((75_000..75_100).contains(&done), "{mode:?}: {log:?}");
        // Nothing else was sent meanwhile (the program awaited it), and reads go on.
        assert_eq!(read_at(&log, 21_000).0 / 1000, 85, "{mode:?}: {log:?}");
    }
}

#[test]
fn a_request_on_a_new_connection_fails_at_the_connect_timeout() {
    // Cut from the start: the first read needs a new connection, which gives up after
    // kube's 30 s connect timeout; the read after it (a new connection again) is held
    // until the heal at 50 s and answered.
    let log = reads(1, (0, 50), PartitionMode::Drop, 80);
    let (sent, done, ok) = log[0];
    assert!(!ok, "{log:?}");
    assert!(sent < 100 && (30_000..30_100).contains(&done), "{log:?}");
    let (sent, done, ok) = log[1];
    assert!(ok, "{log:?}");
    assert!((31_000..31_100).contains(&sent), "{log:?}");
    assert!((50_000..50_100).contains(&done), "{log:?}");
}

#[test]
fn a_request_on_an_open_connection_fails_when_tcp_gives_up() {
    // Cut from 15 s for 1,000 s: the pooled read of 20 s is retransmitted until
    // tcp_retries2 gives up, 924.6 s after it was held; the next read, 10 s later, needs
    // a new connection and fails after 30 s; the one after that is answered at the heal.
    let log = reads(10, (15, 1015), PartitionMode::Drop, 1100);
    let (sent, done, ok) = read_at(&log, 20_000);
    assert!(!ok, "{log:?}");
    assert_eq!((done - sent) / 100, 9246, "{log:?}");
    let (sent2, done2, ok2) = read_at(&log, sent + 1);
    assert!(
        !ok2 && done2 - sent2 >= 30_000 && done2 - sent2 < 30_100,
        "{log:?}"
    );
    let (_, done3, ok3) = read_at(&log, sent2 + 1);
    assert!(ok3 && (1_015_000..1_015_100).contains(&done3), "{log:?}");
}
