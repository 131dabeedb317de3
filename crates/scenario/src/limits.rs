//! Every quantity a user can give has a named maximum, checked at load with the file, the
//! field and the limit in the error (TigerBeetle's constants: a bound for every loop and
//! queue, stated once). docs/scenario-format.md lists them; a test keeps the two in step.
//!
//! Scenario fields carry their unit last in their names (`duration_ms`, `lag_ms`,
//! `toleration_seconds`), so one pass over a loaded scenario bounds every time of every
//! family, a user's included ([`check_numbers`]): a number too large to simulate is
//! refused before any arithmetic sees it, instead of overflowing or hanging a run.

use serde_json::Value;

/// The longest scenario a run simulates: 7 days of virtual time.
pub const DURATION_MS_MAX: u64 = 7 * 24 * 60 * 60 * 1000;
/// Any other time in milliseconds (a field whose name ends in `_ms`, a value or a
/// `[lo, hi]` range): no longer than the longest run.
pub const TIME_MS_MAX: u64 = DURATION_MS_MAX;
/// A time in seconds (a field whose name ends in `_seconds`).
pub const TIME_SECONDS_MAX: u64 = DURATION_MS_MAX / 1000;
/// A `replicas` field: the simulated cluster is small on purpose.
pub const REPLICAS_MAX: u64 = 64;
/// Any other whole number in a scenario (a failpoint's hit, a count).
pub const NUMBER_MAX: u64 = 1_000_000_000;
/// A scenario's seed budget (`seeds`).
pub const SEED_BUDGET_MAX: u64 = 1_000_000_000;
/// Items of any list in a scenario (a family's machines, MachineSets, sources): with
/// [`NODES_MAX`], [`WORKLOAD_ACTIONS_MAX`] and the like, no list makes a world too large
/// to build.
pub const LIST_ITEMS_MAX: usize = 1_024;
/// Nodes in a topology, control plane and workers together.
pub const NODES_MAX: usize = 64;
/// Timed user actions in a workload.
pub const WORKLOAD_ACTIONS_MAX: usize = 1_024;
/// Fault generators in a scenario.
pub const FAULT_GENERATORS_MAX: usize = 64;
/// Faults one generator draws per run.
pub const FAULTS_PER_GENERATOR_MAX: u64 = 64;
/// Faults in a failure file's plan.
pub const PLAN_FAULTS_MAX: usize = 4_096;
/// Bytes of a scenario, failure or result file: larger input is refused unread.
pub const FILE_BYTES_MAX: u64 = 16 * 1024 * 1024;
/// Bytes of a name (a scenario's, a node's): it becomes part of file names.
pub const NAME_BYTES_MAX: usize = 100;
/// `--jobs`: threads of a campaign or search.
pub const JOBS_MAX: usize = 256;
/// `--time-budget`: 30 days of wall time.
pub const TIME_BUDGET_MS_MAX: u64 = 30 * 24 * 60 * 60 * 1000;
/// `shrink --max-runs`.
pub const SHRINK_RUNS_MAX: u64 = 1_000_000;
/// `search --max-plans`, per reference seed.
pub const SEARCH_PLANS_MAX: usize = 1_000_000;
/// `search --seeds`: reference seeds of one search.
pub const SEARCH_SEEDS_MAX: u64 = 100_000;
/// Bytes of the failures a `fuzz --json` result (or `merge`'s) lists, the smallest
/// seeds first; the rest are counted in `failures_unlisted`. Half of
/// [`FILE_BYTES_MAX`], so a result always fits in what `merge` reads back.
pub const RESULT_LISTED_BYTES_MAX: u64 = FILE_BYTES_MAX / 2;

