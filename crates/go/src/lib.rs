//! reconsim-go: a Go team's program, built with `GOOS=wasip1 GOARCH=wasm`, run
//! unmodified inside a simulated run (DESIGN.md section 12; docs/go.md).
//!
//! - [`guest`]: the program as a wasmtime guest, compiled once and resumed by the run
//!   until it waits;
//! - [`wasi`]: WASI preview 1 as the run answers it (clocks, entropy, files, sockets);
//! - [`host`]: what the program sees of the world, as data;
//! - [`files`]: its read-only file tree (kubeconfig, service-account files);
//! - [`snapshot`]: its state after Go's initialisation, taken once, each run started
//!   from it;
//! - [`build`]: a `main` package built for wasip1 with reconsim's overlay;
//! - [`bridge`], [`family`], [`world`]: the program as a process of a run, as a
//!   scenario's `controllers.go` entry, and in a world of its own for tests.

pub mod bridge;
pub mod build;
pub mod family;
pub mod files;
pub mod guest;
pub mod host;
pub mod http1;
pub mod snapshot;
pub mod wasi;
pub mod world;

pub use bridge::GoBridge;
pub use family::GoFamily;
pub use files::Files;
pub use guest::{LoadError, Program, Running, Stop};
pub use host::Host;
pub use world::GoWorld;
