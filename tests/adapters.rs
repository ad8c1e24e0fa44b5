//! `adapter:*` strategies end to end: the real `lockbench` binary, a real redis-server, and the
//! shipped Python adapter (`adapters/python/redis_py.py`) on the interpreter of
//! `scripts/adapters-setup.sh`'s environment; and adapters that break the protocol.
//!
//! Each test points `LOCKBENCH_ADAPTER_PYTHON` at a wrapper in its own temporary directory
//! that `cd`s there before running the interpreter, so the adapter processes of that test are
//! exactly the processes whose working directory is that directory.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::cli::{expect_code, json, latest, lockbench, lockbench_in, summary_so_far, text};
use common::process::{alive, assert_all_gone, pids_under, signal, wait_exit};
use common::wait::wait_for;
use lockbench::strategy::StrategyKind;

/// The shipped adapters' interpreter; the test fails, saying how to make it, when it is missing.
fn venv_python() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(".adapters/venv/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run scripts/adapters-setup.sh (scripts/ensure-deps.sh does)",
        p.display()
    );
    p
}

/// Writes an executable `sh` script `name` in `dir` that runs `body` after `cd dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    let text = format!("#!/bin/sh\ncd '{}' || exit 9\n{body}\n", dir.display());
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn run_args(extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "run",
        "-s",
        "adapter:redis-py",
        "--topology",
        "single",
        "--no-progress",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// A temporary directory with the adapters' working directory `adapter-cwd` made in it (the
/// wrapped interpreter records every adapter process it starts there).
fn adapter_workdir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("adapter-cwd");
    std::fs::create_dir(&work).unwrap();
    (tmp, work)
}

/// No adapter process started under `work` is still running after `what`. lockbench has sent
/// every adapter `SIGKILL` (or closed its stdin) before it exits, but on a loaded machine the
/// kernel may finish a killed process a little after that: survivors get 10 s to be gone.
fn assert_no_adapter_left(work: &Path, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let survivors = pids_under(work);
        if survivors.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: adapter processes left 10 s after it: {survivors:?}"
        );
        std::thread::sleep(common::wait::POLL);
    }
}

/// A wrapper `python` in `work` that runs the shipped adapters' interpreter from there.
fn wrapped_python(work: &Path) -> PathBuf {
    script(
        work,
        "python",
        &format!("exec '{}' \"$@\"", venv_python().display()),
    )
}

#[test]
fn fault_free_runs_of_every_shipped_adapter_are_valid_and_leave_no_adapter_running() {
    for (strategy, topology) in [
        ("adapter:redis-py", "single"),
        ("adapter:python-redis-lock", "single"),
        ("adapter:pottery-redlock", "five"),
    ] {
        let (tmp, work) = adapter_workdir();
        let python = wrapped_python(&work);
        let results = tmp.path().join("results");
        // Each library waits for a held lock up to ~1 s (100 attempts of 5 + 5 ms mapped onto
        // its own blocking acquire), so a loaded machine's slow sections make few acquires
        // give up as busy (with lockbench's default 3 attempts, ~20 ms, they could).
        let mut args = run_args(&[
            "-c",
            "4",
            "-r",
            "2",
            "--ops",
            "300",
            "--ttl",
            "2s",
            "--hold",
            "2ms",
            "--retry-attempts",
            "100",
        ]);
        args[2] = strategy.to_string();
        args[4] = topology.to_string();
        let out = lockbench_in(args, &results)
            .env("LOCKBENCH_ADAPTER_PYTHON", &python)
            .output()
            .unwrap();
        let (stdout, _) = expect_code(&out, 0, strategy);
        assert!(stdout.contains(strategy), "{stdout}");
        let run = latest(&results);
        let summary = json(&run.join("summary.json"));
        let st = &summary["strategies"][0];
        assert_eq!(st["strategy"], strategy, "{st}");
        assert_eq!(st["attempts"], 300, "{st}");
        let acquired = st["acquired"].as_u64().unwrap();
        assert!(acquired > 100, "4 clients on 2 resources, 2 ms holds: {st}");
        assert_eq!(st["errors"], 0, "{st}");
        assert_eq!(st["check"]["verdict"], "valid", "{st}");
        let dir = run.join(strategy);
        assert_eq!(json(&dir.join("checker.json"))["verdict"], "valid");
        let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
        let ok_acquires = history
            .lines()
            .filter(|l| l.contains("\"ok\"") && l.contains("\"acquire\""))
            .count() as u64;
        assert_eq!(ok_acquires, acquired, "{strategy}: history vs summary");
        assert!(dir.join("adapter.log").exists(), "adapter stderr kept");
        // Each adapter process reported the harness's overhead when it ended.
        let messages = std::fs::read_to_string(dir.join("adapter-messages.jsonl")).unwrap();
        assert_eq!(
            messages.matches("\"overhead\"").count(),
            4,
            "one adapter process per client: {messages}"
        );
        assert_no_adapter_left(&work, strategy);
    }
}