/// Every limit by name, for docs/scenario-format.md's table (a test keeps them equal).
pub const ALL: [(&str, u64); 23] = [
    ("DURATION_MS_MAX", DURATION_MS_MAX),
    ("TIME_MS_MAX", TIME_MS_MAX),
    ("TIME_SECONDS_MAX", TIME_SECONDS_MAX),
    ("REPLICAS_MAX", REPLICAS_MAX),
    ("NUMBER_MAX", NUMBER_MAX),
    ("LIST_ITEMS_MAX", LIST_ITEMS_MAX as u64),
    ("SEED_BUDGET_MAX", SEED_BUDGET_MAX),
    ("NODES_MAX", NODES_MAX as u64),
    ("WORKLOAD_ACTIONS_MAX", WORKLOAD_ACTIONS_MAX as u64),
    ("FAULT_GENERATORS_MAX", FAULT_GENERATORS_MAX as u64),
    ("FAULTS_PER_GENERATOR_MAX", FAULTS_PER_GENERATOR_MAX),
    ("PLAN_FAULTS_MAX", PLAN_FAULTS_MAX as u64),
    ("FILE_BYTES_MAX", FILE_BYTES_MAX),
    ("NAME_BYTES_MAX", NAME_BYTES_MAX as u64),
    ("JOBS_MAX", JOBS_MAX as u64),
    ("TIME_BUDGET_MS_MAX", TIME_BUDGET_MS_MAX),
    ("SHRINK_RUNS_MAX", SHRINK_RUNS_MAX),
    ("SEARCH_PLANS_MAX", SEARCH_PLANS_MAX as u64),
    ("SEARCH_SEEDS_MAX", SEARCH_SEEDS_MAX),
    ("RESULT_LISTED_BYTES_MAX", RESULT_LISTED_BYTES_MAX),
    ("EVENTS_PER_RUN_MAX", EVENTS_PER_RUN_MAX),
    ("ALTERNATIVE_NAMES_MAX", ALTERNATIVE_NAMES_MAX as u64),
    ("EXTENDS_DEPTH_MAX", EXTENDS_DEPTH_MAX as u64),
];

/// Scenarios extending one another in one chain (`extends`, crate::variants).
pub const EXTENDS_DEPTH_MAX: usize = 8;

/// Events one run handles before it stops as a livelock (the kernel's `max_events`;
/// the run reports the invariant `event_budget`).
pub const EVENTS_PER_RUN_MAX: u64 = 50_000_000;
/// Names a saved failure tries beside its own before giving up rather than replace
/// another failure (`<stem>-<trace hash>.json`, then `-2` and on).
pub const ALTERNATIVE_NAMES_MAX: usize = 100;

/// `Err(expected)` unless `name` is a safe name: 1 to [`NAME_BYTES_MAX`] bytes of ASCII
/// letters, digits, `.`, `_` and `-`, starting with a letter or a digit. A scenario's
/// name becomes part of failure file names and of printed replay lines, so it can hold
/// no path separator, no `..` at its start and no line break.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= NAME_BYTES_MAX
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "a safe name: 1 to {NAME_BYTES_MAX} characters among A-Z a-z 0-9 . _ -, starting with a letter or digit, not {}",
            quoted(name)
        ))
    }
}

/// `Err(expected)` unless `name` is a node name Kubernetes accepts and a host name: a
/// DNS-1123 label (1 to 63 lowercase letters, digits and `-`, starting and ending with a
/// letter or digit; the Node's name is the host's in every simulated message).
pub fn check_node_name(name: &str) -> Result<(), String> {
    let b = name.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "a node name (DNS-1123 label: 1 to 63 characters among a-z 0-9 -, starting and ending with a letter or digit), not {}",
            quoted(name)
        ))
    }
}

/// A name for an error message: quoted and escaped, so a name holding a line break or
/// a megabyte of text cannot forge or flood the lines around it (one function for every
/// crate's messages, families' too: reconsim_world::names::quoted).
pub use reconsim_world::names::quoted;

/// The maximum of a whole number found at a field named `key`, by its unit suffix.
fn max_for(key: &str) -> (u64, &'static str) {
    if key.ends_with("_ms") {
        (TIME_MS_MAX, "TIME_MS_MAX, 7 days")
    } else if key.ends_with("_seconds") {
        (TIME_SECONDS_MAX, "TIME_SECONDS_MAX, 7 days")
    } else if key == "replicas" {
        (REPLICAS_MAX, "REPLICAS_MAX")
    } else {
        (NUMBER_MAX, "NUMBER_MAX")
    }
}

