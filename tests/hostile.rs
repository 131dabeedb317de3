//! The CLI under hostile input (issue 16): one test per class of hole a hostile tester
//! found, each of which failed before it was closed, and a fuzz harness of our own that
//! mutates shipped scenarios, failure files and arguments and asserts what must hold
//! whatever the input:
//! - the exit code is 0, 1 or 2, and nothing panics;
//! - nothing is written outside the directory asked for (each invocation runs in a
//!   sandbox whose whole tree is compared before and after);
//! - time and memory stay bounded (a deadline per invocation, the peak resident set
//!   read from the kernel's rusage);
//! - a saved failure is never lost (a failure file placed in the output directory
//!   beforehand is byte for byte the same afterwards).
//!
//! The harness's case count is `RECONSIM_HOSTILE_CASES` (default 100, what CI runs);
//! its cases come from a fixed seed, so a failure here reproduces. It counts the cases
//! of each class of hostile input it tried (docs/hostile-input.md has the classes and a
//! report). Special files (FIFOs, character devices made with mknod as root) are made in
//! each sandbox's own folder: the system's /dev is never touched.

mod common;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_reconsim");

/// What one invocation did.
#[derive(Debug)]
struct Ran {
    /// `None`: killed by a signal (or by the deadline).
    code: Option<i32>,
    stdout: String,
    stderr: String,
    max_rss_kb: i64,
    timed_out: bool,
}

