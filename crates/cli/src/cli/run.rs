//! `run`: one seed of a scenario, its invariants checked after every event; optionally
//! its timeline, its Chrome trace and its failure file.

use super::outputs::{Outputs, check_kind, check_output, create_parent, same_file, write_chrome};
use super::{App, UsageError};
use crate::scenario::failure::FailureFile;
use crate::scenario::runner;
use serde_json::json;
use std::process::ExitCode;
use std::time::Instant;

pub(super) fn run(
    app: &App<'_>,
    arg: &str,
    seed: u64,
    swarm: bool,
    out: Outputs<'_>,
    timeline: bool,
    json: bool,
) -> Result<ExitCode, UsageError> {
    let (source, scenario) = app.load(arg)?;
    let input = source.path();
    if let Some(c) = out.chrome {
        check_output(c, input, out.force, "--chrome-trace")?;
    }
    if let Some(f) = out.save {
        check_kind(f, "--save-failure")?;
    }
    if let (Some(f), Some(input)) = (out.save, input) {
        // An existing file holding this very failure is fine: checked after the run.
        if same_file(f, input) {
            check_output(f, Some(input), out.force, "--save-failure")?;
        }
    }
    let save = out.save;
    let chrome = out.chrome;
    let start = Instant::now();
    let plan = if swarm {
        crate::scenario::faults::generate_swarm(&scenario, seed)
    } else {
        crate::scenario::faults::generate(&scenario, seed)
    };
    let mode = if (timeline && !json) || chrome.is_some() {
        crate::sim::TraceMode::Full
    } else {
        crate::sim::TraceMode::Hash
    };
    let (outcome, world) = runner::run_world(&scenario, seed, plan.clone(), mode);
    let wall_ms = start.elapsed().as_millis() as u64;
    if let Some(path) = chrome {
        write_chrome(path, &world, &outcome)?;
    }
    if timeline && !json {
        let until = crate::sim::SimTime(outcome.sim_ms);
        for line in crate::scenario::timeline::timeline(&world, until) {
            println!("{line}");
        }
    }
    let failure = FailureFile::new(&scenario, &plan, &outcome);
    if let (Some(path), Some(f)) = (save, &failure) {
        let cannot = |e: std::io::Error| {
            UsageError(format!(
                "{}: cannot write the failure file: {e}",
                path.display()
            ))
        };
        create_parent(path)?;
        let written = if out.force {
            f.save(path).map(|()| true)
        } else {
            f.save_if_absent(path)
        };
        if !written.map_err(cannot)? {
            return Err(UsageError(format!(
                "{}: --save-failure: the file exists and holds another failure; choose another path, or add --force to replace it (replay this one with `{}`)",
                path.display(),
                app.run_command(arg, seed, swarm)
            )));
        }
    }
    let v = outcome.violation.as_ref();
    if json {
        let doc = json!({
            "scenario": scenario.name,
            "seed": seed,
            "outcome": if v.is_some() { "violation" } else { "clean" },
            "invariant": v.map(|v| v.invariant.clone()),
            "time_ms": v.map(|v| v.time.as_ms()),
            "message": v.map(|v| v.message.clone()),
            "objects": v.map(|v| v.objects.clone()),
            "events": outcome.events,
            "sim_ms": outcome.sim_ms,
            "wall_ms": wall_ms,
            "trace_hash": outcome.trace_hash_hex(),
            "faults": plan.len(),
        });
        println!("{doc}");
    } else {
        match v {
            None => println!(
                "{} seed {seed}: clean ({} events, {} simulated, {wall_ms} ms, trace {})",
                scenario.name,
                outcome.events,
                crate::sim::SimTime(outcome.sim_ms),
                outcome.trace_hash_hex()
            ),
            Some(v) => {
                println!(
                    "{} seed {seed}: VIOLATION of {} at t={}\n  {}\n  objects: {}",
                    scenario.name,
                    v.invariant,
                    v.time,
                    v.message,
                    v.objects.join(", ")
                );
                match save {
                    Some(p) => println!(
                        "  saved {}\n  replay: {}",
                        p.display(),
                        app.replay_command(p)
                    ),
                    None => println!("  replay: {}", app.run_command(arg, seed, swarm)),
                }
            }
        }
    }
    Ok(if v.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
