//! Every integration test of reconsim-sim, one module per file, in one binary
//! (`autotests = false`; issue 33): the files build and link once, and their tests
//! share the cores in one pool. One file's tests: `cargo test --release -p CRATE
//! --test all FILE::`.

// Each file declares its own `mod common;` (and an example's modules), as it did as a
// binary of its own: the same helpers, loaded once per file.
#![allow(clippy::duplicate_mod)]

#[path = "anchors.rs"]
mod anchors;
#[path = "kernel_determinism.rs"]
mod kernel_determinism;
#[path = "kernel_faults.rs"]
mod kernel_faults;
#[path = "kernel_lifecycle.rs"]
mod kernel_lifecycle;
#[path = "kernel_ordering.rs"]
mod kernel_ordering;
#[path = "kernel_partitions.rs"]
mod kernel_partitions;
#[path = "kernel_pause.rs"]
mod kernel_pause;
#[path = "kernel_timers.rs"]
mod kernel_timers;