/// Run the binary in `cwd` with `env` added and a deadline; the peak memory comes from
/// `wait4`.
// The child is reaped by wait4, which std's wait cannot do with its rusage.
#[allow(clippy::zombie_processes)]
fn run_in(cwd: &Path, args: &[impl AsRef<OsStr>], env: &[(&str, &str)], deadline: Duration) -> Ran {
    let mut child = Command::new(BIN)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let pid = child.id() as libc::pid_t;
    let start = Instant::now();
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut timed_out = false;
    loop {
        // SAFETY: pid is our own child, not yet reaped; the pointers are valid.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        assert!(r == 0, "wait4 failed");
        if start.elapsed() > deadline {
            timed_out = true;
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    Ran {
        code,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        max_rss_kb: usage.ru_maxrss,
        timed_out,
    }
}

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// A fresh directory tree for one invocation: `work/` is the current directory,
/// `work/in/` holds inputs and `work/out/` is the directory outputs are asked for in.
struct Sandbox {
    root: PathBuf,
}

impl Sandbox {
    fn new(tag: &str) -> Sandbox {
        let root =
            std::env::temp_dir().join(format!("reconsim-hostile-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("work/in")).unwrap();
        std::fs::create_dir_all(root.join("work/out")).unwrap();
        Sandbox { root }
    }

    fn work(&self) -> PathBuf {
        self.root.join("work")
    }

    fn input(&self, name: &str, text: &str) -> String {
        std::fs::write(self.work().join("in").join(name), text).unwrap();
        format!("in/{name}")
    }

    fn run(&self, a: &[String]) -> Ran {
        self.run_with(a, &[])
    }

    fn run_with(&self, a: &[impl AsRef<OsStr>], env: &[(&str, &str)]) -> Ran {
        run_in(&self.work(), a, env, Duration::from_secs(120))
    }

    /// `work/special/`: a FIFO, a directory, a dangling symlink, symlinks to the FIFO and
    /// the directory and, as root, character devices of its own (null 1:3, full 1:7,
    /// zero 1:5) and symlinks to them. Returns whether the devices were made.
    fn specials(&self) -> bool {
        let d = self.work().join("special");
        std::fs::create_dir_all(d.join("dir")).unwrap();
        assert!(common::make_fifo(&d.join("fifo")), "mkfifo");
        let link = |to: &str, name: &str| std::os::unix::fs::symlink(to, d.join(name)).unwrap();
        link("nothing-here", "dangling");
        link("fifo", "to-fifo");
        link("dir", "to-dir");
        let mut devices = true;
        for (name, minor) in DEVICES {
            devices &= common::make_char_device(&d.join(name), 1, minor);
            link(name, &format!("to-{name}"));
        }
        // What the comparisons before and after see: never "missing" for all.
        assert_eq!(common::file_identity(&d.join("fifo")), "fifo");
        assert_eq!(common::file_identity(&d.join("to-dir")), "symlink to dir");
        if devices {
            let null = common::file_identity(&d.join("null"));
            assert!(null.starts_with("char device "), "{null}");
        }
        devices
    }

    /// What each of `special/`'s entries is (see [`common::file_identity`]).
    fn special_identities(&self) -> Vec<(String, String)> {
        SPECIALS
            .iter()
            .chain(["zero", "to-zero"].iter())
            .map(|n| {
                let p = self.work().join("special").join(n);
                (n.to_string(), common::file_identity(&p))
            })
            .collect()
    }

    /// Every file under the root with its bytes; a file that is not a regular file
    /// (FIFO, device, symlink) with what it is instead, never opened; symlinks are not
    /// followed.
    fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        fn walk(d: &Path, into: &mut BTreeMap<PathBuf, Vec<u8>>) {
            for e in std::fs::read_dir(d).unwrap().flatten() {
                let p = e.path();
                let t = e.file_type().unwrap();
                if t.is_dir() {
                    walk(&p, into);
                } else if t.is_file() {
                    into.insert(p.clone(), std::fs::read(&p).unwrap_or_default());
                } else {
                    let what = format!("\0special: {}", common::file_identity(&p));
                    into.insert(p.clone(), what.into_bytes());
                }
            }
        }
        let mut m = BTreeMap::new();
        walk(&self.root, &mut m);
        m
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn shipped(name: &str) -> Value {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(format!("{name}.json")),
    )
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A failure file of `machineapi-lease-expiry-pause` (seed 5 fails), made once per test.
fn failure_text(sb: &Sandbox) -> String {
    let r = sb.run(&args(&[
        "run",
        "machineapi-lease-expiry-pause",
        "--seed",
        "5",
        "--save-failure",
        "in/seed-5.json",
    ]));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    std::fs::read_to_string(sb.work().join("in/seed-5.json")).unwrap()
}

fn expect_usage_error(r: &Ran, needle: &str) {
    assert_eq!(r.code, Some(2), "stdout {} stderr {}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains(needle),
        "stderr should name {needle:?}: {}",
        r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}

// 1. Names reach file paths: checked at load.
#[test]
fn unsafe_scenario_names_are_refused_at_load() {
    let sb = Sandbox::new("names");
    for name in [
        "../escaped".to_string(),
        "a/b".to_string(),
        "x".repeat(1_000_000),
        "a\n  replay: reconsim replay /etc/passwd".to_string(),
        String::new(),
    ] {
        let mut s = shipped("machineapi-lease-expiry-pause");
        s["name"] = json!(name);
        let file = sb.input("s.json", &s.to_string());
        let before = sb.snapshot();
        let r = sb.run(&args(&[
            "fuzz",
            &file,
            "--seeds",
            "0..20",
            "--failures-dir",
            "out",
        ]));
        expect_usage_error(&r, "at .name: a safe name");
        assert!(r.stderr.len() < 1_000, "the message is bounded");
        assert_eq!(sb.snapshot(), before, "nothing written");
    }
}

// 2. An unsaved failure is never reported as saved.
#[test]
fn a_failure_that_cannot_be_saved_is_an_error_with_no_replay_line_for_it() {
    let sb = Sandbox::new("unsaved");
    // The seed's file name is taken by a directory: the save fails mid-campaign.
    std::fs::create_dir_all(
        sb.work()
            .join("out/machineapi-lease-expiry-pause-seed-5.json"),
    )
    .unwrap();
    let r = sb.run(&args(&[
        "fuzz",
        "machineapi-lease-expiry-pause",
        "--seeds",
        "0..20",
        "--failures-dir",
        "out",
    ]));
    expect_usage_error(&r, "cannot write the failure file");
    assert!(
        !r.stdout.contains(&format!(
            "replay: {BIN} replay out/machineapi-lease-expiry-pause-seed-5"
        )),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!(
            "replay: {BIN} run machineapi-lease-expiry-pause --seed 5"
        )),
        "{}",
        r.stdout
    );
    // A directory that cannot hold files is refused before any run.
    std::fs::write(sb.work().join("in/plain"), "").unwrap();
    let r = sb.run(&args(&[
        "fuzz",
        "machineapi-lease-expiry-pause",
        "--failures-dir",
        "in/plain/sub",
    ]));
    expect_usage_error(&r, "cannot create the failures directory");
}

// 3. shrink checks that its input reproduces and that its output replays.
#[test]
fn shrink_refuses_a_failure_that_does_not_reproduce_and_verifies_its_output() {
    let sb = Sandbox::new("shrink");
    let text = failure_text(&sb);
    let mut emptied: Value = serde_json::from_str(&text).unwrap();
    emptied["plan"] = json!([]);
    let mut edited: Value = serde_json::from_str(&text).unwrap();
    edited["invariant"] = json!("no_leaked_instances");
    for (name, doc) in [("emptied.json", emptied), ("edited.json", edited)] {
        let file = sb.input(name, &doc.to_string());
        let r = sb.run(&args(&["shrink", &file, "-o", "out/small.json"]));
        assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
        assert!(r.stdout.contains("NOT reproduced"), "{}", r.stdout);
        assert!(!r.stdout.contains("still"), "{}", r.stdout);
        assert!(!sb.work().join("out/small.json").exists());
    }
    let r = sb.run(&args(&["shrink", "in/seed-5.json", "-o", "out/small.json"]));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("the output replays"), "{}", r.stdout);
    let r = sb.run(&args(&["replay", "out/small.json"]));
    assert_eq!(r.code, Some(0), "{}", r.stdout);
}

// 4. No silent overwrites.
#[test]
fn outputs_never_replace_the_input_nor_an_existing_file_unasked() {
    let sb = Sandbox::new("overwrite");
    let text = failure_text(&sb);
    for o in ["in/seed-5.json", "./in/seed-5.json", "in/../in/seed-5.json"] {
        for force in [false, true] {
            let mut a = args(&["shrink", "in/seed-5.json", "-o", o]);
            if force {
                a.push("--force".into());
            }
            let r = sb.run(&a);
            expect_usage_error(&r, "would replace the input");
        }
    }
    assert_eq!(
        std::fs::read_to_string(sb.work().join("in/seed-5.json")).unwrap(),
        text
    );
    std::fs::write(sb.work().join("out/keep.json"), "precious").unwrap();
    let r = sb.run(&args(&["shrink", "in/seed-5.json", "-o", "out/keep.json"]));
    expect_usage_error(&r, "the file exists");
    assert_eq!(
        std::fs::read_to_string(sb.work().join("out/keep.json")).unwrap(),
        "precious"
    );
    let r = sb.run(&args(&[
        "shrink",
        "in/seed-5.json",
        "-o",
        "out/keep.json",
        "--force",
    ]));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    // run --save-failure keeps a different failure, and a Chrome trace an existing file.
    let r = sb.run(&args(&[
        "run",
        "machineapi-lease-expiry-pause",
        "--seed",
        "14",
        "--save-failure",
        "in/seed-5.json",
    ]));
    expect_usage_error(&r, "holds another failure");
    assert_eq!(
        std::fs::read_to_string(sb.work().join("in/seed-5.json")).unwrap(),
        text
    );
    let r = sb.run(&args(&[
        "replay",
        "in/seed-5.json",
        "--chrome-trace",
        "in/seed-5.json",
    ]));
    expect_usage_error(&r, "would replace the input");
    let r = sb.run(&args(&[
        "replay",
        "in/seed-5.json",
        "--chrome-trace",
        "out/t.json",
    ]));
    assert_eq!(r.code, Some(0));
    assert!(
        r.stderr.contains("wrote the Chrome trace to out/t.json"),
        "{}",
        r.stderr
    );
}

// 5. A saved failure is never replaced by a different one.
#[test]
fn re_fuzzing_an_edited_scenario_keeps_every_saved_failure() {
    let sb = Sandbox::new("refuzz");
    let fuzz = |file: &str| {
        sb.run(&args(&[
            "fuzz",
            file,
            "--seeds",
            "0..24",
            "--failures-dir",
            "out",
        ]))
    };
    let r = fuzz("machineapi-lease-expiry-pause");
    assert_eq!(r.code, Some(1));
    let first = sb.snapshot();
    assert!(first.len() >= 2, "two failures at least: {first:?}");
    // The same name, another scenario: its failures go beside, under new names.
    let mut edited = shipped("machineapi-lease-expiry-pause");
    edited["net"]["latency_ms"] = json!([2, 6]);
    let file = sb.input("edited.json", &edited.to_string());
    let r = fuzz(&file);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let after = sb.snapshot();
    for (path, bytes) in &first {
        assert_eq!(
            after.get(path),
            Some(bytes),
            "{} was replaced",
            path.display()
        );
    }
    assert!(after.len() > first.len());
    // Every saved file replays, and the replay line names a file that exists.
    let line = r.stdout.lines().find(|l| l.contains("replay:")).unwrap();
    let named = line.rsplit(' ').next().unwrap();
    assert!(sb.work().join(named).exists(), "{line}");
    // Fuzzing the same scenario again writes nothing new: the same failures are there.
    let r = fuzz(&file);
    assert_eq!(r.code, Some(1));
    assert_eq!(sb.snapshot().len(), after.len());
}

// 6. merge checks what it is given.
#[test]
fn merge_refuses_duplicate_overlapping_and_missing_shards() {
    let sb = Sandbox::new("merge");
    let result = |name: &str, extra: &[&str]| {
        let mut a = args(&["fuzz", "machineapi-lease-expiry-pause", "--json"]);
        a.extend(args(extra));
        let r = sb.run(&a);
        std::fs::write(sb.work().join("in").join(name), &r.stdout).unwrap();
        format!("in/{name}")
    };
    let s0 = result("s0.json", &["--seeds", "0..30", "--shard", "0/2"]);
    let s1 = result("s1.json", &["--seeds", "0..30", "--shard", "1/2"]);
    let r = sb.run(&args(&["merge", &s0, &s1]));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let doc: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["first_failure_seed"], 5);
    assert_eq!(doc["complete"], true);
    std::fs::copy(sb.work().join(&s1), sb.work().join("in/s1-copy.json")).unwrap();
    expect_usage_error(&sb.run(&args(&["merge", &s0, &s1, &s1])), "given twice");
    expect_usage_error(
        &sb.run(&args(&["merge", &s0, &s1, "in/s1-copy.json"])),
        "covers the same seeds",
    );
    expect_usage_error(
        &sb.run(&args(&["merge", &s1])),
        "missing the results of shard 0/2",
    );
    let a = result("a.json", &["--seeds", "0..20"]);
    let b = result("b.json", &["--seeds", "10..30"]);
    let c = result("c.json", &["--seeds", "25..30"]);
    expect_usage_error(&sb.run(&args(&["merge", &a, &b])), "overlap");
    expect_usage_error(
        &sb.run(&args(&["merge", &a, &c])),
        "seeds 20..25 are missing",
    );
    let t = result("t.json", &["--seeds", "0..30", "--shard", "0/3"]);
    expect_usage_error(&sb.run(&args(&["merge", &s0, &t])), "they overlap");
}

// 7. Seed ranges are never collected; a campaign's memory is flat.
#[test]
fn a_huge_seed_range_runs_in_flat_memory() {
    let sb = Sandbox::new("range");
    let small = sb.run(&args(&[
        "fuzz",
        "machineapi-no-leader-election",
        "--seeds",
        "0..50",
        "--json",
    ]));
    assert_eq!(small.code, Some(1));
    let huge = sb.run(&args(&[
        "fuzz",
        "machineapi-no-leader-election",
        "--seeds",
        "0..18446744073709551615",
        "--time-budget",
        "2s",
        "--json",
    ]));
    assert_eq!(huge.code, Some(1), "{}", huge.stderr);
    let doc: Value = serde_json::from_str(&huge.stdout).unwrap();
    let runs = doc["runs"].as_u64().unwrap();
    assert!(runs >= 50, "{runs}");
    let failures = doc["failures"].as_array().unwrap().len() as u64;
    assert!(failures * 10 >= runs * 9, "{failures} of {runs}");
    // Nearly every one of those seeds fails; memory stays within 2x of fifty seeds'.
    assert!(
        huge.max_rss_kb < 2 * small.max_rss_kb.max(20_000),
        "{} KB for {runs} failing seeds against {} KB for 50",
        huge.max_rss_kb,
        small.max_rss_kb
    );
}

fn with(name: &str, edit: impl Fn(&mut Value)) -> String {
    let mut s = shipped(name);
    edit(&mut s);
    s.to_string()
}

// 8 and 9. Every user number is bounded at load; every resource has a named limit.
#[test]
fn numbers_and_resources_beyond_their_limits_are_usage_errors() {
    let sb = Sandbox::new("limits");
    let m = "machineapi-no-leader-election";
    let cases: Vec<(String, &str)> = vec![
        (
            with(m, |s| s["net"]["latency_ms"] = json!([0u64, u64::MAX])),
            "at .net.latency_ms[1]: at most",
        ),
        (
            with(m, |s| s["faults"][0]["at_ms"] = json!([0u64, u64::MAX])),
            "at .faults[0].at_ms[1]: at most",
        ),
        (
            with(m, |s| s["duration_ms"] = json!(u64::MAX)),
            "at .duration_ms: a duration from 1 to",
        ),
        (
            with(m, |s| {
                s["controllers"]["machine_api"]["machine_sets"][0]["replicas"] = json!(1_000_000)
            }),
            "replicas: at most 64 (REPLICAS_MAX)",
        ),
        (
            with(m, |s| s["seeds"] = json!(u64::MAX)),
            "at .seeds: a seed budget from 1 to",
        ),
        (
            with(m, |s| s["apiserver"] = json!({"watch_delay_ms": [9, 1]})),
            "at .apiserver.watch_delay_ms",
        ),
        (
            with(m, |s| {
                s["faults"] = json!([{"count": [1, 1], "at_ms": [0, 10], "duration_ms": [10, 20],
                    "fault": {"watch_lag": {"lag_ms": [1, 2], "kinds": ["machine"]}}}]);
            }),
            "at .faults[0].fault.watch_lag.kinds[0]: a kind's name",
        ),
        (
            with(m, |s| s["cloud"]["subnet_size"] = json!(0)),
            "at .cloud.subnet_size: a number of addresses from 1 to 16777214",
        ),
        (
            with(m, |s| {
                s["faults"] = json!([{"count": [1, 1], "at_ms": [0, 10], "duration_ms": [10, 20],
                    "fault": {"terminate_instance": {"launch": [0, 2]}}}]);
            }),
            "at .faults[0].fault.terminate_instance.launch: launches counted from 1",
        ),
        (
            with(m, |s| {
                s["faults"] = json!([{"count": [1, 1], "at_ms": [0, 10], "duration_ms": [10, 20],
                    "fault": {"terminate_instance": {"tag": "=web"}}}]);
            }),
            "at .faults[0].fault.terminate_instance.tag",
        ),
        (
            with(m, |s| {
                let sets: Vec<Value> = (0..5_000)
                    .map(|i| json!({"name": format!("ms-{i}"), "replicas": 1}))
                    .collect();
                s["controllers"]["machine_api"]["machine_sets"] = json!(sets);
            }),
            "machine_sets: at most 1024 items (LIST_ITEMS_MAX)",
        ),
    ];
    for (text, needle) in cases {
        let file = sb.input("s.json", &text);
        let start = Instant::now();
        expect_usage_error(&sb.run(&args(&["run", &file])), needle);
        assert!(start.elapsed() < Duration::from_secs(10));
    }
    // A scenario that never ends: a zero device of the sandbox's own (as root).
    if sb.specials() {
        expect_usage_error(&sb.run(&args(&["run", "special/zero"])), "FILE_BYTES_MAX");
    } else {
        eprintln!("skipped `run special/zero`: mknod of a character device needs root");
    }
    expect_usage_error(
        &sb.run(&args(&["fuzz", m, "--jobs", "100000"])),
        "--jobs: expected 1 to 256",
    );
    expect_usage_error(
        &sb.run(&args(&["search", m, "--seeds", "0..18446744073709551615"])),
        "SEARCH_SEEDS_MAX",
    );
    expect_usage_error(
        &sb.run(&args(&["search", m, "--max-plans", "18446744073709551615"])),
        "SEARCH_PLANS_MAX",
    );
}

// 10. Durations never overflow into something else.
#[test]
fn a_time_budget_that_overflows_is_an_error() {
    let sb = Sandbox::new("budget");
    for b in [
        "18446744073709552s",
        "18446744073709551615h",
        "721h",
        "0s",
        "5x",
    ] {
        expect_usage_error(
            &sb.run(&args(&[
                "fuzz",
                "machineapi-leader-election",
                "--time-budget",
                b,
            ])),
            "--time-budget",
        );
    }
}

// 11. Plans are checked against their scenario.
#[test]
fn a_plan_naming_what_the_world_lacks_is_refused_with_its_path() {
    let sb = Sandbox::new("plan");
    let text = failure_text(&sb);
    let edit = |name: &str, f: &dyn Fn(&mut Value)| {
        let mut d: Value = serde_json::from_str(&text).unwrap();
        f(&mut d);
        sb.input(name, &d.to_string())
    };
    let cases: Vec<(String, &str)> = vec![
        (
            edit("e0.json", &|d| {
                d["plan"][0]["fault"] = json!({"kind": "pause_host", "host": "master-9"})
            }),
            "at .plan[0].fault.host: a host of the scenario",
        ),
        (
            edit("e1.json", &|d| {
                d["plan"][0]["fault"] = json!({"kind": "crash", "process": "nobody"})
            }),
            "at .plan[0].fault.process: a process that exists in this run",
        ),
        (
            edit("e2.json", &|d| d["plan"][0]["at_ms"] = json!(99_999_999)),
            "at .plan[0].at_ms: a time within the scenario's duration_ms",
        ),
        (
            edit("e3.json", &|d| {
                d["plan"][0]["fault"] = json!({"kind": "drop_message"})
            }),
            "at .plan[0].on: an anchor",
        ),
        (
            edit("e4.json", &|d| d["invariant"] = json!("bogus")),
            "at .invariant: an invariant the scenario checks",
        ),
    ];
    for (file, needle) in cases {
        for cmd in ["replay", "explain"] {
            expect_usage_error(&sb.run(&args(&[cmd, &file])), needle);
        }
    }
}

// 12. explain explains the file's failure or says it does not reproduce.
#[test]
fn explain_replays_first() {
    let sb = Sandbox::new("explain");
    let text = failure_text(&sb);
    let mut d: Value = serde_json::from_str(&text).unwrap();
    d["invariant"] = json!("no_leaked_instances");
    let file = sb.input("edited.json", &d.to_string());
    let r = sb.run(&args(&["explain", &file]));
    assert_eq!(r.code, Some(1));
    assert!(r.stdout.contains("NOT reproduced"), "{}", r.stdout);
    let mut d: Value = serde_json::from_str(&text).unwrap();
    d["scenario"]["net"]["latency_ms"] = json!([1, 9]);
    let file = sb.input("edited.json", &d.to_string());
    let r = sb.run(&args(&["explain", &file]));
    assert_eq!(r.code, Some(1));
    assert!(r.stdout.contains("NOT reproduced"), "{}", r.stdout);
    let r = sb.run(&args(&["explain", "in/seed-5.json"]));
    assert_eq!(r.code, Some(0), "{}", r.stdout);
}

// 13. Parsing is strict.
#[test]
fn lenient_parses_are_refused() {
    let sb = Sandbox::new("strict");
    let m = "machineapi-leader-election";
    let text = shipped(m).to_string();
    let cases: Vec<(String, &str)> = vec![
        (format!("{text} trailing"), "nothing after it"),
        (format!("{text}{text}"), "nothing after it"),
        ("[]".into(), "a JSON object (a scenario), not an array"),
        (
            serde_json::to_string(&shipped(m).as_object().unwrap().values().collect::<Vec<_>>())
                .unwrap(),
            "a JSON object (a scenario), not an array",
        ),
        (
            with(m, |s| {
                s["controllers"]["machine_api"]["lease"] = json!({
                    "lease_duration_ms": 15000, "renew_deadline_ms": 10000, "retry_period_ms": 0
                })
            }),
            "client-go's rule",
        ),
        (
            with(m, |s| s["topology"]["worker_nodes"] = json!([""])),
            "at .topology.worker_nodes[0]: a node name",
        ),
        (
            with(m, |s| {
                s.as_object_mut().unwrap().remove("convergence");
                s["faults"][0]["at_ms"] = json!([3_000_000, 3_000_001]);
            }),
            "at .faults[0].at_ms: start times within duration_ms",
        ),
        (
            with(m, |s| s["name"] = json!("x\n  replay: rm -rf")),
            "at .name: a safe name",
        ),
        (
            with(m, |s| s["net"] = json!([[1, 5]])),
            "at .net: an object with named fields, not an array",
        ),
    ];
    for (text, needle) in cases {
        let file = sb.input("s.json", &text);
        expect_usage_error(&sb.run(&args(&["run", &file])), needle);
    }
}

// 14. Concurrent campaigns into one directory do not collide.
#[test]
fn concurrent_campaigns_share_a_failures_directory() {
    let sb = Sandbox::new("concurrent");
    let spawn = || {
        let work = sb.work();
        std::thread::spawn(move || {
            run_in(
                &work,
                &args(&[
                    "fuzz",
                    "machineapi-no-leader-election",
                    "--seeds",
                    "0..60",
                    "--failures-dir",
                    "out",
                ]),
                &[],
                Duration::from_secs(120),
            )
        })
    };
    let (a, b) = (spawn(), spawn());
    for r in [a.join().unwrap(), b.join().unwrap()] {
        assert_eq!(r.code, Some(1), "{}", r.stderr);
        assert!(!r.stderr.contains("error"), "{}", r.stderr);
    }
    let files: Vec<String> = std::fs::read_dir(sb.work().join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        files.len(),
        60,
        "one file per seed, no temporary left: {files:?}"
    );
}

/// One mutation of a JSON document.
#[derive(Clone, Debug)]
enum Mutation {
    /// Replace the value at the `k`-th path (of all paths, in document order).
    Replace(usize, Value),
    Remove(usize),
    /// Add a field nobody knows at the `k`-th object.
    Unknown(usize),
}

fn hostile_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(u64::MAX)),
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!(1.5)),
        Just(json!(604_800_001u64)),
        Just(json!("")),
        Just(json!("../escaped")),
        Just(json!("a/b")),
        Just(json!("x\n  replay: evil")),
        Just(json!("nobody")),
        Just(json!("master-9")),
        // Names the API server refuses: a space, capitals, a dot-dot, 300 characters.
        Just(json!("has space")),
        Just(json!("Capital..Dots")),
        Just(json!("n".repeat(300))),
        Just(json!([])),
        Just(json!([1, 2])),
        Just(json!([u64::MAX, 0])),
        Just(json!({})),
        Just(Value::Null),
        Just(json!(true)),
        (0u64..5_000_000).prop_map(|n| json!(n)),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        6 => (any::<usize>(), hostile_value()).prop_map(|(k, v)| Mutation::Replace(k, v)),
        1 => any::<usize>().prop_map(Mutation::Remove),
        1 => any::<usize>().prop_map(Mutation::Unknown),
    ]
}

