//! Outputs onto special files (issue 31): every command that writes a file, pointed at
//! a FIFO, a directory, a symlink to nothing, symlinks to each, and (as root, where
//! mknod is allowed) character devices of its own, with and without `--force`, leaves
//! each special file as it was: a FIFO, directory or dangling symlink is refused
//! naming what it is (exit 2, never a hang), a character device is written in place
//! (never renamed over, never read), and a full one is an error, not a panic.
//!
//! Everything is made in a private folder under cargo's scratch directory: the
//! system's /dev is never touched.

mod common;

use common::BIN;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A folder of this test's own (`tag`: the tests of this file run side by side).
fn private_dir(tag: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("special-outputs-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn reconsim(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("timeout")
        .arg("120")
        .arg(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn outputs_onto_special_files_leave_them_as_they_were() {
    let dir = private_dir("each-command");
    let run = reconsim(
        &dir,
        &[
            "run",
            "machineapi-no-leader-election",
            "--seed",
            "0",
            "--save-failure",
            "f.json",
        ],
    );
    assert_eq!(run.status.code(), Some(1), "{run:?}");

    // The special files, all private.
    let mkfifo = Command::new("mkfifo")
        .arg(dir.join("fifo"))
        .status()
        .unwrap();
    assert!(mkfifo.success());
    std::fs::create_dir(dir.join("dir")).unwrap();
    std::os::unix::fs::symlink(dir.join("nothing-here"), dir.join("dangling")).unwrap();
    std::os::unix::fs::symlink(dir.join("fifo"), dir.join("to-fifo")).unwrap();
    std::os::unix::fs::symlink(dir.join("dir"), dir.join("to-dir")).unwrap();
    // Character devices of our own (null 1:3, zero 1:5, full 1:7), where root may.
    let mut devices = Vec::new();
    for (name, minor) in [("null", "3"), ("zero", "5"), ("full", "7")] {
        let made = Command::new("mknod")
            .arg(dir.join(name))
            .args(["c", "1", minor])
            .output();
        if made.is_ok_and(|o| o.status.success()) {
            std::os::unix::fs::symlink(dir.join(name), dir.join(format!("to-{name}"))).unwrap();
            devices.push(name);
        }
    }
    if devices.is_empty() {
        eprintln!("mknod is not allowed here: the character-device cases are skipped");
    }

    let refused = ["fifo", "dir", "dangling", "to-fifo", "to-dir"];
    let mut targets: Vec<String> = refused.iter().map(|s| s.to_string()).collect();
    for d in &devices {
        targets.push(d.to_string());
        targets.push(format!("to-{d}"));
    }
    let before: Vec<String> = targets
        .iter()
        .map(|t| common::file_identity(&dir.join(t)))
        .collect();
    let mut cases = 0;
    for (t, was) in targets.iter().zip(&before) {
        let commands: [Vec<&str>; 4] = [
            vec![
                "run",
                "machineapi-no-leader-election",
                "--seed",
                "0",
                "--save-failure",
                t,
            ],
            vec!["shrink", "f.json", "-o", t, "--max-runs", "3"],
            vec!["replay", "f.json", "--chrome-trace", t],
            vec!["explain", "f.json", "--html", t],
        ];
        for command in &commands {
            for force in [false, true] {
                let mut args = command.clone();
                if force {
                    args.push("--force");
                }
                let out = reconsim(&dir, &args);
                let stderr = String::from_utf8_lossy(&out.stderr);
                let code = out.status.code();
                cases += 1;
                assert!(
                    matches!(code, Some(0..=2)),
                    "`reconsim {}` exited {code:?} (124: it hung): {stderr}",
                    args.join(" ")
                );
                assert!(!stderr.contains("panicked"), "{stderr}");
                assert_eq!(
                    &common::file_identity(&dir.join(t)),
                    was,
                    "`reconsim {}` changed {t}",
                    args.join(" ")
                );
                let base = t.trim_start_matches("to-");
                if refused.contains(&t.as_str()) {
                    assert_eq!(code, Some(2), "`reconsim {}`: {stderr}", args.join(" "));
                    let what = match base {
                        "fifo" => "it is a FIFO",
                        "dir" => "it is a directory",
                        _ => "it is a dangling symlink",
                    };
                    assert!(
                        stderr.contains(what),
                        "`reconsim {}`: {stderr}",
                        args.join(" ")
                    );
                } else if base == "full" {
                    // Written in place, and the device says it is full.
                    assert_eq!(code, Some(2), "`reconsim {}`: {stderr}", args.join(" "));
                    assert!(stderr.contains("cannot write"), "{stderr}");
                } else {
                    // null and zero take the bytes: the command does its job.
                    assert!(
                        matches!(code, Some(0 | 1)),
                        "`reconsim {}`: {stderr}",
                        args.join(" ")
                    );
                }
            }
        }
    }
    assert!(cases >= 40, "{cases} cases");
    // No temporary file was left beside the outputs.
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_fifo_where_a_campaign_saves_is_never_opened_and_the_failure_goes_beside_it() {
    // Reading it to compare would wait for a writer forever; it holds no failure of
    // ours, so the failure takes the name beside it, as for any other occupant.
    let dir = private_dir("campaign");
    std::fs::create_dir_all(dir.join("fails")).unwrap();
    let fifo = dir.join("fails/machineapi-no-leader-election-seed-0.json");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let out = reconsim(
        &dir,
        &[
            "fuzz",
            "machineapi-no-leader-election",
            "--seeds",
            "0..1",
            "--failures-dir",
            "fails",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(common::file_identity(&fifo), "fifo");
    let saved: Vec<String> = std::fs::read_dir(dir.join("fails"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("machineapi-no-leader-election-seed-0-"))
        .collect();
    assert_eq!(saved.len(), 1, "{saved:?}\n{stdout}");
    assert!(stdout.contains(&saved[0]), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}
