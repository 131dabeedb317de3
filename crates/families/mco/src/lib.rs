//! The machine-config-operator family (seed incident 3, machine-config-operator issue
//! #301): its kinds and components (the Machine Config Server, booting machines and
//! their daemon), its controllers and its invariants.
//!
//! Table of contents:
//! - [`model`]: MachineConfig and MachineConfigPool, the config server and the booting
//!   machine, as components of this family.
//! - [`controllers`]: the render controller (with its GC policies) and the node
//!   controller.
//! - [`invariants`]: `no_missing_referenced_config` and the machine-config convergence
//!   check.
//! - [`section`]: the family in scenario files ([`Mco`], `controllers.mco`): pools,
//!   sources, machines, the controller's GC policy, the `create_machine_config` action.
//!
//! A binary registers it by value; scenario files name its section and invariants:
//!
//! ```
//! use reconsim_family::Family;
//!
//! let family = reconsim_mco::Mco;
//! assert_eq!(family.name(), "mco");
//! let invariants: Vec<String> = family.invariants().into_iter().map(|c| c.name).collect();
//! assert!(invariants.iter().any(|n| n == "no_missing_referenced_config"));
//! ```

pub mod controllers;
pub mod invariants;
pub mod model;
pub mod section;

pub use model::{MachineConfig, MachineConfigPool};
pub use section::{Mco, McoSpec};
