//! The files commands write besides their report (failure files, Chrome traces, HTML
//! pages): never over an input, never over an existing file unasked, each directory
//! made first.

use super::UsageError;
use crate::scenario::runner;
use std::path::{Path, PathBuf};

/// The files a run or replay writes besides its report, and whether an existing one
/// may be replaced.
#[derive(Clone, Copy)]
pub(super) struct Outputs<'a> {
    pub(super) save: Option<&'a Path>,
    pub(super) chrome: Option<&'a Path>,
    pub(super) html: Option<&'a Path>,
    pub(super) force: bool,
}

/// `Err` unless `output` may be written: never onto `input` (the file being read), never
/// onto anything but a regular file or a character device, and not onto an existing
/// regular file unless `force` (a character device, `/dev/stdout`, holds no file to
/// keep). Checked before any run, so a refusal costs nothing.
pub(super) fn check_output(
    output: &Path,
    input: Option<&Path>,
    force: bool,
    flag: &str,
) -> Result<(), UsageError> {
    if let Some(input) = input
        && same_file(output, input)
    {
        return Err(UsageError(format!(
            "{}: {flag}: the output would replace the input file; choose another path",
            output.display()
        )));
    }
    use crate::scenario::output::{Target, target};
    check_kind(output, flag)?;
    match target(output) {
        Target::Regular if !force => {
            return Err(UsageError(format!(
                "{}: {flag}: the file exists; choose another path, or add --force to replace it",
                output.display()
            )));
        }
        // A character device is written where it is; it holds no file to keep.
        Target::CharDevice => return Ok(()),
        Target::Regular | Target::Missing | Target::Refused(_) => {}
    }
    create_parent(output)
}

/// `Err` when `output` is something reconsim never writes, with or without --force: a
/// directory, a FIFO, a socket, a block device, a symlink to nothing.
pub(super) fn check_kind(output: &Path, flag: &str) -> Result<(), UsageError> {
    match crate::scenario::output::target(output) {
        crate::scenario::output::Target::Refused(what) => Err(UsageError(format!(
            "{}: {flag}: it is {what}; reconsim writes only regular files and character devices (such as /dev/stdout)",
            output.display()
        ))),
        _ => Ok(()),
    }
}

/// `out/<input's file stem>-<suffix>.json`: where an output goes when none is named.
pub(super) fn default_output(input: &Path, suffix: &str) -> PathBuf {
    let stem = input
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "failure".into());
    Path::new("out").join(format!("{stem}-{suffix}.json"))
}

/// Create the directory an output goes in, if it is missing.
pub(super) fn create_parent(output: &Path) -> Result<(), UsageError> {
    match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => std::fs::create_dir_all(d).map_err(|e| {
            UsageError(format!(
                "{}: cannot create its directory: {e}",
                output.display()
            ))
        }),
        _ => Ok(()),
    }
}

/// Whether two paths name one file (the output side need not exist yet).
pub(super) fn same_file(a: &Path, b: &Path) -> bool {
    let canonical = |p: &Path| {
        std::fs::canonicalize(p).ok().or_else(|| {
            let parent = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            Some(std::fs::canonicalize(parent).ok()?.join(p.file_name()?))
        })
    };
    match (canonical(a), canonical(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Write a run's Chrome trace, and say where on stderr.
pub(super) fn write_chrome(
    path: &Path,
    world: &crate::scenario::build::World,
    outcome: &runner::Outcome,
) -> Result<(), UsageError> {
    let doc = crate::scenario::chrome::chrome_trace(world, outcome.violation.as_ref());
    crate::scenario::output::write(path, doc.to_string().as_bytes()).map_err(|e| {
        UsageError(format!(
            "{}: cannot write the Chrome trace: {e}",
            path.display()
        ))
    })?;
    eprintln!(
        "wrote the Chrome trace to {} (open it in ui.perfetto.dev or chrome://tracing)",
        path.display()
    );
    Ok(())
}

/// Write a failure's page (`--html`), and say where on stderr.
pub(super) fn write_page(path: &Path, page: &str) -> Result<(), UsageError> {
    crate::scenario::output::write(path, page.as_bytes()).map_err(|e| {
        UsageError(format!(
            "{}: cannot write the HTML page: {e}",
            path.display()
        ))
    })?;
    eprintln!(
        "wrote the failure's page to {} (open it in a browser)",
        path.display()
    );
    Ok(())
}

/// Create `--failures-dir` and make sure files can be written in it, before any run: a
/// read-only directory or mount is a usage error up front, not a campaign whose
/// failures are all lost.
pub(super) fn create_failures_dir(dir: Option<&Path>) -> Result<(), UsageError> {
    let Some(dir) = dir else { return Ok(()) };
    let cannot =
        |what: &str, e: std::io::Error| UsageError(format!("{}: {what}: {e}", dir.display()));
    std::fs::create_dir_all(dir).map_err(|e| cannot("cannot create the failures directory", e))?;
    let probe = dir.join(format!(".reconsim-probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| cannot("cannot write failure files in this directory", e))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}
