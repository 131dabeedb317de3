//! Scenarios: the JSON file format and its loader, the world builder, fault plans, the
//! runner that checks a world after every event, fuzz campaigns and failure files.
//!
//! Table of contents:
//! - [`format`]: the scenario file and its validation (file, field path, expectation).
//! - [`build`]: a world from a scenario: hosts, processes, objects, controllers as pods.
//! - [`builtin`]: the builtin families' invariants by name.
//! - [`family`]: the one interface every family's section implements.
//! - [`machineapi`], [`kcp`], [`mco`]: the machine-api, KubeadmControlPlane and
//!   machine-config-operator families' sections (incidents 1, 2 and 3).
//! - [`extension`]: users' own controllers and invariants, registered by name.
//! - [`faults`]: fault plans drawn from a scenario's generators and a seed.
//! - [`runner`]: one (scenario, fault plan, seed) run and its outcome.
//! - [`fuzz`]: seed ranges, shards and jobs; results independent of `--jobs`.
//! - [`failure`]: self-contained failure files and their replay.
//! - [`shrink`]: the smallest fault plan that still fails the same way.
//! - [`strategies`]: proptest strategies: fault plans and parameter perturbations.
//! - [`explain`]: the causal timeline of a failure, stale caches marked.
//! - [`chrome`]: Chrome Trace Event JSON of a run, for Perfetto and chrome://tracing.
//! - [`library`]: the shipped scenarios/ directory, by name.
//! - [`timeline`]: a readable timeline of a run, from its full trace.

pub mod build;
pub mod builtin;
pub mod chrome;
pub mod explain;
pub mod extension;
pub mod failure;
pub mod family;
pub mod faults;
pub mod format;
pub mod fuzz;
pub mod kcp;
pub mod library;
pub mod machineapi;
pub mod mco;
pub mod runner;
pub mod shrink;
pub mod strategies;
pub mod timeline;

pub use extension::Extensions;
pub use format::{Expect, LoadError, Plan, Scenario};
pub use runner::{Outcome, run, run_world};
