//! The `reconsim` binary: the command line of [`reconsim::cli`], builtin controllers only.

fn main() -> std::process::ExitCode {
    reconsim::cli::main()
}
