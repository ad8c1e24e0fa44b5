//! `config.json` is the resolved test: `run` with flags and `chaos` with a scenario file of the
//! same workload write the same test, and `run --config` reruns a past run exactly.

mod common;

use std::path::Path;

use common::cli::{assert_refused, expect_code, expect_success, json, latest, run_in};

const SCENARIO: &str = r#"
claim = "fault-free: every acquire is exclusive"
topology = "single"
strategies = ["single", "redlock"]
seed = 5

[workload]
clients = 3
resources = 2
hold = "10ms"
ttl = "2s"
duration = "1s"
"#;

#[test]
fn run_flags_and_a_scenario_file_of_the_same_workload_resolve_to_the_same_test() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("same.toml");
    std::fs::write(&file, SCENARIO).unwrap();
    let chaos_results = tmp.path().join("chaos");
    expect_success(
        &run_in(
            ["chaos", file.to_str().unwrap(), "--no-progress"],
            &chaos_results,
        ),
        "chaos",
    );
    let run_results = tmp.path().join("run");
    expect_success(
        &run_in(
            [
                "run",
                "-s",
                "single,redlock",
                "-c",
                "3",
                "-r",
                "2",
                "--hold",
                "10ms",
                "--ttl",
                "2s",
                "-d",
                "1s",
                "--seed",
                "5",
                "--no-progress",
            ],
            &run_results,
        ),
        "run",
    );
    let from_file = json(&latest(&chaos_results).join("config.json"));
    let from_flags = json(&latest(&run_results).join("config.json"));
    for section in ["topology", "strategies", "client", "workload", "checker"] {
        assert_eq!(
            from_file[section], from_flags[section],
            "section {section} differs:\nscenario: {from_file}\nflags: {from_flags}"
        );
    }
    // Every default is resolved, and both took the same ones.
    let client = &from_flags["client"];
    assert_eq!(client["retry"]["attempts"], 3, "{client}");
    assert_eq!(client["retry"]["delay"], 5, "{client}");
    assert_eq!(client["retry"]["jitter"], 5, "{client}");
    assert_eq!(client["node_timeout"], 200, "TTL/10: {client}");
    assert_eq!(client["connect"]["connect_timeout"], 1000, "{client}");
    assert_eq!(from_flags["topology"]["key_prefix"], "lockbench:");
    assert_eq!(from_flags["checker"]["audit"], true);
    // Only what makes one a scenario differs.
    assert_eq!(from_file["claim"], "fault-free: every acquire is exclusive");
    assert!(from_flags["claim"].is_null(), "{from_flags}");
    // summary.json carries the same test, with the backend it ran on.
    let summary = json(&latest(&chaos_results).join("summary.json"));
    assert_eq!(summary["config"]["client"], from_file["client"]);
    assert_eq!(summary["config"]["backend"], "local");
}

#[test]
fn run_config_reruns_a_past_run_in_a_new_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("r");
    // One client, open loop at 100 ops/s: the attempt count is set by the schedule, not by how
    // busy the machine is.
    expect_success(
        &run_in(
            [
                "run",
                "-s",
                "single",
                "-c",
                "1",
                "-r",
                "1",
                "--hold",
                "1ms",
                "--rate",
                "100",
                "-d",
                "2s",
                "--seed",
                "9",
                "--no-audit",
                "--no-progress",
            ],
            &results,
        ),
        "first run",
    );
    let first = latest(&results);
    let config = first.join("config.json");
    expect_success(
        &run_in(
            ["run", "--no-progress", "--config", config.to_str().unwrap()],
            &results,
        ),
        "rerun",
    );
    let second = latest(&results);
    assert_ne!(first, second, "a rerun gets a directory of its own");
    let (a, b) = (json(&config), json(&second.join("config.json")));
    assert_eq!(a, b, "the rerun's test is the original's");
    assert_eq!(b["workload"]["seed"], 9);
    assert_eq!(
        b["checker"]["audit"], false,
        "--no-audit is part of the test"
    );
    let attempts = |dir: &Path| {
        let s = json(&dir.join("summary.json"));
        assert_eq!(s["strategies"][0]["strategy"], "single", "{s}");
        assert!(s["strategies"][0]["check"].is_null(), "not audited: {s}");
        s["strategies"][0]["attempts"].as_u64().unwrap()
    };
    let (n1, n2) = (attempts(&first) as f64, attempts(&second) as f64);
    assert!(n1 >= 190.0, "{n1}");
    assert!(
        (n2 - n1).abs() <= 0.05 * n1,
        "attempts {n1} then {n2}: more than 5 % apart"
    );
    assert!(
        !second.join("single/history.jsonl").exists(),
        "no history without audit"
    );
}

