//! One command from a Go `main` package to the program a scenario names: `go build`
//! for `GOOS=wasip1 GOARCH=wasm`, with reconsim's overlay (`go build -overlay`), so
//! the user's module is never edited:
//!
//! - `runtime/lock_wasip1.go`: Go 1.26's file, with a goroutine that waits on a note
//!   with no deadline parked instead of yielding in a loop. Without it, `signal.Notify`
//!   (every controller-runtime manager calls it) keeps a goroutine runnable for ever
//!   and the program never idles into `poll_oneoff` (docs/go.md, "Why an overlay");
//! - `zz_reconsim_wasip1.go`, added to the main package: `http.DefaultTransport` dials
//!   through the simulation (`reconsim.dial`), since wasip1 Go has no outbound sockets;
//! - `zz_reconsim_wasip1_kube.go`, added when the program uses client-go: a request
//!   body in protobuf (controller-runtime's for built-in kinds) goes as the same
//!   object in JSON.
//!
//! The overlay is written for one Go release: another is refused by name.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Go release the overlay is written for.
pub const GO_RELEASE: &str = "go1.26";

const LOCK_WASIP1: &str = include_str!("../overlay/runtime/lock_wasip1.go");
const RESEED: &str = include_str!("../overlay/runtime/zz_reconsim_wasip1.go");
const MAIN: &str = include_str!("../overlay/main/zz_reconsim_wasip1_main.go");
const SIGNALS: &str = include_str!("../overlay/signal/zz_reconsim_wasip1.go");
const DIAL: &str = include_str!("../overlay/main/zz_reconsim_wasip1.go");
const KUBE_JSON: &str = include_str!("../overlay/main/zz_reconsim_wasip1_kube.go");
/// A package the program depends on when it uses client-go's typed objects; with it,
/// [`KUBE_JSON`] is added.
const CLIENT_GO_SCHEME: &str = "k8s.io/client-go/kubernetes/scheme";

/// Why a build failed.
#[derive(Debug)]
pub enum BuildError {
    /// No `go` command could be run.
    NoGo(String),
    /// A Go release the overlay is not written for.
    Release {
        found: String,
    },
    /// The package is not a directory.
    NotADirectory(PathBuf),
    Io(PathBuf, std::io::Error),
    /// The package is a library, not a program.
    NotMain {
        package: String,
        name: String,
    },
    /// `go build` failed: its output.
    Go(String),
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::NoGo(e) => write!(
                f,
                "cannot run `go` (Go {GO_RELEASE} is needed to build Go programs): {e}"
            ),
            BuildError::Release { found } => write!(
                f,
                "reconsim's overlay is written for {GO_RELEASE}.x; `go env GOVERSION` says {found}"
            ),
            BuildError::NotADirectory(p) => write!(
                f,
                "{}: not a directory holding a Go main package",
                p.display()
            ),
            BuildError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            BuildError::NotMain { package, name } => write!(
                f,
                "{package} is package {name}, not a main package (a program has `package main` and `func main`)"
            ),
            BuildError::Go(out) => write!(f, "go build failed:\n{out}"),
        }
    }
}

impl std::error::Error for BuildError {}

