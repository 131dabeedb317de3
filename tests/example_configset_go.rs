//! The Go ConfigSet example (examples/configset-go): a controller-runtime manager as
//! kubebuilder scaffolds it, built for wasip1 and named by a scenario file that the
//! `reconsim` binary runs with no Rust of the user's (issue 58, docs/guide/real-go-code.md):
//! - the buggy variant (its reconcile counts ConfigMaps from the informer cache) is
//!   caught, and the fixed one (a consistent read through the API reader) holds over
//!   its whole budget of 1,000 seeds;
//! - determinism: every seed run twice gives one trace hash;
//! - the CLI explains a failure with the program's requests and its log lines, and
//!   replays it.
//!
//! Go 1.26 must be installed: loading the scenario builds the program.

mod common;

use common::{campaign, jobs, root, twice_each};
use reconsim::scenario::{Expect, Scenario};
use std::path::PathBuf;
use std::process::Command;

fn path(name: &str) -> PathBuf {
    root()
        .join("examples/configset-go/testdata")
        .join(format!("{name}.json"))
}

fn scenario(name: &str) -> Scenario {
    Scenario::load(&path(name), &reconsim::families::builtin())
        .unwrap_or_else(|e| panic!("the example's scenario loads (Go 1.26 builds it): {e}"))
}

#[test]
fn a_fuzz_campaign_catches_the_go_controller_that_counts_from_its_cache() {
    let s = scenario("configset-go-buggy");
    assert_eq!(s.expect, Expect::Violation);
    let report = campaign(&s, 40, jobs(), false);
    let first = report
        .failures
        .first()
        .expect("a violation within 40 seeds");
    assert_eq!(first.invariant, "configset_max_configmaps");
    // The figures docs/guide/real-go-code.md shows: the first seed fails, and all 40.
    assert_eq!(report.first_failure_seed, Some(0));
    assert_eq!(report.failures.len(), 40);
    assert!(
        twice_each(&s, 0..8).len() == 8,
        "each seed fails the same way twice"
    );
}

#[test]
fn the_go_controller_that_reads_the_api_server_holds_and_runs_the_same_twice() {
    // Its whole budget, 1,000 runs of random seeds, swarm seeds and search plans, is
    // `reconsim check`'s in the example's own `go test`
    // (go_test_passes_on_the_fix_and_fails_naming_the_buggy_variant); here the first
    // 200 seeds, and the self-check: the same trace hash twice, seed by seed.
    let s = scenario("configset-go-fixed");
    assert_eq!((s.expect, s.seeds), (Expect::Clean, 1000));
    let report = campaign(&s, 200, jobs(), true);
    assert!(report.failures.is_empty(), "{:?}", report.failures.first());
    assert!(twice_each(&s, 0..16).is_empty());
}

