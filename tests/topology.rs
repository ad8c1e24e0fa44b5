//! Local and external topologies against real redis-server processes, and the no-orphan
//! guarantee of the process reaper (driven through `examples/hold_topology.rs`).

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

mod common;

use common::node::{get, ping, set};
use common::process::{alive, assert_all_gone, signal, wait_exit as wait_for_exit};
use lockbench::node::ConnectOptions;
use lockbench::topology::{
    LocalNode, LocalNodeConfig, LocalTopologyOptions, Persistence, Topology, TopologyError,
    TopologyKind,
};

#[tokio::test]
async fn single_and_five_start_and_answer_ping() {
    let dir = tempfile::tempdir().unwrap();
    let single = Topology::start_local(
        TopologyKind::Single,
        &LocalTopologyOptions::new(dir.path().join("s")),
    )
    .await
    .unwrap();
    let five = Topology::start_local(
        TopologyKind::Five,
        &LocalTopologyOptions::new(dir.path().join("f")),
    )
    .await
    .unwrap();

    assert_eq!(single.endpoints().len(), 1);
    let names: Vec<String> = five.endpoints().iter().map(|e| e.name.clone()).collect();
    assert_eq!(names, ["n1", "n2", "n3", "n4", "n5"]);
    assert_eq!(five.key_prefix(), "lockbench:");
    assert!(!five.is_external());

    let mut ports: Vec<u16> = single
        .local_nodes()
        .iter()
        .chain(five.local_nodes())
        .map(LocalNode::port)
        .collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 6, "every node has its own port");
    assert!(!ports.contains(&6379));

    for endpoint in single.endpoints().iter().chain(five.endpoints().iter()) {
        assert!(endpoint.url.starts_with("redis://127.0.0.1:"));
        assert_eq!(ping(endpoint).await.unwrap(), "PONG", "{endpoint}");
    }
    // Each node has its own directory, pidfile and log.
    for node in five.local_nodes() {
        assert_eq!(node.dir(), dir.path().join("f").join(node.name()));
        let pidfile = std::fs::read_to_string(node.dir().join("redis.pid")).unwrap();
        assert_eq!(pidfile.trim(), node.pid().unwrap().to_string());
        assert!(node.log_path().exists());
    }

    let pids: Vec<u32> = single
        .local_nodes()
        .iter()
        .chain(five.local_nodes())
        .filter_map(LocalNode::pid)
        .collect();
    assert_eq!(pids.len(), 6);
    single.shutdown().await;
    five.shutdown().await;
    assert_all_gone(&pids);
}

async fn kill_restart_keeps_key(persistence: Persistence) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let config = LocalNodeConfig {
        persistence,
        ..LocalNodeConfig::new("n1")
    };
    let mut node = LocalNode::start(&config, dir.path()).await.unwrap();
    let endpoint = node.endpoint();
    set(&endpoint, "lockbench:k", "v1").await;
    let old_pid = node.pid().unwrap();
    let port = node.port();

    node.kill().unwrap();
    assert!(!node.is_running());
    assert_eq!(node.pid(), None);
    assert!(!alive(old_pid));
    assert!(
        ping(&endpoint).await.is_err(),
        "a killed node must not answer"
    );

    node.restart().await.unwrap();
    assert_eq!(node.port(), port, "restart keeps the port");
    assert_ne!(node.pid(), Some(old_pid));
    get(&endpoint, "lockbench:k").await
}

#[tokio::test]
async fn aof_always_node_keeps_key_across_kill_and_restart() {
    assert_eq!(
        kill_restart_keeps_key(Persistence::AofAlways)
            .await
            .as_deref(),
        Some("v1")
    );
}

#[tokio::test]
async fn node_without_persistence_loses_key_across_kill_and_restart() {
    assert_eq!(kill_restart_keeps_key(Persistence::None).await, None);
}

