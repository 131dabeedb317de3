//! Scenarios by name.
//!
//! A SCENARIO argument is a path to a file (it exists, ends in `.json` or holds a `/`),
//! or the name of a scenario of a [`Library`]: `$RECONSIM_SCENARIOS/<name>.json` if that
//! variable is set, else one built into the binary. The `reconsim` binary builds in the
//! workspace's `scenarios/` (`reconsim::shipped`), so a copied binary lists and runs them
//! with no source tree beside it; the variable points a binary at other files.
//!
//! [`dir`], [`files`] and [`load`] read the source tree's `scenarios/` directly: what the
//! workspace's own tests and benches hold every shipped scenario to.

use crate::format::{LoadError, Scenario};
use crate::variants::{Base, Set};
use reconsim_family::Families;
use std::path::{Path, PathBuf};

/// The variable that points a binary at a directory of scenarios instead of its own.
pub const ENV: &str = "RECONSIM_SCENARIOS";

/// Where a scenario's text comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    File(PathBuf),
    /// Built into the binary, by name.
    Builtin(&'static str),
}

impl Source {
    /// The file, if it is one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Source::File(p) => Some(p),
            Source::Builtin(_) => None,
        }
    }

    /// How errors and `list` name it.
    pub fn display(&self) -> String {
        match self {
            Source::File(p) => p.display().to_string(),
            Source::Builtin(name) => format!("scenarios/{name}.json (built in)"),
        }
    }
}

/// The scenarios a binary finds by name: its built-in ones, unless `$RECONSIM_SCENARIOS`
/// names a directory.
#[derive(Clone, Copy, Debug)]
pub struct Library {
    builtin: &'static [(&'static str, &'static str)],
}

impl Library {
    /// A library of these built-in `(name, text)` pairs, sorted by name.
    pub const fn new(builtin: &'static [(&'static str, &'static str)]) -> Library {
        Library { builtin }
    }

