//! The `reconsim` command line as a library: parse, call the scenario crate, print.
//!
//! [`main`] is the `reconsim` binary, with the builtin families. [`main_with`] is the same
//! command line with a user's registry of [`Families`] (the builtin ones and the user's,
//! registered the same way): a binary of three lines gets list, run, fuzz, merge, shrink,
//! explain and replay for its own controllers and invariants (examples/podset/main.rs,
//! docs/guide/writing-a-reconciler.md). The registry reaches every command through the
//! scenarios and failure files it loads (`Scenario::load`, `FailureFile::load`);
//! nothing is global.
//!
//! Exit codes: 0 every invariant held, 1 a violation was found (or a replay did not
//! reproduce), 2 bad usage or bad input, including an output that could not be written
//! (a failure file a campaign found but could not save is reported, never claimed).
//! Outputs never replace an input nor an existing file unasked (`--force`), and a
//! found failure is never saved over a different one (`FailureFile::save_new`). `--json` prints exactly one JSON document on
//! stdout; the shapes are a contract (DESIGN.md section 8): fields are added, never
//! renamed or removed. Every failure printed for a person ends with the command that
//! replays it, named after the running binary (`reconsim`, or a user's binary's file
//! name), since only a binary that registers a scenario's controllers can replay it.

mod app;
mod check;
mod explain;
mod flags;
mod fuzz;
mod list;
mod merge;
mod outputs;
mod replay;
mod run;
mod saves;
mod search;
mod shrink;