/// `Err((json path, expected))` at the first whole number of `doc` (a scenario or a plan
/// as it serializes, every family's section included) above the maximum its field's
/// name implies, or the first list longer than [`LIST_ITEMS_MAX`]. The top-level
/// `seeds` is the caller's to bound, and so is a plan's length ([`PLAN_FAULTS_MAX`]).
pub fn check_numbers(doc: &Value) -> Result<(), (String, String)> {
    check_values(doc, LIST_ITEMS_MAX)
}

/// [`check_numbers`] with lists of at most `list_max` items.
pub fn check_values(doc: &Value, list_max: usize) -> Result<(), (String, String)> {
    fn walk(
        v: &Value,
        path: &mut String,
        key: &str,
        list_max: usize,
    ) -> Result<(), (String, String)> {
        match v {
            Value::Number(n) => {
                let (max, name) = max_for(key);
                let fits = match (n.as_u64(), n.as_i64()) {
                    (Some(u), _) => u <= max,
                    (None, Some(i)) => i.unsigned_abs() <= max,
                    // A fraction: serde already refused it where a whole number was due.
                    (None, None) => true,
                };
                if !fits {
                    return Err((
                        if path.is_empty() {
                            ".".into()
                        } else {
                            path.clone()
                        },
                        format!("at most {max} ({name}), not {n}"),
                    ));
                }
                Ok(())
            }
            Value::Array(items) => {
                if items.len() > list_max {
                    return Err((
                        if path.is_empty() {
                            ".".into()
                        } else {
                            path.clone()
                        },
                        format!(
                            "at most {list_max} items (LIST_ITEMS_MAX), not {}",
                            items.len()
                        ),
                    ));
                }
                for (i, item) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    walk(item, path, key, list_max)?;
                    path.truncate(len);
                }
                Ok(())
            }
            Value::Object(map) => {
                for (k, item) in map {
                    if path.is_empty() && k == "seeds" {
                        continue;
                    }
                    let len = path.len();
                    path.push('.');
                    path.push_str(k);
                    walk(item, path, k, list_max)?;
                    path.truncate(len);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
    walk(doc, &mut String::new(), "", list_max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_event_bound_is_the_kernels() {
        assert_eq!(
            EVENTS_PER_RUN_MAX,
            reconsim_sim::SimConfig::new(0).max_events
        );
    }

    #[test]
    fn safe_names() {
        for ok in ["a", "machineapi-no-leader-election", "v1.2_x", "0abc"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        let long = "a".repeat(NAME_BYTES_MAX + 1);
        for bad in [
            "",
            "../escaped",
            "a/b",
            ".hidden",
            "-x",
            "a\nreplay: x",
            "é",
            &long,
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        // A flood is cut in the message.
        let flood = "x".repeat(1_000_000) + "/";
        assert!(check_name(&flood).unwrap_err().len() < 300);
    }

    #[test]
    fn node_names() {
        for ok in ["master-0", "w1", "a"] {
            assert!(check_node_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Master", "a_b", "-a", "a-", "a.b", &"a".repeat(64)] {
            assert!(check_node_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn numbers_are_bounded_by_their_unit() {
        let ok = json!({"seeds": u64::MAX, "duration_ms": DURATION_MS_MAX, "net": {"latency_ms": [0, 5]}});
        assert_eq!(check_numbers(&ok), Ok(()));
        let bad = json!({"net": {"latency_ms": [0, u64::MAX]}});
        assert_eq!(check_numbers(&bad).unwrap_err().0, ".net.latency_ms[1]");
        let bad = json!({"x": [{"replicas": 1_000_000}]});
        assert_eq!(check_numbers(&bad).unwrap_err().0, ".x[0].replicas");
        let bad = json!({"toleration_seconds": TIME_SECONDS_MAX + 1});
        assert!(check_numbers(&bad).is_err());
        let bad = json!({"offset_ms": -(TIME_MS_MAX as i64) - 1});
        assert!(check_numbers(&bad).is_err());
        let long = json!({"machines": vec![json!({}); LIST_ITEMS_MAX + 1]});
        assert_eq!(check_numbers(&long).unwrap_err().0, ".machines");
    }
}
