//! Bounded exhaustive search over the order of requests (stateright's and Kamera's
//! exploration, on a simulated cluster).
//!
//! A choice point of a run is a pair of requests (writes, reads, calls, renewals) from
//! two different senders, one of them a controller, to the same receiver, sent so
//! close together (within twice the longest link latency) that either could have
//! arrived first. Its swap is the first held back until the second has landed (an
//! anchored `delay_message`). Depth 1 runs every swap of the reference run; depth k
//! every swap of the runs of depth k - 1, found in that run (its own timings), so the
//! plans are the bounded tree of request orderings, breadth first.
//!
//! State hashing: a run whose order of decisions (every decision's process, class and
//! message, in order, times aside) is one seen before is the same interleaving
//! reached another way, so its swaps are not explored again. Levels are read in plan
//! order and each runs across `--jobs`, so the result is the same for any `--jobs`.
//! `max_plans` bounds the whole tree.

use super::plans::{Cast, label_words};
use super::{Candidate, SearchConfig, SearchReport, SeedReport, full_plan, judged, record};
use crate::envelope::Envelope;
use crate::format::{Plan, Scenario};
use crate::jobs::run_ordered;
use crate::runner::{Outcome, run_world_recording};
use reconsim_sim::{Anchor, DecisionPoint, EventClass, Fault, Position, TimedFault, TraceMode};
use std::collections::BTreeSet;

/// At most this many swaps from one run (the earliest): a bound on memory, far above
/// what a shipped scenario's run yields (a few hundred). The swaps past it are counted
/// ([`super::SeedReport::swaps_over_cap`]) and reported.
pub const SWAPS_PER_RUN_MAX: usize = 4096;

/// The order of a run's decisions, times aside: two runs with the same key took the
/// same steps in the same order.
pub fn interleaving(decisions: &[DecisionPoint]) -> u64 {
    let mut h = reconsim_sim::StableHasher::new();
    for d in decisions {
        std::hash::Hash::hash(&(d.process.as_str(), d.event, d.label.as_str()), &mut h);
    }
    std::hash::Hasher::finish(&h)
}

fn requests(class: EventClass) -> bool {
    matches!(
        class,
        EventClass::Write | EventClass::Read | EventClass::Call | EventClass::Renewal
    )
}

/// The swaps of a run whose plan is `parent`: each choice point's first request held
/// back, added to the parent's faults. Within the scenario's fault envelope, as long as
/// the envelope lets its sender's messages take
/// ([`Envelope::request_delay_max_ms`]), for requests less than that apart: the orders
/// the declared latencies allow (a run where the other still lands first repeats an
/// interleaving already seen, and is not explored again). With `beyond_ms`
/// (`--beyond-envelope`), by the gap and `beyond_ms` more, so that it surely lands
/// after the other, past the declared latency; each such swap says so. Only the choice
/// points from decision `from` on: the parent's own swap was the last before it, so
/// each set of swaps is reached in one order only (as partial-order reduction keeps
/// one order of independent steps). With them, how many more there were past
/// [`SWAPS_PER_RUN_MAX`].
pub fn swaps(
    parent: &Candidate,
    decisions: &[DecisionPoint],
    from: usize,
    controllers: &BTreeSet<String>,
    envelope: &Envelope,
    beyond_ms: Option<u64>,
) -> (Vec<Candidate>, usize) {
    let mut out = Vec::new();
    let mut over = 0;
    for (i, a) in decisions.iter().enumerate().skip(from) {
        if !requests(a.event) {
            continue;
        }
        // How far apart the other request may be, and how far this one is held back.
        let (reach_ms, held_ms) = match beyond_ms {
            Some(w) => (w, None),
            None => {
                let max = envelope.request_delay_max_ms(&a.process);
                if max == 0 {
                    continue;
                }
                (max - 1, Some(max))
            }
        };
        for b in decisions[i + 1..]
            .iter()
            .take_while(|b| b.time_ms <= a.time_ms + reach_ms)
        {
            let controller = controllers.contains(&a.process) || controllers.contains(&b.process);
            if !requests(b.event) || b.peer != a.peer || b.process == a.process || !controller {
                continue;
            }
            if out.len() >= SWAPS_PER_RUN_MAX {
                over += 1;
                continue;
            }
            let gap_ms = b.time_ms - a.time_ms;
            let swap = TimedFault::on(
                Anchor {
                    process: a.process.clone(),
                    event: a.event,
                    nth: a.nth,
                    position: Position::After,
                },
                None,
                Fault::DelayMessage {
                    extra_ms: held_ms.unwrap_or(gap_ms + reach_ms),
                },
            );
            let mut beyond_envelope = parent.beyond_envelope.clone();
            beyond_envelope.extend(envelope.beyond(&swap));
            let mut faults = parent.faults.faults.clone();
            faults.push(swap);
            let words = format!(
                "{} of {} after {} of {} (at {} ms, {gap_ms} ms apart)",
                label_words(&a.label),
                a.process,
                label_words(&b.label),
                b.process,
                a.time_ms
            );
            let mut kinds = parent.kinds.clone();
            kinds.push("swap".into());
            out.push(Candidate {
                kinds,
                description: if parent.description.is_empty() {
                    format!("swap: {words}")
                } else {
                    format!("{} + swap: {words}", parent.description)
                },
                beyond_envelope,
                faults: Plan::new(faults),
            });
        }
    }
    (out, over)
}

