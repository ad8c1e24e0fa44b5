//! `lockbench matrix` end to end on real redis-server processes: a tiny matrix (a negative
//! control and `redlock-fenced` × `none`, `client-pause`, `clock-jump` × 2 trials of a few
//! episodes) must fill every cell with figures equal to the trials' own `summary.json` /
//! `checker.json`; and a Ctrl-C keeps the finished cells and leaves no process behind.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::cli::{assert_refused, expect_code, expect_success, json as read, latest, lockbench};
use common::process::{assert_none_running_under, signal, wait_exit};
use common::wait::wait_for;
use serde_json::Value;

#[test]
fn a_tiny_matrix_fills_every_cell_with_the_trials_own_figures() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    // A page to link (as the quick start links the claims' comparison report).
    let claims = tmp.path().join("claims/comparison/comparison.html");
    std::fs::create_dir_all(claims.parent().unwrap()).unwrap();
    std::fs::write(&claims, "<html></html>").unwrap();
    let started = Instant::now();
    let out = lockbench()
        .args([
            "matrix",
            "--strategies",
            "naive-del,redlock-fenced",
            "--faults",
            "none,client-pause,clock-jump",
            "--trials",
            "2",
            "--episodes",
            "2",
            "--no-progress",
            "--results",
        ])
        .arg(&results)
        .arg("--link-report")
        .arg(&claims)
        .output()
        .unwrap();
    let (stdout, _) = expect_success(&out, "the tiny matrix");
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
    assert_none_running_under(&dir);
}

#[test]
fn ctrl_c_keeps_finished_cells_and_leaves_no_process() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let mut child = common::cli::spawn_in(
        [
            "matrix",
            "--strategies",
            "single",
            "--faults",
            "none,latency,client-pause",
            "--trials",
            "1",
            "--episodes",
            "2",
            "--no-progress",
        ],
        &results,
        Stdio::piped(),
        Stdio::piped(),
    );
    // Wait (bounded) until the first cell is written, then interrupt the second trial.
    let dir = wait_for(Duration::from_secs(60), "a finished cell", || {
        let dir = std::fs::canonicalize(results.join("latest")).ok()?;
        let text = std::fs::read_to_string(dir.join("matrix.json")).ok()?;
        let m = serde_json::from_str::<Value>(&text).ok()?;
        (m["cells"][0]["trials_checked"] == 1).then_some(dir)
    });
    // The second trial's topology starts right after the first cell is written: give it a
    // moment to have processes to clean up, bounded by the trial's own length (and going on
    // without it: the interrupt is what is tested).
    let second = dir.join("trials/single/latency/t1/nodes");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !second.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(&child, libc::SIGINT);
    let status = wait_exit(&mut child, Duration::from_secs(30), "matrix after SIGINT");
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
    assert_none_running_under(&dir);
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
        (
            &["--hold", "200ms"],
            "--hold 200ms is too long for --ttl 500ms",
        ),
        (&["--config", config.to_str().unwrap()], "clientz"),
    ];
    for (args, needle) in cases {
        let out = assert_refused(&[&["matrix"], args].concat(), &results, needle);
        expect_code(&out, 2, &format!("{args:?}"));
    }
}
