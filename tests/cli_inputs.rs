//! Inputs that used to lose data, lie or confuse: bad values, repeated strategies, missing
//! evidence, failed starts, mismatched baselines, help text. On the real binary against real
//! redis-server processes where a run is needed. Each asserts the output a user sees and the
//! exit code of the policy in docs/exit-codes.md (0 ok, 1 finding, 2 bad input, 3 unknown, 4 failed,
//! 130 interrupted).

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::cli::{assert_refused, expect_code, json, lockbench, run, run_in, text};

/// Entries of `dir` (empty when it does not exist).
fn entries(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

// A repeated strategy is rejected before anything starts (it used to empty the first one's
// history, fail, write a blank row, and `check` then said valid).
#[test]
fn repeated_strategy_is_rejected_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("r");
    let out = assert_refused(
        &["run", "-s", "single,single", "-d", "2s"],
        &results,
        "--strategy lists single twice",
    );
    expect_code(&out, 2, "repeated strategy");
}

/// A short audited run on one local node; returns the run directory.
fn short_run(results: &Path, extra: &[&str]) -> (PathBuf, Output) {
    let out = run_in(
        [&["run", "-s", "single", "--no-progress"], extra].concat(),
        results,
    );
    let dir = fs::canonicalize(results.join("latest")).unwrap_or_else(|e| {
        panic!(
            "no results/latest ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (dir, out)
}

// Missing, empty or mismatched evidence gives `unknown` with the reason, never `valid`.
#[test]
fn check_on_empty_or_missing_history_is_unknown() {
    let tmp = tempfile::tempdir().unwrap();
    let (run_dir, out) = short_run(&tmp.path().join("r"), &["-c", "2", "--ops", "100"]);
    expect_code(&out, 0, "a clean short run");
    let strategy = run_dir.join("single");
    let ok = run(["check", run_dir.to_str().unwrap()]);
    expect_code(&ok, 0, "the intact run checks valid");

    fs::write(strategy.join("history.jsonl"), b"").unwrap();
    let out = run(["check", run_dir.to_str().unwrap()]);
    let (stdout, _) = expect_code(&out, 3, "empty history, ledger intact");
    assert!(
        stdout.contains("single: unknown because history.jsonl is empty"),
        "{stdout}"
    );
    assert!(!stdout.contains("valid  "), "{stdout}");
    assert_eq!(json(&strategy.join("checker.json"))["verdict"], "unknown");
    assert_eq!(
        json(&run_dir.join("summary.json"))["strategies"][0]["check"]["verdict"],
        "unknown"
    );

    fs::remove_file(strategy.join("history.jsonl")).unwrap();
    let out = run(["check", run_dir.to_str().unwrap()]);
    let (stdout, _) = expect_code(&out, 3, "missing history, ledger intact");
    assert!(
        stdout.contains("unknown because history.jsonl is missing"),
        "{stdout}"
    );
}

// Hold > TTL is warned about up front, and sections in flight at the end finish (within
// the drain grace) instead of being cut silently.
#[test]
fn hold_longer_than_ttl_warns_and_in_flight_sections_finish() {
    let tmp = tempfile::tempdir().unwrap();
    let (run_dir, out) = short_run(
        &tmp.path().join("r"),
        &[
            "-c", "2", "-r", "2", "--hold", "1500ms", "--ttl", "500ms", "-d", "1s",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(
        stderr.contains(
            "warning: --hold 1s 500ms is longer than --ttl 500ms: leases will expire inside the \
             critical section"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("--hold 1s 500ms is not shorter than the run"),
        "{stderr}"
    );
    // Overlaps are likely (leases expire inside), so the code is 0 or 1, never a failure.
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{stdout}\n{stderr}"
    );
    let s = json(&run_dir.join("summary.json"));
    let st = &s["strategies"][0];
    assert_eq!(st["cut_sections"], 0, "{st}");
    assert!(st["throughput_ops_s"].as_f64().unwrap() > 0.0, "{st}");
    assert!(
        st["critical_section"]["count"].as_u64().unwrap() >= 2,
        "{st}"
    );
    let check = &st["check"];
    assert_eq!(check["stats"]["sections"], st["critical_section"]["count"]);
}

// An open-loop run never starts an attempt after --duration.
#[test]
fn open_loop_never_starts_an_attempt_after_the_end() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run_in(
        [
            "run",
            "-s",
            "single",
            "--rate",
            "0.5",
            "-d",
            "2s",
            "--no-progress",
        ],
        tmp.path(),
    );
    let (_, stderr) = expect_code(&out, 0, "rate 0.5 for 2 s");
    assert!(
        stderr.contains("starts about 1 attempt(s) per strategy"),
        "{stderr}"
    );
    let history = fs::read_to_string(tmp.path().join("latest/single/history.jsonl")).unwrap();
    let invokes: Vec<u64> = history
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["kind"] == "invoke" && e["f"] == "acquire")
        .map(|e| e["time_us"].as_u64().unwrap())
        .collect();
    assert!(!invokes.is_empty(), "{history}");
    assert!(
        invokes.iter().all(|&t| t < 2_000_000),
        "attempts after the end: {invokes:?}"
    );
}

const SCENARIO_N7: &str = r#"claim = "a fault on a node that does not exist"
topology = "five"
strategies = ["redlock"]

[workload]
clients = 2
resources = 1
hold = "1ms"
ttl = "500ms"
duration = "3s"

[[nemesis]]
at = "1s"
duration = "1s"
fault = "kill"
target = "n7"
"#;

// Every reference in a scenario is checked before anything starts, with file:line:col.
#[test]
fn unknown_node_in_scenario_is_rejected_at_its_position_before_start() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("n7.toml");
    fs::write(&file, SCENARIO_N7).unwrap();
    let results = tmp.path().join("r");
    let started = std::time::Instant::now();
    let out = run_in(["chaos", file.to_str().unwrap()], &results);
    let (_, stderr) = expect_code(&out, 2, "node n7 on five");
    let at = format!("{}:16:10: ", file.display());
    assert!(stderr.contains(&at), "{stderr}");
    assert!(
        stderr.contains("no node n7 in topology five (nodes: n1, n2, n3, n4, n5)"),
        "{stderr}"
    );
    assert!(!results.exists(), "results created for a bad scenario");
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}

// `--trials 0` is bad input: exit 2, nothing started or created.
#[test]
fn chaos_trials_zero_is_rejected_before_start() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("r");
    let scenario = common::cli::shipped_scenario("01-no-ttl-crash.toml");
    let out = assert_refused(
        &["chaos", scenario.to_str().unwrap(), "--trials", "0"],
        &results,
        "invalid value '0' for '--trials <TRIALS>'",
    );
    expect_code(&out, 2, "--trials 0");
}

// 7 (retry part), 8, 12, 14: bad values are rejected with one message naming the fix, exit 2,
// and nothing is created.
#[test]
fn bad_values_are_rejected_with_one_message_naming_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("r");
    let file = tmp.path().join("a-file");
    fs::write(&file, b"x").unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--retry-attempts", "0"],
            "invalid value '0' for '--retry-attempts <RETRY_ATTEMPTS>': must be at least 1, not 0",
        ),
        (
            vec![
                "--topology",
                "external",
                "--url",
                "redis://127.0.0.1:1",
                "--key-prefix",
                "",
            ],
            "--key-prefix must not be empty with --topology external",
        ),
        (
            vec!["--clients=-3"],
            "invalid value '-3' for '--clients <CLIENTS>': must be at least 1, not -3",
        ),
        (
            vec!["--clients", "0"],
            "invalid value '0' for '--clients <CLIENTS>': must be at least 1, not 0",
        ),
        (vec!["--rate", "0"], "must be a positive number of ops/s"),
        (vec!["--ttl", "0ms"], "must be above 0"),
    ];
    for (args, needle) in cases {
        let out = assert_refused(&[&["run"], &args[..]].concat(), &results, needle);
        expect_code(&out, 2, &format!("{args:?}"));
    }
    // --results at a regular file: said once, as a file.
    let out = run_in(["run"], &file);
    let (_, stderr) = expect_code(&out, 2, "--results at a file");
    assert!(
        stderr.contains("a-file is a file, not a directory"),
        "{stderr}"
    );
    assert!(stderr.matches("error").count() == 1, "{stderr}");
    assert!(stderr.matches("os error").count() <= 1, "{stderr}");
    // --help says why the prefix matters.
    let (help, _) = text(&run(["run", "--help"]));
    assert!(
        help.contains("Must not be empty with --topology external"),
        "{help}"
    );
}

