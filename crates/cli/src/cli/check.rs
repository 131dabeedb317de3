//! `check`: each scenario held to its expectation over its budget of runs, a verdict
//! line per scenario, exit 0 exactly when every expectation holds (what a CI job calls).
//!
//! By default the budget is one combined campaign (crates/scenario/src/combined.rs):
//! random seeds, swarm seeds and search plans; `--campaign seeds` runs seeds `0..N`
//! only, as before 0.7.0.

use super::outputs::create_failures_dir;
use super::{App, UsageError};
use crate::scenario::Scenario;
use crate::scenario::combined::{self, Arm, Trial};
use crate::scenario::failure::FailureFile;
use crate::scenario::fuzz::Campaign;
use crate::scenario::search::{DIFFERENTIAL, DIVERGENCE};
use crate::scenario::{Expect, runner};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How `check` and `fuzz` spend a budget of runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CampaignKind {
    /// Random seeds, swarm seeds and search plans, in rounds (the default of `check`).
    Combined,
    /// Random seeds `0..N` only.
    Seeds,
}

impl CampaignKind {
    fn name(self) -> &'static str {
        match self {
            CampaignKind::Combined => "combined",
            CampaignKind::Seeds => "seeds",
        }
    }
}

/// What `check` was asked besides its scenarios.
pub(super) struct CheckArgs<'a> {
    pub(super) jobs: usize,
    pub(super) failures_dir: Option<&'a Path>,
    pub(super) campaign: CampaignKind,
    pub(super) time_budget: Option<std::time::Duration>,
    /// Judge a clean scenario's search arm by Sieve's differential and Kamera's
    /// divergence oracles too.
    pub(super) differential: bool,
    pub(super) json: bool,
}

/// One scenario's verdict under `check`.
struct Verdict {
    scenario: Scenario,
    runs: u64,
    /// The first failing run and its invariant.
    failure: Option<(Trial, String)>,
    file: Option<PathBuf>,
    /// The combined campaign's report (`None` for `--campaign seeds`).
    combined: Option<combined::Report>,
    /// The time budget ended the campaign before its budget of runs.
    out_of_time: bool,
}

impl Verdict {
    /// Whether the scenario met its expectation.
    fn holds(&self) -> bool {
        match self.scenario.expect {
            Expect::Violation => self.failure.is_some(),
            Expect::Clean => self.failure.is_none(),
        }
    }
}

