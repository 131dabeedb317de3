//! `check`: each scenario held to its expectation over its seed budget, a verdict line
//! per scenario, exit 0 exactly when every expectation holds (what a CI job calls).

use super::outputs::create_failures_dir;
use super::saves::Saves;
use super::{App, UsageError};
use crate::scenario::Scenario;
use crate::scenario::fuzz::Campaign;
use crate::scenario::runner;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// One scenario's verdict under `check`.
struct Verdict {
    scenario: Scenario,
    runs: u64,
    /// The smallest failing seed, and its invariant.
    failure: Option<(u64, String)>,
    file: Option<PathBuf>,
}

impl Verdict {
    /// Whether the scenario met its expectation.
    fn holds(&self) -> bool {
        match self.scenario.expect {
            crate::scenario::Expect::Violation => self.failure.is_some(),
            crate::scenario::Expect::Clean => self.failure.is_none(),
        }
    }
}

/// `check`: each scenario's seed budget `0..seeds`, stopping at the first failure (a
/// buggy variant is caught, or a fixed one is broken), and a verdict per scenario; exit
/// 0 exactly when every expectation holds.
pub(super) fn check(
    app: &App<'_>,
    args: &[String],
    jobs: usize,
    failures_dir: Option<&Path>,
    json: bool,
) -> Result<ExitCode, UsageError> {
    // Every scenario is loaded before any runs: a typo fails in a second, not after an
    // hour of others.
    let mut scenarios = Vec::new();
    if args.is_empty() {
        for source in app.library.entries()? {
            scenarios.push((
                source.display(),
                app.library.load_source(&source, app.families)?,
            ));
        }
    } else {
        for arg in args {
            let (_, s) = app.load(arg)?;
            scenarios.push((arg.clone(), s));
        }
    }
    create_failures_dir(failures_dir)?;
    let mut verdicts = Vec::new();
    let mut save_failed = false;
    for (arg, scenario) in scenarios {
        let campaign = Campaign {
            start: 0,
            end: scenario.seeds,
            jobs,
            shard: None,
            stop_on_first: true,
            swarm: false,
        };
        let saves = std::sync::Mutex::new(Saves::default());
        let on_failure = |outcome: &runner::Outcome, plan: &crate::scenario::Plan| {
            // A violation a clean scenario must not have is worth a file; a buggy
            // variant's expected one is not.
            if let (Some(dir), crate::scenario::Expect::Clean) = (failures_dir, scenario.expect) {
                Saves::save(&saves, dir, &scenario, plan, outcome);
            }
        };
        let mut failure = None;
        let report = crate::scenario::fuzz::fuzz_streamed(
            &scenario,
            campaign,
            None,
            &on_failure,
            &|_, _| {},
            &mut |f| {
                saves
                    .lock()
                    .expect("no thread panics holding it")
                    .settle(f.seed);
                failure.get_or_insert((f.seed, f.invariant.clone()));
            },
        );
        let saves = saves.into_inner().expect("not poisoned");
        save_failed |= saves.report_errors(app.program);
        let file = failure
            .as_ref()
            .and_then(|(seed, _)| saves.path_of(*seed))
            .map(Path::to_path_buf);
        let v = Verdict {
            scenario,
            runs: report.runs,
            failure,
            file,
        };
        if !json {
            println!("{}", verdict_line(app, &arg, &v));
        }
        verdicts.push(v);
    }
    let holds = verdicts.iter().filter(|v| v.holds()).count();
    if json {
        let rows: Vec<serde_json::Value> = verdicts
            .iter()
            .map(|v| {
                json!({
                    "scenario": v.scenario.name,
                    "expect": v.scenario.expect.to_string(),
                    "holds": v.holds(),
                    "seeds": format!("0..{}", v.scenario.seeds),
                    "runs": v.runs,
                    "first_failure_seed": v.failure.as_ref().map(|(s, _)| s),
                    "invariant": v.failure.as_ref().map(|(_, i)| i),
                    "file": v.file.as_ref().map(|p| p.display().to_string()),
                })
            })
            .collect();
        let doc = json!({
            "scenarios": rows,
            "holds": holds == verdicts.len(),
            "checked": verdicts.len(),
            "failed": verdicts.len() - holds,
        });
        println!("{doc}");
    } else {
        println!(
            "{holds} of {} scenarios hold their expectation{}",
            verdicts.len(),
            if holds == verdicts.len() {
                ""
            } else {
                "; see FAIL above"
            }
        );
    }
    Ok(if save_failed {
        ExitCode::from(2)
    } else if holds == verdicts.len() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `ok   NAME  expect ...: what was found` or `FAIL NAME ...` with how to see it.
fn verdict_line(app: &App<'_>, arg: &str, v: &Verdict) -> String {
    let s = &v.scenario;
    let runs = match v.runs {
        1 => "1 run".to_string(),
        n => format!("{n} runs"),
    };
    let what = match (&s.expect, &v.failure) {
        (crate::scenario::Expect::Violation, Some((seed, inv))) => {
            format!("caught: {inv} at seed {seed} ({runs})")
        }
        (crate::scenario::Expect::Violation, None) => {
            format!("NOT caught: no violation in seeds 0..{} ({runs})", s.seeds)
        }
        (crate::scenario::Expect::Clean, None) => {
            format!("held over seeds 0..{} ({runs})", s.seeds)
        }
        (crate::scenario::Expect::Clean, Some((seed, inv))) => {
            let replay = match &v.file {
                Some(p) => app.replay_command(p),
                None => app.run_command(arg, *seed, false),
            };
            format!("BROKEN: seed {seed} violates {inv}; replay: {replay}")
        }
    };
    format!(
        "{} {}  expect {}: {what}",
        if v.holds() { "ok  " } else { "FAIL" },
        s.name,
        s.expect
    )
}