// A run that fails before measuring leaves no results directory and does not move latest.
#[test]
fn failed_start_leaves_nothing_and_keeps_latest() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("r");
    fs::create_dir_all(results.join("older-run")).unwrap();
    std::os::unix::fs::symlink("older-run", results.join("latest")).unwrap();
    let port = common::redis::free_port(); // bound then dropped: nothing listens there
    let out = lockbench()
        .args(["run", "--topology", "external", "--url"])
        .arg(format!("redis://alice:hunter2@127.0.0.1:{port}"))
        .args(["--connect-timeout", "300ms", "-d", "1s", "--results"])
        .arg(&results)
        .output()
        .unwrap();
    let (stdout, stderr) = expect_code(&out, 4, "unreachable external node");
    assert!(
        stderr.contains("n1") && stderr.contains("alice:***"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2") && !stdout.contains("hunter2"));
    assert!(!stdout.contains("report:"), "{stdout}");
    let mut left = entries(&results);
    left.sort();
    assert_eq!(left, ["latest", "older-run"], "a failed start left files");
    assert_eq!(
        fs::read_link(results.join("latest")).unwrap(),
        PathBuf::from("older-run")
    );
    assert!(stderr.contains("nothing was measured: removed"), "{stderr}");
    // A results root the failed run created is not left behind either.
    let fresh = tmp.path().join("fresh");
    let out = lockbench()
        .args(["run", "--topology", "external", "--url"])
        .arg(format!("redis://127.0.0.1:{port}"))
        .args(["--connect-timeout", "300ms", "-d", "1s", "--results"])
        .arg(&fresh)
        .output()
        .unwrap();
    expect_code(&out, 4, "unreachable, fresh root");
    assert!(!fresh.exists(), "left {}", fresh.display());

    // No redis-server on PATH: nothing left either.
    let out = lockbench()
        .env("PATH", tmp.path().join("empty-path"))
        .args(["run", "-d", "1s", "--no-progress", "--results"])
        .arg(&results)
        .output()
        .unwrap();
    let (stdout, stderr) = expect_code(&out, 4, "no redis-server on PATH");
    assert!(
        stderr.contains("redis-server not found on PATH"),
        "{stderr}"
    );
    assert!(!stdout.contains("report:"), "{stdout}");
    assert_eq!(entries(&results).len(), 2, "{:?}", entries(&results));

    // A redis-server that dies at start: the directory stays for the node logs, marked
    // failed, and latest still does not move.
    let bin = tmp.path().join("bin");
    fs::create_dir(&bin).unwrap();
    let fake = bin.join("redis-server");
    fs::write(
        &fake,
        "#!/bin/sh\necho 'fake redis-server: refusing to start' >&2\nexit 1\n",
    )
    .unwrap();
    fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = lockbench()
        .env("PATH", path)
        .args(["run", "-d", "1s", "--no-progress", "--results"])
        .arg(&results)
        .output()
        .unwrap();
    let (stdout, stderr) = expect_code(&out, 4, "redis-server dies at start");
    assert!(!stdout.contains("report:"), "{stdout}");
    assert!(stderr.contains("kept for the node logs"), "{stderr}");
    assert_eq!(
        fs::read_link(results.join("latest")).unwrap(),
        PathBuf::from("older-run")
    );
    let kept: Vec<String> = entries(&results)
        .into_iter()
        .filter(|e| e != "latest" && e != "older-run")
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(
        json(&results.join(&kept[0]).join("summary.json"))["status"],
        "failed"
    );
}

/// A saved run directory with one strategy, for `report`.
fn saved_run(root: &Path, name: &str, topology: &str, p99_us: u64, ops_s: f64) -> PathBuf {
    use lockbench::results::{LatencySummary, RunSummary, StrategySummary};
    let dir = root.join(name);
    fs::create_dir_all(&dir).unwrap();
    let mut summary = RunSummary::start(
        name,
        serde_json::json!({
            "topology": {"kind": topology},
            "direct": false,
            "ttl": 1000,
            "workload": {"clients": 16, "resources": 16, "hold": {"fixed": 0}, "pacing": "closed"},
        }),
    );
    summary.status = lockbench::results::RunStatus::Completed;
    summary.strategies.push(StrategySummary {
        strategy: "single".into(),
        elapsed_s: 5.0,
        attempts: 100,
        acquired: 100,
        throughput_ops_s: ops_s,
        acquire_ok: LatencySummary {
            count: 100,
            p50_us: p99_us / 2,
            p99_us,
            p999_us: p99_us,
            max_us: p99_us,
            ..Default::default()
        },
        ..Default::default()
    });
    fs::write(
        dir.join("summary.json"),
        serde_json::to_vec(&summary).unwrap(),
    )
    .unwrap();
    dir
}

// A baseline of another setup is refused (exit 2); a regression exits 1.
#[test]
fn baseline_of_another_setup_is_refused_and_regressions_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    let single = saved_run(tmp.path(), "single-run", "single", 500, 5000.0);
    let five = saved_run(tmp.path(), "five-run", "five", 5, 50_000.0);
    let slower = saved_run(tmp.path(), "slower-run", "single", 900, 4000.0);
    let out_dir = tmp.path().join("cmp");
    let report = |run: &Path, base: &Path, extra: &[&str]| {
        lockbench()
            .arg("report")
            .arg(run)
            .arg("--baseline")
            .arg(base)
            .arg("--out")
            .arg(&out_dir)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = report(&single, &five, &[]);
    let (_, stderr) = expect_code(&out, 2, "single vs five baseline");
    assert!(
        stderr.contains("are not the same setup: topology single vs five"),
        "{stderr}"
    );
    assert!(
        !out_dir.exists(),
        "refused, yet wrote {}",
        out_dir.display()
    );
    assert!(!single.join("report.html").exists());

    let out = report(&single, &five, &["--allow-mismatch"]);
    let (_, stderr) = expect_code(&out, 1, "mismatch allowed, and it regressed");
    assert!(stderr.contains("warning:") && stderr.contains("regression:"));

    let out = report(&slower, &single, &[]);
    let (_, stderr) = expect_code(&out, 1, "same setup, p99 500 → 900 µs");
    assert!(stderr.contains("regression: slower-run single"), "{stderr}");
    let out = report(&single, &single, &[]);
    expect_code(&out, 0, "a run against itself");
}

// Clients that cannot connect: one message naming the client count and --connect-timeout,
// and no hint to start a server lockbench started itself.
#[test]
fn clients_beyond_the_descriptor_limit_are_refused_once_naming_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = lockbench();
    cmd.args(["run", "--direct", "-c", "300", "-d", "1s", "--no-progress"])
        .arg("--results")
        .arg(tmp.path());
    // 96 open files: the node (which inherits the limit) and this process run out of file
    // descriptors long before 300 clients have connected.
    // SAFETY: setrlimit is async-signal-safe; it only lowers this child's own limit.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            let lim = libc::rlimit {
                rlim_cur: 96,
                rlim_max: 96,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    // The descriptor budget is checked before anything starts: 300 clients cannot fit in 96
    // descriptors, so the run is refused as bad input, once, naming what to change.
    let (_, stderr) = expect_code(&out, 2, "300 clients, 96 file descriptors");
    assert!(
        stderr.contains("--clients 300 needs about") && stderr.contains("ulimit -Hn"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("--clients 300").count(), 1, "{stderr}");
    assert!(!stderr.contains("is redis-server running"), "{stderr}");
    assert!(
        !tmp.path().join("latest").exists(),
        "a refused run wrote results"
    );
}

// --listen with a port out of range says so.
#[test]
fn toxiproxy_listen_address_out_of_range_or_not_an_ip_is_named() {
    let out = run(["toxiproxy", "--listen", "127.0.0.1:99999"]);
    let (_, stderr) = expect_code(&out, 2, "port 99999");
    assert!(
        stderr.contains("port 99999 is out of range (0-65535)"),
        "{stderr}"
    );
    let out = run(["toxiproxy", "--listen", "localhost:8474"]);
    let (_, stderr) = expect_code(&out, 2, "a name, not an IP");
    assert!(stderr.contains("is not an IP address"), "{stderr}");
}

// Help has examples; the fault list is printed by the CLI and matches docs/faults.md's table.
#[test]
fn help_has_examples_and_the_fault_list_matches_the_readme() {
    for cmd in ["run", "chaos", "check", "report", "toxiproxy"] {
        let (help, _) = text(&run([cmd, "--help"]));
        assert!(help.contains("Examples:"), "{cmd} --help:\n{help}");
        assert!(help.contains("Exit codes"), "{cmd} --help:\n{help}");
    }
    let (help, _) = text(&run(["chaos", "--help"]));
    assert!(
        help.contains("[[nemesis]]") && help.contains("--list-faults"),
        "{help}"
    );
    let out = run(["chaos", "--list-faults"]);
    let (list, _) = expect_code(&out, 0, "--list-faults");
    let faults_doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/faults.md")).unwrap();
    let names: Vec<&str> = list
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        names,
        [
            "latency",
            "bandwidth",
            "partition",
            "kill",
            "pause-node",
            "failover",
            "clock-jump",
            "client-pause",
            "slow-work",
            "client-crash",
            "client-absent",
            "migrate-slot"
        ],
        "{list}"
    );
    for name in names {
        assert!(
            faults_doc.contains(&format!("| `{name}` |")),
            "docs/faults.md's fault table lacks `{name}`"
        );
    }
}

