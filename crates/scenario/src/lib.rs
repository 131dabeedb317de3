//! Scenarios: the JSON file format and its loader, the world builder, fault plans, the
//! runner that checks a world after every event, fuzz campaigns, search, oracles and
//! failure files.
//!
//! Table of contents:
//! - [`format`]: the scenario file and its validation (file, field path, expectation),
//!   with the families a registry ([`Families`]) knows.
//! - [`controllers`]: the families' parsed sections of one scenario.
//! - [`build`]: a world from a scenario: hosts, processes, objects, controllers as pods.
//! - [`extension`]: users' controllers and invariants as closures, a family built by
//!   registration (`controllers.custom`).
//! - [`faults`]: fault plans drawn from a scenario's generators and a seed.
//! - [`operations`]: user operations (spec changes, rollbacks, deletes, re-creates,
//!   labels, two clients at once) drawn from a custom resource's schema, as faults.
//! - [`plan`]: a failure file's fault plan checked against its scenario.
//! - [`runner`]: one (scenario, fault plan, seed) run and its outcome.
//! - [`jobs`]: runs spread over threads, results independent of how many.
//! - [`fuzz`]: seed ranges, shards and jobs; results independent of `--jobs`.
//! - [`combined`]: one budget of runs across random seeds, swarm seeds and search
//!   plans, with one verdict (what `check` runs).
//! - [`failure`]: self-contained failure files and their replay.
//! - [`output`]: the files reconsim writes: regular files atomically, character devices
//!   in place, nothing else.
//! - [`search`]: a reference run's decision points, each perturbed by an anchored fault.
//! - [`envelope`]: the faults a scenario declares the world may do, which search keeps
//!   to unless asked to go beyond.
//! - [`shrink`]: the smallest fault plan that still fails the same way.
//! - [`strategies`]: proptest strategies: fault plans and parameter perturbations.
//! - [`explain`]: the causal timeline of a failure, stale caches marked.
//! - [`chrome`]: Chrome Trace Event JSON of a run, for Perfetto and chrome://tracing.
//! - [`page`]: a failure as one self-contained HTML page of swimlanes.
//! - [`json`]: strict JSON input: bounded files, one object, no struct as an array.
//! - [`limits`]: the named maximum of every quantity a user gives, and the safe-name rule.
//! - [`names`]: object names a scenario declares, checked at load as the API server
//!   checks them on create.
//! - [`library`]: the shipped scenarios/ directory, by name.
//! - [`oracle`]: differential oracles: a run's masked end state against a reference
//!   run's (faults healed) or another seed's (divergence), with no invariant written.
//! - [`variants`]: a scenario that `extends` another, and `--set` of one field.
//! - [`timeline`]: a readable timeline of a run, from its full trace.

pub mod build;
pub mod chrome;
pub mod combined;
pub mod controllers;
pub mod envelope;
pub mod explain;
pub mod extension;
pub mod failure;
pub mod faults;
pub mod format;
pub mod fuzz;
pub mod jobs;
pub mod json;
pub mod library;
pub mod limits;
pub mod names;
pub mod operations;
pub mod oracle;
pub mod output;
pub mod page;
pub mod plan;
pub mod runner;
pub mod search;
pub mod shrink;
pub mod strategies;
pub mod timeline;
pub mod variants;

pub use extension::{Custom, Extensions};
pub use format::{Expect, LoadError, Plan, Scenario};
pub use reconsim_family::{Families, Family, FamilySection};
pub use runner::{Outcome, run, run_world};
