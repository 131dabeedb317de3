//! A program runs as a Deployment's container: one that returns is restarted cold by
//! its kubelet after the CrashLoopBackOff delay (10 s doubling to 300 s, reset after a
//! 10 min run; `KubeBridge`'s default, `KubeBridge::once` for a Job's run-once pod).

use reconsim_kube::{Kinds, Program, intercept};
use reconsim_sim::{FaultPlan, SimTime};
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

#[test]
fn a_program_that_returns_restarts_after_the_kubelets_backoff() {
    // A Deployment's container that exits: restarted cold after 10 s, then 20 s, 40 s.
    let starts = Arc::new(Mutex::new(Vec::new()));
    let log = starts.clone();
    let program: Program = Arc::new(move |_client: kube::Client| {
        let log = log.clone();
        Box::pin(async move {
            log.lock().unwrap().push(now_ms() / 1000);
            tokio::time::sleep(Duration::from_secs(1)).await;
            "exited".to_string()
        })
    });
    intercept::on_own_thread(3, || {
        let mut sim = reconsim_sim::Sim::new(
            reconsim_sim::SimConfig::new(3),
            FaultPlan::<reconsim_world::WorldFault>::new(Vec::new()),
        );
        let api = sim.add_host("api");
        let user = sim.add_host("user");
        let apiserver = sim.spawn(
            api,
            "apiserver",
            reconsim_world::Proc::new(reconsim_world::apiserver::ApiServer::new(
                ApiServerConfig::default(),
            )),
        );
        sim.spawn(
            user,
            "kube-program",
            reconsim_world::Proc::from(
                reconsim_kube::KubeBridge::new(apiserver, Kinds::new(), program).boxed(),
            ),
        );
        sim.run_until(SimTime::from_secs(100));
    });
    // Runs of 1 s: started at 0, then 1 + 10, 12 + 20, 33 + 40 s.
    assert_eq!(*starts.lock().unwrap(), [0, 11, 32, 73]);
}
