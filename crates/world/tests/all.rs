//! Every integration test of reconsim-world, one module per file, in one binary
//! (`autotests = false`; issue 33): the files build and link once, and their tests
//! share the cores in one pool. One file's tests: `cargo test --release -p CRATE
//! --test all FILE::`.

// Each file declares its own `mod common;` (and an example's modules), as it did as a
// binary of its own: the same helpers, loaded once per file.
#![allow(clippy::duplicate_mod)]

#[path = "apiserver_delete.rs"]
mod apiserver_delete;
#[path = "apiserver_determinism.rs"]
mod apiserver_determinism;
#[path = "apiserver_gc.rs"]
mod apiserver_gc;
#[path = "apiserver_metadata.rs"]
mod apiserver_metadata;
#[path = "apiserver_names.rs"]
mod apiserver_names;
#[path = "apiserver_watch.rs"]
mod apiserver_watch;
#[path = "apiserver_writes.rs"]
mod apiserver_writes;
#[path = "informer.rs"]
mod informer;
#[path = "leader.rs"]
mod leader;
#[path = "manager.rs"]
mod manager;
#[path = "nodes.rs"]
mod nodes;
#[path = "runtime.rs"]
mod runtime;
