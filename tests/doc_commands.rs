//! Every printed command runs as printed (issue 30): each command line a reader might
//! paste from README.md, docs/**/*.md and the "Examples:" of every `reconsim help` page
//! is either run here, or run by another named test, or a template the reader fills.
//!
//! A command line is a line of a fenced block of no language or of `sh`, `bash`,
//! `console` or `shell` whose program is `reconsim`, `cargo`, an example's binary or a
//! path to one (after any `NAME=value` assignments); in a block with `$ ` prompts, only
//! the prompted lines are commands, the rest is output. A line ending in `\` goes on on
//! the next; a `for`/`while`/`if` runs to its `done`/`fi`.
//!
//! An HTML comment just before the block (blank lines aside) marks all its commands:
//! - none: run here, in order with the other unmarked commands of the same section, in
//!   a scratch directory of the section's own under `CARGO_TARGET_TMPDIR`, holding a
//!   copy of the repository's `scenarios/` and `examples/*/scenarios/`, with a copy of
//!   the binary alone on PATH. The exit code must be the documented one: 0, or 1 for
//!   `fuzz`, `run`, `search` and `merge` (a found violation, their job); and what they
//!   write must land in a folder `.gitignore` ignores;
//! - `<!-- exit N: why -->`: run here, exit code N;
//! - `<!-- run by PATH -->`: PATH must exist and either contain the command's text, or
//!   read this doc (name its path) and either run its `$ ` lines (the command is one)
//!   or name a text of the command's section above the block (the anchor it finds the
//!   block by);
//! - `<!-- template: why -->`: not run (a placeholder the reader fills, or a cargo
//!   build no test may start); the why is required.
//!
//! Files this test's marks cannot go in (the help pages are the binary's text;
//! README.md and docs/PERFORMANCE.md have other owners) are marked in [`OUTSIDE`] the
//! same way, keyed by the command's start.
//!
//! cargo never runs here: a test that started it would build the workspace again.

mod common;

use common::{BIN, root};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Clone, Debug, PartialEq)]
enum Mark {
    /// Run here; `Some(n)`: the doc says it exits `n`.
    Run(Option<i32>),
    RunBy(String),
    Template(String),
    /// Run here, after these commands (a help page's example that reads a file other
    /// pages' examples or the README make).
    After(&'static [&'static str]),
}

#[derive(Clone, Debug)]
struct Cmd {
    /// `docs/x.md:12`, or `reconsim help fuzz, example 2`.
    at: String,
    /// The doc's path from the repository's root, or `help fuzz`.
    doc: String,
    /// Commands of one group run in order in one scratch directory.
    group: String,
    text: String,
    prompted: bool,
    /// The section's text from its heading down to the block.
    above: String,
    mark: Mark,
}

// ----- what this test cannot mark in the file itself -------------------------------------

const FUZZ_PAUSE: &str = "reconsim fuzz machineapi-lease-expiry-pause --failures-dir failures";
const SHRINK_SMALL: &str =
    "reconsim shrink failures/machineapi-lease-expiry-pause-seed-5.json -o out/small.json";

