//! reconsim: a deterministic simulation testbed for Kubernetes-style reconciler races.
//!
//! The facade of the workspace: each crate, re-exported under the concept it holds.
//! - [`sim`]: the kernel (virtual time, seeded streams, processes, network, faults, trace).
//! - [`world`]: the simulated API server, informers, leases, nodes, kubelets and cloud.
//! - [`controllers`]: the reconcilers under test, with their buggy and fixed variants.
//! - [`check`]: invariants and convergence checks.
//! - [`scenario`]: scenario files, the runner, fuzzing, replay and shrinking; users'
//!   own controllers and invariants register in [`scenario::extension::Extensions`].
//! - [`cli`]: the command line, for the `reconsim` binary ([`cli::main`]) and for a
//!   user's binary with its own controllers ([`cli::main_with`]).

pub mod cli;

pub use reconsim_check as check;
pub use reconsim_controllers as controllers;
pub use reconsim_scenario as scenario;
pub use reconsim_sim as sim;
pub use reconsim_world as world;