/// Paths of every value in `v`, in document order, as JSON pointers.
fn pointers(v: &Value, at: String, into: &mut Vec<String>) {
    into.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                pointers(x, format!("{at}/{k}"), into);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                pointers(x, format!("{at}/{i}"), into);
            }
        }
        _ => {}
    }
}

fn apply(doc: &mut Value, m: &Mutation) {
    let mut ps = Vec::new();
    pointers(doc, String::new(), &mut ps);
    match m {
        Mutation::Replace(k, v) => {
            if let Some(x) = doc.pointer_mut(&ps[k % ps.len()]) {
                *x = v.clone();
            }
        }
        Mutation::Remove(k) => {
            let p = &ps[k % ps.len()];
            if let Some((parent, key)) = p.rsplit_once('/')
                && let Some(Value::Object(o)) = doc.pointer_mut(parent)
            {
                o.remove(key);
            }
        }
        Mutation::Unknown(k) => {
            let objects: Vec<&String> = ps
                .iter()
                .filter(|p| doc.pointer(p).is_some_and(Value::is_object))
                .collect();
            let p = objects[k % objects.len()].clone();
            if let Some(Value::Object(o)) = doc.pointer_mut(&p) {
                o.insert("unknown_field".into(), json!(1));
            }
        }
    }
}

