//! The toxic pipeline of one direction of a connection: used while at least one toxic
//! affects that direction (see [`super::link`] for the switch to and from the fast path).
//!
//! A reader stage stamps every chunk with its arrival time and a writer stage applies the
//! toxic chain, so a latency toxic delays each chunk from its arrival (not cumulatively) and
//! the reader keeps draining the socket while data is held back. The writer re-reads the
//! proxy's toxic set on every chunk and whenever it changes. Waits shorter than tokio's 1 ms
//! timer tick (latency, slicer, bandwidth) go through [`super::timer`].

use std::future::poll_fn;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::link::{LinkEnd, ModeEnd, READ_SIZE};
use super::model::Stream;
use super::model::ToxicKind;
use super::timer;
use super::toxics::{self, LinkState, LinkToxic, Piece, ToxicSet};
use super::traffic::Traffic;

/// Chunks buffered between the reader and the writer stage.
const CHUNK_BUFFER: usize = 64;

/// A chunk and the time it was read.
type Chunk = (Instant, Vec<u8>);

/// Passes `reader` to `writer` through the toxics of `link`'s direction until the direction
/// ends ([`ModeEnd::End`]) or no toxic affects it any more and every chunk read so far has
/// been written ([`ModeEnd::Switch`]). No byte is lost on a switch: the reader stage is only
/// dropped while waiting for channel room or for the socket to become readable.
pub(crate) async fn run(
    reader: &mut OwnedReadHalf,
    writer: &mut OwnedWriteHalf,
    link: &mut LinkState,
    toxics: &mut watch::Receiver<ToxicSet>,
    (traffic, stream): (&Traffic, Stream),
) -> ModeEnd {
    let (tx, rx) = mpsc::channel::<Chunk>(CHUNK_BUFFER);
    let read_stage = async move {
        loop {
            let Ok(permit) = tx.reserve().await else {
                break;
            };
            match poll_fn(|cx| read_chunk(cx, reader)).await {
                Ok(Some(data)) => {
                    traffic.received(stream, data.len());
                    permit.send((Instant::now(), data));
                }
                Ok(None) | Err(_) => break,
            }
        }
        // `tx` drops here: the writer stage sees the end of the stream.
    };
    let write_stage = write_stage(rx, writer, link, toxics, (traffic, stream));
    tokio::pin!(read_stage, write_stage);
    tokio::select! {
        end = &mut write_stage => end,
        () = &mut read_stage => match write_stage.await {
            // Cannot happen once the source has ended (the channel reports the end instead),
            // but if it did, nothing is left to forward.
            ModeEnd::Switch => ModeEnd::End(LinkEnd::Eof),
            end => end,
        },
    }
}

/// One read into a stack buffer, copied out at its exact size; `None` at the end of the stream.
fn read_chunk(
    cx: &mut std::task::Context<'_>,
    reader: &mut OwnedReadHalf,
) -> std::task::Poll<std::io::Result<Option<Vec<u8>>>> {
    let mut storage = [MaybeUninit::<u8>::uninit(); READ_SIZE];
    let mut buf = ReadBuf::uninit(&mut storage);
    std::task::ready!(Pin::new(reader).poll_read(cx, &mut buf))?;
    let data = buf.filled();
    std::task::Poll::Ready(Ok((!data.is_empty()).then(|| data.to_vec())))
}

async fn write_stage(
    mut chunks: mpsc::Receiver<Chunk>,
    writer: &mut OwnedWriteHalf,
    link: &mut LinkState,
    toxics: &mut watch::Receiver<ToxicSet>,
    (traffic, stream): (&Traffic, Stream),
) -> ModeEnd {
    // The chain is rebuilt only when the proxy's toxic set is replaced (the set is an `Arc`
    // swapped on every change), not for every chunk.
    let mut set = toxics.borrow_and_update().clone();
    let mut chain = link.chain(&set);
    loop {
        let current = toxics.borrow_and_update().clone();
        if !Arc::ptr_eq(&current, &set) {
            set = current;
            chain = link.chain(&set);
        }

        // No toxic left: write out what is held back, then go back to the fast path.
        if chain.is_empty() {
            match chunks.try_recv() {
                Ok((_, data)) => {
                    if writer.write_all(&data).await.is_err() {
                        return ModeEnd::End(LinkEnd::Close);
                    }
                    traffic.sent(stream, data.len());
                    continue;
                }
                Err(TryRecvError::Empty) => return ModeEnd::Switch,
                Err(TryRecvError::Disconnected) => {
                    return ModeEnd::End(finish(writer, &chain).await)
                }
            }
        }

        // timeout / reset_peer: drop data until the toxic goes away or its timer fires.
        if let Some((deadline, end)) = chain.iter().find_map(blocking) {
            tokio::select! {
                changed = toxics.changed() => {
                    if changed.is_err() {
                        return ModeEnd::End(LinkEnd::Close);
                    }
                }
                chunk = chunks.recv() => {
                    if chunk.is_none() {
                        return ModeEnd::End(finish(writer, &chain).await);
                    }
                }
                () = sleep_until_opt(deadline) => return ModeEnd::End(end),
            }
            continue;
        }

        let chunk = tokio::select! {
            changed = toxics.changed() => {
                if changed.is_err() {
                    return ModeEnd::End(LinkEnd::Close);
                }
                continue;
            }
            chunk = chunks.recv() => chunk,
        };
        let Some((arrival, data)) = chunk else {
            return ModeEnd::End(finish(writer, &chain).await);
        };
        match deliver(
            link,
            &chain,
            arrival,
            data,
            writer,
            toxics,
            (traffic, stream),
        )
        .await
        {
            Ok(true) => {}
            Ok(false) | Err(_) => return ModeEnd::End(LinkEnd::Close),
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
async fn finish(writer: &mut OwnedWriteHalf, chain: &[LinkToxic]) -> LinkEnd {
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
async fn deliver(
    link: &mut LinkState,
    chain: &[LinkToxic],
    arrival: Instant,
    data: Vec<u8>,
    writer: &mut OwnedWriteHalf,
    toxics: &mut watch::Receiver<ToxicSet>,
    (traffic, stream): (&Traffic, Stream),
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
        timer::sleep(p.wait).await;
        writer.write_all(&p.data).await?;
        traffic.sent(stream, p.data.len());
    }
    Ok(keep_open)
}

/// Waits until `until` (at the median: [`timer::sleep_until_on_median`]), or less if every
/// latency toxic of this link is removed meanwhile (Toxiproxy flushes held data when a
/// latency toxic goes away).
async fn wait_latency(
    until: Instant,
    link: &mut LinkState,
    toxics: &mut watch::Receiver<ToxicSet>,
) {
    loop {
        tokio::select! {
            () = timer::sleep_until_on_median(until) => return,
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
