//! The shipped scenarios end to end: `lockbench chaos` on real processes must report the
//! verdicts the seeds' claims predict. Runs the scenarios whose timelines are deterministic
//! (fixed fault windows much longer than scheduling noise); `scripts/quickstart.sh` runs all.

mod common;

use std::path::Path;
use std::process::Command;

// 07a / 08 are left out: their overlap needs one client to win a retry race after a restart,
// which misses now and then on a loaded machine (see the issue notes); quickstart runs them.
const SCENARIOS: [&str; 5] = [
    "01-no-ttl-crash.toml",
    "04-expiry-shorter-than-work.toml",
    "06-redlock-minority-loss.toml",
    "07b-redlock-delayed-restart.toml",
    "09-redlock-process-pause.toml",
];

#[test]
fn shipped_scenarios_give_the_claimed_verdicts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("chaos");
    std::fs::create_dir(&dir).unwrap();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("chaos");
    for s in SCENARIOS {
        std::fs::copy(shipped.join(s), dir.join(s)).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_lockbench"))
        .arg("chaos")
        .arg(&dir)
        .arg("--results")
        .arg(tmp.path().join("results"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // 01: 2 expectations, 04: 2, 06: 1, 07b: 1, 09: 2.
    assert!(
        stdout.contains("5 scenario(s), 8 expectation(s) as claimed, 0 not, 0 scenario error(s)"),
        "{stdout}"
    );
    assert!(!stdout.contains("NOT AS CLAIMED"), "{stdout}");
    let batch = std::fs::canonicalize(tmp.path().join("results/latest")).unwrap();
    assert!(batch.join("comparison/comparison.html").exists());
    for s in SCENARIOS {
        let name = s.trim_end_matches(".toml");
        assert!(batch.join(name).join("report.html").exists(), "{name}");
        assert!(
            batch.join(name).join("nodes").is_dir(),
            "{name}: no node dirs"
        );
    }
    // Every redis-server the scenarios started (each runs a config file under the batch
    // directory) is gone.
    let survivors = common::process::pids_under(&batch);
    assert!(survivors.is_empty(), "still running: {survivors:?}");
}

#[test]
fn ctrl_c_heals_faults_stops_every_process_and_keeps_partial_results() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("chaos/04-expiry-shorter-than-work.toml");
    let mut child = Command::new(env!("CARGO_BIN_EXE_lockbench"))
        .arg("chaos")
        .arg(&scenario)
        .arg("--results")
        .arg(tmp.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait (bounded) until the first strategy has measured something and a fault is active.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let run = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no progress within 30 s"
        );
        let latest = tmp.path().join("latest");
        let ready = std::fs::read(latest.join("summary.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|s| s["strategies"][0]["acquired"].as_u64().unwrap_or(0) > 0)
            && std::fs::read_to_string(latest.join("single/history.jsonl"))
                .is_ok_and(|h| h.contains("\"type\":\"fault\""));
        if ready {
            break std::fs::canonicalize(latest).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(
        !common::process::pids_under(&run).is_empty(),
        "nodes are running"
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "did not exit within 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130));
    // Issue 14 item 4: partial data is shown, not judged against the claim.
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    assert!(stdout.contains("interrupted: not judged"), "{stdout}");
    assert!(!stdout.contains("NOT AS CLAIMED"), "{stdout}");
    assert!(stdout.contains(", 1 not judged (interrupted),"), "{stdout}");
    let s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["status"], "interrupted");
    assert!(s["strategies"][0]["acquired"].as_u64().unwrap() > 0);
    // Every fault window that was opened was closed (healed) in the history.
    let history = std::fs::read_to_string(run.join("single/history.jsonl")).unwrap();
    let faults: Vec<serde_json::Value> = history
        .lines()
        .filter(|l| l.contains("\"type\":\"fault\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!faults.is_empty());
    for f in faults.iter().filter(|f| f["end_us"].is_null()) {
        assert!(
            faults
                .iter()
                .any(|g| g["id"] == f["id"] && !g["end_us"].is_null()),
            "fault {} never healed",
            f["id"]
        );
    }
    let survivors = common::process::pids_under(&run);
    assert!(survivors.is_empty(), "still running: {survivors:?}");
}
