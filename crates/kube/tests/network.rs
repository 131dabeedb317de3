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

/// The API server process crashes at `crash_s.0` and starts again at `crash_s.1`;
/// its host stays up.
fn apiserver_crash(crash_s: (u64, u64)) -> FaultPlan<reconsim_world::WorldFault> {
    FaultPlan::new(vec![TimedFault::at(
        crash_s.0 * 1000,
        Some((crash_s.1 - crash_s.0) * 1000),
        Fault::Crash {
            process: "apiserver".into(),
        },
    )])
}

/// The reads of [`reader`] across an API-server crash, and with `watch`, when a watch
/// of ConfigMaps held open beside them ended.
fn reads_across_a_crash(
    watch: bool,
    crash_s: (u64, u64),
    until_s: u64,
) -> (Vec<(u64, u64, bool)>, Option<u64>) {
    intercept::on_own_thread(7, || {
        let log = Arc::new(Mutex::new(Vec::new()));
        let ended = Arc::new(Mutex::new(None));
        let read = reader(10, log.clone());
        let end = ended.clone();
        let program: Program = Arc::new(move |client: kube::Client| {
            let (read, end) = (read.clone(), end.clone());
            Box::pin(async move {
                if watch {
                    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
                    tokio::spawn(async move {
                        use futures::StreamExt;
                        let params = kube::api::WatchParams::default();
                        if let Ok(events) = cms.watch(&params, "0").await {
                            events.boxed().for_each(|_| async {}).await;
                        }
                        *end.lock().unwrap() = Some(now_ms());
                    });
                }
                read(client).await
            })
        });
        let mut w = KubeWorld::with_faults(
            7,
            TraceMode::Hash,
            ApiServerConfig::default(),
            Kinds::new().core::<ConfigMap>(),
            program,
            apiserver_crash(crash_s),
        );
        w.sim.run_until(SimTime::from_secs(until_s));
        let reads = log.lock().unwrap().clone();
        let ended = *ended.lock().unwrap();
        (reads, ended)
    })
}

#[test]
fn a_crashed_api_server_s_host_resets_its_connections_at_once() {
    // Probe P-G of fidelity review 3 (issue 59, D1). The server process crashes at 15 s
    // and starts again at 75 s; its host's kernel closes its sockets at the crash and
    // refuses new connections until it listens again. So the watch ends at the crash
    // (not at the restart), the read of 20 s fails at once (not at 75 s, with every
    // other failure), and so does every read until the restart; then they succeed.
    let (log, ended) = reads_across_a_crash(true, (15, 75), 130);
    let ended = ended.expect("the watch ended");
    assert!((15_000..15_100).contains(&ended), "{ended} {log:?}");
    let (sent, done, ok) = read_at(&log, 20_000);
    assert!(!ok && done - sent < 100, "{log:?}");
    let during: Vec<_> = log
        .iter()
        .filter(|r| r.0 > 15_000 && r.0 < 75_000)
        .collect();
    assert!(during.len() >= 5, "reads go on during the outage: {log:?}");
    assert!(during.iter().all(|r| !r.2), "{log:?}");
    let (_, _, ok) = read_at(&log, 76_000);
    assert!(ok, "{log:?}");
}

#[test]
fn a_program_without_a_watch_hears_of_the_crash_too() {
    // Probe P-G2: before issue 59 the read of 20 s never completed (no watch, so no
    // reset at the restart, and a request to a crashed process vanished).
    let (log, _) = reads_across_a_crash(false, (15, 75), 130);
    let (sent, done, ok) = read_at(&log, 20_000);
    assert!(!ok && done - sent < 100, "{log:?}");
    assert!(read_at(&log, 76_000).2, "{log:?}");
}

/// A watch from a resourceVersion read before the API server's crash, opened after
/// its restart: the first thing it hears.
async fn watch_from_before_the_crash(client: kube::Client) -> String {
    use futures::StreamExt;
    use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("a".into());
    if let Err(e) = cms.create(&PostParams::default(), &cm).await {
        return format!("create: {e}");
    }
    let rv = match cms.list(&ListParams::default()).await {
        Ok(list) => list.metadata.resource_version.unwrap_or_default(),
        Err(e) => return format!("list: {e}"),
    };
    // The store moves on before the crash (a real cluster writes all the time: node
    // Leases every 10 s).
    cm.metadata.name = Some("b".into());
    if let Err(e) = cms.create(&PostParams::default(), &cm).await {
        return format!("create: {e}");
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    let params = WatchParams::default().timeout(5);
    match cms.watch(&params, &rv).await {
        Ok(events) => match events.boxed().next().await {
            Some(Ok(WatchEvent::Error(e))) => format!("{} {}", e.code, e.reason),
            Some(Ok(WatchEvent::Bookmark(_))) => "bookmark".into(),
            other => format!("{other:?}"),
        },
        Err(e) => format!("watch: {e}"),
    }
}

#[test]
fn a_watch_from_before_an_api_server_restart_is_gone() {
    // Probe P-I (D2b): the restarted server's watch caches start at the current
    // revision, so a resourceVersion older than it is too old: 410 Expired, and a
    // kube-runtime watcher relists (before, the history survived the crash).
    let got = intercept::on_own_thread(7, || {
        let got = Arc::new(Mutex::new(String::new()));
        let out = got.clone();
        let program: Program = Arc::new(move |client: kube::Client| {
            let out = out.clone();
            Box::pin(async move {
                let line = watch_from_before_the_crash(client).await;
                *out.lock().unwrap() = line.clone();
                line
            })
        });
        let mut w = KubeWorld::with_faults(
            7,
            TraceMode::Hash,
            ApiServerConfig::default(),
            Kinds::new().core::<ConfigMap>(),
            program,
            apiserver_crash((15, 45)),
        );
        w.sim.run_until(SimTime::from_secs(90));
        got.lock().unwrap().clone()
    });
    assert_eq!(got, "410 Expired");
}
