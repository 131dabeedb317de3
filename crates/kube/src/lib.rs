//! reconsim-kube: real kube-rs code against the simulated cluster (DESIGN.md section
//! 11; docs/kube.md). The spike of issue 15: a `kube::Client` whose requests become
//! messages to the simulated API server and whose answers come back in virtual time.
//!
//! - [`transport`]: the tower `Service` the client is built on; each request it is
//!   handed waits in a queue for the simulation to take it;
//! - [`driver`]: a current-thread tokio runtime stepped by the simulation, so every
//!   task runs inside a process's handler, in the same order on every run;
//! - [`rest`]: REST paths and JSON bodies to the API server's operations and back
//!   (core/v1 ConfigMaps for now; anything else is answered with a clear error);
//! - [`kinds`]: the world's resources for the kinds the REST layer speaks;
//! - [`bridge`]: the process that runs a user's async code with its client;
//! - [`selfcheck`]: each world run twice and compared, as madsim does;
//! - [`world`]: a world for one program, the API server a network hop away.

pub mod bridge;
pub mod driver;
pub mod kinds;
pub mod rest;
pub mod selfcheck;
pub mod transport;
pub mod world;

pub use bridge::{KubeBridge, Program};
pub use world::KubeWorld;
