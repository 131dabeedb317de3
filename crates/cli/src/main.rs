//! The `reconsim` binary: the command line of [`reconsim::cli`], builtin controllers only.

/// A run allocates on every write and every family message; mimalloc's thread-local
/// free lists make that cheaper than glibc's malloc (docs/PERFORMANCE.md). Allocation
/// addresses never reach an outcome, so histories do not depend on the allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    reconsim::cli::main()
}
