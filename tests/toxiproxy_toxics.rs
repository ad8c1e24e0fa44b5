//! Toxic behaviour of the embedded Toxiproxy server against a real `redis-server` behind a
//! proxy. Each test starts its own redis-server on a free port (killed by a Drop guard) and
//! its own embedded server; connections go through `NodeEndpoint::connect` with explicit
//! timeouts, or through raw sockets where byte-level behaviour is checked.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::toxiproxy::{ProxiedRedis as Rig, WAIT};
use lockbench::node::ConnectOptions;
use lockbench::toxiproxy::{LatencyMs, Stream, ToxicKind, ToxicSpec};
use redis::aio::MultiplexedConnection;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn ping(conn: &mut MultiplexedConnection) -> Result<Duration, redis::RedisError> {
    let started = Instant::now();
    let pong: String = redis::cmd("PING").query_async(conn).await?;
    assert_eq!(pong, "PONG");
    Ok(started.elapsed())
}

/// Fastest of `n` PINGs (robust against a busy machine).
async fn fastest_ping(conn: &mut MultiplexedConnection, n: usize) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..n {
        best = best.min(ping(conn).await.unwrap());
    }
    best
}

/// Reads until EOF or error; returns the bytes, the number of reads and the end.
async fn read_all(s: &mut TcpStream) -> (Vec<u8>, usize, std::io::Result<()>) {
    let mut out = Vec::new();
    let mut reads = 0;
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(WAIT, s.read(&mut buf)).await {
            Err(_) => panic!("read did not end within {WAIT:?}"),
            Ok(Ok(0)) => return (out, reads, Ok(())),
            Ok(Ok(n)) => {
                reads += 1;
                out.extend_from_slice(&buf[..n]);
            }
            Ok(Err(e)) => return (out, reads, Err(e)),
        }
    }
}

async fn set_value(rig: &Rig, key: &str, len: usize) -> String {
    let value = "v".repeat(len);
    let mut conn = rig.connect(Duration::from_secs(2)).await;
    let () = redis::cmd("SET")
        .arg(key)
        .arg(&value)
        .query_async(&mut conn)
        .await
        .unwrap();
    value
}

#[tokio::test]
async fn latency_delays_ping_and_reset_restores_it() {
    let rig = Rig::start().await;
    let mut conn = rig.connect(Duration::from_secs(2)).await;
    let baseline = fastest_ping(&mut conn, 5).await;
    assert!(
        baseline < Duration::from_millis(20),
        "baseline {baseline:?}"
    );

    rig.add(ToxicSpec::new(ToxicKind::Latency {
        latency: 50.into(),
        jitter: LatencyMs::ZERO,
    }))
    .await;
    for _ in 0..3 {
        let slow = ping(&mut conn).await.unwrap();
        assert!(slow >= Duration::from_millis(50), "with latency {slow:?}");
        assert!(slow < Duration::from_millis(1000), "with latency {slow:?}");
    }

    rig.client.reset().await.unwrap();
    let after = fastest_ping(&mut conn, 5).await;
    assert!(after < Duration::from_millis(20), "after reset {after:?}");
    rig.shutdown().await;
}

#[tokio::test]
async fn upstream_latency_also_delays_and_reset_clears_it() {
    let rig = Rig::start().await;
    let mut conn = rig.connect(Duration::from_secs(2)).await;
    rig.add(
        ToxicSpec::new(ToxicKind::Latency {
            latency: 60.into(),
            jitter: LatencyMs::ZERO,
        })
        .stream(Stream::Upstream),
    )
    .await;
    assert!(ping(&mut conn).await.unwrap() >= Duration::from_millis(60));
    rig.client.reset().await.unwrap();
    assert!(rig.client.toxics("n1").await.unwrap().is_empty());
    assert!(fastest_ping(&mut conn, 5).await < Duration::from_millis(20));
    rig.shutdown().await;
}

#[tokio::test]
async fn timeout_zero_black_holes_until_the_response_timeout() {
    let rig = Rig::start().await;
    let mut conn = rig.connect(Duration::from_millis(300)).await;
    ping(&mut conn).await.unwrap();
    rig.add(ToxicSpec::new(ToxicKind::Timeout { timeout: 0 }))
        .await;

    let started = Instant::now();
    let err = ping(&mut conn).await.unwrap_err();
    let waited = started.elapsed();
    assert!(err.is_timeout(), "expected a timeout, got {err:?}");
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    assert!(waited < Duration::from_millis(1500), "{waited:?}");

    // The black hole holds the connection open: a raw client sees no bytes and no close.
    let mut raw = TcpStream::connect(rig.listen()).await.unwrap();
    raw.write_all(b"PING\r\n").await.unwrap();
    let mut buf = [0u8; 16];
    let quiet = tokio::time::timeout(Duration::from_millis(300), raw.read(&mut buf)).await;
    assert!(
        quiet.is_err(),
        "black hole must neither answer nor close: {quiet:?}"
    );

    rig.client.reset().await.unwrap();
    let mut fresh = rig.connect(Duration::from_millis(300)).await;
    ping(&mut fresh).await.unwrap();
    rig.shutdown().await;
}

