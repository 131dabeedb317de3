//! Leader election against the simulated API server: client-go semantics
//! (docs/semantics.md section 1) observed at every event of a run.

use reconsim_sim::{
    Fault, FaultPlan, PartitionMode, ProcId, ProcState, RecordKind, Sim, SimConfig, SimTime,
    TimedFault, TraceMode,
};
use reconsim_world::Msg;
use reconsim_world::api::{ApiOp, ApiRequest};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::leader::{Candidate, LeaderConfig, OnLost};
use reconsim_world::object::{Body, Lease};
use reconsim_world::{Object, ObjectMeta, Proc, WorldFault};

const NS: &str = "kube-system";
const LOCK: &str = "test-lock";
const HOUR_MS: i64 = 3_600_000;

type Plan = FaultPlan<WorldFault>;

fn defaults() -> LeaderConfig {
    LeaderConfig::client_go_defaults(NS, LOCK)
}

struct World {
    sim: Sim<Proc>,
    api: ProcId,
    cands: Vec<ProcId>,
}

/// An API server on host "api" and one candidate per name, each on its own host "h-<name>".
/// With `seed_holder`, the Lease already exists naming that candidate (a lease left by its
/// previous run), so that candidate leads first and the test knows who to fault.
fn world(
    seed: u64,
    faults: Vec<TimedFault<WorldFault>>,
    names: &[&str],
    config: &LeaderConfig,
    on_lost: OnLost,
    seed_holder: Option<&str>,
) -> World {
    world_with(
        SimConfig::new(seed),
        faults,
        names,
        config,
        on_lost,
        seed_holder,
    )
}

fn world_with(
    sim_config: SimConfig,
    faults: Vec<TimedFault<WorldFault>>,
    names: &[&str],
    config: &LeaderConfig,
    on_lost: OnLost,
    seed_holder: Option<&str>,
) -> World {
    let mut sim = Sim::new(sim_config, Plan::new(faults));
    let api_host = sim.add_host("api");
    let mut server = ApiServer::new(Default::default());
    if let Some(holder) = seed_holder {
        let lease = Lease {
            holder_identity: Some(holder.to_string()),
            lease_duration_seconds: (config.lease_duration_ms / 1000) as u32,
            acquire_time: Some(SimTime::ZERO),
            renew_time: Some(SimTime::ZERO),
            lease_transitions: 0,
            ..Default::default()
        };
        server.seed_object(Object::new(ObjectMeta::named(NS, LOCK), Body::new(lease)));
    }
    let api = sim.spawn(api_host, "apiserver", Proc::new(server));
    let cands = names
        .iter()
        .map(|n| {
            let h = sim.add_host(&format!("h-{n}"));
            let c = Candidate::new(config.clone(), n.to_string(), api).with_on_lost(on_lost);
            sim.spawn(h, n, Proc::new(c))
        })
        .collect();
    World { sim, api, cands }
}

fn cand(sim: &Sim<Proc>, p: ProcId) -> &Candidate {
    let other = sim.actor(p);
    other
        .component::<Candidate>()
        .unwrap_or_else(|| panic!("not a candidate: {other:?}"))
}

/// The stored Lease, as the API server holds it.
fn lease(w: &World) -> Option<Lease> {
    let Some(a) = w.sim.actor(w.api).component::<ApiServer>() else {
        panic!("not the API server")
    };
    a.get(&defaults().lease_key())
        .and_then(|o| o.typed::<Lease>().cloned())
}

/// Indices of the candidates that believe they lead.
fn believers(w: &World) -> Vec<usize> {
    (0..w.cands.len())
        .filter(|&i| cand(&w.sim, w.cands[i]).is_leader())
        .collect()
}

fn timed(at_ms: u64, duration_ms: Option<u64>, fault: Fault<WorldFault>) -> TimedFault<WorldFault> {
    TimedFault {
        at_ms,
        duration_ms,
        fault,
        on: None,
    }
}

fn pause(name: &str) -> Fault<WorldFault> {
    Fault::Pause {
        process: name.to_string(),
    }
}

