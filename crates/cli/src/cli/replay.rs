//! `replay`: a failure file run again and judged (the same invariant, the same trace
//! hash), and what a replay that did not reproduce found.

use super::outputs::{Outputs, check_output, write_chrome, write_page};
use super::{App, UsageError};
use crate::scenario::failure::FailureFile;
use crate::scenario::runner;
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;

/// What a replay that did not reproduce found, in one or two lines.
pub(super) fn not_reproduced(f: &FailureFile, r: &crate::scenario::failure::Replay) -> String {
    format!(
        "NOT reproduced: expected {} with trace {}, got {} with trace {}{}{}",
        f.invariant,
        f.trace_hash,
        r.invariant.as_deref().unwrap_or("no violation"),
        r.trace_hash,
        match &r.outcome.violation {
            // The same failure at the same instant: the history may be the same, hashed
            // by another version (0.7.0 hashes a cloud answer's instances as digests).
            Some(v) if r.same_violation && v.time.as_ms() == f.time_ms =>
                "\n  the same invariant fails at the same time: another history, or a \
                 version that hashes the run's messages differently",
            Some(_) if r.same_violation => "\n  the same invariant fails, in a different history",
            _ => "",
        },
        if f.reconsim_version != crate::scenario::failure::VERSION {
            format!(
                " (the file was written by reconsim {}, this is {})",
                f.reconsim_version,
                crate::scenario::failure::VERSION
            )
        } else {
            String::new()
        }
    )
}

pub(super) fn replay(
    app: &App<'_>,
    path: &Path,
    out: Outputs<'_>,
    timeline: bool,
    json: bool,
) -> Result<ExitCode, UsageError> {
    if let Some(c) = out.chrome {
        check_output(c, Some(path), out.force, "--chrome-trace")?;
    }
    if let Some(h) = out.html {
        check_output(h, Some(path), out.force, "--html")?;
    }
    let chrome = out.chrome;
    let f = app.load_failure(path)?;
    if let Some(h) = out.html {
        // The page is explain's story: a failure that does not reproduce has none.
        match crate::scenario::explain::explain_world(&f) {
            Ok((e, world)) => write_page(h, &super::explain::page(app, path, &f, &e, &world))?,
            Err(_) => eprintln!(
                "{}: no page written: the failure does not reproduce (see below)",
                h.display()
            ),
        }
    }
    if timeline {
        // The timeline's own run: the judged one below stays the replay's.
        let (outcome, world) = runner::run_world(
            &f.scenario,
            f.seed,
            f.plan.clone(),
            crate::sim::TraceMode::Full,
        );
        let until = crate::sim::SimTime(outcome.sim_ms);
        for line in crate::scenario::timeline::timeline(&world, until) {
            println!("{line}");
        }
    }
    let r = match chrome {
        None => f.replay(crate::sim::TraceMode::Hash),
        Some(out) => {
            let (outcome, world) = runner::run_world(
                &f.scenario,
                f.seed,
                f.plan.clone(),
                crate::sim::TraceMode::Full,
            );
            write_chrome(out, &world, &outcome)?;
            crate::scenario::failure::Replay::judge(&f, outcome)
        }
    };
    if json {
        let doc = json!({
            "reproduced": r.reproduced,
            "same_violation": r.same_violation,
            "trace_hash": r.trace_hash,
            "invariant": r.invariant,
            "expected_trace_hash": f.trace_hash,
            "expected_invariant": f.invariant,
            "time_ms": r.outcome.violation.as_ref().map(|v| v.time.as_ms()),
        });
        println!("{doc}");
    } else if r.reproduced {
        let v = r
            .outcome
            .violation
            .as_ref()
            .expect("reproduced means violated");
        println!(
            "reproduced: {} seed {}: {} at t={} (trace {})\n  {}\n  replay: {}",
            f.scenario.name,
            f.seed,
            v.invariant,
            v.time,
            r.trace_hash,
            v.message,
            app.replay_command(path)
        );
    } else {
        println!("{}", not_reproduced(&f, &r));
    }
    Ok(if r.reproduced {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
