//! [`ToxiproxyServer`]: the embedded Toxiproxy-compatible HTTP server and its proxies.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::api;
use super::proxy::ProxyRegistry;

/// How long [`ToxiproxyServer::shutdown`] waits for open HTTP requests before dropping them.
const HTTP_DRAIN: Duration = Duration::from_secs(2);

/// Errors of the embedded server.
#[derive(Debug, thiserror::Error)]
pub enum ToxiproxyError {
    /// The API address could not be bound (in use, no permission, bad address).
    #[error(
        "cannot start the Toxiproxy API on {addr}: {source}. \
         Pick another address (port 0 picks a free one) or stop whatever is using it"
    )]
    Bind {
        /// Address asked for.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The bound listener has no local address (should not happen on TCP).
    #[error("cannot read the local address of the Toxiproxy API listener: {0}")]
    LocalAddr(std::io::Error),
}

/// An in-process server that speaks Shopify Toxiproxy's HTTP API (see the module docs).
///
/// Dropping it without [`ToxiproxyServer::shutdown`] still cancels every proxy listener,
/// connection and the HTTP server, but without waiting for them to finish.
pub struct ToxiproxyServer {
    addr: SocketAddr,
    registry: Arc<ProxyRegistry>,
    root: CancellationToken,
    http: Option<JoinHandle<()>>,
}

impl ToxiproxyServer {
    /// Binds the API on `listen` (port 0 picks a free port) and starts serving.
    ///
    /// # Errors
    /// [`ToxiproxyError::Bind`] if the address cannot be bound, e.g. the port is in use.
    pub async fn start(listen: SocketAddr) -> Result<ToxiproxyServer, ToxiproxyError> {
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|source| ToxiproxyError::Bind {
                addr: listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(ToxiproxyError::LocalAddr)?;
        let root = CancellationToken::new();
        let registry = Arc::new(ProxyRegistry::new(root.clone()));
        let app = api::router(registry.clone());
        let stop = root.clone();
        let http = tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await;
            if let Err(e) = served {
                tracing::warn!(error = %e, "toxiproxy API server ended with an error");
            }
        });
        tracing::info!(%addr, "toxiproxy API listening");
        Ok(ToxiproxyServer {
            addr,
            registry,
            root,
            http: Some(http),
        })
    }

    /// The bound API address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`, the base URL for [`super::ToxiproxyClient::new`].
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Closes every proxy listener and connection, then stops the HTTP server. When this
    /// returns no proxy port accepts connections any more.
    pub async fn shutdown(mut self) {
        self.registry.close_all().await;
        self.root.cancel();
        if let Some(mut http) = self.http.take() {
            if tokio::time::timeout(HTTP_DRAIN, &mut http).await.is_err() {
                http.abort();
                let _ = http.await;
            }
        }
    }
}

impl Drop for ToxiproxyServer {
    fn drop(&mut self) {
        // Child tokens of `root` stop every accept loop and connection.
        self.root.cancel();
        if let Some(http) = self.http.take() {
            http.abort();
        }
    }
}

impl std::fmt::Debug for ToxiproxyServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToxiproxyServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}
