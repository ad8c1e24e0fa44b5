//! A proxy whose process runs out of file descriptors (EMFILE on accept) backs off instead of
//! spinning, and serves the waiting clients once descriptors are free again.
//!
//! Alone in its test binary: it lowers this process's open-file limit, which would break any
//! test running beside it.

mod common;

use std::time::{Duration, Instant};

use common::process::{set_soft_nofile, soft_nofile};
use common::toxiproxy::{raw_ping, ProxiedRedis};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").unwrap().count() as u64
}

/// CPU time (user + system) this process has used so far.
fn cpu_time() -> Duration {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage with a valid pointer to an rusage struct.
    unsafe {
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut usage), 0);
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

#[tokio::test]
async fn accept_out_of_descriptors_backs_off_and_recovers() {
    let rig = ProxiedRedis::start().await;
    let proxy = &rig.proxy;

    let original = soft_nofile();
    set_soft_nofile(open_fds() + 64);
    // Fill the descriptor table, then free exactly one for the client's socket: the kernel
    // completes its handshake, but the proxy has no descriptor to accept it with (EMFILE).
    let mut fillers = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        fillers.push(f);
        assert!(fillers.len() < 1000, "the open-file limit did not apply");
    }
    fillers.pop();
    let mut client =
        tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(&proxy.listen))
            .await
            .expect("the kernel completes the handshake without the proxy")
            .expect("connect to the proxy");
    client.write_all(b"PING\r\n").await.unwrap();

    // Out of descriptors for a while: the accept loop must sleep, not spin, and the client
    // gets no answer.
    let (cpu0, wall0) = (cpu_time(), Instant::now());
    let mut reply = [0u8; 7];
    let early =
        tokio::time::timeout(Duration::from_millis(600), client.read_exact(&mut reply)).await;
    let (cpu, wall) = (cpu_time() - cpu0, wall0.elapsed());
    assert!(
        early.is_err(),
        "no reply without an accepted connection: {early:?}"
    );
    assert!(
        cpu < wall / 4,
        "{cpu:?} of CPU in {wall:?} while accept fails: the accept loop spins"
    );

    // Descriptors back: the waiting client is accepted within the back-off bound and served.
    drop(fillers);
    set_soft_nofile(original);
    tokio::time::timeout(Duration::from_secs(5), client.read_exact(&mut reply))
        .await
        .expect("a client queued during EMFILE is served once descriptors are free")
        .unwrap();
    assert_eq!(&reply, b"+PONG\r\n");
    let mut fresh = TcpStream::connect(&proxy.listen).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), raw_ping(&mut fresh))
        .await
        .expect("PING through the proxy after recovery")
        .unwrap();
    rig.shutdown().await;
}
