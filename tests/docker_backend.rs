//! `lockbench chaos --backend docker` end to end: a short five-node scenario with a partition
//! and a node kill runs in containers and gives the expected verdict, and nothing of the run
//! (container, network) is left afterwards — also after SIGINT.
//!
//! Needs a Docker engine and the local images (`docker/build-images.sh`). Without an engine
//! each test prints a loud `SKIPPED` line and returns; with an engine but without the images
//! it fails and says to run the script.
#![cfg(feature = "docker")]

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Five nodes, redlock, a `refuse` partition of n4,n5 and a kill of n1 (restarted after
/// 800 ms): a minority is lost at every moment, so the run stays valid.
const SCENARIO: &str = r#"
claim = "Redlock keeps mutual exclusion while a minority is partitioned or killed (docker)"
topology = "five"
strategies = ["redlock"]
seed = 11

[workload]
clients = 3
resources = 1
hold = "10ms"
ttl = "500ms"
duration = "3s"
retry_attempts = 200
retry_delay = "10ms"

[[nemesis]]
at = "500ms"
duration = "1s"
fault = "partition"
target = "n4,n5"
mode = "refuse"

[[nemesis]]
at = "1800ms"
fault = "kill"
target = "n1"
restart_after = "800ms"

[expect.redlock]
verdict = "valid"
absent = ["mutex-violation", "believed-overlap"]
"#;

/// `Some(reason)` when no engine answers (the caller skips, loudly).
fn no_engine() -> Option<String> {
    match Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
    {
        Err(e) => Some(format!("the docker CLI cannot run: {e}")),
        Ok(o) if !o.status.success() => Some(format!(
            "no Docker engine: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(_) => None,
    }
}

fn skip(test: &str, reason: &str) {
    eprintln!("\n!!!!! SKIPPED {test}: {reason} !!!!!\n");
}

fn images_present() {
    for image in [
        lockbench::topology::docker::DEFAULT_REDIS_IMAGE,
        lockbench::topology::docker::DEFAULT_TOXIPROXY_IMAGE,
    ] {
        let wanted = std::env::var(if image.contains("redis") {
            "REDIS_IMAGE"
        } else {
            "TOXIPROXY_IMAGE"
        })
        .unwrap_or_else(|_| image.to_string());
        let ok = Command::new("docker")
            .args(["image", "inspect", &wanted])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "image {wanted} is missing: run docker/build-images.sh (the toxiproxy image must \
             carry a lockbench with the `toxiproxy` subcommand)"
        );
    }
}

fn write_scenario(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("docker-smoke.toml");
    std::fs::write(&path, SCENARIO).unwrap();
    path
}

/// Names of containers / networks whose name contains `needle`.
fn leftovers(needle: &str) -> (String, String) {
    let run = |args: &[&str]| {
        let o = Command::new("docker").args(args).output().unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    (
        run(&[
            "ps",
            "-a",
            "--filter",
            &format!("name={needle}"),
            "--format",
            "{{.Names}}",
        ]),
        run(&[
            "network",
            "ls",
            "--filter",
            &format!("name={needle}"),
            "--format",
            "{{.Name}}",
        ]),
    )
}

/// The run tag printed by `lockbench chaos --backend docker` (`docker: network and
/// containers <tag>*`).
fn run_tag(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("docker: network and containers "))
        .map(|t| t.trim_end_matches('*').to_string())
}

/// Removes whatever a failed test left (never needed when the code works).
fn force_cleanup(tag: &str) {
    let (c, n) = leftovers(tag);
    for name in c.lines().filter(|l| !l.is_empty()) {
        let _ = Command::new("docker").args(["rm", "-f", name]).output();
    }
    for name in n.lines().filter(|l| !l.is_empty()) {
        let _ = Command::new("docker")
            .args(["network", "rm", name])
            .output();
    }
}

#[test]
fn five_nodes_partition_and_kill_in_containers_is_valid_and_leaves_nothing() {
    if let Some(reason) = no_engine() {
        skip("docker chaos scenario", &reason);
        return;
    }
    images_present();
    let tmp = tempfile::tempdir().unwrap();
    let scenario = write_scenario(tmp.path());
    let out: Output = Command::new(env!("CARGO_BIN_EXE_lockbench"))
        .args(["chaos", scenario.to_str().unwrap(), "--backend", "docker"])
        .arg("--results")
        .arg(tmp.path().join("results"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tag = run_tag(&stderr).unwrap_or_else(|| panic!("no run tag printed:\n{stderr}"));
    let (containers, networks) = leftovers(&tag);
    force_cleanup(&tag);
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let row = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("redlock"))
        .unwrap_or_else(|| panic!("no redlock row:\n{stdout}"));
    assert!(row.contains("valid     valid     as claimed"), "{row}");
    assert!(
        stdout.contains("1 expectation(s) as claimed, 0 not, 0 scenario error(s)"),
        "{stdout}"
    );
    // The kill and the partition really happened, in containers.
    let results = tmp.path().join("results");
    let run_dir = std::fs::read_dir(&results)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.is_dir() && !p.ends_with("latest"))
        .unwrap();
    let history = std::fs::read_to_string(run_dir.join("redlock/history.jsonl")).unwrap();
    let faults: Vec<&str> = history
        .lines()
        .filter(|l| l.contains("\"type\":\"fault\"") && !l.contains("\"end_us\":null"))
        .collect();
    assert!(
        faults
            .iter()
            .any(|l| l.contains("\"kind\":\"kill\"") && l.contains("\"n1\"")),
        "{history}"
    );
    assert!(
        faults
            .iter()
            .any(|l| l.contains("\"kind\":\"partition\"") && l.contains("\"n4\"")),
        "{history}"
    );
    let summary = std::fs::read_to_string(run_dir.join("summary.json")).unwrap();
    assert!(summary.contains("\"backend\": \"docker\""), "{summary}");
    assert!(containers.is_empty(), "containers left: {containers}");
    assert!(networks.is_empty(), "networks left: {networks}");
}

#[test]
fn sigint_removes_every_container_and_the_network() {
    if let Some(reason) = no_engine() {
        skip("docker SIGINT cleanup", &reason);
        return;
    }
    images_present();
    let tmp = tempfile::tempdir().unwrap();
    let scenario = write_scenario(tmp.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_lockbench"))
        .args(["chaos", scenario.to_str().unwrap(), "--backend", "docker"])
        .arg("--results")
        .arg(tmp.path().join("results"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read stderr on a thread; wait (bounded) until the strategy runs, so containers exist.
    let mut err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.push_str(&String::from_utf8_lossy(&buf[..n]));
            let _ = tx.send(all.clone());
        }
        all
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut seen = String::new();
    while !seen.contains("running redlock") {
        assert!(
            Instant::now() < deadline,
            "the run did not start within 90 s:\n{seen}"
        );
        if let Ok(s) = rx.recv_timeout(Duration::from_millis(200)) {
            seen = s;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("lockbench exited early ({status}):\n{seen}");
        }
    }
    let tag = run_tag(&seen).expect("run tag printed before the strategy runs");
    let (running, _) = leftovers(&tag);
    assert_eq!(
        running.lines().count(),
        6,
        "5 nodes + toxiproxy expected while running: {running}"
    );
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            force_cleanup(&tag);
            panic!("lockbench did not exit within 60 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = reader.join().unwrap();
    let (containers, networks) = leftovers(&tag);
    force_cleanup(&tag);
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(
        containers.is_empty(),
        "containers left after SIGINT: {containers}"
    );
    assert!(
        networks.is_empty(),
        "networks left after SIGINT: {networks}"
    );
}
