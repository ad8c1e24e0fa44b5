//! Bytes through each proxy, counted as Shopify Toxiproxy counts them for its
//! `toxiproxy_proxy_received_bytes_total` / `toxiproxy_proxy_sent_bytes_total` metrics
//! (source: Shopify/toxiproxy `METRICS.md`, `collectors/proxy.go`): per proxy and direction,
//! bytes **received** by the proxy (read from the client upstream, from the server downstream)
//! and bytes **sent** on (written to the server upstream, to the client downstream). The two
//! differ while toxics hold data back or drop it.
//!
//! Each pump adds its bytes with one relaxed atomic add per chunk read or written; nothing
//! else on the forwarding path changes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::model::Stream;
use super::proxy::ProxyRegistry;

/// Byte counters of one proxy, shared by all its connections.
#[derive(Debug, Default)]
pub(crate) struct Traffic {
    /// Bytes read, `[upstream, downstream]`.
    received: [AtomicU64; 2],
    /// Bytes written, `[upstream, downstream]`.
    sent: [AtomicU64; 2],
}

fn slot(stream: Stream) -> usize {
    match stream {
        Stream::Upstream => 0,
        Stream::Downstream => 1,
    }
}

impl Traffic {
    /// `n` bytes read in direction `stream`.
    pub(crate) fn received(&self, stream: Stream, n: usize) {
        self.received[slot(stream)].fetch_add(n as u64, Ordering::Relaxed);
    }

    /// `n` bytes written in direction `stream`.
    pub(crate) fn sent(&self, stream: Stream, n: usize) {
        self.sent[slot(stream)].fetch_add(n as u64, Ordering::Relaxed);
    }

    fn counts(&self, stream: Stream) -> (u64, u64) {
        let i = slot(stream);
        (
            self.received[i].load(Ordering::Relaxed),
            self.sent[i].load(Ordering::Relaxed),
        )
    }
}

/// One proxy's bytes in one direction so far, labelled as Toxiproxy labels them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkTraffic {
    /// Proxy name (`proxy` label).
    pub proxy: String,
    /// Its listen address (`listener` label).
    pub listener: String,
    /// Its upstream address (`upstream` label).
    pub upstream: String,
    /// `upstream` (client → server) or `downstream` (`direction` label).
    pub direction: Stream,
    /// Bytes the proxy read in this direction.
    pub received_bytes: u64,
    /// Bytes the proxy wrote on in this direction.
    pub sent_bytes: u64,
}

/// A cheap handle on an embedded server's proxies for reading their byte counts
/// ([`super::ToxiproxyServer::traffic_probe`]); it stays valid after the server stops (a
/// stopped server has no proxies).
#[derive(Clone)]
pub struct TrafficProbe {
    pub(crate) registry: Arc<ProxyRegistry>,
}

impl std::fmt::Debug for TrafficProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrafficProbe").finish_non_exhaustive()
    }
}

impl TrafficProbe {
    /// Every proxy's counts, two entries (upstream, downstream) per proxy, by proxy name.
    pub async fn links(&self) -> Vec<LinkTraffic> {
        let mut out = Vec::new();
        for p in self.registry.all().await {
            let info = p.info().await;
            for direction in [Stream::Upstream, Stream::Downstream] {
                let (received_bytes, sent_bytes) = p.traffic().counts(direction);
                out.push(LinkTraffic {
                    proxy: info.name.clone(),
                    listener: info.listen.clone(),
                    upstream: info.upstream.clone(),
                    direction,
                    received_bytes,
                    sent_bytes,
                });
            }
        }
        out
    }
}
