//! `list`: the scenarios a binary finds by name, as a table or as JSON.

use super::{App, UsageError};
use crate::scenario::library::Source;
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;

pub(super) fn list(app: &App<'_>, json: bool) -> Result<ExitCode, UsageError> {
    let mut rows = Vec::new();
    // One file that does not load (a foreign file in $RECONSIM_SCENARIOS) is named on
    // stderr and makes the exit code 2; the others are still listed.
    let mut broken = 0;
    for source in app.library.entries()? {
        match app.library.load_source(&source, app.families) {
            Ok(s) => rows.push((source, s)),
            Err(e) => {
                eprintln!("{}: error: {e}", app.program);
                broken += 1;
            }
        }
    }
    if json {
        let doc: Vec<_> = rows
            .iter()
            .map(|(source, s)| {
                let path = match source {
                    Source::File(p) => p.display().to_string(),
                    Source::Builtin(name) => format!("scenarios/{name}.json"),
                };
                json!({
                    "name": s.name,
                    "path": path,
                    "expect": s.expect.to_string(),
                    "description": s.description,
                    "seeds": s.seeds,
                    "builtin": matches!(source, Source::Builtin(_)),
                })
            })
            .collect();
        println!("{}", serde_json::to_string(&doc)?);
    } else {
        let width = rows
            .iter()
            .map(|(_, s)| s.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        println!(
            "{:<width$}  {:<9}  {:>6}  DESCRIPTION",
            "NAME", "EXPECT", "SEEDS"
        );
        for (_, s) in &rows {
            println!(
                "{:<width$}  {:<9}  {:>6}  {}",
                s.name,
                s.expect.to_string(),
                s.seeds,
                summary(&s.description)
            );
        }
        match std::env::var_os(crate::scenario::library::ENV) {
            Some(d) => println!(
                "({} scenarios of ${} = {}{})",
                rows.len(),
                crate::scenario::library::ENV,
                Path::new(&d).display(),
                match broken {
                    0 => String::new(),
                    1 => "; 1 more that does not load, named on stderr".to_string(),
                    n => format!("; {n} more that do not load, named on stderr"),
                }
            ),
            None => println!(
                "({} scenarios built into this binary; ${} points it at a directory of others)",
                rows.len(),
                crate::scenario::library::ENV
            ),
        }
    }
    Ok(if broken > 0 {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// A description's first sentence, cut to fit a line.
fn summary(description: &str) -> String {
    const WIDTH: usize = 90;
    let first = description
        .split(". ")
        .next()
        .unwrap_or("")
        .trim_end_matches('.');
    if first.chars().count() <= WIDTH {
        first.to_string()
    } else {
        let cut: String = first.chars().take(WIDTH - 3).collect();
        format!("{cut}...")
    }
}