    /// The directory `$RECONSIM_SCENARIOS` names, if set.
    /// `$RECONSIM_SCENARIOS`; set to nothing, it is unset.
    fn env_dir() -> Option<PathBuf> {
        std::env::var_os(ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }

    /// Where `arg` is; `Err` names what was looked at.
    pub fn resolve(&self, arg: &str) -> Result<Source, LoadError> {
        if is_path(arg) {
            return Ok(Source::File(PathBuf::from(arg)));
        }
        let missing = |looked: String| LoadError {
            file: arg.to_string(),
            // No file, so no field of one to name.
            path: String::new(),
            message: format!("no such scenario: `{arg}` is neither a file nor {looked}"),
        };
        if let Some(dir) = Self::env_dir() {
            let file = dir.join(format!("{arg}.json"));
            if file.exists() {
                return Ok(Source::File(file));
            }
            // Quoted: a blank or odd value shows as what it is (`" "`).
            return Err(missing(format!(
                "a name in ${ENV}={}; `reconsim list` shows the names",
                crate::limits::quoted(&dir.to_string_lossy())
            )));
        }
        match self.builtin.iter().find(|(name, _)| *name == arg) {
            Some((name, _)) => Ok(Source::Builtin(name)),
            None => Err(missing(
                "the name of a built-in scenario; `reconsim list` shows the names".into(),
            )),
        }
    }

    /// The text of `source`, with the name errors give its file.
    pub fn text(&self, source: &Source) -> Result<(String, String), LoadError> {
        match source {
            Source::File(p) => Ok((p.display().to_string(), crate::json::read_text(p)?)),
            Source::Builtin(name) => {
                let (_, text) = self
                    .builtin
                    .iter()
                    .find(|(n, _)| n == name)
                    .expect("a built-in source names a built-in scenario");
                Ok((source.display(), text.to_string()))
            }
        }
    }

    /// Every scenario `list` shows: the `*.json` of `$RECONSIM_SCENARIOS` if set, sorted,
    /// else the built-in ones.
    pub fn entries(&self) -> Result<Vec<Source>, LoadError> {
        match Self::env_dir() {
            Some(d) => Ok(json_files(&d)?.into_iter().map(Source::File).collect()),
            None => Ok(self
                .builtin
                .iter()
                .map(|(name, _)| Source::Builtin(name))
                .collect()),
        }
    }

    /// Load a scenario by path or name; `families` parse its sections.
    pub fn load(&self, arg: &str, families: &Families) -> Result<(Source, Scenario), LoadError> {
        self.load_with(arg, families, &[])
    }

    /// [`Library::load`] with `--set`s applied ([`crate::variants`]).
    pub fn load_with(
        &self,
        arg: &str,
        families: &Families,
        sets: &[Set],
    ) -> Result<(Source, Scenario), LoadError> {
        let source = self.resolve(arg)?;
        let s = self.load_source_with(&source, families, sets)?;
        Ok((source, s))
    }

    /// Load the scenario at `source`.
    pub fn load_source(&self, source: &Source, families: &Families) -> Result<Scenario, LoadError> {
        self.load_source_with(source, families, &[])
    }

    fn load_source_with(
        &self,
        source: &Source,
        families: &Families,
        sets: &[Set],
    ) -> Result<Scenario, LoadError> {
        let (file, text) = self.text(source)?;
        let resolve = |name: &str, from: Option<&Path>| self.base(name, from);
        Scenario::parse_with(&file, &text, source.path(), families, &resolve, sets)
    }

    /// The base a scenario `extends`: a path (relative to the extending file), or a name
    /// of this library.
    pub fn base(&self, name: &str, from: Option<&Path>) -> Result<Base, LoadError> {
        let source = match relative_path(name, from) {
            Some(p) => Source::File(p),
            None => self.resolve(name)?,
        };
        let (file, text) = self.text(&source)?;
        Ok(Base {
            file,
            text,
            path: source.path().map(Path::to_path_buf),
        })
    }
}

/// Whether a SCENARIO argument names a file rather than a scenario: it exists as one,
/// ends in `.json` or holds a `/`.
fn is_path(arg: &str) -> bool {
    Path::new(arg).exists() || arg.ends_with(".json") || arg.contains('/')
}

/// `name` as a path relative to the directory of `from`, if it is written as a path.
fn relative_path(name: &str, from: Option<&Path>) -> Option<PathBuf> {
    if !(name.ends_with(".json") || name.contains('/')) {
        return None;
    }
    let p = Path::new(name);
    Some(match from.and_then(Path::parent) {
        Some(dir) if p.is_relative() => dir.join(p),
        _ => p.to_path_buf(),
    })
}

/// The base a scenario file `extends` when no library is at hand ([`Scenario::load`]): a
/// path relative to the file, or a name in [`dir`].
pub fn base_in_dir(name: &str, from: Option<&Path>) -> Result<Base, LoadError> {
    let path = relative_path(name, from).unwrap_or_else(|| resolve(name));
    Ok(Base {
        file: path.display().to_string(),
        text: crate::json::read_text(&path)?,
        path: Some(path),
    })
}

/// The source tree's `scenarios/` (or `$RECONSIM_SCENARIOS`).
pub fn dir() -> PathBuf {
    match Library::env_dir() {
        Some(d) => d,
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios"),
    }
}

/// Every `*.json` of `d`, sorted by name.
fn json_files(d: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let entries = std::fs::read_dir(d).map_err(|e| LoadError {
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

/// Every scenario file of [`dir`], sorted by name.
pub fn files() -> Result<Vec<PathBuf>, LoadError> {
    json_files(&dir())
}

/// Resolve a SCENARIO argument to a file of [`dir`].
pub fn resolve(arg: &str) -> PathBuf {
    if is_path(arg) {
        return PathBuf::from(arg);
    }
    dir().join(format!("{arg}.json"))
}

/// Load a scenario by path or by name in [`dir`]; `families` parse its sections.
pub fn load(arg: &str, families: &Families) -> Result<(PathBuf, Scenario), LoadError> {
    let path = resolve(arg);
    if !path.exists() {
        return Err(LoadError {
            file: path.display().to_string(),
            path: String::new(),
            message: format!(
                "no such scenario: `{arg}` is neither a file nor a name in {}",
                dir().display()
            ),
        });
    }
    let s = Scenario::load(&path, families)?;
    Ok((path, s))
}

#[cfg(test)]
mod tests {
    use super::Library;

    #[test]
    fn a_name_that_is_nothing_is_refused_naming_it_and_no_field() {
        // (Unless $RECONSIM_SCENARIOS holds such a file, which no test sets.)
        let e = Library::new(&[])
            .resolve("no-such-scenario-anywhere")
            .expect_err("refused");
        let text = e.to_string();
        assert!(
            text.starts_with("no-such-scenario-anywhere: no such scenario: "),
            "{text}"
        );
        assert!(!text.contains("at ."), "{text}");
    }
}
