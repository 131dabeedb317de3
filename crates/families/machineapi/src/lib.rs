//! The OpenShift machine-api family (seed incident 1, Bugzilla 1864352): its kinds, its
//! controllers and its invariants.
//!
//! Table of contents:
//! - [`kinds`]: machine.openshift.io/v1beta1 Machine and MachineSet, and the actuator's
//!   merge patch of a Machine's provider fields.
//! - [`machineset`], [`machine`]: the MachineSet controller and the Machine controller
//!   with the AWS actuator. Leader election is the host's (the manager's) concern, so the
//!   4.5 and 4.6 variants run the same reconcilers; [`machine::MachineOptions`] adds the
//!   idempotent-create variant.
//! - [`approver`]: cluster-machine-approver: joining nodes' client certificates are
//!   approved only for nodes a Machine waits for.
//! - [`invariants`]: `no_leaked_instances`, `no_duplicate_machines` and the machine-api
//!   convergence check.
//! - [`section`]: the family in scenario files ([`MachineApi`], `controllers.machine_api`):
//!   its MachineSets, its controllers as pods, the `scale_machine_set` action.
//!
//! The cloud its Machine controller calls is the world's ([`reconsim_cloud`]).
//!
//! A binary registers it by value; scenario files name its section and invariants:
//!
//! ```
//! use reconsim_family::Family;
//!
//! let family = reconsim_machineapi::MachineApi;
//! assert_eq!(family.name(), "machine_api");
//! let invariants: Vec<String> = family.invariants().into_iter().map(|c| c.name).collect();
//! assert!(invariants.iter().any(|n| n == "no_duplicate_machines"));
//! ```

pub mod approver;
pub mod invariants;
pub mod kinds;
pub mod machine;
pub mod machineset;
pub mod section;

pub use kinds::{Machine, MachineFields, MachineSet};
pub use machine::MachineOptions;
pub use section::{MachineApi, MachineApiSpec};