#[test]
fn many_logical_clients_share_one_adapter_process_with_a_shared_connection() {
    let (tmp, work) = adapter_workdir();
    let python = wrapped_python(&work);
    let results = tmp.path().join("results");
    let out = lockbench_in(
        run_args(&[
            "-c",
            "16",
            "-r",
            "4",
            "--ops",
            "400",
            "--ttl",
            "2s",
            "--hold",
            "1ms",
            "--shared-connection",
        ]),
        &results,
    )
    .env("LOCKBENCH_ADAPTER_PYTHON", &python)
    .output()
    .unwrap();
    expect_code(&out, 0, "16 clients through one adapter process");
    let run = latest(&results);
    let st = &json(&run.join("summary.json"))["strategies"][0];
    assert_eq!(st["errors"], 0, "{st}");
    assert!(st["acquired"].as_u64().unwrap() > 100, "{st}");
    assert_eq!(st["check"]["verdict"], "valid", "{st}");
    let dir = run.join("adapter:redis-py");
    let messages = std::fs::read_to_string(dir.join("adapter-messages.jsonl")).unwrap();
    assert_eq!(
        messages.matches("\"overhead\"").count(),
        1,
        "one process: {messages}"
    );
    assert_no_adapter_left(&work, "the run");
}

#[test]
fn settings_an_adapter_cannot_run_are_bad_input_in_its_own_words() {
    let (tmp, work) = adapter_workdir();
    let python = wrapped_python(&work);
    // Exit 2 before any client runs; stderr, and no adapter left.
    let refused = |args: Vec<String>, what: &str| {
        let out = lockbench_in(args, &tmp.path().join("results"))
            .env("LOCKBENCH_ADAPTER_PYTHON", &python)
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{what}: {stdout}\n{stderr}");
        assert_no_adapter_left(&work, what);
        stderr
    };
    // --watchdog with a library that cannot renew by itself (its hello has no auto-renew).
    let stderr = refused(
        run_args(&["-c", "1", "--ops", "10", "--watchdog"]),
        "the watchdog run",
    );
    assert!(
        stderr.contains("adapter redis-py refused the run's settings")
            && stderr.contains("no auto-renew capability"),
        "{stderr}"
    );
    // A TTL the library cannot express: python-redis-lock's init refuses 500 ms (it expires in
    // whole seconds). Its words, not "raise --connect-timeout".
    let mut args = run_args(&["--ttl", "500ms", "-c", "2", "--ops", "10"]);
    args[2] = "adapter:python-redis-lock".into();
    let stderr = refused(args, "the sub-second TTL run");
    assert!(
        stderr.contains("adapter python-redis-lock refused the run's settings")
            && stderr.contains("TTL 500 ms: python-redis-lock expires in whole seconds")
            && !stderr.contains("--connect-timeout"),
        "{stderr}"
    );
}