#[tokio::test]
async fn timeout_with_a_duration_closes_the_connection() {
    let rig = Rig::start().await;
    rig.add(ToxicSpec::new(ToxicKind::Timeout { timeout: 200 }))
        .await;
    let mut raw = TcpStream::connect(rig.listen()).await.unwrap();
    let started = Instant::now();
    raw.write_all(b"PING\r\n").await.unwrap();
    let (data, _, _) = read_all(&mut raw).await;
    assert!(data.is_empty(), "no data passes: {data:?}");
    assert!(
        started.elapsed() >= Duration::from_millis(180),
        "{:?}",
        started.elapsed()
    );
    rig.shutdown().await;
}

#[tokio::test]
async fn reset_peer_resets_the_connection() {
    let rig = Rig::start().await;

    // Raw socket: a live connection gets a TCP RST, not a FIN.
    let mut raw = TcpStream::connect(rig.listen()).await.unwrap();
    raw.write_all(b"PING\r\n").await.unwrap();
    let mut pong = [0u8; 7];
    raw.read_exact(&mut pong).await.unwrap();
    assert_eq!(&pong, b"+PONG\r\n");
    rig.add(ToxicSpec::new(ToxicKind::ResetPeer { timeout: 100 }))
        .await;
    let started = Instant::now();
    let (data, _, end) = read_all(&mut raw).await;
    assert!(data.is_empty());
    assert_eq!(
        end.unwrap_err().kind(),
        std::io::ErrorKind::ConnectionReset,
        "expected a connection reset"
    );
    assert!(started.elapsed() >= Duration::from_millis(90));

    // Through the redis client: the PING fails with a dropped connection (reset).
    rig.client.reset().await.unwrap();
    let mut conn = rig.connect(Duration::from_secs(2)).await;
    ping(&mut conn).await.unwrap();
    rig.add(ToxicSpec::new(ToxicKind::ResetPeer { timeout: 200 }))
        .await;
    let err = ping(&mut conn).await.unwrap_err();
    assert!(
        err.is_connection_dropped(),
        "expected a dropped connection, got {err:?}"
    );
    assert!(!err.is_timeout(), "{err:?}");
    rig.shutdown().await;
}

#[tokio::test]
async fn disabled_proxy_refuses_new_and_closes_existing_connections() {
    let rig = Rig::start().await;
    let mut conn = rig.connect(Duration::from_secs(1)).await;
    ping(&mut conn).await.unwrap();

    rig.client.set_enabled("n1", false).await.unwrap();
    let err = ping(&mut conn).await.unwrap_err();
    assert!(
        err.is_connection_dropped() || err.is_io_error(),
        "existing connection must be closed, got {err:?}"
    );
    let refused = rig
        .endpoint()
        .connect(&ConnectOptions {
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
        })
        .await
        .map(|_| ())
        .unwrap_err();
    assert!(refused.is_connection_refusal(), "{refused:?}");

    rig.client.set_enabled("n1", true).await.unwrap();
    let mut again = rig.connect(Duration::from_secs(1)).await;
    ping(&mut again).await.unwrap();
    rig.shutdown().await;
}

#[tokio::test]
async fn limit_data_closes_after_n_bytes() {
    let rig = Rig::start().await;
    let value = set_value(&rig, "k", 100).await;
    rig.add(ToxicSpec::new(ToxicKind::LimitData { bytes: 10 }))
        .await;

    let mut raw = TcpStream::connect(rig.listen()).await.unwrap();
    raw.write_all(b"GET k\r\n").await.unwrap();
    let (data, _, _) = read_all(&mut raw).await;
    let full = format!("${}\r\n{value}\r\n", value.len());
    assert_eq!(data, full.as_bytes()[..10].to_vec());
    rig.shutdown().await;
}

#[tokio::test]
async fn bandwidth_slows_a_large_reply() {
    let rig = Rig::start().await;
    let value = set_value(&rig, "big", 5_000).await;
    let mut conn = rig.connect(Duration::from_secs(5)).await;
    let get = |conn: &mut MultiplexedConnection| {
        let mut conn = conn.clone();
        async move {
            let started = Instant::now();
            let v: String = redis::cmd("GET")
                .arg("big")
                .query_async(&mut conn)
                .await
                .unwrap();
            (v, started.elapsed())
        }
    };
    let (v, fast) = get(&mut conn).await;
    assert_eq!(v, value);
    assert!(fast < Duration::from_millis(100), "{fast:?}");

    // 10 KB/s: ~5 KB takes ~500 ms.
    rig.add(ToxicSpec::new(ToxicKind::Bandwidth { rate: 10 }))
        .await;
    let (v, slow) = get(&mut conn).await;
    assert_eq!(v, value);
    assert!(slow >= Duration::from_millis(400), "{slow:?}");
    assert!(slow < Duration::from_millis(3000), "{slow:?}");
    rig.shutdown().await;
}

