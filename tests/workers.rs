//! `run --workers N --launcher processes`: the real binary coordinating real `lockbench worker`
//! processes against real local nodes (redis-server, and the postgres server it starts for the
//! shared ledger). Fault-free: the merged history holds every worker's events, its successful
//! acquisitions equal the sum of the workers' and the ledger's committed sections, the merged
//! latency equals one histogram's, the verdict is valid, and no worker outlives the run. A worker
//! killed mid-run: the run completes, says the worker was lost, and closes its open operations.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::cli::{assert_refused, expect_code, json, latest, lockbench_in, spawn_in};
use common::process::{alive, signal, wait_exit};
use common::wait::wait_for;

/// The merged history's events.
fn history(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn is(ev: &serde_json::Value, kind: &str, f: &str) -> bool {
    ev["type"] == "op" && ev["kind"] == kind && ev["f"] == f
}

/// Committed sections in the shared ledger's copy: `end` steps.
fn ledger_ends(path: &Path) -> u64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("SELECT count(*) FROM events WHERE step = 'end'", [], |r| {
        r.get::<_, i64>(0)
    })
    .unwrap() as u64
}

/// No worker of the run whose `workers/` directory is `workers_dir` is alive.
fn assert_workers_gone(workers_dir: &Path) {
    for pid in pids(workers_dir) {
        assert!(!alive(pid), "worker {pid} still alive");
    }
}

fn pids(workers_dir: &Path) -> Vec<u32> {
    serde_json::from_value::<Vec<Option<u32>>>(json(&workers_dir.join("pids.json")))
        .unwrap()
        .into_iter()
        .flatten()
        .collect()
}

#[test]
fn three_worker_processes_merge_into_one_valid_run_on_five_nodes() {
    let tmp = tempfile::tempdir().unwrap();
    three_workers_merge_into_one_valid_run(&tmp.path().join("results"), "processes", &[]);
}

/// The same fault-free run with the workers in containers: a docker compose project per
/// strategy, from a `FROM scratch` image of this very binary, on the host's network; the
/// project is gone afterwards. SKIPPED (printed) without a Docker engine.
#[test]
fn three_worker_containers_through_compose_merge_into_one_valid_run() {
    let test = "three_worker_containers_through_compose_merge_into_one_valid_run";
    if let Some(reason) = common::docker::no_engine() {
        common::docker::skip(test, &reason);
        return;
    }
    // The image of this test's own binary (rebuilt only when the binary changed).
    const IMAGE: &str = "lockbench/lockbench:test";
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let built = std::process::Command::new("bash")
        .arg(root.join("docker/build-images.sh"))
        .args(["--only", "lockbench"])
        .env("LOCAL_LOCKBENCH_IMAGE", IMAGE)
        .env("LOCKBENCH_BIN", env!("CARGO_BIN_EXE_lockbench"))
        .output()
        .unwrap();
    expect_code(&built, 0, "building the lockbench image");
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let run =
        three_workers_merge_into_one_valid_run(&results, "compose", &["--worker-image", IMAGE]);
    let compose = json(&run.join("redlock/workers/compose.json"));
    assert_eq!(compose["services"]["w2"]["network_mode"], "host");
    // Every container's output was kept, and the project is gone (containers, volumes).
    for i in 0..3 {
        let log = std::fs::read_to_string(run.join(format!("redlock/workers/w{i}.log"))).unwrap();
        assert!(
            log.contains(&format!("worker {i}: reported")),
            "w{i}.log: {log}"
        );
    }
    let project = std::fs::read_to_string(run.join("redlock/workers/compose.project")).unwrap();
    assert!(project.starts_with("lockbench-"), "{project}");
    let filter = format!("label=com.docker.compose.project={}", project.trim());
    let left = std::process::Command::new("docker")
        .args(["ps", "-aq", "--filter", &filter])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&left.stdout).trim().is_empty(),
        "containers left: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

