//! `--work external` and `--work job` end to end: every section calls the side-effect sink
//! once, the checker judges the sink's table (rule 7) and the jobs' executions (rule 8),
//! `check` judges it again from the files, a SIGKILLed run leaves no process and a table that
//! can be re-checked, `claim-update` claims and completes rows of its jobs table, and bad input
//! is refused before anything starts. The claims (a fenced lock charges twice under a pause; an
//! idempotency key charges once; a claim whose lease is shorter than the job runs it twice; a
//! claim plus a key needs no lock) are `chaos/35a`–`35d`, run by `tests/chaos_scenarios.rs`.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::cli::{assert_refused, expect_code, json, latest, run_in, spawn_in};
use common::process::{assert_none_running_under, signal, wait_exit};
use common::wait::wait_for;

/// Applied charges in a strategy directory's `sink.sqlite`.
fn sink_rows(dir: &Path) -> i64 {
    let conn = rusqlite::Connection::open_with_flags(
        dir.join("sink.sqlite"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    conn.query_row("SELECT count(*) FROM requests", [], |r| r.get(0))
        .unwrap()
}

/// Runs `strategies` on `topology` fault-free with `work` (`external`, `job`) and asserts each
/// is `valid` with one applied charge per section, one execution per job and no duplicate.
/// Returns the run's directory (kept while the returned tempdir lives).
fn fault_free_work(
    topology: &str,
    strategies: &str,
    work: &str,
    extra: &[&str],
) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let mut args = vec![
        "run",
        "--topology",
        topology,
        "-s",
        strategies,
        "-c",
        "4",
        "-r",
        "2",
        "--ops",
        "120",
        "--hold",
        "1ms",
        "--work",
        work,
    ];
    args.extend_from_slice(extra);
    let out = run_in(&args, &results);
    expect_code(
        &out,
        0,
        &format!("{topology}: {strategies} with --work {work}"),
    );
    let run = latest(&results);
    assert_eq!(json(&run.join("config.json"))["workload"]["work"], work);
    for s in strategies.split(',') {
        let c = json(&run.join(s).join("checker.json"));
        assert_eq!(c["verdict"], "valid", "{s}: {c}");
        let e = &c["stats"]["effects"];
        let sections = c["stats"]["sections"].as_u64().unwrap();
        assert!(sections > 50, "{s}: {sections} sections");
        // A section that wrote made its call; fault-free, nothing is charged twice.
        assert_eq!(e["charges"].as_u64(), Some(sections), "{s}: {e}");
        assert_eq!(e["jobs_charged"].as_u64(), Some(sections), "{s}: {e}");
        assert_eq!(e["duplicate_effects"], 0, "{s}: {e}");
        assert_eq!(e["sections_without_call"], 0, "{s}: {e}");
        assert_eq!(e["executions"].as_u64(), Some(sections), "{s}: {e}");
        assert_eq!(e["duplicate_executions"], 0, "{s}: {e}");
        assert_eq!(sink_rows(&run.join(s)), sections as i64, "{s}");
    }
    (tmp, run)
}

fn fault_free(topology: &str, strategies: &str, extra: &[&str]) {
    fault_free_work(topology, strategies, "external", extra);
}

#[test]
fn every_strategy_on_one_node_is_valid_with_external_work_fault_free() {
    fault_free(
        "single",
        "single,single-fenced,naive-del,get-then-del,no-ttl,setnx-expire,unchecked-extend",
        &[],
    );
}

#[test]
fn redlock_postgres_and_etcd_strategies_are_valid_with_external_work_fault_free() {
    fault_free("five", "redlock,redlock-fenced", &[]);
    fault_free(
        "postgres",
        "pg-advisory,pg-advisory-fenced,pg-advisory-xact,pg-advisory-wait",
        &[],
    );
    fault_free("etcd", "etcd-lease", &["--ttl", "2s"]);
}

#[test]
fn every_lock_strategy_is_valid_with_job_work_fault_free() {
    fault_free_work(
        "single",
        "single,single-fenced,naive-del,get-then-del,no-ttl,setnx-expire,unchecked-extend",
        "job",
        &[],
    );
    fault_free_work("five", "redlock,redlock-fenced", "job", &[]);
    fault_free_work("etcd", "etcd-lease", "job", &["--ttl", "2s"]);
}

#[test]
fn claims_and_postgres_locks_are_valid_with_job_work_and_each_claim_completes_its_job() {
    let (_tmp, run) = fault_free_work(
        "postgres",
        "claim-update,claim-update-unguarded,claim-skip-locked,claim-skip-locked-lease,\
         pg-advisory,pg-advisory-fenced",
        "job",
        &["--ttl", "2s"],
    );
    let claims = [
        "claim-update",
        "claim-update-unguarded",
        "claim-skip-locked",
        "claim-skip-locked-lease",
    ];
    for s in claims {
        let c = json(&run.join(s).join("checker.json"));
        let sections = c["stats"]["sections"].as_u64().unwrap();
        // Every claim was a job of its own (`job:<id>`), completed once, never re-claimed.
        assert_eq!(
            c["stats"]["acquire_ok"].as_u64(),
            Some(sections),
            "{s}: {c}"
        );
        assert_eq!(c["stats"]["zombie_completions"], 0, "{s}: {c}");
        assert_eq!(c["stats"]["stale_completions_refused"], 0, "{s}: {c}");
        let history = std::fs::read_to_string(run.join(s).join("history.jsonl")).unwrap();
        let released: Vec<serde_json::Value> = history
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|e| e["f"] == "release" && e["kind"] == "ok")
            .collect();
        assert_eq!(released.len() as u64, sections, "{s}: completions");
        let jobs: std::collections::BTreeSet<&str> = released
            .iter()
            .map(|e| e["resource"].as_str().unwrap())
            .collect();
        assert_eq!(jobs.len() as u64, sections, "{s}: one completion per job");
        assert!(jobs.iter().all(|j| j.starts_with("job:")), "{jobs:?}");
    }
    // The claim's number is the fencing token the job's row checks (claim-update only).
    let cfg = json(&run.join("config.json"));
    let fenced = |s: &str| {
        let c = json(&run.join(s).join("checker.json"));
        c["fence_mode"].as_str().map(str::to_string)
    };
    assert_eq!(fenced("claim-update").as_deref(), Some("fenced"), "{cfg}");
    assert_eq!(fenced("claim-skip-locked-lease").as_deref(), Some("fenced"));
    for s in ["claim-update-unguarded", "claim-skip-locked"] {
        assert_eq!(fenced(s).as_deref(), Some("unfenced"), "{s}");
    }
}

