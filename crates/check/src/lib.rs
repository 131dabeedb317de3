//! Checkers: one per invariant, evaluated against the world after every event that can
//! change it (safety), and convergence, evaluated once faults have healed (liveness).
//!
//! A checker reads the world only through a [`View`] (the API server's store and the
//! cloud's ground truth, never a controller's cache) and keeps whatever memory it needs
//! between events in its own state. The first violation stops the run.
//!
//! Table of contents:
//! - [`invariant`]: invariants by name and the checker each one runs.
//! - [`view`]: what checkers may read.
//! - [`violation`]: a violation: which invariant, when, what, which objects.
//! - [`machineapi`]: `no_leaked_instances`, `no_duplicate_machines` and the machine-api
//!   convergence check (seed incident 1).
//! - [`kcp`]: the KubeadmControlPlane and etcd invariants and convergence check (seed
//!   incident 2).
//! - [`mco`]: `no_missing_referenced_config` and the machine-config convergence check
//!   (seed incident 3).

pub mod invariant;
pub mod kcp;
pub mod machineapi;
pub mod mco;
pub mod view;
pub mod violation;

pub use invariant::{Check, CheckClone, Checker, Invariant};
pub use view::View;
pub use violation::Violation;
