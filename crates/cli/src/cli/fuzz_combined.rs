//! `fuzz --campaign combined`: a budget of runs spent across random seeds, swarm seeds
//! and search plans (crates/scenario/src/combined.rs), one failure file per finding.

use super::check::{arms_json, failure_file_name, replay_of};
use super::{App, UsageError};
use crate::scenario::Scenario;
use crate::scenario::combined::{self, Arm};
use crate::scenario::failure::FailureFile;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// What `fuzz --campaign combined` was asked.
pub(super) struct CombinedArgs<'a> {
    /// Each arm's first seed, and the budget of runs (`--seeds A..B`: B - A runs).
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) jobs: usize,
    pub(super) stop_on_first: bool,
    pub(super) failures_dir: Option<&'a Path>,
    pub(super) time_budget: Option<std::time::Duration>,
    pub(super) differential: bool,
    pub(super) json: bool,
}

pub(super) fn fuzz_combined(
    app: &App<'_>,
    arg: &str,
    scenario: &Scenario,
    a: CombinedArgs<'_>,
) -> Result<ExitCode, UsageError> {
    let config = combined::Config {
        first_seed: a.start,
        stop_on_first: a.stop_on_first,
        time_budget: a.time_budget,
        differential: a.differential,
        ..combined::Config::new(a.end - a.start, a.jobs)
    };
    let mut saved: Vec<(u64, PathBuf)> = Vec::new();
    let mut errors: Vec<String> = Vec::new();
    let wall = Instant::now();
    let report = combined::run(
        scenario,
        &config,
        &mut |failure, outcome, plan| {
            let (Some(dir), Some(mut f)) =
                (a.failures_dir, FailureFile::new(scenario, plan, outcome))
            else {
                return;
            };
            f.diverges_from = failure.diverges_from;
            let path = dir.join(failure_file_name(&scenario.name, &failure.trial));
            match f.save_new(&path) {
                Ok(p) => saved.push((failure.index, p)),
                Err(e) => errors.push(format!("{}: {e}", path.display())),
            }
        },
        &|_, _| {},
    );
    let wall_ms = wall.elapsed().as_millis() as u64;
    for e in errors.iter().take(5) {
        eprintln!("{}: error: cannot write the failure file {e}", app.program);
    }
    if errors.len() > 5 {
        eprintln!(
            "{}: error: ... and {} more failure files not written",
            app.program,
            errors.len() - 5
        );
    }
    let first = report.first_failure();
    let first_file = first.and_then(|f| {
        saved
            .iter()
            .find(|(i, _)| *i == f.index)
            .map(|(_, p)| p.clone())
    });
    if a.json {
        let failures: Vec<serde_json::Value> = report
            .failures
            .iter()
            .map(|f| {
                json!({
                    "seed": f.trial.seed,
                    "invariant": f.invariant,
                    "time_ms": f.time_ms,
                    "arm": f.trial.arm.name(),
                    "plan": f.trial.plan,
                    "description": f.trial.description,
                    "index": f.index,
                    "finding": f.finding,
                    "diverges_from": f.diverges_from,
                })
            })
            .collect();
        let arms = arms_json(&report, a.start);
        let doc = json!({
            "failures": failures,
            "scenario": scenario.name,
            "runs": report.runs,
            "first_failure_seed": first.map(|f| f.trial.seed),
            "events": report.events,
            "sim_ms": report.sim_ms,
            "wall_ms": wall_ms,
            "seeds": format!("{}..{}", a.start, a.end),
            "seeds_run": report.runs,
            "shard": null,
            "jobs": a.jobs,
            "swarm": false,
            "failures_unlisted": report.failure_count - report.failures.len() as u64,
            "scenario_fingerprint": scenario.fingerprint(),
            "version": env!("CARGO_PKG_VERSION"),
            "failures_saved": saved.len(),
            "first_failure_file": first_file.as_ref().map(|p| p.display().to_string()),
            "save_errors": errors.iter().take(5).collect::<Vec<_>>(),
            "save_error_count": errors.len(),
            "campaign": "combined",
            "arms": arms,
            "findings": report.findings,
            "signatures": report.signatures,
            "out_of_time": report.out_of_time,
            "differential": a.differential,
            "first_failure": first.map(|f| json!({
                "arm": f.trial.arm.name(),
                "seed": f.trial.seed,
                "plan": f.trial.plan,
                "description": f.trial.description,
                "replay": replay_of(app, arg, &f.trial, &f.invariant, first_file.as_deref()),
            })),
        });
        println!("{doc}");
    } else {
        let secs = wall_ms.max(1) as f64 / 1000.0;
        let arm = |arm: Arm| report.arm(arm);
        let search = arm(Arm::Search);
        println!(
            "{}: {} runs (seeds {}..{}, swarm seeds {}..{}, {} search plans from reference seeds {}..{}) in {secs:.2} s ({:.0} runs/s, {:.0}x faster than simulated time), {} failing, {} finding{}",
            scenario.name,
            report.runs,
            a.start,
            arm(Arm::Seeds).next_seed,
            a.start,
            arm(Arm::Swarm).next_seed,
            search.runs - search.references,
            a.start,
            search.next_seed,
            report.runs as f64 / secs,
            report.sim_ms as f64 / wall_ms.max(1) as f64,
            report.failure_count,
            report.findings,
            if report.findings == 1 { "" } else { "s" },
        );
        if report.out_of_time {
            println!(
                "  the time budget ran out after {} of {} runs",
                report.runs, config.budget_runs
            );
        }
        const SHOWN: usize = 10;
        for f in report.failures.iter().take(SHOWN) {
            println!(
                "  {}: {} at t={}{}",
                f.trial.label(),
                f.invariant,
                crate::sim::SimTime(f.time_ms),
                if f.finding { " (new finding)" } else { "" }
            );
        }
        if report.failure_count > SHOWN as u64 {
            println!("  ... and {} more", report.failure_count - SHOWN as u64);
        }
        if let (Some(dir), false) = (a.failures_dir, saved.is_empty()) {
            let files = if saved.len() == 1 { "file" } else { "files" };
            println!(
                "  saved {} failure {files} in {} (one per finding: the first failure of each invariant)",
                saved.len(),
                dir.display()
            );
        }
        if let Some(f) = first {
            println!(
                "  replay: {}",
                replay_of(app, arg, &f.trial, &f.invariant, first_file.as_deref())
            );
        }
    }
    Ok(if !errors.is_empty() {
        ExitCode::from(2)
    } else if report.failure_count == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
