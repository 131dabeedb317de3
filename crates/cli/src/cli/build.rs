//! `build`: a Go `main` package to the program a scenario's `controllers.go` entry
//! names, built for wasip1 with reconsim's overlay (reconsim_go::build) and compiled
//! for this machine into the module cache, so the first run starts at once.

use super::UsageError;
use serde_json::json;
use std::path::Path;
use std::process::ExitCode;

pub(super) fn build(
    package: &Path,
    output: &Path,
    force: bool,
    json: bool,
) -> Result<ExitCode, UsageError> {
    use crate::scenario::output::{Target, target};
    // The program is renamed onto `output`: only a new file, or a regular file with
    // --force; never a device or a FIFO, whose entry the rename would replace.
    match target(output) {
        Target::Missing => {}
        Target::Regular if force => {}
        Target::Regular => {
            return Err(UsageError(format!(
                "{}: --output: the file exists; choose another path, or add --force to replace it",
                output.display()
            )));
        }
        Target::CharDevice => {
            return Err(UsageError(format!(
                "{}: --output: it is a character device; `build` writes a .wasm file only",
                output.display()
            )));
        }
        Target::Refused(what) => {
            return Err(UsageError(format!(
                "{}: --output: it is {what}; `build` writes a .wasm file only",
                output.display()
            )));
        }
    }
    if !package.is_dir() {
        return Err(UsageError(format!(
            "{}: PACKAGE: expected a folder holding a Go main package (e.g. a kubebuilder project's cmd/)",
            package.display()
        )));
    }
    super::outputs::create_parent(output)?;
    // A symlink to a regular file is written through, as every output is.
    let resolved = std::fs::canonicalize(output).ok();
    let output = resolved.as_deref().unwrap_or(output);
    if !json {
        eprintln!(
            "building {} for GOOS=wasip1 GOARCH=wasm ...",
            package.display()
        );
    }
    reconsim_go::build::build(package, output)
        .map_err(|e| UsageError(format!("{}: {e}", package.display())))?;
    if !json {
        eprintln!("compiling it for this machine (once per program; cached) ...");
    }
    let program = reconsim_go::Program::load(output)
        .map_err(|e| UsageError(format!("{}: {e}", output.display())))?;
    let bytes = std::fs::metadata(output).map(|m| m.len()).unwrap_or(0);
    let cache = reconsim_go::guest::cache_dir().map(|d| d.display().to_string());
    if json {
        println!(
            "{}",
            json!({
                "package": package.display().to_string(),
                "program": output.display().to_string(),
                "sha256": program.sha256_hex(),
                "bytes": bytes,
                "cache": cache,
            })
        );
    } else {
        println!(
            "{}: {:.1} MB, sha256 {}",
            output.display(),
            bytes as f64 / 1e6,
            program.sha256_hex()
        );
        println!("name it as a scenario's controllers.go[].program (docs/guide/real-go-code.md)");
    }
    Ok(ExitCode::SUCCESS)
}
