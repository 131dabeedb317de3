//! The program's file system: a read-only tree in memory (its kubeconfig, a service
//! account's token), the same on every run. A program that writes a file is told the
//! file system is read-only (EROFS), as a container with a read-only root is.

use std::collections::BTreeMap;
use std::sync::Arc;

/// Files by absolute path ("/var/run/secrets/.../token"); directories are the paths'
/// prefixes.
#[derive(Debug, Default, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Files {
    files: BTreeMap<String, Arc<[u8]>>,
}

/// What a path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File(Arc<[u8]>),
}

/// `dir` joined with `path` and made absolute and clean (no `.`, `..` or double
/// slashes), as a path lookup from a directory descriptor reads it.
pub fn join(dir: &str, path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    let whole = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{dir}/{path}")
    };
    for p in whole.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

impl Files {
    /// The tree with one more file (its directories come with it).
    pub fn with(mut self, path: &str, data: impl Into<Vec<u8>>) -> Self {
        let data: Vec<u8> = data.into();
        self.files.insert(join("/", path), data.into());
        self
    }

    /// What `path` (absolute and clean) names, if anything.
    pub fn lookup(&self, path: &str) -> Option<Entry> {
        if let Some(data) = self.files.get(path) {
            return Some(Entry::File(data.clone()));
        }
        if path == "/" {
            return Some(Entry::Dir);
        }
        let prefix = format!("{path}/");
        self.files
            .range(prefix.clone()..)
            .next()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|_| Entry::Dir)
    }

    /// The names directly inside directory `path`, each once, in order, with whether
    /// it is a directory.
    pub fn list(&self, path: &str) -> Vec<(String, bool)> {
        let prefix = if path == "/" {
            "/".to_string()
        } else {
            format!("{path}/")
        };
        let mut out: Vec<(String, bool)> = Vec::new();
        for k in self.files.keys().filter(|k| k.starts_with(&prefix)) {
            let rest = &k[prefix.len()..];
            let (name, dir) = match rest.split_once('/') {
                Some((name, _)) => (name, true),
                None => (rest, false),
            };
            if out.last().map(|(n, _)| n.as_str()) != Some(name) {
                out.push((name.to_string(), dir));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_join_and_clean_as_a_lookup_from_a_directory_does() {
        assert_eq!(join("/", "etc/kube/config"), "/etc/kube/config");
        assert_eq!(join("/etc", "../var/./x"), "/var/x");
        assert_eq!(join("/etc", "/abs//y"), "/abs/y");
        assert_eq!(join("/", ".."), "/");
    }

    #[test]
    fn a_tree_names_its_files_and_their_directories() {
        let f = Files::default()
            .with("/etc/kube/config", "a")
            .with("/etc/kube/token", "b")
            .with("/etc/hosts", "c");
        assert_eq!(f.lookup("/etc/kube"), Some(Entry::Dir));
        assert_eq!(f.lookup("/etc/kub"), None);
        assert!(matches!(f.lookup("/etc/hosts"), Some(Entry::File(_))));
        assert_eq!(
            f.list("/etc"),
            [("hosts".to_string(), false), ("kube".to_string(), true)]
        );
        assert_eq!(f.list("/"), [("etc".to_string(), true)]);
    }
}