#[tokio::test]
async fn slicer_delivers_a_reply_in_delayed_slices() {
    let rig = Rig::start().await;
    let value = set_value(&rig, "k", 200).await;
    rig.add(ToxicSpec::new(ToxicKind::Slicer {
        average_size: 10,
        size_variation: 0,
        delay: 10_000,
    }))
    .await;

    let mut raw = TcpStream::connect(rig.listen()).await.unwrap();
    let _ = raw.set_nodelay(true);
    let started = Instant::now();
    raw.write_all(b"GET k\r\nQUIT\r\n").await.unwrap();
    let (data, reads, _) = read_all(&mut raw).await;
    let elapsed = started.elapsed();
    let expected = format!("${}\r\n{value}\r\n+OK\r\n", value.len());
    assert_eq!(String::from_utf8(data).unwrap(), expected, "bytes intact");
    // 212 bytes in 10-byte slices 10 ms apart: ~21 slices, ≥ ~200 ms.
    assert!(elapsed >= Duration::from_millis(150), "{elapsed:?}");
    assert!(reads >= 5, "expected many small reads, got {reads}");
    rig.shutdown().await;
}

#[tokio::test]
async fn slow_close_delays_the_fin() {
    let rig = Rig::start().await;
    let quit_until_eof = |addr: SocketAddr| async move {
        let mut raw = TcpStream::connect(addr).await.unwrap();
        let started = Instant::now();
        raw.write_all(b"QUIT\r\n").await.unwrap();
        let (data, _, end) = read_all(&mut raw).await;
        assert!(end.is_ok(), "clean close expected: {end:?}");
        assert_eq!(data, b"+OK\r\n");
        started.elapsed()
    };
    let fast = quit_until_eof(rig.listen()).await;
    assert!(fast < Duration::from_millis(150), "{fast:?}");

    rig.add(ToxicSpec::new(ToxicKind::SlowClose { delay: 300 }))
        .await;
    let slow = quit_until_eof(rig.listen()).await;
    assert!(slow >= Duration::from_millis(300), "{slow:?}");
    assert!(slow < Duration::from_millis(2000), "{slow:?}");
    rig.shutdown().await;
}

#[tokio::test]
async fn toxicity_zero_leaves_connections_untouched() {
    let rig = Rig::start().await;
    rig.add(
        ToxicSpec::new(ToxicKind::Latency {
            latency: 300.into(),
            jitter: LatencyMs::ZERO,
        })
        .toxicity(0.0),
    )
    .await;
    let mut conn = rig.connect(Duration::from_secs(2)).await;
    assert!(fastest_ping(&mut conn, 3).await < Duration::from_millis(100));
    // Updating toxicity to 1 redraws it on live connections.
    rig.client
        .update_toxic(
            "n1",
            "latency_downstream",
            &ToxicSpec::new(ToxicKind::Latency {
                latency: 300.into(),
                jitter: LatencyMs::ZERO,
            }),
        )
        .await
        .unwrap();
    assert!(ping(&mut conn).await.unwrap() >= Duration::from_millis(300));
    rig.shutdown().await;
}

/// `n1`'s (received, sent) bytes in `direction`, from the server's traffic probe.
async fn traffic(rig: &Rig, direction: Stream) -> (u64, u64) {
    let links = rig.server.traffic_probe().links().await;
    let l = links
        .iter()
        .find(|l| l.proxy == "n1" && l.direction == direction)
        .expect("n1 has a count per direction");
    assert_eq!(l.listener, rig.proxy.listen);
    assert_eq!(l.upstream, rig.proxy.upstream);
    (l.received_bytes, l.sent_bytes)
}

#[tokio::test]
async fn traffic_counts_every_byte_per_direction_on_both_paths() {
    let rig = Rig::start().await;
    let mut s = rig.connect_raw().await;
    // 5 PINGs on the fast path, then 5 through the toxic pipeline (latency downstream).
    for _ in 0..5 {
        common::toxiproxy::raw_ping(&mut s).await.unwrap();
    }
    rig.add(ToxicSpec::new(ToxicKind::Latency {
        latency: 1.into(),
        jitter: LatencyMs::ZERO,
    }))
    .await;
    for _ in 0..5 {
        common::toxiproxy::raw_ping(&mut s).await.unwrap();
    }
    // `PING\r\n` is 6 bytes up, `+PONG\r\n` 7 down; the proxy counts a write just after it,
    // so the last reply may be read before its count lands.
    let want = [(Stream::Upstream, 60), (Stream::Downstream, 70)];
    for (direction, bytes) in want {
        common::wait::wait_for_async(WAIT, "the counts to reach the bytes sent", || async {
            (traffic(&rig, direction).await.1 >= bytes).then_some(())
        })
        .await;
        assert_eq!(
            traffic(&rig, direction).await,
            (bytes, bytes),
            "{direction:?}: received, sent"
        );
    }
    rig.shutdown().await;
}
