//! TTL and per-node timeout rules at the CLI: a TTL that can never give a lease is refused
//! before anything starts (run and scenario files alike), and the default per-node timeout is
//! the library's rule (TTL/10, 1 ms to 500 ms).

mod common;

use std::path::Path;

use common::cli::{assert_refused, expect_success, run, run_in};

#[test]
fn run_refuses_a_ttl_that_leaves_no_validity_and_names_the_minimum() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("r");
    for (args, needle) in [
        (
            &["run", "--ttl", "2ms"][..],
            "--ttl with strategy single: TTL 2ms leaves no validity (drift margin 2 ms + 1 % of the TTL): use at least 4ms",
        ),
        (&["run", "--ttl", "1ms", "-s", "redlock"][..], "use at least 4ms"),
        (
            &["run", "--ttl", "5ms", "--drift-factor", "0.5"][..],
            "drift margin 2 ms + 50 % of the TTL): use at least 6ms",
        ),
    ] {
        assert_refused(args, &results, needle);
    }
}

#[test]
fn a_scenario_with_an_unworkable_ttl_is_refused_before_start() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("tiny.toml");
    std::fs::write(
        &file,
        r#"
claim = "none"
topology = "single"
strategies = ["single"]

[workload]
clients = 1
resources = 1
hold = "0ms"
ttl = "3ms"
duration = "1s"
"#,
    )
    .unwrap();
    let results = tmp.path().join("r");
    let out = run_in(["chaos", file.to_str().unwrap()], &results);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "accepted: {err}");
    assert!(
        err.contains("tiny.toml:10:7: `ttl` with strategy single:")
            && err.contains("TTL 3ms leaves no validity")
            && err.contains("use at least 4ms"),
        "{err}"
    );
    let nodes_started =
        results.exists() && walk(&results).iter().any(|p| p.ends_with("redis.conf"));
    assert!(!nodes_started, "a node was started for a refused scenario");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn default_node_timeout_is_one_rule_in_help_and_in_the_run() {
    let help = run(["run", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("TTL/10, at least 1ms, at most 500ms"),
        "{help}"
    );
    assert!(
        help.contains("At least 4ms with the default drift factor"),
        "{help}"
    );

    // A 10 s TTL: TTL/10 is 1 s, capped at 500 ms (the old CLI capped at 50 ms).
    let tmp = tempfile::tempdir().unwrap();
    let out = run_in(
        [
            "run",
            "--direct",
            "--ttl",
            "10s",
            "-c",
            "1",
            "-r",
            "1",
            "--ops",
            "20",
            "--no-audit",
            "--no-progress",
        ],
        tmp.path(),
    );
    expect_success(&out, "a run with a 10 s TTL");
    let config: serde_json::Value = serde_json::from_slice(
        &std::fs::read(tmp.path().join("latest/config.json")).expect("config.json"),
    )
    .unwrap();
    assert_eq!(config["client"]["node_timeout"], 500, "{config}");
    assert_eq!(
        config["client"]["node_timeout"]
            .as_u64()
            .map(std::time::Duration::from_millis),
        Some(lockbench::strategy::StrategyOptions::default_node_timeout(
            std::time::Duration::from_secs(10)
        ))
    );
}