/// (where, how the command starts, its mark). `where` is a doc's path or `help PAGE`
/// (`help` alone: the top page).
const OUTSIDE: &[(&str, &str, Outside)] = &[
    // README.md
    (
        "README.md",
        "cargo run --profile dist --no-default-features -- fuzz machineapi-no-leader-election",
        Outside::Template(
            "cargo builds the fast binary first (about 2 minutes); tests/newcomer.rs runs the same campaign with the installed binary",
        ),
    ),
    (
        "README.md",
        "cargo test --workspace --release",
        Outside::RunBy(".ci/run"),
    ),
    (
        "README.md",
        "cargo install --path . --profile dist",
        Outside::Template("installs into ~/.cargo/bin, a build of minutes"),
    ),
    (
        "README.md",
        "reconsim fuzz examples/configset-go/",
        Outside::RunBy("tests/example_configset_go.rs"),
    ),
    (
        "README.md",
        "reconsim ",
        Outside::RunBy("tests/newcomer.rs"),
    ),
    // docs/PERFORMANCE.md
    (
        "docs/PERFORMANCE.md",
        "for s in $(reconsim list --json",
        Outside::Template(
            "./reconsim-0.2.0 is a build of release 0.2.0 (commit 01a68db) you make; a measurement",
        ),
    ),
    (
        "docs/PERFORMANCE.md",
        "cargo bench",
        Outside::Template("cargo builds the benches and measures for minutes"),
    ),
    (
        "docs/PERFORMANCE.md",
        "configset fuzz ",
        Outside::Template("the example's binary, built by cargo, in a shell loop of yours"),
    ),
    (
        "docs/PERFORMANCE.md",
        "podset fuzz ",
        Outside::Template("the example's binary, built by cargo, in a shell loop of yours"),
    ),
    (
        "docs/PERFORMANCE.md",
        "for f in scenarios/kcp-*.json",
        Outside::Template(
            "./reconsim-step and ./reconsim-async are two builds you make; valgrind and jq",
        ),
    ),
    // The help pages.
    (
        "help build",
        "reconsim build examples/configset-go/cmd",
        Outside::RunBy("tests/example_configset_go.rs"),
    ),
    (
        "help fuzz",
        "reconsim fuzz machineapi-leader-election --seeds 0..1000000 --shard 3/16",
        Outside::Template(
            "one shard of 16 is 62,500 seeds, minutes on 2 cores; tests/newcomer.rs runs docs/campaigns.md's sharded Job",
        ),
    ),
    (
        "help check",
        "reconsim check --json",
        Outside::Template(
            "every shipped scenario over its whole seed budget takes minutes; tests/scenarios.rs holds each to its expectation",
        ),
    ),
    (
        "help shrink",
        "reconsim shrink failures/machineapi-lease-expiry-pause-seed-5.json",
        Outside::After(&[FUZZ_PAUSE]),
    ),
    (
        "help replay",
        "reconsim replay out/small.json",
        Outside::After(&[FUZZ_PAUSE, SHRINK_SMALL]),
    ),
    (
        "help explain",
        "reconsim explain out/small.json",
        Outside::After(&[FUZZ_PAUSE, SHRINK_SMALL]),
    ),
    (
        "help explain",
        "reconsim explain failures/kcp-upgrade-counts-deleting-3-seed-31.json",
        Outside::After(&["reconsim fuzz kcp-upgrade-counts-deleting-3 --failures-dir failures"]),
    ),
    (
        "help merge",
        "reconsim merge shard-*.json",
        Outside::After(&[
            "reconsim fuzz machineapi-leader-election --seeds 0..100 --shard 0/2 --json > shard-0.json",
            "reconsim fuzz machineapi-leader-election --seeds 0..100 --shard 1/2 --json > shard-1.json",
        ]),
    ),
    (
        "help merge",
        "reconsim merge shard-0.json shard-1.json",
        Outside::After(&[
            "reconsim fuzz machineapi-leader-election --seeds 0..100 --shard 0/2 --json > shard-0.json",
            "reconsim fuzz machineapi-leader-election --seeds 0..100 --shard 1/2 --json > shard-1.json",
        ]),
    ),
];

#[derive(Clone, Copy, Debug)]
enum Outside {
    RunBy(&'static str),
    Template(&'static str),
    After(&'static [&'static str]),
}

fn outside_mark(doc: &str, text: &str) -> Option<Mark> {
    OUTSIDE
        .iter()
        .find(|(d, start, _)| *d == doc && text.starts_with(start))
        .map(|(_, _, o)| match o {
            Outside::RunBy(p) => Mark::RunBy(p.to_string()),
            Outside::Template(w) => Mark::Template(w.to_string()),
            Outside::After(a) => Mark::After(a),
        })
}

// ----- finding the commands ---------------------------------------------------------------

const SHELLS: &[&str] = &["", "sh", "bash", "console", "shell"];
const EXAMPLES: &[&str] = &["podset", "configset", "allocator", "launcher", "stepset"];

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || c == ';')
        .filter(|w| !w.is_empty())
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}

fn is_program(word: &str) -> bool {
    word == "reconsim"
        || word == "cargo"
        || EXAMPLES.contains(&word)
        || word.ends_with("/reconsim")
        || word.starts_with("./reconsim")
        || word.contains("target/release/")
}

/// The command's words after its assignments: program, then arguments.
fn argv(text: &str) -> Vec<&str> {
    words(text).skip_while(|w| is_assignment(w)).collect()
}

