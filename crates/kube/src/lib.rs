//! reconsim-kube: real kube-rs code against the simulated cluster (DESIGN.md section
//! 11; docs/kube.md): a `kube::Client` whose requests become messages to the simulated
//! API server and whose answers come back in virtual time, and a kube-rs controller's
//! own `reconcile` and `error_policy` under reconsim's manager.
//!
//! - [`transport`]: the tower `Service` the client is built on; each request it is
//!   handed waits in a queue for the simulation to take it;
//! - [`driver`]: a current-thread tokio runtime stepped by the simulation, so every
//!   task runs inside a process's handler, in the same order on every run, its timers
//!   in virtual time;
//! - [`intercept`]: the process's clocks and entropy inside a run (libc's
//!   `clock_gettime`, `getrandom` and kin, overridden), real outside one;
//! - [`kinds`]: the kinds a world serves on the wire, any kube-rs type registered by
//!   type (k8s-openapi's, or a `#[derive(CustomResource)]` one);
//! - [`doc`]: a served object's body as the API server stores it: canonical JSON;
//! - [`wire`]: a served object between the world and the wire (metadata, uids, times);
//! - [`text`]: a served object's JSON text, written straight from the stored object;
//! - [`world_kinds`]: the world's own kinds (Node, Pod, Lease, CSR, Deployment) as their
//!   k8s-openapi JSON, one object for the world's components and for kube-rs code;
//! - [`rest`]: REST paths and JSON bodies to the API server's operations and back;
//!   anything not served is answered with a clear error;
//! - [`discovery`]: what the server says it serves, for a client's REST mapper;
//! - [`page`]: a list in pages (`limit`, `continue`), as the etcd store serves it;
//! - [`schema`]: a custom resource's structural schema: pruning, defaults, validation;
//! - [`selector`]: label selectors (equality and set based) and field selectors, parsed
//!   and matched as the API server does;
//! - [`strategic`]: a strategic merge patch of a built-in type, by its Go types' merge
//!   keys and directives.
//! - [`write`]: a replace, a merge, strategic merge or JSON patch, or a server-side
//!   apply, applied at the server to the stored object;
//! - [`managed`]: who owns which field (managedFields), and server-side apply's merge
//!   and conflicts;
//! - [`list_types`]: how each list merges, for apply (its list type) and for a
//!   strategic merge patch (its merge key): every built-in kind's, and a custom
//!   resource's from its CRD schema;
//! - [`pool`]: the client's connections as hyper's pool keeps them, which tells how
//!   each request fares under a partition;
//! - [`bridge`]: the process that runs a user's async code with its client;
//! - [`custom`]: a user's program as a scenario's `custom` controller, in one call,
//!   its entries' objects and actions manifests of its kinds;
//! - [`cel`]: invariants and desired states written in CEL over objects' JSON;
//! - [`check`]: checkers and desired states read as the controller's own types;
//! - [`handle`]: the program's way to the world's services (the cloud), found as
//!   `Handle::current()`;
//! - [`http`]: the user's own external services over HTTP: a tower `Service` client
//!   for their SDK, and the simulated service's handler;
//! - [`failpoints`]: the program's `reconsim_failpoint::fail_point!`s, armed by the
//!   fault plan;
//! - [`controller`]: a kube-rs controller's `reconcile` and `error_policy` under
//!   reconsim's manager (work queue, informer, leader election, crash and restart);
//! - [`selfcheck`]: each world run twice and compared, as madsim does;
//! - [`world`]: a world for one program, the API server a network hop away.

pub mod bridge;
pub mod cel;
pub mod check;
pub mod controller;
pub mod custom;
pub mod discovery;
pub mod doc;
pub mod driver;
pub mod failpoints;
pub mod handle;
pub mod http;
pub mod intercept;
pub mod kinds;
pub mod list_types;
pub mod managed;
pub mod page;
pub mod pool;
pub mod rest;
pub mod schema;
pub mod selector;
pub mod selfcheck;
pub mod strategic;
pub mod text;
pub mod transport;
pub mod validations;
pub mod wire;
pub mod world;
pub mod world_kinds;
pub mod write;

pub use bridge::{Backoff, KubeBridge, Program, program};
pub use controller::Controller;
pub use custom::custom;
pub use handle::{CallError, Handle};
pub use kinds::Kinds;
pub use world::KubeWorld;