/// `check`: each scenario's budget of runs, stopping at the first failure (a buggy
/// variant is caught, or a fixed one is broken), and a verdict per scenario; exit 0
/// exactly when every expectation holds.
pub(super) fn check(
    app: &App<'_>,
    args: &[String],
    opts: CheckArgs<'_>,
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
    create_failures_dir(opts.failures_dir)?;
    let mut verdicts = Vec::new();
    let mut save_failed = false;
    for (arg, scenario) in scenarios {
        let (v, save_error) = match opts.campaign {
            CampaignKind::Seeds => check_seeds(scenario, &opts),
            CampaignKind::Combined => check_combined(scenario, &opts),
        };
        if let Some(e) = save_error {
            eprintln!("{}: error: cannot write the failure file {e}", app.program);
            save_failed = true;
        }
        if !opts.json {
            println!("{}", verdict_line(app, &arg, &v));
        }
        verdicts.push((arg, v));
    }
    let holds = verdicts.iter().filter(|(_, v)| v.holds()).count();
    if opts.json {
        let rows: Vec<serde_json::Value> = verdicts
            .iter()
            .map(|(arg, v)| verdict_json(app, arg, v, opts.campaign))
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

/// A failure worth a file: one that breaks a clean scenario's expectation (a buggy
/// variant's expected one is not).
fn save(
    dir: Option<&Path>,
    scenario: &Scenario,
    name: String,
    plan: &crate::scenario::Plan,
    outcome: &runner::Outcome,
    diverges_from: Option<u64>,
) -> (Option<PathBuf>, Option<String>) {
    let (Some(dir), Expect::Clean) = (dir, scenario.expect) else {
        return (None, None);
    };
    let Some(mut f) = FailureFile::new(scenario, plan, outcome) else {
        return (None, None);
    };
    f.diverges_from = diverges_from;
    let path = dir.join(name);
    match f.save_new(&path) {
        Ok(p) => (Some(p), None),
        Err(e) => (None, Some(format!("{}: {e}", path.display()))),
    }
}

/// Seeds `0..N` only, as `fuzz --stop-on-first` runs them.
fn check_seeds(scenario: Scenario, opts: &CheckArgs<'_>) -> (Verdict, Option<String>) {
    let campaign = Campaign {
        start: 0,
        end: scenario.seeds,
        jobs: opts.jobs,
        shard: None,
        stop_on_first: true,
        swarm: false,
    };
    // The smallest failing seed is the only one reported: it is saved once the campaign
    // has named it, not by the thread that found it (a larger seed may fail first).
    let found: std::sync::Mutex<Vec<(u64, runner::Outcome, crate::scenario::Plan)>> =
        Default::default();
    let on_failure = |outcome: &runner::Outcome, plan: &crate::scenario::Plan| {
        if scenario.expect == Expect::Clean && opts.failures_dir.is_some() {
            found.lock().expect("no thread panics holding it").push((
                outcome.seed,
                outcome.clone(),
                plan.clone(),
            ));
        }
    };
    let mut failure = None;
    let report = crate::scenario::fuzz::fuzz_streamed(
        &scenario,
        campaign,
        opts.time_budget,
        &on_failure,
        &|_, _| {},
        &mut |f| {
            failure.get_or_insert((f.seed, f.invariant.clone()));
        },
    );
    let mut file = None;
    let mut error = None;
    if let Some((seed, _)) = &failure {
        let found = found.into_inner().expect("not poisoned");
        if let Some((_, outcome, plan)) = found.iter().find(|(s, _, _)| s == seed) {
            (file, error) = save(
                opts.failures_dir,
                &scenario,
                format!("{}-seed-{seed}.json", scenario.name),
                plan,
                outcome,
                None,
            );
        }
    }
    let out_of_time = report.seeds_run < campaign.len() && failure.is_none();
    let v = Verdict {
        runs: report.runs,
        failure: failure.map(|(seed, inv)| {
            (
                Trial {
                    arm: Arm::Seeds,
                    seed,
                    plan: None,
                    description: None,
                },
                inv,
            )
        }),
        file,
        combined: None,
        out_of_time,
        scenario,
    };
    (v, error)
}

/// The combined campaign over the scenario's budget of runs.
fn check_combined(scenario: Scenario, opts: &CheckArgs<'_>) -> (Verdict, Option<String>) {
    let config = combined::Config {
        stop_on_first: true,
        time_budget: opts.time_budget,
        // A differential finding says nothing of a buggy scenario's expected violation.
        differential: opts.differential && scenario.expect == Expect::Clean,
        ..combined::Config::new(scenario.seeds, opts.jobs)
    };
    let mut file = None;
    let mut error = None;
    let report = combined::run(
        &scenario,
        &config,
        &mut |failure, outcome, plan| {
            (file, error) = save(
                opts.failures_dir,
                &scenario,
                failure_file_name(&scenario.name, &failure.trial),
                plan,
                outcome,
                failure.diverges_from,
            );
        },
        &|_, _| {},
    );
    let v = Verdict {
        runs: report.runs,
        failure: report
            .first_failure()
            .map(|f| (f.trial.clone(), f.invariant.clone())),
        file,
        out_of_time: report.out_of_time,
        combined: Some(report),
        scenario,
    };
    (v, error)
}

/// Where a campaign saves the failure of `trial`: `<scenario>-seed-S.json` as `fuzz`
/// names a seed's, `-swarm-seed-S`, and `-search-seed-R-plan-K` as `search` names a
/// plan's (`-reference` for the fault-free reference run).
pub(super) fn failure_file_name(scenario: &str, trial: &Trial) -> String {
    match (trial.arm, trial.plan) {
        (Arm::Seeds, _) => format!("{scenario}-seed-{}.json", trial.seed),
        (Arm::Swarm, _) => format!("{scenario}-swarm-seed-{}.json", trial.seed),
        (Arm::Search, None) => format!("{scenario}-search-seed-{}-reference.json", trial.seed),
        (Arm::Search, Some(k)) => format!("{scenario}-search-seed-{}-plan-{k}.json", trial.seed),
    }
}

/// The command that shows the failing run of `trial` again: its failure file's replay,
/// else the run of its seed, or the search that finds its plan first.
pub(super) fn replay_of(
    app: &App<'_>,
    arg: &str,
    trial: &Trial,
    invariant: &str,
    file: Option<&Path>,
) -> String {
    if let Some(p) = file {
        return app.replay_command(p);
    }
    match (trial.arm, invariant) {
        (_, DIVERGENCE) => {
            "none without a file (a divergence compares two runs): add --failures-dir DIR, then `replay` its file".to_string()
        }
        (Arm::Seeds, _) => app.run_command(arg, trial.seed, false),
        (Arm::Swarm, _) => app.run_command(arg, trial.seed, true),
        (Arm::Search, DIFFERENTIAL) => format!(
            "{} --differential",
            app.search_command(arg, trial.seed, combined::PLANS_PER_REFERENCE)
        ),
        (Arm::Search, _) => app.search_command(arg, trial.seed, combined::PLANS_PER_REFERENCE),
    }
}

/// `2000 runs: seeds 0..1000, swarm seeds 0..500, 500 search plans from reference
/// seeds 0..10`, or `seeds 0..N (M runs)` for a seeds-only campaign.
fn what_ran(v: &Verdict) -> String {
    let runs = match v.runs {
        1 => "1 run".to_string(),
        n => format!("{n} runs"),
    };
    let cut = if v.out_of_time {
        format!(
            ", the time budget spent before the budget of {}",
            v.scenario.seeds
        )
    } else {
        String::new()
    };
    let Some(r) = &v.combined else {
        return format!("seeds 0..{} ({runs}{cut})", v.scenario.seeds);
    };
    let mut parts = Vec::new();
    let seeds = r.arm(Arm::Seeds);
    if seeds.runs > 0 {
        parts.push(format!("seeds 0..{}", seeds.next_seed));
    }
    let swarm = r.arm(Arm::Swarm);
    if swarm.runs > 0 {
        parts.push(format!("swarm seeds 0..{}", swarm.next_seed));
    }
    let search = r.arm(Arm::Search);
    if search.runs > 0 {
        let plans = search.runs - search.references;
        let references = match search.next_seed {
            1 => "reference seed 0".to_string(),
            n => format!("reference seeds 0..{n}"),
        };
        parts.push(format!(
            "{plans} search plan{} from {references}",
            if plans == 1 { "" } else { "s" },
        ));
    }
    format!("{runs}: {}{cut}", parts.join(", "))
}

/// `ok   NAME  expect ...: what was found` or `FAIL NAME ...` with how to see it.
fn verdict_line(app: &App<'_>, arg: &str, v: &Verdict) -> String {
    let s = &v.scenario;
    let runs = match v.runs {
        1 => "1 run".to_string(),
        n => format!("{n} runs"),
    };
    let what = match (&s.expect, &v.failure) {
        (Expect::Violation, Some((trial, inv))) => {
            format!("caught: {inv} at {} ({runs})", trial.label())
        }
        (Expect::Violation, None) => {
            format!("NOT caught: no violation in {}", what_ran(v))
        }
        (Expect::Clean, None) => format!("held over {}", what_ran(v)),
        (Expect::Clean, Some((trial, inv))) => {
            let replay = replay_of(app, arg, trial, inv, v.file.as_deref());
            // A finding of an oracle is no invariant's violation, and says so.
            match inv.as_str() {
                DIFFERENTIAL => format!(
                    "DIFFERS: {} ends unlike its fault-free reference run (Sieve's differential oracle); replay: {replay}",
                    trial.label()
                ),
                DIVERGENCE => format!(
                    "DIVERGES: {} ends unlike reference seed 0's (Kamera's divergence oracle: two fault-free schedules of one workload); replay: {replay}",
                    trial.label()
                ),
                _ => format!("BROKEN: {} violates {inv}; replay: {replay}", trial.label()),
            }
        }
    };
    format!(
        "{} {}  expect {}: {what}",
        if v.holds() { "ok  " } else { "FAIL" },
        s.name,
        s.expect
    )
}

/// Each arm's runs of a combined campaign whose arms start at `first_seed`, as `check
/// --json` and `fuzz --json` give them.
pub(super) fn arms_json(r: &combined::Report, first_seed: u64) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for arm in Arm::ALL {
        let a = r.arm(arm);
        m.insert(
            arm.name().to_string(),
            json!({
                "runs": a.runs,
                "seeds": format!("{first_seed}..{}", a.next_seed),
                "failures": a.failures,
                "new_signatures": a.new_signatures,
                "references": a.references,
            }),
        );
    }
    serde_json::Value::Object(m)
}

/// One scenario's row of `check --json`.
fn verdict_json(
    app: &App<'_>,
    arg: &str,
    v: &Verdict,
    campaign: CampaignKind,
) -> serde_json::Value {
    let arms = v.combined.as_ref().map(|r| arms_json(r, 0));
    json!({
        "scenario": v.scenario.name,
        "expect": v.scenario.expect.to_string(),
        "holds": v.holds(),
        "seeds": format!("0..{}", v.scenario.seeds),
        "runs": v.runs,
        "first_failure_seed": v.failure.as_ref().map(|(t, _)| t.seed),
        "invariant": v.failure.as_ref().map(|(_, i)| i),
        "file": v.file.as_ref().map(|p| p.display().to_string()),
        "campaign": campaign.name(),
        "arms": arms,
        "first_failure": v.failure.as_ref().map(|(t, _)| json!({
            "arm": t.arm.name(),
            "seed": t.seed,
            "plan": t.plan,
            "description": t.description,
            "replay": replay_of(app, arg, t, v.failure.as_ref().map_or("", |(_, i)| i.as_str()), v.file.as_deref()),
        })),
        "out_of_time": v.out_of_time,
    })
}
