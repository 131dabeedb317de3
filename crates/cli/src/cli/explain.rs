//! `explain`: a failure replayed, then told object by object: the faults and what led
//! to the violation.

use super::outputs::{check_output, write_page};
use super::replay::not_reproduced;
use super::{App, UsageError};
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;

pub(super) fn explain(
    app: &App<'_>,
    path: &Path,
    html: Option<&Path>,
    force: bool,
    json: bool,
) -> Result<ExitCode, UsageError> {
    if let Some(out) = html {
        check_output(out, Some(path), force, "--html")?;
    }
    let f = app.load_failure(path)?;
    // Explain's own run is the replay: a file whose scenario or invariant was edited
    // since is not explained by some other failure.
    let e = match crate::scenario::explain::explain_world(&f) {
        Ok((e, world)) => {
            if let Some(out) = html {
                write_page(out, &page(app, path, &f, &e, &world))?;
            }
            e
        }
        Err(r) => {
            if json {
                let doc = json!({
                    "reproduced": false,
                    "invariant": r.invariant,
                    "trace_hash": r.trace_hash,
                    "expected_invariant": f.invariant,
                    "expected_trace_hash": f.trace_hash,
                });
                println!("{doc}");
            } else {
                println!("{}", not_reproduced(&f, &r));
                println!("  nothing to explain: the file's failure does not happen any more");
            }
            return Ok(ExitCode::from(1));
        }
    };
    if json {
        let doc = json!({
            "reproduced": true,
            "headline": e.headline,
            "faults": e.faults,
            "objects": e.objects,
            "lines": e.lines,
        });
        println!("{doc}");
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}", e.headline);
    // (The JSON keeps an empty string for a plan without faults.)
    let faults = if e.faults.is_empty() {
        "none"
    } else {
        &e.faults
    };
    println!("faults: {faults}");
    println!("what led to it ({}):", e.objects.join(", "));
    for line in &e.lines {
        println!("{line}");
    }
    println!(
        "(rv N: the object's resourceVersion, the API server's count of writes when it was written last; a cache that holds a smaller one than the server is behind)"
    );
    println!("replay: {}", app.replay_command(path));
    Ok(ExitCode::SUCCESS)
}

/// The failure's HTML page (`--html`).
pub(super) fn page(
    app: &App<'_>,
    path: &Path,
    f: &crate::scenario::failure::FailureFile,
    e: &crate::scenario::explain::Explanation,
    world: &crate::scenario::build::World,
) -> String {
    crate::scenario::page::failure_page(
        world,
        e,
        &format!("{} seed {}", f.scenario.name, f.seed),
        &app.replay_command(path),
    )
}
