//! The reconcilers under test, each a [`reconsim_world::manager::Reconciler`] step machine
//! with named variants that reproduce the real controller before and after its fix (the
//! variant is a parameter of one implementation, never a copy).
//!
//! Table of contents (filled by the seed-incident work):
//! - `machineset`, `machine`: OpenShift machine-api (incident 1: duplicate controllers);
//!   variants `no-leader-election` (4.5) and `leader-election` (4.6).
//! - `kcp`: Cluster API KubeadmControlPlane (incident 2: scale-up while deleting).
//! - `mco`: machine-config-operator render controller and server (incident 3).