#[test]
fn an_adapter_strategy_is_valid_with_external_work_fault_free() {
    // The library holds the lock in its own process; lockbench makes the section's call.
    fault_free("single", "adapter:redis-py", &[]);
}

#[test]
fn an_idempotency_key_is_carried_by_every_call_and_check_judges_the_sink_again() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let out = run_in(
        [
            "run",
            "-s",
            "single-fenced",
            "-c",
            "3",
            "-r",
            "1",
            "--ops",
            "60",
            "--work",
            "external",
            "--idempotency-key",
        ],
        &results,
    );
    expect_code(&out, 0, "single-fenced with an idempotency key");
    let dir = latest(&results).join("single-fenced");
    let conn = rusqlite::Connection::open(dir.join("sink.sqlite")).unwrap();
    let (keyed, all): (i64, i64) = conn
        .query_row(
            "SELECT count(idempotency_key), count(*) FROM requests WHERE idempotency_key = job",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let first = json(&dir.join("checker.json"));
    assert_eq!(keyed, all);
    assert_eq!(
        Some(all as u64),
        first["stats"]["effects"]["charges"].as_u64()
    );
    // Two charges for one job, put there by hand: `check` finds them in the files.
    conn.execute(
        "INSERT INTO requests (time_us, job, client, section_id, idempotency_key, outcome, \
         charge_id) SELECT time_us + 1, job, client, section_id, NULL, 'applied', NULL \
         FROM requests ORDER BY seq LIMIT 1",
        [],
    )
    .unwrap();
    drop(conn);
    let out = common::cli::run(["check", dir.to_str().unwrap()]);
    let (stdout, _) = expect_code(&out, 1, "check of a sink with a job charged twice");
    assert!(stdout.contains("invalid"), "{stdout}");
    let again = json(&dir.join("checker.json"));
    assert_eq!(again["verdict"], "invalid");
    assert_eq!(again["stats"]["effects"]["duplicate_effects"], 1);
    let kinds: Vec<&str> = again["anomalies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["duplicate-effect"], "{again}");
}

#[test]
fn a_sigkilled_run_leaves_no_process_and_a_sink_table_check_can_read() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let mut child = spawn_in(
        [
            "run",
            "-s",
            "single-fenced",
            "-c",
            "4",
            "-r",
            "2",
            "-d",
            "60s",
            "--hold",
            "1ms",
            "--work",
            "external",
            "--no-progress",
        ],
        &results,
        Stdio::null(),
        Stdio::null(),
    );
    let dir = wait_for(
        Duration::from_secs(60),
        "the sink to answer 200 calls",
        || {
            let dir = std::fs::canonicalize(results.join("latest"))
                .ok()?
                .join("single-fenced");
            (dir.join("sink.sqlite").exists() && sink_rows(&dir) >= 200).then_some(dir)
        },
    );
    signal(&child, libc::SIGKILL);
    wait_exit(
        &mut child,
        Duration::from_secs(10),
        "lockbench after SIGKILL",
    );
    let run = dir.parent().unwrap().to_path_buf();
    wait_for(Duration::from_secs(10), "the run's servers to exit", || {
        common::process::pids_under(&run).is_empty().then_some(())
    });
    assert_none_running_under(&run);
    let rows = sink_rows(&dir);
    let out = common::cli::run(["check", dir.to_str().unwrap()]);
    let (stdout, stderr) = common::cli::text(&out);
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "check of a killed run: {stdout}{stderr}"
    );
    let c = json(&dir.join("checker.json"));
    assert_eq!(
        c["stats"]["effects"]["requests"].as_i64(),
        Some(rows),
        "{c}"
    );
    assert_eq!(c["stats"]["effects"]["duplicate_effects"], 0, "{c}");
}

