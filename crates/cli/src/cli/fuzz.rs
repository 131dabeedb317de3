//! `fuzz`: a scenario over a range of seeds on every core (a shard of one, within a time
//! budget), its failures streamed out in seed order as they are found.

use super::flags::{jobs_or_cores, parse_duration, parse_seeds, parse_shard};
use super::outputs::create_failures_dir;
use super::saves::Saves;
use super::{App, UsageError};
use crate::scenario::fuzz::Campaign;
use crate::scenario::runner;
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

/// `fuzz`'s options, as given.
pub(super) struct FuzzArgs<'a> {
    pub(super) seeds: Option<&'a str>,
    pub(super) jobs: Option<usize>,
    pub(super) shard: Option<&'a str>,
    pub(super) stop_on_first: bool,
    pub(super) failures_dir: Option<&'a Path>,
    pub(super) time_budget: Option<&'a str>,
    pub(super) swarm: bool,
    pub(super) campaign: super::check::CampaignKind,
    pub(super) differential: bool,
}

pub(super) fn fuzz_cmd(
    app: &App<'_>,
    arg: &str,
    a: FuzzArgs<'_>,
    json: bool,
) -> Result<ExitCode, UsageError> {
    use std::io::Write;
    let FuzzArgs {
        seeds,
        jobs,
        shard,
        stop_on_first,
        failures_dir,
        time_budget,
        swarm,
        campaign,
        differential,
    } = a;
    let budget = time_budget.map(parse_duration).transpose()?;
    let (_, scenario) = app.load(arg)?;
    let (start, end) = match seeds {
        Some(s) => parse_seeds(s)?,
        None => (0, scenario.seeds),
    };
    let shard = shard.map(parse_shard).transpose()?;
    let jobs = jobs_or_cores(jobs)?;
    let combined = campaign == super::check::CampaignKind::Combined;
    // Refused before anything is made (the failures directory included).
    if combined && shard.is_some() {
        return Err(UsageError(
            "--shard: a combined campaign is not split into shards (each round follows from the one before); use --campaign seeds to shard".into(),
        ));
    }
    if combined && swarm {
        return Err(UsageError(
            "--swarm: a combined campaign runs swarm seeds already, as one of its three ways; use --campaign seeds --swarm for swarm seeds only".into(),
        ));
    }
    if differential && !combined {
        return Err(UsageError(
            "--differential: with --campaign combined (its oracles judge search plans and reference runs)".into(),
        ));
    }
    create_failures_dir(failures_dir)?;
    if combined {
        return super::fuzz_combined::fuzz_combined(
            app,
            arg,
            &scenario,
            super::fuzz_combined::CombinedArgs {
                start,
                end,
                jobs,
                stop_on_first,
                failures_dir,
                time_budget: budget,
                differential,
                json,
            },
        );
    }
    let campaign = Campaign {
        start,
        end,
        jobs,
        shard,
        stop_on_first,
        swarm,
    };
    let saves = std::sync::Mutex::new(Saves::default());
    let on_failure = |outcome: &runner::Outcome, plan: &crate::scenario::Plan| {
        if let Some(dir) = failures_dir {
            Saves::save(&saves, dir, &scenario, plan, outcome);
        }
    };
    let bar = progress_bar(campaign.len(), json);
    let on_progress = |done: u64, failures: u64| {
        if let Some(b) = &bar {
            b.set_position(done);
            b.set_message(format!("{failures} failing"));
        }
    };
    // The failures' list streams out as the campaign finds them (in seed order), so a
    // campaign's memory does not grow with its failures: with --json straight into the
    // document, for people the first few.
    const SHOWN: usize = 10;
    let mut shown = Vec::new();
    let mut out = std::io::BufWriter::new(std::io::stdout());
    let mut written = Ok(());
    if json {
        written = write!(out, "{{\"failures\":[");
    }
    // What `merge` reads back bounds what the list holds: the smallest seeds, the rest
    // counted in `failures_unlisted`.
    let mut listing =
        crate::scenario::fuzz::Listing::new(crate::scenario::limits::RESULT_LISTED_BYTES_MAX);
    let mut on_summary = |f: &crate::scenario::fuzz::FailureSummary| {
        saves
            .lock()
            .expect("no thread panics holding it")
            .settle(f.seed);
        if json {
            let sep = if listing.listed == 0 { "" } else { "," };
            let item = serde_json::to_string(f).expect("summaries serialize");
            if listing.admit(item.len()) && written.is_ok() {
                written = write!(out, "{sep}{item}");
            }
        } else if shown.len() < SHOWN {
            shown.push(f.clone());
        }
    };
    tracing::info!(scenario = %scenario.name, start, end, jobs, "fuzz campaign starts");
    let wall = Instant::now();
    let report = crate::scenario::fuzz::fuzz_streamed(
        &scenario,
        campaign,
        budget,
        &on_failure,
        &on_progress,
        &mut on_summary,
    );
    let wall_ms = wall.elapsed().as_millis() as u64;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    tracing::info!(
        runs = report.runs,
        failures = report.failure_count,
        wall_ms,
        "fuzz campaign ends"
    );
    let saves = saves.into_inner().expect("not poisoned");
    let save_failed = saves.report_errors(app.program);
    let first_file = report
        .first_failure_seed
        .and_then(|seed| saves.path_of(seed))
        .map(|p| p.display().to_string());
    if json {
        let rest = json!({
            "scenario": scenario.name,
            "runs": report.runs,
            "first_failure_seed": report.first_failure_seed,
            "events": report.events,
            "sim_ms": report.sim_ms,
            "wall_ms": wall_ms,
            "seeds": format!("{start}..{end}"),
            "seeds_run": report.seeds_run,
            "shard": shard.map(|(i, n)| format!("{i}/{n}")),
            "jobs": jobs,
            "swarm": swarm,
            "campaign": "seeds",
            "failures_unlisted": listing.unlisted,
            "scenario_fingerprint": scenario.fingerprint(),
            "version": env!("CARGO_PKG_VERSION"),
            "failures_saved": saves.saved,
            "first_failure_file": first_file,
            "save_errors": saves.first_errors,
            "save_error_count": saves.errors,
        })
        .to_string();
        // `rest` is `{...}`: the failures' list already opened the document.
        written = written
            .and_then(|()| writeln!(out, "],{}", &rest[1..]))
            .and_then(|()| out.flush());
        written.map_err(|e| UsageError(format!("cannot write the result on stdout: {e}")))?;
    } else {
        let secs = wall_ms.max(1) as f64 / 1000.0;
        println!(
            "{}: {} over seeds {start}..{end}{} in {secs:.2} s ({:.0} runs/s, {:.0}x faster than simulated time), {} failing",
            scenario.name,
            match report.runs {
                1 => "1 run".to_string(),
                n => format!("{n} runs"),
            },
            shard
                .map(|(i, n)| format!(" (shard {i}/{n})"))
                .unwrap_or_default(),
            report.runs as f64 / secs,
            report.sim_ms as f64 / wall_ms.max(1) as f64,
            report.failure_count
        );
        let planned = campaign.len();
        if budget.is_some() && report.seeds_run < planned {
            let next = campaign.seed(report.seeds_run);
            println!(
                "  the time budget ran out after {} of {planned} seeds; go on with --seeds {next}..{end}",
                report.seeds_run
            );
        }
        for f in &shown {
            println!(
                "  seed {}: {} at t={}",
                f.seed,
                f.invariant,
                crate::sim::SimTime(f.time_ms)
            );
        }
        if report.failure_count > shown.len() as u64 {
            println!(
                "  ... and {} more",
                report.failure_count - shown.len() as u64
            );
        }
        if let (Some(dir), true) = (failures_dir, saves.saved > 0) {
            let files = if saves.saved == 1 { "file" } else { "files" };
            println!(
                "  saved {} failure {files} in {}",
                saves.saved,
                dir.display()
            );
        }
        if let Some(seed) = report.first_failure_seed {
            // A replay line only for a file that is there; else the run that finds it.
            match &first_file {
                Some(p) => println!("  replay: {}", app.replay_command(Path::new(p))),
                None => println!("  replay: {}", app.run_command(arg, seed, swarm)),
            }
        }
    }
    Ok(if save_failed {
        ExitCode::from(2)
    } else if report.failure_count == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A progress bar on stderr (runs/s, failures, ETA), only for a person at a terminal:
/// never with `--json`, never when stderr is piped.
fn progress_bar(total: u64, json: bool) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if json || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} seeds  {per_sec}  {msg}  ETA {eta}",
        )
        .expect("a valid template"),
    );
    Some(bar)
}
