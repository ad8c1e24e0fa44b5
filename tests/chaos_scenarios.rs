//! The shipped scenarios end to end: `lockbench chaos` on real processes must report the
//! verdicts the seeds' claims predict. Every claim scenario runs (one trial each): each one's
//! timeline is engineered to reproduce on a loaded 2-core machine (the comment in each file
//! says why), and `lockbench chaos chaos/ --trials 10` is the evidence. Also here: `--trials`
//! (k/N per expectation, one directory and seed per trial) and Ctrl-C.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::cli::{
    copy_shipped_scenarios, expect_success, json, latest, lockbench_in, run_in, summary_so_far,
};
use common::process::{assert_none_running_under, signal, wait_exit};
use common::wait::wait_for;

/// The shipped claim scenarios on one node, five nodes and PostgreSQL, with their number of
/// expectations. They run as one `lockbench chaos` call, beside [`REPLICATED`] (two test
/// functions, so two threads): every scenario's timeline is engineered to reproduce on a
/// loaded 2-core machine, and the two halves take about the same time.
const ONE_NODE_FIVE_NODES_POSTGRES: [(&str, usize); 28] = [
    ("01-no-ttl-crash.toml", 2),
    ("02-naive-del-pause.toml", 2),
    ("03-get-then-del.toml", 1),
    ("04-expiry-shorter-than-work.toml", 2),
    ("06-redlock-minority-loss.toml", 1),
    ("07a-redlock-restart-empty.toml", 1),
    ("07b-redlock-delayed-restart.toml", 1),
    ("08-redlock-clock-jump.toml", 1),
    ("09-redlock-process-pause.toml", 2),
    ("10a-watchdog-slow-work.toml", 1),
    ("10b-watchdog-pause.toml", 1),
    ("11a-pg-advisory-session-loss.toml", 2),
    ("11b-pg-advisory-crash.toml", 1),
    ("13-setnx-expire-crash.toml", 2),
    ("14-unchecked-extend-partition.toml", 2),
    ("15-pg-advisory-transaction-pooler.toml", 2),
    ("16-pg-idle-session-timeout.toml", 3),
    ("17a-pgbouncer-no-reset-keeps-lock.toml", 2),
    ("17b-pgbouncer-discard-all-frees-lock.toml", 2),
    ("18-pg-wait-late-grant.toml", 1),
    ("35a-fenced-lock-charges-twice.toml", 2),
    ("35b-idempotency-key-charges-once.toml", 2),
    ("35c-claim-lease-shorter-than-the-job.toml", 2),
    ("35d-claim-with-idempotency-key-needs-no-lock.toml", 1),
    ("35e-skip-locked-crash-gives-the-job-back.toml", 2),
    ("35f-skip-locked-pause-keeps-the-job.toml", 2),
    ("35g-skip-locked-session-reset-runs-twice.toml", 1),
    ("35h-compute-duplicates-are-waste.toml", 2),
];

/// The shipped claim scenarios on replicated topologies (Sentinel, etcd, Redis Cluster) and
/// the pooled PostgreSQL one, with their number of expectations.
const REPLICATED: [(&str, usize); 16] = [
    ("05a-failover-loses-lock.toml", 1),
    ("05b-failover-repeats-tokens.toml", 1),
    ("05c-failover-wait-for-replica.toml", 1),
    ("05d-failover-loses-acknowledged-lock.toml", 1),
    ("12a-etcd-lease-client-pause.toml", 1),
    ("12b-etcd-lease-leader-loss.toml", 1),
    ("19-pg-pooled-session-lock.toml", 2),
    ("20a-cluster-failover-loses-lock.toml", 1),
    ("20b-cluster-manual-failover-keeps-lock.toml", 1),
    ("20c-cluster-forced-failover-loses-lock.toml", 1),
    ("20d-cluster-takeover-loses-lock.toml", 1),
    ("20e-cluster-failover-wait-for-replica.toml", 1),
    ("20f-cluster-takeover-loses-acknowledged-lock.toml", 1),
    ("20g-cluster-minority-primary-grants-second-holder.toml", 2),
    ("20h-cluster-short-minority-partition-keeps-lock.toml", 1),
    ("22-cluster-slot-migration-keeps-lock.toml", 3),
];