// One exit-code policy: `run` with an invalid verdict exits 1 (it used to exit 0).
#[test]
fn run_with_an_invalid_verdict_exits_1() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, out) = short_run(
        &tmp.path().join("r"),
        &[
            "-c",
            "4",
            "-r",
            "1",
            "--hold",
            "300ms",
            "--ttl",
            "100ms",
            "-d",
            "1s",
            // a per-node timeout that a loaded machine does not hit: no `info` acquire
            "--node-timeout",
            "90ms",
        ],
    );
    let (stdout, stderr) = expect_code(&out, 1, "leases expire inside every section");
    assert!(stdout.contains("invalid"), "{stdout}\n{stderr}");
    let (help, _) = text(&run(["--help"]));
    assert!(
        help.contains("2  bad input") && help.contains("4  failed while running"),
        "{help}"
    );
}

/// A scenario on `topology` with `clients` clients, 3 s long, whose one step (`at = "1s"`,
/// line 13) goes on with `step`'s lines from line 14.
fn one_step(topology: &str, clients: u32, step: &str) -> String {
    format!(
        r#"claim = "one step"
topology = "{topology}"
strategies = ["single"]

[workload]
clients = {clients}
resources = 1
hold = "1ms"
ttl = "500ms"
duration = "3s"

[[nemesis]]
at = "1s"
{step}
"#
    )
}