fn nesting(line: &str) -> i32 {
    words(line)
        .map(|w| match w {
            "do" | "then" => 1,
            "done" | "fi" => -1,
            _ => 0,
        })
        .sum()
}

/// The commands of a block's lines, each with its line index.
fn units(body: &[(usize, String)]) -> Vec<(usize, String, bool)> {
    let prompted = body.iter().any(|(_, l)| l.starts_with("$ "));
    let mut out = Vec::new();
    let mut k = 0;
    while k < body.len() {
        let (n, line) = &body[k];
        let start = match prompted {
            true => line.strip_prefix("$ "),
            false => Some(line.as_str()),
        };
        k += 1;
        let Some(start) = start else { continue };
        let t = start.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let mut text = start.to_string();
        while text.trim_end().ends_with('\\') && k < body.len() {
            text.push('\n');
            text.push_str(&body[k].1);
            k += 1;
        }
        let first = words(&text).next().unwrap_or("");
        let command = if matches!(first, "for" | "while" | "until" | "if") {
            let mut depth = nesting(&text);
            while depth > 0 && k < body.len() {
                text.push('\n');
                text.push_str(&body[k].1);
                depth += nesting(&body[k].1);
                k += 1;
            }
            words(&text).any(is_program)
        } else {
            argv(&text).first().is_some_and(|w| is_program(w))
        };
        if command {
            out.push((*n, text, prompted));
        }
    }
    out
}

/// A mark's comment: `Some(Ok(mark))`, `Some(Err(why))` for a comment that looks like a
/// mark and is not one, `None` for any other comment.
fn parse_mark(line: &str) -> Option<Result<Mark, String>> {
    let inner = line
        .trim()
        .strip_prefix("<!--")?
        .strip_suffix("-->")?
        .trim();
    if let Some(path) = inner.strip_prefix("run by ") {
        return Some(Ok(Mark::RunBy(path.trim().to_string())));
    }
    if let Some(why) = inner.strip_prefix("template:") {
        return Some(match why.trim() {
            "" => Err("a template says why".into()),
            why => Ok(Mark::Template(why.to_string())),
        });
    }
    if let Some(rest) = inner.strip_prefix("exit ") {
        let code = rest.split(':').next().unwrap_or("").trim();
        return Some(
            code.parse()
                .map(|c| Mark::Run(Some(c)))
                .map_err(|_| format!("`exit N: why`, not `{inner}`")),
        );
    }
    None
}

/// Every command of a markdown file; `problems` gets marks that mark nothing.
fn doc_commands(doc: &str, text: &str, problems: &mut Vec<String>) -> Vec<Cmd> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut heading = 0;
    let mut pending: Option<(usize, Mark)> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim_start();
        if let Some(fence) = t.strip_prefix("```") {
            let indent = line.len() - t.len();
            let lang = fence.trim();
            let mut j = i + 1;
            while j < lines.len() && lines[j].trim() != "```" {
                j += 1;
            }
            let body: Vec<(usize, String)> = (i + 1..j)
                .map(|k| {
                    let l = lines[k];
                    let cut = l.len() - l.trim_start().len();
                    (k, l[cut.min(indent)..].to_string())
                })
                .collect();
            let found = match SHELLS.contains(&lang) {
                true => units(&body),
                false => Vec::new(),
            };
            let mark = pending.take();
            if let Some((at, _)) = &mark
                && found.is_empty()
            {
                problems.push(format!(
                    "{doc}:{}: a mark on a block without a command",
                    at + 1
                ));
            }
            let above = lines[heading..i].join("\n");
            let section = lines[heading];
            for (n, cmd, prompted) in found {
                let mark = match (&mark, outside_mark(doc, &cmd)) {
                    (Some((_, m)), _) => m.clone(),
                    (None, Some(m)) => m,
                    (None, None) => Mark::Run(None),
                };
                out.push(Cmd {
                    at: format!("{doc}:{}", n + 1),
                    doc: doc.to_string(),
                    group: format!("{doc} {section}"),
                    text: cmd,
                    prompted,
                    above: above.clone(),
                    mark,
                });
            }
            i = j + 1;
            continue;
        }
        if let Some(m) = parse_mark(line) {
            match m {
                Ok(m) => pending = Some((i, m)),
                Err(e) => problems.push(format!("{doc}:{}: {e}", i + 1)),
            }
        } else if !t.is_empty() {
            if let Some((at, _)) = pending.take() {
                problems.push(format!(
                    "{doc}:{}: a mark not just before a fenced block",
                    at + 1
                ));
            }
            if t.starts_with('#') {
                heading = i;
            }
        }
        i += 1;
    }
    out
}