use crate::scenario::Families;
use crate::scenario::limits;
use crate::scenario::variants::Set;
pub(crate) use app::shell_word;
use app::{App, invocation};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use flags::{jobs_or_cores, parse_seeds};
use fuzz::FuzzArgs;
use outputs::{Outputs, default_output};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "reconsim",
    version,
    about = "Deterministic simulation of Kubernetes reconciler races",
    long_about = "Deterministic simulation of Kubernetes reconciler races: controllers run against a simulated API server, cloud and kubelets on a seeded scheduler that injects partitions, lease expiry, pauses and crashes. One seed is one exact history, so every failure replays.\n\nA SCENARIO is a scenario file (a path) or the name of a shipped scenario (`reconsim list`); shipped scenarios are built into the binary, and $RECONSIM_SCENARIOS points it at a directory of others. A FAILURE is a failure file written by run --save-failure, fuzz/search --failures-dir or shrink. Every command takes --json and then prints exactly one JSON document on stdout.",
    after_help = "Examples:\n  reconsim fuzz machineapi-no-leader-election --failures-dir failures\n  reconsim replay failures/machineapi-no-leader-election-seed-0.json --timeline\n  reconsim check machineapi-no-leader-election machineapi-leader-election-idempotent\n\nExit codes: 0 every invariant held; 1 a violation was found (or a replay did not reproduce, or an expectation broke); 2 bad usage or bad input."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the shipped scenarios: name, expectation, seed budget, description.
    #[command(after_help = concat!(
        "Examples:\n  reconsim list\n  RECONSIM_SCENARIOS=my-scenarios reconsim list --json\n\n",
        "Exit codes: 0 listed; 2 a scenario does not load."
    ))]
    List {
        /// Print `[{"name","path","expect","description","seeds","builtin"}]`.
        #[arg(long)]
        json: bool,
    },
    /// Run one seed of a scenario and check its invariants after every event.
    #[command(after_help = concat!(
        "Examples:\n  reconsim run machineapi-no-leader-election --seed 1 --timeline\n  reconsim run my-scenario.json --seed 7 --save-failure seed-7.json --set net.latency_ms=[1,50]\n\n",
        "Exit codes: 0 every invariant held; 1 a violation was found; 2 bad usage or bad input."
    ))]
    Run {
        /// A scenario file, or the name of a shipped scenario (`reconsim list`).
        scenario: String,
        /// The seed: it draws the fault plan and every latency and delay of the run.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Write a failure file here if an invariant is violated (an existing file
        /// is kept unless it holds this very failure or --force is given).
        #[arg(long, value_name = "FILE")]
        save_failure: Option<PathBuf>,
        /// Print the run's timeline: faults, leadership, writes, cloud calls.
        #[arg(long)]
        timeline: bool,
        /// Write Chrome Trace Event JSON (Perfetto, chrome://tracing) here (a new
        /// file, unless --force).
        #[arg(long, value_name = "FILE")]
        chrome_trace: Option<PathBuf>,
        /// Replace existing output files.
        #[arg(long)]
        force: bool,
        /// Draw the seed's fault plan as `fuzz --swarm` does (a subset of the fault
        /// generators, chosen by the seed): what a swarm campaign's replay line runs.
        #[arg(long)]
        swarm: bool,
        /// Change one field of the scenario for this command: `PATH=VALUE`, VALUE as
        /// JSON or a bare string (e.g. `--set net.latency_ms=[1,50]`); repeatable.
        #[arg(long = "set", value_name = "PATH=VALUE")]
        sets: Vec<String>,
        /// Print `{"scenario","seed","outcome","invariant","time_ms","events","sim_ms","wall_ms","trace_hash",...}`.
        #[arg(long)]
        json: bool,
    },
    /// Run a scenario over a range of seeds, on every core; results do not depend on
    /// --jobs.
    #[command(after_help = concat!(
        "Examples:\n  reconsim fuzz machineapi-no-leader-election --failures-dir failures\n  reconsim fuzz machineapi-leader-election --seeds 0..1000000 --shard 3/16 --time-budget 30m --json > shard-3.json\n\n",
        "Exit codes: 0 every seed held; 1 some seed violated an invariant; 2 bad usage or bad input, or a failure file that could not be written."
    ))]
    Fuzz {
        /// A scenario file, or the name of a shipped scenario (`reconsim list`).
        scenario: String,
        /// Seeds `A..B` (B excluded); default: the scenario's seed budget `0..seeds`.
        #[arg(long, value_name = "A..B")]
        seeds: Option<String>,
        /// Threads (default: the number of cores; at most 256).
        #[arg(long)]
        jobs: Option<usize>,
        /// Run only the seeds `s` with `s % N == I` (one shard of a campaign; `merge`
        /// combines the shards' --json results).
        #[arg(long, value_name = "I/N")]
        shard: Option<String>,
        /// Stop at the smallest failing seed.
        #[arg(long)]
        stop_on_first: bool,
        /// Save a failure file per failing seed in this directory (never over a
        /// different failure: that one goes beside it, named with its trace hash).
        #[arg(long, value_name = "DIR")]
        failures_dir: Option<PathBuf>,
        /// Stop claiming seeds after this much wall time (e.g. 60s, 5m, 1h); the seeds
        /// that ran are always a prefix of the range, reported as `seeds_run`.
        #[arg(long, value_name = "DURATION")]
        time_budget: Option<String>,
        /// Swarm mode: each seed switches on a random half of the scenario's fault
        /// generators (at least one), so one mix of faults cannot mask another's bugs.
        #[arg(long)]
        swarm: bool,
        /// Change one field of the scenario for this command: `PATH=VALUE`, VALUE as
        /// JSON or a bare string (e.g. `--set net.latency_ms=[1,50]`); repeatable.
        #[arg(long = "set", value_name = "PATH=VALUE")]
        sets: Vec<String>,
        /// Print `{"scenario","runs","failures":[{"seed","invariant","time_ms"}],"first_failure_seed","events","sim_ms","wall_ms",...}`, the failures streamed as found.
        #[arg(long)]
        json: bool,
    },
    /// Search beyond random seeds: a reference run, then one fault anchored to each of
    /// its decision points (crash right after a write, lose an answer, pause before a
    /// renewal, delay or drop a watch event, the scenario's own faults at an event),
    /// then pairs of them. Every failure is an ordinary failure file.
    #[command(after_help = concat!(
        "Examples:\n  reconsim search machineapi-leader-election --stop-on-first --failures-dir failures\n  reconsim search kcp-upgrade-waits-for-deletion-1 --exhaustive 2 --max-plans 700 --json\n\n",
        "Exit codes: 0 no plan found a failure; 1 a plan (or a reference run) violated an invariant; 2 bad usage or bad input, or a failure file that could not be written."
    ))]
    Search {
        /// A scenario file, or the name of a shipped scenario (`reconsim list`).
        scenario: String,
        /// Reference seeds `A..B` (B excluded): a reference run per seed, and its plans
        /// (each runs with its reference's seed).
        #[arg(long, value_name = "A..B", default_value = "0..1")]
        seeds: String,
        /// At most this many plans per reference seed (single perturbations first, then
        /// pairs).
        #[arg(long, default_value_t = 500, value_parser = flags::max_plans_arg)]
        max_plans: usize,
        /// Single perturbations only.
        #[arg(long)]
        no_pairs: bool,
        /// No group plans (by default the first plans apply every race-directed
        /// perturbation at once, then each race-directed kind's at once).
        #[arg(long)]
        no_groups: bool,
        /// Threads (default: the number of cores); the report is the same for any.
        #[arg(long)]
        jobs: Option<usize>,
        /// Stop at the first failing plan.
        #[arg(long)]
        stop_on_first: bool,
        /// Save a failure file per failing plan in this directory.
        #[arg(long, value_name = "DIR")]
        failures_dir: Option<PathBuf>,
        /// Print the plans in run order after the reference run, and run none (not
        /// with --exhaustive, whose tree grows from the runs themselves).
        #[arg(long, conflicts_with = "exhaustive")]
        list_plans: bool,
        /// Each reference run carries its seed's own fault plan (the fuzz run of that
        /// seed), and each plan adds one anchored fault to it; without it, references
        /// run fault-free, as Sieve's do.
        #[arg(long)]
        with_faults: bool,
        /// Also flag a plan that holds every invariant but ends differently from its
        /// reference run (Sieve's differential oracle: masked end state, objects created
        /// and deleted; docs/search.md): findings without writing an invariant.
        #[arg(long)]
        differential: bool,
        /// Coverage guidance: keep the plans whose runs reach a new abstract signature
        /// (which process role made which kind of step after which) and try their
        /// mutations first (an anchor one event earlier or later; paired with the first
        /// singles), instead of blind pairs.
        #[arg(long, conflicts_with = "exhaustive")]
        coverage: bool,
        /// Bounded exhaustive search instead: every ordering of two requests that could
        /// have arrived either way round (a swap), then the swaps of each swapped run,
        /// up to DEPTH deep, breadth first; a run that repeats an interleaving already
        /// seen is not explored again. `--max-plans` bounds the whole tree.
        #[arg(long, value_name = "DEPTH", value_parser = clap::value_parser!(u64).range(1..=8))]
        exhaustive: Option<u64>,
        /// Change one field of the scenario for this command: `PATH=VALUE`, VALUE as
        /// JSON or a bare string (e.g. `--set net.latency_ms=[1,50]`); repeatable.
        #[arg(long = "set", value_name = "PATH=VALUE")]
        sets: Vec<String>,
        /// Print `{"scenario","seeds","references":[...],"failures":[{"seed","plan","description","invariant","time_ms","file"}],"first_failure",...}`.
        #[arg(long)]
        json: bool,
    },
    /// Hold each scenario to its expectation over its seed budget (what a CI job calls):
    /// a `violation` scenario must fail on some seed of `0..seeds`, a `clean` one on
    /// none.
    #[command(after_help = concat!(
        "Examples:\n  reconsim check my-buggy.json my-fixed.json\n  reconsim check --json > verdicts.json   # every shipped scenario\n\n",
        "Exit codes: 0 every expectation held; 1 some expectation broke (its line says FAIL); 2 bad usage or bad input."
    ))]
    Check {
        /// Scenario files or names of shipped scenarios; none: every scenario `list`
        /// shows.
        #[arg(value_name = "SCENARIO")]
        scenarios: Vec<String>,
        /// Threads (default: the number of cores); verdicts are the same for any.
        #[arg(long)]
        jobs: Option<usize>,
        /// Save the failure that breaks a clean scenario's expectation in this directory.
        #[arg(long, value_name = "DIR")]
        failures_dir: Option<PathBuf>,
        /// Change one field of the scenario for this command: `PATH=VALUE`, VALUE as
        /// JSON or a bare string (e.g. `--set net.latency_ms=[1,50]`); repeatable.
        #[arg(long = "set", value_name = "PATH=VALUE")]
        sets: Vec<String>,
        /// Print `{"scenarios":[{"scenario","expect","holds","seeds","runs","first_failure_seed","invariant","file"}],"holds","checked","failed"}`.
        #[arg(long)]
        json: bool,
    },
    /// Combine the `fuzz --json` results of shards into the result of the whole
    /// campaign, refusing duplicate, overlapping or missing shards.
    #[command(after_help = concat!(
        "Examples:\n  reconsim merge shard-*.json > merged.json\n  reconsim merge a.json b.json --json\n\n",
        "Exit codes: 0 no shard found a violation; 1 some did; 2 bad input (a shard missing, given twice or overlapping, another scenario)."
    ))]
    Merge {
        /// `reconsim fuzz --json` results: the shards I/N of one range, or ranges that
        /// follow one another.
        #[arg(required = true, value_name = "RESULT.json")]
        results: Vec<PathBuf>,
        /// The merged result is JSON either way (the flag is accepted like every
        /// command's).
        #[arg(long)]
        json: bool,
    },
    /// Minimise a failure's fault plan while the same invariant still fails; the input
    /// must replay first, and the output is replayed before it is written.
    #[command(after_help = concat!(
        "Examples:\n  reconsim shrink failures/machineapi-lease-expiry-pause-seed-5.json -o small.json\n  reconsim shrink big.json -o small.json --max-runs 200 --force --json\n\n",
        "Exit codes: 0 shrunk and saved; 1 the input does not reproduce (nothing written); 2 bad usage or bad input (the output exists, or is the input)."
    ))]
    Shrink {
        /// A failure file (run --save-failure, fuzz or search --failures-dir).
        failure: PathBuf,
        /// Where to write the smaller failure file (default: `out/<input's name>-small.json`,
        /// in the folder .gitignore covers).
        #[arg(short = 'o', long = "output", value_name = "SMALLER.json")]
        output: Option<PathBuf>,
        /// At most this many simulation runs.
        #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=reconsim_scenario::limits::SHRINK_RUNS_MAX))]
        max_runs: u64,
        /// Replace the output file if it exists (never the input).
        #[arg(long)]
        force: bool,
        /// Print `{"reproduced","verified","faults_before","faults_after","runs","budget_exhausted","invariant","trace_hash","output"}`.
        #[arg(long)]
        json: bool,
    },
    /// Explain a failure: the faults, and what led to the violation, object by object.
    /// It replays first: a failure that no longer happens is not explained.
    #[command(after_help = concat!(
        "Examples:\n  reconsim explain small.json\n  reconsim explain small.json --html out/small.html   # swimlanes, open in a browser\n  reconsim explain failures/kcp-upgrade-counts-deleting-3-seed-31.json --json\n\n",
        "Exit codes: 0 explained; 1 the failure does not reproduce; 2 bad usage or bad input."
    ))]
    Explain {
        /// A failure file (run --save-failure, fuzz or search --failures-dir, shrink).
        failure: PathBuf,
        /// Also write the story as one self-contained HTML page here: a lane per
        /// process, requests as arrows, faults as bands, the violation marked (a new
        /// file, unless --force).
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Replace an existing HTML page.
        #[arg(long)]
        force: bool,
        /// Print `{"reproduced","headline","faults","objects","lines"}`.
        #[arg(long)]
        json: bool,
    },
    /// Re-run a failure file and check it fails the same way (the same invariant and
    /// the same trace hash).
    #[command(after_help = concat!(
        "Examples:\n  reconsim replay small.json --timeline\n  reconsim replay small.json --html out/small.html         # swimlanes, open in a browser\n  reconsim replay small.json --chrome-trace out/trace.json # open in ui.perfetto.dev\n\n",
        "Exit codes: 0 reproduced; 1 not reproduced; 2 bad usage or bad input (a plan naming a host or process the world lacks)."
    ))]
    Replay {
        /// A failure file (run --save-failure, fuzz or search --failures-dir, shrink).
        failure: PathBuf,
        /// Write Chrome Trace Event JSON (Perfetto, chrome://tracing) here (a new
        /// file, unless --force).
        #[arg(long, value_name = "FILE")]
        chrome_trace: Option<PathBuf>,
        /// Write the failure as one self-contained HTML page here (as `explain
        /// --html`): a lane per process, requests as arrows, faults as bands.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Print the run's timeline first: faults, leadership, writes, cloud calls,
        /// the controllers' notes (as `run --timeline`).
        #[arg(long)]
        timeline: bool,
        /// Replace an existing Chrome trace file or HTML page.
        #[arg(long)]
        force: bool,
        /// Print `{"reproduced","same_violation","trace_hash","invariant","expected_trace_hash","expected_invariant","time_ms"}`.
        #[arg(long)]
        json: bool,
    },
}

