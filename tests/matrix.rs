//! `lockbench matrix` end to end on real redis-server processes: a tiny matrix (a negative
//! control and `redlock-fenced` × `none`, `client-pause`, `clock-jump` × 2 trials, 3.5 s
//! trials) must fill every cell with figures equal to the trials' own `summary.json` /
//! `checker.json`; and a Ctrl-C keeps the finished cells and leaves no process behind.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn read(p: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn latest(results: &Path) -> PathBuf {
    std::fs::canonicalize(results.join("latest")).unwrap()
}

#[test]
fn a_tiny_matrix_fills_every_cell_with_the_trials_own_figures() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    // A page to link (as the quick start links the claims' comparison report).
    let claims = tmp.path().join("claims/comparison/comparison.html");
    std::fs::create_dir_all(claims.parent().unwrap()).unwrap();
    std::fs::write(&claims, "<html></html>").unwrap();
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_lockbench"))
        .args([
            "matrix",
            "--strategies",
            "naive-del,redlock-fenced",
            "--faults",
            "none,client-pause,clock-jump",
            "--trials",
            "2",
            "--trial-duration",
            "3500ms",
            "--fault-at",
            "500ms",
            "--no-progress",
            "--results",
        ])
        .arg(&results)
        .arg("--link-report")
        .arg(&claims)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    eprintln!("tiny matrix took {:?}\n{stdout}", started.elapsed());
    let dir = latest(&results);
    assert!(dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .ends_with("-matrix"));
    for f in ["matrix.json", "matrix.csv", "matrix.md", "matrix.html"] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let m = read(&dir.join("matrix.json"));
    assert_eq!(m["status"], "completed");
    assert_eq!(
        m["linked_report"],
        "../../claims/comparison/comparison.html"
    );
    let html = std::fs::read_to_string(dir.join("matrix.html")).unwrap();
    assert!(html.contains("href=\"../../claims/comparison/comparison.html\""));
    let cells = m["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 6);
    for c in cells {
        let name = format!("{} × {}", c["strategy"], c["fault"]);
        assert_eq!(c["trials_checked"], 2, "{name}: {c}");
        assert_ne!(c["verdict"], "not-run", "{name}");
        let trials = c["trials"].as_array().unwrap();
        assert_eq!(trials.len(), 2, "{name}");
        let (mut invalid, mut sections, mut p99_max, mut accepted) = (0u64, 0u64, 0u64, 0u64);
        for t in trials {
            let tdir = dir.join(t["dir"].as_str().unwrap());
            let summary = read(&tdir.join("summary.json"));
            assert_eq!(summary["status"], "completed", "{name}");
            let s = &summary["strategies"][0];
            assert_eq!(s["strategy"], c["strategy"]);
            let checker = &read(&tdir.join("checker.json"))[c["strategy"].as_str().unwrap()];
            // Every figure of the trial record is the trial's own.
            assert_eq!(t["verdict"], checker["verdict"], "{name}");
            assert_eq!(t["verdict"], s["check"]["verdict"], "{name}");
            assert_eq!(t["sections"], checker["stats"]["sections"], "{name}");
            assert_eq!(t["acquired"], s["acquired"], "{name}");
            assert_eq!(t["errors"], s["errors"], "{name}");
            assert_eq!(t["acquire_p50_us"], s["acquire_ok"]["p50_us"], "{name}");
            assert_eq!(t["acquire_p99_us"], s["acquire_ok"]["p99_us"], "{name}");
            assert_eq!(t["throughput_ops_s"], s["throughput_ops_s"], "{name}");
            assert_eq!(t["anomaly_counts"], s["check"]["anomaly_counts"], "{name}");
            assert!(
                t["sections"].as_u64().unwrap() > 0,
                "{name}: no critical section ran"
            );
            invalid += u64::from(checker["verdict"] == "invalid");
            sections += checker["stats"]["sections"].as_u64().unwrap();
            p99_max = p99_max.max(s["acquire_ok"]["p99_us"].as_u64().unwrap());
            accepted += checker["stats"]["stale_writes_accepted"].as_u64().unwrap();
        }
        // The cell adds them up.
        assert_eq!(c["invalid"].as_u64().unwrap(), invalid, "{name}");
        assert_eq!(c["sections"].as_u64().unwrap(), sections, "{name}");
        assert_eq!(c["acquire_p99_us"].as_u64().unwrap(), p99_max, "{name}");
        assert_eq!(
            c["stale_writes_accepted"].as_u64().unwrap(),
            accepted,
            "{name}"
        );
        assert_eq!(c["invalid_share"]["n"], 2, "{name}");
    }
    let cell = |s: &str, f: &str| {
        cells
            .iter()
            .find(|c| c["strategy"] == s && c["fault"] == f)
            .unwrap()
    };
    // The control breaks under a client pause longer than the TTL.
    let control = cell("naive-del", "client-pause");
    assert!(control["invalid"].as_u64().unwrap() >= 1, "{control}");
    assert!(
        control["anomalies"]["mutex-violation"]["count"]
            .as_u64()
            .unwrap()
            > 0
    );
    // Fencing never lets a stale write through.
    for f in ["none", "client-pause", "clock-jump"] {
        assert_eq!(cell("redlock-fenced", f)["stale_writes_accepted"], 0, "{f}");
    }
    // The decision table cites cells; the correctness answer never names the control.
    let correctness = &m["decision"]["correctness"];
    assert!(!correctness["recommended"]
        .as_array()
        .unwrap()
        .contains(&Value::from("naive-del")));
    let csv = std::fs::read_to_string(dir.join("matrix.csv")).unwrap();
    assert_eq!(csv.lines().count(), 7, "{csv}");
    assert!(
        csv.lines()
            .nth(2)
            .unwrap()
            .starts_with("naive-del,client-pause,single,2,2,"),
        "{csv}"
    );
    let md = std::fs::read_to_string(dir.join("matrix.md")).unwrap();
    assert!(
        md.contains("| naive-del |") && md.contains("## Decision table"),
        "{md}"
    );
    assert!(stdout.contains("matrix report (open this):"), "{stdout}");
    let survivors = common::process::pids_under(&dir);
    assert!(survivors.is_empty(), "still running: {survivors:?}");
}

