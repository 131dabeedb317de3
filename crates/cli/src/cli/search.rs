//! `search`: reference runs, then plans of faults anchored to their decision points
//! (`--list-plans` prints the plans and runs none); every failure a failure file.

use super::outputs::create_failures_dir;
use super::{App, UsageError};
use crate::scenario::failure::FailureFile;
use crate::scenario::runner;
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

pub(super) fn list_plans_cmd(
    app: &App<'_>,
    arg: &str,
    seed: u64,
    max_plans: usize,
    (pairs, groups): (bool, bool),
    (base, beyond_envelope): (crate::scenario::search::Base, bool),
    json: bool,
) -> Result<ExitCode, UsageError> {
    use crate::scenario::search;
    let (_, scenario) = app.load(arg)?;
    let config = search::SearchConfig {
        seed,
        max_plans,
        pairs,
        groups,
        base,
        beyond_envelope,
        ..Default::default()
    };
    let (_, world) = runner::run_world_recording(
        &scenario,
        seed,
        config.base.plan(&scenario, seed),
        crate::sim::TraceMode::Hash,
        true,
    );
    let counted = search::plans_counted(&scenario, &world, &config);
    let (plans, left_out) = (counted.plans, counted.left_out);
    if json {
        println!(
            "{}",
            serde_json::to_string(&plans).expect("plans serialize")
        );
    } else {
        for (i, c) in plans.iter().enumerate() {
            println!("#{i} {}{}", c.description, beyond_words(&c.beyond_envelope));
        }
        if left_out > 0 {
            println!(
                "(--max-plans {max_plans} left out {left_out} more: the last singles in run order; --max-plans {} lists every single)",
                max_plans + left_out
            );
        }
        if let Some(line) = envelope_line(counted.beyond_envelope, beyond_envelope) {
            println!("({line})");
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn search_cmd(
    app: &App<'_>,
    arg: &str,
    config: crate::scenario::search::SearchConfig,
    failures_dir: Option<&Path>,
    json: bool,
) -> Result<ExitCode, UsageError> {
    use crate::scenario::search;
    let (_, scenario) = app.load(arg)?;
    create_failures_dir(failures_dir)?;
    // Saved files by (seed, plan); a reference run's own failure is plan `None`.
    type Saved = std::collections::BTreeMap<(u64, Option<usize>), String>;
    let saved = std::sync::Mutex::new(Saved::new());
    let save_errors = std::sync::Mutex::new(Vec::new());
    let save = |seed: u64,
                plan_index: Option<usize>,
                plan: &crate::scenario::Plan,
                outcome: &runner::Outcome,
                candidate: Option<&search::Candidate>| {
        let file = match candidate {
            Some(c) => c.failure_file(&scenario, plan, outcome),
            None => FailureFile::new(&scenario, plan, outcome),
        };
        let (Some(dir), Some(f)) = (failures_dir, file) else {
            return;
        };
        let name = match plan_index {
            None => format!("{}-seed-{seed}.json", scenario.name),
            Some(i) => format!("{}-search-seed-{seed}-plan-{i}.json", scenario.name),
        };
        let path = dir.join(name);
        match f.save_new(&path) {
            Ok(path) => {
                saved
                    .lock()
                    .expect("not poisoned")
                    .insert((seed, plan_index), path.display().to_string());
            }
            Err(e) => save_errors
                .lock()
                .expect("not poisoned")
                .push(format!("{}: {e}", path.display())),
        }
    };
    let on_failure = |seed: u64,
                      i: usize,
                      c: &search::Candidate,
                      outcome: &runner::Outcome,
                      plan: &crate::scenario::Plan| {
        save(seed, Some(i), plan, outcome, Some(c));
    };
    tracing::info!(scenario = %scenario.name, seed = config.seed, seeds = config.seeds, "search starts");
    let wall = Instant::now();
    let report = search::search(&scenario, &config, &on_failure);
    let wall_ms = wall.elapsed().as_millis() as u64;
    for s in &report.seeds {
        save(
            s.seed,
            None,
            &config.base.plan(&scenario, s.seed),
            &s.reference,
            None,
        );
    }
    // Threads save in any order; errors print in the order of their files' names.
    let mut save_errors = save_errors.into_inner().expect("not poisoned");
    save_errors.sort();
    for e in &save_errors {
        eprintln!("{}: error: cannot write the failure file {e}", app.program);
    }
    let saved = saved.into_inner().expect("not poisoned");
    let first = report.first_failure();
    if json {
        let references: Vec<serde_json::Value> = report
            .seeds
            .iter()
            .map(|s| {
                let r = &s.reference;
                json!({
                    "seed": s.seed,
                    "outcome": if r.violation.is_some() { "violation" } else { "clean" },
                    "invariant": r.violation.as_ref().map(|v| v.invariant.clone()),
                    "time_ms": r.violation.as_ref().map(|v| v.time.as_ms()),
                    "events": r.events,
                    "trace_hash": r.trace_hash_hex(),
                    "decisions": s.decisions,
                    "generated": s.generated,
                    "pruned": s.pruned,
                    "groups": s.groups,
                    "singles": s.singles,
                    "pairs": s.pairs,
                    "runs": s.runs,
                    "mutations": s.mutations,
                    "depth": s.depth,
                    "repeats": s.repeats,
                    "first_failure_plan": s.first_failure_plan,
                    "file": saved.get(&(s.seed, None)),
                    "left_out": s.left_out,
                    "swaps_over_cap": s.swaps_over_cap,
                    "beyond_envelope": s.beyond_envelope,
                })
            })
            .collect();
        let failures: Vec<serde_json::Value> = report
            .failures
            .iter()
            .map(|f| {
                json!({
                    "seed": f.seed,
                    "plan": f.plan,
                    "description": f.description,
                    "invariant": f.invariant,
                    "time_ms": f.time_ms,
                    "file": saved.get(&(f.seed, Some(f.plan))),
                    "beyond_envelope": f.beyond_envelope,
                })
            })
            .collect();
        let doc = json!({
            "scenario": scenario.name,
            "seeds": format!("{}..{}", config.seed, config.seed.saturating_add(config.seeds)),
            "references": references,
            "failures": failures,
            "first_failure": first.map(|(seed, plan)| json!({"seed": seed, "plan": plan})),
            "runs": report.runs,
            "runs_to_first_failure": report.runs_to_first_failure,
            "events": report.events,
            "sim_ms": report.sim_ms,
            "wall_ms": wall_ms,
            "jobs": config.jobs,
            "max_plans": config.max_plans,
            "left_out": report.seeds.iter().map(|s| s.left_out).sum::<usize>(),
            "swaps_per_run_max": search::SWAPS_PER_RUN_MAX,
            "beyond_envelope": config.beyond_envelope,
        });
        println!("{doc}");
    } else {
        for s in &report.seeds {
            let plans = if config.exhaustive.is_some() {
                format!(
                    "exhaustive to depth {}: {} swaps generated, {} runs repeated an interleaving",
                    s.depth, s.generated, s.repeats
                )
            } else {
                format!(
                    "plans: {} generated, {} pruned (causality, repeats), {} groups, {} singles and {} pairs queued",
                    s.generated, s.pruned, s.groups, s.singles, s.pairs
                )
            };
            println!(
                "{} seed {}: reference run {}, {} decision points; {plans}, {} ran{}",
                scenario.name,
                s.seed,
                match &s.reference.violation {
                    Some(v) => format!("VIOLATION {} at {}", v.invariant, v.time),
                    None => "clean".to_string(),
                },
                s.decisions,
                s.runs,
                s.first_failure_plan
                    .map(|p| format!(", first failing plan #{p}"))
                    .unwrap_or_default()
            );
            for line in cut_lines(s, &config) {
                println!("  {line}");
            }
        }
        match first {
            Some((seed, plan)) => {
                let what = match plan {
                    None => "the reference run itself".to_string(),
                    Some(p) => report
                        .failures
                        .iter()
                        .find(|f| f.seed == seed && f.plan == p)
                        .map(|f| {
                            format!(
                                "plan #{p}: {}{} -> {} at {} ms",
                                f.description,
                                beyond_words(&f.beyond_envelope),
                                f.invariant,
                                f.time_ms
                            )
                        })
                        .unwrap_or_default(),
                };
                println!(
                    "first failure after {} runs (seed {seed}): {what}; {} failing plans in all, {:.2} s",
                    report.runs_to_first_failure.unwrap_or(0),
                    report.failures.len(),
                    wall_ms as f64 / 1000.0
                );
                if let (Some(dir), false) = (failures_dir, saved.is_empty()) {
                    let files = if saved.len() == 1 { "file" } else { "files" };
                    println!(
                        "  saved {} failure {files} in {}",
                        saved.len(),
                        dir.display()
                    );
                }
                match saved.get(&(seed, plan)) {
                    Some(path) => println!("  replay: {}", app.replay_command(Path::new(path))),
                    None if failures_dir.is_none() => {
                        println!("  (--failures-dir DIR saves each failure as a failure file)")
                    }
                    None => {}
                }
            }
            None => println!(
                "no failure in {} runs, {:.2} s",
                report.runs,
                wall_ms as f64 / 1000.0
            ),
        }
    }
    Ok(if !save_errors.is_empty() {
        ExitCode::from(2)
    } else if first.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// What a cap cut from one reference seed's search, in words: never silent.
fn cut_lines(
    s: &crate::scenario::search::SeedReport,
    config: &crate::scenario::search::SearchConfig,
) -> Vec<String> {
    let max = config.max_plans;
    let mut out = Vec::new();
    if s.left_out > 0 {
        let plans = if s.left_out == 1 { "plan" } else { "plans" };
        out.push(if config.exhaustive.is_some() {
            format!(
                "--max-plans {max} cut the tree: {} {swaps} generated but not run (nor the \
                 swaps below them); a larger --max-plans runs more",
                s.left_out,
                swaps = if s.left_out == 1 { "swap" } else { "swaps" }
            )
        } else if config.coverage {
            format!(
                "--max-plans {max} left out {} queued {plans} (singles and variations); \
                 a larger --max-plans runs them",
                s.left_out
            )
        } else {
            format!(
                "--max-plans {max} left out {} {plans} (the last singles in run order); \
                 --max-plans {} runs every single",
                s.left_out,
                max + s.left_out
            )
        });
    }
    if let Some(line) = envelope_line(s.beyond_envelope, config.beyond_envelope) {
        out.push(line);
    }
    if s.swaps_over_cap > 0 {
        out.push(format!(
            "{} more swaps were not generated: a run yields at most {} (its earliest), a \
             bound on memory that no option raises",
            s.swaps_over_cap,
            crate::scenario::search::SWAPS_PER_RUN_MAX
        ));
    }
    out
}

/// A plan's label when it goes beyond the scenario's fault envelope: what it goes
/// beyond, in words.
fn beyond_words(beyond: &[String]) -> String {
    if beyond.is_empty() {
        String::new()
    } else {
        format!(
            " [BEYOND THE SCENARIO'S FAULT ENVELOPE: {}]",
            beyond.join("; ")
        )
    }
}

/// What the fault envelope did to a reference seed's plans, in words.
fn envelope_line(beyond: usize, run: bool) -> Option<String> {
    let plans = if beyond == 1 { "plan" } else { "plans" };
    match (beyond, run) {
        (0, _) => None,
        (n, false) => Some(format!(
            "{n} {plans} beyond the scenario's fault envelope left out (--beyond-envelope runs them)"
        )),
        (n, true) => Some(format!(
            "{n} {plans} beyond the scenario's fault envelope made (--beyond-envelope), each labelled"
        )),
    }
}