#[test]
fn an_adapter_printing_non_json_stops_the_run_naming_it_and_the_line_and_keeps_the_results() {
    let (tmp, work) = adapter_workdir();
    // A valid hello and init answer, then prose instead of a reply (line 3 of its stdout).
    let python = script(
        &work,
        "python",
        r#"echo '{"type":"hello","protocol":1,"adapter":"broken","library":{"name":"none","version":"0"},"capabilities":["acquire"]}'
read init
echo '{"in_reply_to":1,"type":"ok"}'
while read req; do echo "Traceback: this is not JSON"; done"#,
    );
    let results = tmp.path().join("results");
    let out = lockbench_in(
        run_args(&["-c", "1", "--duration", "5s", "--ttl", "1s"]),
        &results,
    )
    .env("LOCKBENCH_ADAPTER_PYTHON", &python)
    .output()
    .unwrap();
    let (stdout, stderr) = text(&out);
    assert_ne!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for needle in [
        "adapter redis-py",
        "line 3 of its stdout",
        "Traceback: this is not JSON",
    ] {
        assert!(stderr.contains(needle), "lacks {needle:?}:\n{stderr}");
    }
    // Partial results are kept: the history with the acquire's invoke and its unknown outcome.
    let dir = latest(&results).join("adapter:redis-py");
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    assert!(history.contains("\"invoke\""), "{history}");
    assert!(history.contains("\"info\""), "{history}");
    assert_no_adapter_left(&work, "the run");
}

#[test]
fn an_adapter_that_exits_at_once_is_a_connect_error_naming_it() {
    let (tmp, work) = adapter_workdir();
    let python = script(&work, "python", "echo 'starting up' >&2; exit 3");
    let results = tmp.path().join("results");
    let out = lockbench_in(run_args(&["-c", "1", "--ops", "10"]), &results)
        .env("LOCKBENCH_ADAPTER_PYTHON", &python)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_ne!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("adapter redis-py") && stderr.contains("closed its stdout after 0 line"),
        "{stderr}"
    );
    assert_no_adapter_left(&work, "the run");
}

/// The library claims in `adapters/scenarios/`, with the verdict each strategy must get.
const CLAIMS: [(&str, &str, &str); 5] = [
    // No fencing token: a holder stopped (SIGSTOP) past the TTL writes after the next holder.
    ("redis-py-client-pause", "adapter:redis-py", "invalid"),
    // The same with pottery's Redlock on five nodes.
    (
        "pottery-redlock-client-pause",
        "adapter:pottery-redlock",
        "invalid",
    ),
    // The library's own renewal thread keeps the lock through work twice the TTL...
    (
        "python-redis-lock-slow-work-renewed",
        "adapter:python-redis-lock",
        "valid",
    ),
    // ...which it needs: without it the same slow work loses the lock.
    (
        "python-redis-lock-slow-work-unrenewed",
        "adapter:python-redis-lock",
        "invalid",
    ),
    // ...and stops with the process: a stopped holder loses the lock and writes late.
    (
        "python-redis-lock-pause-renewed",
        "adapter:python-redis-lock",
        "invalid",
    ),
];

#[test]
fn library_claims_hold_under_sigstop_and_slow_work() {
    let (tmp, work) = adapter_workdir();
    let python = wrapped_python(&work);
    let scenarios = Path::new(env!("CARGO_MANIFEST_DIR")).join("adapters/scenarios");
    let shipped = std::fs::read_dir(&scenarios).unwrap().count();
    assert_eq!(
        shipped,
        CLAIMS.len(),
        "a new scenario must be listed in CLAIMS"
    );
    let results = tmp.path().join("results");
    let out = lockbench_in(["chaos", scenarios.to_str().unwrap()], &results)
        .env("LOCKBENCH_ADAPTER_PYTHON", &python)
        .output()
        .unwrap();
    let (stdout, _) = expect_code(&out, 0, "the library claims");
    assert!(
        stdout.contains("5 scenario(s), 5 expectation(s) as claimed, 0 not, 0 scenario error(s)"),
        "{stdout}"
    );
    let batch = latest(&results);
    for (scenario, strategy, verdict) in CLAIMS {
        let checker = json(&batch.join(scenario).join(strategy).join("checker.json"));
        assert_eq!(checker["verdict"], verdict, "{scenario}: {checker}");
    }
    // Work past the TTL without renewal: the library itself says, after the work, that it no
    // longer owns the lock (`hold` answers owns=false); recorded, and counted by the checker.
    let dir = batch
        .join("python-redis-lock-slow-work-unrenewed")
        .join("adapter:python-redis-lock");
    let notices = json(&dir.join("checker.json"))["stats"]["library_lost_notices"]
        .as_u64()
        .unwrap();
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let recorded = history
        .lines()
        .filter(|l| l.contains("\"owns\":false") && l.contains("\"extend\""))
        .count() as u64;
    assert!(
        notices >= 1 && notices == recorded,
        "{notices} vs {recorded}"
    );
    assert_no_adapter_left(&work, "the run");
}

