//! The shipped scenarios end to end: `lockbench chaos` on real processes must report the
//! verdicts the seeds' claims predict. Runs the scenarios whose timelines are deterministic
//! (fixed fault windows much longer than scheduling noise); `scripts/quickstart.sh` runs all.

mod common;

use std::path::Path;
use std::process::Command;

const SCENARIOS: [&str; 6] = [
    "01-no-ttl-crash.toml",
    "04-expiry-shorter-than-work.toml",
    "06-redlock-minority-loss.toml",
    "07a-redlock-restart-empty.toml",
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
    // 01: 2 expectations, 04: 2, 06: 1, 07a: 1, 07b: 1, 09: 2.
    assert!(
        stdout.contains("6 scenario(s), 9 expectation(s) as claimed, 0 not, 0 scenario error(s)"),
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
