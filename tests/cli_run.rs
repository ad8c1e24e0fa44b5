//! `lockbench run` end to end: real binary, real redis-server processes, real result files.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::cli::{assert_refused, expect_code, lockbench, run_ok, summary, summary_so_far};
use common::process::{alive, assert_all_gone, signal, wait_exit};
use common::wait::wait_for;

/// Pids of the live redis-servers a run started (their config files are under `nodes/`).
fn node_pids(run: &Path) -> Vec<u32> {
    common::process::pids_under(&run.join("nodes"))
}

#[test]
fn short_run_writes_summary_hgrm_and_config_and_prints_table() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().to_str().unwrap();
    let stdout = run_ok(&[
        "run",
        "--topology",
        "five",
        "-s",
        "single,redlock",
        "-c",
        "4",
        "-r",
        "2",
        "--ops",
        "200",
        "--ttl",
        "2s",
        "--results",
        results,
    ]);
    assert!(
        stdout.contains("strategy") && stdout.contains("p99.9"),
        "{stdout}"
    );
    let s = summary(tmp.path());
    assert_eq!(s["status"], "completed");
    let strategies = s["strategies"].as_array().unwrap();
    assert_eq!(strategies.len(), 2);
    for st in strategies {
        // --ops bounds attempts: exactly 200 finished attempts, most of them acquired.
        assert_eq!(st["attempts"], 200, "{st}");
        assert!(st["acquired"].as_u64().unwrap() > 50, "{st}");
        assert_eq!(st["errors"], 0, "{st}");
        assert!(st["acquire_ok"]["p50_us"].as_u64().unwrap() > 0);
    }
    let run = common::cli::latest(tmp.path());
    for f in ["config.json", "single.hgrm", "redlock.hgrm"] {
        assert!(run.join(f).exists(), "{f} missing");
    }
    let hgrm = std::fs::read_to_string(run.join("redlock.hgrm")).unwrap();
    assert!(
        hgrm.contains("Percentile") && hgrm.contains("#[Max"),
        "{hgrm}"
    );
    assert!(run.join("nodes/n5").is_dir(), "five node dirs");
    let survivors = node_pids(&run);
    assert!(survivors.is_empty(), "still running: {survivors:?}");
}

#[test]
fn bad_input_is_rejected_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("r");
    let cases: [(&[&str], &str); 5] = [
        (&["-s", "single,paxos"], "paxos"),
        (&["--ttl", "10 parsecs"], "10 parsecs"),
        (&["--topology", "seven"], "seven"),
        (&["--topology", "external"], "--url"),
        (&["--clients", "0"], "--clients"),
    ];
    for (args, needle) in cases {
        assert_refused(&[&["run"], args].concat(), &results, needle);
    }
}

#[test]
fn unreachable_external_node_is_named_without_password() {
    let tmp = tempfile::tempdir().unwrap();
    let port = common::redis::free_port(); // bound then dropped: nothing listens there
    let out = lockbench()
        .args(["run", "--topology", "external", "--url"])
        .arg(format!("redis://alice:hunter2@127.0.0.1:{port}"))
        .arg("--results")
        .arg(tmp.path())
        .args(["--connect-timeout", "300ms", "-d", "1s"])
        .output()
        .unwrap();
    // Exit 4 (failed while running); nothing was measured, so nothing is left behind (no run
    // directory, no `latest`), and the password is never printed.
    let (stdout, err) = expect_code(&out, 4, "an unreachable external node");
    assert!(err.contains("n1") && err.contains("alice:***"), "{err}");
    assert!(!err.contains("hunter2"), "password leaked: {err}");
    assert!(!stdout.contains("hunter2"));
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "a failed start left {left:?}");
}

fn interrupted_run_keeps_partial_results(signal_number: libc::c_int, code: i32) {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = common::cli::spawn_in(
        [
            "run",
            "--topology",
            "five",
            "-s",
            "redlock",
            "-c",
            "4",
            "-d",
            "60s",
            "--no-progress",
        ],
        tmp.path(),
        Stdio::null(),
        Stdio::piped(),
    );
    // Wait until the run has measured something (summary rewritten with acquisitions).
    wait_for(
        Duration::from_secs(20),
        "a summary with acquisitions",
        || {
            let s = summary_so_far(tmp.path())?;
            (s["strategies"][0]["acquired"].as_u64()? > 0).then_some(())
        },
    );
    let run = common::cli::latest(tmp.path());
    let pids = node_pids(&run);
    assert_eq!(pids.len(), 5);
    assert!(pids.iter().all(|&p| alive(p)));
    signal(&child, signal_number);
    let status = wait_exit(&mut child, Duration::from_secs(15), "lockbench");
    assert_eq!(status.code(), Some(code));
    let s = summary(tmp.path());
    assert_eq!(s["status"], "interrupted");
    assert!(s["strategies"][0]["acquired"].as_u64().unwrap() > 0);
    assert!(run.join("redlock.hgrm").exists());
    assert_all_gone(&pids);
}

#[test]
fn sigint_keeps_partial_results_and_leaves_no_process() {
    interrupted_run_keeps_partial_results(libc::SIGINT, 130);
}

#[test]
fn sigterm_keeps_partial_results_and_leaves_no_process() {
    interrupted_run_keeps_partial_results(libc::SIGTERM, 143);
}

#[test]
fn relative_results_dir_works() {
    // redis-server runs inside its node directory: a relative --results must not be doubled.
    let tmp = tempfile::tempdir().unwrap();
    let out = lockbench()
        .current_dir(tmp.path())
        .args([
            "run",
            "-s",
            "single",
            "-c",
            "2",
            "--ops",
            "20",
            "--no-progress",
        ])
        .args(["--results", "rel/results"])
        .output()
        .unwrap();
    common::cli::expect_success(&out, "run with a relative --results");
    let s = summary(&tmp.path().join("rel/results"));
    assert_eq!(s["status"], "completed");
    assert_eq!(s["strategies"][0]["attempts"], 20);
}