#[test]
fn sigint_during_an_adapter_run_keeps_results_and_leaves_no_adapter_or_server() {
    let (tmp, work) = adapter_workdir();
    let python = wrapped_python(&work);
    let results = tmp.path().join("results");
    let mut child = lockbench_in(
        run_args(&["-c", "2", "-d", "60s", "--hold", "5ms"]),
        &results,
    )
    .env("LOCKBENCH_ADAPTER_PYTHON", &python)
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    wait_for(
        Duration::from_secs(30),
        "a summary with acquisitions",
        || {
            let s = summary_so_far(&results)?;
            (s["strategies"][0]["acquired"].as_u64()? > 0).then_some(())
        },
    );
    let adapters = pids_under(&work);
    assert_eq!(adapters.len(), 2, "one adapter process per client");
    let nodes = pids_under(&latest(&results).join("nodes"));
    assert_eq!(nodes.len(), 1, "the single redis-server");
    // One adapter is stopped (as by a client pause) when the run is interrupted: it is killed
    // all the same.
    // SAFETY: kill(2) to an adapter process this test's lockbench started.
    assert_eq!(
        unsafe { libc::kill(adapters[0] as libc::pid_t, libc::SIGSTOP) },
        0
    );
    signal(&child, libc::SIGINT);
    let status = wait_exit(&mut child, Duration::from_secs(30), "lockbench");
    assert_eq!(status.code(), Some(130));
    let s = json(&latest(&results).join("summary.json"));
    assert_eq!(s["status"], "interrupted");
    assert!(s["strategies"][0]["acquired"].as_u64().unwrap() > 0, "{s}");
    assert_all_gone(&adapters);
    assert_all_gone(&nodes);
}

#[test]
fn an_adapter_that_never_answers_gives_timeouts_recorded_as_unknown_and_no_verdict() {
    let (tmp, work) = adapter_workdir();
    let python = script(
        &work,
        "python",
        r#"echo '{"type":"hello","protocol":1,"adapter":"mute","library":{"name":"none","version":"0"},"capabilities":["acquire"]}'
read init
echo '{"in_reply_to":1,"type":"ok"}'
while read req; do :; done"#,
    );
    let results = tmp.path().join("results");
    let out = lockbench_in(
        run_args(&["-c", "1", "--duration", "2s", "--ttl", "1s"]),
        &results,
    )
    .env("LOCKBENCH_ADAPTER_PYTHON", &python)
    .output()
    .unwrap();
    let (stdout, stderr) = text(&out);
    let dir = latest(&results).join("adapter:redis-py");
    let checker = json(&dir.join("checker.json"));
    assert_eq!(
        checker["verdict"], "unknown",
        "{checker}\n{stdout}\n{stderr}"
    );
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let timeouts = history
        .lines()
        .filter(|l| l.contains("\"info\"") && l.contains("adapter redis-py: no reply within"))
        .count();
    assert!(timeouts >= 1, "{history}");
    assert!(!history.contains("\"ok\""), "{history}");
    assert_no_adapter_left(&work, "the run");
}

