//! [`ToxiproxyServer`]: the embedded Toxiproxy-compatible HTTP server and its proxies.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::api;
use super::proxy::ProxyRegistry;
use super::ToxiproxyError;

/// How long the HTTP server waits for open requests after shutdown before dropping them.
const HTTP_DRAIN: Duration = Duration::from_secs(2);

/// An in-process server that speaks Shopify Toxiproxy's HTTP API (see the module docs).
///
/// It runs on its own thread and single-threaded tokio runtime, so the proxies'
/// forwarding never queues behind the tasks of the process that embeds it (e.g. thousands of
/// workload clients), and their latency toxics wake up on time.
///
/// Dropping it without [`ToxiproxyServer::shutdown`] still cancels every proxy listener,
/// connection and the HTTP server, but without waiting for them to finish.
pub struct ToxiproxyServer {
    addr: SocketAddr,
    registry: Arc<ProxyRegistry>,
    root: CancellationToken,
    /// Fires when the server thread has stopped its runtime.
    finished: Option<oneshot::Receiver<()>>,
}

impl ToxiproxyServer {
    /// Binds the API on `listen` (port 0 picks a free port) and starts serving on a thread of
    /// its own.
    ///
    /// # Errors
    /// [`ToxiproxyError::Bind`] if the address cannot be bound, e.g. the port is in use;
    /// [`ToxiproxyError::Runtime`] if the server thread cannot start.
    pub async fn start(listen: SocketAddr) -> Result<ToxiproxyServer, ToxiproxyError> {
        let bind = |source| ToxiproxyError::Bind {
            addr: listen,
            source,
        };
        let listener = std::net::TcpListener::bind(listen).map_err(bind)?;
        listener.set_nonblocking(true).map_err(bind)?;
        let addr = listener.local_addr().map_err(ToxiproxyError::LocalAddr)?;
        let root = CancellationToken::new();
        let registry = Arc::new(ProxyRegistry::new(root.clone()));
        let (ready_tx, ready_rx) = oneshot::channel();
        let (finished_tx, finished) = oneshot::channel();
        let app = api::router(registry.clone());
        let stop = root.clone();
        std::thread::Builder::new()
            .name("lockbench-toxiproxy".into())
            .spawn(move || serve_on_own_runtime(listener, app, stop, ready_tx, finished_tx))
            .map_err(ToxiproxyError::Runtime)?;
        match ready_rx.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(ToxiproxyError::Runtime(std::io::Error::other(
                    "the server thread ended before it was ready",
                )))
            }
        }
        tracing::info!(%addr, "toxiproxy API listening");
        Ok(ToxiproxyServer {
            addr,
            registry,
            root,
            finished: Some(finished),
        })
    }

    /// The bound API address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A handle for reading every proxy's byte counts while the server runs ([`TrafficProbe`]).
    pub fn traffic_probe(&self) -> super::TrafficProbe {
        super::TrafficProbe {
            registry: self.registry.clone(),
        }
    }

    /// `http://<addr>`, the base URL for [`super::ToxiproxyClient::new`].
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Closes every proxy listener and connection, then stops the HTTP server and the server's
    /// thread (waiting at most ~3 s for open HTTP requests). When this returns no proxy port
    /// accepts connections any more.
    pub async fn shutdown(mut self) {
        self.registry.close_all().await;
        self.root.cancel();
        if let Some(finished) = self.finished.take() {
            let bound = HTTP_DRAIN + Duration::from_secs(1);
            if tokio::time::timeout(bound, finished).await.is_err() {
                tracing::warn!("toxiproxy server thread did not stop within {bound:?}");
            }
        }
    }
}

/// The body of the server thread: builds the runtime, reports readiness, serves the API until
/// `stop` is cancelled (plus at most [`HTTP_DRAIN`] for open requests), then stops the
/// runtime, which drops any task still running.
fn serve_on_own_runtime(
    listener: std::net::TcpListener,
    app: axum::Router,
    stop: CancellationToken,
    ready: oneshot::Sender<Result<(), ToxiproxyError>>,
    finished: oneshot::Sender<()>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(ToxiproxyError::Runtime(e)));
            return;
        }
    };
    runtime.block_on(async move {
        let listener = match TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                let _ = ready.send(Err(ToxiproxyError::Runtime(e)));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        let graceful = stop.clone();
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { graceful.cancelled().await });
        let drain_bound = async {
            stop.cancelled().await;
            tokio::time::sleep(HTTP_DRAIN).await;
        };
        tokio::select! {
            served = served => {
                if let Err(e) = served {
                    tracing::warn!(error = %e, "toxiproxy API server ended with an error");
                }
            }
            () = drain_bound => {
                tracing::warn!("toxiproxy API: dropping requests still open {HTTP_DRAIN:?} after shutdown");
            }
        }
    });
    runtime.shutdown_timeout(Duration::from_millis(500));
    let _ = finished.send(());
}

impl Drop for ToxiproxyServer {
    fn drop(&mut self) {
        // Child tokens of `root` stop every accept loop and connection; the server thread
        // then stops its runtime on its own.
        self.root.cancel();
    }
}

impl std::fmt::Debug for ToxiproxyServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToxiproxyServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}
