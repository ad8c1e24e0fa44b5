//! One proxied connection: two pumps (client → upstream and upstream → client), each passing
//! its bytes through the toxics of its stream.
//!
//! Each pump has a reader stage that stamps every chunk with its arrival time and a writer
//! stage that applies the toxic chain, so a latency toxic delays each chunk from its arrival
//! (not cumulatively) and the reader keeps draining the socket while data is held back. The
//! writer re-reads the proxy's toxic set on every chunk and whenever it changes, so toxics
//! added, updated or removed apply to live connections, as in Toxiproxy.

use std::time::Duration;

use rand::SeedableRng;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::model::{Stream, ToxicKind};
use super::toxics::{self, LinkState, LinkToxic, Piece, ToxicSet};

/// Chunks buffered between the reader and the writer stage of one pump.
const CHUNK_BUFFER: usize = 64;
/// Largest single read.
const READ_SIZE: usize = 32 * 1024;
/// Time allowed to connect to the upstream before the client connection is dropped.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How one pump (or the whole connection) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LinkEnd {
    /// The source closed; the close was passed on (after any slow_close delay).
    Eof,
    /// Close both sockets normally (limit_data, timeout toxic, write error).
    Close,
    /// Close both sockets with a TCP RST (reset_peer).
    Reset,
}

/// Runs one client connection until it ends or `stop` is cancelled (proxy disabled,
/// deleted, or server shut down); then both sockets are closed.
pub(crate) async fn run_connection(
    client: TcpStream,
    upstream: String,
    toxics: watch::Receiver<ToxicSet>,
    stop: CancellationToken,
) {
    let connect = tokio::time::timeout(UPSTREAM_CONNECT_TIMEOUT, TcpStream::connect(&upstream));
    let server = tokio::select! {
        () = stop.cancelled() => return,
        r = connect => match r {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::debug!(%upstream, error = %e, "toxiproxy: upstream connect failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%upstream, "toxiproxy: upstream connect timed out");
                return;
            }
        },
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();

    let end = {
        let up = pump(
            &mut client_read,
            &mut server_write,
            Stream::Upstream,
            toxics.clone(),
        );
        let down = pump(
            &mut server_read,
            &mut client_write,
            Stream::Downstream,
            toxics,
        );
        tokio::pin!(up, down);
        let (mut up_done, mut down_done) = (false, false);
        loop {
            tokio::select! {
                () = stop.cancelled() => break LinkEnd::Close,
                end = &mut up, if !up_done => match end {
                    LinkEnd::Eof => up_done = true,
                    other => break other,
                },
                end = &mut down, if !down_done => match end {
                    LinkEnd::Eof => down_done = true,
                    other => break other,
                },
            }
            if up_done && down_done {
                break LinkEnd::Eof;
            }
        }
    };

    if end == LinkEnd::Reset {
        // SO_LINGER 0 makes close() send RST; forget() skips the FIN of a write shutdown.
        let _ = client_write.as_ref().set_zero_linger();
        let _ = server_write.as_ref().set_zero_linger();
        client_write.forget();
        server_write.forget();
    }
    // Dropping the halves closes both sockets.
}

/// Copies `reader` to `writer` through the toxics of `stream` until the source ends or a
/// toxic ends the connection.
async fn pump<R, W>(
    reader: &mut R,
    writer: &mut W,
    stream: Stream,
    toxics: watch::Receiver<ToxicSet>,
) -> LinkEnd
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>(CHUNK_BUFFER);
    let read_stage = async move {
        let mut buf = vec![0u8; READ_SIZE];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send((Instant::now(), buf[..n].to_vec())).await.is_err() {
                        break;
                    }
                }
            }
        }
        // `tx` drops here: the writer stage sees the end of the stream.
    };
    let write_stage = write_stage(rx, writer, stream, toxics);
    tokio::pin!(read_stage, write_stage);
    tokio::select! {
        end = &mut write_stage => end,
        () = &mut read_stage => write_stage.await,
    }
}