fn help(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(0), "reconsim {args:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Every example of every help page: the top page's, then each command's.
fn help_commands() -> Vec<Cmd> {
    let top = help(&["help"]);
    let names: Vec<String> = top
        .lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(String::from)
        .collect();
    assert!(
        names.len() >= 9,
        "the commands of `reconsim help`: {names:?}"
    );
    let mut pages = vec![("help".to_string(), top)];
    for n in &names {
        pages.push((format!("help {n}"), help(&["help", n])));
        // `--help` is the same page.
        assert_eq!(help(&[n, "--help"]), pages.last().unwrap().1, "{n} --help");
    }
    let mut out = Vec::new();
    for (page, text) in pages {
        let examples: Vec<&str> = text
            .lines()
            .skip_while(|l| l.trim() != "Examples:")
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .map(str::trim)
            .collect();
        assert!(!examples.is_empty(), "`reconsim {page}` shows examples");
        for (k, e) in examples.iter().enumerate() {
            assert!(
                argv(e).first().is_some_and(|w| is_program(w)),
                "`reconsim {page}`: `{e}` is a command"
            );
            out.push(Cmd {
                at: format!("`reconsim {page}`, example {}", k + 1),
                doc: page.clone(),
                group: page.clone(),
                text: e.to_string(),
                prompted: false,
                above: String::new(),
                mark: outside_mark(&page, e).unwrap_or(Mark::Run(None)),
            });
        }
    }
    out
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            markdown_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "md") {
            out.push(p);
        }
    }
}

fn all_commands(problems: &mut Vec<String>) -> Vec<Cmd> {
    let mut files = vec![root().join("README.md")];
    markdown_files(&root().join("docs"), &mut files);
    let mut out = Vec::new();
    for f in files {
        let doc = f
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&f).unwrap();
        out.extend(doc_commands(&doc, &text, problems));
    }
    out.extend(help_commands());
    // Every mark of OUTSIDE marks something.
    for (doc, start, _) in OUTSIDE {
        if !out
            .iter()
            .any(|c| c.doc == *doc && c.text.starts_with(start))
        {
            problems.push(format!(
                "OUTSIDE marks `{start}` in {doc}, which has no such command"
            ));
        }
    }
    out
}

// ----- judging a claim --------------------------------------------------------------------

/// The string literals of Rust source (or any quoted text of a script).
fn literals(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = source.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut s = String::new();
        let mut escaped = false;
        for c in chars.by_ref() {
            match (escaped, c) {
                (true, c) => {
                    s.push(c);
                    escaped = false;
                }
                (false, '\\') => escaped = true,
                (false, '"') => break,
                (false, c) => s.push(c),
            }
        }
        out.push(s);
    }
    out
}

/// Why `path` does not run `c`, if it does not.
fn run_by(c: &Cmd, path: &str) -> Result<(), String> {
    let file = root().join(path);
    let source = std::fs::read_to_string(&file).map_err(|e| format!("run by {path}: {e}"))?;
    let text = c.text.trim();
    let without_comment = text.split("  #").next().unwrap_or(text).trim();
    if source.contains(text) || source.contains(without_comment) {
        return Ok(());
    }
    if !source.contains(&c.doc) {
        return Err(format!(
            "run by {path}: it neither holds the command nor reads {}",
            c.doc
        ));
    }
    if c.prompted && source.contains("\"$ \"") {
        return Ok(());
    }
    let anchors: Vec<String> = literals(&source)
        .into_iter()
        .filter(|l| l.len() >= 5 && c.above.contains(l.as_str()))
        .collect();
    match anchors.is_empty() {
        false => Ok(()),
        true => Err(format!(
            "run by {path}: it reads {} but names no text of this command's section above it",
            c.doc
        )),
    }
}