fn skew(name: &str, offset_ms: i64) -> Fault<WorldFault> {
    Fault::ClockSkew {
        process: name.to_string(),
        offset_ms,
    }
}

fn cut(a: &str, b: &str) -> Fault<WorldFault> {
    Fault::Partition {
        hosts_a: vec![a.to_string()],
        hosts_b: vec![b.to_string()],
        mode: PartitionMode::Drop,
        one_way: false,
    }
}

/// Run to `end`, calling `f` after every event.
fn observe(w: &mut World, end: SimTime, mut f: impl FnMut(&World)) {
    while w.sim.step_until(end).is_some() {
        f(w);
    }
}

/// The first instant (true time) at which candidate `i` believes it leads.
fn first_lead(w: &mut World, i: usize, end: SimTime) -> Option<SimTime> {
    let mut at = None;
    observe(w, end, |w| {
        if at.is_none() && cand(&w.sim, w.cands[i]).is_leader() {
            at = Some(w.sim.now());
        }
    });
    at
}

#[test]
fn exactly_one_leader_among_three_in_normal_running() {
    for seed in 0..8 {
        let mut w = world(
            seed,
            vec![],
            &["c0", "c1", "c2"],
            &defaults(),
            OnLost::Exit,
            None,
        );
        let mut first: Option<(SimTime, usize)> = None;
        let mut steps = 0u64;
        observe(&mut w, SimTime::from_secs(1800), |w| {
            let b = believers(w);
            assert!(
                b.len() <= 1,
                "seed {seed}: {b:?} all lead at {}",
                w.sim.now()
            );
            match (first, b.as_slice()) {
                (None, [i]) => first = Some((w.sim.now(), *i)),
                (Some((_, i)), bs) => {
                    assert_eq!(bs, [i], "seed {seed}: leadership moved at {}", w.sim.now());
                    let l = lease(w).expect("the lease exists");
                    assert_eq!(l.holder_identity.as_deref(), Some(["c0", "c1", "c2"][i]));
                }
                (None, _) => {}
            }
            steps += 1;
        });
        let (at, i) = first.expect("someone leads");
        assert!(
            at <= SimTime::from_secs(1),
            "seed {seed}: first leader only at {at}"
        );
        let l = lease(&w).unwrap();
        assert_eq!(
            l.lease_transitions, 0,
            "seed {seed}: no takeover without faults"
        );
        // The leader kept renewing (every retry period) to the end.
        let renewed = l.renew_time.unwrap();
        assert!(
            renewed >= SimTime::from_secs(1800 - 5),
            "seed {seed}: last renew {renewed}"
        );
        assert_eq!(cand(&w.sim, w.cands[i]).history, vec![(at, true)]);
        assert!(
            steps > 1000,
            "seed {seed}: the run was too short to mean anything"
        );
    }
}