fn go_env(var: &str) -> Result<String, BuildError> {
    let out = Command::new("go")
        .args(["env", var])
        .output()
        .map_err(|e| BuildError::NoGo(e.to_string()))?;
    if !out.status.success() {
        return Err(BuildError::NoGo(
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The packages the package in `package` depends on, itself last, each with its name.
fn deps(package: &Path) -> Result<Vec<(String, String)>, BuildError> {
    let out = Command::new("go")
        .current_dir(package)
        .env("GOOS", "wasip1")
        .env("GOARCH", "wasm")
        .args(["list", "-deps", "-f", "{{.ImportPath}} {{.Name}}", "."])
        .output()
        .map_err(|e| BuildError::NoGo(e.to_string()))?;
    if !out.status.success() {
        return Err(BuildError::Go(
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(p, n)| (p.to_string(), n.to_string()))
        .collect())
}

/// Builds the main package in `package` into `out` (a `.wasm` file).
pub fn build(package: &Path, out: &Path) -> Result<(), BuildError> {
    let package = package
        .canonicalize()
        .ok()
        .filter(|p| p.is_dir())
        .ok_or_else(|| BuildError::NotADirectory(package.to_path_buf()))?;
    let release = go_env("GOVERSION")?;
    if release != GO_RELEASE && !release.starts_with(&format!("{GO_RELEASE}.")) {
        return Err(BuildError::Release { found: release });
    }
    let goroot = PathBuf::from(go_env("GOROOT")?);
    // One folder per build, even for two builds at once in one process.
    static BUILDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("reconsim-go-overlay-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| BuildError::Io(dir.clone(), e))?;
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| BuildError::Io(p.clone(), e))?;
        Ok::<_, BuildError>(p)
    };
    let lock = write("lock_wasip1.go", LOCK_WASIP1)?;
    let dial = write("zz_reconsim_wasip1.go", DIAL)?;
    let mut replace = serde_json::Map::new();
    let mut add = |to: PathBuf, from: PathBuf| {
        replace.insert(
            to.to_string_lossy().into_owned(),
            from.to_string_lossy().into_owned().into(),
        );
    };
    add(goroot.join("src/runtime/lock_wasip1.go"), lock);
    add(
        goroot.join("src/runtime/zz_reconsim_wasip1.go"),
        write("zz_reconsim_wasip1_runtime.go", RESEED)?,
    );
    add(
        goroot.join("src/os/signal/zz_reconsim_wasip1.go"),
        write("zz_reconsim_wasip1_signal.go", SIGNALS)?,
    );
    add(package.join("zz_reconsim_wasip1.go"), dial);
    add(
        package.join("zz_reconsim_wasip1_main.go"),
        write("zz_reconsim_wasip1_main.go", MAIN)?,
    );
    let deps = deps(&package)?;
    if let Some((path, name)) = deps.last()
        && name != "main"
    {
        return Err(BuildError::NotMain {
            package: path.clone(),
            name: name.clone(),
        });
    }
    if deps.iter().any(|(p, _)| p == CLIENT_GO_SCHEME) {
        add(
            package.join("zz_reconsim_wasip1_kube.go"),
            write("zz_reconsim_wasip1_kube.go", KUBE_JSON)?,
        );
    }
    let overlay = serde_json::json!({ "Replace": replace });
    let overlay_file = write("overlay.json", &overlay.to_string())?;
    let out_abs = if out.is_absolute() {
        out.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|e| BuildError::Io(out.to_path_buf(), e))?
            .join(out)
    };
    if let Some(parent) = out_abs.parent() {
        std::fs::create_dir_all(parent).map_err(|e| BuildError::Io(parent.to_path_buf(), e))?;
    }
    // Built beside `out` and renamed onto it: a reader (another build of the same
    // program, in this process or another) sees the old file or the new one, whole.
    let partial = out_abs.with_extension(format!("partial-{}-{n}", std::process::id()));
    // `go build` leaves a target whose build ID says it is up to date untouched (no
    // relink: 0.3 s against 2.6 s for a manager), so the partial file starts as a copy
    // of the last build. A copy, not a link: a relink must not write through to `out`.
    if out_abs.is_file() {
        let _ = std::fs::copy(&out_abs, &partial);
    }
    let result = Command::new("go")
        .current_dir(&package)
        .env("GOOS", "wasip1")
        .env("GOARCH", "wasm")
        .env("CGO_ENABLED", "0")
        .arg("build")
        // `_initialize` and `reconsim_main` instead of `_start`: initialisation apart
        // from main, so a run starts from a snapshot taken after it.
        .arg("-buildmode=c-shared")
        .arg(format!("-overlay={}", overlay_file.display()))
        .arg("-trimpath")
        .arg("-o")
        .arg(&partial)
        .arg(".")
        .output()
        .map_err(|e| BuildError::NoGo(e.to_string()));
    let _ = std::fs::remove_dir_all(&dir);
    let result = result?;
    if !result.status.success() {
        let _ = std::fs::remove_file(&partial);
        return Err(BuildError::Go(format!(
            "{}{}",
            String::from_utf8_lossy(&result.stdout),
            String::from_utf8_lossy(&result.stderr)
        )));
    }
    std::fs::rename(&partial, &out_abs).map_err(|e| BuildError::Io(out_abs.clone(), e))
}
