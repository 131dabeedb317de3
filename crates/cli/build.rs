//! Builds the shipped scenarios into the `reconsim` binary: every `scenarios/*.json` of
//! the workspace, by name, as text (`reconsim::shipped::SCENARIOS`). A copied binary then
//! lists and runs them anywhere, with no source tree beside it. Cargo re-runs this when
//! the directory changes, so an edited scenario is in the next build.
//!
//! It also exports reconsim-kube's libc overrides from the package's binaries, examples
//! and tests (`reconsim_kube::intercept::LINK_ARGS`), so that the getrandom crate's
//! run-time look-up finds them in the real-code example (docs/kube.md).

use std::path::Path;

fn main() {
    for symbol in ["getrandom", "getentropy", "clock_gettime", "gettimeofday"] {
        println!("cargo:rustc-link-arg=-Wl,--export-dynamic-symbol={symbol}");
    }
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it");
    let dir = Path::new(&root).join("scenarios");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut out = String::from("&[\n");
    for path in &files {
        let name = path.file_stem().expect("a file name").to_string_lossy();
        println!("cargo:rerun-if-changed={}", path.display());
        out.push_str(&format!(
            "    ({name:?}, include_str!({:?})),\n",
            path.display().to_string()
        ));
    }
    out.push_str("]\n");
    let dest = Path::new(&std::env::var("OUT_DIR").expect("cargo sets it")).join("shipped.rs");
    std::fs::write(dest, out).expect("OUT_DIR is writable");
}
