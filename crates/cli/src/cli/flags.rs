//! Flag values shared by commands (`--seeds`, `--shard`, `--time-budget`, `--jobs`,
//! `--max-plans`), parsed and held to the scenario crate's limits.

use super::UsageError;
use crate::scenario::limits;

/// Two whole numbers `a<sep>b` with `a < b`; the error names the flag and the form.
fn parse_pair(flag: &str, s: &str, sep: &str, form: &str) -> Result<(u64, u64), UsageError> {
    let bad = || UsageError(format!("{flag}: expected {form}, not `{s}`"));
    let (a, b) = s.split_once(sep).ok_or_else(bad)?;
    let (a, b): (u64, u64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    if a >= b {
        return Err(bad());
    }
    Ok((a, b))
}

pub(super) fn parse_seeds(s: &str) -> Result<(u64, u64), UsageError> {
    parse_pair("--seeds", s, "..", "A..B with A < B (e.g. 0..200)")
}

pub(super) fn parse_shard(s: &str) -> Result<(u64, u64), UsageError> {
    parse_pair("--shard", s, "/", "I/N with I < N (e.g. 0/4)")
}

/// `60s`, `5m`, `1h`, `500ms`, or plain seconds.
pub(super) fn parse_duration(s: &str) -> Result<std::time::Duration, UsageError> {
    let bad = || {
        UsageError(format!(
            "--time-budget: expected a duration such as 60s, 5m or 1h, not `{s}`"
        ))
    };
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, ""), |i| s.split_at(i));
    let n: u64 = num.parse().map_err(|_| bad())?;
    let unit_ms: u64 = match unit {
        "" | "s" => 1000,
        "ms" => 1,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(bad()),
    };
    let max = limits::TIME_BUDGET_MS_MAX;
    match n.checked_mul(unit_ms) {
        Some(0) => Err(bad()),
        Some(ms) if ms <= max => Ok(std::time::Duration::from_millis(ms)),
        _ => Err(UsageError(format!(
            "--time-budget: at most 30 days ({}h, TIME_BUDGET_MS_MAX), not `{s}`",
            max / 3_600_000
        ))),
    }
}

/// `--jobs`, or the number of cores.
pub(super) fn jobs_or_cores(jobs: Option<usize>) -> Result<usize, UsageError> {
    match jobs {
        Some(j) if j == 0 || j > limits::JOBS_MAX => Err(UsageError(format!(
            "--jobs: expected 1 to {} (JOBS_MAX), not {j}",
            limits::JOBS_MAX
        ))),
        Some(j) => Ok(j),
        None => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

/// `--max-plans`: 1 to [`limits::SEARCH_PLANS_MAX`].
pub(super) fn max_plans_arg(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=limits::SEARCH_PLANS_MAX).contains(&n) => Ok(n),
        _ => Err(format!(
            "expected 1 to {} (SEARCH_PLANS_MAX), not `{s}`",
            limits::SEARCH_PLANS_MAX
        )),
    }
}
