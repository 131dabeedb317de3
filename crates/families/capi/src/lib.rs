//! The Cluster API KubeadmControlPlane family (seed incident 2, cluster-api PR #2958):
//! its kinds, the workload cluster's etcd model, its controllers and its invariants.
//!
//! Table of contents:
//! - [`kinds`]: the KubeadmControlPlane and cluster.x-k8s.io Machine kinds, the Machine
//!   controller's merge patch, and the conventions that tie them to the workload
//!   cluster (labels, control-plane Nodes, owned Machines).
//! - [`etcd`]: the workload cluster's etcd members and kubeadm ClusterStatus, a
//!   component of this family, and its typed async client ([`etcd::EtcdClient`]).
//! - [`kcp`], [`machine`]: the KubeadmControlPlane controller and the Machine controller
//!   for its machines, async in kube-runtime's shape ([`kcp::controller`],
//!   [`machine::controller`]); [`kcp::KcpOptions`] and [`machine::CapiMachineOptions`]
//!   hold the v0.3.3 / v0.3.4 switches.
//! - [`invariants`]: the KubeadmControlPlane and etcd invariants and the convergence
//!   check.
//! - [`section`]: the family in scenario files ([`Kcp`], `controllers.kcp`): the
//!   variants, the KubeadmControlPlane at t = 0, the processes, the `scale_kcp` and
//!   `upgrade_kcp` actions.
//!
//! The cloud its Machine controller and its etcd model call is the world's
//! ([`reconsim_cloud`]).
//!
//! A binary registers it by value; scenario files name its section and invariants:
//!
//! ```
//! use reconsim_capi::invariants::NewMachines;
//! use reconsim_family::Family;
//!
//! let family = reconsim_capi::Kcp;
//! assert_eq!(family.name(), "kcp");
//! let invariants: Vec<String> = family.invariants().into_iter().map(|c| c.name).collect();
//! assert!(invariants.iter().any(|n| n == NewMachines::NO_CREATE_WHILE_DELETING));
//! ```

pub mod etcd;
pub mod invariants;
pub mod kcp;
pub mod kinds;
pub mod machine;
pub mod section;

pub use kcp::KcpOptions;
pub use kinds::KubeadmControlPlane;
pub use machine::CapiMachineOptions;
pub use section::{Kcp, KcpSpec, KcpVariant};
