//! What several test files share: a copy of the binary alone in an empty directory,
//! the fenced blocks of a doc, and a campaign through the library's fuzz API.

#![allow(dead_code)] // each test file uses part of it

use std::path::PathBuf;
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_reconsim");

/// The binary run with `args`, here.
pub fn reconsim(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("the binary runs")
}

/// Its stdout as the one JSON document `--json` prints.
pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is one JSON document ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// This test process's scratch directory for `tag`, `<tag>-<pid>` under cargo's
/// `CARGO_TARGET_TMPDIR` (target/tmp), never the system's temporary directory: what a
/// test leaves there goes with `cargo clean`. The directories of earlier processes (no
/// longer running) are removed first, so runs do not pile up; another test process
/// running at the same time keeps its own.
pub fn scratch(tag: &str) -> PathBuf {
    let base = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let me = std::process::id();
    // Whether a process runs: /proc tells on Linux; elsewhere nothing is swept.
    let proc = std::path::Path::new("/proc/self").exists();
    if let (true, Ok(entries)) = (proc, std::fs::read_dir(base)) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(tag))
                .and_then(|n| n.strip_prefix('-'))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if pid != me && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    let dir = base.join(format!("{tag}-{me}"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Copy the binary into `bin` (which must exist) as `bin/reconsim`, and wait until the
/// copy runs: a process another test thread forked while the copy was open for writing
/// holds that descriptor until it execs, and the kernel refuses to run a file open for
/// writing (ETXTBSY).
pub fn copy_binary_into(bin: &std::path::Path) -> PathBuf {
    let copy = bin.join("reconsim");
    std::fs::copy(BIN, &copy).unwrap();
    for attempt in 0.. {
        match Command::new(&copy).arg("--version").output() {
            Ok(out) if out.status.success() => break,
            Err(e) if e.raw_os_error() == Some(26) && attempt < 200 => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            other => panic!("the copy of the binary does not run: {other:?}"),
        }
    }
    copy
}

/// An empty directory holding `bin/reconsim`, a copy of the binary, and nothing else.
pub struct Alone {
    pub dir: PathBuf,
}

impl Alone {
    pub fn new(tag: &str) -> Alone {
        let dir =
            std::env::temp_dir().join(format!("reconsim-newcomer-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::create_dir_all(dir.join("work")).unwrap();
        copy_binary_into(&dir.join("bin"));
        Alone { dir }
    }

    pub fn work(&self) -> PathBuf {
        self.dir.join("work")
    }

    /// A shell command in `work/`, with the copy first on PATH and no other environment
    /// than `env`.
    pub fn sh(&self, script: &str, env: &[(&str, &str)]) -> Output {
        let path = format!("{}:/usr/bin:/bin", self.dir.join("bin").display());
        let mut c = Command::new("/bin/sh");
        c.arg("-c")
            .arg(script)
            .current_dir(self.work())
            .env_clear()
            .env("PATH", path);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().expect("sh runs")
    }

    pub fn reconsim(&self, args: &[&str]) -> Output {
        Command::new(self.dir.join("bin/reconsim"))
            .args(args)
            .current_dir(self.work())
            .env_remove("RECONSIM_SCENARIOS")
            .output()
            .expect("the copy runs")
    }
}

impl Drop for Alone {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The lines of the fenced block of `lang` that follows `after` in `doc`.
pub fn block<'a>(doc: &'a str, after: &str, lang: &str) -> Vec<&'a str> {
    let start = doc
        .find(after)
        .unwrap_or_else(|| panic!("{after:?} in the doc"));
    let fence = format!("```{lang}\n");
    let open = start + doc[start..].find(&fence).unwrap() + fence.len();
    let close = open + doc[open..].find("```").unwrap();
    doc[open..close].lines().collect()
}

/// The machine's cores, a campaign's `jobs`.
pub fn jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Seeds `0..end` of `s` through the library's fuzz API on `jobs` threads, without
/// progress.
pub fn campaign(
    s: &reconsim::scenario::Scenario,
    end: u64,
    jobs: usize,
    stop_on_first: bool,
) -> reconsim::scenario::fuzz::Report {
    reconsim::scenario::fuzz::fuzz(
        s,
        reconsim::scenario::fuzz::Campaign {
            start: 0,
            end,
            jobs,
            shard: None,
            stop_on_first,
            swarm: false,
        },
        &|_, _| {},
        &|_, _| {},
    )
}

/// `examples/<example>/scenarios/<name>.json`.
pub fn example_scenario(example: &str, name: &str) -> PathBuf {
    root()
        .join("examples")
        .join(example)
        .join("scenarios")
        .join(format!("{name}.json"))
}

/// The example binary `name`, of the profile of the calling test binary. `cargo test`
/// builds examples with the tests; `cargo test --test all example_x::` does not, so when the
/// binary is missing or older than what it is built from, build it here (cargo's lock makes concurrent calls wait for one build).
pub fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test>-<hash>
    let profile_dir = exe
        .parent()
        .and_then(std::path::Path::parent)
        .expect("target/<profile>/deps");
    let bin = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let modified = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    // Fresh if newer than what it is built from: the facade's and reconsim-kube's rlibs
    // (any crate of the workspace that changed rebuilt one of them) and the example's own
    // sources. Not "newer than the test binary": `cargo test --workspace` links the tests
    // after the examples, and a `cargo build --example` then resolves features for one
    // package, not the workspace, and rebuilds reconsim-kube and the facade (70 s in CI).
    let deps = profile_dir.join("deps");
    let mut inputs: Vec<std::time::SystemTime> = std::fs::read_dir(&deps)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            (n.starts_with("libreconsim-") || n.starts_with("libreconsim_kube-"))
                && n.ends_with(".rlib")
        })
        .filter_map(|e| modified(&e.path()))
        .collect();
    inputs.extend(
        std::fs::read_dir(root().join("examples").join(name))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| modified(&e.path())),
    );
    let newest_input = inputs.into_iter().max();
    if let (Some(b), Some(i)) = (modified(&bin), newest_input)
        && b >= i
    {
        return bin;
    }
    let release = profile_dir.file_name().is_some_and(|n| n == "release");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .args(["build", "--quiet", "--example", name])
        .current_dir(root());
    if release {
        build.arg("--release");
    }
    let status = build.status().expect("cargo runs");
    assert!(status.success(), "cargo build --example {name} failed");
    bin
}

