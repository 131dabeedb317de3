//! reconsim-go: a Go team's program, built with `GOOS=wasip1 GOARCH=wasm`, run
//! unmodified inside a simulated run (DESIGN.md section 12; docs/go.md).
//!
//! - [`guest`]: the program as a wasmtime guest, compiled once and resumed by the run
//!   until it waits;
//! - [`wasi`]: WASI preview 1 as the run answers it (clocks, entropy, files, sockets);
//! - [`host`]: what the program sees of the world, as data;
//! - [`files`]: its read-only file tree (kubeconfig, service-account files).

pub mod bridge;
pub mod build;
pub mod family;
pub mod files;
pub mod guest;
pub mod host;
pub mod http1;
pub mod wasi;
pub mod world;

pub use bridge::GoBridge;
pub use family::GoFamily;
pub use files::Files;
pub use guest::{LoadError, Program, Running, Stop};
pub use host::Host;
pub use world::GoWorld;