/// The inputs and the command of one harness case.
#[derive(Clone, Debug)]
struct Case {
    scenario: usize,
    scenario_mutations: Vec<Mutation>,
    failure_mutations: Vec<Mutation>,
    /// Cut the scenario's text at this fraction (per mille), or leave it whole.
    truncate: Option<u16>,
    command: usize,
    seeds: usize,
    jobs: usize,
    /// Indices into the command's own flags ([`FLAGS`]), and one hostile argument or not.
    flags: Vec<usize>,
    stray: Option<usize>,
    /// One input of round three's classes (issue 31), or none.
    extra: Option<Extra>,
}

/// Round three's classes (issue 31): each changes the case's inputs, its arguments or
/// its environment (and, where the command cannot take it, the command).
#[derive(Clone, Debug)]
enum Extra {
    /// One of the command's output flags ([`OUTPUTS`]) onto one of the sandbox's special
    /// files ([`SPECIALS`]), with `--force` or without.
    Output {
        flag: usize,
        target: usize,
        force: bool,
    },
    /// `--set` with one of [`SETS`], or past their end a 100 KB value ([`set_spec`]).
    Set(usize),
    /// The scenario is a variant (`extends`) whose name is its base's.
    SameName,
    /// The failure file's trace hash in capitals.
    HashCapitals,
    /// `RECONSIM_SCENARIOS` empty or blank ([`BLANKS`]); the scenario given by name.
    BlankEnv(usize),
    /// A path argument whose bytes are not UTF-8: the input, or the output.
    NotUtf8 { output: bool },
    /// merge's second shard lists a failing seed twice.
    SeedTwice,
}