impl Command {
    /// The command's `--set`s, parsed.
    fn sets(&self) -> Result<Vec<Set>, String> {
        let raw = match self {
            Command::Run { sets, .. }
            | Command::Fuzz { sets, .. }
            | Command::Search { sets, .. }
            | Command::Check { sets, .. } => sets.as_slice(),
            _ => &[],
        };
        raw.iter()
            .map(|s| crate::scenario::variants::parse_set(s))
            .collect()
    }
}

/// A user error: printed on one line, exit code 2.
struct UsageError(String);

impl<E: std::fmt::Display> From<E> for UsageError {
    fn from(e: E) -> Self {
        UsageError(e.to_string())
    }
}

/// The `reconsim` binary: the builtin families only.
pub fn main() -> ExitCode {
    run_cli(&crate::families::builtin(), None)
}

/// The command line with the families of `families` (a user's binary:
/// `reconsim::families::builtin().with(mine)`). Its file name names it in errors and
/// help; replay lines start it the way it was started.
pub fn main_with(families: Families) -> ExitCode {
    let program = std::env::args_os()
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
        })
        .filter(|s| !s.is_empty());
    run_cli(&families, program)
}

fn run_cli(families: &Families, program: Option<String>) -> ExitCode {
    // A closed pipe (`reconsim fuzz ... | head`) ends the process quietly, as for any
    // Unix filter, instead of a panic in println!.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE at start-up, before any
    // thread exists, is what a C program starts with.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Logs for people debugging the simulator itself: RUST_LOG=reconsim=debug. Off by
    // default, and on stderr, so `--json` output stays one document on stdout.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = match &program {
        None => Cli::parse(),
        Some(name) => {
            let matches = Cli::command().bin_name(name.clone()).get_matches();
            Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
        }
    };
    let sets = match cli.command.sets() {
        Ok(sets) => sets,
        Err(msg) => {
            eprintln!("{}: error: {msg}", program.as_deref().unwrap_or("reconsim"));
            return ExitCode::from(2);
        }
    };
    let name = program.as_deref().unwrap_or("reconsim");
    let app = App {
        families,
        library: crate::shipped::library(),
        program: name,
        invocation: invocation(name),
        sets,
    };
    let app = &app;
    let result = match cli.command {
        Command::List { json } => list::list(app, json),
        Command::Run {
            scenario,
            seed,
            save_failure,
            timeline,
            chrome_trace,
            force,
            swarm,
            json,
            sets: _,
        } => run::run(
            app,
            &scenario,
            seed,
            swarm,
            Outputs {
                save: save_failure.as_deref(),
                chrome: chrome_trace.as_deref(),
                html: None,
                force,
            },
            timeline,
            json,
        ),
        Command::Search {
            scenario,
            seeds,
            max_plans,
            no_pairs,
            no_groups,
            jobs,
            stop_on_first,
            failures_dir,
            list_plans,
            with_faults,
            differential,
            coverage,
            exhaustive,
            json,
            sets: _,
        } => jobs_or_cores(jobs).and_then(|jobs| {
            let (start, end) = parse_seeds(&seeds)?;
            if end - start > limits::SEARCH_SEEDS_MAX {
                return Err(UsageError(format!(
                    "--seeds: at most {} reference seeds (SEARCH_SEEDS_MAX), not {}",
                    limits::SEARCH_SEEDS_MAX,
                    end - start
                )));
            }
            let base = if with_faults {
                crate::scenario::search::Base::Generated
            } else {
                crate::scenario::search::Base::None
            };
            if list_plans {
                return search::list_plans_cmd(
                    app,
                    &scenario,
                    start,
                    max_plans,
                    (!no_pairs, !no_groups),
                    base,
                    json,
                );
            }
            search::search_cmd(
                app,
                &scenario,
                crate::scenario::search::SearchConfig {
                    seed: start,
                    seeds: end - start,
                    max_plans,
                    jobs,
                    pairs: !no_pairs,
                    groups: !no_groups,
                    stop_on_first,
                    base,
                    differential,
                    coverage,
                    exhaustive: exhaustive.map(|d| d as usize),
                },
                failures_dir.as_deref(),
                json,
            )
        }),
        Command::Fuzz {
            scenario,
            seeds,
            jobs,
            shard,
            stop_on_first,
            failures_dir,
            time_budget,
            swarm,
            json,
            sets: _,
        } => fuzz::fuzz_cmd(
            app,
            &scenario,
            FuzzArgs {
                seeds: seeds.as_deref(),
                jobs,
                shard: shard.as_deref(),
                stop_on_first,
                failures_dir: failures_dir.as_deref(),
                time_budget: time_budget.as_deref(),
                swarm,
            },
            json,
        ),
        Command::Check {
            scenarios,
            jobs,
            failures_dir,
            json,
            sets: _,
        } => jobs_or_cores(jobs)
            .and_then(|jobs| check::check(app, &scenarios, jobs, failures_dir.as_deref(), json)),
        Command::Merge { results, json: _ } => merge::merge(&results),
        Command::Replay {
            failure,
            chrome_trace,
            html,
            timeline,
            force,
            json,
        } => replay::replay(
            app,
            &failure,
            Outputs {
                save: None,
                chrome: chrome_trace.as_deref(),
                html: html.as_deref(),
                force,
            },
            timeline && !json,
            json,
        ),
        Command::Explain {
            failure,
            html,
            force,
            json,
        } => explain::explain(app, &failure, html.as_deref(), force, json),
        Command::Shrink {
            failure,
            output,
            max_runs,
            force,
            json,
        } => {
            let output = output.unwrap_or_else(|| default_output(&failure, "small"));
            shrink::shrink(app, &failure, &output, max_runs, force, json)
        }
    };
    match result {
        Ok(code) => code,
        Err(UsageError(msg)) => {
            eprintln!("{}: error: {msg}", app.program);
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// Help that teaches: every argument described, two examples and the exit codes on
    /// every command, `--json` on every command.
    #[test]
    fn every_command_describes_every_argument_and_shows_examples() {
        let cli = Cli::command();
        for sub in cli.get_subcommands() {
            let name = sub.get_name();
            for arg in sub.get_arguments() {
                assert!(
                    arg.get_help().is_some() || arg.get_long_help().is_some(),
                    "{name} {} has no help text",
                    arg.get_id()
                );
            }
            assert!(
                sub.get_arguments().any(|a| a.get_id() == "json"),
                "{name} takes no --json"
            );
            let after = sub
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            let examples = after
                .lines()
                .filter(|l| l.starts_with("  reconsim ") || l.starts_with("  RECONSIM_"))
                .count();
            assert!(examples >= 2, "{name} shows {examples} examples: {after}");
            assert!(after.contains("Exit codes: 0 "), "{name}: {after}");
        }
    }
}
