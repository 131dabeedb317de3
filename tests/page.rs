//! `explain --html` / `replay --html`: the failure's page, checked as written and as a
//! real browser draws it.
//!
//! The browser half runs headless Chromium (`/usr/bin/chromium`, or the one
//! `$RECONSIM_CHROMIUM` names): it loads a copy of the page with a probe script that
//! measures what was laid out (lane heads apart, labels clear of the lanes, the
//! violation last, the named objects in their own colour) and takes a screenshot. CI
//! installs Chromium and sets `RECONSIM_REQUIRE_BROWSER=1`, so there a missing browser
//! fails; elsewhere the browser half is skipped with a line saying so.
//! `RECONSIM_UPDATE_SCREENSHOT=1` copies the screenshot to docs/img/failure-page.png,
//! the one the README shows.

mod common;

use common::{BIN, root};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn scratch(tag: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("page-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A failure of the README's main scenario (seed 1, the duplicate controllers: its
/// first failing seed, 0, is the describe-lag race of one controller), saved,
/// explained, drawn.
fn page(dir: &Path) -> (String, Vec<String>) {
    let failure = dir.join("failure.json");
    let run = Command::new(BIN)
        .args(["run", "machineapi-no-leader-election", "--seed", "1"])
        .arg("--save-failure")
        .arg(&failure)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1), "{run:?}");
    let html = dir.join("page.html");
    let explain = Command::new(BIN)
        .arg("explain")
        .arg(&failure)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(explain.status.success(), "{explain:?}");
    let stderr = String::from_utf8_lossy(&explain.stderr);
    assert!(stderr.contains("wrote the failure's page to"), "{stderr}");
    let text = String::from_utf8(explain.stdout).unwrap();
    (
        std::fs::read_to_string(&html).unwrap(),
        text.lines().map(String::from).collect(),
    )
}

