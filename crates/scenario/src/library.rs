//! The shipped scenarios: `scenarios/*.json` of the workspace, found by name.
//!
//! A SCENARIO argument is a path to a file, or the name of a shipped scenario (its file
//! name without `.json`), looked up in `$RECONSIM_SCENARIOS` if set, else in the
//! `scenarios/` directory of the source tree reconsim was built from.

use crate::format::{LoadError, Scenario};
use reconsim_family::Families;
use std::path::{Path, PathBuf};

/// The directory of shipped scenarios.
pub fn dir() -> PathBuf {
    match std::env::var_os("RECONSIM_SCENARIOS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios"),
    }
}

/// Every shipped scenario file, sorted by name.
pub fn files() -> Result<Vec<PathBuf>, LoadError> {
    let d = dir();
    let entries = std::fs::read_dir(&d).map_err(|e| LoadError {
        file: d.display().to_string(),
        path: ".".into(),
        message: format!("cannot list the scenarios directory: {e}"),
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    Ok(files)
}

/// Resolve a SCENARIO argument to a file.
pub fn resolve(arg: &str) -> PathBuf {
    let p = Path::new(arg);
    if p.exists() || arg.ends_with(".json") || arg.contains('/') {
        return p.to_path_buf();
    }
    dir().join(format!("{arg}.json"))
}

/// Load a scenario by path or name; `families` parse its sections.
pub fn load(arg: &str, families: &Families) -> Result<(PathBuf, Scenario), LoadError> {
    let path = resolve(arg);
    if !path.exists() {
        return Err(LoadError {
            file: path.display().to_string(),
            path: ".".into(),
            message: format!(
                "no such scenario: `{arg}` is neither a file nor a name in {}",
                dir().display()
            ),
        });
    }
    let s = Scenario::load(&path, families)?;
    Ok((path, s))
}
