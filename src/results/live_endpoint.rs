//! `--metrics ADDR`: an HTTP listener serving [`LiveMetrics`] at `GET /metrics` (OpenMetrics
//! text, [`super::live::CONTENT_TYPE`]) while a run goes, and for a bounded linger after it so
//! a scraper gets the final figures.
//!
//! The address is bound when the endpoint is created, before any node or proxy starts, so a
//! port in use fails the command at once. The server runs on a thread and a single-threaded
//! tokio runtime of its own (as the embedded Toxiproxy does): a scrape never queues behind
//! the workload's clients, and encoding never runs on their thread.

use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::Duration;

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use super::live::{LiveMetrics, CONTENT_TYPE};

/// How long the endpoint stays up after the run by default.
pub const DEFAULT_LINGER: Duration = Duration::from_secs(5);

/// The longest linger accepted (`--metrics-linger`).
pub const MAX_LINGER: Duration = Duration::from_secs(600);

/// How long open scrapes may finish after the endpoint is told to stop.
const DRAIN: Duration = Duration::from_secs(1);

/// Errors of the metrics endpoint.
#[derive(Debug, thiserror::Error)]
pub enum MetricsEndpointError {
    /// The address could not be bound (the port is in use, or the address is not local).
    #[error("--metrics {addr}: cannot listen there: {source} (is another process using the port? pick a free one)")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The linger asked for is longer than [`MAX_LINGER`].
    #[error("--metrics-linger {given:?} is longer than the {MAX_LINGER:?} allowed")]
    LingerTooLong {
        /// The linger asked for.
        given: Duration,
    },
    /// The server thread or its runtime could not start.
    #[error("--metrics: cannot start the server thread: {0}")]
    Runtime(std::io::Error),
}

/// The running endpoint. Dropping it stops the server without lingering.
pub struct MetricsEndpoint {
    addr: SocketAddr,
    metrics: LiveMetrics,
    linger: Duration,
    stop: CancellationToken,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for MetricsEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsEndpoint")
            .field("addr", &self.addr)
            .field("linger", &self.linger)
            .finish_non_exhaustive()
    }
}

impl MetricsEndpoint {
    /// Binds `addr` now and serves `metrics` at `/metrics` from a thread of its own; after the
    /// run it stays up for `linger` ([`finish`](Self::finish)).
    ///
    /// # Errors
    /// [`MetricsEndpointError::Bind`] when `addr` cannot be bound (port in use),
    /// [`MetricsEndpointError::LingerTooLong`] past [`MAX_LINGER`],
    /// [`MetricsEndpointError::Runtime`] when the thread cannot start.
    pub fn start(
        addr: SocketAddr,
        metrics: LiveMetrics,
        linger: Duration,
    ) -> Result<Self, MetricsEndpointError> {
        if linger > MAX_LINGER {
            return Err(MetricsEndpointError::LingerTooLong { given: linger });
        }
        let bind = |source| MetricsEndpointError::Bind { addr, source };
        let listener = std::net::TcpListener::bind(addr).map_err(bind)?;
        listener.set_nonblocking(true).map_err(bind)?;
        let bound = listener.local_addr().map_err(bind)?;
        let stop = CancellationToken::new();
        let app = axum::Router::new().route(
            "/metrics",
            get({
                let metrics = metrics.clone();
                move || scrape(metrics.clone())
            }),
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(MetricsEndpointError::Runtime)?;
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("metrics-endpoint".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::error!("--metrics: cannot serve: {e}");
                            return;
                        }
                    };
                    let graceful = stopping.clone();
                    let served = axum::serve(listener, app)
                        .with_graceful_shutdown(async move { graceful.cancelled().await });
                    // A scraper's open connection delays the stop by at most DRAIN.
                    let drain_bound = async {
                        stopping.cancelled().await;
                        tokio::time::sleep(DRAIN).await;
                    };
                    tokio::select! {
                        served = served => {
                            if let Err(e) = served {
                                tracing::warn!("--metrics: the server ended with an error: {e}");
                            }
                        }
                        () = drain_bound => {}
                    }
                });
                // Scrapes still open are dropped with the runtime.
                runtime.shutdown_timeout(Duration::from_millis(200));
            })
            .map_err(MetricsEndpointError::Runtime)?;
        Ok(Self {
            addr: bound,
            metrics,
            linger,
            stop,
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The metrics it serves (the runner updates them).
    pub fn metrics(&self) -> &LiveMetrics {
        &self.metrics
    }

    /// The run is over: keeps serving for the linger (or until `interrupt` resolves, e.g. a
    /// second Ctrl-C), then stops the server and waits for its thread.
    pub async fn finish(mut self, interrupt: impl std::future::Future<Output = ()>) {
        if !self.linger.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(self.linger) => {}
                () = interrupt => {}
            }
        }
        self.stop.cancel();
        if let Some(thread) = self.thread.take() {
            // Joined off the runtime's thread; the server stops within its shutdown timeout.
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

impl Drop for MetricsEndpoint {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn scrape(metrics: LiveMetrics) -> impl IntoResponse {
    metrics.refresh_traffic().await;
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], metrics.encode())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_port_in_use_is_refused_before_serving() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let err = MetricsEndpoint::start(addr, LiveMetrics::new(), DEFAULT_LINGER).unwrap_err();
        assert!(matches!(err, MetricsEndpointError::Bind { .. }), "{err}");
        assert!(err.to_string().contains(&addr.to_string()), "{err}");
    }

    #[tokio::test]
    async fn serves_openmetrics_and_is_gone_after_finish() {
        let live = LiveMetrics::new();
        live.fault("partition", true);
        let ep = MetricsEndpoint::start(
            "127.0.0.1:0".parse().unwrap(),
            live,
            Duration::from_millis(1),
        )
        .unwrap();
        let url = format!("http://{}/metrics", ep.addr());
        let reply = reqwest::get(&url).await.unwrap();
        assert_eq!(reply.status(), 200);
        assert_eq!(
            reply.headers()[header::CONTENT_TYPE.as_str()],
            CONTENT_TYPE,
            "content type"
        );
        let text = reply.text().await.unwrap();
        assert!(text.contains("lockbench_faults_active{kind=\"partition\"} 1"));
        assert!(text.ends_with("# EOF\n"));
        let addr = ep.addr();
        ep.finish(std::future::pending()).await;
        assert!(
            std::net::TcpStream::connect(addr).is_err(),
            "nothing listens after finish"
        );
    }

    #[test]
    fn a_linger_past_the_bound_is_refused() {
        let err = MetricsEndpoint::start(
            "127.0.0.1:0".parse().unwrap(),
            LiveMetrics::new(),
            MAX_LINGER + Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(matches!(err, MetricsEndpointError::LingerTooLong { .. }));
    }
}