/// The paused leader's lease is taken over during the pause, and on resume it still believes
/// it leads (two believers) until its renew window's deadline fires; then it exits.
fn paused_leader_case(config: LeaderConfig, pause_at_ms: u64, pause_ms: u64) {
    assert!(pause_ms > config.lease_duration_ms);
    let resume = SimTime::from_ms(pause_at_ms + pause_ms);
    let faults = vec![timed(pause_at_ms, Some(pause_ms), pause("c0"))];
    let mut w = world(
        1,
        faults,
        &["c0", "c1", "c2"],
        &config,
        OnLost::Exit,
        Some("c0"),
    );
    let mut takeover: Option<(SimTime, usize)> = None;
    let mut overlap_during_pause = false;
    let mut overlap_after_resume = false;
    let mut c0_last_belief: Option<SimTime> = None;
    let mut c0_renew_before_pause: Option<SimTime> = None;
    let end = resume.plus_ms(config.lease_duration_ms * 2);
    observe(&mut w, end, |w| {
        let now = w.sim.now();
        let b = believers(w);
        if now.as_ms() < pause_at_ms {
            c0_renew_before_pause = cand(&w.sim, w.cands[0]).elector().last_success();
        }
        if now.as_ms() > 2_000 && now < resume {
            // Frozen, c0 keeps believing through the whole pause.
            assert!(
                b.contains(&0),
                "c0 stopped believing while paused, at {now}"
            );
        }
        if let Some(&j) = b.iter().find(|&&j| j != 0) {
            takeover.get_or_insert((now, j));
        }
        if b.len() == 2 {
            if now < resume {
                overlap_during_pause = true;
            } else {
                overlap_after_resume = true;
            }
        }
        assert!(b.len() <= 2, "three leaders at {now}");
        if b.contains(&0) {
            c0_last_belief = Some(now);
        }
    });
    let (taken_at, j) = takeover.expect("a challenger took over during the pause");
    let last_renew = c0_renew_before_pause.expect("c0 renewed before the pause");
    assert!(taken_at < resume, "takeover only at {taken_at}");
    // Not before the lease, as last renewed, had run its full duration (observed by the
    // challenger no earlier than the renew).
    assert!(
        taken_at.as_ms() >= last_renew.as_ms() + config.lease_duration_ms,
        "took over at {taken_at}, lease renewed at {last_renew}"
    );
    assert!(overlap_during_pause, "no overlap while c0 was paused");
    assert!(
        overlap_after_resume,
        "c0 stopped believing at resume, not at its renew check"
    );
    let stopped = c0_last_belief.unwrap();
    assert!(stopped >= resume);
    assert!(
        stopped.as_ms() <= resume.as_ms() + config.renew_deadline_ms,
        "the overlap lasted until {stopped}"
    );
    let c0 = cand(&w.sim, w.cands[0]);
    assert!(!c0.is_leader());
    // The pause swallowed the wait between two renew windows: the window starts at resume and
    // its failed attempts are only retried until its deadline (not given up at the first).
    assert_eq!(
        c0.history.last(),
        Some(&(resume.plus_ms(config.renew_deadline_ms), false)),
        "c0's history: {:?}",
        c0.history
    );
    assert_eq!(w.sim.proc_state(w.cands[0]), ProcState::Stopped, "c0 exits");
    // c0 never wrote after its pause: the challenger still holds the lease.
    let l = lease(&w).unwrap();
    assert_eq!(l.holder_identity.as_deref(), Some(["c0", "c1", "c2"][j]));
    assert_eq!(l.lease_transitions, 1);
    assert_eq!(believers(&w), vec![j]);
}

#[test]
fn paused_leader_loses_the_lease_and_believes_until_its_renew_check() {
    paused_leader_case(defaults(), 30_000, 30_000);
    paused_leader_case(defaults(), 31_000, 25_000);
}

#[test]
fn paused_leader_with_long_timings() {
    // 120 s / 110 s / 20 s: the machine-api controllers' timings in OpenShift 4.6.
    let config = LeaderConfig::new(NS, LOCK, 120_000, 110_000, 20_000);
    assert_eq!(config.validate(), Ok(()));
    paused_leader_case(config, 300_000, 240_000);
}

#[test]
fn leader_cut_off_from_the_apiserver_stops_within_renew_deadline() {
    let config = defaults();
    let cut_at = 30_000;
    let faults = vec![timed(cut_at, Some(60_000), cut("h-c0", "api"))];
    let mut w = world(
        2,
        faults,
        &["c0", "c1", "c2"],
        &config,
        OnLost::Exit,
        Some("c0"),
    );
    let mut max_believers = 0;
    let mut stop_seen: Option<SimTime> = None;
    let mut takeover: Option<SimTime> = None;
    observe(&mut w, SimTime::from_secs(120), |w| {
        let b = believers(w);
        max_believers = max_believers.max(b.len());
        if stop_seen.is_none() && w.sim.now().as_ms() > 1_000 && !b.contains(&0) {
            stop_seen = Some(w.sim.now());
        }
        if takeover.is_none() && b.iter().any(|&j| j != 0) {
            takeover = Some(w.sim.now());
        }
    });
    let c0 = cand(&w.sim, w.cands[0]);
    let last_renew = c0.elector().last_success().unwrap();
    assert!(
        last_renew.as_ms() <= cut_at + 10,
        "c0 renewed at {last_renew} through the cut"
    );
    // c0's own clock (no skew) says when it gave up.
    let &(stopped, leads) = c0.history.last().unwrap();
    assert!(!leads);
    assert_eq!(Some(stopped), stop_seen);
    let held_ms = stopped.since(last_renew);
    assert!(
        held_ms >= config.renew_deadline_ms
            && held_ms <= config.renew_deadline_ms + config.retry_period_ms,
        "c0 gave up {held_ms} ms after its last renew"
    );
    assert_eq!(w.sim.proc_state(w.cands[0]), ProcState::Stopped);
    // renewDeadline < leaseDuration: c0 is gone before anyone may take over.
    let takeover = takeover.expect("a challenger took over");
    assert!(takeover > stopped);
    assert!(takeover.as_ms() >= last_renew.as_ms() + config.lease_duration_ms);
    assert_eq!(max_believers, 1, "believed leadership overlapped");
    assert_eq!(lease(&w).unwrap().lease_transitions, 1);
}