fn slot_migration(topology: &str, resource: &str, target: &str) -> String {
    format!(
        r#"claim = "a slot migration"
topology = "{topology}"
strategies = ["single"]

[workload]
clients = 1
resources = 2
hold = "1ms"
ttl = "500ms"
duration = "3s"

[[nemesis]]
at = "1s"
fault = "migrate-slot"
resource = "{resource}"
target = "{target}"
"#
    )
}

// A slot migration is checked before anything starts, at the key it is about: cluster only
// (`fault`, line 14), a resource of the workload (`resource`, line 15), one node to move to
// (`target`, line 16).
#[test]
fn a_misplaced_slot_migration_is_refused_at_its_position_before_start() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, topology, resource, target, line, says) in [
        (
            "sentinel",
            "sentinel",
            "r0",
            "n2",
            14,
            "needs topology cluster, this scenario has sentinel",
        ),
        (
            "resource",
            "cluster",
            "r2",
            "n2",
            15,
            "resource r2 does not exist (the workload has r0..r1)",
        ),
        (
            "target",
            "cluster",
            "r1",
            "primary",
            16,
            "names the one node whose shard receives the slot",
        ),
    ] {
        let file = tmp.path().join(format!("{name}.toml"));
        fs::write(&file, slot_migration(topology, resource, target)).unwrap();
        let results = tmp.path().join("r");
        let out = run_in(["chaos", file.to_str().unwrap()], &results);
        let (_, stderr) = expect_code(&out, 2, name);
        assert!(
            stderr.contains(&format!("{}:{line}:", file.display())),
            "{name}: {stderr}"
        );
        assert!(stderr.contains(says), "{name}: {stderr}");
        assert!(!results.exists(), "results created for a bad scenario");
    }
}

