//! Scenarios: the JSON file format and its loader, the runner that builds a world from a
//! scenario and checks it after every event, fuzz campaigns, replay, shrink and explain.
//!
//! Table of contents (filled by the seed-incident work):
//! - `format`: the scenario file and its validation (file, field path, expectation).
//! - `runner`: one (scenario, fault plan, seed) run and its outcome.
//! - `fuzz`: seed ranges, shards, jobs; results independent of `--jobs`.
//! - `failure`: self-contained failure files; `replay`, `shrink`, `explain`.