#[tokio::test]
async fn paused_node_times_out_and_answers_after_resume() {
    let dir = tempfile::tempdir().unwrap();
    let mut node = LocalNode::start(&LocalNodeConfig::new("n1"), dir.path())
        .await
        .unwrap();
    let endpoint = node.endpoint();
    let opts = ConnectOptions {
        connect_timeout: Duration::from_millis(300),
        response_timeout: Duration::from_millis(300),
    };
    let mut conn = endpoint.connect(&opts).await.unwrap();

    node.pause().unwrap();
    assert!(node.is_paused());
    assert!(node.is_running(), "a paused process still exists");
    let started = Instant::now();
    let reply: Result<String, _> = redis::cmd("PING").query_async(&mut conn).await;
    let waited = started.elapsed();
    assert!(reply.is_err(), "a paused node answered: {reply:?}");
    assert!(
        waited >= Duration::from_millis(250),
        "failed too early: {waited:?}"
    );
    assert!(waited < Duration::from_secs(3), "not bounded: {waited:?}");

    node.resume().unwrap();
    assert!(!node.is_paused());
    assert_eq!(ping(&endpoint).await.unwrap(), "PONG");
    node.stop().await.unwrap();
    assert!(!node.is_running());
}

#[tokio::test]
async fn requested_port_in_use_is_a_clear_error() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let config = LocalNodeConfig {
        port: Some(port),
        ..LocalNodeConfig::new("n1")
    };
    let err = LocalNode::start(&config, dir.path()).await.unwrap_err();
    assert!(
        matches!(err, TopologyError::PortInUse { port: p } if p == port),
        "{err:?}"
    );
    assert!(
        err.to_string().contains(&format!("port {port} in use")),
        "{err}"
    );
}

#[tokio::test]
async fn missing_binary_says_how_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = LocalTopologyOptions::new(dir.path());
    options.redis_server = Some(PathBuf::from("/nonexistent/bin/redis-server"));
    let err = Topology::start_local(TopologyKind::Single, &options)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, TopologyError::RedisServerNotFound { .. }),
        "{err:?}"
    );
    assert!(msg.contains("/nonexistent/bin/redis-server"), "{msg}");
    assert!(msg.contains("apt-get install redis-server"), "{msg}");
}

#[tokio::test]
async fn node_that_cannot_start_quotes_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let config = LocalNodeConfig {
        extra_config: vec!["no-such-directive yes".into()],
        ..LocalNodeConfig::new("n1")
    };
    let started = Instant::now();
    let err = LocalNode::start(&config, dir.path()).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(6));
    let msg = err.to_string();
    assert!(matches!(err, TopologyError::NodeStart { .. }), "{err:?}");
    assert!(msg.contains("did not start"), "{msg}");
    assert!(msg.contains("no-such-directive"), "log tail missing: {msg}");
}

#[tokio::test]
async fn dropping_a_node_kills_its_process() {
    let dir = tempfile::tempdir().unwrap();
    let node = LocalNode::start(&LocalNodeConfig::new("n1"), dir.path())
        .await
        .unwrap();
    let pid = node.pid().unwrap();
    assert!(alive(pid));
    drop(node);
    assert_all_gone(&[pid]);
}

#[tokio::test]
async fn flush_all_empties_local_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let topology =
        Topology::start_local(TopologyKind::Five, &LocalTopologyOptions::new(dir.path()))
            .await
            .unwrap();
    for endpoint in topology.endpoints() {
        set(&endpoint, "lockbench:x", "1").await;
    }
    topology.flush_all().await.unwrap();
    for endpoint in topology.endpoints() {
        assert_eq!(get(&endpoint, "lockbench:x").await, None, "{endpoint}");
    }
    topology.shutdown().await;
}

