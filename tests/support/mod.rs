//! Minimal test fixture: throwaway `redis-server` processes on free 127.0.0.1 ports.
//!
//! Each [`RedisNode`] is killed when dropped (also on panic). No persistence, DEBUG allowed
//! from localhost. The full topology module replaces this later.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lockbench::node::NodeEndpoint;

const REDIS_SERVER: &str = "/usr/bin/redis-server";
const START_WAIT: Duration = Duration::from_secs(5);

/// A redis-server child process, killed on drop.
pub struct RedisNode {
    pub name: String,
    pub port: u16,
    child: Option<Child>,
    dir: tempfile::TempDir,
}

/// A free TCP port on 127.0.0.1 (nothing listens on it when this returns).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port on 127.0.0.1")
}

impl RedisNode {
    /// Starts a node on a free port and waits (bounded) until it answers PING.
    pub fn start(name: &str) -> Self {
        for _ in 0..3 {
            let mut node = Self {
                name: name.to_string(),
                port: free_port(),
                child: None,
                dir: tempfile::tempdir().expect("tempdir"),
            };
            if node.spawn().is_ok() {
                return node;
            }
        }
        panic!("redis-server {name} did not start on three free ports");
    }

    /// An endpoint for a node that is not running (yet): nothing listens on its port.
    pub fn stopped(name: &str) -> Self {
        Self {
            name: name.to_string(),
            port: free_port(),
            child: None,
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn endpoint(&self) -> NodeEndpoint {
        NodeEndpoint::new(&self.name, self.url())
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the process (SIGKILL) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the node again on the same port, empty.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn()
            .unwrap_or_else(|e| panic!("redis-server {} did not restart: {e}", self.name));
    }

    fn spawn(&mut self) -> Result<(), String> {
        let child = Command::new(REDIS_SERVER)
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--enable-debug-command", "local"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!("cannot run {REDIS_SERVER}: {e} (install it with `apt-get install redis-server`)")
            })?;
        self.child = Some(child);
        let deadline = Instant::now() + START_WAIT;
        while Instant::now() < deadline {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                self.child = None;
                return Err(format!("exited early with {status}"));
            }
            if ping(self.port) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stop();
        Err(format!("no PONG within {START_WAIT:?}"))
    }
}

impl Drop for RedisNode {
    fn drop(&mut self) {
        self.stop();
    }
}

fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// `n` running nodes named `n1..`.
pub fn start_nodes(n: usize) -> Vec<RedisNode> {
    (1..=n)
        .map(|i| RedisNode::start(&format!("n{i}")))
        .collect()
}

pub fn endpoints(nodes: &[RedisNode]) -> Vec<NodeEndpoint> {
    nodes.iter().map(RedisNode::endpoint).collect()
}

/// A plain async connection for inspecting a node from a test.
pub async fn inspect(node: &RedisNode) -> redis::aio::MultiplexedConnection {
    redis::Client::open(node.url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("inspect connection")
}
