//! What several test files share: a copy of the binary alone in an empty directory,
//! the fenced blocks of a doc, and a campaign through the library's fuzz API.

#![allow(dead_code)] // each test file uses part of it

use std::path::PathBuf;
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_reconsim");

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
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
        let copy = dir.join("bin/reconsim");
        std::fs::copy(BIN, &copy).unwrap();
        // A process another test thread forked while the copy was open for writing holds
        // that descriptor until it execs, and the kernel refuses to run a file open for
        // writing (ETXTBSY): wait until the copy runs.
        for attempt in 0.. {
            match Command::new(&copy).arg("--version").output() {
                Ok(out) if out.status.success() => break,
                Err(e) if e.raw_os_error() == Some(26) && attempt < 200 => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                other => panic!("the copy of the binary does not run: {other:?}"),
            }
        }
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
