//! Go fixtures, built once per test run with reconsim's overlay (`reconsim_go::build`).
//! Go 1.26 must be installed: a test that needs a Go program fails, naming what is
//! missing, rather than passing without having run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The `.wasm` of `crates/go/testdata/<name>`, built on first use.
pub fn wasm(name: &str) -> PathBuf {
    static BUILT: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = built.get(name) {
        return p.clone();
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(name);
    let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("go")
        .join(format!("{name}.wasm"));
    if let Err(e) = reconsim_go::build::build(&src, &out) {
        panic!("building the Go fixture {name}: {e}");
    }
    built.insert(name.to_string(), out.clone());
    out
}
