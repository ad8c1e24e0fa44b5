//! One proxied connection: two pumps (client → upstream and upstream → client).
//!
//! Each pump runs in one of two modes and switches between them while the connection stays
//! open:
//! - **fast path** (no toxic affects this direction): every readable chunk is read into a
//!   stack buffer and written straight to the other socket within the same poll, with no
//!   allocation, channel or toxic bookkeeping (like `tokio::io::copy_bidirectional`, minus
//!   its per-connection heap buffers). Only bytes the peer cannot take at once are copied to
//!   the heap until they are written.
//! - **toxic pipeline** ([`super::pipeline`]): chunks stamped with their arrival time pass
//!   through the toxic chain of this direction.
//!
//! Both modes watch the proxy's toxic set (a `tokio::sync::watch` channel): a toxic added to
//! the proxy moves the live connection's affected directions to the pipeline at once, and
//! once no toxic affects a direction and everything held back has been written, it returns to
//! the fast path, as in Toxiproxy where toxics apply to live connections.

use std::future::poll_fn;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use rand::SeedableRng;
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::model::Stream;
use super::pipeline;
use super::toxics::{LinkState, ToxicSet};
use super::traffic::Traffic;

/// Largest single read, in bytes. The buffer lives on the stack only while one poll runs, so
/// an idle connection holds no read buffer.
pub(crate) const READ_SIZE: usize = 16 * 1024;
/// Time allowed to connect to the upstream before the client connection is dropped.
pub(crate) const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How one pump (or the whole connection) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkEnd {
    /// The source closed; the close was passed on (after any slow_close delay).
    Eof,
    /// Close both sockets normally (limit_data, timeout toxic, write error).
    Close,
    /// Close both sockets with a TCP RST (reset_peer).
    Reset,
}

/// What a pump mode returns: the end of the direction, or "the toxics changed, pick a mode".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ModeEnd {
    /// This direction is finished.
    End(LinkEnd),
    /// Toxics of this direction changed (fast path) or none is left and nothing is held
    /// back (pipeline): choose the mode again.
    Switch,
}

/// Runs one client connection until it ends or `stop` is cancelled (proxy disabled,
/// deleted, or server shut down); then both sockets are closed.
pub(crate) async fn run_connection(
    client: TcpStream,
    upstream: String,
    toxics: watch::Receiver<ToxicSet>,
    stop: CancellationToken,
    traffic: std::sync::Arc<Traffic>,
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
            &traffic,
        );
        let down = pump(
            &mut server_read,
            &mut client_write,
            Stream::Downstream,
            toxics,
            &traffic,
        );
        tokio::pin!(up, down);
        let (mut up_done, mut down_done) = (false, false);
        loop {
            tokio::select! {
                biased;
                end = &mut up, if !up_done => match end {
                    LinkEnd::Eof => up_done = true,
                    other => break other,
                },
                end = &mut down, if !down_done => match end {
                    LinkEnd::Eof => down_done = true,
                    other => break other,
                },
                () = stop.cancelled() => break LinkEnd::Close,
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

/// Copies `reader` to `writer` until the source ends or a toxic ends the connection,
/// switching between the fast path and the toxic pipeline as toxics come and go.
async fn pump(
    reader: &mut OwnedReadHalf,
    writer: &mut OwnedWriteHalf,
    stream: Stream,
    mut toxics: watch::Receiver<ToxicSet>,
    traffic: &Traffic,
) -> LinkEnd {
    // Created on the first toxic of this direction: it keeps toxicity draws, timer starts and
    // byte counters for the rest of the connection.
    let mut link: Option<LinkState> = None;
    loop {
        let set = toxics.borrow_and_update().clone();
        let toxic = set.iter().any(|t| t.info.stream == stream) && {
            let link = link
                .get_or_insert_with(|| LinkState::new(stream, rand::rngs::StdRng::from_os_rng()));
            !link.chain(&set).is_empty()
        };
        let step = match (&mut link, toxic) {
            (Some(link), true) => {
                pipeline::run(reader, writer, link, &mut toxics, (traffic, stream)).await
            }
            _ => fast_path(reader, writer, &mut toxics, (traffic, stream)).await,
        };
        match step {
            ModeEnd::End(end) => return end,
            ModeEnd::Switch => continue,
        }
    }
}

/// Forwards bytes as they arrive until the toxic set changes, the source ends or an I/O
/// error occurs.
async fn fast_path(
    reader: &mut OwnedReadHalf,
    writer: &mut OwnedWriteHalf,
    toxics: &mut watch::Receiver<ToxicSet>,
    (traffic, stream): (&Traffic, Stream),
) -> ModeEnd {
    // Bytes read but refused by the peer (its receive window is full); usually empty.
    let mut backlog: Vec<u8> = Vec::new();
    let changed = toxics.changed();
    tokio::pin!(changed);
    loop {
        if !backlog.is_empty() {
            if writer.write_all(&backlog).await.is_err() {
                return ModeEnd::End(LinkEnd::Close);
            }
            traffic.sent(stream, backlog.len());
            backlog.clear();
            backlog.shrink_to(READ_SIZE);
        }
        let forwarded = tokio::select! {
            biased;
            r = &mut changed => {
                return match r {
                    Ok(()) => ModeEnd::Switch,
                    // The proxy is gone.
                    Err(_) => ModeEnd::End(LinkEnd::Close),
                };
            }
            f = poll_fn(|cx| forward_ready(cx, reader, writer, &mut backlog, (traffic, stream))) => f,
        };
        match forwarded {
            Ok(Forwarded::Backlog) => {}
            Ok(Forwarded::Eof) => {
                let _ = writer.shutdown().await;
                return ModeEnd::End(LinkEnd::Eof);
            }
            Err(_) => return ModeEnd::End(LinkEnd::Close),
        }
    }
}

/// Why [`forward_ready`] stopped forwarding.
enum Forwarded {
    /// The peer did not take every byte; the rest is in the backlog.
    Backlog,
    /// The source closed.
    Eof,
}

/// Reads whatever is ready and writes it on at once, until nothing more is ready (`Pending`,
/// with the read interest registered), the peer stops taking bytes, or the source ends.
/// tokio's cooperative budget makes a busy connection yield now and then.
fn forward_ready(
    cx: &mut Context<'_>,
    reader: &mut OwnedReadHalf,
    writer: &OwnedWriteHalf,
    backlog: &mut Vec<u8>,
    (traffic, stream): (&Traffic, Stream),
) -> Poll<io::Result<Forwarded>> {
    let mut storage = [MaybeUninit::<u8>::uninit(); READ_SIZE];
    loop {
        let mut buf = ReadBuf::uninit(&mut storage);
        std::task::ready!(Pin::new(&mut *reader).poll_read(cx, &mut buf))?;
        let data = buf.filled();
        if data.is_empty() {
            return Poll::Ready(Ok(Forwarded::Eof));
        }
        traffic.received(stream, data.len());
        let mut written = 0;
        while written < data.len() {
            match writer.try_write(&data[written..]) {
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    traffic.sent(stream, written);
                    backlog.extend_from_slice(&data[written..]);
                    return Poll::Ready(Ok(Forwarded::Backlog));
                }
                Err(e) => {
                    traffic.sent(stream, written);
                    return Poll::Ready(Err(e));
                }
            }
        }
        traffic.sent(stream, written);
    }
}