/// 3 workers (`launcher`, with `extra` arguments) on five nodes under redlock, fault-free:
/// one merged, valid run under `results` whose counts agree everywhere. Returns the run's
/// directory.
fn three_workers_merge_into_one_valid_run(
    results: &Path,
    launcher: &str,
    extra: &[&str],
) -> std::path::PathBuf {
    let mut args = vec![
        "run",
        "--topology",
        "five",
        "--strategy",
        "redlock",
        "--clients",
        "6",
        "--resources",
        "3",
        "--duration",
        "3s",
        "--workers",
        "3",
        "--launcher",
        launcher,
        "--no-progress",
    ];
    args.extend_from_slice(extra);
    let out = lockbench_in(args, results).output().unwrap();
    let (stdout, _) = expect_code(&out, 0, "a fault-free 3-worker run is valid");
    assert!(
        stdout.contains(&format!("workers: 3 ({launcher} launcher), clock bound ±")),
        "{stdout}"
    );
    let run = latest(results);
    let summary = json(&run.join("summary.json"));
    let s = &summary["strategies"][0];
    assert_eq!(s["check"]["verdict"], "valid", "{s}");
    assert!(summary["config"]["ledger"]
        .as_str()
        .unwrap()
        .ends_with("(started by lockbench)"));
    let acquired = s["acquired"].as_u64().unwrap();
    assert!(acquired > 0);

    let w = json(&run.join("redlock/workers.json"));
    assert!(w["lost"].as_array().unwrap().is_empty(), "{w}");
    let per = w["per_worker"].as_array().unwrap();
    assert_eq!(per.len(), 3);
    let sum = |k: &str| per.iter().map(|p| p[k].as_u64().unwrap()).sum::<u64>();
    // Every event each worker sent is in the one history, and nothing else; the workers'
    // three run-end marks are kept as one (the earliest).
    let merged = history(&run.join("redlock/history.jsonl"));
    assert_eq!(merged.iter().filter(|e| e["type"] == "run-end").count(), 1);
    assert_eq!(merged.len() as u64 + 2, sum("events"));
    assert_eq!(w["merged_events"].as_u64().unwrap(), merged.len() as u64);
    // Successful acquisitions: merged history = sum of the workers' = the summary's = the
    // ledger's committed sections.
    let oks = merged.iter().filter(|e| is(e, "ok", "acquire")).count() as u64;
    assert_eq!(oks, sum("acquired"));
    assert_eq!(oks, acquired);
    assert_eq!(ledger_ends(&run.join("redlock/ledger.sqlite")), acquired);
    // Disjoint client ranges 0..2, 2..4, 4..6, each worker's events in its own range.
    for (i, p) in per.iter().enumerate() {
        assert_eq!(p["client_base"].as_u64().unwrap(), 2 * i as u64);
        assert_eq!(p["clients"].as_u64().unwrap(), 2);
        let own = history(&run.join(format!("redlock/workers/w{i}.history.jsonl")));
        assert!(!own.is_empty());
        for ev in own.iter().filter(|e| e["type"] == "op") {
            let c = ev["client"].as_u64().unwrap();
            assert!(
                (2 * i as u64..2 * i as u64 + 2).contains(&c),
                "worker {i}: {ev}"
            );
        }
    }
    // Merged latency = one histogram holding every sample.
    let lc = &w["latency_check"];
    assert_eq!(lc["merged_count"].as_u64().unwrap(), acquired);
    assert_eq!(lc["single_count"].as_u64().unwrap(), acquired);
    assert_eq!(lc["merged_us"], lc["single_us"], "{lc}");
    assert_eq!(
        s["acquire_ok"]["p99_us"].as_u64(),
        lc["merged_us"][2].as_u64(),
        "{s}"
    );
    // One host, one clock: offsets within a few ms, bounds stated.
    for p in per {
        let off = p["clock"]["offset_us"].as_i64().unwrap();
        assert!(off.abs() < 5_000, "{p}");
        assert!(p["clock_bound_us"].as_u64().unwrap() >= 100, "{p}");
    }
    // No worker outlives the run.
    assert_workers_gone(&run.join("redlock/workers"));
    run
}