/// A wall-clock figure masked: `0.23 s`, `(437 runs/s,`, `971702x faster`.
pub fn mask(line: &str) -> String {
    let number = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_digit() || c == '.');
    let words: Vec<&str> = line.split(' ').collect();
    let mut out = Vec::with_capacity(words.len());
    for (i, w) in words.iter().enumerate() {
        let next = words.get(i + 1).copied().unwrap_or("");
        let masked = if number(w) && (next == "s" || next == "s,") {
            "#".to_string()
        } else if w.starts_with('(') && number(&w[1..]) && next == "runs/s," {
            "(#".to_string()
        } else if w.ends_with('x') && number(&w[..w.len() - 1]) && next == "faster" {
            "#x".to_string()
        } else {
            w.to_string()
        };
        out.push(masked);
    }
    out.join(" ")
}

/// Whether `actual` is `expected`, `...` in it standing for any text.
pub fn line_matches(expected: &str, actual: &str) -> bool {
    let (e, a) = (mask(expected), mask(actual));
    let mut parts = e.split("...");
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = a.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (k, part) in parts.iter().enumerate() {
        let last = k + 1 == parts.len();
        if last {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// `Err(the first expected line not found)` unless `expected` is in the output.
pub fn check_output(expected: &[&str], stdout: &str, stderr: &str) -> Result<(), String> {
    let out: Vec<&str> = stdout.lines().collect();
    let mut at = 0;
    let mut skipping = false;
    for e in expected {
        if e.trim() == "..." {
            skipping = true;
            continue;
        }
        let found = if skipping {
            out[at..]
                .iter()
                .position(|a| line_matches(e, a))
                .map(|i| at + i)
        } else {
            (at < out.len() && line_matches(e, out[at])).then_some(at)
        };
        match found {
            Some(i) => {
                at = i + 1;
                skipping = false;
            }
            None if stderr.lines().any(|a| line_matches(e, a)) => {}
            None => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// The determinism self-check of real code, as madsim runs it: the seed twice, and on
/// a mismatch both again with full traces, to name the first event where they part (a
/// std HashMap's order, a select! branch, a clock would part them).
pub fn twice(s: &reconsim::scenario::Scenario, seed: u64) -> reconsim::scenario::runner::Outcome {
    use reconsim::scenario::faults::generate;
    use reconsim::scenario::runner::run_world;
    use reconsim::sim::TraceMode;
    let (a, _) = run_world(s, seed, generate(s, seed), TraceMode::Hash);
    let (b, _) = run_world(s, seed, generate(s, seed), TraceMode::Hash);
    if a.trace_hash != b.trace_hash {
        let (_, x) = run_world(s, seed, generate(s, seed), TraceMode::Full);
        let (_, y) = run_world(s, seed, generate(s, seed), TraceMode::Full);
        match reconsim_kube::selfcheck::compare(&x.sim, &y.sim) {
            Err(d) => panic!("{} seed {seed}: {d}", s.name),
            Ok(_) => panic!(
                "{} seed {seed}: hash-mode runs part, full ones agree",
                s.name
            ),
        }
    }
    assert_eq!(a.violation, b.violation, "{} seed {seed}", s.name);
    a
}

/// Every seed in `seeds` through [`twice`], on two threads: the seeds whose run fails.
pub fn twice_each(s: &reconsim::scenario::Scenario, seeds: std::ops::Range<u64>) -> Vec<u64> {
    let next = std::sync::atomic::AtomicU64::new(seeds.start);
    let failing = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs().clamp(1, 4) {
            scope.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if seed >= seeds.end {
                        break;
                    }
                    if twice(s, seed).violation.is_some() {
                        failing.lock().unwrap().push(seed);
                    }
                }
            });
        }
    });
    let mut failing = failing.into_inner().unwrap();
    failing.sort();
    failing
}

/// `holds`: an invariant that always holds, for a test that reads the world at the end
/// (a scenario names at least one invariant).
pub const HOLDS: &str = "holds";

#[derive(Clone, Debug)]
pub struct Holds;

impl reconsim::check::Check for Holds {
    fn check(&mut self, _: &reconsim::check::View<'_>) -> Option<reconsim::check::Violation> {
        None
    }
}

/// Whether this process runs as root: only root may make a character device (mknod).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Make a FIFO at `path` (mkfifo(3), no process spawned): whether it was made.
pub fn make_fifo(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
    unsafe { libc::mkfifo(c.as_ptr(), 0o644) == 0 }
}

/// Make a character device `major:minor` at `path` with mknod(2), in a folder of the
/// test's own (never the system's /dev): whether it was made. Only root may (and a
/// container without CAP_MKNOD refuses even root): false, and the caller skips.
pub fn make_char_device(path: &std::path::Path, major: u32, minor: u32) -> bool {
    use std::os::unix::ffi::OsStrExt;
    if !is_root() {
        return false;
    }
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path for the call's duration.
    unsafe {
        libc::mknod(
            c.as_ptr(),
            libc::S_IFCHR | 0o644,
            libc::makedev(major, minor),
        ) == 0
    }
}

/// What the file at `path` is, not followed if a symlink, to compare before and after:
/// its type, a device's number, a symlink's target, or `missing`. Never opens it (a
/// FIFO would wait for a writer, a device could be read forever).
pub fn file_identity(path: &std::path::Path) -> String {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let Ok(m) = std::fs::symlink_metadata(path) else {
        return "missing".into();
    };
    let t = m.file_type();
    if t.is_symlink() {
        let to = std::fs::read_link(path).unwrap_or_default();
        format!("symlink to {}", to.display())
    } else if t.is_fifo() {
        "fifo".into()
    } else if t.is_dir() {
        "dir".into()
    } else if t.is_char_device() {
        format!("char device {}", m.rdev())
    } else if t.is_block_device() {
        format!("block device {}", m.rdev())
    } else if t.is_socket() {
        "socket".into()
    } else {
        "regular file".into()
    }
}

/// Skipping a checker whose inputs did not change never changes a verdict (issue 33):
/// every seed in `seeds` run with checker gating on and off gives the same outcome (the
/// violation, its time and message, the events handled, the trace hash). Returns how
/// many of the seeds failed by `invariant` itself (not by convergence), so a test can
/// insist its range holds the verdicts gating could get wrong: the checker's own.
pub fn gating_agrees(
    s: &reconsim::scenario::Scenario,
    seeds: std::ops::Range<u64>,
    invariant: &str,
) -> usize {
    use reconsim::scenario::faults::generate;
    seeds
        .filter(|&seed| {
            gated_as_ungated(
                s,
                seed,
                generate(s, seed),
                invariant,
                &format!("seed {seed}"),
            )
        })
        .count()
}

/// [`gating_agrees`] over search plans of one seed instead of its own faults: each of
/// `plans` (see [`search_plans`]) run with gating on and off gives the same outcome.
/// Returns how many failed by `invariant` itself.
pub fn gating_agrees_plans(
    s: &reconsim::scenario::Scenario,
    seed: u64,
    plans: &[reconsim::scenario::Plan],
    invariant: &str,
) -> usize {
    plans
        .iter()
        .enumerate()
        .filter(|(i, plan)| {
            gated_as_ungated(
                s,
                seed,
                (*plan).clone(),
                invariant,
                &format!("seed {seed} plan #{i}"),
            )
        })
        .count()
}

/// The plans `reconsim search` runs from seed `seed`'s fault-free reference run of `s`
/// (its defaults: groups, singles, then pairs), the first `max_plans` in run order,
/// each as it runs (plan #i is `search`'s plan #i of that seed).
pub fn search_plans(
    s: &reconsim::scenario::Scenario,
    seed: u64,
    max_plans: usize,
) -> Vec<reconsim::scenario::Plan> {
    use reconsim::scenario::Plan;
    use reconsim::scenario::runner::run_world_recording;
    use reconsim::scenario::search::{SearchConfig, full_plan, plans};
    use reconsim::sim::TraceMode;
    let (_, reference) = run_world_recording(s, seed, Plan::default(), TraceMode::Hash, true);
    let config = SearchConfig {
        seed,
        max_plans,
        ..SearchConfig::default()
    };
    let (candidates, _) = plans(s, &reference, &config);
    candidates
        .iter()
        .map(|c| full_plan(&Plan::default(), c))
        .collect()
}

/// One run of `s` with `seed` and `plan`, gated and not: the same outcome (`what`
/// names the run in a failure). Whether `invariant` itself failed it.
fn gated_as_ungated(
    s: &reconsim::scenario::Scenario,
    seed: u64,
    plan: reconsim::scenario::Plan,
    invariant: &str,
    what: &str,
) -> bool {
    use reconsim::check::Gating;
    use reconsim::scenario::runner::run_gated;
    let on = run_gated(s, seed, plan.clone(), Gating::On);
    let off = run_gated(s, seed, plan, Gating::Off);
    assert_eq!(on.violation, off.violation, "{} {what}", s.name);
    assert_eq!(
        (on.events, on.sim_ms, on.trace_hash),
        (off.events, off.sim_ms, off.trace_hash),
        "{} {what}",
        s.name
    );
    on.violation.is_some_and(|v| v.invariant == invariant)
}