#[test]
fn lost_requests_time_out_and_the_acquire_loop_goes_on() {
    // c1's requests are dropped for 20 s; then the leader c0 freezes for good. c1 must not
    // wait forever for an answer to a dropped request.
    let faults = vec![
        timed(5_000, Some(20_000), cut("h-c1", "api")),
        timed(40_000, None, pause("c0")),
    ];
    let config = defaults();
    let mut w = world(3, faults, &["c0", "c1"], &config, OnLost::Exit, Some("c0"));
    let at = first_lead(&mut w, 1, SimTime::from_secs(120)).expect("c1 took over");
    let latest = 40_000 + config.lease_duration_ms + 3 * config.retry_period_ms * 22 / 10;
    assert!(
        at.as_ms() >= 40_000 + config.lease_duration_ms - config.retry_period_ms - 100
            && at.as_ms() <= latest,
        "c1 took over at {at}"
    );
}

#[test]
fn clock_skew_ahead_does_not_steal_a_live_lease() {
    // The challenger's clock is an hour ahead of the leader's: the leader's renewTime is an
    // hour old on it, but only changes of the record count.
    let faults = vec![
        timed(0, None, skew("c1", HOUR_MS)),
        timed(0, None, skew("c2", 2 * HOUR_MS)),
    ];
    let mut w = world(
        4,
        faults,
        &["c0", "c1", "c2"],
        &defaults(),
        OnLost::Exit,
        Some("c0"),
    );
    observe(&mut w, SimTime::from_secs(600), |w| {
        let b = believers(w);
        if w.sim.now().as_ms() > 1_000 {
            assert_eq!(b, vec![0], "at {}", w.sim.now());
        }
    });
    let l = lease(&w).unwrap();
    assert_eq!(l.holder_identity.as_deref(), Some("c0"));
    assert_eq!(l.lease_transitions, 0);
    // The renewTime is c0's clock, far behind the challengers'.
    assert!(l.renew_time.unwrap() <= SimTime::from_secs(600));
}

#[test]
fn clock_skew_behind_still_sees_a_dead_leader_expire() {
    // The leader's clock is an hour ahead of the challenger's: its renewTime lies an hour in
    // the challenger's future, yet the lease expires leaseDuration after the last change.
    let config = defaults();
    let faults = vec![
        timed(0, None, skew("c0", HOUR_MS)),
        timed(60_000, None, pause("c0")),
    ];
    let mut w = world(5, faults, &["c0", "c1"], &config, OnLost::Exit, Some("c0"));
    let at = first_lead(&mut w, 1, SimTime::from_secs(300)).expect("c1 took over");
    assert!(
        at.as_ms() >= 60_000 + config.lease_duration_ms - config.retry_period_ms - 100
            && at.as_ms() <= 60_000 + config.lease_duration_ms + 3 * config.retry_period_ms,
        "c1 took over at {at}"
    );
    let l = lease(&w).unwrap();
    assert_eq!(l.holder_identity.as_deref(), Some("c1"));
    assert!(
        l.renew_time.unwrap() < SimTime::from_secs(300),
        "c1 writes its own clock"
    );
}

