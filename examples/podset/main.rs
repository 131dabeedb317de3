//! A user's own reconsim binary: the whole `reconsim` command line (list, run, fuzz,
//! merge, shrink, explain, replay) plus the PodSet controller and its invariant.
//!
//! `cargo run --release --example podset -- fuzz examples/podset/scenarios/podset-buggy.json`

mod controller;
mod harness;

fn main() -> std::process::ExitCode {
    reconsim::cli::main_with(reconsim::families::builtin().with(harness::extensions()))
}
