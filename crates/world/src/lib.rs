//! The simulated environment controllers run in: the API server, informers, leases and
//! leader election, nodes, kubelets and pods, and the cloud provider.
//!
//! Every part is a [`Component`], run as a kernel process ([`Proc`]), the core's own
//! and a family's alike; they talk only by messages ([`msg::Msg`]) over the simulated
//! network, so every request of a real client
//! is a point where the scheduler can interleave other processes. Semantics follow the
//! real systems; docs/semantics.md lists each rule with its source.
//!
//! Table of contents:
//! - [`object`]: typed objects and their metadata.
//! - [`names`]: object names as the API server validates them, one rule per kind.
//! - [`api`]: the API server's wire protocol.
//! - [`apiserver`]: the API server and its store, watches and garbage collector.
//! - [`watch_cache`]: the API server's watch caches, one per resource type, that lag
//!   its store.
//! - [`informer`]: list-and-watch caches that lag the server.
//! - [`leader`]: leases and client-go leader election.
//! - [`kubelet`]: a node's agent: registration, heartbeats, running pods as processes.
//! - [`lifecycle`]: the node lifecycle controller: NotReady, taints, eviction.
//! - [`workloads`]: Deployments and the scheduler: pods for replicas, bound to nodes.
//! - [`component`]: the one interface of every process, the core's and a family's, and
//!   [`Proc`], the process the kernel runs.
//! - [`manager`]: the controller host (work queue, reconcile loop) users plug into.
//! - [`reconcile_error`]: a reconcile's error, typed until its note is written.
//! - [`runtime`]: reconcilers in kube-runtime's shape (async `reconcile`, `error_policy`,
//!   `Api<K>`, `Store`), polled by the manager over its step machine.
//! - [`script`]: a scripted client for user actions and tests.
//! - [`fault`]: world faults injected by the kernel.
//! - [`payload`]: a family's messages, type-erased.
//! - [`timer`]: every component's timers, and the tag that routes a fired one.
//! - [`msg`]: the message enum (the core's own messages, and payload envelopes).
//! - [`proc`]: the kernel's side of a process: dispatch, SIGTERM, message classes.

pub mod api;
pub mod apiserver;
pub mod component;
pub mod fault;
pub mod informer;
pub mod kubelet;
pub mod leader;
pub mod lifecycle;
pub mod manager;
pub mod msg;
pub mod names;
pub mod object;
pub mod payload;
pub mod proc;
pub mod reconcile_error;
pub mod runtime;
pub mod script;
pub mod timer;
pub mod watch_cache;
mod watch_window;
pub mod workloads;

pub use component::{Component, Endpoints, Message, Payload, Proc, WorldCtx};
pub use fault::WorldFault;
pub use msg::Msg;
pub use object::{Kind, Object, ObjectKey, ObjectMeta};