#[test]
fn workers_that_cannot_run_are_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let out = assert_refused(
        &[
            "run",
            "--clients",
            "2",
            "--workers",
            "3",
            "--duration",
            "1s",
        ],
        &results,
        "--workers 3 with 2 clients: every worker needs at least one client",
    );
    assert_eq!(out.status.code(), Some(2));
    let out = assert_refused(
        &["run", "--topology", "sentinel", "--workers", "2"],
        &results,
        "workers reach plain node URLs only",
    );
    assert_eq!(out.status.code(), Some(2));
    let out = assert_refused(&["run", "--workers", "0"], &results, "must be at least 1");
    assert_eq!(out.status.code(), Some(2));
}

/// Waits for the workers of a run under `results` to be ready; returns their directory.
fn workers_ready(results: &Path, strategy: &str) -> std::path::PathBuf {
    wait_for(Duration::from_secs(90), "the workers to start", || {
        let run = std::fs::read_dir(results)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.is_dir() && !p.ends_with("latest"))?;
        let dir = run.join(strategy).join("workers");
        dir.join("pids.json").exists().then_some(dir)
    })
}

#[test]
fn ctrl_c_at_the_coordinator_stops_every_worker_and_keeps_what_they_measured() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let mut child = spawn_in(
        [
            "run",
            "--clients",
            "4",
            "--duration",
            "60s",
            "--workers",
            "2",
            "--no-progress",
        ],
        &results,
        Stdio::null(),
        Stdio::null(),
    );
    let workers_dir = workers_ready(&results, "single");
    let worker_pids = pids(&workers_dir);
    assert_eq!(worker_pids.len(), 2);
    wait_for(Duration::from_secs(30), "a first batch", || {
        std::fs::metadata(workers_dir.join("w0.history.jsonl"))
            .ok()
            .filter(|m| m.len() > 0)
    });
    signal(&child, libc::SIGINT);
    let status = wait_exit(&mut child, Duration::from_secs(60), "the interrupted run");
    assert_eq!(status.code(), Some(130));
    for pid in worker_pids {
        assert!(!alive(pid), "worker {pid} outlived its coordinator");
    }
    let run = workers_dir.parent().unwrap().parent().unwrap();
    let summary = json(&run.join("summary.json"));
    assert_eq!(summary["status"], "interrupted", "{summary}");
    let w = json(&run.join("single/workers.json"));
    assert!(w["lost"].as_array().unwrap().is_empty(), "{w}");
    assert!(summary["strategies"][0]["acquired"].as_u64().unwrap() > 0);
}

