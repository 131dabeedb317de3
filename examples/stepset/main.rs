//! A user's own reconsim binary for a kube-rs controller whose bug only a user's
//! operation finds: the whole `reconsim` command line plus the StepSet controller
//! (`controller.rs`, unmodified kube-rs code) and its invariant and desired state
//! (`harness.rs`). Its scenarios generate operations from the StepSet's schema.
//!
//! `cargo run --release --example stepset -- fuzz examples/stepset/scenarios/stepset-buggy.json`

/// As the `reconsim` binary does (docs/PERFORMANCE.md).
#[global_allocator]
static ALLOCATOR: reconsim::alloc::Allocator = reconsim::alloc::Allocator;

mod controller;
mod harness;

fn main() -> std::process::ExitCode {
    reconsim::cli::main_with(reconsim::families::builtin().with(harness::extensions()))
}