#[test]
fn ctrl_c_keeps_finished_cells_and_leaves_no_process() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let mut child = Command::new(env!("CARGO_BIN_EXE_lockbench"))
        .args([
            "matrix",
            "--strategies",
            "single",
            "--faults",
            "none,latency,client-pause",
            "--trials",
            "1",
            "--trial-duration",
            "3500ms",
            "--fault-at",
            "500ms",
            "--no-progress",
            "--results",
        ])
        .arg(&results)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (bounded) until the first cell is written, then interrupt the second trial.
    let deadline = Instant::now() + Duration::from_secs(60);
    let dir = loop {
        assert!(Instant::now() < deadline, "no cell finished within 60 s");
        if let Ok(dir) = std::fs::canonicalize(results.join("latest")) {
            if let Ok(text) = std::fs::read_to_string(dir.join("matrix.json")) {
                if let Ok(m) = serde_json::from_str::<Value>(&text) {
                    if m["cells"][0]["trials_checked"] == 1 {
                        break dir;
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // The second trial's topology starts right after the first cell is written: give it a
    // moment to have processes to clean up, bounded by the trial's own length.
    let second = dir.join("trials/single/latency/t1/nodes");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !second.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "matrix did not stop within 30 s of SIGINT"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = read(&dir.join("matrix.json"));
    assert_eq!(m["status"], "interrupted");
    let cells = m["cells"].as_array().unwrap();
    assert_eq!(cells[0]["fault"], "none");
    assert_eq!(cells[0]["trials_checked"], 1, "the finished cell is kept");
    assert_ne!(cells[0]["verdict"], "not-run");
    assert_eq!(cells[2]["verdict"], "not-run", "{}", cells[2]);
    assert!(dir.join("matrix.html").is_file());
    let survivors = common::process::pids_under(&dir);
    assert!(survivors.is_empty(), "still running: {survivors:?}");
}

#[test]
fn bad_input_exits_2_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let config = tmp.path().join("matrix.toml");
    std::fs::write(&config, "trials = 2\nclientz = 4\n").unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &["--faults", "none,meteor"],
            "unknown fault class \"meteor\"",
        ),
        (
            &["--strategies", "single,paxos"],
            "unknown strategy `paxos`",
        ),
        (&["--ttl", "5 parsecs"], "--ttl"),
        (&["--trial-duration", "2s"], "at least 4500 ms"),
        (&["--config", config.to_str().unwrap()], "clientz"),
    ];
    for (args, needle) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_lockbench"))
            .arg("matrix")
            .args(args)
            .arg("--results")
            .arg(&results)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!results.exists(), "{args:?} created {}", results.display());
    }
}
