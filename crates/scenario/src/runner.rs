//! One run: build the world, step it, check every invariant after every event that can
//! change what they read, and check convergence once faults have healed (and, in a run
//! with user operations, after each quiet spell: [`quiet_points`]).
//!
//! Checkers read the API server's store, the cloud's ground truth and a few components'
//! own state, which only those processes change, so a step none of them handled (and no
//! fault) skips the checks, and so does an API server step that wrote nothing (a get, a
//! list, a watch) and a component's step that left its change count where it was (a
//! poll answered, a DescribeInstances served: `Component::changes`): the hot loop pays
//! for checking only when there is something new to check. Each checker is then asked
//! only if something it reads changed (`Check::reads`: its kinds' writes, its
//! components' change counts) or its grace period ran out (`Check::due`: the run wakes
//! the checkers at that instant, step or no step); a fault's step checks every checker.
//! `tests/gating.rs` holds the checkers' verdicts and hashes on shipped scenarios to
//! those of checking every checker at every such step ([`run_gated`] with `Gating::Off`).

use crate::build::{Keep, World, build_keeping};
use crate::format::{Plan, Scenario};
use reconsim_check::{Checker, Gating, View, Violation};
use reconsim_sim::{SimTime, StepKind, TraceMode};
use reconsim_world::apiserver::ApiServer;
use reconsim_world::component::UNREAD;
use serde::Serialize;

/// The result of one run.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub seed: u64,
    pub violation: Option<Violation>,
    /// Events the kernel handled.
    pub events: u64,
    /// Simulated time covered, in ms.
    pub sim_ms: u64,
    pub trace_hash: u64,
}

impl Outcome {
    pub fn trace_hash_hex(&self) -> String {
        format!("{:016x}", self.trace_hash)
    }
}

/// The invariant name of a run that hit the kernel's event budget (a livelock).
pub const EVENT_BUDGET: &str = "event_budget";
/// The invariant name of a failed convergence check.
pub const CONVERGENCE: &str = "convergence";

/// The world as checkers see it (ground truth).
pub fn view<'a>(world: &'a World) -> View<'a> {
    let Some(api) = world.sim.actor(world.apiserver).component::<ApiServer>() else {
        unreachable!("process 0 is the API server")
    };
    View {
        now: world.sim.now(),
        api,
        sim: &world.sim,
    }
}

/// The desired state of every controller family the scenario runs; `Err` says what
/// is missing.
fn converged(scenario: &Scenario, view: &View<'_>) -> Result<(), String> {
    for section in scenario.sections() {
        section.converged(view)?;
    }
    Ok(())
}

/// When convergence is judged: `within_ms` after the last user action and the last
/// fault's end; `None` if the scenario has no bound or a fault never ends. For a plan
/// with anchored faults this is a first guess: the run moves it to after their events.
pub fn convergence_deadline(scenario: &Scenario, plan: &Plan) -> Option<SimTime> {
    deadline_after(scenario, plan.last_heal_ms())
}

fn deadline_after(scenario: &Scenario, heal_ms: Option<u64>) -> Option<SimTime> {
    let c = scenario.convergence?;
    let heal = heal_ms?;
    let last_action = scenario.workload.iter().map(|a| a.at_ms).max().unwrap_or(0);
    Some(SimTime(
        heal.max(last_action)
            .saturating_add(c.within_ms)
            .min(scenario.duration_ms),
    ))
}

/// The [`CONVERGENCE`] violation at `at`, if the world has not reached its desired
/// state `within_ms` after `since` (in words).
fn unconverged(scenario: &Scenario, world: &World, at: SimTime, since: &str) -> Option<Violation> {
    let reason = converged(
        scenario,
        &View {
            now: at,
            ..view(world)
        },
    )
    .err()?;
    Some(Violation {
        invariant: CONVERGENCE.into(),
        time: at,
        message: format!(
            "not converged {} ms after {since}: {reason}",
            scenario.convergence.map_or(0, |c| c.within_ms)
        ),
        objects: vec![],
    })
}

/// For a plan with user operations, the instants besides the final deadline at which
/// the controllers owe the desired state of what they were last given (Acto's
/// consistency oracle, judged after each operation and not only the last): `within_ms`
/// after a change (a fault's or an operation's start or end, a user action) that no
/// other change follows within `within_ms` and no fault overlaps, before the final
/// deadline. Each as (the change, the instant). None for a plan without operations (its
/// convergence is judged once, as before), or with anchored faults (their times are the
/// run's).
pub fn quiet_points(scenario: &Scenario, plan: &Plan) -> Vec<(SimTime, SimTime)> {
    let Some(c) = scenario.convergence else {
        return Vec::new();
    };
    if plan.has_anchors() || !crate::operations::in_plan(plan) {
        return Vec::new();
    }
    let mut changes: Vec<u64> = scenario.workload.iter().map(|a| a.at_ms).collect();
    let mut spans = Vec::with_capacity(plan.faults.len());
    for f in &plan.faults {
        changes.push(f.at_ms);
        let end = f
            .duration_ms
            .map_or(u64::MAX, |d| f.at_ms.saturating_add(d));
        if end != u64::MAX {
            changes.push(end);
        }
        spans.push((f.at_ms, end));
    }
    changes.sort_unstable();
    changes.dedup();
    let last = convergence_deadline(scenario, plan).map_or(0, SimTime::as_ms);
    let mut points = Vec::new();
    for (i, &t) in changes.iter().enumerate() {
        let at = t.saturating_add(c.within_ms);
        let quiet = changes.get(i + 1).is_none_or(|&next| next > at)
            && at < last
            && at < scenario.duration_ms
            && !spans.iter().any(|&(start, end)| start <= at && at < end);
        if quiet {
            points.push((SimTime(t), SimTime(at)));
        }
    }
    points
}

