//! The fault envelope a scenario declares: what its fault generators say the world may
//! do, and how much. A user's generators are his statement of the world his controllers
//! must survive (a process paused up to 30 s, watch events up to 2 s late, a link cut
//! for up to 30 s); search's own perturbations (Sieve's crash, lost answer, 30 s watch
//! delay, the race-directed pauses) stay within it unless asked to go beyond
//! (`search --beyond-envelope`), and a finding beyond it is labelled as such in
//! search's report, the failure file and explain (docs/search.md, "The fault
//! envelope").
//!
//! The envelope bounds *what* and *how much*, not *when*: a generator's `at_ms` window
//! says where random seeds place its faults, while search places them at the run's
//! decision points. A fault is within when some generator could draw it (its kind, its
//! target, at most the generator's largest magnitude and duration: a milder fault of a
//! declared kind is within) or when the world does it with no fault at all:
//! - a controller's extra reconcile (a resync) is always within: controllers are
//!   level-triggered and reconcile at any time (controller-runtime's `SyncPeriod`,
//!   requeues, informer resyncs; kube-runtime's `reconcile_all_on`), so a reconcile
//!   must hold whenever it runs;
//! - a message may take the link's whole declared latency spread (`net.latency_ms`,
//!   and for watch events the API server's `watch_delay_ms` too) on top of its least.
//!
//! A message's largest delay adds up everything that can delay it at once, since a
//! seed's plan may draw every generator together: the latency spread, a slow link and a
//! holding partition on its link (for a watch event, between its receiver's host and
//! the API server's; for a request, whose receiver an anchor does not name, between its
//! sender's host and any other), and, for watch events, a watch lag of any kind and a
//! stall of its receiver's stream. A lost message (a dropped watch event, a lost
//! answer) needs a dropping partition on that link.
//! Processes are placed on the hosts they ran on at the end of the run the envelope
//! is read from ([`Envelope::of_world`]).

use crate::build::World;
use crate::format::{FaultKind, PartitionChoice, Plan, Scenario};
use reconsim_sim::{EventClass, Fault, PartitionMode, TimedFault};
use reconsim_world::WorldFault;
use reconsim_world::fault::FailpointAction;
use std::collections::BTreeMap;

/// The API server's host (crate::build's layout): where watch events come from.
const API_HOST: &str = "api";

/// Whether a fault between hosts `a` and `b` lies on the link from `host` to `peer`
/// (to any host, when `peer` is not known).
fn links(a: &[String], b: &[String], host: &str, peer: Option<&str>) -> bool {
    let has = |side: &[String], h: &str| side.iter().any(|x| x == h);
    let other = |side: &[String]| peer.is_none_or(|p| has(side, p));
    (has(a, host) && other(b)) || (has(b, host) && other(a))
}

/// A scenario's declared fault envelope, with where its processes run.
#[derive(Clone, Debug)]
pub struct Envelope<'a> {
    scenario: &'a Scenario,
    /// Each process's host.
    host_of: BTreeMap<String, String>,
}

/// What a fault goes beyond, in words (`delay a watch event to X by 30.000s: the
/// scenario's faults delay one at most 2.109s`).
pub type Beyond = String;