#[test]
fn a_worker_killed_mid_run_is_lost_and_the_run_completes_saying_so() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let log = std::fs::File::create(tmp.path().join("stdout")).unwrap();
    let mut child = spawn_in(
        [
            "run",
            "--topology",
            "single",
            "--strategy",
            "single",
            "--clients",
            "6",
            "--resources",
            "2",
            "--duration",
            "6s",
            "--workers",
            "3",
            "--no-progress",
        ],
        &results,
        Stdio::from(log),
        Stdio::null(),
    );
    // Once the workers run and worker 1 has sent some history, kill it.
    let workers_dir = workers_ready(&results, "single");
    let victim = pids(&workers_dir)[1];
    wait_for(Duration::from_secs(30), "worker 1's first batch", || {
        std::fs::metadata(workers_dir.join("w1.history.jsonl"))
            .ok()
            .filter(|m| m.len() > 0)
    });
    // SAFETY: kill(2) on the pid of a worker this test's run started.
    assert_eq!(
        unsafe { libc::kill(victim as libc::pid_t, libc::SIGKILL) },
        0
    );
    let status = wait_exit(&mut child, Duration::from_secs(120), "the run");
    let stdout = std::fs::read_to_string(tmp.path().join("stdout")).unwrap();
    // Valid or unknown (its last operations are info); never invalid, never failed.
    assert!(
        matches!(status.code(), Some(0) | Some(3)),
        "{status:?}\n{stdout}"
    );
    assert!(
        stdout.contains("LOST 1: worker 1 (its process exited"),
        "{stdout}"
    );
    let run = workers_dir.parent().unwrap().parent().unwrap();
    let summary = json(&run.join("summary.json"));
    assert_eq!(summary["status"], "completed");
    let w = json(&run.join("single/workers.json"));
    let lost = w["lost"].as_array().unwrap();
    assert_eq!(lost.len(), 1, "{w}");
    assert_eq!(lost[0]["worker"], 1);
    // Worker 1's clients (2, 3): what they had open at the loss is closed there, as info
    // operations or crashes, all at one moment; the other workers ran to their end.
    let merged = history(&run.join("single/history.jsonl"));
    let closing: Vec<&serde_json::Value> = merged
        .iter()
        .filter(|e| {
            (e["kind"] == "info" || e["type"] == "crash")
                && matches!(e["client"].as_u64(), Some(2) | Some(3))
        })
        .collect();
    assert!(!closing.is_empty(), "nothing of worker 1 was closed");
    // Open operations complete `info` at the loss (moved later by worker 1's clock bound);
    // holders crash no later than that (at the last instant worker 1 was heard of).
    let lost_at = lost[0]["at_us"].as_u64().unwrap();
    let bound = w["per_worker"][1]["clock_bound_us"].as_u64().unwrap();
    for e in &closing {
        let t = e["time_us"].as_u64().unwrap();
        if e["kind"] == "info" {
            assert!(
                (lost_at..=lost_at + bound).contains(&t),
                "{e}: lost at {lost_at} ± {bound}"
            );
        } else {
            assert!(t <= lost_at, "{e}: lost at {lost_at}");
        }
    }
    for e in closing.iter().filter(|e| e["kind"] == "info") {
        assert!(e["error"]
            .as_str()
            .unwrap()
            .contains("worker running this client was lost"));
    }
    let per = w["per_worker"].as_array().unwrap();
    for i in [0, 2] {
        assert!(per[i]["events"].as_u64().unwrap() > 0, "{w}");
    }
    let verdict = summary["strategies"][0]["check"]["verdict"]
        .as_str()
        .unwrap();
    assert_ne!(verdict, "invalid", "{stdout}");
    assert_workers_gone(&workers_dir);
}

/// The one run directory a `lockbench chaos <file>` made under `results`.
fn only_run(results: &Path) -> std::path::PathBuf {
    let runs: Vec<_> = std::fs::read_dir(results)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !p.ends_with("latest"))
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].clone()
}

/// The fault window (closed) of `kind` whose first target is `target`: (start, end) µs.
fn window(history: &[serde_json::Value], kind: &str, target: &str) -> (u64, u64) {
    history
        .iter()
        .filter(|e| e["type"] == "fault" && e["kind"] == kind && e["targets"][0] == target)
        .find_map(|e| Some((e["start_us"].as_u64()?, e["end_us"].as_u64()?)))
        .unwrap_or_else(|| panic!("no closed {kind} window on {target}"))
}

/// Client `client`'s `kind` events of `f` timed inside `from..to` µs.
fn ops_in(history: &[serde_json::Value], client: u64, kind: &str, from: u64, to: u64) -> usize {
    history
        .iter()
        .filter(|e| e["type"] == "op" && e["client"] == client && e["kind"] == kind)
        .filter(|e| (from..to).contains(&e["time_us"].as_u64().unwrap()))
        .count()
}

const FOUR_WORKERS: &str = r#"
claim = "a fault on one worker stays with that worker"
topology = "single"
strategies = ["single-fenced"]
workers = 4

[workload]
clients = 4
resources = 4
hold = "20ms"
ttl = "500ms"
duration = "8s"

# Longer than the coordinator's 5 s heartbeat rule: a scheduled pause is not a lost worker.
[[nemesis]]
at = "1s"
duration = "6s"
fault = "client-pause"
target = "worker:1"

