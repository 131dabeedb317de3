//! What every command needs: the registry, the scenarios it finds by name, and how to
//! name this binary in the replay lines it prints for people.

use super::UsageError;
use crate::scenario::Families;
use crate::scenario::Scenario;
use crate::scenario::failure::FailureFile;
use crate::scenario::library::{Library, Source};
use crate::scenario::variants::Set;
use std::path::Path;

/// How to start this binary again from where it was started: the path or name it was
/// started by (`target/release/reconsim` under `cargo run`, `reconsim` from PATH).
pub(super) fn invocation(name: &str) -> String {
    match std::env::args_os().next() {
        Some(a) if !a.is_empty() => shell_word(&a.to_string_lossy()),
        _ => name.to_string(),
    }
}

/// `word` as a POSIX shell reads it back: as it is when it holds only safe characters,
/// else in single quotes.
pub(crate) fn shell_word(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// What every command needs: the registry, the scenarios it finds by name and the
/// program name for replay lines.
pub(super) struct App<'a> {
    pub(super) families: &'a Families,
    pub(super) library: Library,
    /// The binary's name, for errors.
    pub(super) program: &'a str,
    /// How this binary was started (`target/release/reconsim` under `cargo run`, or
    /// `reconsim` from PATH), so a replay line runs as printed.
    pub(super) invocation: String,
    /// The command's `--set`s, applied to every scenario it loads.
    pub(super) sets: Vec<Set>,
}

impl App<'_> {
    /// A SCENARIO argument (a path or a shipped scenario's name), loaded with the
    /// registry.
    pub(super) fn load(&self, arg: &str) -> Result<(Source, Scenario), UsageError> {
        Ok(self.library.load_with(arg, self.families, &self.sets)?)
    }

    /// A failure file, checked as a scenario is, and its plan's processes by a run.
    pub(super) fn load_failure(&self, path: &Path) -> Result<FailureFile, UsageError> {
        let f = FailureFile::load(path, self.families)?;
        f.check_targets(&path.display().to_string())?;
        Ok(f)
    }

    /// The command that runs `seed` of the scenario `arg` again, with this command's
    /// `--set`s (and `--swarm` for a swarm campaign's seed), for people.
    pub(super) fn run_command(&self, arg: &str, seed: u64, swarm: bool) -> String {
        let mut line = format!("{} run {} --seed {seed}", self.invocation, shell_word(arg));
        if swarm {
            line.push_str(" --swarm");
        }
        for set in &self.sets {
            let spec = format!("{}={}", set.path.trim_start_matches('.'), set.value);
            line.push_str(&format!(" --set {}", shell_word(&spec)));
        }
        line
    }

    /// The search that finds plan `plan` of reference seed `seed` again as its first
    /// failure: the combined campaign's search arm is this search, plan for plan
    /// ([`crate::scenario::combined::Config::search`]).
    pub(super) fn search_command(
        &self,
        arg: &str,
        seed: u64,
        plans_per_reference: usize,
    ) -> String {
        let mut line = format!(
            "{} search {} --seeds {seed}..{} --max-plans {plans_per_reference} --no-pairs --stop-on-first",
            self.invocation,
            shell_word(arg),
            seed.saturating_add(1)
        );
        for set in &self.sets {
            let spec = format!("{}={}", set.path.trim_start_matches('.'), set.value);
            line.push_str(&format!(" --set {}", shell_word(&spec)));
        }
        line
    }

    /// The command that replays a failure file, for people.
    pub(super) fn replay_command(&self, path: &Path) -> String {
        format!(
            "{} replay {}",
            self.invocation,
            shell_word(&path.display().to_string())
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn shell_words_read_back_as_written() {
        assert_eq!(
            super::shell_word("net.latency_ms=[1,50]"),
            "'net.latency_ms=[1,50]'"
        );
        assert_eq!(super::shell_word("a-b_c.json"), "a-b_c.json");
        assert_eq!(super::shell_word("it's"), "'it'\\''s'");
        assert_eq!(super::shell_word(""), "''");
    }
}