const SCENARIOS: [&str; 3] = [
    "machineapi-lease-expiry-pause",
    "kcp-upgrade-counts-deleting-1",
    "mco-gc-keep-latest-only",
];
const COMMANDS: [&str; 7] = [
    "run", "fuzz", "replay", "shrink", "explain", "search", "merge",
];
/// The commands that read a scenario, and those that read a failure file.
const TAKES_SCENARIO: [usize; 3] = [0, 1, 5];
const TAKES_FAILURE: [usize; 3] = [2, 3, 4];
const SEEDS: [&str; 10] = [
    "0..8",
    "0..3",
    "0..18446744073709551615",
    "5..3",
    "a..b",
    "18446744073709551614..18446744073709551615",
    "0..0",
    "3",
    "-1..2",
    "2..6",
];
const JOBS: [&str; 8] = ["1", "2", "2", "2", "1", "0", "100000", "x"];
/// Each command's own flags, as a user would combine them.
const FLAGS: [&[&[&str]]; 7] = [
    &[
        &["--json"],
        &["--timeline"],
        &["--force"],
        &["--chrome-trace", "out/c.json"],
        &["--seed", "18446744073709551615"],
    ],
    &[
        &["--json"],
        &["--stop-on-first"],
        &["--swarm"],
        &["--shard", "1/2"],
        &["--shard", "18446744073709551614/18446744073709551615"],
    ],
    &[&["--json"], &["--timeline"], &["--force"]],
    &[&["--json"], &["--force"], &["--max-runs", "1"]],
    &[],
    &[
        &["--json"],
        &["--no-pairs"],
        &["--stop-on-first"],
        &["--differential"],
        &["--beyond-envelope"],
    ],
    &[],
];
/// Arguments no command expects.
const STRAY: [&[&str]; 6] = [
    &["--time-budget", "18446744073709552s"],
    &["--max-runs", "0"],
    &["--jobs", "-3"],
    &["-o", "../escaped.json"],
    // The sandbox's own null device (as root; elsewhere a name with nothing behind it).
    &["--failures-dir", "special/null"],
    &["--seeds", "0..1..2"],
];
/// Each command's output flags (merge writes only to stdout), and whether it takes
/// `--force`.
const OUTPUTS: [&[&str]; 7] = [
    &["--save-failure", "--chrome-trace"],
    &["--failures-dir"],
    &["--chrome-trace", "--html"],
    &["-o"],
    &["--html"],
    &["--failures-dir"],
    &[],
];
const FORCE: [bool; 7] = [true, false, true, true, true, false, false];
/// The special files of each sandbox's `special/` that outputs are pointed at; the
/// devices exist only as root.
const SPECIALS: [&str; 9] = [
    "fifo", "dir", "dangling", "to-fifo", "to-dir", "null", "full", "to-null", "to-full",
];
const DEVICES: [(&str, u32); 3] = [("null", 3), ("full", 7), ("zero", 5)];
/// Hostile `--set`s, and whether each must be refused.
const SETS: [(&str, bool); 14] = [
    ("net..latency_ms=[1,5]", true),
    ("net.latency_ms.=[1,5]", true),
    ("..=1", true),
    ("=1", true),
    ("net.latency_ms", true),
    ("no_such_field=1", true),
    ("net.no_such_field=1", true),
    ("net[0]=1", true),
    ("faults[99].count=[1,1]", true),
    ("net.latency_ms[0=1", true),
    ("net.latency_ms=[0,18446744073709551615]", true),
    ("seeds=184467440737095516150", true),
    (".net.latency_ms=[1,5]", false),
    ("faults[0].count=[1,1]", false),
];
/// `SETS[k]`, or past their end a 100 KB description (taken) or name (refused).
fn set_spec(k: usize) -> (String, bool) {
    match SETS.get(k) {
        Some((s, refused)) => (s.to_string(), *refused),
        None if k == SETS.len() => (format!("description={}", "x".repeat(100_000)), false),
        None => (format!("name={}", "n".repeat(100_000)), true),
    }
}
/// `RECONSIM_SCENARIOS` values that name no directory.
const BLANKS: [&str; 4] = ["", " ", "\t", "\n \n"];

/// The classes the harness counts: the earlier rounds' and round three's ([`Extra`]).
const CLASSES: [&str; 12] = [
    "mutated scenario JSON",
    "truncated scenario file",
    "hostile seeds and jobs",
    "stray arguments",
    "tampered failure files and results",
    "outputs onto special files",
    "hostile --set paths and values",
    "a variant named as its base",
    "a trace hash in capitals",
    "empty or blank RECONSIM_SCENARIOS",
    "path arguments that are not UTF-8",
    "merge input listing a seed twice",
];
/// How many cases of each class passed.
static TRIED: [AtomicU64; CLASSES.len()] = [const { AtomicU64::new(0) }; CLASSES.len()];

impl Extra {
    /// Its index in [`CLASSES`].
    fn class(&self) -> usize {
        match self {
            Extra::Output { .. } => 5,
            Extra::Set(_) => 6,
            Extra::SameName => 7,
            Extra::HashCapitals => 8,
            Extra::BlankEnv(_) => 9,
            Extra::NotUtf8 { .. } => 10,
            Extra::SeedTwice => 11,
        }
    }
}

fn extra() -> impl Strategy<Value = Extra> {
    prop_oneof![
        3 => (0..2usize, 0..SPECIALS.len(), any::<bool>())
            .prop_map(|(flag, target, force)| Extra::Output { flag, target, force }),
        1 => (0..SETS.len() + 2).prop_map(Extra::Set),
        1 => Just(Extra::SameName),
        1 => Just(Extra::HashCapitals),
        1 => (0..BLANKS.len()).prop_map(Extra::BlankEnv),
        1 => any::<bool>().prop_map(|output| Extra::NotUtf8 { output }),
        1 => Just(Extra::SeedTwice),
    ]
}

fn few_mutations() -> impl Strategy<Value = Vec<Mutation>> {
    prop_oneof![
        5 => Just(Vec::new()),
        4 => proptest::collection::vec(mutation(), 1..2),
        1 => proptest::collection::vec(mutation(), 2..4),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        0..SCENARIOS.len(),
        few_mutations(),
        few_mutations(),
        proptest::option::weighted(0.1, 0u16..1000),
        0..COMMANDS.len(),
        (0..SEEDS.len(), 0..JOBS.len()),
        proptest::collection::vec(0..8usize, 0..3),
        proptest::option::weighted(0.1, 0..STRAY.len()),
        proptest::option::weighted(0.5, extra()),
    )
        .prop_map(
            |(scenario, sm, fm, truncate, command, (seeds, jobs), flags, stray, extra)| Case {
                scenario,
                scenario_mutations: sm,
                failure_mutations: fm,
                truncate,
                command,
                seeds,
                jobs,
                flags,
                stray,
                extra,
            },
        )
}

