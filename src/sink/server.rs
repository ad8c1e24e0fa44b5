//! The sink's HTTP server: a task on the caller's runtime, on a free 127.0.0.1 port, stopped
//! by [`SinkServer::stop`] (or with the process: it starts no process of its own).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::store::{KeyClaim, SinkStore};
use super::{Charge, SinkError};
use crate::history::RunClock;

/// The header that carries a request's idempotency key.
pub const IDEMPOTENCY_HEADER: &str = "idempotency-key";

struct Shared {
    store: Mutex<SinkStore>,
    clock: RunClock,
    processing: Duration,
}

/// A running sink.
pub struct SinkServer {
    addr: SocketAddr,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
    shared: Arc<Shared>,
}

impl SinkServer {
    /// Creates the sink's table at `path` and serves it on a free 127.0.0.1 port (a port the
    /// kernel picks, so no port can be in use). Requests are stamped with `clock`. A request
    /// with a new idempotency key stays in flight for `processing` between its claim and its
    /// charge (0: both in one step); a repeat of the key meanwhile gets `409`.
    ///
    /// # Errors
    /// [`SinkError::Open`] / [`SinkError::NotEmpty`] for the table, [`SinkError::Bind`].
    pub async fn start(
        path: &Path,
        clock: RunClock,
        processing: Duration,
    ) -> Result<SinkServer, SinkError> {
        let store = SinkStore::create(path)?;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(SinkError::Bind)?;
        let addr = listener.local_addr().map_err(SinkError::Bind)?;
        let shared = Arc::new(Shared {
            store: Mutex::new(store),
            clock,
            processing,
        });
        let app = Router::new()
            .route("/v1/charges", post(charge))
            .with_state(shared.clone());
        let (shutdown, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
        });
        Ok(SinkServer {
            addr,
            shutdown,
            task,
            shared,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops serving after the requests in flight are answered, at most `bound` later, and
    /// checkpoints the table. Every answer given is already committed.
    pub async fn stop(self, bound: Duration) {
        let _ = self.shutdown.send(());
        let mut task = self.task;
        if tokio::time::timeout(bound, &mut task).await.is_err() {
            tracing::warn!("sink: requests still in flight {bound:?} after the stop; cut");
            task.abort();
        }
        let store = self.shared.store.lock().unwrap_or_else(|p| p.into_inner());
        let _ = store.checkpoint();
    }
}

async fn charge(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Result<Json<Charge>, JsonRejection>,
) -> Response {
    let Json(charge) = match body {
        Ok(b) => b,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({ "error": e.body_text() })),
            )
                .into_response()
        }
    };
    let key = headers
        .get(IDEMPOTENCY_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let answer = if shared.processing.is_zero() || key.is_none() {
        // One blocking step: it completes even if the caller gives up meanwhile.
        let s = shared.clone();
        tokio::task::spawn_blocking(move || step(&s, &charge, key.as_deref(), true)).await
    } else {
        let s = shared.clone();
        let (c, k) = (charge.clone(), key.clone());
        let claim = tokio::task::spawn_blocking(move || step(&s, &c, k.as_deref(), false)).await;
        match claim {
            Ok(Ok(Answer::Fresh)) => {
                tokio::time::sleep(shared.processing).await;
                let s = shared.clone();
                tokio::task::spawn_blocking(move || apply(&s, &charge, key.as_deref())).await
            }
            other => other,
        }
    };
    let failed = |e: &dyn std::fmt::Display| {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({ "error": e.to_string() })),
        )
            .into_response()
    };
    match answer {
        Ok(Ok(Answer::Charged { id, replayed })) => (
            StatusCode::OK,
            Json(json!({ "charge_id": id, "replayed": replayed })),
        )
            .into_response(),
        Ok(Ok(Answer::Conflict)) => (
            StatusCode::CONFLICT,
            Json(json!({
                "error": "a request with this idempotency key is still being processed"
            })),
        )
            .into_response(),
        Ok(Ok(Answer::Fresh)) => unreachable!("a fresh claim is applied above"),
        Ok(Err(e)) => failed(&e),
        Err(e) => failed(&e),
    }
}

enum Answer {
    Fresh,
    Conflict,
    Charged { id: i64, replayed: bool },
}

/// A request's first step: a keyed request claims its key (and, with `then_apply`, is charged
/// at once when the key is new); an unkeyed one is charged.
fn step(
    shared: &Shared,
    charge: &Charge,
    key: Option<&str>,
    then_apply: bool,
) -> Result<Answer, SinkError> {
    let Some(k) = key else {
        return apply(shared, charge, None);
    };
    let claim = {
        let mut store = shared.store.lock().unwrap_or_else(|p| p.into_inner());
        store.claim_key(shared.clock.now_us(), charge, k)?
    };
    match claim {
        KeyClaim::Fresh if then_apply => apply(shared, charge, key),
        KeyClaim::Fresh => Ok(Answer::Fresh),
        KeyClaim::InFlight => Ok(Answer::Conflict),
        KeyClaim::Applied(id) => Ok(Answer::Charged { id, replayed: true }),
    }
}

fn apply(shared: &Shared, charge: &Charge, key: Option<&str>) -> Result<Answer, SinkError> {
    let mut store = shared.store.lock().unwrap_or_else(|p| p.into_inner());
    let id = store.apply(shared.clock.now_us(), charge, key)?;
    Ok(Answer::Charged {
        id,
        replayed: false,
    })
}
