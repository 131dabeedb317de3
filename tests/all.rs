//! Every integration test of the root package, one module per file, in one binary
//! (`autotests = false` in Cargo.toml; issue 33): the files build once and link once
//! instead of once each, and their tests share the machine's cores in one pool instead
//! of running file after file. Run one file's tests with `cargo test --release --test
//! all FILE::` (`--test all hostile::`); each file keeps its own `mod common;`.

// Each file declares its own `mod common;` (and an example's modules), as it did as a
// binary of its own: the same helpers, loaded once per file.
#![allow(clippy::duplicate_mod)]

#[path = "check_campaign.rs"]
mod check_campaign;
#[path = "chrome.rs"]
mod chrome;
#[path = "cli.rs"]
mod cli;
#[path = "cloud_names.rs"]
mod cloud_names;
#[path = "combined.rs"]
mod combined;
#[path = "doc_commands.rs"]
mod doc_commands;
#[path = "example_allocator.rs"]
mod example_allocator;
#[path = "example_configset.rs"]
mod example_configset;
// Go programs: the `go` feature (a default one).
#[cfg(feature = "go")]
#[path = "example_configset_go.rs"]
mod example_configset_go;
#[path = "example_launcher.rs"]
mod example_launcher;
#[path = "example_podset.rs"]
mod example_podset;
#[path = "example_stepset.rs"]
mod example_stepset;
#[path = "explain.rs"]
mod explain;
#[path = "families.rs"]
mod families;
#[path = "gating.rs"]
mod gating;
#[path = "guide.rs"]
mod guide;
#[path = "hostile.rs"]
mod hostile;
#[path = "kcp.rs"]
mod kcp;
#[path = "kube_http.rs"]
mod kube_http;
#[path = "kube_manifests.rs"]
mod kube_manifests;
#[path = "kube_pods.rs"]
mod kube_pods;
#[path = "kube_races.rs"]
mod kube_races;
#[path = "machineapi.rs"]
mod machineapi;
#[path = "mco.rs"]
mod mco;
#[path = "newcomer.rs"]
mod newcomer;
#[path = "object_names.rs"]
mod object_names;
#[path = "open_world.rs"]
mod open_world;
#[path = "oracle.rs"]
mod oracle;
#[path = "page.rs"]
mod page;
#[path = "properties.rs"]
mod properties;
#[path = "report_shapes.rs"]
mod report_shapes;
#[path = "scenarios.rs"]
mod scenarios;
#[path = "search.rs"]
mod search;
#[path = "shrink.rs"]
mod shrink;
#[path = "special_outputs.rs"]
mod special_outputs;
