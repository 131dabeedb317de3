//! reconsim: a deterministic simulation testbed for Kubernetes-style reconciler races.
//!
//! The facade of the workspace: each crate, re-exported under the concept it holds.
//! - [`sim`]: the kernel (virtual time, seeded streams, processes, network, faults, trace).
//! - [`world`]: the generic cluster: open object model, API server, informers, leases,
//!   nodes, kubelets, the controller host and the component interface.
//! - [`families`]: the builtin families (machine-api, Cluster API, MCO and the cloud
//!   they share): kinds, components, controllers with their buggy and fixed variants,
//!   invariants.
//! - [`check`]: invariants and convergence checks.
//! - [`scenario`]: scenario files, the runner, fuzzing, replay and shrinking; users'
//!   own controllers and invariants register in [`scenario::extension::Extensions`].
//! - [`cli`]: the command line, for the `reconsim` binary ([`cli::main`]) and for a
//!   user's binary with its own controllers ([`cli::main_with`]).

pub mod cli;

pub use reconsim_check as check;
pub use reconsim_scenario as scenario;
pub use reconsim_sim as sim;
pub use reconsim_world as world;

/// The builtin families: the seed incidents' kinds, components, controllers and
/// invariants, and the cloud they share.
pub mod families {
    pub use reconsim_capi as capi;
    pub use reconsim_cloud as cloud;
    pub use reconsim_machineapi as machineapi;
    pub use reconsim_mco as mco;
}
