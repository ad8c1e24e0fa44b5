//! `lockbench chaos --backend docker` end to end: a short five-node scenario with a partition
//! and a node kill runs in containers and gives the expected verdict, and nothing of the run
//! (container, network, volume) is left afterwards — also after SIGINT. The same for the
//! Sentinel topology: a failover moves the primary and a `single` client follows it, and the
//! claim scenario 05a (failover loses a lock) is `invalid` with a mutual-exclusion violation.
//! And for the cluster topology: claim 20a (a shard failover loses a lock) in six containers.
//!
//! Needs a Docker engine and the local images (`docker/build-images.sh`). Without an engine
//! each test prints a loud `SKIPPED` line and returns; with an engine but without the images
//! it fails and says to run the script.
#![cfg(feature = "docker")]

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::cli::{run_in, shipped_scenario, spawn_in};
use common::docker::{no_engine, skip};
use common::nemesis::{
    assert_replicas_replicate_through_proxies, cut_and_heal_replication_of_n2, fail_over_n1,
    single_client_locking_on, wait_until_locks_land_on,
};
use lockbench::nemesis::{FailoverMethod, Nemesis};
use lockbench::topology::{DockerOptions, LocalTopologyOptions, ProxiedTopology, TopologyKind};

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

/// Whether a docker test can run: `false` after a loud `SKIPPED` line when no engine answers;
/// panics (naming the script to run) when the engine lacks the images.
fn docker_ready(test: &str) -> bool {
    if let Some(reason) = no_engine() {
        skip(test, &reason);
        return false;
    }
    images_present();
    true
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

/// The table `lockbench chaos` printed has the row `single … invalid   invalid   as claimed`
/// with `mutex-violation` among the anomalies on the line below.
fn assert_single_invalid_with_a_mutex_violation(stdout: &str) {
    let mut rows = stdout
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("single"));
    let row = rows
        .next()
        .unwrap_or_else(|| panic!("no single row:\n{stdout}"));
    assert!(row.contains("invalid   invalid   as claimed"), "{row}");
    let anomalies = rows.next().unwrap_or_default();
    assert!(anomalies.contains("mutex-violation"), "{stdout}");
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

/// Every volume name on the engine (the runs create none; a new one would be a leak).
fn volumes() -> Vec<String> {
    let o = Command::new("docker")
        .args(["volume", "ls", "-q"])
        .output()
        .unwrap();
    let mut v: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
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

/// What a finished `lockbench chaos <scenario> --backend docker` printed and left behind.
struct ContainerRun {
    stdout: String,
    /// Containers of the run still there when it ended (one name a line).
    containers: String,
    /// Networks of the run still there when it ended.
    networks: String,
    /// The run directory under `results/`.
    run_dir: PathBuf,
}

/// Runs `lockbench chaos <scenario> --backend docker` with results in `tmp/results`, notes and
/// then removes whatever it left, and asserts that it succeeded.
fn chaos_in_containers(scenario: &Path, tmp: &Path) -> ContainerRun {
    let results = tmp.join("results");
    let out: Output = run_in(
        ["chaos", scenario.to_str().unwrap(), "--backend", "docker"],
        &results,
    );
    let (stdout, stderr) = common::cli::text(&out);
    let tag = run_tag(&stderr).unwrap_or_else(|| panic!("no run tag printed:\n{stderr}"));
    let (containers, networks) = leftovers(&tag);
    force_cleanup(&tag);
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let run_dir = std::fs::read_dir(&results)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.is_dir() && !p.ends_with("latest"))
        .unwrap();
    ContainerRun {
        stdout,
        containers,
        networks,
        run_dir,
    }
}

#[test]
fn five_nodes_partition_and_kill_in_containers_is_valid_and_leaves_nothing() {
    if !docker_ready("docker chaos scenario") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let scenario = write_scenario(tmp.path());
    let ContainerRun {
        stdout,
        containers,
        networks,
        run_dir,
    } = chaos_in_containers(&scenario, tmp.path());
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

    // config.json records the images, and `run --config` reruns the test in containers on them.
    let config = run_dir.join("config.json");
    let recorded = common::cli::json(&config);
    let images = DockerOptions::new("");
    assert_eq!(
        recorded["docker"]["redis_image"],
        images.redis_image.as_str()
    );
    assert_eq!(
        recorded["docker"]["toxiproxy_image"],
        images.toxiproxy_image.as_str()
    );
    let rerun_results = tmp.path().join("rerun");
    let out = run_in(
        ["run", "--no-progress", "--config", config.to_str().unwrap()],
        &rerun_results,
    );
    let (stdout, stderr) = common::cli::text(&out);
    let tag =
        run_tag(&stderr).unwrap_or_else(|| panic!("the rerun started no containers:\n{stderr}"));
    let (containers, networks) = leftovers(&tag);
    force_cleanup(&tag);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let rerun = common::cli::latest(&rerun_results);
    let summary = common::cli::json(&rerun.join("summary.json"));
    assert_eq!(summary["config"]["backend"], "docker", "{summary}");
    assert_eq!(common::cli::json(&rerun.join("config.json")), recorded);
    assert!(
        containers.is_empty(),
        "containers left by the rerun: {containers}"
    );
    assert!(
        networks.is_empty(),
        "networks left by the rerun: {networks}"
    );
}

#[test]
fn sigint_removes_every_container_and_the_network() {
    if !docker_ready("docker SIGINT cleanup") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let scenario = write_scenario(tmp.path());
    interrupt_run(&scenario, "redlock", 6, tmp.path());
}

#[test]
fn sigint_during_a_sentinel_run_removes_every_container_and_the_network() {
    if !docker_ready("docker sentinel SIGINT cleanup") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let scenario = shipped_scenario("05a-failover-loses-lock.toml");
    // 3 data nodes + 3 sentinels + toxiproxy.
    interrupt_run(&scenario, "single", 7, tmp.path());
}

/// Starts `lockbench chaos <scenario> --backend docker`, waits (bounded) until `strategy`
/// runs and `containers` containers of the run exist, sends SIGINT, and checks that it exits
/// with 130 leaving no container, network or volume.
fn interrupt_run(scenario: &Path, strategy: &str, containers: usize, tmp: &Path) {
    let volumes_before = volumes();
    let mut child = spawn_in(
        ["chaos", scenario.to_str().unwrap(), "--backend", "docker"],
        &tmp.join("results"),
        Stdio::null(),
        Stdio::piped(),
    );
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
    let running = format!("running {strategy}");
    while !seen.contains(&running) {
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
        containers,
        "{containers} containers expected while running: {running}"
    );
    common::process::signal(&child, libc::SIGINT);
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
    assert_eq!(volumes(), volumes_before, "volumes left after SIGINT");
}

/// A shipped failover claim under `--backend docker`: `single` invalid with a mutex violation,
/// in the summary and in the checker's own words, and no container, network or volume left.
/// Returns the run directory (under `tmp`) and `single`'s history, for the failover's window.
fn failover_claim_in_containers(file: &str, tmp: &Path) -> (PathBuf, String) {
    let volumes_before = volumes();
    let ContainerRun {
        stdout,
        containers,
        networks,
        run_dir,
    } = chaos_in_containers(&shipped_scenario(file), tmp);
    assert_single_invalid_with_a_mutex_violation(&stdout);
    let checker = std::fs::read_to_string(run_dir.join("checker.json")).unwrap();
    assert!(checker.contains("mutex-violation"), "{checker}");
    assert!(containers.is_empty(), "containers left: {containers}");
    assert!(networks.is_empty(), "networks left: {networks}");
    assert_eq!(volumes(), volumes_before, "volumes left");
    let history = std::fs::read_to_string(run_dir.join("single/history.jsonl")).unwrap();
    (run_dir, history)
}

#[test]
fn sentinel_05a_in_containers_is_invalid_with_a_mutex_violation_and_leaves_nothing() {
    if !docker_ready("docker sentinel 05a") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (_, history) = failover_claim_in_containers("05a-failover-loses-lock.toml", tmp.path());
    // The primary (n1's container) was killed and Sentinel named another one.
    assert!(
        history.lines().any(|l| l.contains("\"kind\":\"failover\"")
            && l.contains("[\"n1\"]")
            && !l.contains("\"end_us\":null")),
        "{history}"
    );
}

/// Claim 20a in containers: six cluster nodes in the Toxiproxy container's namespace, created
/// with `redis-cli --cluster create`, clients remapped to the Toxiproxy container's proxies;
/// r0's replication lags, its primary's container is killed, the replica is promoted and a
/// second client takes the lock: `invalid` with a mutex violation, and nothing left.
#[test]
fn cluster_20a_in_containers_is_invalid_with_a_mutex_violation_and_leaves_nothing() {
    if !docker_ready("docker cluster 20a") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (run_dir, history) =
        failover_claim_in_containers("20a-cluster-failover-loses-lock.toml", tmp.path());
    // r0's primary (n2 as `redis-cli --cluster create` lays the nodes out) was killed and
    // the cluster named its replica for r0's slot.
    assert!(
        history.lines().any(|l| l.contains("\"kind\":\"failover\"")
            && l.contains("kill-primary: n2 -> n")
            && !l.contains("\"end_us\":null")),
        "{history}"
    );
    let summary = std::fs::read_to_string(run_dir.join("summary.json")).unwrap();
    assert!(summary.contains("\"backend\": \"docker\""), "{summary}");
}

#[tokio::test]
async fn sentinel_in_containers_partitions_replication_and_a_failover_is_followed_by_a_single_client(
) {
    if !docker_ready("docker sentinel failover") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let volumes_before = volumes();
    let docker = DockerOptions::new("test-sentinel-failover");
    let tag = docker.run_tag.clone();
    let proxied = ProxiedTopology::start_docker(
        TopologyKind::Sentinel,
        &LocalTopologyOptions::new(tmp.path()),
        &docker,
    )
    .await
    .expect("sentinel topology starts in containers");
    let mut nemesis = Nemesis::new(proxied);
    let (running, _) = leftovers(&tag);
    assert_eq!(running.lines().count(), 7, "{running}");
    assert_eq!(nemesis.proxied().primary().await.unwrap(), "n1");
    // Sentinel hands out the client proxy's host address; replicas replicate through nX-repl.
    let primary = &nemesis.proxied().endpoints()[0];
    let n1_proxy = &nemesis.proxied().client_links()[0];
    assert_eq!(primary.url, format!("redis://{}", n1_proxy.listen));
    assert_replicas_replicate_through_proxies(&nemesis).await;

    // A primary↔replica partition through n2-repl cuts n2 only; healing it restores the link.
    cut_and_heal_replication_of_n2(
        &mut nemesis,
        Duration::from_secs(10),
        Duration::from_secs(15),
    )
    .await;

    let client = single_client_locking_on(&nemesis, "n1").await;
    let new = fail_over_n1(&mut nemesis, FailoverMethod::Sentinel).await;

    // The client follows: its next lock lands on the new primary (bounded).
    wait_until_locks_land_on(&client, &nemesis, &new, Duration::from_secs(30), None).await;
    nemesis.heal_all(|_| {}).await.unwrap();
    nemesis.into_proxied().shutdown().await;
    let (containers, networks) = leftovers(&tag);
    force_cleanup(&tag);
    assert!(containers.is_empty(), "containers left: {containers}");
    assert!(networks.is_empty(), "networks left: {networks}");
    assert_eq!(volumes(), volumes_before, "volumes left");
}