#[tokio::test]
async fn node_mut_finds_local_nodes_and_names_valid_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut topology =
        Topology::start_local(TopologyKind::Five, &LocalTopologyOptions::new(dir.path()))
            .await
            .unwrap();
    assert_eq!(topology.node_mut("n3").unwrap().name(), "n3");
    let msg = topology.node_mut("n9").unwrap_err().to_string();
    assert!(msg.contains("n1, n2, n3, n4, n5"), "{msg}");
    topology.shutdown().await;
}

#[tokio::test]
async fn unreachable_external_node_is_named_without_its_password() {
    let dir = tempfile::tempdir().unwrap();
    let live = LocalNode::start(&LocalNodeConfig::new("n1"), dir.path())
        .await
        .unwrap();
    let urls = vec![
        live.endpoint().url,
        // A port nothing listens on (bound, read, released).
        format!(
            "redis://alice:hunter2@127.0.0.1:{}",
            common::redis::free_port()
        ),
    ];
    let started = Instant::now();
    let err = Topology::external(&urls, "lockbench:").await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "PING not bounded"
    );
    let msg = err.to_string();
    assert!(matches!(err, TopologyError::Unreachable { .. }), "{err:?}");
    assert!(msg.contains("n2"), "{msg}");
    assert!(msg.contains("alice:***@127.0.0.1"), "{msg}");
    assert!(!msg.contains("hunter2"), "{msg}");
    assert!(!format!("{err:?}").contains("hunter2"));
}

#[tokio::test]
async fn external_nodes_are_used_but_never_flushed_or_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let live = LocalNode::start(&LocalNodeConfig::new("own"), dir.path())
        .await
        .unwrap();
    let endpoint = live.endpoint();
    set(&endpoint, "user:data", "keep").await;

    let mut external = Topology::external(std::slice::from_ref(&endpoint.url), "bench:")
        .await
        .unwrap();
    assert!(external.is_external());
    assert_eq!(external.kind(), TopologyKind::External);
    assert_eq!(external.key_prefix(), "bench:");
    assert_eq!(external.endpoints()[0].name, "n1");
    assert!(external.local_nodes().is_empty());

    let err = external.flush_all().await.unwrap_err();
    assert!(
        matches!(err, TopologyError::ExternalRefused { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("FLUSHALL"), "{err}");
    assert!(matches!(
        external.node_mut("n1"),
        Err(TopologyError::ExternalRefused { .. })
    ));
    external.shutdown().await;

    assert_eq!(
        ping(&endpoint).await.unwrap(),
        "PONG",
        "shutdown must not stop external nodes"
    );
    assert_eq!(get(&endpoint, "user:data").await.as_deref(), Some("keep"));
}

#[tokio::test]
async fn rediss_urls_are_supported_and_fail_cleanly_against_a_plain_server() {
    let dir = tempfile::tempdir().unwrap();
    let live = LocalNode::start(&LocalNodeConfig::new("n1"), dir.path())
        .await
        .unwrap();
    let url = format!("rediss://u:pw-secret@127.0.0.1:{}", live.port());
    let err = Topology::external(&[url], "lockbench:").await.unwrap_err();
    let msg = err.to_string();
    // The TLS handshake is attempted (TLS support is compiled in) and fails: the server is plain.
    assert!(matches!(err, TopologyError::Unreachable { .. }), "{err:?}");
    assert!(!msg.to_lowercase().contains("feature"), "{msg}");
    assert!(!msg.contains("pw-secret"), "{msg}");
}

#[test]
fn external_requires_urls_and_valid_schemes() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let err = rt
        .block_on(Topology::external(&[], "lockbench:"))
        .unwrap_err();
    assert!(matches!(err, TopologyError::NoExternalUrls));
    let err = rt
        .block_on(Topology::external(&["127.0.0.1:7000".into()], "lockbench:"))
        .unwrap_err();
    assert!(err.to_string().contains("redis://"), "{err}");
    let err = rt
        .block_on(Topology::start_local(
            TopologyKind::External,
            &LocalTopologyOptions::new("/tmp"),
        ))
        .unwrap_err();
    assert!(matches!(err, TopologyError::NotLocal { .. }), "{err:?}");
}

