//! The `reconsim` binary: the command line of [`reconsim::cli`], builtin controllers only.

/// mimalloc ([`reconsim::alloc`]): a run allocates on every write and every family
/// message. Allocation addresses never reach an outcome.
#[global_allocator]
static ALLOCATOR: reconsim::alloc::Allocator = reconsim::alloc::Allocator;

fn main() -> std::process::ExitCode {
    reconsim::cli::main()
}