#[test]
fn an_adapter_that_dies_while_holding_is_a_crash_with_no_write_and_a_clear_error() {
    let (tmp, work) = adapter_workdir();
    // Answers init and one acquire, then exits when asked to hold (line 3 was its last).
    let python = script(
        &work,
        "python",
        r#"echo '{"type":"hello","protocol":1,"adapter":"dies","library":{"name":"none","version":"0"},"capabilities":["acquire","hold"]}'
read init
echo '{"in_reply_to":1,"type":"ok"}'
read acquire
echo '{"in_reply_to":2,"client":0,"type":"ok","owner":"o1"}'
read hold
exit 1"#,
    );
    let results = tmp.path().join("results");
    let out = lockbench_in(
        run_args(&[
            "-c",
            "1",
            "--duration",
            "5s",
            "--ttl",
            "1s",
            "--hold",
            "10ms",
        ]),
        &results,
    )
    .env("LOCKBENCH_ADAPTER_PYTHON", &python)
    .output()
    .unwrap();
    let (stdout, stderr) = text(&out);
    assert_ne!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("adapter redis-py closed its stdout after 3 line(s)"),
        "{stderr}"
    );
    let dir = latest(&results).join("adapter:redis-py");
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    assert!(history.contains("\"owner\":\"o1\""), "{history}");
    assert!(
        history.contains("\"crash\""),
        "the holder's crash is recorded: {history}"
    );
    assert!(
        !history.contains("\"release\""),
        "a crashed holder releases nothing: {history}"
    );
    assert_no_adapter_left(&work, "the run");
}

#[test]
fn adapter_check_passes_every_shipped_adapter_and_fails_a_broken_one() {
    let (tmp, work) = adapter_workdir();
    let python = wrapped_python(&work);
    for strategy in StrategyKind::adapters().iter().map(|k| k.name()) {
        let out = lockbench()
            .args(["adapter", "check", strategy])
            .env("LOCKBENCH_ADAPTER_PYTHON", &python)
            .output()
            .unwrap();
        let (stdout, _) = expect_code(&out, 0, strategy);
        assert_eq!(stdout.matches("PASS  ").count(), 6, "{stdout}");
        assert!(
            stdout.contains(&format!("{strategy}: 6 of 6 steps passed")),
            "{stdout}"
        );
        assert!(
            pids_under(&work).is_empty(),
            "{strategy}: adapter left running"
        );
    }
    // An adapter that answers init, then prose: every step after the handshake fails.
    let broken = tmp.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    let python = script(
        &broken,
        "python",
        r#"echo '{"type":"hello","protocol":1,"adapter":"broken","library":{"name":"none","version":"0"},"capabilities":["acquire"]}'
read init
echo '{"in_reply_to":1,"type":"ok"}'
while read req; do echo "not JSON"; done"#,
    );
    let out = lockbench()
        .args(["adapter", "check", "adapter:redis-py"])
        .env("LOCKBENCH_ADAPTER_PYTHON", &python)
        .output()
        .unwrap();
    let (stdout, _) = expect_code(&out, 1, "a broken adapter");
    assert!(
        stdout.contains("FAIL  acquire and release: acquire: adapter redis-py: adapter redis-py broke the protocol on line 3"),
        "{stdout}"
    );
    assert!(
        stdout.contains("FAIL  a request that times out is unknown: the adapter failed instead"),
        "{stdout}"
    );
    // Only "stdin EOF makes it exit" holds for this one.
    assert!(
        stdout.contains("adapter:redis-py: 1 of 6 steps passed"),
        "{stdout}"
    );
    let log = stdout
        .lines()
        .find_map(|l| l.strip_prefix("adapter log: "))
        .expect("the kept log is named");
    std::fs::remove_dir_all(Path::new(log).parent().unwrap()).unwrap();
}

/// `run --adapter 'command args…'` with a shipped adapter invoked as a raw command.
fn redis_py_command(python: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("adapters/python/redis_py.py");
    format!("'{}' '{}'", python.display(), script.display())
}

