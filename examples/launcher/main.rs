//! A user's own reconsim binary for a kube-rs controller that launches cloud instances:
//! the whole `reconsim` command line plus the launcher (`launcher.rs`, unmodified
//! kube-rs code) and its invariant (`harness.rs`).
//!
//! `cargo run --release --example launcher -- fuzz examples/launcher/scenarios/launcher-look-up-first.json`

/// As the `reconsim` binary does (docs/PERFORMANCE.md).
#[global_allocator]
static ALLOCATOR: reconsim::alloc::Allocator = reconsim::alloc::Allocator;

mod harness;
mod launcher;

fn main() -> std::process::ExitCode {
    reconsim::cli::main_with(reconsim::families::builtin().with(harness::extensions()))
}
