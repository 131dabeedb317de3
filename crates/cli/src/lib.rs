//! reconsim: a deterministic simulation testbed for Kubernetes-style reconciler races.
//!
//! The facade of the workspace: each crate, re-exported under the concept it holds.
//! - [`sim`]: the kernel (virtual time, seeded streams, processes, network, faults, trace).
//! - [`world`]: the generic cluster: open object model, API server, informers, leases,
//!   nodes, kubelets, the controller host and the component interface.
//! - [`cloud`]: the EC2-like cloud every world runs (process 1), which families share.
//! - [`families`]: the builtin families (machine-api, Cluster API, MCO): kinds,
//!   components, controllers with their buggy and fixed variants, invariants, and their
//!   registry ([`families::builtin`]).
//! - [`check`]: invariants and convergence checks.
//! - [`family`]: the family interface every family implements, builtin or a user's.
//! - [`scenario`]: scenario files, the runner, fuzzing, replay and shrinking; users'
//!   controllers ([`scenario::extension::Custom`]) and invariants register in
//!   [`scenario::extension::Extensions`], itself a family.
//! - [`testing`]: a scenario of your own held to its expectation in a `#[test]`.
//! - [`shipped`]: the shipped scenarios, built into the binary.
//! - [`cli`]: the command line, for the `reconsim` binary ([`cli::main`]) and for a
//!   user's binary with its own controllers ([`cli::main_with`]).
//! - [`prelude`]: what a user's harness and tests meet first, in one import.
//! - [`alloc`]: the global allocator the binaries install (mimalloc).
//!
//! A seed of a shipped scenario, run as a `#[test]` would run it: the same seed gives
//! the same history, so a failure found once is a failure every time.
//!
//! ```
//! let families = reconsim::families::builtin();
//! let (_, scenario) = reconsim::shipped::library()
//!     .load("machineapi-no-leader-election", &families)
//!     .expect("a shipped scenario");
//! let (outcome, _plan) = reconsim::scenario::run(&scenario, 1);
//! // Incident 1: two machine-api controllers without leader election duplicate a Machine.
//! let violation = outcome.violation.expect("seed 1 finds the bug");
//! assert_eq!(violation.invariant, "no_duplicate_machines");
//! assert_eq!(reconsim::scenario::run(&scenario, 1).0.trace_hash, outcome.trace_hash);
//! ```

pub mod alloc;
pub mod cli;
pub mod testing;

/// What a user's harness and tests meet first: `use reconsim::prelude::*;`. Registering
/// a controller or an invariant ([`Extensions`](prelude::Extensions); a controller is a
/// [`Custom`](prelude::Custom), its params in the user's own type), checking the world
/// ([`Check`](prelude::Check) over a [`View`](prelude::View)), and holding a scenario to
/// its seeds in a `#[test]`.
///
/// ```
/// use reconsim::prelude::*;
///
/// /// An invariant of the user's own: no more than `max` Nodes.
/// #[derive(Clone, Debug)]
/// struct AtMostNodes(usize);
///
/// impl Check for AtMostNodes {
///     fn check(&mut self, view: &View<'_>) -> Option<Violation> {
///         let nodes = view.api.objects().filter(|o| o.kind().as_str() == "Node").count();
///         (nodes > self.0).then(|| Violation {
///             invariant: "at_most_nodes".into(),
///             time: view.now,
///             message: format!("{nodes} Nodes"),
///             objects: Vec::new(),
///         })
///     }
/// }
///
/// let mine = Extensions::new().invariant("at_most_nodes", || Box::new(AtMostNodes(100)));
/// let families: Families = builtin().with(mine);
/// let (_, scenario) = reconsim::shipped::library()
///     .load("machineapi-no-leader-election", &families)
///     .expect("a shipped scenario");
/// let (outcome, _plan) = run(&scenario, 1);
/// assert_eq!(
///     outcome.violation.map(|v| v.invariant),
///     Some("no_duplicate_machines".to_string())
/// );
/// ```
pub mod prelude {
    pub use crate::families::builtin;
    pub use reconsim_check::{Check, Reads, View, Violation};
    pub use reconsim_family::{ParamError, Services};
    pub use reconsim_scenario::extension::Custom;
    pub use reconsim_scenario::{Expect, Extensions, Families, Outcome, Scenario, run};
    pub use reconsim_sim::{ProcId, SimTime};
    pub use reconsim_world::object::Object;
}

/// The shipped scenarios, built into the binary (crates/cli/build.rs), so a copied
/// `reconsim` lists and runs them anywhere.
pub mod shipped {
    use reconsim_scenario::library::Library;

    /// Every `scenarios/*.json` of the workspace as `(name, text)`, sorted by name.
    pub const SCENARIOS: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/shipped.rs"));

    /// The library a binary finds scenario names in: these, unless
    /// `$RECONSIM_SCENARIOS` names a directory.
    pub const fn library() -> Library {
        Library::new(SCENARIOS)
    }
}

pub use reconsim_check as check;
pub use reconsim_cloud as cloud;
pub use reconsim_family as family;
pub use reconsim_scenario as scenario;
pub use reconsim_sim as sim;
pub use reconsim_world as world;

/// The builtin families: the seed incidents' kinds, components, controllers and
/// invariants.
pub mod families {
    pub use reconsim_capi as capi;
    /// The cloud every world runs, also at [`crate::cloud`] (it is core, not a family).
    pub use reconsim_cloud as cloud;
    pub use reconsim_machineapi as machineapi;
    pub use reconsim_mco as mco;

    use reconsim_family::Families;

    /// The builtin families, in the order their processes spawn (machine-api, MCO,
    /// KubeadmControlPlane, then Go programs named by the scenario file,
    /// `controllers.go`, with the `go` feature, a default one): the `reconsim` binary's
    /// registry, and the start of a user's (`builtin().with(mine)`).
    pub fn builtin() -> Families {
        let families = Families::new()
            .with(machineapi::MachineApi)
            .with(mco::Mco)
            .with(capi::Kcp);
        // Built without the `go` feature, a `controllers.go` section is refused as any
        // unknown family's is, with the families this binary has.
        #[cfg(feature = "go")]
        let families = families.with(reconsim_go::GoFamily);
        families
    }
}
