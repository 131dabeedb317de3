//! `merge`: the `fuzz --json` results of shards combined into the result of the whole
//! campaign, refusing duplicate, overlapping or missing shards.

use super::UsageError;
use super::flags::{parse_seeds, parse_shard};
use super::outputs::same_file;
use crate::scenario::fuzz::Campaign;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// One `fuzz --json` result given to `merge`, as far as merging needs it.
struct ShardResult {
    path: PathBuf,
    doc: serde_json::Value,
    campaign: Campaign,
    seeds_run: u64,
    /// Failures it counted but did not list ([`crate::scenario::limits::RESULT_LISTED_BYTES_MAX`]).
    unlisted: u64,
}

/// Read a `fuzz --json` result: the fields merge needs, each checked.
fn read_result(path: &Path) -> Result<ShardResult, UsageError> {
    let text = crate::scenario::json::read_text(path)?;
    let doc: serde_json::Value = crate::scenario::json::parse_object(
        &path.display().to_string(),
        &text,
        "a `reconsim fuzz --json` result",
    )?;
    let bad = |field: &str, expected: &str| {
        UsageError(format!(
            "{}: at .{field}: expected {expected} (a `reconsim fuzz --json` result)",
            path.display()
        ))
    };
    // A combined campaign's rounds follow from one another: it is one result, never a
    // shard (`fuzz --campaign combined` refuses --shard).
    match doc.get("campaign") {
        None | Some(serde_json::Value::Null) => {}
        Some(v) if v.as_str() == Some("seeds") => {}
        Some(v) if v.as_str() == Some("combined") => {
            return Err(UsageError(format!(
                "{}: at .campaign: a combined campaign's result (`fuzz --campaign combined`) is whole, not a shard; merge takes the shards of a seeds campaign",
                path.display()
            )));
        }
        Some(_) => return Err(bad("campaign", "\"seeds\" or absent")),
    }
    let num = |field: &str| doc.get(field).and_then(|v| v.as_u64());
    for field in ["runs", "events", "sim_ms", "wall_ms", "seeds_run"] {
        num(field).ok_or_else(|| bad(field, "a whole number"))?;
    }
    doc.get("scenario")
        .and_then(|v| v.as_str())
        .ok_or_else(|| bad("scenario", "a string"))?;
    let failures = doc
        .get("failures")
        .and_then(|v| v.as_array())
        .ok_or_else(|| bad("failures", "an array"))?;
    let seeds = doc
        .get("seeds")
        .and_then(|v| v.as_str())
        .ok_or_else(|| bad("seeds", "the campaign's seeds `A..B`"))?;
    let (start, end) = parse_seeds(seeds).map_err(|_| bad("seeds", "`A..B` with A < B"))?;
    let shard = match doc.get("shard") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(
            v.as_str()
                .and_then(|s| parse_shard(s).ok())
                .ok_or_else(|| bad("shard", "null or `I/N` with I < N"))?,
        ),
    };
    let campaign = Campaign::of_seeds(start, end, shard);
    let seeds_run = num("seeds_run").unwrap_or(0);
    // Failures past what a result lists are counted (0.6.0's results list them all).
    let unlisted = match doc.get("failures_unlisted") {
        None => 0,
        Some(v) => v
            .as_u64()
            .filter(|n| *n <= seeds_run.saturating_sub(failures.len() as u64))
            .ok_or_else(|| {
                bad(
                    "failures_unlisted",
                    "a whole number, at most the seeds that ran less the failures listed",
                )
            })?,
    };
    if seeds_run > campaign.len() || num("runs") != Some(seeds_run) {
        return Err(bad(
            "seeds_run",
            &format!(
                "the number of runs, at most the {} seeds of its campaign",
                campaign.len()
            ),
        ));
    }
    // A failure belongs to the seeds that ran, each seed once (a campaign runs a seed
    // once; a seed listed twice would be counted twice).
    let mut listed = std::collections::BTreeSet::new();
    for (i, f) in failures.iter().enumerate() {
        let seed = f.get("seed").and_then(|v| v.as_u64());
        if let Some(s) = seed
            && !listed.insert(s)
        {
            return Err(bad(
                &format!("failures[{i}].seed"),
                &format!("a seed listed once: {s} is listed before"),
            ));
        }
        let ran = seed.is_some_and(|s| {
            s >= start
                && s < end
                && shard.is_none_or(|(i, n)| s % n == i)
                && (seeds_run == campaign.len() || s < campaign.seed(seeds_run))
        });
        if !ran {
            return Err(bad(
                &format!("failures[{i}].seed"),
                "a seed its campaign ran",
            ));
        }
    }
    Ok(ShardResult {
        path: path.to_path_buf(),
        doc,
        campaign,
        seeds_run,
        unlisted,
    })
}

