//! A user's own reconsim binary for a leader-elected kube-rs program: the whole
//! `reconsim` command line plus the allocator (`allocator.rs`, unmodified kube-rs code
//! with kube-lease-manager) and its invariant (`harness.rs`).
//!
//! `cargo run --release --example allocator -- fuzz examples/allocator/scenarios/allocator-blind.json`

/// As the `reconsim` binary does (docs/PERFORMANCE.md).
#[global_allocator]
static ALLOCATOR: reconsim::alloc::Allocator = reconsim::alloc::Allocator;

mod allocator;
mod harness;

fn main() -> std::process::ExitCode {
    reconsim::cli::main_with(reconsim::families::builtin().with(harness::extensions()))
}