/// Shipped claim scenarios another test binary runs end to end (not run twice in CI):
/// `26a` runs in `tests/workers.rs` (worker processes, with its per-worker assertions).
const ELSEWHERE: [&str; 1] = ["26a-redlock-worker-minority-pause.toml"];

#[test]
fn every_shipped_scenario_is_checked_once() {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("chaos");
    let mut files: Vec<String> = std::fs::read_dir(&shipped)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut listed: Vec<String> = ONE_NODE_FIVE_NODES_POSTGRES
        .iter()
        .chain(REPLICATED.iter())
        .map(|(s, _)| s.to_string())
        .chain(ELSEWHERE.iter().map(|s| s.to_string()))
        .collect();
    listed.sort();
    // A new scenario must be added to one of the lists, and no file to two.
    assert_eq!(files, listed);
}

/// Every shipped scenario (claims and adapters) meets the rules `run` and the files share:
/// a rule moved or tightened must not refuse a file that ships.
#[test]
fn every_shipped_scenario_parses_and_validates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut n = 0;
    for dir in ["chaos", "adapters/scenarios"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|x| x == "toml") {
                lockbench::orchestration::scenario::Scenario::load(&path)
                    .unwrap_or_else(|e| panic!("{e}"));
                n += 1;
            }
        }
    }
    assert!(n >= 40, "{n} scenarios");
}

#[test]
fn shipped_scenarios_on_one_node_five_nodes_and_postgres_give_the_claimed_verdicts() {
    check_shipped(&ONE_NODE_FIVE_NODES_POSTGRES);
}

#[test]
fn shipped_scenarios_on_replicated_topologies_give_the_claimed_verdicts() {
    check_shipped(&REPLICATED);
}

/// Claim 35h, whose files `lockbench check` judges again.
const COMPUTE_IS_WASTE: &str = "35h-compute-duplicates-are-waste.toml";