// ----- running ----------------------------------------------------------------------------

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

/// A scratch directory: `bin/reconsim` and `work/`, a checkout's scenarios in it.
fn scratch(base: &Path, n: usize) -> PathBuf {
    let dir = base.join(format!("g{n}"));
    let work = dir.join("work");
    copy_dir(&root().join("scenarios"), &work.join("scenarios"));
    for e in std::fs::read_dir(root().join("examples")).unwrap() {
        let p = e.unwrap().path().join("scenarios");
        if p.is_dir() {
            let name = p.parent().unwrap().file_name().unwrap().to_owned();
            copy_dir(&p, &work.join("examples").join(name).join("scenarios"));
        }
    }
    work
}

fn files_under(dir: &Path, prefix: &Path, out: &mut BTreeSet<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files_under(&p, prefix, out);
        } else {
            out.insert(p.strip_prefix(prefix).unwrap().to_path_buf());
        }
    }
}

/// The exit codes a command may document by its subcommand alone.
fn documented_exits(text: &str) -> Vec<i32> {
    let args = argv(text);
    match args.get(1).copied() {
        Some("fuzz" | "run" | "search" | "merge") => vec![0, 1],
        _ => vec![0],
    }
}

fn sh(bin: &Path, work: &Path, script: &str) -> std::process::Output {
    let path = format!("{}:/usr/bin:/bin", bin.display());
    Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .current_dir(work)
        .env_clear()
        .env("PATH", path)
        .output()
        .expect("sh runs")
}

/// The problems of one command run in `work`.
fn run_one(bin: &Path, work: &Path, at: &str, text: &str, exits: &[i32]) -> Option<String> {
    let out = sh(bin, work, text);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code();
    let expected_error = exits.contains(&2);
    if code.is_none_or(|c| !exits.contains(&c)) || (!expected_error && stderr.contains("error")) {
        return Some(format!(
            "{at}: `{text}` exited {code:?}, documented {exits:?}:\n{}{stderr}",
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .take(5)
                .map(|l| format!("{l}\n"))
                .collect::<String>()
        ));
    }
    None
}

/// Runs a group's commands in order; their problems. A doc's commands write only into
/// the folders `.gitignore` ignores (the help pages' examples are the binary's own).
fn run_group(bin: &Path, base: &Path, n: usize, cmds: &[&Cmd], ignored: &[String]) -> Vec<String> {
    let work = scratch(base, n);
    let files = || {
        let mut all = BTreeSet::new();
        files_under(&work, &work, &mut all);
        all
    };
    let mut seen = files();
    let mut problems = Vec::new();
    let mut done: Vec<&str> = Vec::new();
    for c in cmds {
        let exits = match &c.mark {
            Mark::Run(Some(code)) => vec![*code],
            _ => documented_exits(&c.text),
        };
        if let Mark::After(setup) = &c.mark {
            for s in setup.iter() {
                if done.contains(s) {
                    continue;
                }
                let at = format!("{} (making its input)", c.at);
                problems.extend(run_one(bin, &work, &at, s, &documented_exits(s)));
                done.push(s);
            }
        }
        problems.extend(run_one(bin, &work, &c.at, &c.text, &exits));
        let now = files();
        if !c.doc.starts_with("help") {
            for f in now.difference(&seen) {
                let top = f.components().next().unwrap().as_os_str().to_string_lossy();
                if f.components().count() < 2 || !ignored.iter().any(|d| *d == top) {
                    problems.push(format!(
                        "{}: `{}` wrote {}, outside the folders .gitignore ignores ({ignored:?})",
                        c.at,
                        c.text,
                        f.display()
                    ));
                }
            }
        }
        seen = now;
    }
    let _ = std::fs::remove_dir_all(work.parent().unwrap());
    problems
}

/// A copy of the binary alone in `base/bin`, ready to run (see common::Alone).
fn binary_alone(base: &Path) -> PathBuf {
    let bin = base.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    common::copy_binary_into(&bin);
    bin
}