/// Explore request orderings from one reference run, `depth` swaps deep at most.
#[allow(clippy::too_many_arguments)]
pub(super) fn explore(
    scenario: &Scenario,
    config: &SearchConfig,
    depth: usize,
    seed: u64,
    base: &Plan,
    reference: &crate::build::World,
    reference_state: Option<&crate::oracle::EndState>,
    on_failure: &(dyn Fn(u64, usize, &Candidate, &Outcome, &Plan) + Sync),
    report: &mut SearchReport,
    one: &mut SeedReport,
) {
    let controllers = Cast::of(reference).controllers;
    let envelope = Envelope::of_world(scenario, reference);
    // Beyond the envelope: two requests sent this close may arrive either way round
    // (each link's latency is drawn per message); the first held back by the gap and
    // this much more lands after the second.
    let beyond_ms = config.beyond_envelope.then(|| {
        scenario
            .net
            .latency_ms
            .hi
            .saturating_mul(2)
            .saturating_add(1)
    });
    let root = Candidate {
        kinds: Vec::new(),
        description: String::new(),
        faults: Plan::default(),
        beyond_envelope: Vec::new(),
    };
    let mut seen = BTreeSet::from([interleaving(reference.sim.decisions())]);
    let (mut level, over) = swaps(
        &root,
        reference.sim.decisions(),
        0,
        &controllers,
        &envelope,
        beyond_ms,
    );
    one.generated = level.len();
    one.swaps_over_cap = over;
    let mut index = 0usize;
    for d in 1..=depth {
        if level.is_empty() {
            break;
        }
        if index >= config.max_plans {
            // The budget is spent: this level's swaps are generated, not run.
            one.left_out += level.len();
            break;
        }
        one.left_out += level.len().saturating_sub(config.max_plans - index);
        level.truncate(config.max_plans - index);
        one.depth = d;
        let deeper = d < depth;
        let task = |i: usize| {
            let plan = full_plan(base, &level[i]);
            let (outcome, world) =
                run_world_recording(scenario, seed, plan.clone(), TraceMode::Hash, true);
            let key = interleaving(world.sim.decisions());
            let children = if deeper {
                // After the decision the last swap held back, in this run's numbering.
                let last = level[i].faults.faults.last().and_then(|f| f.on.as_ref());
                let from = last.map_or(0, |a| {
                    world
                        .sim
                        .decisions()
                        .iter()
                        .position(|d| {
                            d.process == a.process && d.event == a.event && d.nth == a.nth
                        })
                        .map_or(usize::MAX, |j| j + 1)
                });
                swaps(
                    &level[i],
                    world.sim.decisions(),
                    from,
                    &controllers,
                    &envelope,
                    beyond_ms,
                )
            } else {
                (Vec::new(), 0)
            };
            drop(world);
            let outcome = judged(scenario, seed, &plan, outcome, reference_state);
            let fails = outcome.violation.is_some();
            if fails {
                on_failure(seed, index + i, &level[i], &outcome, &plan);
            }
            ((outcome, key, children), fails)
        };
        let results = run_ordered(
            level.len(),
            config.jobs,
            config.stop_on_first,
            &|| true,
            &task,
        );
        let mut next = Vec::new();
        for (i, (o, key, (children, over))) in results {
            if record(report, one, index + i, &level[i], &o) && config.stop_on_first {
                return;
            }
            if seen.insert(key) {
                one.generated += children.len();
                one.swaps_over_cap += over;
                next.extend(children);
            } else {
                // The same interleaving, reached another way: explored already.
                one.repeats += 1;
            }
        }
        index += level.len();
        level = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(time_ms: u64, process: &str, peer: &str, event: EventClass, nth: u32) -> DecisionPoint {
        DecisionPoint {
            time_ms,
            process: process.into(),
            peer: peer.into(),
            event,
            nth,
            label: format!("{event:?} {nth}"),
            subject: None,
            after_answer_of: None,
        }
    }

    #[test]
    fn a_swap_is_two_close_requests_of_different_senders_to_one_receiver() {
        let decisions = [
            d(100, "kcp", "api", EventClass::Write, 1),
            // Another sender, the same receiver, 3 ms later: a choice point.
            d(103, "kubelet", "api", EventClass::Renewal, 1),
            // Another receiver: none.
            d(104, "machine", "cloud", EventClass::Call, 1),
            // Too far from the first (window 21 ms), close to nothing else of another
            // sender but kcp's own next request: none.
            d(130, "kcp", "api", EventClass::Read, 1),
            // Watch events are not requests.
            d(131, "kcp", "api", EventClass::WatchEvent, 1),
            // Two processes that are no controllers: none.
            d(200, "kubelet", "api", EventClass::Renewal, 2),
            d(201, "etcd", "api", EventClass::Write, 1),
        ];
        let controllers = BTreeSet::from(["kcp".to_string(), "machine".to_string()]);
        let root = Candidate {
            kinds: vec![],
            description: String::new(),
            faults: Plan::default(),
            beyond_envelope: vec![],
        };
        let scenario = crate::envelope::tests::scenario("[]");
        let envelope = Envelope::new(&scenario, Default::default());
        let (out, over) = swaps(&root, &decisions, 0, &controllers, &envelope, Some(21));
        assert_eq!((out.len(), over), (1, 0), "{out:#?}");
        let f = &out[0].faults.faults[0];
        let a = f.on.as_ref().unwrap();
        assert_eq!(
            (a.process.as_str(), a.event, a.nth),
            ("kcp", EventClass::Write, 1)
        );
        // Held back by the gap and the window: it lands after the other.
        assert_eq!(f.fault, Fault::DelayMessage { extra_ms: 3 + 21 });
        // From a later decision on (a child of a swap there), none.
        assert!(
            swaps(&root, &decisions, 1, &controllers, &envelope, Some(21))
                .0
                .is_empty()
        );
        // A child carries its parent's swap first.
        let (child, _) = swaps(&out[0], &decisions, 0, &controllers, &envelope, Some(21));
        assert_eq!(child[0].faults.faults.len(), 2);
        assert_eq!(child[0].kinds, ["swap", "swap"]);
    }

    #[test]
    fn swaps_past_the_cap_of_one_run_are_counted_not_dropped_silently() {
        // 150 requests at one instant from two controllers, taking turns: every pair of
        // the two senders is a swap, 75 * 75 = 5,625 of them.
        let decisions: Vec<DecisionPoint> = (0..150)
            .map(|i| {
                let who = if i % 2 == 0 { "kcp" } else { "machine" };
                d(100, who, "api", EventClass::Write, i / 2 + 1)
            })
            .collect();
        let controllers = BTreeSet::from(["kcp".to_string(), "machine".to_string()]);
        let root = Candidate {
            kinds: vec![],
            description: String::new(),
            faults: Plan::default(),
            beyond_envelope: vec![],
        };
        let scenario = crate::envelope::tests::scenario("[]");
        let envelope = Envelope::new(&scenario, Default::default());
        let (out, over) = swaps(&root, &decisions, 0, &controllers, &envelope, Some(21));
        assert_eq!(out.len(), SWAPS_PER_RUN_MAX);
        assert_eq!(over, 75 * 75 - SWAPS_PER_RUN_MAX);
    }
}
