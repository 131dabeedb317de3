//! A program calls the simulated cloud through its handle (`Handle::current()`), with
//! the cloud's own typed client (`reconsim_cloud::Ec2`, the one reconcilers use): each
//! call a message to the cloud's process, its answer awaited in virtual time, the same
//! for the same seed; a partition that outlasts TCP's retransmissions fails the call.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use reconsim_cloud::{Cloud, CloudConfig, Ec2, InstanceState};
use reconsim_kube::{CallError, Handle, Kinds, KubeBridge, Program, intercept};
use reconsim_sim::{
    Fault, FaultPlan, PartitionMode, ProcId, Sim, SimConfig, SimTime, TimedFault, TraceMode,
};
use reconsim_world::Endpoints;
use reconsim_world::apiserver::{ApiServer, ApiServerConfig};
use reconsim_world::kubelet::Images;
use reconsim_world::proc::Proc;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Launch an instance twice with one client token, then record its id in a ConfigMap.
fn launcher() -> Program {
    Arc::new(|client| {
        let handle = Handle::current();
        let ec2 = Ec2::new(handle.clone(), handle.service("cloud").expect("given"));
        Box::pin(async move {
            let tags = BTreeMap::from([("owner".to_string(), "launcher".to_string())]);
            let token = Some("launch-1".to_string());
            let first = ec2.run_instances(tags.clone(), token.clone()).await;
            let again = ec2.run_instances(tags, token).await;
            let (Ok(Ok(first)), Ok(Ok(again))) = (first, again) else {
                return "a cloud call failed".to_string();
            };
            let id = first[0].id.clone();
            let mut cm = ConfigMap::default();
            cm.metadata.name = Some("instance".into());
            cm.data = Some(BTreeMap::from([("id".to_string(), id.clone())]));
            let cms: Api<ConfigMap> = Api::namespaced(client, "default");
            match cms.create(&PostParams::default(), &cm).await {
                Ok(_) => format!("{id} {}", again[0].id),
                Err(e) => format!("create: {e}"),
            }
        })
    })
}

/// The world: the API server, the cloud and the program, each on a host of its own.
fn world(
    seed: u64,
    program: Program,
    faults: FaultPlan<reconsim_world::fault::WorldFault>,
) -> (Sim<Proc>, ProcId, ProcId) {
    let mut config = SimConfig::new(seed);
    config.trace = TraceMode::Hash;
    let mut sim = Sim::new(config, faults);
    let api_host = sim.add_host("api");
    let cloud_host = sim.add_host("cloud");
    let user_host = sim.add_host("user");
    let apiserver = sim.spawn(
        api_host,
        "apiserver",
        Proc::new(ApiServer::new(ApiServerConfig::default())),
    );
    let endpoints = Endpoints { apiserver };
    let cloud = sim.spawn(
        cloud_host,
        "cloud",
        Proc::new(Cloud::new(
            CloudConfig::default(),
            endpoints,
            Images::default(),
        )),
    );
    let bridge = KubeBridge::new(apiserver, Kinds::new(), program)
        .service("cloud", cloud)
        .once();
    let program = sim.spawn(user_host, "launcher", Proc::from(bridge.boxed()));
    (sim, cloud, program)
}

fn results(sim: &Sim<Proc>, program: ProcId) -> Vec<String> {
    sim.actor(program)
        .component::<KubeBridge>()
        .expect("the program's process: a bridge")
        .results
        .clone()
}

fn cloud(sim: &Sim<Proc>, cloud: ProcId) -> &Cloud {
    sim.actor(cloud).component::<Cloud>().expect("the cloud")
}

#[test]
fn a_program_calls_the_cloud_through_its_handle() {
    let run = |seed| {
        intercept::on_own_thread(seed, || {
            let (mut sim, c, p) = world(seed, launcher(), FaultPlan::new(Vec::new()));
            sim.run_until(SimTime::from_secs(60));
            let instances: Vec<_> = cloud(&sim, c)
                .instances()
                .map(|i| (i.id.clone(), i.state, i.client_token.clone()))
                .collect();
            (results(&sim, p), instances, sim.trace().hash())
        })
    };
    let (results, instances, hash) = run(5);
    // One instance: the second call with the token returned the first call's.
    assert_eq!(instances.len(), 1, "{instances:?}");
    let (id, state, token) = &instances[0];
    assert_eq!(*state, InstanceState::Running);
    assert_eq!(token.as_deref(), Some("launch-1"));
    assert_eq!(results, [format!("{id} {id}")]);
    assert_eq!(run(5).2, hash, "the same seed, the same run");
}

#[test]
fn a_call_across_a_partition_that_outlasts_tcp_fails() {
    intercept::on_own_thread(1, || {
        let failed = Arc::new(std::sync::Mutex::new(None));
        let seen = failed.clone();
        let program: Program = Arc::new(move |_client| {
            let handle = Handle::current();
            let ec2 = Ec2::new(handle.clone(), handle.service("cloud").expect("given"));
            let seen = seen.clone();
            Box::pin(async move {
                let r = ec2
                    .describe_instances(Vec::new(), BTreeMap::new(), Vec::new())
                    .await;
                *seen.lock().unwrap() = Some(r.clone().err());
                format!("{r:?}")
            })
        });
        let cut = Fault::Partition {
            hosts_a: vec!["user".into()],
            hosts_b: vec!["cloud".into()],
            mode: PartitionMode::Drop,
            one_way: false,
        };
        let plan = FaultPlan::new(vec![TimedFault::at(0, Some(2_000_000), cut)]);
        let (mut sim, _, _) = world(1, program, plan);
        sim.run_until(SimTime::from_secs(1_200));
        assert_eq!(
            *failed.lock().unwrap(),
            Some(Some(CallError::ConnectionLost))
        );
    })
}

#[test]
fn outside_a_program_there_is_no_handle() {
    assert!(Handle::try_current().is_none());
}
