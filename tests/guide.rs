//! docs/guide/debugging-a-failure.md cannot go stale (issue 17): every `$ reconsim ...`
//! command it shows runs, in order, in an empty directory with a copy of the binary on
//! PATH, and prints what the guide says it prints; both tables of figures are measured
//! again.
//!
//! Matching: each line the guide shows must appear in the output in the guide's order
//! (a line of the command's stderr may stand anywhere); a line `...` stands for any
//! lines, and `...` inside a line for any text. Wall-clock figures (seconds, runs/s, the
//! speed-up over simulated time) are the only numbers not compared.

mod common;

use common::{Alone, check_output, line_matches, mask, root};
use serde_json::Value;

#[test]
fn the_masks_and_the_matching_do_what_they_say() {
    assert_eq!(
        mask(
            "x: 100 runs over seeds 0..100 in 0.23 s (437 runs/s, 971702x faster than simulated time), 12 failing"
        ),
        "x: 100 runs over seeds 0..100 in # s (# runs/s, #x faster than simulated time), 12 failing"
    );
    assert!(line_matches("a (...) -> b", "a (long text) -> b"));
    assert!(!line_matches("a (...) -> b", "a (long text) -> c"));
    assert!(check_output(&["one", "...", "four"], "one\ntwo\nthree\nfour\n", "").is_ok());
    assert!(check_output(&["one", "three"], "one\ntwo\nthree\n", "").is_err());
    assert!(check_output(&["wrote it", "one"], "one\n", "wrote it\n").is_ok());
}

#[test]
fn every_command_of_the_debugging_guide_prints_what_the_guide_shows() {
    let guide = std::fs::read_to_string(root().join("docs/guide/debugging-a-failure.md")).unwrap();
    let a = Alone::new("guide");
    let mut commands = 0;
    let mut in_block = false;
    let mut current: Option<(String, Vec<&str>)> = None;
    let run = |cmd: &str, expected: &[&str]| {
        let out = a.sh(cmd, &[]);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "`{cmd}` exited {:?}: {stderr}",
            out.status.code()
        );
        if let Err(line) = check_output(expected, &stdout, &stderr) {
            panic!(
                "`{cmd}` did not print, where the guide shows it:\n{line}\n--- it printed:\n{stdout}{stderr}"
            );
        }
    };
    for line in guide.lines() {
        if line.starts_with("```") {
            if let Some((cmd, expected)) = current.take() {
                run(&cmd, &expected);
                commands += 1;
            }
            in_block = !in_block;
            continue;
        }
        if !in_block {
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            if let Some((prev, expected)) = current.take() {
                run(&prev, &expected);
                commands += 1;
            }
            current = Some((cmd.to_string(), Vec::new()));
        } else if let Some((_, expected)) = current.as_mut() {
            expected.push(line);
        }
    }
    assert!(commands >= 8, "{commands} commands");
}

/// A table of the guide: its rows' cells, after the header that starts with `header`.
fn table<'a>(doc: &'a str, header: &str) -> Vec<Vec<&'a str>> {
    let start = doc.find(header).unwrap_or_else(|| panic!("{header:?}"));
    doc[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect()
}

/// `4 -> 1 (kubelet stop, 392 s)` as (4, 1).
fn before_after(cell: &str) -> (u64, u64) {
    let (a, b) = cell.split_once(" -> ").unwrap();
    let b = b.split(' ').next().unwrap();
    (a.parse().unwrap(), b.parse().unwrap())
}

#[test]
fn the_guides_shrink_figures_are_measured_again() {
    let guide = std::fs::read_to_string(root().join("docs/guide/debugging-a-failure.md")).unwrap();
    let a = Alone::new("figures");
    let json = |args: &[&str]| -> Value {
        let out = a.reconsim(args);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stderr)))
    };
    let shrunk = |file: &str| {
        let out = json(&["shrink", file, "-o", &format!("{file}.small"), "--json"]);
        (
            out["faults_before"].as_u64().unwrap(),
            out["faults_after"].as_u64().unwrap(),
            out["runs"].as_u64().unwrap(),
        )
    };
    let rows = table(
        &guide,
        "| violation scenario | seed | faults before -> after | runs |",
    );
    assert!(rows.len() >= 5);
    for r in &rows {
        let (name, seed) = (r[0], r[1]);
        let file = format!("{name}-{seed}.json");
        json(&[
            "run",
            name,
            "--seed",
            seed,
            "--save-failure",
            &file,
            "--json",
        ]);
        let (b, f) = before_after(r[2]);
        assert_eq!(shrunk(&file), (b, f, r[3].parse().unwrap()), "{r:?}");
    }
    let rows = table(
        &guide,
        "| violation scenario | first seed | invariant | faults before -> after | runs |",
    );
    assert!(rows.len() >= 15);
    for r in &rows {
        let name = r[0];
        let doc = json(&[
            "fuzz",
            name,
            "--stop-on-first",
            "--failures-dir",
            "failures",
            "--jobs",
            "1",
            "--json",
        ]);
        assert_eq!(doc["first_failure_seed"].to_string(), r[1], "{r:?}");
        assert_eq!(doc["failures"][0]["invariant"], r[2], "{r:?}");
        let file = doc["first_failure_file"].as_str().unwrap().to_string();
        let (b, f) = before_after(r[3]);
        assert_eq!(shrunk(&file), (b, f, r[4].parse().unwrap()), "{r:?}");
    }
}