[[nemesis]]
at = "2s"
fault = "client-crash"
target = "worker:2"

[[nemesis]]
at = "1s"
duration = "3s"
fault = "partition"
target = "worker:3"
"#;

#[test]
fn a_paused_crashed_or_cut_off_worker_stalls_only_its_own_clients() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("four.toml");
    std::fs::write(&file, FOUR_WORKERS).unwrap();
    let results = tmp.path().join("results");
    let out = lockbench_in(["chaos", file.to_str().unwrap(), "--no-progress"], &results)
        .output()
        .unwrap();
    let (stdout, _) = expect_code(&out, 0, "the scenario runs to its end");
    let run = only_run(&results);
    let summary = json(&run.join("summary.json"));
    let verdict = summary["strategies"][0]["check"]["verdict"].clone();
    // The crashed worker's last sections may lack their history (unknown), never a violation.
    assert!(
        verdict == "valid" || verdict == "unknown",
        "{verdict}\n{stdout}"
    );
    let dir = run.join("single-fenced");
    let w = json(&dir.join("workers.json"));
    // Only the crashed worker is lost, and the nemesis is named; the worker paused for 6 s
    // (past the 5 s heartbeat rule) is not.
    let lost = w["lost"].as_array().unwrap();
    assert_eq!(lost.len(), 1, "{w}");
    assert_eq!(lost[0]["worker"], 2);
    let why = lost[0]["why"].as_str().unwrap();
    assert!(
        why.contains("killed by the nemesis (client-crash worker:2"),
        "{why}"
    );
    assert_eq!(w["fault_windows"].as_u64(), Some(5), "{w}");
    let h = history(&dir.join("history.jsonl"));
    let margin = 100_000 + w["clock_bound_us"].as_u64().unwrap();
    // The pause: worker 1's client (id 1) records nothing while its process is stopped, and
    // acquires again once it resumes; worker 0 keeps acquiring throughout.
    let (ps, pe) = window(&h, "client-pause", "worker:1");
    assert!(pe - ps >= 5_900_000, "paused {ps}..{pe}");
    for kind in ["invoke", "ok", "fail", "info"] {
        assert_eq!(ops_in(&h, 1, kind, ps + margin, pe - margin), 0, "{kind}");
    }
    assert!(
        ops_in(&h, 1, "ok", pe, u64::MAX) > 0,
        "worker 1 never resumed"
    );
    assert!(ops_in(&h, 0, "ok", ps, pe) >= 5, "worker 0 stalled too");
    // The cut: worker 3's own proxies only; worker 0 acquires while worker 3 cannot.
    let (cs, ce) = window(&h, "partition", "worker:3");
    assert_eq!(ops_in(&h, 3, "ok", cs + margin, ce), 0);
    assert!(
        ops_in(&h, 3, "ok", ce, u64::MAX) > 0,
        "worker 3 never came back"
    );
    assert!(ops_in(&h, 0, "ok", cs, ce) >= 5, "worker 0 was cut off too");
    // The crash: worker 2 (client 2) starts nothing after it.
    let crash = h
        .iter()
        .find(|e| e["type"] == "fault" && e["kind"] == "client-crash")
        .and_then(|e| e["start_us"].as_u64())
        .unwrap();
    assert_eq!(ops_in(&h, 2, "invoke", crash + margin, u64::MAX), 0);
    assert!(ops_in(&h, 2, "ok", 0, crash) > 0);
    assert_workers_gone(&dir.join("workers"));
}