#[test]
fn a_users_own_adapter_command_runs_as_a_strategy_and_reports_the_harness_overhead() {
    let (tmp, work) = adapter_workdir();
    let python = wrapped_python(&work);
    let results = tmp.path().join("results");
    let command = redis_py_command(&python);
    let out = lockbench_in(
        [
            "run",
            "--adapter",
            &command,
            "--no-progress",
            "-c",
            "4",
            "-r",
            "2",
            "--ops",
            "200",
            "--ttl",
            "2s",
            "--hold",
            "1ms",
        ],
        &results,
    )
    .output()
    .unwrap();
    let (stdout, _) = expect_code(&out, 0, "--adapter with redis_py.py as a raw command");
    assert!(
        stdout.contains("adapter:command: harness overhead per adapter request"),
        "the summary print names the overhead: {stdout}"
    );
    let run = latest(&results);
    let summary = json(&run.join("summary.json"));
    assert_eq!(summary["config"]["client"]["adapter"], command.as_str());
    let st = &summary["strategies"][0];
    assert_eq!(st["strategy"], "adapter:command", "{st}");
    assert_eq!(st["attempts"], 200, "{st}");
    assert_eq!(st["errors"], 0, "{st}");
    assert_eq!(st["check"]["verdict"], "valid", "{st}");
    // Every acquire, hold and release of the run was timed (init too), in one histogram.
    let overhead = &st["harness"]["adapter_overhead"];
    let acquired = st["acquired"].as_u64().unwrap();
    assert!(
        overhead["count"].as_u64().unwrap() >= st["attempts"].as_u64().unwrap() + 2 * acquired,
        "{overhead}"
    );
    assert!(overhead["p50_us"].as_u64().unwrap() >= 1, "{overhead}");
    assert!(
        overhead["p99_us"].as_u64() >= overhead["p50_us"].as_u64(),
        "{overhead}"
    );
    assert_no_adapter_left(&work, "the run");
    // A command that is not an adapter is refused by its handshake, naming it.
    let out = lockbench_in(
        [
            "run",
            "--adapter",
            "sh -c 'echo hello there'",
            "--no-progress",
            "--ops",
            "5",
        ],
        &results,
    )
    .output()
    .unwrap();
    let (stdout, stderr) = text(&out);
    assert_ne!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("adapter `sh -c echo hello there`")
            && stderr.contains("line 1 of its stdout")
            && stderr.contains("hello there"),
        "{stderr}"
    );
    // Unbalanced quotes are bad input before anything starts.
    let out = lockbench_in(
        ["run", "--adapter", "python3 'oops", "--ops", "5"],
        &results,
    )
    .output()
    .unwrap();
    let (_, stderr) = expect_code(&out, 2, "an open quote");
    assert!(stderr.contains("a quote left open"), "{stderr}");
}

#[test]
fn an_adapter_answering_a_wrong_id_stops_the_run_naming_it_and_the_line_and_keeps_the_results() {
    let (tmp, work) = adapter_workdir();
    // A valid hello and init answer, then a reply to an id lockbench never sent (line 3).
    let adapter = script(
        &work,
        "adapter.sh",
        r#"echo '{"type":"hello","protocol":1,"adapter":"wrong-id","library":{"name":"none","version":"0"},"capabilities":["acquire"]}'
read init
echo '{"in_reply_to":1,"type":"ok"}'
while read req; do echo '{"in_reply_to":999,"client":0,"type":"ok","owner":"x"}'; done"#,
    );
    let results = tmp.path().join("results");
    let out = lockbench_in(
        [
            "run",
            "--adapter",
            adapter.to_str().unwrap(),
            "--no-progress",
            "-c",
            "1",
            "--duration",
            "5s",
        ],
        &results,
    )
    .output()
    .unwrap();
    let (stdout, stderr) = text(&out);
    assert_ne!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for needle in [
        "adapter.sh",
        "line 3 of its stdout",
        "a reply to id 999",
        r#""in_reply_to":999"#,
    ] {
        assert!(stderr.contains(needle), "lacks {needle:?}:\n{stderr}");
    }
    let dir = latest(&results).join("adapter:command");
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    assert!(history.contains("\"invoke\""), "{history}");
    assert!(history.contains("\"info\""), "{history}");
    assert_no_adapter_left(&work, "the run");
}

