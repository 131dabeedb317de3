//! The reconcilers under test, each a [`reconsim_world::manager::Reconciler`] step machine
//! with named variants that reproduce the real controller before and after its fix (the
//! variant is a parameter of one implementation, never a copy).
//!
//! Table of contents:
//! - [`machineset`], [`machine`]: OpenShift machine-api (incident 1: duplicate
//!   controllers). Leader election is the host's (the manager's) concern, so the 4.5 and
//!   4.6 variants run the same reconcilers; [`machine::MachineOptions`] adds the
//!   idempotent-create variant.
//! - `kcp`: Cluster API KubeadmControlPlane (incident 2), to come.
//! - `mco`: machine-config-operator render controller and server (incident 3), to come.

pub mod machine;
pub mod machineset;

pub use machine::{MachineController, MachineOptions};
pub use machineset::MachineSetController;