#[test]
fn every_printed_command_is_run_or_marked() {
    let mut problems = Vec::new();
    let cmds = all_commands(&mut problems);
    let count = |f: fn(&Mark) -> bool| cmds.iter().filter(|c| f(&c.mark)).count();
    let (run, by, templates) = (
        count(|m| matches!(m, Mark::Run(_) | Mark::After(_))),
        count(|m| matches!(m, Mark::RunBy(_))),
        count(|m| matches!(m, Mark::Template(_))),
    );
    eprintln!(
        "{} commands: {run} run here, {by} run by other tests, {templates} templates",
        cmds.len()
    );
    if std::env::var_os("DOC_COMMANDS_LIST").is_some() {
        for c in &cmds {
            eprintln!("{}  [{}]  {:?}\n    {}", c.at, c.group, c.mark, c.text);
        }
    }
    assert!(
        run >= 30 && by >= 15 && cmds.len() >= 80,
        "too few commands found"
    );

    for c in &cmds {
        match &c.mark {
            Mark::RunBy(path) => {
                if let Err(e) = run_by(c, path) {
                    problems.push(format!("{}: `{}`: {e}", c.at, c.text));
                }
            }
            Mark::Run(_) | Mark::After(_) if argv(&c.text)[0] == "cargo" => problems.push(format!(
                "{}: `{}`: cargo does not run inside a test (it would build): mark it `run by` the test that runs it, or `template: why`",
                c.at, c.text
            )),
            _ => {}
        }
    }

    // The groups to run, in the order of their first command.
    let mut groups: Vec<(String, Vec<&Cmd>)> = Vec::new();
    for c in cmds
        .iter()
        .filter(|c| matches!(c.mark, Mark::Run(_) | Mark::After(_)))
        .filter(|c| argv(&c.text)[0] != "cargo")
    {
        match groups.iter_mut().find(|(g, _)| *g == c.group) {
            Some((_, v)) => v.push(c),
            None => groups.push((c.group.clone(), vec![c])),
        }
    }
    let ignored: Vec<String> = std::fs::read_to_string(root().join(".gitignore"))
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix('/'))
        .map(|l| l.trim_end_matches('/').to_string())
        .filter(|l| l != "target")
        .collect();
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("doc_commands-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let bin = binary_alone(&base);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let found = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((_, g)) = groups.get(n) else { break };
                    let p = run_group(&bin, &base, n, g, &ignored);
                    found.lock().unwrap().extend(p);
                }
            });
        }
    });
    problems.extend(found.into_inner().unwrap());
    let _ = std::fs::remove_dir_all(&base);
    assert!(
        problems.is_empty(),
        "{} problems with printed commands:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_reader_finds_commands_as_the_docs_write_them() {
    let doc = "\
# A

Some text.

<!-- run by tests/x.rs -->
```
$ reconsim fuzz a --seeds 0..10
output line
reconsim replay failures/x.json
$ reconsim shrink \\
    x.json -o out/y.json
```

```sh
# a comment
RUST_LOG=debug reconsim fuzz b
cargo test --release
for s in a b; do
  reconsim run $s
done
not a command
```

```rust
reconsim::cli::main();
```

<!-- template: x.json is yours -->
```
reconsim explain x.json
```
";
    let mut problems = Vec::new();
    let cmds = doc_commands("d.md", doc, &mut problems);
    assert!(problems.is_empty(), "{problems:?}");
    let texts: Vec<&str> = cmds.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "reconsim fuzz a --seeds 0..10",
            "reconsim shrink \\\n    x.json -o out/y.json",
            "RUST_LOG=debug reconsim fuzz b",
            "cargo test --release",
            "for s in a b; do\n  reconsim run $s\ndone",
            "reconsim explain x.json",
        ]
    );
    assert_eq!(cmds[0].mark, Mark::RunBy("tests/x.rs".into()));
    assert!(cmds[0].prompted && !cmds[2].prompted);
    assert_eq!(cmds[1].at, "d.md:10");
    assert_eq!(cmds[2].mark, Mark::Run(None));
    assert_eq!(cmds[5].mark, Mark::Template("x.json is yours".into()));
    // A mark that marks nothing is a problem.
    let mut problems = Vec::new();
    doc_commands(
        "d.md",
        "<!-- template: why -->\ntext\n```\nx\n```\n",
        &mut problems,
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(documented_exits("reconsim fuzz x"), [0, 1]);
    assert_eq!(documented_exits("RUST_LOG=x reconsim replay f.json"), [0]);
}