#[test]
fn ctrl_c_while_a_worker_is_paused_stops_every_worker() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("paused.toml");
    std::fs::write(
        &file,
        r#"
claim = "Ctrl-C during a worker pause"
topology = "single"
strategies = ["single"]
workers = 2
[workload]
clients = 2
resources = 1
hold = "10ms"
ttl = "500ms"
duration = "40s"
[[nemesis]]
at = "500ms"
duration = "30s"
fault = "client-pause"
target = "worker:1"
"#,
    )
    .unwrap();
    let results = tmp.path().join("results");
    let mut child = spawn_in(
        ["chaos", file.to_str().unwrap(), "--no-progress"],
        &results,
        Stdio::null(),
        Stdio::null(),
    );
    let workers_dir = workers_ready(&results, "single");
    let worker_pids = pids(&workers_dir);
    assert_eq!(worker_pids.len(), 2);
    // Worker 1 stopped (state T) by the nemesis.
    wait_for(Duration::from_secs(30), "worker 1 to be stopped", || {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", worker_pids[1])).ok()?;
        stat.rsplit(')')
            .next()
            .filter(|s| s.trim_start().starts_with('T'))
            .map(|_| ())
    });
    signal(&child, libc::SIGINT);
    let status = wait_exit(&mut child, Duration::from_secs(60), "the interrupted run");
    assert_eq!(status.code(), Some(130));
    for pid in worker_pids {
        assert!(!alive(pid), "worker {pid} outlived its coordinator");
    }
    common::process::assert_none_running_under(&only_run(&results));
}

#[test]
fn a_worker_cut_off_with_a_minority_and_paused_overlaps_the_worker_with_the_majority() {
    // chaos/26a as shipped (tests/chaos_scenarios.rs leaves it to this test).
    let file = common::cli::shipped_scenario("26a-redlock-worker-minority-pause.toml");
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let out = lockbench_in(["chaos", file.to_str().unwrap(), "--no-progress"], &results)
        .output()
        .unwrap();
    let (stdout, _) = expect_code(&out, 0, "26a's two expectations hold");
    assert!(
        stdout.contains("1 scenario(s), 2 expectation(s) as claimed, 0 not, 0 scenario error(s)"),
        "{stdout}"
    );
    let run = only_run(&results);
    let check = json(&run.join("checker.json"));
    assert_eq!(check["redlock"]["verdict"], "invalid", "{stdout}");
    assert_eq!(check["redlock-fenced"]["verdict"], "valid", "{stdout}");
    for strategy in ["redlock", "redlock-fenced"] {
        let w = json(&run.join(strategy).join("workers.json"));
        // Paused twice for 2 s, never counted lost.
        assert!(w["lost"].as_array().unwrap().is_empty(), "{w}");
        // Worker 0 is cut from n3..n5 only, on its own proxies: worker 1 (the majority) takes
        // the lock meanwhile; worker 0, paused, records nothing inside its pause.
        let h = history(&run.join(strategy).join("history.jsonl"));
        let margin = 100_000 + w["clock_bound_us"].as_u64().unwrap();
        let (s, e) = window(&h, "partition", "worker:0/n3,n4,n5");
        assert!(
            ops_in(&h, 1, "ok", s, e) > 0,
            "{strategy}: worker 1 took no lock"
        );
        let (ps, pe) = window(&h, "client-pause", "worker:0");
        assert_eq!(ops_in(&h, 0, "invoke", ps + margin, pe - margin), 0);
    }
}