async fn write_stage<W: AsyncWrite + Unpin>(
    mut chunks: mpsc::Receiver<(Instant, Vec<u8>)>,
    writer: &mut W,
    stream: Stream,
    mut toxics: watch::Receiver<ToxicSet>,
) -> LinkEnd {
    let mut link = LinkState::new(stream, rand::rngs::StdRng::from_os_rng());
    loop {
        let set = toxics.borrow_and_update().clone();
        let chain = link.chain(&set);

        // timeout / reset_peer: drop data until the toxic goes away or its timer fires.
        if let Some((deadline, end)) = chain.iter().find_map(blocking) {
            tokio::select! {
                changed = toxics.changed() => {
                    if changed.is_err() {
                        return LinkEnd::Close;
                    }
                }
                chunk = chunks.recv() => {
                    if chunk.is_none() {
                        return finish(writer, &chain).await;
                    }
                }
                () = sleep_until_opt(deadline) => return end,
            }
            continue;
        }

        let chunk = tokio::select! {
            changed = toxics.changed() => {
                if changed.is_err() {
                    return LinkEnd::Close;
                }
                continue;
            }
            chunk = chunks.recv() => chunk,
        };
        let Some((arrival, data)) = chunk else {
            return finish(writer, &chain).await;
        };
        match deliver(&mut link, &chain, arrival, data, writer, &mut toxics).await {
            Ok(true) => {}
            Ok(false) | Err(_) => return LinkEnd::Close,
        }
    }
}

/// The deadline and outcome of a data-dropping toxic, if `t` is one.
fn blocking(t: &LinkToxic) -> Option<(Option<Instant>, LinkEnd)> {
    match t.kind {
        ToxicKind::Timeout { timeout } => Some((
            (timeout > 0).then(|| t.since + Duration::from_millis(timeout)),
            LinkEnd::Close,
        )),
        ToxicKind::ResetPeer { timeout } => Some((
            Some(t.since + Duration::from_millis(timeout)),
            LinkEnd::Reset,
        )),
        _ => None,
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Passes the end of the stream on, after the longest slow_close delay in the chain.
async fn finish<W: AsyncWrite + Unpin>(writer: &mut W, chain: &[LinkToxic]) -> LinkEnd {
    let delay = chain
        .iter()
        .filter_map(|t| match t.kind {
            ToxicKind::SlowClose { delay } => Some(delay),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let _ = writer.shutdown().await;
    LinkEnd::Eof
}

/// Writes one chunk through the chain. `Ok(false)` means a limit_data budget is used up and
/// the connection must close.
async fn deliver<W: AsyncWrite + Unpin>(
    link: &mut LinkState,
    chain: &[LinkToxic],
    arrival: Instant,
    data: Vec<u8>,
    writer: &mut W,
    toxics: &mut watch::Receiver<ToxicSet>,
) -> std::io::Result<bool> {
    let mut pieces = vec![Piece {
        wait: Duration::ZERO,
        data,
    }];
    let mut delay = Duration::ZERO;
    let mut keep_open = true;
    for t in chain {
        match t.kind {
            ToxicKind::Latency { latency, jitter } => {
                delay += toxics::latency_delay(latency, jitter, link.rng());
            }
            ToxicKind::Bandwidth { rate } => {
                pieces = pieces
                    .into_iter()
                    .flat_map(|p| toxics::throttle(p, rate))
                    .collect();
            }
            ToxicKind::Slicer {
                average_size,
                size_variation,
                delay,
            } => {
                let rng = link.rng();
                pieces = pieces
                    .into_iter()
                    .flat_map(|p| toxics::slice(p, average_size, size_variation, delay, rng))
                    .collect();
            }
            ToxicKind::LimitData { bytes } => {
                if let Some(passed) = link.passed_mut(&t.name) {
                    let (kept, n) = toxics::truncate(pieces, bytes.saturating_sub(*passed));
                    *passed += n;
                    pieces = kept;
                    if *passed >= bytes {
                        keep_open = false;
                    }
                }
            }
            ToxicKind::SlowClose { .. }
            | ToxicKind::Timeout { .. }
            | ToxicKind::ResetPeer { .. } => {}
        }
    }
    if !delay.is_zero() {
        wait_latency(arrival + delay, link, toxics).await;
    }
    for p in pieces {
        if !p.wait.is_zero() {
            tokio::time::sleep(p.wait).await;
        }
        writer.write_all(&p.data).await?;
    }
    writer.flush().await?;
    Ok(keep_open)
}

/// Waits until `until`, or less if every latency toxic of this link is removed meanwhile
/// (Toxiproxy flushes held data when a latency toxic goes away).
async fn wait_latency(
    until: Instant,
    link: &mut LinkState,
    toxics: &mut watch::Receiver<ToxicSet>,
) {
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(until) => return,
            changed = toxics.changed() => {
                if changed.is_err() {
                    return;
                }
                let set = toxics.borrow().clone();
                let still_slow = link
                    .chain(&set)
                    .iter()
                    .any(|t| matches!(t.kind, ToxicKind::Latency { .. }));
                if !still_slow {
                    return;
                }
            }
        }
    }
}
