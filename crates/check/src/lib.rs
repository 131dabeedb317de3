//! Checkers: one per invariant, evaluated against the world after every event (safety),
//! and convergence checks evaluated once faults heal (liveness).
//!
//! Table of contents (filled by the seed-incident work):
//! - `no_leaked_instances`, `no_duplicate_machines`: incident 1.
//! - KCP invariants (no create while deleting, surge, etcd quorum): incident 2.
//! - `no_missing_referenced_config`: incident 3.
//! - `convergence`: the desired state is reached after the last fault heals.