#[test]
fn bad_worker_targets_are_refused_naming_the_step() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let scenario = |name: &str, workers: &str, target: &str| {
        let path = tmp.path().join(name);
        std::fs::write(
            &path,
            format!(
                "claim = \"x\"\ntopology = \"five\"\nstrategies = [\"redlock\"]\n{workers}\n\
                 [workload]\nclients = 4\nresources = 1\nhold = \"10ms\"\nttl = \"500ms\"\n\
                 duration = \"3s\"\n\n[[nemesis]]\nat = \"1s\"\nduration = \"1s\"\n\
                 fault = \"client-pause\"\ntarget = \"{target}\"\n"
            ),
        )
        .unwrap();
        path.to_str().unwrap().to_string()
    };
    let out = assert_refused(
        &["chaos", &scenario("range.toml", "workers = 2", "worker:2")],
        &results,
        "range.toml:16:10: nemesis[0] (client-pause): worker 2 does not exist (workers are 0..2)",
    );
    assert_eq!(out.status.code(), Some(2));
    let out = assert_refused(
        &["chaos", &scenario("none.toml", "", "worker:0")],
        &results,
        "none.toml:16:10: nemesis[0] (client-pause): `worker:0` targets a worker process, but \
         this test runs every client in one process",
    );
    assert_eq!(out.status.code(), Some(2));
    let out = assert_refused(
        &[
            "chaos",
            &scenario("nodes.toml", "workers = 2", "worker:0/n1"),
        ],
        &results,
        "nodes.toml:16:10: nemesis[0] (client-pause): client-pause acts on the worker's process",
    );
    assert_eq!(out.status.code(), Some(2));
    // `--workers` checks every file against it: claim 09 aims at the holder.
    let claim9 = common::cli::shipped_scenario("09-redlock-process-pause.toml");
    let out = assert_refused(
        &["chaos", claim9.to_str().unwrap(), "--workers", "2"],
        &results,
        "nemesis[0] (client-pause): `holder` needs one process that sees every client",
    );
    assert_eq!(out.status.code(), Some(2));
    let (_, stderr) = common::cli::text(&out);
    assert!(
        stderr.contains("09-redlock-process-pause.toml:"),
        "{stderr}"
    );
}