/// A sentinel scenario whose failover asks for `method` (line 16).
fn sentinel_failover(method: &str) -> String {
    one_step(
        "sentinel",
        1,
        &format!("fault = \"failover\"\ntarget = \"primary\"\nmethod = \"{method}\""),
    )
}

// A failover method is checked before anything starts: an unknown one is refused with the
// valid ones, a cluster one on sentinel with the topology it needs, both at the `method` key.
#[test]
fn a_bad_or_misplaced_failover_method_is_refused_at_its_position_before_start() {
    let tmp = tempfile::tempdir().unwrap();
    for (method, says) in [
        (
            "cluster-failover-sideways",
            "`method` must be \"kill-primary\" or \"sentinel\" or \"cluster-failover\" or \
             \"cluster-failover-force\" or \"cluster-failover-takeover\", not \
             \"cluster-failover-sideways\"",
        ),
        (
            "cluster-failover-takeover",
            "`method = \"cluster-failover-takeover\"` needs topology cluster, this scenario has \
             sentinel",
        ),
    ] {
        let file = tmp.path().join(format!("{method}.toml"));
        fs::write(&file, sentinel_failover(method)).unwrap();
        let results = tmp.path().join("r");
        let out = run_in(["chaos", file.to_str().unwrap()], &results);
        let (_, stderr) = expect_code(&out, 2, method);
        assert!(
            stderr.contains(&format!("{}:16:", file.display())),
            "{stderr}"
        );
        assert!(stderr.contains(says), "{stderr}");
        assert!(!results.exists(), "results created for a bad scenario");
    }
}

