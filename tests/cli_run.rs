//! `lockbench run` end to end: real binary, real redis-server processes, real result files.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::process::{alive, assert_all_gone};

fn lockbench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockbench"))
}

fn run_ok(args: &[&str]) -> Output {
    let out = lockbench().args(args).output().expect("lockbench runs");
    assert!(
        out.status.success(),
        "lockbench {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("latest/summary.json")).unwrap()).unwrap()
}

/// Pids of the live redis-servers a run started (their config files are under `nodes/`).
fn node_pids(run: &Path) -> Vec<u32> {
    common::process::pids_under(&run.join("nodes"))
}

#[test]
fn short_run_writes_summary_hgrm_and_config_and_prints_table() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().to_str().unwrap();
    let out = run_ok(&[
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
    let stdout = String::from_utf8_lossy(&out.stdout);
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
    let run = std::fs::canonicalize(tmp.path().join("latest")).unwrap();
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
        let out = lockbench()
            .arg("run")
            .args(args)
            .arg("--results")
            .arg(&results)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(needle),
            "{args:?}: stderr does not name {needle:?}: {err}"
        );
        assert!(!results.exists(), "{args:?} created a results directory");
    }
}

#[test]
fn unreachable_external_node_is_named_without_password() {
    let tmp = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port(); // bound then dropped: nothing listens there
    let out = lockbench()
        .args(["run", "--topology", "external", "--url"])
        .arg(format!("redis://alice:hunter2@127.0.0.1:{port}"))
        .arg("--results")
        .arg(tmp.path())
        .args(["--connect-timeout", "300ms", "-d", "1s"])
        .output()
        .unwrap();
    // Exit 4 (failed while running); nothing was measured, so nothing is left behind (issue 14
    // item 9: no run directory, no `latest`), and the password is never printed.
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("n1") && err.contains("alice:***"), "{err}");
    assert!(!err.contains("hunter2"), "password leaked: {err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("hunter2"));
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "a failed start left {left:?}");
}

/// Polls `f` every 20 ms until it returns Some, or panics with `what` after `limit`.
fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn interrupted_run_keeps_partial_results(signal: libc::c_int, code: i32) {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = lockbench()
        .args([
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
        ])
        .arg("--results")
        .arg(tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let latest = tmp.path().join("latest");
    // Wait until the run has measured something (summary rewritten with acquisitions).
    wait_for(
        Duration::from_secs(20),
        "a summary with acquisitions",
        || {
            let text = std::fs::read(latest.join("summary.json")).ok()?;
            let s: serde_json::Value = serde_json::from_slice(&text).ok()?;
            (s["strategies"][0]["acquired"].as_u64()? > 0).then_some(())
        },
    );
    let run: PathBuf = std::fs::canonicalize(&latest).unwrap();
    let pids = node_pids(&run);
    assert_eq!(pids.len(), 5);
    assert!(pids.iter().all(|&p| alive(p)));
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    let status = wait_for(Duration::from_secs(15), "lockbench to exit", || {
        child.try_wait().unwrap()
    });
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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: serde_json::Value = serde_json::from_slice(
        &std::fs::read(tmp.path().join("rel/results/latest/summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(s["status"], "completed");
    assert_eq!(s["strategies"][0]["attempts"], 20);
}
