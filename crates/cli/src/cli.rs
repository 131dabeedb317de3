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
#[cfg(feature = "go")]
mod build;
mod check;
mod explain;
mod flags;
mod fuzz;
mod fuzz_combined;
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
use flags::{jobs_or_cores, parse_duration, parse_seeds};
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
    #[command(long_about = concat!(
        "List the scenarios this binary finds by name: the shipped ones, or those of $RECONSIM_SCENARIOS.\n",
        "\n",
        "  EXPECT       what the scenario's runs should show: `clean` (no run breaks an\n",
        "               invariant: a fixed controller) or `violation` (some run does: a\n",
        "               known bug, kept so that the search for it stays tested).\n",
        "  SEEDS        its budget N: seeds 0..N are what `fuzz` runs by default, and N runs\n",
        "               of random seeds, swarm seeds and search plans what `check` holds\n",
        "               to EXPECT.\n",
        "  DESCRIPTION  what it models, whole, under its name (wrapped for 100 columns).",
    ), after_help = concat!(
        "Examples:\n  reconsim list\n  RECONSIM_SCENARIOS=scenarios reconsim list --json   # a directory of scenario files\n\n",
        "Exit codes: 0 listed; 2 a scenario does not load."
    ))]
    List {
        /// Print `[{"name","path","expect","description","seeds","builtin"}]`.
        #[arg(long)]
        json: bool,
    },
    /// Run one seed of a scenario and check its invariants after every event.
    #[command(after_help = concat!(
        "Examples:\n  reconsim run machineapi-no-leader-election --seed 1 --timeline\n  reconsim run scenarios/machineapi-no-leader-election.json --seed 7 --save-failure out/seed-7.json --set 'net.latency_ms=[1,50]'\n\n",
        "Exit codes: 0 every invariant held; 1 a violation was found; 2 bad usage or bad input."
    ))]
    Run {
        /// A scenario file, or the name of a shipped scenario (`reconsim list`).
        #[arg(value_parser = Utf8Arg)]
        scenario: String,
        /// The seed: it draws which of the scenario's faults strike, when and for how
        /// long (the run's fault plan), and every latency and delay of the run.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Write a failure file here if an invariant is violated (an existing file
        /// is kept unless it holds this very failure or --force is given).
        #[arg(value_parser = Utf8Path, long, value_name = "FILE")]
        save_failure: Option<PathBuf>,
        /// Print the run's timeline: faults, leadership, writes, cloud calls.
        #[arg(long)]
        timeline: bool,
        /// Write Chrome Trace Event JSON (Perfetto, chrome://tracing) here (a new
        /// file, unless --force).
        #[arg(value_parser = Utf8Path, long, value_name = "FILE")]
        chrome_trace: Option<PathBuf>,
        /// Replace existing output files.
        #[arg(long)]
        force: bool,
        /// Draw the seed's faults as `fuzz --swarm` does (only some of the scenario's
        /// `faults` entries, chosen by the seed): what a swarm campaign's replay line runs.
        #[arg(long)]
        swarm: bool,
        /// Change one field of the scenario for this command: `PATH=VALUE`, VALUE as
        /// JSON or a bare string (e.g. `--set net.latency_ms=[1,50]`); repeatable.
        #[arg(long = "set", value_name = "PATH=VALUE", value_parser = Utf8Arg)]
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
        #[arg(value_parser = Utf8Arg)]
        scenario: String,
        /// Seeds `A..B` (B excluded); default: the scenario's seed budget `0..N`, N its
        /// `seeds` field (the SEEDS column of `reconsim list`).
        #[arg(long, value_name = "A..B")]
        seeds: Option<String>,
        /// Threads (default: the number of cores; at most 256).
        #[arg(long)]
        jobs: Option<usize>,
        /// Run only the seeds `s` with `s % N == I`: shard I of N, one machine's share of
        /// a campaign split over N machines (`reconsim merge` combines the shards' --json
        /// results into the whole campaign's).
        #[arg(long, value_name = "I/N")]
        shard: Option<String>,
        /// Stop at the smallest failing seed.
        #[arg(long)]
        stop_on_first: bool,
        /// Save a failure file per failing seed in this directory (never over a
        /// different failure: that one goes beside it, named with its trace hash).
        #[arg(value_parser = Utf8Path, long, value_name = "DIR")]
        failures_dir: Option<PathBuf>,
        /// Start no new seed after this much wall time (e.g. 60s, 5m, 1h); the seeds that
        /// ran are always the first of the range, and the report says how many.
        #[arg(long, value_name = "DURATION")]
        time_budget: Option<String>,
        /// Swarm mode: each seed draws faults from only some of the scenario's `faults`
        /// entries (each on with odds 1/2, chosen by the seed; at least one), so that one
        /// kind of fault cannot hide the bugs another finds alone.
        #[arg(long)]
        swarm: bool,
        /// How to spend the seeds' budget: `seeds` (each seed of the range, the
        /// default) or `combined`, as `check` does: as many runs as the range has
        /// seeds, across random seeds, swarm seeds and search plans (each from the
        /// range's first seed), one failure file per finding (the first failure of
        /// each invariant).
        #[arg(long, value_enum, default_value = "seeds")]
        campaign: check::CampaignKind,
        /// With `--campaign combined`: judge its search plans and reference runs by
        /// Sieve's differential and Kamera's divergence oracles too (as `check
        /// --differential`).
        #[arg(long)]
        differential: bool,
        /// Change one field of the scenario for this command: `PATH=VALUE`, VALUE as
        /// JSON or a bare string (e.g. `--set net.latency_ms=[1,50]`); repeatable.
        #[arg(long = "set", value_name = "PATH=VALUE", value_parser = Utf8Arg)]
        sets: Vec<String>,
        /// Print `{"scenario","runs","failures":[{"seed","invariant","time_ms"}],"first_failure_seed","events","sim_ms","wall_ms",...}`, the failures streamed as found (`--campaign combined`: each failure also with "arm","plan","description","index","finding", and "campaign","arms","findings","first_failure").
        #[arg(long)]
        json: bool,
    },
    /// Search beyond random seeds: run the scenario once, then again with faults placed
    /// at chosen steps of that run (a crash right after a write, a lost answer, a
    /// delayed watch event, the scenario's own faults), one or a few at a time. Every
    /// failure is an ordinary failure file.
    #[command(
        long_about = concat!(
            "Search beyond random seeds. A seed draws its faults at random times, which finds races with wide windows; a window of a few milliseconds needs its fault placed at a step of the run. Search runs the scenario once per reference seed, then runs it again and again, each time with faults placed at chosen steps of that first run. Every failure is an ordinary failure file (replay, shrink and explain take it).\n",
            "\n",
            "Words used here and in the report:\n",
            "  reference run   the run of one seed, fault-free unless --with-faults. Every plan runs\n",
            "                  with the same seed, so it is that same run up to its first fault.\n",
            "  decision point  one step of the reference run: a write, read, cloud call or lease\n",
            "                  renewal a process sends, or a watch event it receives. A fault is\n",
            "                  placed (anchored) at one: \"after write of machine-controller-0 #3\"\n",
            "                  is right after that process's third write.\n",
            "  plan            one more run: the reference run with faults at decision points. A\n",
            "                  single has one fault, a pair the faults of two singles together.\n",
            "  race kinds      faults that reorder two steps the reference run took close together,\n",
            "                  where check-then-act races live: stale_read (a controller paused right\n",
            "                  after a read until another process's write lands: it acts on stale\n",
            "                  data), late_write (the writer paused just before, so the read misses\n",
            "                  it), interleave and straddle (another controller reconciles right after\n",
            "                  a write: in the middle of a change, or from a cache that lacks it).\n",
            "  group plan      many race faults in one run (every race kind's at once, 64 at most,\n",
            "                  then each kind's): the first plans unless --no-groups. Most faults are\n",
            "                  harmless, so one run tries dozens; `shrink` keeps the few that matter.\n",
            "  other kinds     crash_after (a controller crashes right after a write or call and\n",
            "                  restarts 10 s later), lose_answer (the request takes effect, its answer\n",
            "                  is lost with its connection), pause_before (a pause before a lease\n",
            "                  renewal, past the lease), delay_event (a watch event 30 s late),\n",
            "                  drop_event (the watch connection breaks), resync_after (a controller\n",
            "                  reconciles right after another process's write), scenario:N (entry N,\n",
            "                  from 0, of the scenario's `faults`, placed at a step in its window).\n",
            "  fault envelope  what the scenario's `faults` say the world may do: the kinds it\n",
            "                  lists, for the processes and hosts it names, at most as long or as\n",
            "                  large; messages as late as its latencies and faults allow together.\n",
            "                  Plans stay within it (the values above cut to fit, the rest left out\n",
            "                  and counted) unless --beyond-envelope; a resync is always within.\n",
            "  pruned          plans not run: a crash after which nothing was in flight, a delayed\n",
            "                  event nothing acts on meanwhile (causality), or a plan in the same\n",
            "                  situation as an earlier one (repeats).\n",
            "Order: group plans, then the singles with the kinds taking turns (the scenario's own\n",
            "first, then the race kinds), then pairs of the first 40 singles, up to --max-plans.",
        ),
        after_help = concat!(
        "Examples:\n  reconsim search machineapi-leader-election --stop-on-first --failures-dir failures\n  reconsim search kcp-upgrade-waits-for-deletion-1 --exhaustive 2 --max-plans 700 --json\n\n",
        "Exit codes: 0 no plan found a failure; 1 a plan (or a reference run) violated an invariant; 2 bad usage or bad input, or a failure file that could not be written."
    ))]
    Search {
        /// A scenario file, or the name of a shipped scenario (`reconsim list`).
        #[arg(value_parser = Utf8Arg)]
        scenario: String,
        /// Reference seeds `A..B` (B excluded): a reference run per seed, and its plans
        /// (each runs with that seed).
        #[arg(long, value_name = "A..B", default_value = "0..1")]
        seeds: String,
        /// At most this many plans per reference seed (group plans, then singles, then
        /// pairs); the report says how many it left out.
        #[arg(long, default_value_t = 500, value_parser = flags::max_plans_arg)]
        max_plans: usize,
        /// No pairs: plans with one fault (and the group plans) only.
        #[arg(long)]
        no_pairs: bool,
        /// No group plans (by default the first plans put every race kind's faults in
        /// one run, then each race kind's in one run).
        #[arg(long)]
        no_groups: bool,
        /// Threads (default: the number of cores); the report is the same for any.
        #[arg(long)]
        jobs: Option<usize>,
        /// Stop at the first failing plan.
        #[arg(long)]
        stop_on_first: bool,
        /// Save a failure file per failing plan in this directory.
        #[arg(value_parser = Utf8Path, long, value_name = "DIR")]
        failures_dir: Option<PathBuf>,
        /// Print the plans in run order after the reference run, and run none (not
        /// with --exhaustive, whose tree grows from the runs themselves).
        #[arg(long, conflicts_with = "exhaustive")]
        list_plans: bool,
        /// Each reference run keeps the faults its seed draws (it is `fuzz`'s run of that
        /// seed), and each plan adds its faults to those; without it, reference runs
        /// have no faults (as in Sieve, OSDI'22, the tool search is modelled on).
        #[arg(long)]
        with_faults: bool,
        /// Also fail a plan that breaks no invariant but ends differently from its
        /// reference run: other objects or field values (ids, generated names
        /// and times aside), other cloud instances, or more objects created and
        /// deleted on the way. Findings without writing an invariant; such a failure's
        /// invariant is `differential`.
        #[arg(long)]
        differential: bool,
        /// Also run plans beyond the fault envelope the scenario declares. By default a
        /// plan's faults are ones the scenario's `faults` could draw (a kind it lists,
        /// for a process it names, at most as long or as large), or delays within its
        /// declared latencies, or resyncs, which may come at any time; Sieve's fixed
        /// values (a 30 s watch delay, a 10 s restart) are cut to what it allows. With
        /// this flag they run as Sieve makes them, and each plan, failure, failure file
        /// and explanation beyond the envelope says what it goes beyond.
        #[arg(long)]
        beyond_envelope: bool,
        /// Coverage guidance, instead of pairs: a plan whose run shows something new
        /// (some process makes a kind of step, such as `patch Machine`, after one it
        /// never followed in earlier runs) gets its variations run next: each fault
        /// one step earlier or later, and the plan with each of the first 8 singles.
        #[arg(long, conflicts_with = "exhaustive")]
        coverage: bool,
        /// Try orderings instead of faults. A swap: two requests that two processes
        /// (one a controller) sent to one receiver so close together that either could
        /// have arrived first, run the other way round (the first held back until the
        /// second lands). Every swap of the reference run, then every swap of each of
        /// those runs, up to DEPTH swaps deep, level by level; a run whose steps come in
        /// an order seen before (a repeated interleaving) is not explored again.
        /// `--max-plans` caps the runs in all; the report says how many it left out.
        #[arg(long, value_name = "DEPTH", value_parser = clap::value_parser!(u64).range(1..=8))]
        exhaustive: Option<u64>,
        /// Change one field of the scenario for this command: `PATH=VALUE`, VALUE as
        /// JSON or a bare string (e.g. `--set net.latency_ms=[1,50]`); repeatable.
        #[arg(long = "set", value_name = "PATH=VALUE", value_parser = Utf8Arg)]
        sets: Vec<String>,
        /// Print `{"scenario","seeds","references":[...],"failures":[{"seed","plan","description","invariant","time_ms","file"}],"first_failure",...}`.
        #[arg(long)]
        json: bool,
    },
    /// Hold each scenario to its expectation over its budget of runs (what a CI job
    /// calls): a scenario that expects a `violation` must fail on some run, a `clean` one
    /// on none.
    #[command(
        long_about = concat!(
            "Hold each scenario to its expectation over its budget of runs (what a CI job calls): a scenario that expects a `violation` must fail on some run, a `clean` one on none. The budget is the scenario's `seeds` field (the SEEDS column of `reconsim list`).\n",
            "\n",
            "The budget is spent three ways at once, so that a clean verdict covers what each finds:\n",
            "  random seeds   each seed draws when the scenario's faults strike (`run --seed S`):\n",
            "                 the wide windows.\n",
            "  swarm seeds    each seed draws from only some of the scenario's faults (`run --seed S\n",
            "                 --swarm`): a bug one kind of fault hides when all strike at once.\n",
            "  search plans   a fault-free run of a reference seed, then that run again with faults\n",
            "                 placed at its steps (`search`, within the scenario's fault envelope,\n",
            "                 48 plans per reference seed): windows of a few milliseconds.\n",
            "It goes in rounds of 32 runs: half seeds, a quarter swarm, a quarter search, except that\n",
            "a quarter of a round more goes to whichever found the most new run signatures per run\n",
            "in the round before (a signature: which kind of controller made which kind of step\n",
            "after which). The verdict, the runs and the failure are the same for any --jobs; every\n",
            "failure line says how to see it again. `--campaign seeds` runs seeds 0..N only.\n",
            "\n",
            "A scenario's `operation` generators (what users do: spec changes drawn from a CRD's\n",
            "schema, rollbacks, deletes and re-creates, two clients' edits; docs/operations.md)\n",
            "take part in all three as its faults do, and a run with one is also checked for\n",
            "convergence after each quiet spell, not only at its end.",
        ),
        after_help = concat!(
        "Examples:\n  reconsim check scenarios/machineapi-no-leader-election.json scenarios/machineapi-leader-election-idempotent.json\n  reconsim check --json > verdicts.json   # every shipped scenario\n  reconsim check kcp-upgrade-machine-count --time-budget 2m --failures-dir failures\n\n",
        "Exit codes: 0 every expectation held; 1 some expectation broke (its line says FAIL); 2 bad usage or bad input, or a failure file that could not be written."
    ))]
    Check {
        /// Scenario files or names of shipped scenarios; none: every scenario `list`
        /// shows.
        #[arg(value_name = "SCENARIO", value_parser = Utf8Arg)]
        scenarios: Vec<String>,
        /// Threads (default: the number of cores); verdicts are the same for any.
        #[arg(long)]
        jobs: Option<usize>,
        /// Save the failure that breaks a clean scenario's expectation in this directory.
        #[arg(value_parser = Utf8Path, long, value_name = "DIR")]
        failures_dir: Option<PathBuf>,
        /// Change one field of the scenario for this command: `PATH=VALUE`, VALUE as
        /// JSON or a bare string (e.g. `--set net.latency_ms=[1,50]`); repeatable.
        #[arg(long = "set", value_name = "PATH=VALUE", value_parser = Utf8Arg)]
        sets: Vec<String>,
        /// How to spend each scenario's budget: `combined` (random seeds, swarm seeds
        /// and search plans) or `seeds` (seeds 0..N only).
        #[arg(long, value_enum, default_value = "combined")]
        campaign: check::CampaignKind,
        /// Per scenario: start no new run after this much wall time (e.g. 60s, 5m, 1h);
        /// the runs made are the first of its campaign, and its line says it was cut.
        #[arg(long, value_name = "DURATION")]
        time_budget: Option<String>,
        /// Judge a clean scenario's search plans and reference runs by two oracles
        /// too, findings without an invariant: a plan that ends unlike its fault-free
        /// reference run (Sieve's differential oracle: `differential`), and a reference
        /// run that ends unlike reference seed 0's (Kamera's divergence oracle, two
        /// fault-free schedules of one workload: `divergence`). Such a finding breaks
        /// the scenario, and its line says DIFFERS or DIVERGES, never "violates".
        #[arg(long)]
        differential: bool,
        /// Print `{"scenarios":[{"scenario","expect","holds","seeds","runs","first_failure_seed","invariant","file","campaign","arms","first_failure","out_of_time"}],"holds","checked","failed"}`.
        #[arg(long)]
        json: bool,
    },
    /// Combine the `fuzz --json` results of shards into the result of the whole
    /// campaign, refusing duplicate, overlapping or missing shards.
    #[command(after_help = concat!(
        "Examples:\n  reconsim merge shard-*.json > merged.json\n  reconsim merge shard-0.json shard-1.json --json\n\n",
        "Exit codes: 0 no shard found a violation; 1 some did; 2 bad input (a shard missing, given twice or overlapping, another scenario)."
    ))]
    Merge {
        /// `reconsim fuzz --json` results: the shards I/N of one range, or ranges that
        /// follow one another.
        #[arg(value_parser = Utf8Path, required = true, value_name = "RESULT.json")]
        results: Vec<PathBuf>,
        /// The merged result is JSON either way (the flag is accepted like every
        /// command's).
        #[arg(long)]
        json: bool,
    },
    /// Minimise a failure's fault plan while the same invariant still fails; the input
    /// must replay first, and the output is replayed before it is written.
    #[command(after_help = concat!(
        "Examples:\n  reconsim shrink failures/machineapi-lease-expiry-pause-seed-5.json -o out/small.json\n  reconsim shrink failures/machineapi-lease-expiry-pause-seed-5.json -o out/small.json --max-runs 200 --force --json\n\n",
        "Exit codes: 0 shrunk and saved; 1 the input does not reproduce (nothing written); 2 bad usage or bad input (the output exists, or is the input)."
    ))]
    Shrink {
        /// A failure file (run --save-failure, fuzz or search --failures-dir).
        #[arg(value_parser = Utf8Path)]
        failure: PathBuf,
        /// Where to write the smaller failure file (default: `out/<input's name>-small.json`,
        /// in the folder .gitignore covers).
        #[arg(value_parser = Utf8Path, short = 'o', long = "output", value_name = "SMALLER.json")]
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
        "Examples:\n  reconsim explain out/small.json\n  reconsim explain out/small.json --html out/small.html   # swimlanes, open in a browser\n  reconsim explain failures/kcp-upgrade-counts-deleting-3-seed-31.json --json\n\n",
        "Exit codes: 0 explained; 1 the failure does not reproduce; 2 bad usage or bad input."
    ))]
    Explain {
        /// A failure file (run --save-failure, fuzz or search --failures-dir, shrink).
        #[arg(value_parser = Utf8Path)]
        failure: PathBuf,
        /// Also write the story as one self-contained HTML page here: a lane per
        /// process, requests as arrows, faults as bands, the violation marked (a new
        /// file, unless --force).
        #[arg(value_parser = Utf8Path, long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Replace an existing HTML page.
        #[arg(long)]
        force: bool,
        /// Print `{"reproduced","headline","faults","objects","lines"}`.
        #[arg(long)]
        json: bool,
    },
    /// Build a Go main package (a kubebuilder project's cmd/) for GOOS=wasip1 with
    /// reconsim's overlay, and compile it for this machine: the program a scenario's
    /// `controllers.go` entry names. Needs Go 1.26.
    #[cfg(feature = "go")]
    #[command(after_help = concat!(
        "Examples:\n  reconsim build examples/configset-go/cmd -o out/configset-go.wasm --force\n  reconsim build examples/configset-go/cmd -o out/configset-go.wasm --force --json\n\n",
        "A scenario may name the folder itself (it is then built at load, in the cache folder); a\n",
        "built .wasm starts a run without Go installed. The module cache is $RECONSIM_CACHE_DIR,\n",
        "else $XDG_CACHE_HOME/reconsim, else ~/.cache/reconsim (docs/go.md).\n\n",
        "Exit codes: 0 built; 2 bad usage or bad input (no Go 1.26, a package that does not build, an output that exists)."
    ))]
    Build {
        /// The folder of the Go main package.
        #[arg(value_parser = Utf8Path, value_name = "PACKAGE")]
        package: PathBuf,
        /// Where to write the program (default: `out/<the folder's name>.wasm`, or
        /// the project's name for a `cmd/` folder).
        #[arg(value_parser = Utf8Path, short = 'o', long = "output", value_name = "PROGRAM.wasm")]
        output: Option<PathBuf>,
        /// Replace the output file if it exists.
        #[arg(long)]
        force: bool,
        /// Print `{"package","program","sha256","bytes","cache"}`.
        #[arg(long)]
        json: bool,
    },
    /// Re-run a failure file and check it fails the same way (the same invariant and
    /// the same trace hash).
    #[command(after_help = concat!(
        "Examples:\n  reconsim replay out/small.json --timeline\n  reconsim replay out/small.json --html out/replayed.html  # swimlanes, open in a browser\n  reconsim replay out/small.json --chrome-trace out/trace.json # open in ui.perfetto.dev\n\n",
        "Exit codes: 0 reproduced; 1 not reproduced; 2 bad usage or bad input (a plan naming a host or process the world lacks)."
    ))]
    Replay {
        /// A failure file (run --save-failure, fuzz or search --failures-dir, shrink).
        #[arg(value_parser = Utf8Path)]
        failure: PathBuf,
        /// Write Chrome Trace Event JSON (Perfetto, chrome://tracing) here (a new
        /// file, unless --force).
        #[arg(value_parser = Utf8Path, long, value_name = "FILE")]
        chrome_trace: Option<PathBuf>,
        /// Write the failure as one self-contained HTML page here (as `explain
        /// --html`): a lane per process, requests as arrows, faults as bands.
        #[arg(value_parser = Utf8Path, long, value_name = "FILE")]
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

/// Whether the logs on stderr are coloured: only on a terminal, and not when NO_COLOR is
/// set to anything but the empty string (no-color.org).
fn log_colours(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// A path argument: UTF-8 only, because reconsim prints commands that name its files
/// (replay lines); bytes that are not UTF-8 would print as U+FFFD and name another file.
#[derive(Clone)]
struct Utf8Path;

impl clap::builder::TypedValueParser for Utf8Path {
    type Value = PathBuf;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<PathBuf, clap::Error> {
        match value.to_str() {
            Some(s) => Ok(PathBuf::from(s)),
            None => Err(clap::Error::raw(
                clap::error::ErrorKind::InvalidUtf8,
                format!(
                    "{}: `{}` is not UTF-8; reconsim prints the commands that replay its files, which must name them byte for byte: choose a UTF-8 name\n",
                    arg.map_or_else(|| "a path".to_string(), |a| a.to_string()),
                    value.to_string_lossy()
                ),
            )
            .with_cmd(cmd)),
        }
    }
}

/// A scenario argument (a file or a shipped name) that must be UTF-8, refused as
/// [`Utf8Path`] refuses a path: naming the argument.
#[derive(Clone)]
struct Utf8Arg;

impl clap::builder::TypedValueParser for Utf8Arg {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        // Valid UTF-8 by then: the path's refusal is the one message for both.
        Utf8Path
            .parse_ref(cmd, arg, value)
            .map(|p| p.to_string_lossy().into_owned())
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
    // default, and on stderr, so `--json` output stays one document on stdout. Coloured
    // only for a person at a terminal: a log piped or written to a file (`2> log.txt`)
    // has no escape codes, nor one with NO_COLOR set (no-color.org).
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(log_colours(
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
            std::env::var_os("NO_COLOR").as_deref(),
        ))
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
            beyond_envelope,
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
                    (base, beyond_envelope),
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
                    beyond_envelope,
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
            campaign,
            differential,
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
                campaign,
                differential,
            },
            json,
        ),
        Command::Check {
            scenarios,
            jobs,
            failures_dir,
            campaign,
            time_budget,
            differential,
            json,
            sets: _,
        } => jobs_or_cores(jobs).and_then(|jobs| {
            if differential && campaign == check::CampaignKind::Seeds {
                return Err(UsageError(
                    "--differential: the oracles judge search plans and reference runs, which --campaign seeds has none of".into(),
                ));
            }
            let time_budget = time_budget.as_deref().map(parse_duration).transpose()?;
            check::check(
                app,
                &scenarios,
                check::CheckArgs {
                    jobs,
                    failures_dir: failures_dir.as_deref(),
                    campaign,
                    time_budget,
                    differential,
                    json,
                },
            )
        }),
        Command::Merge { results, json: _ } => merge::merge(&results),
        #[cfg(feature = "go")]
        Command::Build {
            package,
            output,
            force,
            json,
        } => {
            let output = output.unwrap_or_else(|| {
                // A kubebuilder project's `cmd/` is named after its project.
                let dir = std::fs::canonicalize(&package).unwrap_or_else(|_| package.clone());
                let named = match dir.file_name() {
                    Some(n) if n == "cmd" => dir.parent().and_then(|p| p.file_name()),
                    n => n,
                };
                let name = named.map_or("program".into(), |n| n.to_string_lossy().into_owned());
                std::path::Path::new("out").join(format!("{name}.wasm"))
            });
            build::build(&package, &output, force, json)
        }
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

    #[test]
    fn logs_are_coloured_only_on_a_terminal_without_no_color() {
        use super::log_colours;
        use std::ffi::OsStr;
        assert!(log_colours(true, None));
        assert!(log_colours(true, Some(OsStr::new(""))));
        assert!(!log_colours(true, Some(OsStr::new("1"))));
        assert!(!log_colours(false, None));
    }

    /// `help search` defines the words its report prints (an installed binary's user has
    /// no docs/search.md), and uses none of the docs' jargon undefined.
    #[test]
    fn search_help_defines_its_words() {
        let mut cli = Cli::command();
        let search = cli.find_subcommand_mut("search").expect("search");
        let help = search.render_long_help().to_string();
        for word in [
            "reference run ",
            "decision point ",
            "plan ",
            "race kinds ",
            "group plan ",
            "pruned ",
            "A swap:",
        ] {
            assert!(help.contains(word), "{word:?} undefined in:\n{help}");
        }
        for jargon in ["race-directed", "abstract signature", "mutation", "oracle"] {
            assert!(!help.contains(jargon), "{jargon:?} in:\n{help}");
        }
    }
}
