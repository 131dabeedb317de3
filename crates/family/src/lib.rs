//! The family interface: how a family (the seed incidents' machine-api, Cluster API and
//! MCO, or a user's) plugs its kinds, processes, controllers, workload actions,
//! invariants and convergence into scenario files, the same way for all of them.
//!
//! A [`Family`] is registered once per binary in a [`Families`] registry; it names its
//! section under `controllers` in scenario files, parses that section into its own typed
//! [`FamilySection`], and names its workload actions and invariants. The scenario crate
//! depends on this crate and on no family; each family's crate implements it.
//!
//! Table of contents:
//! - [`registry`]: the [`Family`] trait and the [`Families`] registry.
//! - [`deployment`]: controllers as a Deployment whose first pods are bound at t = 0.
//! - [`host`]: how each run is hosted ([`RunHost`]): inline, or on a thread of its own
//!   for real code.
//! - [`section`]: [`FamilySection`], what a parsed section adds to one world, and the
//!   [`Context`] and [`Services`] it sees.
//! - [`params`]: typed parameters from JSON ([`params::parse`]) with errors that keep the
//!   JSON path ([`ParamError`]), and the parameter types families share ([`Range`],
//!   [`LeaseSpec`]).

pub mod deployment;
pub mod host;
pub mod params;
pub mod registry;
pub mod section;

pub use host::{RunHost, hosted};
pub use params::{LeaseSpec, ParamError, Range};
pub use registry::{Families, Family};
pub use section::{
    Context, FamilySection, ObjectName, ServiceFn, ServiceProcess, Services, WorkloadAction,
};
