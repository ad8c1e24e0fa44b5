//! A private `redis-server` child process for tests that talk to Redis through the embedded
//! Toxiproxy, killed on drop (also when a test panics).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a redis-server may take to answer its first PING.
const START_WAIT: Duration = Duration::from_secs(5);

/// A redis-server child on a free port of 127.0.0.1, with its own temporary directory.
pub struct RedisGuard {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl RedisGuard {
    /// Starts redis-server without persistence and waits (≤ 5 s) until it answers PING.
    pub fn start() -> RedisGuard {
        Self::start_with(&[])
    }

    /// Like [`RedisGuard::start`] with extra `redis-server` arguments
    /// (e.g. `["--tcp-backlog", "4096"]`).
    pub fn start_with(extra: &[&str]) -> RedisGuard {
        let port = free_port();
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(extra)
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "redis-server not found on PATH: install it with `apt-get install redis-server`",
            );
        let guard = RedisGuard {
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + START_WAIT;
        loop {
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                use std::io::{Read, Write};
                let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                let mut buf = [0u8; 7];
                if s.write_all(b"PING\r\n").is_ok()
                    && s.read_exact(&mut buf).is_ok()
                    && &buf == b"+PONG\r\n"
                {
                    return guard;
                }
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not start on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for RedisGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
