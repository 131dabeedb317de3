//! Checkers: one per invariant, evaluated against the world after every event that can
//! change it (safety), and convergence, evaluated once faults have healed (liveness).
//!
//! A checker reads the world only through a [`View`] (the API server's store and the
//! components' ground truth, never a controller's cache) and keeps whatever memory it needs
//! between events in its own state. The first violation stops the run.
//!
//! Table of contents:
//! - [`invariant`]: the `Check` trait and the checker that runs one by name.
//! - [`view`]: what checkers may read.
//! - [`reads`]: what one checker reads, so a run checks it only when that changed.
//! - [`violation`]: a violation: which invariant, when, what, which objects.
//! - [`replicas`]: a checker ready to use, "at most `replicas` live children per owner".
//!
//! The families bring their own checkers (crates/families/*/src/invariants.rs).

pub mod invariant;
pub mod reads;
pub mod replicas;
pub mod view;
pub mod violation;

pub use invariant::{Check, CheckClone, Checker, Gating, NamedCheck};
pub use reads::Reads;
pub use view::View;
pub use violation::Violation;