/// Run `scenario` with `seed` and `plan`; the world is returned for inspection
/// (timelines, Chrome traces).
pub fn run_world(scenario: &Scenario, seed: u64, plan: Plan, trace: TraceMode) -> (Outcome, World) {
    run_inner(scenario, seed, plan, trace, Keep::default(), |_| {})
}

/// [`run_world`], keeping the run's decision points if `record` (`world.sim.decisions()`).
pub fn run_world_recording(
    scenario: &Scenario,
    seed: u64,
    plan: Plan,
    trace: TraceMode,
    record: bool,
) -> (Outcome, World) {
    let keep = Keep {
        decisions: record,
        signature: false,
    };
    run_inner(scenario, seed, plan, trace, keep, |_| {})
}

/// [`run_world`], keeping what `keep` asks of the run's steps (its decision points,
/// its abstract signature).
pub fn run_world_keeping(
    scenario: &Scenario,
    seed: u64,
    plan: Plan,
    trace: TraceMode,
    keep: Keep,
) -> (Outcome, World) {
    run_inner(scenario, seed, plan, trace, keep, |_| {})
}

/// [`run_observed`], keeping what `keep` asks of the run's steps: an oracle's run
/// that a campaign also reads the signature or decision points of.
pub fn run_observed_keeping(
    scenario: &Scenario,
    seed: u64,
    plan: Plan,
    keep: Keep,
    observe: impl FnMut(&View<'_>),
) -> (Outcome, World) {
    run_inner(scenario, seed, plan, TraceMode::Hash, keep, observe)
}

/// [`run_world`], calling `observe` with the world after every step the checkers check
/// (before them): what an oracle records over a run (objects created and deleted) without
/// a second run loop.
pub fn run_observed(
    scenario: &Scenario,
    seed: u64,
    plan: Plan,
    trace: TraceMode,
    observe: impl FnMut(&View<'_>),
) -> (Outcome, World) {
    run_inner(scenario, seed, plan, trace, Keep::default(), observe)
}

/// A run as the binary's families host it ([`reconsim_family::host`]): inline, or on a
/// thread of its own for real code.
fn run_inner(
    scenario: &Scenario,
    seed: u64,
    plan: Plan,
    trace: TraceMode,
    keep: Keep,
    observe: impl FnMut(&View<'_>),
) -> (Outcome, World) {
    reconsim_family::hosted(scenario.families().host(), seed, || {
        run_here(scenario, seed, plan, trace, keep, Gating::On, observe)
    })
}

/// [`run_world`] with hash-only traces, checking as `gating` says: `Gating::Off` asks
/// every checker after every step that changed anything, the reference the tests hold
/// gated runs to (the same outcome, violation and trace hash).
pub fn run_gated(scenario: &Scenario, seed: u64, plan: Plan, gating: Gating) -> Outcome {
    reconsim_family::hosted(scenario.families().host(), seed, || {
        run_here(
            scenario,
            seed,
            plan,
            TraceMode::Hash,
            Keep::default(),
            gating,
            |_| {},
        )
        .0
    })
}

fn run_here(
    scenario: &Scenario,
    seed: u64,
    plan: Plan,
    trace: TraceMode,
    keep: Keep,
    gating: Gating,
    mut observe: impl FnMut(&View<'_>),
) -> (Outcome, World) {
    let deadline = convergence_deadline(scenario, &plan);
    let mut quiet = quiet_points(scenario, &plan).into_iter().peekable();
    let anchored = plan.has_anchors();
    let mut world = build_keeping(scenario, seed, plan, trace, keep);
    let mut checkers: Vec<Checker> = scenario
        .invariants
        .iter()
        .map(|name| {
            scenario
                .invariant(name)
                .expect("validated: a registered or declared invariant")
                .checker()
        })
        .collect();
    let end = SimTime(scenario.duration_ms);
    // Each component's change count at the last check (`Component::changes`: the API
    // server's writes, the cloud's launches and terminations, ...), by process index.
    let mut changes: Vec<u64> = Vec::new();
    let mut violation = None;
    let mut pending_convergence = deadline;
    let mut fired = 0;
    // The earliest grace period of a checker still to run out, after the last one woken.
    let mut woken = SimTime::ZERO;
    let next_due = |checkers: &[Checker], woken: SimTime| {
        checkers
            .iter()
            .filter_map(Checker::due)
            .filter(|&d| d > woken)
            .min()
    };
    'run: loop {
        let next_quiet = quiet.peek().map(|&(_, at)| at);
        let due = next_due(&checkers, woken);
        let horizon = pending_convergence
            .unwrap_or(end)
            .min(end)
            .min(next_quiet.unwrap_or(end))
            .min(due.unwrap_or(end));
        while let Some(step) = world.sim.step_until(horizon) {
            // An anchored fault's event came: judge convergence after it heals, even if
            // an earlier deadline was judged already.
            let mut rehorizon = false;
            if anchored && world.sim.fired() != fired {
                fired = world.sim.fired();
                if let Some(d) = deadline_after(scenario, world.sim.heal_ms())
                    && pending_convergence.is_none_or(|p| d > p)
                    && d > world.sim.now()
                {
                    pending_convergence = Some(d);
                    rehorizon = true;
                }
            }
            // A fault may change what no count follows (a process's state): every
            // checker is asked after it.
            let forced = matches!(step, StepKind::Fault { .. });
            let relevant = match step {
                // A step is checked if it moved its component's change count; never
                // for a component that holds nothing checkers read (a kubelet, a
                // manager); always for one that does not count.
                StepKind::Handled(p) => match world.sim.actor(p).changes() {
                    Some(UNREAD) => false,
                    Some(v) => {
                        let i = p.index();
                        if changes.len() <= i {
                            changes.resize(i + 1, u64::MAX);
                        }
                        std::mem::replace(&mut changes[i], v) != v
                    }
                    None => true,
                },
                StepKind::Lost(_) => false,
                StepKind::Fault { .. } => true,
            };
            if relevant {
                let v = view(&world);
                observe(&v);
                let gate = if forced { Gating::Off } else { gating };
                if let Some(found) = checkers.iter_mut().find_map(|c| c.check_changed(&v, gate)) {
                    violation = Some(found);
                    break 'run;
                }
                // A check may start a grace period that runs out before the horizon.
                rehorizon |= next_due(&checkers, woken).is_some_and(|d| d < horizon);
            }
            if rehorizon {
                continue 'run;
            }
        }
        if world.sim.budget_exhausted() {
            violation = Some(Violation {
                invariant: EVENT_BUDGET.into(),
                time: world.sim.now(),
                message: format!(
                    "the run hit the kernel's event budget of {} events: a livelock",
                    world.sim.config().max_events
                ),
                objects: vec![],
            });
            break;
        }
        // A grace period runs out with no step at its instant: the checkers are asked
        // then, of the world as the last step left it.
        if let Some(at) = due
            && at == horizon
            && at < end
        {
            woken = at;
            let mut v = view(&world);
            // A checker whose due time was already past is asked now, not back then.
            v.now = at.max(world.sim.now());
            observe(&v);
            if let Some(found) = checkers
                .iter_mut()
                .find_map(|c| c.check_changed(&v, gating))
            {
                violation = Some(found);
                break;
            }
            continue;
        }
        if let Some((change, at)) = quiet.peek().copied()
            && at == horizon
        {
            quiet.next();
            let since =
                format!("{change}, the plan's last change before it, with no fault in force");
            violation = unconverged(scenario, &world, at, &since);
            if violation.is_some() {
                break;
            }
            continue;
        }
        match pending_convergence.take() {
            Some(at) => {
                if anchored {
                    // Anchored faults heal after their events, known only now.
                    match deadline_after(scenario, world.sim.heal_ms()) {
                        Some(later) if later > at => {
                            pending_convergence = Some(later);
                            continue;
                        }
                        // A fault that took effect never reverts: no bound to judge.
                        None => continue,
                        Some(_) => {}
                    }
                }
                violation = unconverged(scenario, &world, at, "the last fault healed");
                if violation.is_some() {
                    break;
                }
            }
            None => break,
        }
    }
    let sim_ms = violation.as_ref().map_or(end.as_ms(), |v| v.time.as_ms());
    let outcome = Outcome {
        seed,
        violation,
        events: world.sim.handled(),
        sim_ms,
        trace_hash: world.sim.trace().hash(),
    };
    (outcome, world)
}

/// Run `scenario` with `seed`, generating its fault plan.
pub fn run(scenario: &Scenario, seed: u64) -> (Outcome, Plan) {
    run_generated(scenario, seed, false)
}

/// Run `scenario` with `seed` and the plan its generators draw, in swarm mode if asked
/// ([`crate::faults::generate_swarm`]).
pub fn run_generated(scenario: &Scenario, seed: u64, swarm: bool) -> (Outcome, Plan) {
    let plan = if swarm {
        crate::faults::generate_swarm(scenario, seed)
    } else {
        crate::faults::generate(scenario, seed)
    };
    let (outcome, _) = run_world(scenario, seed, plan.clone(), TraceMode::Hash);
    (outcome, plan)
}