// ---- no orphans: examples/hold_topology.rs on every way out ----

/// Path of the example binary, built once per test run.
fn hold_topology_binary() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--quiet", "--example", "hold_topology"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("running cargo build --example hold_topology");
        assert!(
            status.success(),
            "cargo build --example hold_topology failed"
        );
        // This test binary lives in target/<profile>/deps/; examples sit in target/<profile>/examples/.
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().unwrap().parent().unwrap();
        let bin = profile_dir.join("examples").join("hold_topology");
        assert!(bin.exists(), "{} not found", bin.display());
        bin
    })
}

struct Held {
    child: Child,
    lines: Option<mpsc::Receiver<String>>,
    pids: Vec<u32>,
    ports: Vec<u16>,
}

impl Drop for Held {
    fn drop(&mut self) {
        // If an assertion failed midway, do not leave anything behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
        for &pid in &self.pids {
            // SAFETY: kill(2) of a redis-server this test started (through the example).
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
    }
}

/// Starts the example and reads `PID … PORT …` lines until `READY` (bounded to 20 s).
fn hold(kind: &str, mode: &str) -> Held {
    let mut child = Command::new(hold_topology_binary())
        .args([kind, mode])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut held = Held {
        child,
        lines: None,
        pids: Vec::new(),
        ports: Vec::new(),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let rx = held.lines.insert(rx);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .unwrap_or_else(|e| panic!("no READY from hold_topology {kind} {mode}: {e}"));
        if line == "READY" {
            break;
        }
        let parts: Vec<&str> = line.split_whitespace().collect();
        match parts.as_slice() {
            ["PID", pid, "PORT", port] => {
                held.pids.push(pid.parse().unwrap());
                held.ports.push(port.parse().unwrap());
            }
            _ => panic!("unexpected line from hold_topology: {line}"),
        }
    }
    let expected = match kind {
        "five" => 5,
        "etcd" => 3,
        _ => 1,
    };
    assert_eq!(held.pids.len(), expected);
    if mode.starts_with("wait") || mode == "panic-in-thread" {
        // Other modes go on to tear down right after READY.
        for &pid in &held.pids {
            assert!(alive(pid), "pid {pid} not alive at READY");
        }
    }
    held
}

/// Reads stdout lines of a held example until `want` (bounded to 10 s).
fn expect_line(held: &mut Held, want: &str) {
    let rx = held.lines.as_ref().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line == want => return,
            Ok(_) => continue,
            Err(e) => panic!("no `{want}` line from hold_topology: {e}"),
        }
    }
}

/// Waits (bounded to 15 s) for the example to exit; returns its exit code and stderr.
fn wait_exit(held: &mut Held) -> (Option<i32>, String) {
    let status = wait_for_exit(&mut held.child, Duration::from_secs(15), "hold_topology");
    let mut stderr = String::new();
    if let Some(mut pipe) = held.child.stderr.take() {
        use std::io::Read;
        let _ = pipe.read_to_string(&mut stderr);
    }
    (status.code(), stderr)
}

fn send_signal(held: &Held, signal_number: libc::c_int) {
    signal(&held.child, signal_number);
}

#[test]
fn no_orphan_after_normal_exit_on_stdin_close() {
    let mut held = hold("five", "wait");
    drop(held.child.stdin.take());
    let (code, stderr) = wait_exit(&mut held);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("stdin closed"), "{stderr}");
    assert_all_gone(&held.pids);
}

#[test]
fn no_orphan_after_exit_mode() {
    let mut held = hold("single", "exit");
    let (code, stderr) = wait_exit(&mut held);
    assert_eq!(code, Some(0), "{stderr}");
    assert_all_gone(&held.pids);
}