impl<'a> Envelope<'a> {
    /// The envelope of `scenario`, its processes on the hosts `host_of` gives.
    pub fn new(scenario: &'a Scenario, host_of: BTreeMap<String, String>) -> Envelope<'a> {
        Envelope { scenario, host_of }
    }

    /// The envelope of `scenario`, its processes where they ran at the end of `world`'s
    /// run.
    pub fn of_world(scenario: &'a Scenario, world: &World) -> Envelope<'a> {
        let sim = &world.sim;
        let host_of = sim
            .actors()
            .map(|(p, _)| {
                (
                    sim.proc_name(p).to_string(),
                    sim.host_name(sim.proc_host(p)).to_string(),
                )
            })
            .collect();
        Envelope::new(scenario, host_of)
    }

    fn host(&self, process: &str) -> &str {
        self.host_of.get(process).map_or("", String::as_str)
    }

    fn generators(&self) -> impl Iterator<Item = (&'a FaultKind, u64)> {
        self.scenario
            .faults
            .iter()
            .map(|g| (&g.fault, g.duration_ms.hi))
    }

    /// The link's latency spread: how much later than its least a message may arrive.
    fn spread_ms(&self) -> u64 {
        let l = self.scenario.net.latency_ms;
        l.hi.saturating_sub(l.lo)
    }

    /// The most a slow link and a holding partition may add to a message between
    /// `host` and `peer` (any host, when the message's peer is not known), together.
    fn link_delay_ms(&self, host: &str, peer: Option<&str>) -> u64 {
        let covers = |a: &[String], b: &[String]| links(a, b, host, peer);
        let mut slow = 0u64;
        let mut held = 0u64;
        for (kind, duration_hi) in self.generators() {
            match kind {
                FaultKind::SlowLink {
                    hosts_a,
                    hosts_b,
                    extra_latency_ms,
                } if covers(hosts_a, hosts_b) => {
                    slow = slow.max(extra_latency_ms.hi);
                }
                FaultKind::Partition {
                    hosts_a,
                    hosts_b,
                    mode: PartitionChoice::Hold | PartitionChoice::Either,
                    ..
                } if covers(hosts_a, hosts_b) => {
                    held = held.max(duration_hi);
                }
                _ => {}
            }
        }
        slow.saturating_add(held)
    }

    /// Whether a partition that drops messages may cut `host` off from `peer` (from
    /// any host, when the message's peer is not known).
    fn may_drop(&self, host: &str, peer: Option<&str>) -> bool {
        self.generators().any(|(kind, _)| {
            matches!(kind, FaultKind::Partition {
                hosts_a,
                hosts_b,
                mode: PartitionChoice::Drop | PartitionChoice::Either,
                ..
            } if links(hosts_a, hosts_b, host, peer))
        })
    }

    /// The largest delay the envelope allows a watch event to `process`.
    pub fn event_delay_max_ms(&self, process: &str) -> u64 {
        let watch_spread = self
            .scenario
            .apiserver
            .watch_delay_ms
            .map(|r| (r.lo, r.hi))
            .unwrap_or({
                let d = reconsim_world::apiserver::DEFAULT_WATCH_DELAY_MS;
                (d.lo_ms, d.hi_ms)
            });
        let mut lag = 0u64;
        let mut stall = 0u64;
        for (kind, _) in self.generators() {
            match kind {
                FaultKind::WatchLag { lag_ms, .. } => lag = lag.max(lag_ms.hi),
                FaultKind::WatchStall { processes, lag_ms }
                    if processes.iter().any(|p| p == process) =>
                {
                    stall = stall.max(lag_ms.hi)
                }
                _ => {}
            }
        }
        self.spread_ms()
            .saturating_add(watch_spread.1.saturating_sub(watch_spread.0))
            .saturating_add(lag)
            .saturating_add(stall)
            .saturating_add(self.link_delay_ms(self.host(process), Some(API_HOST)))
    }

    /// The largest delay the envelope allows a request of `process` (or its answer), to
    /// whichever receiver.
    pub fn request_delay_max_ms(&self, process: &str) -> u64 {
        self.spread_ms()
            .saturating_add(self.link_delay_ms(self.host(process), None))
    }

    /// The longest pause the envelope allows `process` (0: none).
    pub fn pause_max_ms(&self, process: &str) -> u64 {
        let host = self.host(process);
        self.generators()
            .filter(|(kind, _)| match kind {
                FaultKind::Pause { processes } => processes.iter().any(|p| p == process),
                FaultKind::PauseHost { hosts } => hosts.iter().any(|h| h == host),
                _ => false,
            })
            .map(|(_, d)| d)
            .max()
            .unwrap_or(0)
    }

    /// The longest a crash of `process` may keep it down, if it may crash at all.
    pub fn crash_max_ms(&self, process: &str) -> Option<u64> {
        self.scenario
            .faults
            .iter()
            .filter_map(|g| match &g.fault {
                FaultKind::Crash { processes } if processes.iter().any(|p| p == process) => {
                    Some(g.duration_ms.hi)
                }
                FaultKind::Failpoint {
                    processes,
                    action: crate::format::FailpointChoice::Crash,
                    for_ms,
                    ..
                } if processes.iter().any(|p| p == process) => Some(for_ms.hi),
                _ => None,
            })
            .max()
    }

    /// `None` when `fault` is within the envelope; else what it goes beyond, in words.
    pub fn beyond(&self, fault: &TimedFault<WorldFault>) -> Option<Beyond> {
        let duration = fault.duration_ms.unwrap_or(u64::MAX);
        let secs = |ms: u64| format!("{}", reconsim_sim::SimTime(ms));
        let longer = |what: &str, max: u64| {
            (duration > max).then(|| {
                if fault.duration_ms.is_none() {
                    format!(
                        "{what} for the rest of the run: the scenario's faults last at most {}",
                        secs(max)
                    )
                } else {
                    format!(
                        "{what} for {}: the scenario's faults do it for at most {}",
                        secs(duration),
                        secs(max)
                    )
                }
            })
        };
        let none = |what: &str| Some(format!("{what}: no fault of the scenario does that"));
        // The fault's process, for faults anchored to a message.
        let anchored = fault.on.as_ref();
        match &fault.fault {
            Fault::Inject {
                fault: WorldFault::Resync,
                ..
            } => None,
            Fault::Crash { process } => {
                let what = format!("crash {process}");
                match self.crash_max_ms(process) {
                    None => none(&what),
                    Some(max) => longer(&what, max),
                }
            }
            Fault::Pause { process } => {
                let what = format!("pause {process}");
                match self.pause_max_ms(process) {
                    0 => none(&what),
                    max => longer(&what, max),
                }
            }
            Fault::DelayMessage { extra_ms } => {
                let (what, max) = match anchored {
                    Some(a) if a.event == EventClass::WatchEvent => (
                        format!("a watch event to {}", a.process),
                        self.event_delay_max_ms(&a.process),
                    ),
                    Some(a) => (
                        format!("a message of {}", a.process),
                        self.request_delay_max_ms(&a.process),
                    ),
                    None => ("a message".to_string(), 0),
                };
                (*extra_ms > max).then(|| {
                    format!(
                        "delay {what} by {}: the scenario's latencies and faults delay one at most {}",
                        secs(*extra_ms),
                        secs(max)
                    )
                })
            }
            Fault::DropMessage | Fault::LoseAnswer => {
                let process = anchored.map_or("", |a| a.process.as_str());
                // A watch event comes from the API server; a request's receiver is not
                // in the anchor.
                let peer = anchored
                    .filter(|a| a.event == EventClass::WatchEvent)
                    .map(|_| API_HOST);
                let what = match (&fault.fault, anchored) {
                    (Fault::LoseAnswer, _) => format!("lose the answer to {process}"),
                    (_, Some(a)) if a.event == EventClass::WatchEvent => {
                        format!("drop a watch event to {process}")
                    }
                    _ => format!("drop a message of {process}"),
                };
                if self.may_drop(self.host(process), peer) {
                    None
                } else {
                    Some(format!(
                        "{what}: no partition of the scenario's drops messages of {}",
                        if self.host(process).is_empty() {
                            "its host".to_string()
                        } else {
                            format!("host {}", self.host(process))
                        }
                    ))
                }
            }
            other => self.declared(other, duration),
        }
    }

    /// A fault only a generator draws: within if one of the same kind could draw it.
    fn declared(&self, fault: &Fault<WorldFault>, duration: u64) -> Option<Beyond> {
        let subset = |xs: &[String], of: &[String]| xs.iter().all(|x| of.contains(x));
        let fits = self.scenario.faults.iter().any(|g| {
            let within = |magnitude: u64, hi: u64| magnitude <= hi && duration <= g.duration_ms.hi;
            match (&g.fault, fault) {
                (
                    FaultKind::Partition {
                        hosts_a,
                        hosts_b,
                        mode,
                        one_way,
                    },
                    Fault::Partition {
                        hosts_a: a,
                        hosts_b: b,
                        mode: m,
                        one_way: o,
                    },
                ) => {
                    let mode_ok = matches!(
                        (mode, m),
                        (PartitionChoice::Either, _)
                            | (PartitionChoice::Drop, PartitionMode::Drop)
                            | (PartitionChoice::Hold, PartitionMode::Hold)
                    );
                    subset(a, hosts_a)
                        && subset(b, hosts_b)
                        && mode_ok
                        && (*o || !*one_way)
                        && within(0, 0)
                }
                (
                    FaultKind::SlowLink {
                        hosts_a,
                        hosts_b,
                        extra_latency_ms,
                    },
                    Fault::SlowLink {
                        hosts_a: a,
                        hosts_b: b,
                        extra_latency_ms: e,
                        ..
                    },
                ) => subset(a, hosts_a) && subset(b, hosts_b) && within(*e, extra_latency_ms.hi),
                (FaultKind::PauseHost { hosts }, Fault::PauseHost { host }) => {
                    hosts.contains(host) && within(0, 0)
                }
                (
                    FaultKind::KubeletStop { nodes },
                    Fault::Inject {
                        process,
                        fault: WorldFault::KubeletStop,
                    },
                ) => {
                    nodes
                        .iter()
                        .any(|n| process.strip_prefix("kubelet/") == Some(n.as_str()))
                        && within(0, 0)
                }
                (
                    FaultKind::Operation {
                        operations, space, ..
                    },
                    Fault::Inject {
                        process,
                        fault: WorldFault::Operation(op),
                    },
                ) => process == crate::faults::USER && space.admits(operations, op) && within(0, 0),
                (
                    FaultKind::CloudDescribeLag { lag_ms },
                    Fault::Inject {
                        fault: WorldFault::CloudDescribeLag { lag_ms: l },
                        ..
                    },
                ) => within(*l, lag_ms.hi),
                (
                    FaultKind::NodeJoinDelay { extra_ms },
                    Fault::Inject {
                        fault: WorldFault::NodeJoinDelay { extra_ms: e },
                        ..
                    },
                ) => within(*e, extra_ms.hi),
                (
                    FaultKind::TerminateInstance { launch, tag },
                    Fault::Inject {
                        fault: WorldFault::TerminateInstance { launch: l, tag: t },
                        ..
                    },
                ) => {
                    let launch_ok = match (launch, l) {
                        (None, None) => true,
                        (Some(r), Some(n)) => r.lo <= *n && *n <= r.hi,
                        _ => false,
                    };
                    launch_ok && tag == t && within(0, 0)
                }
                (
                    FaultKind::WatchLag { lag_ms, kinds },
                    Fault::Inject {
                        fault: WorldFault::WatchLag { lag_ms: l, of_kind },
                        ..
                    },
                ) => {
                    let kind_ok =
                        kinds.is_empty() || of_kind.as_ref().is_some_and(|k| kinds.contains(k));
                    kind_ok && within(*l, lag_ms.hi)
                }
                (
                    FaultKind::WatchStall { processes, lag_ms },
                    Fault::Inject {
                        process,
                        fault: WorldFault::WatchStall { lag_ms: l },
                    },
                ) => processes.contains(process) && within(*l, lag_ms.hi),
                (
                    FaultKind::Failpoint {
                        processes,
                        name,
                        hit,
                        action,
                        for_ms,
                    },
                    Fault::Inject {
                        process,
                        fault:
                            WorldFault::Failpoint {
                                name: n,
                                hit: h,
                                action: a,
                            },
                    },
                ) => {
                    // Armed for its window: its duration is the window's, not a magnitude.
                    let action_ok = match (action, a) {
                        (
                            crate::format::FailpointChoice::Crash,
                            FailpointAction::Crash { restart_after_ms },
                        ) => *restart_after_ms <= for_ms.hi,
                        (crate::format::FailpointChoice::Stall, FailpointAction::Stall { ms }) => {
                            *ms <= for_ms.hi
                        }
                        (crate::format::FailpointChoice::Error, FailpointAction::Error) => true,
                        _ => false,
                    };
                    processes.contains(process)
                        && name == n
                        && hit.lo <= u64::from(*h)
                        && u64::from(*h) <= hit.hi
                        && action_ok
                }
                _ => false,
            }
        });
        if fits {
            None
        } else {
            // Its kind, its target, its magnitude or its length: any of them may be
            // what no generator matches.
            let lasting = if duration == u64::MAX {
                "for the rest of the run".to_string()
            } else {
                format!("for {}", reconsim_sim::SimTime(duration))
            };
            Some(format!(
                "{} {lasting}: no fault the scenario declares does that, that much, that long",
                crate::timeline::fault_words(fault)
            ))
        }
    }

    /// What each fault of `plan` beyond the envelope goes beyond, in plan order.
    pub fn beyond_plan(&self, plan: &Plan) -> Vec<Beyond> {
        plan.faults.iter().filter_map(|f| self.beyond(f)).collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use reconsim_sim::{Anchor, Position};

    /// A scenario of one node `m` with the fault generators `faults` (a JSON list).
    pub(crate) fn scenario(faults: &str) -> Scenario {
        let text = format!(
            r#"{{"name": "x", "expect": "clean", "seeds": 1, "duration_ms": 600000,
                "net": {{"latency_ms": [1, 10]}},
                "topology": {{"control_plane_nodes": ["m", "n"]}},
                "controllers": {{"custom": [{{"name": "idle", "node": "m"}}]}},
                "faults": {faults}, "invariants": ["always"]}}"#
        );
        Scenario::parse("x.json", &text, &crate::extension::tests::ext()).unwrap()
    }

    fn on(process: &str, event: EventClass, fault: Fault<WorldFault>) -> TimedFault<WorldFault> {
        TimedFault::on(
            Anchor {
                process: process.into(),
                event,
                nth: 1,
                position: Position::After,
            },
            None,
            fault,
        )
    }

    fn hosts() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("idle-0".to_string(), "m".to_string()),
            ("other".to_string(), "n".to_string()),
        ])
    }

    #[test]
    fn a_watch_event_may_be_as_late_as_every_declared_delay_together() {
        let s = scenario(
            r#"[{"count": [1, 1], "at_ms": [0, 1000], "duration_ms": [1000, 30000],
                 "fault": {"slow_link": {"hosts_a": ["m"], "hosts_b": ["api"], "extra_latency_ms": [50, 3000]}}},
                {"count": [1, 1], "at_ms": [0, 1000], "duration_ms": [1000, 5000],
                 "fault": {"watch_lag": {"lag_ms": [50, 2000]}}}]"#,
        );
        let e = Envelope::new(&s, hosts());
        // The link's spread (9 ms), the watch cache's default spread (19 ms), the lag,
        // the slow link: 5.028 s for a process on m; 2.028 s on n.
        assert_eq!(e.event_delay_max_ms("idle-0"), 9 + 19 + 2000 + 3000);
        assert_eq!(e.event_delay_max_ms("other"), 9 + 19 + 2000);
        let late = |ms| {
            on(
                "other",
                EventClass::WatchEvent,
                Fault::DelayMessage { extra_ms: ms },
            )
        };
        assert_eq!(e.beyond(&late(2028)), None);
        let why = e.beyond(&late(30_000)).unwrap();
        assert_eq!(
            why,
            "delay a watch event to other by 30.000s: the scenario's latencies and faults delay one at most 2.028s"
        );
        // A request's delay: the spread and the link's.
        assert_eq!(e.request_delay_max_ms("idle-0"), 9 + 3000);
        assert_eq!(e.request_delay_max_ms("other"), 9);
    }

    #[test]
    fn a_resync_is_always_within_and_a_crash_or_pause_needs_a_generator() {
        let s = scenario(
            r#"[{"count": [1, 1], "at_ms": [0, 1000], "duration_ms": [100, 5000],
                 "fault": {"pause": {"processes": ["idle-0"]}}}]"#,
        );
        let e = Envelope::new(&s, hosts());
        let resync = TimedFault::at(
            0,
            None,
            Fault::Inject {
                process: "idle-0".into(),
                fault: WorldFault::Resync,
            },
        );
        assert_eq!(e.beyond(&resync), None);
        let pause = |p: &str, ms| TimedFault::at(0, Some(ms), Fault::Pause { process: p.into() });
        assert_eq!(e.beyond(&pause("idle-0", 5000)), None);
        assert!(
            e.beyond(&pause("idle-0", 5001))
                .unwrap()
                .contains("at most 5.000s")
        );
        assert!(
            e.beyond(&pause("other", 10))
                .unwrap()
                .contains("no fault of the scenario")
        );
        let crash = TimedFault::at(
            0,
            Some(1000),
            Fault::Crash {
                process: "idle-0".into(),
            },
        );
        assert_eq!(
            e.beyond(&crash).unwrap(),
            "crash idle-0: no fault of the scenario does that"
        );
        // A kind no generator draws, or one drawn longer than declared.
        let freeze = |ms| TimedFault::at(0, Some(ms), Fault::PauseHost { host: "m".into() });
        let why = e.beyond(&freeze(2000)).unwrap();
        assert!(
            why.ends_with(
                "for 2.000s: no fault the scenario declares does that, that much, that long"
            ),
            "{why}"
        );
        // A lost answer needs a partition that drops.
        let lost = on("idle-0", EventClass::Write, Fault::LoseAnswer);
        assert!(
            e.beyond(&lost)
                .unwrap()
                .starts_with("lose the answer to idle-0")
        );
    }

    #[test]
    fn a_dropping_partition_may_lose_an_answer_and_a_holding_one_delays_for_its_length() {
        let s = scenario(
            r#"[{"count": [1, 1], "at_ms": [0, 1000], "duration_ms": [1000, 30000],
                 "fault": {"partition": {"hosts_a": ["n"], "hosts_b": ["api"], "mode": "either"}}}]"#,
        );
        let e = Envelope::new(&s, hosts());
        assert_eq!(
            e.beyond(&on("other", EventClass::Write, Fault::LoseAnswer)),
            None
        );
        assert_eq!(
            e.beyond(&on("other", EventClass::WatchEvent, Fault::DropMessage)),
            None
        );
        assert!(
            e.beyond(&on("idle-0", EventClass::Write, Fault::LoseAnswer))
                .is_some()
        );
        assert_eq!(e.request_delay_max_ms("other"), 9 + 30_000);
        // A partition of n from the cloud alone neither delays nor drops a watch event.
        let cloud = scenario(
            r#"[{"count": [1, 1], "at_ms": [0, 1000], "duration_ms": [1000, 30000],
                 "fault": {"partition": {"hosts_a": ["n"], "hosts_b": ["cloud"], "mode": "either"}}}]"#,
        );
        let c = Envelope::new(&cloud, hosts());
        assert!(
            c.beyond(&on("other", EventClass::WatchEvent, Fault::DropMessage))
                .is_some()
        );
        assert_eq!(c.event_delay_max_ms("other"), 9 + 19);
        assert_eq!(
            c.beyond(&on("other", EventClass::Call, Fault::LoseAnswer)),
            None
        );
        // The generator's own faults, however drawn, are within.
        let mut rng = reconsim_sim::Streams::new(3).stream("t");
        for _ in 0..20 {
            let f = crate::faults::fault_of(&s.faults[0].fault, &mut rng);
            let d = crate::faults::Choose::draw(&mut rng, s.faults[0].duration_ms);
            assert_eq!(e.beyond(&TimedFault::at(5, Some(d), f)), None);
        }
    }
}