#[test]
fn the_cli_explains_a_go_failure_with_its_requests_and_log_lines() {
    let dir = common::scratch("configset-go");
    let exe = env!("CARGO_BIN_EXE_reconsim");
    let out = Command::new(exe)
        .args(["fuzz", &path("configset-go-buggy").to_string_lossy()])
        .args(["--seeds", "0..1", "--failures-dir"])
        .arg(&dir)
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let failure = dir.join("configset-go-buggy-seed-0.json");
    let explained = Command::new(exe)
        .arg("explain")
        .arg(&failure)
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&explained.stdout);
    assert!(
        text.contains(
            "configset-controller-0@master-0: POST /api/v1/namespaces/default/configmaps: web-*"
        ),
        "{text}"
    );
    assert!(
        text.contains("go stderr: ") && text.contains("\"configmap\": \"web-"),
        "{text}"
    );
    let replayed = Command::new(exe)
        .arg("replay")
        .arg(&failure)
        .output()
        .expect("runs");
    assert_eq!(replayed.status.code(), Some(0), "0: reproduced");
    assert!(String::from_utf8_lossy(&replayed.stdout).starts_with("reproduced: "));
    // The failure file names the program by its hash, and a changed one is refused.
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&failure).unwrap()).unwrap();
    let entry = &saved["scenario"]["controllers"]["go"][0];
    assert_eq!(entry["sha256"].as_str().map(str::len), Some(64), "{entry}");
    let mut tampered = saved.clone();
    tampered["scenario"]["controllers"]["go"][0]["sha256"] = "0".repeat(64).into();
    let other = dir.join("tampered.json");
    std::fs::write(&other, tampered.to_string()).unwrap();
    let refused = Command::new(exe)
        .arg("replay")
        .arg(&other)
        .output()
        .expect("runs");
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("is not the one this file names"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

/// `go test` in the example, as its authors run it: the Go package reconsimtest
/// holds its scenarios to their expectations through the reconsim binary.
fn go_test(reads: Option<&str>) -> std::process::Output {
    let dir = common::scratch("configset-go-test");
    let mut cmd = Command::new("go");
    cmd.current_dir(root().join("examples/configset-go"))
        .args(["test", "-count=1", "-v", "./internal/controller/"])
        .env("RECONSIM", env!("CARGO_BIN_EXE_reconsim"))
        .env("RECONSIM_FAILURES_DIR", &dir);
    if let Some(r) = reads {
        cmd.env("CONFIGSET_READS", r);
    }
    cmd.output().expect("go runs (Go 1.26 is needed)")
}

#[test]
fn go_test_passes_on_the_fix_and_fails_naming_the_buggy_variant() {
    // `go test -v`: the package logs each scenario's verdict.
    let out = go_test(None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("configset-go-fixed holds: expect clean, 1000 runs")
            && text.contains("configset-go-buggy holds: expect violation"),
        "{text}"
    );
    let out = go_test(Some("cache"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains(
            "configset-go-fixed: expected clean, but configset_max_configmaps is violated; replay: "
        ),
        "{text}"
    );
    // The replay command it prints reproduces the failure.
    let replay = text
        .lines()
        .find_map(|l| l.split("; replay: ").nth(1))
        .expect("a replay command");
    let words: Vec<&str> = replay.split_whitespace().collect();
    let again = Command::new(words[0])
        .args(&words[1..])
        .output()
        .expect("runs");
    assert_eq!(again.status.code(), Some(0), "0: reproduced");
    assert!(String::from_utf8_lossy(&again.stdout).starts_with("reproduced: "));
}

/// The commands docs/guide/real-go-code.md prints, run as printed.
const GUIDE: [&str; 3] = [
    "reconsim fuzz examples/configset-go/testdata/configset-go-buggy.json --seeds 0..40 --failures-dir failures",
    "reconsim explain failures/configset-go-buggy-seed-0.json",
    "reconsim search examples/configset-go/testdata/configset-go-leader-buggy.json --stop-on-first",
];

#[test]
fn the_guide_s_commands_run_as_printed() {
    let guide = std::fs::read_to_string(root().join("docs/guide/real-go-code.md")).unwrap();
    // A scratch folder that sees the repository's examples, so `failures/` lands there.
    let dir = common::scratch("configset-go-guide");
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("examples");
    if !link.exists() {
        std::os::unix::fs::symlink(root().join("examples"), &link).unwrap();
    }
    let mut outputs = Vec::new();
    for (cmd, code) in GUIDE.iter().zip([1, 0, 1]) {
        assert!(guide.contains(cmd), "the guide prints `{cmd}`");
        let words: Vec<&str> = cmd.split_whitespace().collect();
        let out = Command::new(env!("CARGO_BIN_EXE_reconsim"))
            .current_dir(&dir)
            .args(&words[1..])
            .output()
            .expect("runs");
        assert_eq!(
            out.status.code(),
            Some(code),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        outputs.push(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    assert!(outputs[0].contains("40 failing"), "{}", outputs[0]);
    let found = "first failure after 4 runs (seed 0): plan #2: scenario:1: partition master-1 | api (messages dropped) for 53248 ms before write of configset-controller-1 #9 (at 60040 ms: create ConfigMap default/web-*) -> configset_max_configmaps at 113288 ms; ";
    assert!(
        guide.contains(found) && outputs[2].contains(found),
        "{}",
        outputs[2]
    );
    // The lines the guide quotes of the story, as explain tells it.
    for line in [
        "configset-go-buggy seed 0: configset_max_configmaps at t=0.338s",
        "0.334s  configset-controller-0@master-0: POST /api/v1/namespaces/default/configmaps: web-*",
        "0.338s  api server: stored ConfigMap default/web-gqsj7 rv 14",
    ] {
        assert!(
            guide.contains(line) && outputs[1].contains(line),
            "{line}\n{}",
            outputs[1]
        );
    }
}

/// `reconsim run` of the fixed scenario at seed 0 with `sets` (`--set`), its timeline.
fn timeline(sets: &[&str]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_reconsim"));
    cmd.arg("run").arg(path("configset-go-fixed")).args([
        "--seed",
        "0",
        "--timeline",
        "--set",
        "workload=[]",
        "--set",
        "convergence=null",
    ]);
    for s in sets {
        cmd.args(["--set", s]);
    }
    let out = cmd.output().expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_go_program_that_exits_is_restarted_by_its_kubelet_with_its_backoff() {
    let text = timeline(&[
        r#"controllers.go[0].args=["--configmap-reads=bogus"]"#,
        "faults=[]",
        "duration_ms=40000",
    ]);
    // The container exits with the status the program passed to os.Exit, and the
    // kubelet starts it again after CrashLoopBackOff's 10 s, then 20 s more.
    for (at, pod) in [
        ("0.014s", "configset-controller-0"),
        ("10.022s", "configset-controller-0#1"),
        ("30.028s", "configset-controller-0#2"),
    ] {
        for line in [
            format!(
                "{at}  {pod}@master-0: go stderr: --configmap-reads: cache or api-server, not \"bogus\""
            ),
            format!("{at}  {pod}@master-0: go program: exit status 2; its container exits"),
        ] {
            assert!(text.contains(&line), "{line}\n{text}");
        }
    }
}

#[test]
fn a_partition_breaks_the_go_program_s_watches_and_client_go_watches_again() {
    let partition = r#"faults=[{"count":[1,1],"at_ms":[5000,5000],"duration_ms":[1000000,1000000],"fault":{"partition":{"hosts_a":["master-0"],"hosts_b":["api"],"mode":"drop"}}}]"#;
    let text = timeline(&[partition, "duration_ms=1100000"]);
    let watches = |t: &str| {
        t.lines()
            .filter(|l| {
                l.contains("configset-controller-0@master-0: GET /api/v1/configmaps?")
                    && l.contains("watch=true")
            })
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let all = watches(&text);
    // One watch at the start; TCP gives up on it under the partition (924.6 s after
    // its last unacknowledged bytes), client-go's reflector reads the reset and
    // watches again from the resourceVersion it had.
    assert!(
        text.contains("Warning: watch ended with error")
            && text.contains("Connection reset by peer"),
        "{text}"
    );
    assert_eq!(all.len(), 2, "{all:#?}");
    assert!(!all[0].contains("resourceVersion="), "{}", all[0]);
    assert!(all[1].contains("&resourceVersion="), "{}", all[1]);
    // While cut off, each reconcile's list goes on a new connection, which fails 30 s
    // later (the dial's timeout), and the work queue retries (every 31 s at first,
    // then later as its per-item backoff doubles).
    let cut_off = text
        .lines()
        .filter(|l| l.contains("configset-controller-0@master-0: GET /api/v1/namespaces/default/configmaps?labelSelector=configset.example.reconsim.dev/name=db"))
        .filter_map(|l| l.trim_start().split('s').next()?.parse::<f64>().ok())
        .filter(|t| (100.0..900.0).contains(t))
        .count();
    assert!(cut_off >= 10, "{cut_off} lists while cut off\n{text}");
    assert!(
        text.contains(r#"configmaps?labelSelector=configset.example.reconsim.dev%2Fname%3Ddb\": read tcp :0->:0: fd_read: Connection reset by peer"#),
        "{text}"
    );
}

/// `reconsim check --json FILE`: its one scenario's verdict.
fn check_json(name: &str) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_reconsim"))
        .args(["check", "--json"])
        .arg(path(name))
        .output()
        .expect("runs");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    v["scenarios"][0].clone()
}

#[test]
fn a_deposed_go_leader_s_late_create_is_caught_and_indexed_names_hold() {
    // Two replicas with controller-runtime's leader election: search puts a partition
    // of the leader's node right before its create (plan #2 of reference seed 0); the
    // leader stops leading at its renew deadline, the other takes the Lease and makes
    // the ConfigMap, and the old leader's create lands when the link heals.
    let buggy = check_json("configset-go-leader-buggy");
    assert_eq!(buggy["holds"], true, "{buggy}");
    assert_eq!(buggy["invariant"], "configset_max_configmaps");
    assert_eq!(buggy["first_failure"]["arm"], "search", "{buggy}");
    assert_eq!(buggy["first_failure"]["plan"], 2, "{buggy}");
    // Naming ConfigMaps <set>-<i>: the late create is refused (AlreadyExists).
    let fixed = check_json("configset-go-leader-fixed");
    assert_eq!(fixed["holds"], true, "{fixed}");
    assert_eq!(fixed["runs"], 200, "{fixed}");
}

#[test]
fn a_go_entry_s_bad_inputs_are_refused_by_field_and_a_fifo_never_hangs() {
    let dir = common::scratch("configset-go-hostile");
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo.yaml");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let fixed = path("configset-go-fixed").to_string_lossy().into_owned();
    for (set, at, says) in [
        (
            format!("controllers.go[0].manifests=[{:?}]", fifo.to_string_lossy()),
            ".controllers.go[0].manifests[0]",
            "not a regular file or a folder of them",
        ),
        (
            format!("controllers.go[0].program={}", fifo.to_string_lossy()),
            ".controllers.go[0].program",
            "not a regular file",
        ),
        (
            "controllers.go[0].program=configset-go-fixed.json".to_string(),
            ".controllers.go[0].program",
            "not a WebAssembly module",
        ),
        (
            "controllers.go[0].invariants[0].at_most_replicas.replicas=self.spec.(".to_string(),
            ".controllers.go[0].invariants[0].at_most_replicas.replicas",
            "not CEL",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_reconsim"))
            .args(["run", &fixed, "--seed", "0", "--set", &set])
            .output()
            .expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{set}: {err}");
        assert!(
            err.contains(&format!("at {at}: ")) && err.contains(says),
            "{set}: {err}"
        );
    }
}

/// `reconsim help build`'s examples: one command from a kubebuilder `cmd/` to the
/// program a scenario names.
const BUILD_HELP: [&str; 2] = [
    "reconsim build examples/configset-go/cmd -o out/configset-go.wasm --force",
    "reconsim build examples/configset-go/cmd -o out/configset-go.wasm --force --json",
];

#[test]
fn reconsim_build_makes_the_program_a_scenario_names_and_refuses_what_it_cannot_write() {
    use std::os::unix::fs::FileTypeExt;
    let dir = common::scratch("configset-go-build");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(root().join("examples"), dir.join("examples")).unwrap();
    let reconsim = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_reconsim"))
            .current_dir(&dir)
            .args(args)
            .output()
            .expect("runs")
    };
    let help = String::from_utf8(reconsim(&["help", "build"]).stdout).unwrap();
    let mut json = None;
    for cmd in BUILD_HELP {
        assert!(help.contains(cmd), "`reconsim help build` prints `{cmd}`");
        let words: Vec<&str> = cmd.split_whitespace().collect();
        let out = reconsim(&words[1..]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        json = serde_json::from_slice::<serde_json::Value>(&out.stdout).ok();
    }
    let json = json.expect("--json prints one document");
    let wasm = dir.join("out/configset-go.wasm");
    let bytes = std::fs::read(&wasm).unwrap();
    assert!(bytes.starts_with(b"\0asm"));
    assert_eq!(json["bytes"], bytes.len() as u64);
    let sha = json["sha256"].as_str().unwrap().to_string();
    assert_eq!(sha.len(), 64);

    // The scenario names the built program instead of the folder, and runs the same.
    let built = variant(&dir, "configset-go-fixed", |doc| {
        doc["controllers"]["go"][0]["program"] = wasm.display().to_string().into();
    });
    let run = |scenario: &str| {
        let out = reconsim(&["run", scenario, "--seed", "3", "--json"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["trace_hash"].clone()
    };
    assert_eq!(
        run(built.to_str().unwrap()),
        run(path("configset-go-fixed").to_str().unwrap()),
        "the built program runs as the folder does"
    );

    // Refusals, each by its field, exit 2, nothing written.
    let refused = |args: &[&str], says: &str| {
        let out = reconsim(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    };
    refused(
        &[
            "build",
            "examples/configset-go/cmd",
            "-o",
            "out/configset-go.wasm",
        ],
        "--output: the file exists",
    );
    let fifo = dir.join("fifo.wasm");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    refused(
        &[
            "build",
            "examples/configset-go/cmd",
            "-o",
            "fifo.wasm",
            "--force",
        ],
        "fifo.wasm: --output: it is a FIFO",
    );
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    refused(
        &["build", "examples/configset-go/api/v1", "-o", "lib.wasm"],
        "is package v1, not a main package",
    );
    refused(&["build", "no-such-folder"], "PACKAGE: expected a folder");
    assert!(!dir.join("lib.wasm").exists());
    assert_eq!(
        std::fs::read(&wasm).unwrap(),
        bytes,
        "the refusals left the program as it was"
    );
}

/// A rule across kinds (`over`): the ConfigMaps a ConfigSet owns, counted by CEL over
/// two lists of objects.
const OWNED: &str = "size(maps.filter(m, has(m.metadata.ownerReferences) && m.metadata.ownerReferences.exists(o, o.uid == s.metadata.uid)))";

/// `name`'s scenario with its paths made absolute and `edit` applied, written into the
/// scratch folder `dir`.
fn variant(dir: &std::path::Path, name: &str, edit: impl Fn(&mut serde_json::Value)) -> PathBuf {
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path(name)).unwrap()).unwrap();
    let folder = root().join("examples/configset-go/testdata");
    let entry = &mut doc["controllers"]["go"][0];
    let program = folder.join(entry["program"].as_str().unwrap());
    entry["program"] = program.display().to_string().into();
    for key in ["crds", "manifests"] {
        for p in entry[key].as_array_mut().unwrap() {
            *p = folder
                .join(p.as_str().unwrap())
                .display()
                .to_string()
                .into();
        }
    }
    edit(&mut doc);
    let out = dir.join(format!("{name}-variant.json"));
    std::fs::write(&out, doc.to_string()).unwrap();
    out
}

#[test]
fn a_rule_over_two_kinds_catches_the_bug_and_judges_the_fix_s_end_state() {
    let dir = common::scratch("configset-go-over");
    std::fs::create_dir_all(&dir).unwrap();
    let lists = serde_json::json!({
        "sets": {"apiVersion": "example.reconsim.dev/v1", "kind": "ConfigSet"},
        "maps": {"apiVersion": "v1", "kind": "ConfigMap"}
    });
    let run = |scenario: &PathBuf| {
        let out = Command::new(env!("CARGO_BIN_EXE_reconsim"))
            .args(["run", scenario.to_str().unwrap(), "--seed", "0", "--json"])
            .output()
            .expect("runs");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), v)
    };
    // The buggy controller: a third ConfigMap for a set of two, at the same moment as
    // the at_most_replicas invariant sees it (0.338 s).
    let buggy = variant(&dir, "configset-go-buggy", |doc| {
        doc["controllers"]["go"][0]["invariants"] = serde_json::json!([{
            "name": "configset_owned_within_replicas",
            "over": lists,
            "rule": format!("sets.all(s, {OWNED} <= s.spec.replicas)"),
        }]);
        doc["invariants"] = serde_json::json!(["configset_owned_within_replicas"]);
    });
    let (code, v) = run(&buggy);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(v["invariant"], "configset_owned_within_replicas", "{v}");
    assert_eq!(v["time_ms"], 338, "{v}");
    // The fixed one: once faults heal, each set owns exactly its replicas; and a
    // desired state that never holds, to show the end state is judged.
    for (wanted, code) in [("s.spec.replicas", 0), ("s.spec.replicas + 1", 1)] {
        let fixed = variant(&dir, "configset-go-fixed", |doc| {
            doc["controllers"]["go"][0]["converged"] = serde_json::json!([{
                "over": lists,
                "rule": format!("sets.all(s, {OWNED} == {wanted})"),
            }]);
        });
        let (got, v) = run(&fixed);
        assert_eq!(got, Some(code), "{wanted}: {v}");
    }
    // A list's name must be one CEL can use.
    let bad = variant(&dir, "configset-go-fixed", |doc| {
        doc["controllers"]["go"][0]["converged"] = serde_json::json!([{
            "over": {"self": {"apiVersion": "v1", "kind": "ConfigMap"}},
            "rule": "true",
        }]);
    });
    let out = Command::new(env!("CARGO_BIN_EXE_reconsim"))
        .args(["run", bad.to_str().unwrap(), "--seed", "0"])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("at .controllers.go[0].converged[0].over.self: ")
            && err.contains("a CEL identifier"),
        "{err}"
    );
}

#[test]
fn a_deleted_pod_s_go_manager_gets_sigterm_and_shuts_down_gracefully() {
    // The pod is deleted at 100 s: its kubelet sends SIGTERM, reconsim's overlay hands
    // it to os/signal, controller-runtime's SetupSignalHandler cancels the manager's
    // context, and the manager stops its controllers and returns; the container exits
    // with status 0 and the Deployment's replacement starts.
    let delete = r#"workload=[{"at_ms":100000,"action":{"go":{"controller":"configset-controller","delete":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"configset-controller-0","namespace":"default"}}}}}]"#;
    let text = timeline(&[delete, "faults=[]", "duration_ms=110000"]);
    let at = |line: &str| {
        text.lines()
            .position(|l| l.contains(line))
            .unwrap_or_else(|| panic!("{line}\n{text}"))
    };
    let order = [
        "kubelet: SIGTERM to the container of pod default/configset-controller-0",
        "configset-controller-0@master-0: go program: SIGTERM delivered to it",
        "configset-controller-0@master-0: go stderr: 2026-01-01T00:01:40Z\tINFO\tShutdown signal received, waiting for all workers to finish",
        "configset-controller-0@master-0: go stderr: 2026-01-01T00:01:40Z\tINFO\tWait completed, proceeding to shutdown the manager",
        "configset-controller-0@master-0: go program: exit status 0; its container exits",
        "kubelet: confirming deletion of pod default/configset-controller-0",
    ];
    let places: Vec<usize> = order.iter().map(|l| at(l)).collect();
    assert!(places.windows(2).all(|w| w[0] < w[1]), "{places:?}\n{text}");
    assert!(!text.contains("SIGTERM: exiting"), "{text}");
    assert!(!text.contains("grace period over"), "{text}");
}