#[test]
fn a_key_without_external_work_and_external_work_without_the_audit_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let out = assert_refused(
        &["run", "--idempotency-key", "--ops", "10"],
        &results,
        "--idempotency-key needs external or job work",
    );
    assert_eq!(out.status.code(), Some(2));
    let out = assert_refused(
        &["run", "--work", "external", "--no-audit", "--ops", "10"],
        &results,
        "--work external needs the audit",
    );
    assert_eq!(out.status.code(), Some(2));
    let out = assert_refused(
        &[
            "run",
            "--topology",
            "postgres",
            "-s",
            "claim-update",
            "--ops",
            "10",
        ],
        &results,
        "--work row with strategy claim-update: a claim takes a job from its jobs table, so it \
         serves job work only (--work job)",
    );
    assert_eq!(out.status.code(), Some(2));
    let out = assert_refused(
        &["run", "--work", "job", "--no-audit", "--ops", "10"],
        &results,
        "--work job needs the audit",
    );
    assert_eq!(out.status.code(), Some(2));
    let out = assert_refused(
        &["run", "--work", "payments", "--ops", "10"],
        &results,
        "unknown work kind \"payments\" (expected one of: row, compute, external, job)",
    );
    assert_eq!(out.status.code(), Some(2));
    // In a scenario file, the key is named where it is.
    let file = tmp.path().join("keyed-row.toml");
    std::fs::write(
        &file,
        "claim = \"x\"\ntopology = \"single\"\nstrategies = [\"single\"]\n\n[workload]\n\
         clients = 2\nresources = 1\nhold = \"1ms\"\nttl = \"1s\"\nduration = \"1s\"\nidempotency_key = true\n",
    )
    .unwrap();
    let out = assert_refused(
        &["chaos", file.to_str().unwrap()],
        &results,
        "`idempotency_key` needs external or job work",
    );
    let (_, stderr) = common::cli::text(&out);
    assert!(stderr.contains("keyed-row.toml:"), "{stderr}");
}