/// Claim 35h judged again: `lockbench check` reads the run's `work.json` and finds `single`'s
/// compute `valid` with its wasted work, and the same files without it (judged as `row` work)
/// `invalid` — the work, not the history, decides.
fn assert_compute_judged_as_its_work(run: &Path) {
    let dir = run.join("single");
    let first = json(&dir.join("checker.json"));
    let e = &first["stats"]["effects"];
    assert!(e["duplicate_executions"].as_u64().unwrap() >= 1, "{e}");
    assert!(e["wasted_work_us"].as_u64().unwrap() > 0, "{e}");
    let out = common::cli::run(["check", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let again = json(&dir.join("checker.json"));
    assert_eq!(again["verdict"], "valid");
    assert_eq!(again["stats"]["effects"], first["stats"]["effects"]);
    std::fs::remove_file(dir.join("work.json")).unwrap();
    let out = common::cli::run(["check", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let as_row = json(&dir.join("checker.json"));
    assert_eq!(as_row["verdict"], "invalid", "{as_row}");
}

/// Claim 35e, whose times the scenario file cannot state.
const CRASH_GIVES_THE_JOB_BACK: &str = "35e-skip-locked-crash-gives-the-job-back.toml";

/// Claim 35e's times: each crashed worker's job is claimed again within half the 1 s TTL with
/// `claim-skip-locked` (its transaction rolled back as its session closed), and only after at
/// least 90 % of the TTL with `claim-skip-locked-lease` (its committed claim's lease ran out).
fn assert_crashed_jobs_taken_again(run: &Path) {
    for (strategy, within_ms) in [
        ("claim-skip-locked", 0.0..500.0),
        ("claim-skip-locked-lease", 900.0..2000.0),
    ] {
        let text = std::fs::read_to_string(run.join(strategy).join("history.jsonl")).unwrap();
        let events: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let mut held = std::collections::BTreeMap::new();
        let mut crashes = 0;
        for (i, e) in events.iter().enumerate() {
            let client = e["client"].as_u64();
            match (e["type"].as_str(), e["f"].as_str(), e["kind"].as_str()) {
                (Some("op"), Some("acquire"), Some("ok")) => {
                    held.insert(client, e["resource"].as_str().unwrap().to_string());
                }
                (Some("op"), Some("release"), Some(k)) if k != "invoke" => {
                    held.remove(&client);
                }
                (Some("crash"), ..) => {
                    crashes += 1;
                    let job = held
                        .get(&client)
                        .unwrap_or_else(|| panic!("{strategy}: {e}"));
                    let at = e["time_us"].as_u64().unwrap();
                    let again = events[i..]
                        .iter()
                        .find(|x| {
                            x["resource"] == job.as_str()
                                && x["f"] == "acquire"
                                && x["kind"] == "ok"
                        })
                        .unwrap_or_else(|| panic!("{strategy}: {job} never claimed again"));
                    let after_ms = (again["time_us"].as_u64().unwrap() - at) as f64 / 1000.0;
                    assert!(
                        within_ms.contains(&after_ms),
                        "{strategy}: {job} claimed again {after_ms} ms after its worker crashed \
                         (expected {within_ms:?} ms)"
                    );
                }
                _ => {}
            }
        }
        assert_eq!(crashes, 2, "{strategy}: two workers crash");
    }
}

/// Runs `lockbench chaos` on a directory holding `scenarios` and checks that every expectation
/// came out as claimed, every scenario wrote its report and node dirs, and no server is left.
fn check_shipped(scenarios: &[(&str, usize)]) {
    let tmp = tempfile::tempdir().unwrap();
    let names: Vec<&str> = scenarios.iter().map(|(s, _)| *s).collect();
    let dir = copy_shipped_scenarios(tmp.path(), &names);
    let results = tmp.path().join("results");
    let child = lockbench_in(["chaos", dir.to_str().unwrap()], &results)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The bus cuts' nft tables (20g, 20h) are named after the process.
    let own_tables = format!("lockbench_{}_", child.id());
    let out = child.wait_with_output().unwrap();
    let (stdout, _) = expect_success(
        &out,
        "`lockbench chaos` of the shipped scenarios (exit 1: an expectation not as claimed, see NOT AS CLAIMED below)",
    );
    let expectations: usize = scenarios.iter().map(|(_, n)| n).sum();
    let line = format!(
        "{} scenario(s), {expectations} expectation(s) as claimed, 0 not, 0 scenario error(s)",
        scenarios.len()
    );
    assert!(stdout.contains(&line), "{stdout}");
    assert!(!stdout.contains("NOT AS CLAIMED"), "{stdout}");
    let batch = latest(&results);
    assert!(batch.join("comparison/comparison.html").exists());
    for (s, _) in scenarios {
        let name = s.trim_end_matches(".toml");
        assert!(batch.join(name).join("report.html").exists(), "{name}");
        assert!(
            batch.join(name).join("nodes").is_dir(),
            "{name}: no node dirs"
        );
    }
    if names.contains(&COMPUTE_IS_WASTE) {
        assert_compute_judged_as_its_work(&batch.join(COMPUTE_IS_WASTE.trim_end_matches(".toml")));
    }
    if names.contains(&CRASH_GIVES_THE_JOB_BACK) {
        assert_crashed_jobs_taken_again(
            &batch.join(CRASH_GIVES_THE_JOB_BACK.trim_end_matches(".toml")),
        );
    }
    // Every redis-server the scenarios started (each runs a config file under the batch
    // directory) is gone, and so is every nft table.
    assert_none_running_under(&batch);
    let tables = std::process::Command::new("nft")
        .args(["list", "tables"])
        .output()
        .unwrap();
    assert!(tables.status.success(), "{tables:?}");
    let listed = String::from_utf8_lossy(&tables.stdout);
    assert!(
        !listed.contains(&own_tables),
        "{own_tables}* left:\n{listed}"
    );
}

#[test]
fn ctrl_c_heals_faults_stops_every_process_and_keeps_partial_results() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = common::cli::shipped_scenario("04-expiry-shorter-than-work.toml");
    let mut child = common::cli::spawn_in(
        ["chaos", scenario.to_str().unwrap()],
        tmp.path(),
        Stdio::piped(),
        Stdio::null(),
    );
    // Wait (bounded) until the first strategy has measured something and a fault is active.
    let run = wait_for(Duration::from_secs(30), "progress with a fault", || {
        let measured = summary_so_far(tmp.path())
            .is_some_and(|s| s["strategies"][0]["acquired"].as_u64().unwrap_or(0) > 0);
        let faulted = std::fs::read_to_string(tmp.path().join("latest/single/history.jsonl"))
            .is_ok_and(|h| h.contains("\"type\":\"fault\""));
        (measured && faulted).then(|| latest(tmp.path()))
    });
    assert!(
        !common::process::pids_under(&run).is_empty(),
        "nodes are running"
    );
    signal(&child, libc::SIGINT);
    let status = wait_exit(&mut child, Duration::from_secs(30), "chaos after SIGINT");
    assert_eq!(status.code(), Some(130));
    // Partial data is shown, not judged against the claim.
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    assert!(stdout.contains("interrupted: not judged"), "{stdout}");
    assert!(!stdout.contains("NOT AS CLAIMED"), "{stdout}");
    // Both expectations of 04 are not judged: single was cut, single-fenced never ran.
    assert!(stdout.contains(", 2 not judged (interrupted),"), "{stdout}");
    let s = json(&run.join("summary.json"));
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
    assert_none_running_under(&run);
}

/// Two clients on one node, no fault but client 1 absent for the first 700 ms; expected valid.
const TWO_TRIALS: &str = r#"
claim = "a fault-free lock is valid"
topology = "single"
strategies = ["single"]
seed = 40

[workload]
clients = 2
resources = 1
hold = "10ms"
ttl = "1s"
duration = "1500ms"
retry_attempts = 1000
retry_delay = "5ms"

[[nemesis]]
at = "0s"
duration = "700ms"
fault = "client-absent"
target = "client:1"

[expect.single]
verdict = "valid"
absent = ["mutex-violation"]
"#;

#[test]
fn trials_run_each_scenario_n_times_with_own_seed_and_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("fault-free.toml");
    std::fs::write(&file, TWO_TRIALS).unwrap();
    let results = tmp.path().join("results");
    let out = run_in(["chaos", file.to_str().unwrap(), "--trials", "2"], &results);
    let (stdout, _) = expect_success(&out, "two trials");
    assert!(
        stdout.contains("trial 1/2 (seed 40): single valid as claimed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("trial 2/2 (seed 41): single valid as claimed"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "fault-free / single: expected valid, no mutex-violation — as claimed in 2/2"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("1 scenario(s) × 2 trials, 1 expectation(s) as claimed in 2/2, 0 not"),
        "{stdout}"
    );
    let batch = latest(&results);
    let chaos = json(&batch.join("chaos.json"));
    let record = &chaos[0];
    assert_eq!(record["trials"], 2);
    assert_eq!(record["expectations"][0]["as_claimed"], 2);
    assert_eq!(record["expectations"][0]["not_judged"], 0);
    let seeds: Vec<u64> = record["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["seed"].as_u64().unwrap())
        .collect();
    assert_eq!(seeds, [40, 41]);
    for trial in ["trial-01", "trial-02"] {
        let run = batch.join("fault-free").join(trial);
        assert!(run.join("report.html").exists(), "{trial}");
        // Each trial ran on its own nodes, and its own summary names its seed.
        assert!(run.join("nodes").is_dir(), "{trial}");
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap();
        let seed = summary["config"]["workload"]["seed"].as_u64().unwrap();
        assert_eq!(seed, if trial == "trial-01" { 40 } else { 41 });
        // client-absent: client 1 started no acquire in its first 700 ms, then did.
        let history = std::fs::read_to_string(run.join("single/history.jsonl")).unwrap();
        let first_invoke_us = history
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|e| e["client"] == 1 && e["kind"] == "invoke")
            .map(|e| e["time_us"].as_u64().unwrap())
            .min()
            .expect("client 1 acquired after its absence");
        assert!(first_invoke_us >= 700_000, "{trial}: {first_invoke_us} µs");
    }
    assert_none_running_under(&batch);
}