/// Point `flag`'s value at `value`: the flag's first occurrence, or a new one.
fn set_flag(a: &mut Vec<OsString>, flag: &str, value: impl Into<OsString>) {
    match a.iter().position(|x| x == flag) {
        Some(i) if i + 1 < a.len() => a[i + 1] = value.into(),
        _ => {
            a.push(flag.into());
            a.push(value.into());
        }
    }
}

/// How many cases exited 0, 1 and 2: the harness must exercise runs, not only refusals.
static EXITS: [AtomicU64; 3] = [const { AtomicU64::new(0) }; 3];

/// Run one case in a fresh sandbox and check what must hold whatever the input.
fn check_case(c: &Case, n: usize) -> Result<(), TestCaseError> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let sb = Sandbox::new(&format!("case-{n}"));
    let devices = sb.specials();
    let name = SCENARIOS[c.scenario];
    // The command, moved where the case's class needs one that takes it.
    let cmd = match &c.extra {
        Some(Extra::Output { .. }) if OUTPUTS[c.command].is_empty() => 0,
        Some(Extra::Set(_) | Extra::SameName | Extra::BlankEnv(_))
            if !TAKES_SCENARIO.contains(&c.command) =>
        {
            0
        }
        Some(Extra::HashCapitals) if !TAKES_FAILURE.contains(&c.command) => 2,
        Some(Extra::SeedTwice) => 6,
        _ => c.command,
    };
    let text = if let Some(Extra::SameName) = c.extra {
        json!({"extends": name, "name": name, "seeds": 3}).to_string()
    } else {
        let mut scenario = shipped(name);
        for m in &c.scenario_mutations {
            apply(&mut scenario, m);
        }
        let mut text = scenario.to_string();
        if let Some(t) = c.truncate {
            let cut = text.len() * t as usize / 1000;
            text.truncate(cut);
        }
        text
    };
    let scenario_file = sb.input("s.json", &text);
    // An empty or blank RECONSIM_SCENARIOS matters where a scenario is found by name.
    let scenario_arg = match c.extra {
        Some(Extra::BlankEnv(_)) => name.to_string(),
        _ => scenario_file.clone(),
    };
    // A failure file (of the unmutated scenario) to mutate; and one saved before, in the
    // output directory, that must survive.
    let failure = failure_text(&sb);
    let mut failure_doc: Value = serde_json::from_str(&failure).unwrap();
    if let Some(Extra::HashCapitals) = c.extra {
        let upper = failure_doc["trace_hash"]
            .as_str()
            .unwrap()
            .to_ascii_uppercase();
        failure_doc["trace_hash"] = json!(upper);
    }
    for m in &c.failure_mutations {
        apply(&mut failure_doc, m);
    }
    let failure_file = sb.input("f.json", &failure_doc.to_string());
    let saved = sb.work().join(format!("out/{name}-seed-5.json"));
    std::fs::write(&saved, &failure).unwrap();
    // merge takes fuzz results: the two shards of one campaign of the case's scenario,
    // the second mutated as failure files are (and listing a failing seed twice).
    let results: Vec<String> = if cmd == 6 {
        (0..2)
            .map(|i| {
                let shard = format!("{i}/2");
                let r = sb.run(&args(&[
                    "fuzz", name, "--seeds", "0..6", "--shard", &shard, "--json",
                ]));
                let mut doc: Value = serde_json::from_str(&r.stdout).unwrap();
                if i == 1 {
                    if let Some(Extra::SeedTwice) = c.extra {
                        let first = doc["failures"][0].clone();
                        doc["failures"].as_array_mut().unwrap().push(first);
                    }
                    for m in &c.failure_mutations {
                        apply(&mut doc, m);
                    }
                }
                sb.input(&format!("result-{i}.json"), &doc.to_string())
            })
            .collect()
    } else {
        Vec::new()
    };
    let (seeds, jobs) = (SEEDS[c.seeds], JOBS[c.jobs]);
    let a: Vec<String> = match cmd {
        0 => args(&[
            "run",
            &scenario_arg,
            "--seed",
            "5",
            "--save-failure",
            "out/r.json",
        ]),
        1 => args(&[
            "fuzz",
            &scenario_arg,
            "--seeds",
            seeds,
            "--jobs",
            jobs,
            "--failures-dir",
            "out",
            "--time-budget",
            "3s",
        ]),
        2 => args(&["replay", &failure_file, "--chrome-trace", "out/t.json"]),
        3 => args(&[
            "shrink",
            &failure_file,
            "-o",
            "out/small.json",
            "--max-runs",
            "30",
        ]),
        4 => args(&["explain", &failure_file]),
        5 => args(&[
            "search",
            &scenario_arg,
            "--seeds",
            seeds,
            "--jobs",
            jobs,
            "--max-plans",
            "6",
            "--failures-dir",
            "out",
        ]),
        _ => args(&["merge", &results[0], &results[1]]),
    };
    let mut a: Vec<OsString> = a.into_iter().map(OsString::from).collect();
    let own = FLAGS[cmd];
    let mut flags: Vec<usize> = c
        .flags
        .iter()
        .filter(|f| **f < own.len())
        .copied()
        .collect();
    flags.sort_unstable();
    flags.dedup();
    // A flag the command already has takes the new value (clap refuses a flag given
    // twice, which would leave the value untried).
    for f in flags {
        match own[f] {
            [flag, value] => set_flag(&mut a, flag, *value),
            [flag] if !a.iter().any(|x| x == *flag) => a.push(flag.into()),
            _ => {}
        }
    }
    if let Some(k) = c.stray {
        a.extend(STRAY[k].iter().map(OsString::from));
    }
    // Round three's classes.
    let mut env: Vec<(&str, &str)> = Vec::new();
    let mut extra_tried = c.extra.is_some();
    match &c.extra {
        Some(Extra::Output {
            flag,
            target,
            force,
        }) => {
            let t = SPECIALS[*target];
            if !devices && (t.ends_with("null") || t.ends_with("full")) {
                eprintln!(
                    "skipped a case onto special/{t}: mknod of a character device needs root"
                );
                extra_tried = false;
            } else {
                let outs = OUTPUTS[cmd];
                set_flag(&mut a, outs[flag % outs.len()], format!("special/{t}"));
                if *force && FORCE[cmd] && !a.iter().any(|x| x == "--force") {
                    a.push("--force".into());
                }
            }
        }
        Some(Extra::Set(k)) => {
            a.push("--set".into());
            a.push(set_spec(*k).0.into());
        }
        Some(Extra::BlankEnv(k)) => env.push(("RECONSIM_SCENARIOS", BLANKS[*k])),
        Some(Extra::NotUtf8 { output }) => match OUTPUTS[cmd].first() {
            Some(flag) if *output => {
                let bytes: &[u8] = if *flag == "--failures-dir" {
                    b"out/d\xff"
                } else {
                    b"out/caf\xe9.json"
                };
                set_flag(&mut a, flag, OsStr::from_bytes(bytes));
            }
            _ => {
                // The input, copied under a name that is not UTF-8.
                let input = a[1].clone();
                let mut bytes = b"in/caf\xe9-".to_vec();
                bytes.extend_from_slice(&input.as_bytes()[3..]);
                let copy = OsString::from_vec(bytes);
                std::fs::copy(sb.work().join(&input), sb.work().join(&copy)).unwrap();
                a[1] = copy;
            }
        },
        _ => {}
    }
    let before = sb.snapshot();
    let specials_before = sb.special_identities();
    let start = Instant::now();
    let r = sb.run_with(&a, &env);
    let took = start.elapsed();
    prop_assert!(!r.timed_out, "{a:?} ran past its deadline");
    prop_assert!(
        matches!(r.code, Some(0..=2)),
        "{a:?} exited {:?}\n{}",
        r.code,
        r.stderr
    );
    prop_assert!(!r.stderr.contains("panicked"), "{a:?}: {}", r.stderr);
    if std::env::var_os("RECONSIM_HOSTILE_VERBOSE").is_some() {
        eprintln!(
            "{a:?} {env:?} -> {:?} {}",
            r.code,
            r.stderr.lines().next().unwrap_or("")
        );
    }
    if let Some(code) = r
        .code
        .and_then(|c| usize::try_from(c).ok())
        .filter(|c| *c < 3)
    {
        EXITS[code].fetch_add(1, Ordering::Relaxed);
    }
    prop_assert!(
        r.max_rss_kb < 1_000_000,
        "{a:?} peaked at {} KB",
        r.max_rss_kb
    );
    prop_assert!(took < Duration::from_secs(90), "{a:?} took {took:?}");
    // Nothing written outside out/ (or inside the directory special/dir, which a case
    // may name as its failures directory); the special files as they were.
    let after = sb.snapshot();
    let special_dir = sb.work().join("special/dir");
    for (path, bytes) in &after {
        let changed = before.get(path) != Some(bytes);
        let allowed = path.starts_with(sb.work().join("out"))
            || (path.starts_with(&special_dir) && *path != special_dir);
        prop_assert!(
            !changed || allowed,
            "{a:?} wrote {} outside the output directory",
            path.display()
        );
    }
    for path in before.keys() {
        prop_assert!(after.contains_key(path), "{a:?} removed {}", path.display());
    }
    prop_assert_eq!(
        &sb.special_identities(),
        &specials_before,
        "{:?} changed a special file",
        a
    );
    let kept = std::fs::read_to_string(&saved).ok();
    prop_assert_eq!(
        kept.as_deref(),
        Some(failure.as_str()),
        "{:?} replaced a saved failure",
        a
    );
    // What each of round three's classes must do besides. `clean`: no stray argument
    // that clap refuses first.
    let clean = c.stray.is_none();
    match &c.extra {
        Some(Extra::Output { target, .. }) if extra_tried => {
            let t = SPECIALS[*target].trim_start_matches("to-");
            let what = match t {
                "fifo" => Some("it is a FIFO"),
                "dir" => Some("it is a directory"),
                "dangling" => Some("it is a dangling symlink"),
                _ => None,
            };
            // replay and explain read an untampered failure and refuse the output.
            if let Some(what) = what
                && clean
                && c.failure_mutations.is_empty()
                && (cmd == 2 || cmd == 4)
            {
                prop_assert_eq!(r.code, Some(2), "{:?}: {}", a, r.stderr);
                prop_assert!(r.stderr.contains(what), "{a:?}: {}", r.stderr);
            }
        }
        Some(Extra::Set(k)) if set_spec(*k).1 => {
            prop_assert_eq!(r.code, Some(2), "{:?} was taken: {}", a, r.stdout);
        }
        Some(Extra::SameName) => {
            prop_assert_eq!(r.code, Some(2), "{:?} was taken: {}", a, r.stdout);
        }
        Some(Extra::HashCapitals) if clean && c.failure_mutations.is_empty() => {
            prop_assert!(
                !r.stdout.contains("NOT reproduced") && !r.stdout.contains("\"reproduced\":false"),
                "{a:?}: {}",
                r.stdout
            );
            if cmd == 2 || cmd == 4 {
                prop_assert_eq!(r.code, Some(0), "{:?}: {} {}", a, r.stdout, r.stderr);
            }
        }
        Some(Extra::BlankEnv(k)) => {
            // Empty: unset, the shipped scenarios found. Blank: refused naming the
            // variable, or unset.
            if BLANKS[*k].is_empty() {
                prop_assert!(!r.stderr.contains("no such scenario"), "{}", r.stderr);
            } else if r.stderr.contains("no such scenario") {
                prop_assert!(r.stderr.contains("RECONSIM_SCENARIOS"), "{}", r.stderr);
            }
        }
        Some(Extra::NotUtf8 { .. }) => {
            prop_assert_eq!(r.code, Some(2), "{:?} was taken: {}", a, r.stdout);
            if clean && matches!(cmd, 2 | 4 | 6) {
                prop_assert!(r.stderr.contains("UTF-8"), "{a:?}: {}", r.stderr);
            }
            for path in after.keys().filter(|p| !before.contains_key(*p)) {
                prop_assert!(path.to_str().is_some(), "{a:?} wrote {}", path.display());
            }
        }
        Some(Extra::SeedTwice) if c.failure_mutations.is_empty() => {
            prop_assert_eq!(r.code, Some(2), "{:?} was taken: {}", a, r.stdout);
            if clean {
                prop_assert!(r.stderr.contains("listed once"), "{}", r.stderr);
            }
        }
        _ => {}
    }
    // The classes this case tried.
    let reads_scenario = TAKES_SCENARIO.contains(&cmd)
        && !matches!(c.extra, Some(Extra::SameName | Extra::BlankEnv(_)));
    let hostile_range =
        !matches!(SEEDS[c.seeds], "0..8" | "0..3" | "2..6") || !matches!(JOBS[c.jobs], "1" | "2");
    let tried = [
        reads_scenario && !c.scenario_mutations.is_empty(),
        reads_scenario && c.truncate.is_some(),
        (cmd == 1 || cmd == 5) && hostile_range,
        c.stray.is_some(),
        !c.failure_mutations.is_empty() && matches!(cmd, 2 | 3 | 4 | 6),
    ];
    for (class, yes) in tried.iter().enumerate() {
        if *yes {
            TRIED[class].fetch_add(1, Ordering::Relaxed);
        }
    }
    if let Some(e) = c.extra.as_ref().filter(|_| extra_tried) {
        TRIED[e.class()].fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

#[test]
fn the_cli_holds_under_mutated_inputs() {
    let cases = std::env::var("RECONSIM_HOSTILE_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 64,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let count = std::sync::atomic::AtomicUsize::new(0);
    runner
        .run(&case(), |c| {
            let n = count.fetch_add(1, Ordering::Relaxed);
            check_case(&c, n)
        })
        .unwrap();
    let exits: Vec<u64> = EXITS.iter().map(|e| e.load(Ordering::Relaxed)).collect();
    eprintln!("exit codes 0, 1, 2: {exits:?}");
    let tried: Vec<u64> = TRIED.iter().map(|t| t.load(Ordering::Relaxed)).collect();
    for (class, n) in CLASSES.iter().zip(&tried) {
        eprintln!("class {class}: {n} cases, all ok");
    }
    assert!(exits[1] > 0 && exits[2] > 0, "{exits:?}");
    // At the default case count (what CI runs) every class is tried.
    if cases >= 100 {
        for (class, n) in CLASSES.iter().zip(&tried) {
            assert!(*n > 0, "no case of class {class} in {cases} cases");
        }
    }
}

/// docs/scenario-format.md states every limit, with its value.
#[test]
fn the_format_reference_states_every_limit() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/scenario-format.md"),
    )
    .unwrap();
    for (name, value) in reconsim::scenario::limits::ALL {
        let row = format!("| `{name}` | {value} |");
        assert!(
            doc.contains(&row),
            "docs/scenario-format.md lacks the row {row}"
        );
    }
    assert!(doc.contains("Safe names"), "the safe-name rule");
}

