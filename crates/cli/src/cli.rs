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

use crate::scenario::Families;
use crate::scenario::failure::FailureFile;
use crate::scenario::fuzz::Campaign;
use crate::scenario::library::{Library, Source};
use crate::scenario::variants::Set;
use crate::scenario::{Scenario, limits, runner};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "reconsim",
    version,
    about = "Deterministic simulation of Kubernetes reconciler races",
    long_about = "Deterministic simulation of Kubernetes reconciler races: controllers run against a simulated API server, cloud and kubelets on a seeded scheduler that injects partitions, lease expiry, pauses and crashes. One seed is one exact history, so every failure replays.\n\nA SCENARIO is a scenario file (a path) or the name of a shipped scenario (`reconsim list`); shipped scenarios are built into the binary, and $RECONSIM_SCENARIOS points it at a directory of others. A FAILURE is a failure file written by run --save-failure, fuzz/search --failures-dir or shrink. Every command takes --json and then prints exactly one JSON document on stdout.",
    after_help = "Examples:\n  reconsim fuzz machineapi-no-leader-election --failures-dir failures\n  reconsim replay failures/machineapi-no-leader-election-seed-0.json --timeline\n  reconsim check machineapi-no-leader-election machineapi-leader-election\n\nExit codes: 0 every invariant held; 1 a violation was found (or a replay did not reproduce, or an expectation broke); 2 bad usage or bad input."
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
        #[arg(long, default_value_t = 500, value_parser = max_plans_arg)]
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
        "Examples:\n  reconsim explain small.json\n  reconsim explain failures/kcp-upgrade-counts-deleting-3-seed-21.json --json\n\n",
        "Exit codes: 0 explained; 1 the failure does not reproduce; 2 bad usage or bad input."
    ))]
    Explain {
        /// A failure file (run --save-failure, fuzz or search --failures-dir, shrink).
        failure: PathBuf,
        /// Print `{"reproduced","headline","faults","objects","lines"}`.
        #[arg(long)]
        json: bool,
    },
    /// Re-run a failure file and check it fails the same way (the same invariant and
    /// the same trace hash).
    #[command(after_help = concat!(
        "Examples:\n  reconsim replay small.json --timeline\n  reconsim replay small.json --chrome-trace trace.json   # open in ui.perfetto.dev\n\n",
        "Exit codes: 0 reproduced; 1 not reproduced; 2 bad usage or bad input (a plan naming a host or process the world lacks)."
    ))]
    Replay {
        /// A failure file (run --save-failure, fuzz or search --failures-dir, shrink).
        failure: PathBuf,
        /// Write Chrome Trace Event JSON (Perfetto, chrome://tracing) here (a new
        /// file, unless --force).
        #[arg(long, value_name = "FILE")]
        chrome_trace: Option<PathBuf>,
        /// Print the run's timeline first: faults, leadership, writes, cloud calls,
        /// the controllers' notes (as `run --timeline`).
        #[arg(long)]
        timeline: bool,
        /// Replace an existing Chrome trace file.
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

/// How to start this binary again from where it was started: the path or name it was
/// started by (`target/release/reconsim` under `cargo run`, `reconsim` from PATH).
fn invocation(name: &str) -> String {
    match std::env::args_os().next() {
        Some(a) if !a.is_empty() => shell_word(&a.to_string_lossy()),
        _ => name.to_string(),
    }
}

/// `word` as a POSIX shell reads it back: as it is when it holds only safe characters,
/// else in single quotes.
fn shell_word(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
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

/// What every command needs: the registry, the scenarios it finds by name and the
/// program name for replay lines.
struct App<'a> {
    families: &'a Families,
    library: Library,
    /// The binary's name, for errors.
    program: &'a str,
    /// How this binary was started (`target/release/reconsim` under `cargo run`, or
    /// `reconsim` from PATH), so a replay line runs as printed.
    invocation: String,
    /// The command's `--set`s, applied to every scenario it loads.
    sets: Vec<Set>,
}

impl App<'_> {
    /// A SCENARIO argument (a path or a shipped scenario's name), loaded with the
    /// registry.
    fn load(&self, arg: &str) -> Result<(Source, Scenario), UsageError> {
        Ok(self.library.load_with(arg, self.families, &self.sets)?)
    }

    /// A failure file, checked as a scenario is, and its plan's processes by a run.
    fn load_failure(&self, path: &Path) -> Result<FailureFile, UsageError> {
        let f = FailureFile::load(path, self.families)?;
        f.check_targets(&path.display().to_string())?;
        Ok(f)
    }

    /// The command that runs `seed` of the scenario `arg` again, with this command's
    /// `--set`s, for people.
    fn run_command(&self, arg: &str, seed: u64) -> String {
        let mut line = format!("{} run {} --seed {seed}", self.invocation, shell_word(arg));
        for set in &self.sets {
            let spec = format!("{}={}", set.path.trim_start_matches('.'), set.value);
            line.push_str(&format!(" --set {}", shell_word(&spec)));
        }
        line
    }

    /// The command that replays a failure file, for people.
    fn replay_command(&self, path: &Path) -> String {
        format!(
            "{} replay {}",
            self.invocation,
            shell_word(&path.display().to_string())
        )
    }
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
        Command::List { json } => list(app, json),
        Command::Run {
            scenario,
            seed,
            save_failure,
            timeline,
            chrome_trace,
            force,
            json,
            sets: _,
        } => run(
            app,
            &scenario,
            seed,
            Outputs {
                save: save_failure.as_deref(),
                chrome: chrome_trace.as_deref(),
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
                return list_plans_cmd(
                    app,
                    &scenario,
                    start,
                    max_plans,
                    (!no_pairs, !no_groups),
                    base,
                    json,
                );
            }
            search_cmd(
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
        } => fuzz_cmd(
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
            .and_then(|jobs| check(app, &scenarios, jobs, failures_dir.as_deref(), json)),
        Command::Merge { results, json: _ } => merge(&results),
        Command::Replay {
            failure,
            chrome_trace,
            timeline,
            force,
            json,
        } => replay(
            app,
            &failure,
            Outputs {
                save: None,
                chrome: chrome_trace.as_deref(),
                force,
            },
            timeline && !json,
            json,
        ),
        Command::Explain { failure, json } => explain(app, &failure, json),
        Command::Shrink {
            failure,
            output,
            max_runs,
            force,
            json,
        } => {
            let output = output.unwrap_or_else(|| default_output(&failure, "small"));
            shrink(app, &failure, &output, max_runs, force, json)
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

fn list(app: &App<'_>, json: bool) -> Result<ExitCode, UsageError> {
    let mut rows = Vec::new();
    for source in app.library.entries()? {
        let s = app.library.load_source(&source, app.families)?;
        rows.push((source, s));
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
        println!(
            "{:<width$}  {:<9}  {:>6}  DESCRIPTION",
            "NAME", "EXPECT", "SEEDS"
        );
        for (_, s) in &rows {
            println!(
                "{:<width$}  {:<9}  {:>6}  {}",
                s.name,
                s.expect.to_string(),
                s.seeds,
                summary(&s.description)
            );
        }
        match std::env::var_os(crate::scenario::library::ENV) {
            Some(d) => println!(
                "({} scenarios of ${} = {})",
                rows.len(),
                crate::scenario::library::ENV,
                Path::new(&d).display()
            ),
            None => println!(
                "({} scenarios built into this binary; ${} points it at a directory of others)",
                rows.len(),
                crate::scenario::library::ENV
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A description's first sentence, cut to fit a line.
fn summary(description: &str) -> String {
    const WIDTH: usize = 90;
    let first = description
        .split(". ")
        .next()
        .unwrap_or("")
        .trim_end_matches('.');
    if first.chars().count() <= WIDTH {
        first.to_string()
    } else {
        let cut: String = first.chars().take(WIDTH - 3).collect();
        format!("{cut}...")
    }
}

/// The files a run or replay writes besides its report, and whether an existing one
/// may be replaced.
#[derive(Clone, Copy)]
struct Outputs<'a> {
    save: Option<&'a Path>,
    chrome: Option<&'a Path>,
    force: bool,
}

/// `Err` unless `output` may be written: never onto `input` (the file being read), and
/// not onto an existing file unless `force`. Checked before any run, so a refusal costs
/// nothing.
fn check_output(
    output: &Path,
    input: Option<&Path>,
    force: bool,
    flag: &str,
) -> Result<(), UsageError> {
    if let Some(input) = input
        && same_file(output, input)
    {
        return Err(UsageError(format!(
            "{}: {flag}: the output would replace the input file; choose another path",
            output.display()
        )));
    }
    if output.exists() && !force {
        return Err(UsageError(format!(
            "{}: {flag}: the file exists; choose another path, or add --force to replace it",
            output.display()
        )));
    }
    create_parent(output)
}

/// `out/<input's file stem>-<suffix>.json`: where an output goes when none is named.
fn default_output(input: &Path, suffix: &str) -> PathBuf {
    let stem = input
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "failure".into());
    Path::new("out").join(format!("{stem}-{suffix}.json"))
}

/// Create the directory an output goes in, if it is missing.
fn create_parent(output: &Path) -> Result<(), UsageError> {
    match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => std::fs::create_dir_all(d).map_err(|e| {
            UsageError(format!(
                "{}: cannot create its directory: {e}",
                output.display()
            ))
        }),
        _ => Ok(()),
    }
}

/// Whether two paths name one file (the output side need not exist yet).
fn same_file(a: &Path, b: &Path) -> bool {
    let canonical = |p: &Path| {
        std::fs::canonicalize(p).ok().or_else(|| {
            let parent = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            Some(std::fs::canonicalize(parent).ok()?.join(p.file_name()?))
        })
    };
    match (canonical(a), canonical(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Write a run's Chrome trace, and say where on stderr.
fn write_chrome(
    path: &Path,
    world: &crate::scenario::build::World,
    outcome: &runner::Outcome,
) -> Result<(), UsageError> {
    let doc = crate::scenario::chrome::chrome_trace(world, outcome.violation.as_ref());
    std::fs::write(path, doc.to_string()).map_err(|e| {
        UsageError(format!(
            "{}: cannot write the Chrome trace: {e}",
            path.display()
        ))
    })?;
    eprintln!(
        "wrote the Chrome trace to {} (open it in ui.perfetto.dev or chrome://tracing)",
        path.display()
    );
    Ok(())
}

fn run(
    app: &App<'_>,
    arg: &str,
    seed: u64,
    out: Outputs<'_>,
    timeline: bool,
    json: bool,
) -> Result<ExitCode, UsageError> {
    let (source, scenario) = app.load(arg)?;
    let input = source.path();
    if let Some(c) = out.chrome {
        check_output(c, input, out.force, "--chrome-trace")?;
    }
    if let (Some(f), Some(input)) = (out.save, input) {
        // An existing file holding this very failure is fine: checked after the run.
        if same_file(f, input) {
            check_output(f, Some(input), out.force, "--save-failure")?;
        }
    }
    let save = out.save;
    let chrome = out.chrome;
    let start = Instant::now();
    let plan = crate::scenario::faults::generate(&scenario, seed);
    let mode = if (timeline && !json) || chrome.is_some() {
        crate::sim::TraceMode::Full
    } else {
        crate::sim::TraceMode::Hash
    };
    let (outcome, world) = runner::run_world(&scenario, seed, plan.clone(), mode);
    let wall_ms = start.elapsed().as_millis() as u64;
    if let Some(path) = chrome {
        write_chrome(path, &world, &outcome)?;
    }
    if timeline && !json {
        let until = crate::sim::SimTime(outcome.sim_ms);
        for line in crate::scenario::timeline::timeline(&world, until) {
            println!("{line}");
        }
    }
    let failure = FailureFile::new(&scenario, &plan, &outcome);
    if let (Some(path), Some(f)) = (save, &failure) {
        let cannot = |e: std::io::Error| {
            UsageError(format!(
                "{}: cannot write the failure file: {e}",
                path.display()
            ))
        };
        create_parent(path)?;
        let written = if out.force {
            f.save(path).map(|()| true)
        } else {
            f.save_if_absent(path)
        };
        if !written.map_err(cannot)? {
            return Err(UsageError(format!(
                "{}: --save-failure: the file exists and holds another failure; choose another path, or add --force to replace it (replay this one with `{}`)",
                path.display(),
                app.run_command(arg, seed)
            )));
        }
    }
    let v = outcome.violation.as_ref();
    if json {
        let doc = json!({
            "scenario": scenario.name,
            "seed": seed,
            "outcome": if v.is_some() { "violation" } else { "clean" },
            "invariant": v.map(|v| v.invariant.clone()),
            "time_ms": v.map(|v| v.time.as_ms()),
            "message": v.map(|v| v.message.clone()),
            "objects": v.map(|v| v.objects.clone()),
            "events": outcome.events,
            "sim_ms": outcome.sim_ms,
            "wall_ms": wall_ms,
            "trace_hash": outcome.trace_hash_hex(),
            "faults": plan.len(),
        });
        println!("{doc}");
    } else {
        match v {
            None => println!(
                "{} seed {seed}: clean ({} events, {} simulated, {wall_ms} ms, trace {})",
                scenario.name,
                outcome.events,
                crate::sim::SimTime(outcome.sim_ms),
                outcome.trace_hash_hex()
            ),
            Some(v) => {
                println!(
                    "{} seed {seed}: VIOLATION of {} at t={}\n  {}\n  objects: {}",
                    scenario.name,
                    v.invariant,
                    v.time,
                    v.message,
                    v.objects.join(", ")
                );
                match save {
                    Some(p) => println!(
                        "  saved {}\n  replay: {}",
                        p.display(),
                        app.replay_command(p)
                    ),
                    None => println!("  replay: {}", app.run_command(arg, seed)),
                }
            }
        }
    }
    Ok(if v.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Two whole numbers `a<sep>b` with `a < b`; the error names the flag and the form.
fn parse_pair(flag: &str, s: &str, sep: &str, form: &str) -> Result<(u64, u64), UsageError> {
    let bad = || UsageError(format!("{flag}: expected {form}, not `{s}`"));
    let (a, b) = s.split_once(sep).ok_or_else(bad)?;
    let (a, b): (u64, u64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    if a >= b {
        return Err(bad());
    }
    Ok((a, b))
}

fn parse_seeds(s: &str) -> Result<(u64, u64), UsageError> {
    parse_pair("--seeds", s, "..", "A..B with A < B (e.g. 0..200)")
}

fn parse_shard(s: &str) -> Result<(u64, u64), UsageError> {
    parse_pair("--shard", s, "/", "I/N with I < N (e.g. 0/4)")
}

/// `fuzz`'s options, as given.
struct FuzzArgs<'a> {
    seeds: Option<&'a str>,
    jobs: Option<usize>,
    shard: Option<&'a str>,
    stop_on_first: bool,
    failures_dir: Option<&'a Path>,
    time_budget: Option<&'a str>,
    swarm: bool,
}

/// `60s`, `5m`, `1h`, `500ms`, or plain seconds.
fn parse_duration(s: &str) -> Result<std::time::Duration, UsageError> {
    let bad = || {
        UsageError(format!(
            "--time-budget: expected a duration such as 60s, 5m or 1h, not `{s}`"
        ))
    };
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, ""), |i| s.split_at(i));
    let n: u64 = num.parse().map_err(|_| bad())?;
    let unit_ms: u64 = match unit {
        "" | "s" => 1000,
        "ms" => 1,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(bad()),
    };
    let max = limits::TIME_BUDGET_MS_MAX;
    match n.checked_mul(unit_ms) {
        Some(0) => Err(bad()),
        Some(ms) if ms <= max => Ok(std::time::Duration::from_millis(ms)),
        _ => Err(UsageError(format!(
            "--time-budget: at most 30 days ({}h, TIME_BUDGET_MS_MAX), not `{s}`",
            max / 3_600_000
        ))),
    }
}

/// What a campaign saved, counted in seed order so that what it reports is the same for
/// any `--jobs`: a save is recorded as it happens (on the thread that found the failure)
/// and settled when the campaign hands that seed's failure on in order ([`Saves::settle`]);
/// a save of a seed past a `--stop-on-first` cut is never settled nor reported. Bounded:
/// at most a window of saves waits to be settled.
#[derive(Default)]
struct Saves {
    /// Saves of seeds not handed on yet.
    pending: std::collections::BTreeMap<u64, Result<PathBuf, String>>,
    saved: u64,
    errors: u64,
    first_errors: Vec<String>,
    /// The first settled seed (the smallest failing one), and how its save went.
    first: Option<(u64, Result<PathBuf, String>)>,
}

impl Saves {
    const ERRORS_SHOWN: usize = 5;

    /// Save the failure of `outcome` in `dir` as `<scenario>-seed-<N>.json` (never over
    /// a different one) and record how it went.
    fn save(
        saves: &std::sync::Mutex<Saves>,
        dir: &Path,
        scenario: &Scenario,
        plan: &crate::scenario::Plan,
        outcome: &runner::Outcome,
    ) {
        let Some(f) = FailureFile::new(scenario, plan, outcome) else {
            return;
        };
        let path = dir.join(format!("{}-seed-{}.json", scenario.name, outcome.seed));
        let result = f
            .save_new(&path)
            .map_err(|e| format!("{}: {e}", path.display()));
        saves
            .lock()
            .expect("no thread panics holding it")
            .pending
            .insert(outcome.seed, result);
    }

    /// Count the save of `seed`, whose failure the campaign now reports (in seed order).
    fn settle(&mut self, seed: u64) {
        let Some(result) = self.pending.remove(&seed) else {
            return;
        };
        match &result {
            Ok(_) => self.saved += 1,
            Err(e) => {
                self.errors += 1;
                if self.first_errors.len() < Self::ERRORS_SHOWN {
                    self.first_errors.push(e.clone());
                }
            }
        }
        if self.first.is_none() {
            self.first = Some((seed, result));
        }
    }

    /// Where the failure of `seed` was saved, if it was.
    fn path_of(&self, seed: u64) -> Option<&Path> {
        match &self.first {
            Some((s, Ok(p))) if *s == seed => Some(p),
            _ => None,
        }
    }

    /// Print the errors on stderr; `true` if there were any.
    fn report_errors(&self, program: &str) -> bool {
        for e in &self.first_errors {
            eprintln!("{program}: error: cannot write the failure file {e}");
        }
        if self.errors > self.first_errors.len() as u64 {
            eprintln!(
                "{program}: error: ... and {} more failure files not written",
                self.errors - self.first_errors.len() as u64
            );
        }
        self.errors > 0
    }
}

fn fuzz_cmd(app: &App<'_>, arg: &str, a: FuzzArgs<'_>, json: bool) -> Result<ExitCode, UsageError> {
    use std::io::Write;
    let FuzzArgs {
        seeds,
        jobs,
        shard,
        stop_on_first,
        failures_dir,
        time_budget,
        swarm,
    } = a;
    let budget = time_budget.map(parse_duration).transpose()?;
    let (_, scenario) = app.load(arg)?;
    let (start, end) = match seeds {
        Some(s) => parse_seeds(s)?,
        None => (0, scenario.seeds),
    };
    let shard = shard.map(parse_shard).transpose()?;
    let jobs = jobs_or_cores(jobs)?;
    create_failures_dir(failures_dir)?;
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
    let mut listed = 0u64;
    let mut on_summary = |f: &crate::scenario::fuzz::FailureSummary| {
        saves
            .lock()
            .expect("no thread panics holding it")
            .settle(f.seed);
        if json {
            if written.is_ok() {
                let sep = if listed == 0 { "" } else { "," };
                let item = serde_json::to_string(f).expect("summaries serialize");
                written = write!(out, "{sep}{item}");
            }
        } else if shown.len() < SHOWN {
            shown.push(f.clone());
        }
        listed += 1;
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
                None => println!("  replay: {}", app.run_command(arg, seed)),
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

fn explain(app: &App<'_>, path: &Path, json: bool) -> Result<ExitCode, UsageError> {
    let f = app.load_failure(path)?;
    // Explain's own run is the replay: a file whose scenario or invariant was edited
    // since is not explained by some other failure.
    let e = match crate::scenario::explain::explain(&f) {
        Ok(e) => e,
        Err(r) => {
            if json {
                let doc = json!({
                    "reproduced": false,
                    "invariant": r.invariant,
                    "trace_hash": r.trace_hash,
                    "expected_invariant": f.invariant,
                    "expected_trace_hash": f.trace_hash,
                });
                println!("{doc}");
            } else {
                println!("{}", not_reproduced(&f, &r));
                println!("  nothing to explain: the file's failure does not happen any more");
            }
            return Ok(ExitCode::from(1));
        }
    };
    if json {
        let doc = json!({
            "reproduced": true,
            "headline": e.headline,
            "faults": e.faults,
            "objects": e.objects,
            "lines": e.lines,
        });
        println!("{doc}");
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}", e.headline);
    println!("faults: {}", e.faults);
    println!("what led to it ({}):", e.objects.join(", "));
    for line in &e.lines {
        println!("{line}");
    }
    println!(
        "(rv N: the object's resourceVersion, the API server's count of writes when it was written last; a cache that holds a smaller one than the server is behind)"
    );
    println!("replay: {}", app.replay_command(path));
    Ok(ExitCode::SUCCESS)
}

/// What a replay that did not reproduce found, in one or two lines.
fn not_reproduced(f: &FailureFile, r: &crate::scenario::failure::Replay) -> String {
    format!(
        "NOT reproduced: expected {} with trace {}, got {} with trace {}{}{}",
        f.invariant,
        f.trace_hash,
        r.invariant.as_deref().unwrap_or("no violation"),
        r.trace_hash,
        if r.same_violation {
            "\n  the same invariant fails, in a different history"
        } else {
            ""
        },
        if f.reconsim_version != crate::scenario::failure::VERSION {
            format!(
                " (the file was written by reconsim {}, this is {})",
                f.reconsim_version,
                crate::scenario::failure::VERSION
            )
        } else {
            String::new()
        }
    )
}

/// Shrink only what reproduces, write only what replays, and never over the input (nor
/// an existing file without `force`).
fn shrink(
    app: &App<'_>,
    path: &Path,
    output: &Path,
    max_runs: u64,
    force: bool,
    json: bool,
) -> Result<ExitCode, UsageError> {
    check_output(output, Some(path), force, "-o")?;
    let f = app.load_failure(path)?;
    let input = f.replay(crate::sim::TraceMode::Hash);
    if !input.reproduced {
        if json {
            let doc = json!({
                "reproduced": false,
                "invariant": input.invariant,
                "trace_hash": input.trace_hash,
                "expected_invariant": f.invariant,
                "expected_trace_hash": f.trace_hash,
                "output": null,
            });
            println!("{doc}");
        } else {
            println!("{}", not_reproduced(&f, &input));
            println!("  nothing shrunk, nothing written: shrink needs a failure that replays");
        }
        return Ok(ExitCode::from(1));
    }
    let (smaller, report) = crate::scenario::shrink::shrink(&f, max_runs);
    // The output must replay as written: its text read back and run again.
    let text = smaller.to_json();
    let verified = FailureFile::parse(&output.display().to_string(), &text, app.families)
        .map(|back| back.replay(crate::sim::TraceMode::Hash).reproduced)
        .unwrap_or(false);
    if !verified {
        return Err(UsageError(format!(
            "{}: the shrunk failure does not replay as written, so it was not saved; this is a reconsim bug, please report it with the input file",
            output.display()
        )));
    }
    let cannot = |e: std::io::Error| {
        UsageError(format!(
            "{}: cannot write the failure file: {e}",
            output.display()
        ))
    };
    if force {
        smaller.save(output).map_err(cannot)?;
    } else if !smaller.save_if_absent(output).map_err(cannot)? {
        return Err(UsageError(format!(
            "{}: -o: the file appeared while shrinking and holds another failure; it was left as it was",
            output.display()
        )));
    }
    if json {
        let doc = json!({
            "reproduced": true,
            "verified": true,
            "faults_before": report.faults_before,
            "faults_after": report.faults_after,
            "runs": report.runs,
            "budget_exhausted": report.budget_exhausted,
            "invariant": smaller.invariant,
            "trace_hash": smaller.trace_hash,
            "output": output.display().to_string(),
        });
        println!("{doc}");
    } else {
        println!(
            "shrunk {} seed {}: {} -> {} faults in {} runs{}; still {} at t={}\n  the input replayed before shrinking, and the output replays (trace {})\n  saved {}\n  replay: {}",
            f.scenario.name,
            f.seed,
            report.faults_before,
            report.faults_after,
            report.runs,
            if report.budget_exhausted {
                " (run budget spent)"
            } else {
                ""
            },
            smaller.invariant,
            crate::sim::SimTime(smaller.time_ms),
            smaller.trace_hash,
            output.display(),
            app.replay_command(output)
        );
    }
    Ok(ExitCode::SUCCESS)
}

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
fn check(
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
                None => app.run_command(arg, *seed),
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

/// A progress bar on stderr (runs/s, failures, ETA), only for a person at a terminal:
/// never with `--json`, never when stderr is piped.
/// `--jobs`, or the number of cores.
fn jobs_or_cores(jobs: Option<usize>) -> Result<usize, UsageError> {
    match jobs {
        Some(j) if j == 0 || j > limits::JOBS_MAX => Err(UsageError(format!(
            "--jobs: expected 1 to {} (JOBS_MAX), not {j}",
            limits::JOBS_MAX
        ))),
        Some(j) => Ok(j),
        None => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

/// `--max-plans`: 1 to [`limits::SEARCH_PLANS_MAX`].
fn max_plans_arg(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=limits::SEARCH_PLANS_MAX).contains(&n) => Ok(n),
        _ => Err(format!(
            "expected 1 to {} (SEARCH_PLANS_MAX), not `{s}`",
            limits::SEARCH_PLANS_MAX
        )),
    }
}

/// Create `--failures-dir` and make sure files can be written in it, before any run: a
/// read-only directory or mount is a usage error up front, not a campaign whose
/// failures are all lost.
fn create_failures_dir(dir: Option<&Path>) -> Result<(), UsageError> {
    let Some(dir) = dir else { return Ok(()) };
    let cannot =
        |what: &str, e: std::io::Error| UsageError(format!("{}: {what}: {e}", dir.display()));
    std::fs::create_dir_all(dir).map_err(|e| cannot("cannot create the failures directory", e))?;
    let probe = dir.join(format!(".reconsim-probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| cannot("cannot write failure files in this directory", e))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

fn list_plans_cmd(
    app: &App<'_>,
    arg: &str,
    seed: u64,
    max_plans: usize,
    (pairs, groups): (bool, bool),
    base: crate::scenario::search::Base,
    json: bool,
) -> Result<ExitCode, UsageError> {
    use crate::scenario::search;
    let (_, scenario) = app.load(arg)?;
    let config = search::SearchConfig {
        seed,
        max_plans,
        pairs,
        groups,
        base,
        ..Default::default()
    };
    let (_, world) = runner::run_world_recording(
        &scenario,
        seed,
        config.base.plan(&scenario, seed),
        crate::sim::TraceMode::Hash,
        true,
    );
    let (plans, _) = search::plans(&scenario, &world, &config);
    if json {
        println!(
            "{}",
            serde_json::to_string(&plans).expect("plans serialize")
        );
    } else {
        for (i, c) in plans.iter().enumerate() {
            println!("#{i} {}", c.description);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn search_cmd(
    app: &App<'_>,
    arg: &str,
    config: crate::scenario::search::SearchConfig,
    failures_dir: Option<&Path>,
    json: bool,
) -> Result<ExitCode, UsageError> {
    use crate::scenario::search;
    let (_, scenario) = app.load(arg)?;
    create_failures_dir(failures_dir)?;
    // Saved files by (seed, plan); a reference run's own failure is plan `None`.
    type Saved = std::collections::BTreeMap<(u64, Option<usize>), String>;
    let saved = std::sync::Mutex::new(Saved::new());
    let save_errors = std::sync::Mutex::new(Vec::new());
    let save = |seed: u64,
                plan_index: Option<usize>,
                plan: &crate::scenario::Plan,
                outcome: &runner::Outcome| {
        let (Some(dir), Some(f)) = (failures_dir, FailureFile::new(&scenario, plan, outcome))
        else {
            return;
        };
        let name = match plan_index {
            None => format!("{}-seed-{seed}.json", scenario.name),
            Some(i) => format!("{}-search-seed-{seed}-plan-{i}.json", scenario.name),
        };
        let path = dir.join(name);
        match f.save_new(&path) {
            Ok(path) => {
                saved
                    .lock()
                    .expect("not poisoned")
                    .insert((seed, plan_index), path.display().to_string());
            }
            Err(e) => save_errors
                .lock()
                .expect("not poisoned")
                .push(format!("{}: {e}", path.display())),
        }
    };
    let on_failure = |seed: u64,
                      i: usize,
                      _: &search::Candidate,
                      outcome: &runner::Outcome,
                      plan: &crate::scenario::Plan| {
        save(seed, Some(i), plan, outcome);
    };
    tracing::info!(scenario = %scenario.name, seed = config.seed, seeds = config.seeds, "search starts");
    let wall = Instant::now();
    let report = search::search(&scenario, &config, &on_failure);
    let wall_ms = wall.elapsed().as_millis() as u64;
    for s in &report.seeds {
        save(
            s.seed,
            None,
            &config.base.plan(&scenario, s.seed),
            &s.reference,
        );
    }
    // Threads save in any order; errors print in the order of their files' names.
    let mut save_errors = save_errors.into_inner().expect("not poisoned");
    save_errors.sort();
    for e in &save_errors {
        eprintln!("{}: error: cannot write the failure file {e}", app.program);
    }
    let saved = saved.into_inner().expect("not poisoned");
    let first = report.first_failure();
    if json {
        let references: Vec<serde_json::Value> = report
            .seeds
            .iter()
            .map(|s| {
                let r = &s.reference;
                json!({
                    "seed": s.seed,
                    "outcome": if r.violation.is_some() { "violation" } else { "clean" },
                    "invariant": r.violation.as_ref().map(|v| v.invariant.clone()),
                    "time_ms": r.violation.as_ref().map(|v| v.time.as_ms()),
                    "events": r.events,
                    "trace_hash": r.trace_hash_hex(),
                    "decisions": s.decisions,
                    "generated": s.generated,
                    "pruned": s.pruned,
                    "groups": s.groups,
                    "singles": s.singles,
                    "pairs": s.pairs,
                    "runs": s.runs,
                    "mutations": s.mutations,
                    "depth": s.depth,
                    "repeats": s.repeats,
                    "first_failure_plan": s.first_failure_plan,
                    "file": saved.get(&(s.seed, None)),
                })
            })
            .collect();
        let failures: Vec<serde_json::Value> = report
            .failures
            .iter()
            .map(|f| {
                json!({
                    "seed": f.seed,
                    "plan": f.plan,
                    "description": f.description,
                    "invariant": f.invariant,
                    "time_ms": f.time_ms,
                    "file": saved.get(&(f.seed, Some(f.plan))),
                })
            })
            .collect();
        let doc = json!({
            "scenario": scenario.name,
            "seeds": format!("{}..{}", config.seed, config.seed.saturating_add(config.seeds)),
            "references": references,
            "failures": failures,
            "first_failure": first.map(|(seed, plan)| json!({"seed": seed, "plan": plan})),
            "runs": report.runs,
            "runs_to_first_failure": report.runs_to_first_failure,
            "events": report.events,
            "sim_ms": report.sim_ms,
            "wall_ms": wall_ms,
            "jobs": config.jobs,
        });
        println!("{doc}");
    } else {
        for s in &report.seeds {
            let plans = if config.exhaustive.is_some() {
                format!(
                    "exhaustive to depth {}: {} swaps generated, {} runs repeated an interleaving",
                    s.depth, s.generated, s.repeats
                )
            } else {
                format!(
                    "plans: {} generated, {} pruned (causality, repeats), {} groups, {} singles and {} pairs queued",
                    s.generated, s.pruned, s.groups, s.singles, s.pairs
                )
            };
            println!(
                "{} seed {}: reference run {}, {} decision points; {plans}, {} ran{}",
                scenario.name,
                s.seed,
                match &s.reference.violation {
                    Some(v) => format!("VIOLATION {} at {}", v.invariant, v.time),
                    None => "clean".to_string(),
                },
                s.decisions,
                s.runs,
                s.first_failure_plan
                    .map(|p| format!(", first failing plan #{p}"))
                    .unwrap_or_default()
            );
        }
        match first {
            Some((seed, plan)) => {
                let what = match plan {
                    None => "the reference run itself".to_string(),
                    Some(p) => report
                        .failures
                        .iter()
                        .find(|f| f.seed == seed && f.plan == p)
                        .map(|f| {
                            format!(
                                "plan #{p}: {} -> {} at {} ms",
                                f.description, f.invariant, f.time_ms
                            )
                        })
                        .unwrap_or_default(),
                };
                println!(
                    "first failure after {} runs (seed {seed}): {what}; {} failing plans in all, {:.2} s",
                    report.runs_to_first_failure.unwrap_or(0),
                    report.failures.len(),
                    wall_ms as f64 / 1000.0
                );
                if let (Some(dir), false) = (failures_dir, saved.is_empty()) {
                    let files = if saved.len() == 1 { "file" } else { "files" };
                    println!(
                        "  saved {} failure {files} in {}",
                        saved.len(),
                        dir.display()
                    );
                }
                match saved.get(&(seed, plan)) {
                    Some(path) => println!("  replay: {}", app.replay_command(Path::new(path))),
                    None if failures_dir.is_none() => {
                        println!("  (--failures-dir DIR saves each failure as a failure file)")
                    }
                    None => {}
                }
            }
            None => println!(
                "no failure in {} runs, {:.2} s",
                report.runs,
                wall_ms as f64 / 1000.0
            ),
        }
    }
    Ok(if !save_errors.is_empty() {
        ExitCode::from(2)
    } else if first.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

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

/// One `fuzz --json` result given to `merge`, as far as merging needs it.
struct ShardResult {
    path: PathBuf,
    doc: serde_json::Value,
    campaign: Campaign,
    seeds_run: u64,
}

/// Read a `fuzz --json` result: the fields merge needs, each checked.
fn read_result(path: &Path) -> Result<ShardResult, UsageError> {
    let text = crate::scenario::json::read_text(path)?;
    let doc: serde_json::Value = crate::scenario::json::parse_object(
        &path.display().to_string(),
        &text,
        "a `reconsim fuzz --json` result",
    )?;
    let bad = |field: &str, expected: &str| {
        UsageError(format!(
            "{}: at .{field}: expected {expected} (a `reconsim fuzz --json` result)",
            path.display()
        ))
    };
    let num = |field: &str| doc.get(field).and_then(|v| v.as_u64());
    for field in ["runs", "events", "sim_ms", "wall_ms", "seeds_run"] {
        num(field).ok_or_else(|| bad(field, "a whole number"))?;
    }
    doc.get("scenario")
        .and_then(|v| v.as_str())
        .ok_or_else(|| bad("scenario", "a string"))?;
    let failures = doc
        .get("failures")
        .and_then(|v| v.as_array())
        .ok_or_else(|| bad("failures", "an array"))?;
    let seeds = doc
        .get("seeds")
        .and_then(|v| v.as_str())
        .ok_or_else(|| bad("seeds", "the campaign's seeds `A..B`"))?;
    let (start, end) = parse_seeds(seeds).map_err(|_| bad("seeds", "`A..B` with A < B"))?;
    let shard = match doc.get("shard") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(
            v.as_str()
                .and_then(|s| parse_shard(s).ok())
                .ok_or_else(|| bad("shard", "null or `I/N` with I < N"))?,
        ),
    };
    let campaign = Campaign::of_seeds(start, end, shard);
    let seeds_run = num("seeds_run").unwrap_or(0);
    if seeds_run > campaign.len() || num("runs") != Some(seeds_run) {
        return Err(bad(
            "seeds_run",
            &format!(
                "the number of runs, at most the {} seeds of its campaign",
                campaign.len()
            ),
        ));
    }
    // A failure belongs to the seeds that ran.
    for (i, f) in failures.iter().enumerate() {
        let seed = f.get("seed").and_then(|v| v.as_u64());
        let ran = seed.is_some_and(|s| {
            s >= start
                && s < end
                && shard.is_none_or(|(i, n)| s % n == i)
                && (seeds_run == campaign.len() || s < campaign.seed(seeds_run))
        });
        if !ran {
            return Err(bad(
                &format!("failures[{i}].seed"),
                "a seed its campaign ran",
            ));
        }
    }
    Ok(ShardResult {
        path: path.to_path_buf(),
        doc,
        campaign,
        seeds_run,
    })
}

/// Combine shard results into the result of the whole campaign. Believes nothing it can
/// check: the results must be of one scenario and one swarm setting, and must cover
/// their seeds exactly once (no result given twice, no overlap, no missing shard, no
/// gap between ranges), or merge refuses them (exit 2). Results whose time budget ran
/// out merge too; `complete` is then false and `unrun_from` the smallest seed that did
/// not run, below which `first_failure_seed` is exact.
fn merge(paths: &[PathBuf]) -> Result<ExitCode, UsageError> {
    let results: Vec<ShardResult> = paths
        .iter()
        .map(|p| read_result(p))
        .collect::<Result<_, _>>()?;
    let first = &results[0];
    for r in &results[1..] {
        for field in ["scenario", "swarm"] {
            let (a, b) = (
                first.doc.get(field).cloned().unwrap_or(json!(false)),
                r.doc.get(field).cloned().unwrap_or(json!(false)),
            );
            if a != b {
                return Err(UsageError(format!(
                    "{}: at .{field}: expected {a} like {}, not {b}",
                    r.path.display(),
                    first.path.display()
                )));
            }
        }
    }
    for (i, a) in results.iter().enumerate() {
        for b in &results[..i] {
            if same_file(&a.path, &b.path) {
                return Err(UsageError(format!(
                    "{}: given twice; each shard's result merges once",
                    a.path.display()
                )));
            }
        }
    }
    // Group by range: each range is one unsharded result, or every shard I/N of it once.
    let mut ranges: std::collections::BTreeMap<(u64, u64), Vec<&ShardResult>> = Default::default();
    for r in &results {
        ranges
            .entry((r.campaign.start, r.campaign.end))
            .or_default()
            .push(r);
    }
    for ((start, end), group) in &ranges {
        let n = group[0].campaign.shard.map_or(1, |(_, n)| n);
        let mut have: std::collections::BTreeMap<u64, &Path> = Default::default();
        for r in group {
            let (i, m) = r.campaign.shard.unwrap_or((0, 1));
            if m != n {
                return Err(UsageError(format!(
                    "{}: at .shard: seeds {start}..{end} are cut into {n} shards by {}, not {m}: they overlap",
                    r.path.display(),
                    group[0].path.display()
                )));
            }
            if let Some(other) = have.insert(i, &r.path) {
                return Err(UsageError(format!(
                    "{}: covers the same seeds as {} (seeds {start}..{end}{}): a shard merges once",
                    r.path.display(),
                    other.display(),
                    r.campaign
                        .shard
                        .map(|(i, n)| format!(", shard {i}/{n}"))
                        .unwrap_or_default()
                )));
            }
        }
        let missing: Vec<String> = (0..n)
            .filter(|i| !have.contains_key(i))
            .take(8)
            .map(|i| format!("{i}/{n}"))
            .collect();
        if !missing.is_empty() {
            return Err(UsageError(format!(
                "seeds {start}..{end}: missing the results of shard{} {}",
                if missing.len() > 1 { "s" } else { "" },
                missing.join(", ")
            )));
        }
    }
    let keys: Vec<(u64, u64)> = ranges.keys().copied().collect();
    for w in keys.windows(2) {
        let ((a0, a1), (b0, b1)) = (w[0], w[1]);
        let whose = |r: (u64, u64)| ranges[&r][0].path.display().to_string();
        if b0 < a1 {
            return Err(UsageError(format!(
                "{}: seeds {b0}..{b1} overlap seeds {a0}..{a1} of {}",
                whose(w[1]),
                whose(w[0])
            )));
        }
        if b0 > a1 {
            return Err(UsageError(format!(
                "seeds {a1}..{b0} are missing between {} and {}",
                whose(w[0]),
                whose(w[1])
            )));
        }
    }
    let sum = |field: &str| {
        results
            .iter()
            .map(|r| r.doc[field].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    let mut failures: Vec<serde_json::Value> = results
        .iter()
        .flat_map(|r| r.doc["failures"].as_array().into_iter().flatten().cloned())
        .collect();
    failures.sort_by_key(|f| f["seed"].as_u64().unwrap_or(u64::MAX));
    let first_seed = failures.first().and_then(|f| f["seed"].as_u64());
    // The smallest seed some result did not run (its time budget ran out).
    let unrun_from = results
        .iter()
        .filter(|r| r.seeds_run < r.campaign.len())
        .map(|r| r.campaign.seed(r.seeds_run))
        .min();
    let first_file = first_seed.and_then(|seed| {
        results
            .iter()
            .find(|r| {
                r.doc["failures"]
                    .as_array()
                    .is_some_and(|fs| fs.iter().any(|f| f["seed"].as_u64() == Some(seed)))
            })
            .and_then(|r| r.doc.get("first_failure_file").cloned())
    });
    let save_errors: Vec<serde_json::Value> = results
        .iter()
        .flat_map(|r| {
            r.doc
                .get("save_errors")
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
                .cloned()
        })
        .collect();
    let (lo, hi) = (keys[0].0, keys[keys.len() - 1].1);
    let doc = json!({
        "scenario": first.doc["scenario"],
        "runs": sum("runs"),
        "failures": failures,
        "first_failure_seed": first_seed,
        "events": sum("events"),
        "sim_ms": sum("sim_ms"),
        "wall_ms": results.iter().map(|r| r.doc["wall_ms"].as_u64().unwrap_or(0)).max(),
        "seeds": format!("{lo}..{hi}"),
        "merged": results.len(),
        "swarm": first.doc.get("swarm").cloned().unwrap_or(json!(false)),
        "complete": unrun_from.is_none(),
        "unrun_from": unrun_from,
        "failures_saved": sum("failures_saved"),
        "first_failure_file": first_file,
        "save_errors": save_errors,
        "save_error_count": sum("save_error_count"),
    });
    println!("{doc}");
    Ok(if first_seed.is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn replay(
    app: &App<'_>,
    path: &Path,
    out: Outputs<'_>,
    timeline: bool,
    json: bool,
) -> Result<ExitCode, UsageError> {
    if let Some(c) = out.chrome {
        check_output(c, Some(path), out.force, "--chrome-trace")?;
    }
    let chrome = out.chrome;
    let f = app.load_failure(path)?;
    if timeline {
        // The timeline's own run: the judged one below stays the replay's.
        let (outcome, world) = runner::run_world(
            &f.scenario,
            f.seed,
            f.plan.clone(),
            crate::sim::TraceMode::Full,
        );
        let until = crate::sim::SimTime(outcome.sim_ms);
        for line in crate::scenario::timeline::timeline(&world, until) {
            println!("{line}");
        }
    }
    let r = match chrome {
        None => f.replay(crate::sim::TraceMode::Hash),
        Some(out) => {
            let (outcome, world) = runner::run_world(
                &f.scenario,
                f.seed,
                f.plan.clone(),
                crate::sim::TraceMode::Full,
            );
            write_chrome(out, &world, &outcome)?;
            crate::scenario::failure::Replay::judge(&f, outcome)
        }
    };
    if json {
        let doc = json!({
            "reproduced": r.reproduced,
            "same_violation": r.same_violation,
            "trace_hash": r.trace_hash,
            "invariant": r.invariant,
            "expected_trace_hash": f.trace_hash,
            "expected_invariant": f.invariant,
            "time_ms": r.outcome.violation.as_ref().map(|v| v.time.as_ms()),
        });
        println!("{doc}");
    } else if r.reproduced {
        let v = r
            .outcome
            .violation
            .as_ref()
            .expect("reproduced means violated");
        println!(
            "reproduced: {} seed {}: {} at t={} (trace {})\n  {}\n  replay: {}",
            f.scenario.name,
            f.seed,
            v.invariant,
            v.time,
            r.trace_hash,
            v.message,
            app.replay_command(path)
        );
    } else {
        println!("{}", not_reproduced(&f, &r));
    }
    Ok(if r.reproduced {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
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

    #[test]
    fn shell_words_read_back_as_written() {
        assert_eq!(
            super::shell_word("net.latency_ms=[1,50]"),
            "'net.latency_ms=[1,50]'"
        );
        assert_eq!(super::shell_word("a-b_c.json"), "a-b_c.json");
        assert_eq!(super::shell_word("it's"), "'it'\\''s'");
        assert_eq!(super::shell_word(""), "''");
    }
}
