//! Every integration test of reconsim-kube, one module per file, in one binary
//! (`autotests = false`; issue 33): the files build and link once, and their tests
//! share the cores in one pool. One file's tests: `cargo test --release -p CRATE
//! --test all FILE::`.

// Each file declares its own `mod common;` (and an example's modules), as it did as a
// binary of its own: the same helpers, loaded once per file.
#![allow(clippy::duplicate_mod)]

#[path = "apply.rs"]
mod apply;
#[path = "cloud.rs"]
mod cloud;
#[path = "controller.rs"]
mod controller;
#[path = "crd.rs"]
mod crd;
#[path = "determinism.rs"]
mod determinism;
#[path = "failpoints.rs"]
mod failpoints;
#[path = "fidelity.rs"]
mod fidelity;
#[path = "lists.rs"]
mod lists;
#[path = "namespaces.rs"]
mod namespaces;
#[path = "network.rs"]
mod network;
#[path = "recorder.rs"]
mod recorder;
#[path = "rest.rs"]
mod rest;
#[path = "restart.rs"]
mod restart;
#[path = "runtime.rs"]
mod runtime;
#[path = "schema.rs"]
mod schema;
#[path = "spike.rs"]
mod spike;
#[path = "world_kinds.rs"]
mod world_kinds;