#[test]
fn the_page_draws_explains_story_and_fetches_nothing() {
    let dir = scratch("static");
    let (html, explain) = page(&dir);
    assert!(html.starts_with("<!DOCTYPE html>"));
    // Self-contained: no script, nothing loaded from anywhere.
    for outside in ["<script", "src=", "href=", "@import", "url(http"] {
        assert!(
            !html.contains(outside),
            "the page loads something: {outside}"
        );
    }
    // One arrow per request line of explain, one violation, every named object marked.
    // Seed 1's story has five: the pod's eviction, the scale-up, the replacement's two
    // creates and the old controller's one.
    let requests = explain.iter().filter(|l| l.contains(" -> ")).count();
    assert_eq!(requests, 5, "{explain:#?}");
    assert_eq!(html.matches("marker-end=").count(), requests);
    assert_eq!(html.matches(r#"<g class="violation">"#).count(), 1);
    for name in [
        "worker-us-west-2b-47f8n",
        "worker-us-west-2b-fvsk6",
        "worker-us-west-2b-qtl2w",
    ] {
        assert!(
            html.contains(&format!(
                r#"<tspan class="obj">openshift-machine-api/{name}</tspan>"#
            )),
            "{name} is not marked"
        );
    }
    // The requests left unanswered (the creates still in flight at the violation, one of
    // each controller) are drawn as such.
    assert_eq!(html.matches(r#"class="req unanswered""#).count(), 2);
    // Faults: a band each for the three that start before the violation (the plan's
    // fourth starts at 517.031 s, after it).
    assert_eq!(html.matches(r#"<rect class="band""#).count(), 3);
    // The same failure, the same bytes.
    // (Only the replay line differs: it names the file where it lies.)
    let again = scratch("static-again");
    assert_eq!(
        page(&again).0.replace("page-static-again", "page-static"),
        html
    );
    // replay --html writes the same page.
    let replayed = dir.join("replayed.html");
    let out = Command::new(BIN)
        .arg("replay")
        .arg(dir.join("failure.json"))
        .arg("--html")
        .arg(&replayed)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_to_string(&replayed).unwrap(), html);
    // An existing page is not replaced unasked.
    let out = Command::new(BIN)
        .arg("explain")
        .arg(dir.join("failure.json"))
        .arg("--html")
        .arg(&replayed)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--html: the file exists"));
}

#[test]
fn a_story_longer_than_the_cap_draws_its_end_and_says_what_it_left_out() {
    use reconsim::families::builtin;
    use reconsim::scenario::failure::FailureFile;
    use reconsim::scenario::{explain, library, page, runner};
    let (_, scenario) = library::load("machineapi-no-leader-election", &builtin()).unwrap();
    let (outcome, plan) = runner::run(&scenario, 0);
    let f = FailureFile::new(&scenario, &plan, &outcome).expect("the seed fails");
    let (e, world) = explain::explain_world(&f).expect("reproduces");
    let html = page::failure_page_capped(&world, &e, "t", "r", 10);
    let left_out = e.lines.len() - 10;
    assert!(
        html.contains(&format!(
            "{left_out} earlier lines not drawn: reconsim explain lists them all"
        )),
        "the cut is not reported"
    );
    assert_eq!(html.matches(r#"<text class="label""#).count(), 10 + 1);
    // The whole story is still in the page's text version.
    assert!(html.contains(&e.lines[0].replace('>', "&gt;")));
}

/// The probe: what the browser laid out, as JSON in `<pre id="probe">`.
const PROBE: &str = r#"<script>
(function () {
  const box = (e) => e.getBoundingClientRect();
  const heads = [...document.querySelectorAll('.lanehead')].map(box);
  let headsApart = true;
  for (let i = 1; i < heads.length; i++) {
    if (heads[i].left < heads[i - 1].right) headsApart = false;
  }
  const lanes = [...document.querySelectorAll('.lane line')].map(box);
  const lanesRight = Math.max(...lanes.map((b) => b.right));
  const labels = [...document.querySelectorAll('text.label')].map(box);
  const labelsLeft = Math.min(...labels.map((b) => b.left));
  const violation = box(document.querySelector('.violation .label'));
  const rowsAbove = labels.filter((b) => b.top < violation.top).length;
  const obj = document.querySelector('.obj');
  const plain = document.querySelector('text.label');
  const svg = box(document.querySelector('svg'));
  const out = {
    lanes: lanes.length,
    headsApart,
    labelsClearOfLanes: labelsLeft > lanesRight,
    labels: labels.length,
    violationLast: rowsAbove === labels.length - 1,
    objectColour: getComputedStyle(obj).fill,
    labelColour: getComputedStyle(plain).fill,
    arrows: document.querySelectorAll('line[marker-end]').length,
    svgWidth: svg.width,
    svgHeight: svg.height,
  };
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"#;

fn chromium() -> Option<PathBuf> {
    let named = std::env::var_os("RECONSIM_CHROMIUM").map(PathBuf::from);
    let found = named.or_else(|| {
        ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("RECONSIM_REQUIRE_BROWSER").is_none(),
            "RECONSIM_REQUIRE_BROWSER is set and no Chromium was found (install Debian's chromium, or name one in RECONSIM_CHROMIUM)"
        );
        eprintln!("no Chromium here: the page's browser test is skipped (CI runs it)");
    }
    found
}

/// Headless Chromium on `page` with `args`, as this machine's closed network needs it
/// (no background connections), in a profile of its own; its stdout.
fn headless(browser: &Path, profile: &Path, args: &[&str], page: &Path) -> String {
    let out = Command::new("timeout")
        .arg("120")
        .arg(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "chromium failed: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_real_browser_draws_the_page_as_meant() {
    let Some(browser) = chromium() else { return };
    let dir = scratch("browser");
    let (html, explain) = page(&dir);
    let probe = dir.join("probe.html");
    std::fs::write(&probe, html.replace("</body>", &format!("{PROBE}</body>"))).unwrap();
    let dom = headless(&browser, &dir.join("profile"), &["--dump-dom"], &probe);
    let json = dom
        .split_once(r#"<pre id="probe">"#)
        .and_then(|(_, rest)| rest.split_once("</pre>"))
        .map(|(j, _)| j.replace("&quot;", "\""))
        .unwrap_or_else(|| panic!("the probe did not run:\n{dom}"));
    let seen: Value = serde_json::from_str(&json).unwrap();
    let requests = explain.iter().filter(|l| l.contains(" -> ")).count() as u64;
    // The story's lines: `<time>s  <what>`.
    let rows = explain
        .iter()
        .filter(|l| {
            l.trim_start().split_once("  ").is_some_and(|(t, _)| {
                t.strip_suffix('s')
                    .is_some_and(|n| n.parse::<f64>().is_ok())
            })
        })
        .count() as u64;
    assert!(seen["lanes"].as_u64().unwrap() >= 4, "{seen}");
    assert_eq!(seen["headsApart"], true, "lane heads overlap: {seen}");
    assert_eq!(
        seen["labelsClearOfLanes"], true,
        "labels over the lanes: {seen}"
    );
    assert_eq!(seen["violationLast"], true, "{seen}");
    assert_eq!(seen["arrows"], requests, "{seen}");
    // A label per explain line, and the violation's.
    assert_eq!(seen["labels"].as_u64().unwrap(), rows + 1, "{seen}");
    assert_ne!(seen["objectColour"], seen["labelColour"], "{seen}");
    assert!(seen["svgWidth"].as_f64().unwrap() > 800.0, "{seen}");
    assert!(seen["svgHeight"].as_f64().unwrap() > 400.0, "{seen}");

    // The picture, as a reader's window shows the page's top.
    let shot = dir.join("page.png");
    headless(
        &browser,
        &dir.join("profile"),
        &[
            "--window-size=1600,900",
            &format!("--screenshot={}", shot.display()),
        ],
        &dir.join("page.html"),
    );
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    // 1600 x 900, from the IHDR chunk.
    let be = |i: usize| u32::from_be_bytes(png[i..i + 4].try_into().unwrap());
    assert_eq!((be(16), be(20)), (1600, 900));
    assert!(
        png.len() > 20_000,
        "a blank screenshot? {} bytes",
        png.len()
    );
    if std::env::var_os("RECONSIM_UPDATE_SCREENSHOT").is_some() {
        let to = root().join("docs/img/failure-page.png");
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&shot, &to).unwrap();
    }
}
