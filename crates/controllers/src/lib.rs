//! The reconcilers under test, each a [`reconsim_world::manager::Reconciler`] step machine
//! with named variants that reproduce the real controller before and after its fix (the
//! variant is a parameter of one implementation, never a copy).
//!
//! Table of contents:
//! - [`machineset`], [`machine`]: OpenShift machine-api (incident 1: duplicate
//!   controllers). Leader election is the host's (the manager's) concern, so the 4.5 and
//!   4.6 variants run the same reconcilers; [`machine::MachineOptions`] adds the
//!   idempotent-create variant.
//! - [`kcp`], [`capi_machine`]: Cluster API KubeadmControlPlane and the Machine
//!   controller for its machines (incident 2); [`kcp::KcpOptions`] and
//!   [`capi_machine::CapiMachineOptions`] hold the v0.3.3 / v0.3.4 switches.
//! - [`mco`]: machine-config-operator render controller (with its GC policies) and node
//!   controller (incident 3); the config server and daemon are world components.

pub mod capi_machine;
pub mod kcp;
pub mod machine;
pub mod machineset;
pub mod mco;

pub use capi_machine::{CapiMachineController, CapiMachineOptions};
pub use kcp::{KcpController, KcpOptions};
pub use machine::{MachineController, MachineOptions};
pub use machineset::MachineSetController;