#[test]
fn chaos_takes_the_adapter_command_for_scenarios_that_list_adapter_command() {
    let (tmp, work) = adapter_workdir();
    let python = wrapped_python(&work);
    let scenario = tmp.path().join("own.toml");
    std::fs::write(
        &scenario,
        r#"claim = "a user's own adapter, fault-free, is valid"
strategies = ["adapter:command"]
topology = "single"

[workload]
clients = 2
resources = 1
hold = "1ms"
ttl = "2s"
duration = "1s"

[expect."adapter:command"]
verdict = "valid"
"#,
    )
    .unwrap();
    let results = tmp.path().join("results");
    // Without a command line anywhere: bad input naming the scenario, nothing started.
    let out = lockbench_in(["chaos", scenario.to_str().unwrap()], &results)
        .output()
        .unwrap();
    let (_, stderr) = expect_code(&out, 2, "no command line");
    assert!(
        stderr.contains("needs a command line") && stderr.contains("own"),
        "{stderr}"
    );
    let out = lockbench_in(
        [
            "chaos",
            scenario.to_str().unwrap(),
            "--adapter",
            &redis_py_command(&python),
        ],
        &results,
    )
    .output()
    .unwrap();
    let (stdout, _) = expect_code(&out, 0, "chaos --adapter");
    assert!(
        stdout.contains("1 scenario(s), 1 expectation(s) as claimed"),
        "{stdout}"
    );
    assert_no_adapter_left(&work, "the run");
}

#[test]
fn a_client_crash_kills_that_clients_adapter_process_and_the_run_goes_on() {
    let (tmp, work) = adapter_workdir();
    let python = wrapped_python(&work);
    let scenario = tmp.path().join("crash.toml");
    // The holder crashes 3 s in: its adapter process is killed (SIGKILL) at its next hold
    // point, its lock expires after the 1 s TTL, and the other client goes on taking it.
    std::fs::write(
        &scenario,
        r#"claim = "a crashed redis-py holder's lock expires and the other client goes on"
strategies = ["adapter:redis-py"]
topology = "single"
seed = 23

[workload]
clients = 2
resources = 1
hold = "50ms"
ttl = "1s"
duration = "7s"
retry_attempts = 1000
retry_delay = "5ms"
retry_jitter = "2500us"
node_timeout = "250ms"

[[nemesis]]
at = "3s"
fault = "client-crash"
target = "holder"

[expect."adapter:redis-py"]
verdict = "valid"
"#,
    )
    .unwrap();
    let results = tmp.path().join("results");
    let mut child = lockbench_in(["chaos", scenario.to_str().unwrap()], &results)
        .env("LOCKBENCH_ADAPTER_PYTHON", &python)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The run's two adapter processes, once it measures (any process started before the run,
    // to check the adapter, is gone by then); the crash comes 2 s later.
    let adapters = wait_for(
        Duration::from_secs(60),
        "a summary with acquisitions and two adapter processes",
        || {
            let s = summary_so_far(&results)?;
            (s["strategies"][0]["acquired"].as_u64()? > 0).then_some(())?;
            let pids = pids_under(&work);
            (pids.len() == 2).then_some(pids)
        },
    );
    // One of them dies while the other runs on: the crash, not the end of the run (which
    // kills both at once, ~4 s later).
    let (killed, survivor) = wait_for(
        Duration::from_secs(60),
        "an adapter process killed by the crash",
        || {
            assert!(
                child.try_wait().unwrap().is_none(),
                "lockbench ended before any adapter process was killed"
            );
            match (alive(adapters[0]), alive(adapters[1])) {
                (false, true) => Some((adapters[0], adapters[1])),
                (true, false) => Some((adapters[1], adapters[0])),
                (false, false) => panic!("both adapter processes ended at once: no crash kill"),
                (true, true) => None,
            }
        },
    );
    let later = std::time::Instant::now() + Duration::from_millis(500);
    while std::time::Instant::now() < later {
        assert!(
            alive(survivor),
            "the other client's adapter {survivor} ended with the crashed one: the run stopped"
        );
        std::thread::sleep(common::wait::POLL);
    }
    let status = wait_exit(&mut child, Duration::from_secs(120), "lockbench");
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("1 scenario(s), 1 expectation(s) as claimed"),
        "{stdout}"
    );
    assert!(!alive(killed), "the killed adapter {killed} stays gone");
    // One scenario file, one trial: its own directory is `results/latest`.
    let dir = latest(&results).join("adapter:redis-py");
    let history: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("history.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let crashes: Vec<&serde_json::Value> =
        history.iter().filter(|e| e["type"] == "crash").collect();
    assert_eq!(crashes.len(), 1, "one crash: {crashes:?}");
    let (crashed, at) = (
        &crashes[0]["client"],
        crashes[0]["time_us"].as_u64().unwrap(),
    );
    let ops_of = |client: &serde_json::Value, after: bool| {
        history
            .iter()
            .filter(|e| e["type"] == "op" && &e["client"] == client)
            .filter(|e| (e["time_us"].as_u64().unwrap() > at) == after)
            .count()
    };
    assert_eq!(
        ops_of(crashed, true),
        0,
        "a crashed client does nothing more"
    );
    let other = serde_json::json!(1 - crashed.as_u64().unwrap());
    let later_acquires = history
        .iter()
        .filter(|e| e["type"] == "op" && e["client"] == other && e["time_us"].as_u64() > Some(at))
        .filter(|e| e["kind"] == "ok" && e["f"] == "acquire")
        .count();
    assert!(
        later_acquires >= 1,
        "the other client takes the lock after the crash: {history:?}"
    );
    // Nothing else stopped the run, and the crashed adapter's pending work is no failure.
    assert!(!stderr.contains("stopping the run"), "{stderr}");
    assert_no_adapter_left(&work, "the run");
}