#[test]
fn no_orphan_after_error_return() {
    let mut held = hold("five", "error");
    let (code, stderr) = wait_exit(&mut held);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("error mode"), "{stderr}");
    assert_all_gone(&held.pids);
}

#[test]
fn no_orphan_after_sigint() {
    let mut held = hold("five", "wait");
    send_signal(&held, libc::SIGINT);
    let (code, stderr) = wait_exit(&mut held);
    // 130 = the handler ran and exited cooperatively (not killed by the default action).
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("Interrupt"), "{stderr}");
    assert_all_gone(&held.pids);
}

#[test]
fn no_postgres_or_etcd_process_left_after_sigint() {
    for kind in ["postgres", "etcd"] {
        let mut held = hold(kind, "wait");
        let mut pids = held.pids.clone();
        if kind == "postgres" {
            let workers = lockbench::topology::program::children_of(held.pids[0]);
            assert!(workers.len() >= 3, "the postmaster's workers: {workers:?}");
            pids.extend(workers);
        }
        send_signal(&held, libc::SIGINT);
        let (code, stderr) = wait_exit(&mut held);
        assert_eq!(code, Some(130), "{kind}: {stderr}");
        assert_all_gone(&pids);
    }
}

#[test]
fn no_orphan_after_sigterm() {
    let mut held = hold("five", "wait");
    send_signal(&held, libc::SIGTERM);
    let (code, stderr) = wait_exit(&mut held);
    assert_eq!(code, Some(143), "{stderr}");
    assert!(stderr.contains("Terminate"), "{stderr}");
    assert_all_gone(&held.pids);
}

#[test]
fn no_orphan_after_panic() {
    let mut held = hold("five", "panic");
    let (code, stderr) = wait_exit(&mut held);
    assert_eq!(code, Some(101), "{stderr}");
    assert!(stderr.contains("panic mode"), "{stderr}");
    assert_all_gone(&held.pids);
}

#[test]
fn redis_nodes_run_in_their_own_process_group() {
    // A terminal's Ctrl-C goes to the foreground process group; the nodes must not receive it,
    // so the run can tear down in order (and keep its partial results).
    let mut held = hold("single", "wait");
    let pid = held.pids[0] as libc::pid_t;
    // SAFETY: getpgid(2) probes only.
    let node_group = unsafe { libc::getpgid(pid) };
    let holder_group = unsafe { libc::getpgid(held.child.id() as libc::pid_t) };
    assert_eq!(node_group, pid);
    assert_ne!(node_group, holder_group);
    drop(held.child.stdin.take());
    let (code, _) = wait_exit(&mut held);
    assert_eq!(code, Some(0));
    assert_all_gone(&held.pids);
}

#[test]
fn no_orphan_after_sigkill_of_the_holder() {
    // No handler, hook or destructor runs on SIGKILL: only the parent-death signal set at spawn.
    let mut held = hold("five", "wait");
    send_signal(&held, libc::SIGKILL);
    let (code, _) = wait_exit(&mut held);
    assert_eq!(code, None, "killed by a signal, so no exit code");
    assert_all_gone(&held.pids);
}

#[test]
fn panic_hook_alone_kills_the_nodes() {
    // The holder survives this panic (the thread is joined), so neither a destructor nor the
    // parent-death signal can be what kills the nodes: only the panic hook.
    let mut held = hold("five", "panic-in-thread");
    {
        use std::io::Write;
        let stdin = held.child.stdin.as_mut().unwrap();
        stdin.write_all(b"go\n").unwrap();
        stdin.flush().unwrap();
    }
    expect_line(&mut held, "PANICKED");
    assert_all_gone(&held.pids);
    assert!(
        held.child.try_wait().unwrap().is_none(),
        "the holder must still run"
    );
    drop(held.child.stdin.take());
    let (code, stderr) = wait_exit(&mut held);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("panic-in-thread mode"), "{stderr}");
}
