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
        println!("{:<width$}  {:<9}  {:>6}", "NAME", "EXPECT", "SEEDS");
        println!("{INDENT}DESCRIPTION");
        for (_, s) in &rows {
            println!();
            println!(
                "{:<width$}  {:<9}  {:>6}",
                s.name,
                s.expect.to_string(),
                s.seeds
            );
            for line in wrap(&s.description, COLUMNS - INDENT.len()) {
                println!("{INDENT}{line}");
            }
        }
        println!();
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

/// The table fits a terminal of this many columns (not asked of the terminal: the
/// output is the same wherever it goes).
const COLUMNS: usize = 100;
/// A description goes under its scenario's name, indented by this.
const INDENT: &str = "    ";

/// `text` whole, in lines of at most `width` characters, broken between words (a word
/// longer than a line has a line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn a_description_wraps_between_words_and_loses_none() {
        let text = "Cluster API v0.3.4 KubeadmControlPlane as released, its initialization \
                    included: the first control-plane Machine and the kubeadm config.";
        let lines = wrap(text, 30);
        assert!(lines.iter().all(|l| l.chars().count() <= 30), "{lines:#?}");
        assert_eq!(
            lines.join(" "),
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        assert_eq!(wrap("", 30), Vec::<String>::new());
        assert_eq!(wrap("a-very-long-word b", 5), ["a-very-long-word", "b"]);
    }
}