// What a campaign reports of its saves is the same for any --jobs: a seed that another
// thread ran past a --stop-on-first cut may leave a file, but is not counted.
#[test]
fn saves_are_reported_the_same_whatever_the_jobs() {
    let sb = Sandbox::new("jobs");
    let doc = |jobs: &str| {
        let dir = format!("out/j{jobs}");
        let r = sb.run(&args(&[
            "fuzz",
            "machineapi-no-leader-election",
            "--seeds",
            "0..40",
            "--stop-on-first",
            "--jobs",
            jobs,
            "--failures-dir",
            &dir,
            "--json",
        ]));
        assert_eq!(r.code, Some(1), "{}", r.stderr);
        let mut d: Value = serde_json::from_str(&r.stdout).unwrap();
        let file = d["first_failure_file"].as_str().unwrap().to_string();
        assert_eq!(
            file,
            format!("{dir}/machineapi-no-leader-election-seed-0.json")
        );
        for f in ["wall_ms", "jobs", "first_failure_file"] {
            d.as_object_mut().unwrap().remove(f);
        }
        d
    };
    let one = doc("1");
    assert_eq!(one["failures_saved"], 1);
    assert_eq!(one, doc("2"));
}

// Round three (issue 31): names, --set paths, hashes and the environment.
#[test]
fn a_variant_under_its_bases_name_is_refused() {
    let sb = Sandbox::new("same-name");
    let file = sb.input(
        "same.json",
        r#"{"extends": "machineapi-no-leader-election", "name": "machineapi-no-leader-election", "seeds": 3}"#,
    );
    let r = sb.run(&args(&["run", &file, "--seed", "0"]));
    expect_usage_error(
        &r,
        ".name: a name of its own: `machineapi-no-leader-election` is also the name of",
    );
}