/// A scenario on `topology` whose one step is `fault` on r0's primary for 1 s with `extra`
/// lines (`link = "bus"` …) from line 17.
fn bus_step(topology: &str, fault: &str, extra: &str) -> String {
    one_step(
        topology,
        2,
        &format!("duration = \"1s\"\nfault = \"{fault}\"\ntarget = \"primary\"\n{extra}"),
    )
}

// A cluster-bus partition is checked before anything starts, at the key it is about: on
// another topology, on a fault other than a partition, `with_clients` without the bus, a
// client that does not exist, and (the machine's part) a process without the privilege to
// create nft tables.
#[test]
fn a_bus_partition_is_refused_at_its_step_before_start() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        (
            bus_step("sentinel", "partition", "link = \"bus\""),
            ":17:",
            "nemesis[0] (partition): `link = \"bus\"` needs topology cluster, this scenario has \
             sentinel",
        ),
        (
            bus_step("cluster", "latency", "link = \"bus\"\nlatency = \"5ms\""),
            ":17:",
            "`link = \"bus\"` takes a partition only",
        ),
        (
            bus_step("cluster", "partition", "with_clients = \"client:0\""),
            ":17:",
            "`with_clients` says which clients stay with the target nodes of a `link = \"bus\"` \
             partition",
        ),
        (
            bus_step(
                "cluster",
                "partition",
                "link = \"bus\"\nwith_clients = \"clients:0,2\"",
            ),
            ":18:",
            "client 2 does not exist (clients are 0..2)",
        ),
    ];
    for (i, (text, line, says)) in cases.iter().enumerate() {
        let file = tmp.path().join(format!("bus{i}.toml"));
        fs::write(&file, text).unwrap();
        let results = tmp.path().join("r");
        let out = run_in(["chaos", file.to_str().unwrap()], &results);
        let (_, stderr) = expect_code(&out, 2, says);
        assert!(
            stderr.contains(&format!("{}{line}", file.display())),
            "{stderr}"
        );
        assert!(stderr.contains(says), "{stderr}");
        assert!(!results.exists(), "results created for a bad scenario");
    }
    // Without CAP_NET_ADMIN (root with it dropped from the bounding set) `nft` cannot make a
    // table: refused at the step's `link`, before any node starts.
    let file = tmp.path().join("unprivileged.toml");
    fs::write(&file, bus_step("cluster", "partition", "link = \"bus\"")).unwrap();
    let results = tmp.path().join("r");
    let out = std::process::Command::new("setpriv")
        .args(["--bounding-set", "-net_admin"])
        .arg(env!("CARGO_BIN_EXE_lockbench"))
        .args(["chaos", file.to_str().unwrap(), "--results"])
        .arg(&results)
        .output()
        .expect("setpriv runs lockbench");
    let (_, stderr) = expect_code(&out, 2, "a bus cut without the privilege");
    assert!(
        stderr.contains(&format!("{}:17:", file.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "nemesis[0] (partition): `link = \"bus\"` cuts the cluster bus with kernel packet \
             drops: `nft list tables` failed"
        ) && stderr.contains("needs root or CAP_NET_ADMIN"),
        "{stderr}"
    );
    assert!(!results.exists(), "results created for a refused scenario");
    // In a directory the same scenario is skipped, said on stderr and in the last line, and the
    // others run: a claims directory still runs without root. A directory of nothing but such
    // scenarios is refused as the one file is.
    let unprivileged = |dir: &Path, results: &Path| {
        std::process::Command::new("setpriv")
            .args(["--bounding-set", "-net_admin"])
            .arg(env!("CARGO_BIN_EXE_lockbench"))
            .args(["chaos", dir.to_str().unwrap(), "--no-progress", "--results"])
            .arg(results)
            .output()
            .expect("setpriv runs lockbench")
    };
    let only = tmp.path().join("only-bus");
    fs::create_dir(&only).unwrap();
    fs::copy(&file, only.join("bus.toml")).unwrap();
    let out = unprivileged(&only, &tmp.path().join("r-only"));
    expect_code(&out, 2, "a directory of bus cuts only, unprivileged");
    let dir = tmp.path().join("mixed");
    fs::create_dir(&dir).unwrap();
    fs::copy(&file, dir.join("a-bus.toml")).unwrap();
    let plain = "claim = \"no fault\"\ntopology = \"single\"\nstrategies = [\"single\"]\n\n\
                 [workload]\nclients = 2\nresources = 1\nhold = \"1ms\"\nttl = \"500ms\"\n\
                 duration = \"1s\"\n\n[expect.single]\nverdict = \"valid\"\n";
    fs::write(dir.join("b-plain.toml"), plain).unwrap();
    let out = unprivileged(&dir, &tmp.path().join("r-mixed"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!(
            "skipped: {}:17:",
            dir.join("a-bus.toml").display()
        )) && stderr.contains("needs root or CAP_NET_ADMIN"),
        "{stderr}"
    );
    assert!(
        stdout.contains(
            "1 scenario(s), 1 expectation(s) as claimed, 0 not, 1 scenario(s) skipped (this \
             machine cannot run them: see `skipped:` above), 0 scenario error(s)"
        ),
        "{stdout}"
    );
    // The matrix: the column asked for is refused; among the default columns of a cluster
    // matrix it is left out with a warning, and the run goes on (to the next check here: an
    // unreachable ledger database, so nothing starts).
    let matrix = |extra: &[&str]| {
        std::process::Command::new("setpriv")
            .args(["--bounding-set", "-net_admin"])
            .arg(env!("CARGO_BIN_EXE_lockbench"))
            .args(["matrix", "--quick", "--strategies", "single"])
            .args(["--redis-setups", "cluster", "--results"])
            .arg(tmp.path().join("r-matrix"))
            .args(["--ledger", "postgres://lockbench@127.0.0.1:1/postgres"])
            .args(extra)
            .output()
            .expect("setpriv runs lockbench")
    };
    let out = matrix(&["--faults", "none,cluster-minority-partition"]);
    let (_, stderr) = expect_code(&out, 2, "the bus column asked for, unprivileged");
    assert!(
        stderr.contains("--faults cluster-minority-partition: `nft list tables` failed"),
        "{stderr}"
    );
    let out = matrix(&[]);
    let (_, stderr) = expect_code(&out, 2, "an unreachable ledger after the warning");
    assert!(
        stderr.contains(
            "warning: the cluster-minority-partition column is left out (claim 20g not judged)"
        ) && stderr.contains("127.0.0.1:1"),
        "{stderr}"
    );
    assert!(!tmp.path().join("r-matrix").exists(), "{stderr}");
}