/// `--launcher kubernetes --emit-manifests DIR`: the manifests are written without a cluster
/// and starting nothing; `kubectl` reads each as Kubernetes objects offline; the Job is
/// Indexed with one pod per slot retried under the same index, each pod takes its slot from
/// its completion index and reaches the coordinator through a headless Service that selects
/// the coordinator's pod (and not the workers'), which runs this same command.
#[cfg(feature = "kubernetes")]
#[test]
fn kubernetes_manifests_are_generated_and_valid_without_a_cluster() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let dir = tmp.path().join("manifests");
    let ledger = "postgres://lockbench@ledger.bench.svc:5432/postgres";
    let dir_s = dir.display().to_string();
    let args = [
        "run",
        "--topology",
        "five",
        "--strategy",
        "single,redlock",
        "--clients",
        "6",
        "--duration",
        "5s",
        "--workers",
        "3",
        "--launcher",
        "kubernetes",
        "--ledger",
        ledger,
        "--kube-namespace",
        "bench",
        "--worker-image",
        "registry.example/lockbench:1",
        "--emit-manifests",
        &dir_s,
    ];
    let out = lockbench_in(args, &results).output().unwrap();
    let (stdout, _) = expect_code(&out, 0, "writing the manifests");
    assert!(stdout.contains("workers-redlock.json"), "{stdout}");
    assert!(!results.exists(), "--emit-manifests started a run");
    let read = |name: &str| json(&dir.join(name));
    let list = read("coordinator.json");
    assert_eq!(list["kind"], "List");
    let items = list["items"].as_array().unwrap();
    let of = |kind: &str| {
        items
            .iter()
            .find(|i| i["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} in {list}"))
    };
    let kinds: Vec<&str> = items.iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["ServiceAccount", "Role", "RoleBinding", "Service", "Pod"]
    );
    for i in items {
        assert_eq!(i["metadata"]["namespace"], "bench", "{i}");
        assert_eq!(i["metadata"]["name"], "lockbench-coordinator", "{i}");
    }
    let (service, pod) = (of("Service"), of("Pod"));
    // The Service selects the coordinator's pod: every selector label is on it.
    let selector = service["spec"]["selector"].as_object().unwrap();
    assert!(!selector.is_empty());
    for (k, v) in selector {
        assert_eq!(&pod["metadata"]["labels"][k], v, "selector {k}");
    }
    assert_eq!(
        service["spec"]["clusterIP"], "None",
        "headless: any proxy port"
    );
    assert_eq!(service["spec"]["ports"][0]["port"], 7690);
    let c = &pod["spec"]["containers"][0];
    assert_eq!(c["image"], "registry.example/lockbench:1");
    assert_eq!(pod["spec"]["serviceAccountName"], "lockbench-coordinator");
    let pod_args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(pod_args[0], "run");
    assert_eq!(
        &pod_args[1..],
        &args[1..args.len() - 2],
        "the same run, without --emit-manifests and the --results path the test added"
    );
    let role = of("Role");
    assert!(role["rules"][0]["verbs"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("create")));
    assert_eq!(
        of("RoleBinding")["roleRef"]["name"],
        "lockbench-coordinator"
    );

    for strategy in ["single", "redlock"] {
        let job = read(&format!("workers-{strategy}.json"));
        assert_eq!(
            (job["apiVersion"].as_str(), job["kind"].as_str()),
            (Some("batch/v1"), Some("Job"))
        );
        assert_eq!(job["metadata"]["name"], format!("lockbench-{strategy}"));
        assert_eq!(job["metadata"]["namespace"], "bench");
        let spec = &job["spec"];
        assert_eq!(spec["completionMode"], "Indexed");
        assert_eq!(spec["completions"].as_u64(), Some(3));
        assert_eq!(spec["parallelism"].as_u64(), Some(3));
        assert!(spec["backoffLimitPerIndex"].as_u64().unwrap() >= 1);
        let template = &spec["template"];
        assert_eq!(
            template["spec"]["restartPolicy"], "Never",
            "backoffLimitPerIndex needs it"
        );
        // The Service does not select the workers' pods.
        assert!(selector
            .iter()
            .any(|(k, v)| &template["metadata"]["labels"][k] != v));
        let env: std::collections::BTreeMap<&str, &serde_json::Value> = template["spec"]
            ["containers"][0]["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["name"].as_str().unwrap(), e))
            .collect();
        assert_eq!(
            env["LOCKBENCH_COORDINATOR"]["value"],
            "http://lockbench-coordinator.bench.svc:7690"
        );
        assert_eq!(
            env["JOB_COMPLETION_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        );
        assert_eq!(template["spec"]["containers"][0]["args"][0], "worker");
    }

    // kubectl reads every file as Kubernetes objects, offline (`--local`: no server).
    let kubectl_reads = |path: &Path| {
        std::process::Command::new("kubectl")
            .args(["label", "--local", "-o", "json", "-f"])
            .arg(path)
            .arg("lockbench/checked=yes")
            .output()
    };
    match kubectl_reads(&dir.join("workers-single.json")) {
        Err(e) => common::docker::skip("the kubectl part of the manifest test", &e.to_string()),
        Ok(_) => {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let out = kubectl_reads(&path).unwrap();
                expect_code(&out, 0, &format!("kubectl reading {}", path.display()));
            }
            // ... and refuses an object without a kind.
            let mut broken = read("workers-single.json");
            broken.as_object_mut().unwrap().remove("kind");
            let bad = tmp.path().join("broken.json");
            std::fs::write(&bad, broken.to_string()).unwrap();
            assert!(!kubectl_reads(&bad).unwrap().status.success());
        }
    }
}

/// What pods could not reach is refused before anything starts: the ledger lockbench would
/// start on the coordinator's loopback, and nodes reached directly on it.
#[cfg(feature = "kubernetes")]
#[test]
fn kubernetes_workers_that_could_not_reach_the_run_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let dir = tmp.path().join("m").display().to_string();
    let base = [
        "run",
        "--workers",
        "2",
        "--launcher",
        "kubernetes",
        "--emit-manifests",
        &dir,
    ];
    let out = assert_refused(
        &base,
        &results,
        "give --ledger postgres://USER@HOST:PORT/DB",
    );
    assert_eq!(out.status.code(), Some(2));
    let mut direct = base.to_vec();
    direct.extend(["--direct", "--no-audit"]);
    let out = assert_refused(&direct, &results, "--launcher kubernetes with --direct");
    assert_eq!(out.status.code(), Some(2));
    assert!(!Path::new(&dir).exists());
}
