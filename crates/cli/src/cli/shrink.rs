//! `shrink`: a failure's fault plan minimised while the same invariant fails; the input
//! must replay first, and the output replays before it is written.

use super::outputs::check_output;
use super::replay::not_reproduced;
use super::{App, UsageError};
use crate::scenario::failure::FailureFile;
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;

/// Shrink only what reproduces, write only what replays, and never over the input (nor
/// an existing file without `force`).
pub(super) fn shrink(
    app: &App<'_>,
    path: &Path,
    output: &Path,
    max_runs: u64,
    force: bool,
    json: bool,
) -> Result<ExitCode, UsageError> {
    check_output(output, Some(path), force, "-o")?;
    let f = app.load_failure(path)?;
    let input = f.replay(crate::sim::TraceMode::Hash);
    if !input.reproduced {
        if json {
            let doc = json!({
                "reproduced": false,
                "invariant": input.invariant,
                "trace_hash": input.trace_hash,
                "expected_invariant": f.invariant,
                "expected_trace_hash": f.trace_hash,
                "output": null,
            });
            println!("{doc}");
        } else {
            println!("{}", not_reproduced(&f, &input));
            println!("  nothing shrunk, nothing written: shrink needs a failure that replays");
        }
        return Ok(ExitCode::from(1));
    }
    let (smaller, report) = crate::scenario::shrink::shrink(&f, max_runs);
    // The output must replay as written: its text read back and run again.
    let text = smaller.file_text().map_err(|e| {
        UsageError(format!(
            "{}: cannot write the failure file: {e}",
            output.display()
        ))
    })?;
    let verified = FailureFile::parse(&output.display().to_string(), &text, app.families)
        .map(|back| back.replay(crate::sim::TraceMode::Hash).reproduced)
        .unwrap_or(false);
    if !verified {
        return Err(UsageError(format!(
            "{}: the shrunk failure does not replay as written, so it was not saved; this is a reconsim bug, please report it with the input file",
            output.display()
        )));
    }
    let cannot = |e: std::io::Error| {
        UsageError(format!(
            "{}: cannot write the failure file: {e}",
            output.display()
        ))
    };
    if force {
        smaller.save(output).map_err(cannot)?;
    } else if !smaller.save_if_absent(output).map_err(cannot)? {
        return Err(UsageError(format!(
            "{}: -o: the file appeared while shrinking and holds another failure; it was left as it was",
            output.display()
        )));
    }
    if json {
        let doc = json!({
            "reproduced": true,
            "verified": true,
            "faults_before": report.faults_before,
            "faults_after": report.faults_after,
            "runs": report.runs,
            "budget_exhausted": report.budget_exhausted,
            "invariant": smaller.invariant,
            "trace_hash": smaller.trace_hash,
            "output": output.display().to_string(),
        });
        println!("{doc}");
    } else {
        println!(
            "shrunk {} seed {}: {} -> {} faults in {} runs{}; still {} at t={}\n  the input replayed before shrinking, and the output replays (trace {})\n  saved {}\n  replay: {}",
            f.scenario.name,
            f.seed,
            report.faults_before,
            report.faults_after,
            report.runs,
            if report.budget_exhausted {
                " (run budget spent)"
            } else {
                ""
            },
            smaller.invariant,
            crate::sim::SimTime(smaller.time_ms),
            smaller.trace_hash,
            output.display(),
            app.replay_command(output)
        );
    }
    Ok(ExitCode::SUCCESS)
}