/// Pauses every candidate in turn (each pause outlasts the lease), so whoever leads at the
/// time is taken over; losers rejoin 5 s after stopping.
fn rotating_pauses(seed: u64) -> World {
    let names = ["c0", "c1", "c2"];
    let faults = (0..9u64)
        .map(|k| {
            timed(
                40_000 + k * 60_000,
                Some(30_000),
                pause(names[(k % 3) as usize]),
            )
        })
        .collect();
    world(
        seed,
        faults,
        &names,
        &defaults(),
        OnLost::Rejoin { after_ms: 5_000 },
        None,
    )
}

/// Changes of the set of believed leaders, in true time.
type Beliefs = Vec<(SimTime, Vec<usize>)>;

/// Holder changes of the stored Lease (sampled after every event) and believed-leadership
/// changes, both in true time.
fn leader_sequence(w: &mut World, end: SimTime) -> (Vec<(SimTime, String)>, Beliefs) {
    let mut holders: Vec<(SimTime, String)> = Vec::new();
    let mut beliefs: Beliefs = Vec::new();
    observe(w, end, |w| {
        if let Some(h) = lease(w).and_then(|l| l.holder_identity)
            && holders.last().is_none_or(|(_, last)| *last != h)
        {
            holders.push((w.sim.now(), h));
        }
        let b = believers(w);
        if beliefs.last().is_none_or(|(_, last)| *last != b) {
            beliefs.push((w.sim.now(), b));
        }
    });
    (holders, beliefs)
}

#[test]
fn lease_transitions_counts_takeovers() {
    for seed in [10, 11, 12] {
        let mut w = rotating_pauses(seed);
        let mut holders: Vec<String> = Vec::new();
        observe(&mut w, SimTime::from_secs(600), |w| {
            let Some(l) = lease(w) else { return };
            let h = l.holder_identity.clone().unwrap();
            if holders.last() != Some(&h) {
                holders.push(h);
            }
            // At every instant: one transition per change of holder, none per renew.
            assert_eq!(
                l.lease_transitions as usize,
                holders.len() - 1,
                "seed {seed} at {}",
                w.sim.now()
            );
        });
        assert!(holders.len() >= 3, "seed {seed}: only {holders:?}");
        // The losers rejoined: all three are alive and one of them leads.
        for &c in &w.cands {
            assert_eq!(w.sim.proc_state(c), ProcState::Running);
        }
        assert_eq!(believers(&w).len(), 1);
    }
}

#[test]
fn same_seed_same_leader_sequence() {
    let end = SimTime::from_secs(600);
    let mut a = rotating_pauses(21);
    let mut b = rotating_pauses(21);
    let (holders_a, beliefs_a) = leader_sequence(&mut a, end);
    let (holders_b, beliefs_b) = leader_sequence(&mut b, end);
    assert!(
        holders_a.len() >= 3,
        "too few takeovers to compare: {holders_a:?}"
    );
    assert_eq!(holders_a, holders_b);
    assert_eq!(beliefs_a, beliefs_b);
    for (&ca, &cb) in a.cands.iter().zip(&b.cands) {
        assert_eq!(cand(&a.sim, ca).history, cand(&b.sim, cb).history);
    }
    assert_eq!(a.sim.trace().hash(), b.sim.trace().hash());
}

#[test]
fn a_crashed_leader_forgets_and_reacquires_its_own_lease() {
    // Crash for less than the lease: nobody may take over, and the restarted process (same
    // identity) finds its own name on the lease and renews it: no transition, acquireTime kept.
    let config = defaults();
    let faults = vec![timed(
        30_000,
        Some(5_000),
        Fault::Crash {
            process: "c0".into(),
        },
    )];
    let mut w = world(6, faults, &["c0", "c1"], &config, OnLost::Exit, Some("c0"));
    let mut acquire_times = Vec::new();
    observe(&mut w, SimTime::from_secs(120), |w| {
        let now = w.sim.now().as_ms();
        let b = believers(w);
        if (30_000..35_000).contains(&now) {
            assert!(b.is_empty(), "a crashed process believes nothing, at {now}");
        } else if (now > 1_000 && now < 30_000) || now > 36_000 {
            assert_eq!(b, vec![0], "at {now}");
        }
        if let Some(t) = lease(w).and_then(|l| l.acquire_time)
            && acquire_times.last() != Some(&t)
        {
            acquire_times.push(t);
        }
    });
    assert_eq!(acquire_times, vec![SimTime::ZERO]);
    assert_eq!(lease(&w).unwrap().lease_transitions, 0);
    assert_eq!(
        cand(&w.sim, w.cands[0]).history.len(),
        2,
        "started leading twice"
    );
}

