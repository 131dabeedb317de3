//! A user's own reconsim binary for a real kube-rs controller: the whole `reconsim`
//! command line (list, run, fuzz, merge, shrink, explain, replay) plus the ConfigSet
//! controller (`controller.rs`, unmodified kube-rs code) and its invariant
//! (`harness.rs`). docs/guide/real-kube-rs-code.md walks through it.
//!
//! `cargo run --release --example configset -- fuzz examples/configset/scenarios/configset-buggy.json`

/// As the `reconsim` binary does: a run allocates on every request and every JSON body,
/// and mimalloc's thread-local free lists make that cheaper than glibc's malloc (about
/// 1.2x for this example, docs/PERFORMANCE.md). Allocation addresses never reach an
/// outcome.
#[global_allocator]
static ALLOCATOR: reconsim::alloc::Allocator = reconsim::alloc::Allocator;

mod controller;
mod harness;

fn main() -> std::process::ExitCode {
    reconsim::cli::main_with(reconsim::families::builtin().with(harness::extensions()))
}