#[test]
fn adapter_processes_serve_several_clients_each_and_refuse_a_client_crash() {
    let (tmp, work) = adapter_workdir();
    let python = wrapped_python(&work);
    let results = tmp.path().join("results");
    let out = lockbench_in(
        run_args(&[
            "-c",
            "8",
            "-r",
            "4",
            "--ops",
            "400",
            "--ttl",
            "2s",
            "--hold",
            "1ms",
            "--retry-attempts",
            "100",
            "--adapter-processes",
            "2",
        ]),
        &results,
    )
    .env("LOCKBENCH_ADAPTER_PYTHON", &python)
    .output()
    .unwrap();
    expect_code(&out, 0, "8 clients through 2 adapter processes");
    let run = latest(&results);
    let st = &json(&run.join("summary.json"))["strategies"][0];
    assert_eq!(st["errors"], 0, "{st}");
    assert!(st["acquired"].as_u64().unwrap() > 100, "{st}");
    assert_eq!(st["check"]["verdict"], "valid", "{st}");
    let dir = run.join("adapter:redis-py");
    // Every client took the lock, through one of exactly two processes.
    let history = std::fs::read_to_string(dir.join("history.jsonl")).unwrap();
    let holders: std::collections::BTreeSet<u64> = history
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["type"] == "op" && e["kind"] == "ok" && e["f"] == "acquire")
        .filter_map(|e| e["client"].as_u64())
        .collect();
    assert_eq!(holders.len(), 8, "clients that acquired: {holders:?}");
    let messages = std::fs::read_to_string(dir.join("adapter-messages.jsonl")).unwrap();
    assert_eq!(
        messages.matches("\"overhead\"").count(),
        2,
        "two processes: {messages}"
    );
    assert_no_adapter_left(&work, "the run");

    // A client-crash kills the crashing client's process: with processes shared by clients it
    // is refused before anything starts, naming the setting and the fault.
    let scenario = tmp.path().join("crash.toml");
    std::fs::write(
        &scenario,
        r#"claim = "a crash of a client sharing its adapter process"
strategies = ["adapter:redis-py"]
topology = "single"

[workload]
clients = 2
resources = 1
hold = "5ms"
ttl = "1s"
duration = "2s"
adapter_processes = 1

[[nemesis]]
at = "1s"
fault = "client-crash"
target = "holder"
"#,
    )
    .unwrap();
    let out = lockbench_in(["chaos", scenario.to_str().unwrap()], &results)
        .env("LOCKBENCH_ADAPTER_PYTHON", &python)
        .output()
        .unwrap();
    let (_, stderr) = expect_code(&out, 2, "a client-crash with a shared adapter process");
    assert!(
        stderr.contains(
            "`adapter_processes` = 1 with adapter:redis-py, 2 clients and a client-crash"
        ) && stderr.contains("raise it to 2"),
        "{stderr}"
    );
    assert!(pids_under(&work).is_empty(), "nothing started");
}