#[test]
fn config_validation_follows_client_go() {
    assert_eq!(defaults().validate(), Ok(()));
    assert_eq!(LeaderConfig::library_go_ha(NS, LOCK).validate(), Ok(()));
    assert!(
        LeaderConfig::new(NS, LOCK, 10_000, 10_000, 2_000)
            .validate()
            .is_err()
    );
    assert!(
        LeaderConfig::new(NS, LOCK, 15_000, 2_400, 2_000)
            .validate()
            .is_err()
    );
    assert!(
        LeaderConfig::new(NS, LOCK, 15_000, 10_000, 0)
            .validate()
            .is_err()
    );
}

/// Times (true) at which process `from`'s Gets reached the API server.
fn get_times(w: &World, from: ProcId) -> Vec<u64> {
    w.sim
        .trace()
        .records()
        .iter()
        .filter_map(|r| match &r.kind {
            RecordKind::Deliver {
                from: f,
                msg:
                    Msg::Api(ApiRequest {
                        op: ApiOp::Get(_), ..
                    }),
                ..
            } if *f == from => Some(r.time.as_ms()),
            _ => None,
        })
        .collect()
}

#[test]
fn acquire_retries_are_jittered_and_renewals_periodic() {
    let config = defaults();
    let mut sim_config = SimConfig::new(8);
    sim_config.trace = TraceMode::Full;
    let mut w = world_with(
        sim_config,
        vec![],
        &["c0", "c1"],
        &config,
        OnLost::Exit,
        Some("c0"),
    );
    w.sim.run_until(SimTime::from_secs(600));
    assert_eq!(believers(&w), vec![0]);
    let retry = config.retry_period_ms;
    let gaps = |t: Vec<u64>| t.windows(2).map(|p| p[1] - p[0]).collect::<Vec<_>>();
    // The challenger: retry x (1 + rand x 1.2) after each failed attempt, plus a round trip.
    let c1 = gaps(get_times(&w, w.cands[1]));
    assert!(c1.len() > 100);
    assert!(
        c1.iter().all(|&g| g >= retry && g <= retry * 22 / 10 + 20),
        "{c1:?}"
    );
    let (lo, hi) = (*c1.iter().min().unwrap(), *c1.iter().max().unwrap());
    assert!(
        lo < retry + 300 && hi > retry * 2 - 300,
        "no spread: {lo}..{hi}"
    );
    // The leader: a window every retry period after the last success, no jitter (Get and
    // Update round trips of 2-10 ms each).
    // The first window opens right after acquiring (wait.Until runs at once).
    let c0 = gaps(get_times(&w, w.cands[0]));
    assert!(c0.len() > 250);
    assert!(c0[0] < 30, "{c0:?}");
    assert!(
        c0[1..].iter().all(|&g| g >= retry && g <= retry + 30),
        "{c0:?}"
    );
}

#[test]
fn a_get_lost_to_a_reset_is_sent_again_after_a_second() {
    // c0's first GET of the Lease goes into a dropping partition: its connection resets.
    // client-go sends a GET that failed so again after a second (docs/semantics.md
    // 4.12), so c0 acquires soon after the cut heals, not a retry period (2-4.4 s) later.
    let faults = vec![timed(0, Some(300), cut("h-c0", "api"))];
    let config = defaults();
    let mut w = world(1, faults, &["c0"], &config, OnLost::Exit, None);
    let at = first_lead(&mut w, 0, SimTime::from_secs(30)).expect("c0 leads");
    assert!(
        (1_000..1_500).contains(&at.as_ms()),
        "c0 acquired at {at}, not a second after its reset"
    );
}