/// Combine shard results into the result of the whole campaign. Believes nothing it can
/// check: the results must be of one resolved scenario (its name and fingerprint), one
/// swarm setting and one reconsim version, and must cover
/// their seeds exactly once (no result given twice, no overlap, no missing shard, no
/// gap between ranges), or merge refuses them (exit 2). Results whose time budget ran
/// out merge too; `complete` is then false and `unrun_from` the smallest seed that did
/// not run, below which `first_failure_seed` is exact.
pub(super) fn merge(paths: &[PathBuf]) -> Result<ExitCode, UsageError> {
    let results: Vec<ShardResult> = paths
        .iter()
        .map(|p| read_result(p))
        .collect::<Result<_, _>>()?;
    let first = &results[0];
    for r in &results[1..] {
        for field in ["scenario", "swarm", "scenario_fingerprint", "version"] {
            // A result of 0.6.0 or older has no fingerprint and no version: it merges
            // only with results that have none either.
            let absent = if field == "swarm" {
                json!(false)
            } else {
                json!(null)
            };
            let (a, b) = (
                first.doc.get(field).cloned().unwrap_or(absent.clone()),
                r.doc.get(field).cloned().unwrap_or(absent),
            );
            if a != b {
                let why = match field {
                    "scenario_fingerprint" => {
                        ": it ran another scenario under the same name (another file, `extends` base or `--set`); the shards of one campaign run one resolved scenario"
                    }
                    "version" => ": results of different reconsim versions are different campaigns",
                    _ => "",
                };
                return Err(UsageError(format!(
                    "{}: at .{field}: expected {a} like {}, not {b}{why}",
                    r.path.display(),
                    first.path.display()
                )));
            }
        }
    }
    for (i, a) in results.iter().enumerate() {
        for b in &results[..i] {
            if same_file(&a.path, &b.path) {
                return Err(UsageError(format!(
                    "{}: given twice; each shard's result merges once",
                    a.path.display()
                )));
            }
        }
    }
    // Group by range: each range is one unsharded result, or every shard I/N of it once.
    let mut ranges: std::collections::BTreeMap<(u64, u64), Vec<&ShardResult>> = Default::default();
    for r in &results {
        ranges
            .entry((r.campaign.start, r.campaign.end))
            .or_default()
            .push(r);
    }
    for ((start, end), group) in &ranges {
        let n = group[0].campaign.shard.map_or(1, |(_, n)| n);
        let mut have: std::collections::BTreeMap<u64, &Path> = Default::default();
        for r in group {
            let (i, m) = r.campaign.shard.unwrap_or((0, 1));
            if m != n {
                return Err(UsageError(format!(
                    "{}: at .shard: seeds {start}..{end} are cut into {n} shards by {}, not {m}: they overlap",
                    r.path.display(),
                    group[0].path.display()
                )));
            }
            if let Some(other) = have.insert(i, &r.path) {
                return Err(UsageError(format!(
                    "{}: covers the same seeds as {} (seeds {start}..{end}{}): a shard merges once",
                    r.path.display(),
                    other.display(),
                    r.campaign
                        .shard
                        .map(|(i, n)| format!(", shard {i}/{n}"))
                        .unwrap_or_default()
                )));
            }
        }
        let missing: Vec<String> = (0..n)
            .filter(|i| !have.contains_key(i))
            .take(8)
            .map(|i| format!("{i}/{n}"))
            .collect();
        if !missing.is_empty() {
            return Err(UsageError(format!(
                "seeds {start}..{end}: missing the results of shard{} {}",
                if missing.len() > 1 { "s" } else { "" },
                missing.join(", ")
            )));
        }
    }
    let keys: Vec<(u64, u64)> = ranges.keys().copied().collect();
    for w in keys.windows(2) {
        let ((a0, a1), (b0, b1)) = (w[0], w[1]);
        let whose = |r: (u64, u64)| ranges[&r][0].path.display().to_string();
        if b0 < a1 {
            return Err(UsageError(format!(
                "{}: seeds {b0}..{b1} overlap seeds {a0}..{a1} of {}",
                whose(w[1]),
                whose(w[0])
            )));
        }
        if b0 > a1 {
            return Err(UsageError(format!(
                "seeds {a1}..{b0} are missing between {} and {}",
                whose(w[0]),
                whose(w[1])
            )));
        }
    }
    let sum = |field: &str| {
        results
            .iter()
            .map(|r| r.doc[field].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    let mut failures: Vec<serde_json::Value> = results
        .iter()
        .flat_map(|r| r.doc["failures"].as_array().into_iter().flatten().cloned())
        .collect();
    failures.sort_by_key(|f| f["seed"].as_u64().unwrap_or(u64::MAX));
    // Each result lists its smallest failing seeds. A result that counted more lists
    // every one of its failures up to its largest listed seed and none below it unlisted,
    // so the merged list is the smallest failing seeds of all up to the least such
    // seed; past it a smaller seed of that result may be missing, and those are counted
    // instead. Then it keeps as many as a result may list, and counts the rest.
    let seed_of = |f: &serde_json::Value| f["seed"].as_u64().unwrap_or(u64::MAX);
    let exact_to = results
        .iter()
        .filter(|r| r.unlisted > 0)
        .filter_map(|r| r.doc["failures"].as_array()?.iter().map(seed_of).max())
        .min()
        .unwrap_or(u64::MAX);
    let mut listing =
        crate::scenario::fuzz::Listing::new(crate::scenario::limits::RESULT_LISTED_BYTES_MAX);
    failures.retain(|f| seed_of(f) <= exact_to && listing.admit(f.to_string().len()));
    let total = results
        .iter()
        .map(|r| r.unlisted + r.doc["failures"].as_array().map_or(0, |a| a.len() as u64))
        .sum::<u64>();
    let unlisted = total - failures.len() as u64;
    let first_seed = failures.first().and_then(|f| f["seed"].as_u64());
    // The smallest seed some result did not run (its time budget ran out).
    let unrun_from = results
        .iter()
        .filter(|r| r.seeds_run < r.campaign.len())
        .map(|r| r.campaign.seed(r.seeds_run))
        .min();
    let first_file = first_seed.and_then(|seed| {
        results
            .iter()
            .find(|r| {
                r.doc["failures"]
                    .as_array()
                    .is_some_and(|fs| fs.iter().any(|f| f["seed"].as_u64() == Some(seed)))
            })
            .and_then(|r| r.doc.get("first_failure_file").cloned())
    });
    let save_errors: Vec<serde_json::Value> = results
        .iter()
        .flat_map(|r| {
            r.doc
                .get("save_errors")
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
                .cloned()
        })
        .collect();
    let (lo, hi) = (keys[0].0, keys[keys.len() - 1].1);
    let doc = json!({
        "scenario": first.doc["scenario"],
        "runs": sum("runs"),
        "failures": failures,
        "failures_unlisted": unlisted,
        "first_failure_seed": first_seed,
        "events": sum("events"),
        "sim_ms": sum("sim_ms"),
        "wall_ms": results.iter().map(|r| r.doc["wall_ms"].as_u64().unwrap_or(0)).max(),
        "seeds": format!("{lo}..{hi}"),
        "merged": results.len(),
        "swarm": first.doc.get("swarm").cloned().unwrap_or(json!(false)),
        "campaign": "seeds",
        "scenario_fingerprint": first.doc.get("scenario_fingerprint").cloned().unwrap_or(json!(null)),
        "version": first.doc.get("version").cloned().unwrap_or(json!(null)),
        "complete": unrun_from.is_none(),
        "unrun_from": unrun_from,
        "failures_saved": sum("failures_saved"),
        "first_failure_file": first_file,
        "save_errors": save_errors,
        "save_error_count": sum("save_error_count"),
    });
    println!("{doc}");
    Ok(if first_seed.is_none() && unlisted == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
