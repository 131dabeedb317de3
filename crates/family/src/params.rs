//! Parameters in scenario files: a family's section and its workload actions' params
//! are parsed once into the family's own types, and every error keeps the JSON path of
//! the field and says what was expected.
//!
//! Paths here are relative to what was parsed (`.node`, `[0].name`, `.` for the whole
//! value); the scenario loader prefixes them with where the value sits in the file
//! (`.controllers.kcp`, `.workload[2].action.upgrade_kcp`).

use reconsim_world::leader::LeaderConfig;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A field that is not what was expected: where (a JSON path) and what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamError {
    /// `.a.b[0].c`, relative to the parsed value; empty or `.` for the value itself.
    pub path: String,
    pub message: String,
}

impl ParamError {
    pub fn at(path: impl Into<String>, message: impl Into<String>) -> Self {
        ParamError {
            path: path.into(),
            message: message.into(),
        }
    }

    /// The same error seen from `prefix`, the path of the parsed value.
    pub fn under(self, prefix: &str) -> Self {
        let path = match self.path.as_str() {
            "" | "." => prefix.to_string(),
            p => format!("{prefix}{p}"),
        };
        ParamError { path, ..self }
    }
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at {}: {}", self.path, self.message)
    }
}

impl std::error::Error for ParamError {}

/// Parse `value` into `T` (derive `Deserialize` with `#[serde(deny_unknown_fields)]` for
/// strict files); the error names the JSON path inside `value`.
///
/// ```
/// use serde::Deserialize;
///
/// #[derive(Debug, Deserialize)]
/// #[serde(deny_unknown_fields)]
/// struct Pool {
///     name: String,
///     replicas: u32,
/// }
///
/// let ok: Vec<Pool> = reconsim_family::params::parse(&serde_json::json!([
///     { "name": "web", "replicas": 2 }
/// ]))
/// .unwrap();
/// assert_eq!((ok[0].name.as_str(), ok[0].replicas), ("web", 2));
///
/// let bad = reconsim_family::params::parse::<Vec<Pool>>(&serde_json::json!([
///     { "name": "web", "replicas": "two" }
/// ]))
/// .unwrap_err();
/// assert_eq!(bad.path, "[0].replicas");
/// ```
pub fn parse<T: DeserializeOwned>(value: &serde_json::Value) -> Result<T, ParamError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        // serde_path_to_error writes `a.b[0].c` (an index needs no dot before it).
        let path = if path == "." || path.is_empty() {
            String::new()
        } else if path.starts_with('[') {
            path
        } else {
            format!(".{path}")
        };
        ParamError::at(path, e.inner().to_string())
    })
}

/// A namespaced object's name in a file: `"web"` (in `default`) or `"prod/web"`.
///
/// ```
/// use reconsim_family::params::{NamespacedName, parse};
///
/// let web: NamespacedName = parse(&serde_json::json!("web")).unwrap();
/// assert_eq!((web.namespace.as_str(), web.name.as_str()), ("default", "web"));
/// let db: NamespacedName = parse(&serde_json::json!("prod/db")).unwrap();
/// assert_eq!(db.to_string(), "prod/db");
/// assert!(parse::<NamespacedName>(&serde_json::json!("a/b/c")).is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NamespacedName {
    pub namespace: String,
    pub name: String,
}

impl NamespacedName {
    /// The namespace a bare name is in.
    pub const DEFAULT_NAMESPACE: &'static str = "default";

    pub fn new(namespace: &str, name: &str) -> Self {
        NamespacedName {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

impl TryFrom<String> for NamespacedName {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        let (namespace, name) = match s.split_once('/') {
            Some((ns, name)) => (ns, name),
            None => (Self::DEFAULT_NAMESPACE, s.as_str()),
        };
        if namespace.is_empty() || name.is_empty() || name.contains('/') {
            return Err(format!("`name` or `namespace/name`, not `{s}`"));
        }
        Ok(NamespacedName {
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
    }
}

impl From<NamespacedName> for String {
    fn from(n: NamespacedName) -> String {
        n.to_string()
    }
}

/// `name` in the default namespace, else `namespace/name`: as files write it.
impl fmt::Display for NamespacedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace == Self::DEFAULT_NAMESPACE {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// An inclusive range `[lo, hi]` drawn uniformly; written `[lo, hi]` in files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "[u64; 2]", into = "[u64; 2]")]
pub struct Range {
    pub lo: u64,
    pub hi: u64,
}

impl From<[u64; 2]> for Range {
    fn from([lo, hi]: [u64; 2]) -> Self {
        Range { lo, hi }
    }
}

impl From<Range> for [u64; 2] {
    fn from(r: Range) -> Self {
        [r.lo, r.hi]
    }
}

impl Range {
    pub const fn fixed(v: u64) -> Self {
        Range { lo: v, hi: v }
    }

    /// `Err` at `path` unless `lo <= hi`.
    pub fn check(self, path: &str) -> Result<(), ParamError> {
        if self.lo > self.hi {
            return Err(ParamError::at(
                path,
                format!("[lo, hi] with lo <= hi, not [{}, {}]", self.lo, self.hi),
            ));
        }
        Ok(())
    }
}

/// Leader-election timings of a Lease (client-go's LeaderElectionConfig).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseSpec {
    pub lease_duration_ms: u64,
    pub renew_deadline_ms: u64,
    pub retry_period_ms: u64,
    /// A new leader's fence: it acts only this long after it acquired the Lease, so the
    /// writes a deposed leader left in flight have landed or died first (Chubby's
    /// lock-delay; docs/semantics.md 4.6 bounds them at 145 s). 0: none, as client-go.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fence_ms: u64,
}

fn is_zero(ms: &u64) -> bool {
    *ms == 0
}

impl LeaseSpec {
    /// `Err` at `path` unless lease > renew > 1.2 x retry, all positive: client-go's
    /// NewLeaderElector rejects other configs ([`LeaderConfig::validate`]).
    pub fn check(self, path: &str) -> Result<(), ParamError> {
        self.leader("", "").validate().map_err(|_| {
            ParamError::at(
                path,
                "lease_duration_ms > renew_deadline_ms > 1.2 * retry_period_ms, all positive (client-go's rule)",
            )
        })
    }

    /// The elector of the Lease `namespace/name` with these timings.
    pub fn leader(self, namespace: &str, name: &str) -> LeaderConfig {
        LeaderConfig::new(
            namespace,
            name,
            self.lease_duration_ms,
            self.renew_deadline_ms,
            self.retry_period_ms,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_keep_the_path_inside_the_value_and_move_under_a_prefix() {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct P {
            replicas: u32,
        }
        let e = parse::<P>(&serde_json::json!({"replicas": -1})).unwrap_err();
        assert_eq!(e.path, ".replicas");
        assert_eq!(e.under(".controllers.x").path, ".controllers.x.replicas");
        let e = parse::<P>(&serde_json::json!({})).unwrap_err();
        assert_eq!(e.path, "");
        assert!(e.message.contains("missing field `replicas`"), "{e}");
        assert_eq!(e.under(".controllers.x").path, ".controllers.x");
    }

    #[test]
    fn lease_timings_follow_client_go() {
        let l = |d, r, p| LeaseSpec {
            lease_duration_ms: d,
            renew_deadline_ms: r,
            retry_period_ms: p,
            fence_ms: 0,
        };
        assert!(l(137_000, 107_000, 26_000).check(".lease").is_ok());
        assert!(l(10, 20, 1).check(".lease").is_err());
        assert!(l(30, 20, 17).check(".lease").is_err(), "20 <= 1.2 * 17");
    }
}