#[test]
fn run_config_takes_no_test_flags_and_names_a_bad_file() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("r");
    let bad = tmp.path().join("config.json");
    std::fs::write(&bad, "{\"name\": \"x\"}\n").unwrap();
    let bad_path = bad.to_str().unwrap();
    let out = assert_refused(
        &["run", "--config", bad_path, "-c", "4"],
        &results,
        "--clients",
    );
    let (_, err) = expect_code(&out, 2, "--config with a test flag");
    assert!(err.contains("--config"), "{err}");
    let out = assert_refused(
        &["run", "--config", bad_path],
        &results,
        &format!("{bad_path}: not a lockbench test"),
    );
    expect_code(&out, 2, "a file that is not a test");
}

/// A scenario with a fault and expectations: its config.json carries both.
const FAULTED: &str = r#"
claim = "a short latency fault breaks no lock"
topology = "single"
strategies = ["single"]
seed = 3

[workload]
clients = 2
resources = 1
hold = "5ms"
ttl = "2s"
duration = "2s"

[[nemesis]]
at = "500ms"
duration = "500ms"
fault = "latency"
target = "n1"
latency = "5ms"

[expect.single]
verdict = "valid"
absent = ["mutex-violation"]
"#;

#[test]
fn a_scenario_rerun_from_its_config_keeps_its_faults_and_is_judged_by_its_claim() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("faulted.toml");
    std::fs::write(&file, FAULTED).unwrap();
    let results = tmp.path().join("r");
    expect_success(
        &run_in(["chaos", file.to_str().unwrap(), "--no-progress"], &results),
        "chaos",
    );
    let first = latest(&results);
    let config = first.join("config.json");
    let out = run_in(
        ["run", "--no-progress", "--config", config.to_str().unwrap()],
        &results,
    );
    let (stdout, _) = expect_success(&out, "rerun of a scenario's config.json");
    assert!(stdout.contains("as claimed"), "{stdout}");
    let second = latest(&results);
    assert_ne!(first, second);
    let (a, b) = (json(&config), json(&second.join("config.json")));
    assert_eq!(a, b, "the rerun's test is the scenario's");
    assert_eq!(b["nemesis"][0]["fault"], "latency");
    assert_eq!(b["nemesis"][0]["latency"], 5);
    assert_eq!(b["expect"]["single"]["verdict"], "valid");
    // The fault ran again: its window is in the rerun's history.
    let history = std::fs::read_to_string(second.join("single/history.jsonl")).unwrap();
    assert!(
        history
            .lines()
            .any(|l| l.contains("\"latency\"") && l.contains("\"n1\"")),
        "no latency window in the rerun's history"
    );
    let expectations = json(&second.join("expectations.json"));
    assert_eq!(expectations[0]["met"], true, "{expectations}");
}

/// `--workers`, `--launcher` and `--ledger` change the test (where the clients run, where the
/// ledger lives): config.json records them and `run --config` runs them again; with `--config`
/// they are refused by clap (exit 2), since the file already says them.
#[test]
fn a_rerun_from_config_json_keeps_workers_launcher_and_ledger() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("r");
    expect_success(
        &run_in(
            [
                "run",
                "-s",
                "single",
                "-c",
                "2",
                "-r",
                "1",
                "--hold",
                "1ms",
                "-d",
                "1s",
                "--workers",
                "2",
                "--launcher",
                "processes",
                "--ledger",
                "postgres",
                "--no-progress",
            ],
            &results,
        ),
        "first run",
    );
    let first = latest(&results);
    let config = first.join("config.json");
    let a = json(&config);
    assert_eq!(a["workers"]["workers"], 2, "{a}");
    assert_eq!(a["workers"]["launcher"], "processes", "{a}");
    assert_eq!(a["ledger"], "postgres", "{a}");
    expect_success(
        &run_in(
            ["run", "--no-progress", "--config", config.to_str().unwrap()],
            &results,
        ),
        "rerun",
    );
    let second = latest(&results);
    assert_ne!(first, second);
    assert_eq!(a, json(&second.join("config.json")), "the same test");
    // The rerun ran as the first did: its clients in two workers, a PostgreSQL ledger.
    for dir in [&first, &second] {
        let s = json(&dir.join("summary.json"));
        assert!(!s["config"]["workers"].is_null(), "no workers: {s}");
        let ledger = s["config"]["ledger"].as_str().unwrap_or_default();
        assert!(ledger.contains("postgres"), "ledger {ledger:?}: {s}");
    }
    for flag in [
        &["--workers", "2"][..],
        &["--ledger", "sqlite"][..],
        &["--workers", "2", "--launcher", "compose"][..],
    ] {
        let mut args = vec!["run", "--config", config.to_str().unwrap()];
        args.extend_from_slice(flag);
        // Refused before anything started: no results directory of its own.
        let out = assert_refused(&args, &tmp.path().join("refused"), flag[0]);
        let (_, err) = expect_code(&out, 2, "--config with a setting the file records");
        assert!(err.contains("--config"), "{err}");
    }
}