#[test]
fn a_set_path_with_an_empty_segment_is_refused() {
    let sb = Sandbox::new("set-empty-segment");
    for path in ["net..latency_ms", "net.latency_ms.", ".net..latency_ms"] {
        let set = format!("{path}=[1,5]");
        let r = sb.run(&args(&[
            "run",
            "machineapi-no-leader-election",
            "--seed",
            "0",
            "--set",
            &set,
        ]));
        expect_usage_error(&r, "a field name between each two dots");
    }
}

#[test]
fn a_trace_hash_in_capitals_is_the_same_hash() {
    let sb = Sandbox::new("hash-capitals");
    let text = failure_text(&sb);
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    let hash = doc["trace_hash"].as_str().unwrap().to_ascii_uppercase();
    doc["trace_hash"] = json!(hash);
    let file = sb.input("upper.json", &serde_json::to_string_pretty(&doc).unwrap());
    let r = sb.run(&args(&["replay", &file]));
    assert_eq!(r.code, Some(0), "{} {}", r.stdout, r.stderr);
    assert!(r.stdout.starts_with("reproduced:"), "{}", r.stdout);
}

#[test]
fn an_empty_scenarios_variable_is_unset() {
    let out = Command::new(BIN)
        .args(["list", "--json"])
        .env("RECONSIM_SCENARIOS", "")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        listed.as_array().is_some_and(|a| a
            .iter()
            .any(|s| s["name"] == "machineapi-no-leader-election")),
        "{listed}"
    );
}

#[test]
fn merge_refuses_a_result_that_lists_a_seed_twice() {
    let sb = Sandbox::new("merge-twice");
    let r = sb.run(&args(&[
        "fuzz",
        "machineapi-no-leader-election",
        "--seeds",
        "0..4",
        "--json",
    ]));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let mut doc: Value = serde_json::from_str(&r.stdout).unwrap();
    let first = doc["failures"][0].clone();
    doc["failures"].as_array_mut().unwrap().push(first);
    let file = sb.input("twice.json", &doc.to_string());
    let r = sb.run(&args(&["merge", &file]));
    expect_usage_error(&r, ".seed: expected a seed listed once: 0 is listed before");
}

#[test]
fn what_run_saves_replay_reads_back_at_the_file_size_limit() {
    // A scenario file just under the 16 MiB limit makes a failure file around it: one
    // that fits is saved (indentation dropped if that is what fits) and replays; one
    // that cannot fit is refused with the limit named, and nothing is written.
    let sb = Sandbox::new("size-limit");
    let max = 16 * 1024 * 1024usize;
    let mut base = shipped("machineapi-no-leader-election");
    base["name"] = json!("big-description");
    // The file's bytes besides its description: a description of `max - rest - k`
    // makes a file `k` bytes under the limit.
    base["description"] = json!("");
    let rest = base.to_string().len();
    let (mut saved, mut refused) = (0, 0);
    for under in [1usize, 100, 1_000, 3_000, 20_000] {
        let below = rest + under;
        base["description"] = json!("x".repeat(max - below));
        let file = sb.input(&format!("big-{below}.json"), &base.to_string());
        let out = format!("out/big-{below}-failure.json");
        let r = sb.run(&args(&[
            "run",
            &file,
            "--seed",
            "0",
            "--save-failure",
            &out,
        ]));
        let written = sb.work().join(&out);
        if r.code == Some(2) {
            assert!(
                r.stderr
                    .contains("more than the 16777216 that replay reads"),
                "{}",
                r.stderr
            );
            assert!(!written.exists());
            refused += 1;
        } else {
            assert_eq!(r.code, Some(1), "{}", r.stderr);
            assert!(std::fs::metadata(&written).unwrap().len() <= max as u64);
            let back = sb.run(&args(&["replay", &out]));
            assert_eq!(back.code, Some(0), "{} {}", back.stdout, back.stderr);
            saved += 1;
        }
        let _ = std::fs::remove_file(&written);
    }
    assert!(
        saved >= 1 && refused >= 1,
        "saved {saved}, refused {refused}"
    );
}

#[test]
fn a_path_that_is_not_utf8_is_refused_before_anything_is_written() {
    // A replay line names its file; bytes that are not UTF-8 would print as U+FFFD and
    // name a file that does not exist.
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let sb = Sandbox::new("not-utf8");
    let cases: [(&[&str], &str, &[u8]); 3] = [
        (
            &["run", "machineapi-no-leader-election", "--seed", "0"],
            "--save-failure",
            b"out/caf\xe9.json",
        ),
        (
            &["fuzz", "machineapi-no-leader-election", "--seeds", "0..2"],
            "--failures-dir",
            b"fail\xff",
        ),
        (&["explain", "in/x.json"], "--html", b"out/p\xfe.html"),
    ];
    for (args, flag, path) in cases {
        let out = Command::new(BIN)
            .args(args)
            .arg(flag)
            .arg(OsStr::from_bytes(path))
            .current_dir(sb.work())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("is not UTF-8"), "{stderr}");
        assert!(stderr.contains(flag), "{stderr}");
    }
    // A scenario argument too, naming itself (not clap's "invalid UTF-8 was detected
    // in one or more arguments").
    for command in ["run", "fuzz", "search", "check"] {
        let out = Command::new(BIN)
            .arg(command)
            .arg(OsStr::from_bytes(b"caf\xe9.json"))
            .current_dir(sb.work())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(stderr.contains("is not UTF-8"), "{command}: {stderr}");
        assert!(stderr.contains("SCENARIO"), "{command}: {stderr}");
    }
    // Nothing was written anywhere.
    let names: Vec<_> = std::fs::read_dir(sb.work())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}"); // in/ and out/, as the sandbox made them
    assert_eq!(std::fs::read_dir(sb.work().join("out")).unwrap().count(), 0);
}
