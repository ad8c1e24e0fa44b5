//! A proxy's lifecycle (listen, enable, disable, update) and its toxic list, plus the
//! registry of all proxies of one server.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{watch, Mutex};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::link::run_connection;
use super::model::{ProxyInfo, ToxicInfo, ToxicKind};
use super::toxics::{ActiveToxic, ToxicSet};
use super::traffic::Traffic;

/// Depth of each proxy's accept queue (the kernel caps it at `net.core.somaxconn`), so
/// thousands of clients connecting at once are queued rather than refused or left to retry
/// their SYN.
pub(crate) const LISTEN_BACKLOG: u32 = 4096;
/// First pause after an accept error.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
/// Longest pause between accept attempts while they keep failing.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_millis(500);

/// Why a proxy or toxic operation failed; the API maps each to Toxiproxy's status code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProxyFault {
    /// 404: `proxy not found`.
    ProxyNotFound,
    /// 409: `proxy already exists`.
    ProxyExists,
    /// 404: `toxic not found`.
    ToxicNotFound,
    /// 409: `toxic already exists`.
    ToxicExists,
    /// 400: bad body, stream, type or attributes (message says which).
    BadRequest(String),
    /// 500: the listen address could not be bound.
    Listen(String),
}

/// What a running (enabled) proxy owns: its accept loop and live connections.
struct Running {
    stop: CancellationToken,
    tasks: TaskTracker,
}

struct ProxyState {
    listen: String,
    upstream: String,
    enabled: bool,
    running: Option<Running>,
}

/// One proxy. All mutations go through the `state` lock, so API calls on one proxy are serial.
pub(crate) struct Proxy {
    name: String,
    state: Mutex<ProxyState>,
    toxics: watch::Sender<ToxicSet>,
    revisions: AtomicU64,
    root: CancellationToken,
    /// Bytes through this proxy since it was created (every connection adds to it).
    traffic: Arc<Traffic>,
}

impl Proxy {
    fn new(name: String, listen: String, upstream: String, root: CancellationToken) -> Proxy {
        let (toxics, _) = watch::channel(Arc::new(Vec::new()));
        Proxy {
            name,
            state: Mutex::new(ProxyState {
                listen,
                upstream,
                enabled: false,
                running: None,
            }),
            toxics,
            revisions: AtomicU64::new(1),
            root,
            traffic: Arc::default(),
        }
    }

    /// Bytes through this proxy since it was created.
    pub(crate) fn traffic(&self) -> &Traffic {
        &self.traffic
    }

    /// The API view of this proxy.
    pub(crate) async fn info(&self) -> ProxyInfo {
        let st = self.state.lock().await;
        ProxyInfo {
            name: self.name.clone(),
            listen: st.listen.clone(),
            upstream: st.upstream.clone(),
            enabled: st.enabled,
            toxics: self.toxic_list(),
        }
    }

    /// Active toxics in creation order.
    pub(crate) fn toxic_list(&self) -> Vec<ToxicInfo> {
        self.toxics
            .borrow()
            .iter()
            .map(|t| t.info.clone())
            .collect()
    }

    pub(crate) fn toxic(&self, name: &str) -> Option<ToxicInfo> {
        self.toxics
            .borrow()
            .iter()
            .find(|t| t.info.name == name)
            .map(|t| t.info.clone())
    }

    /// Applies new settings; a changed listen or upstream restarts the proxy (closing its
    /// connections), `enabled` starts or stops it.
    pub(crate) async fn update(
        &self,
        listen: Option<String>,
        upstream: Option<String>,
        enabled: Option<bool>,
    ) -> Result<(), ProxyFault> {
        let mut st = self.state.lock().await;
        let listen_changed = listen.as_ref().is_some_and(|l| *l != st.listen);
        let upstream_changed = upstream.as_ref().is_some_and(|u| *u != st.upstream);
        let want_enabled = enabled.unwrap_or(st.enabled);
        if listen_changed || upstream_changed || !want_enabled {
            stop(&mut st).await;
        }
        if let Some(l) = listen {
            st.listen = l;
        }
        if let Some(u) = upstream {
            st.upstream = u;
        }
        if want_enabled && st.running.is_none() {
            self.start(&mut st).await?;
        }
        Ok(())
    }

    /// Stops the proxy for good (delete or server shutdown).
    pub(crate) async fn close(&self) {
        let mut st = self.state.lock().await;
        stop(&mut st).await;
    }

    async fn start(&self, st: &mut ProxyState) -> Result<(), ProxyFault> {
        let listener = bind_listener(&st.listen).await.map_err(|e| {
            ProxyFault::Listen(format!(
                "proxy {:?} cannot listen on {}: {e}",
                self.name, st.listen
            ))
        })?;
        if let Ok(addr) = listener.local_addr() {
            st.listen = addr.to_string();
        }
        let stop = self.root.child_token();
        let tasks = TaskTracker::new();
        tasks.spawn(accept_loop(
            listener,
            st.upstream.clone(),
            self.toxics.subscribe(),
            stop.clone(),
            tasks.clone(),
            self.traffic.clone(),
        ));
        st.enabled = true;
        st.running = Some(Running { stop, tasks });
        Ok(())
    }

    pub(crate) fn add_toxic(
        &self,
        name: String,
        kind: ToxicKind,
        stream: super::model::Stream,
        toxicity: f32,
    ) -> Result<ToxicInfo, ProxyFault> {
        let info = ToxicInfo {
            name,
            kind,
            stream,
            toxicity,
        };
        let revision = self.revisions.fetch_add(1, Ordering::Relaxed);
        let mut result = Err(ProxyFault::ToxicExists);
        self.toxics.send_if_modified(|set| {
            if set.iter().any(|t| t.info.name == info.name) {
                return false;
            }
            let mut next = set.as_ref().clone();
            next.push(ActiveToxic {
                info: info.clone(),
                revision,
            });
            *set = Arc::new(next);
            result = Ok(info.clone());
            true
        });
        result
    }

    /// Replaces attributes and/or toxicity of a toxic; `f` gets the current view.
    pub(crate) fn update_toxic(
        &self,
        name: &str,
        f: impl FnOnce(&ToxicInfo) -> Result<ToxicInfo, ProxyFault>,
    ) -> Result<ToxicInfo, ProxyFault> {
        let revision = self.revisions.fetch_add(1, Ordering::Relaxed);
        let mut result = Err(ProxyFault::ToxicNotFound);
        self.toxics.send_if_modified(|set| {
            let Some(pos) = set.iter().position(|t| t.info.name == name) else {
                return false;
            };
            match f(&set[pos].info) {
                Ok(info) => {
                    let mut next = set.as_ref().clone();
                    next[pos] = ActiveToxic {
                        info: info.clone(),
                        revision,
                    };
                    *set = Arc::new(next);
                    result = Ok(info);
                    true
                }
                Err(e) => {
                    result = Err(e);
                    false
                }
            }
        });
        result
    }

    pub(crate) fn remove_toxic(&self, name: &str) -> Result<(), ProxyFault> {
        let removed = self.toxics.send_if_modified(|set| {
            if !set.iter().any(|t| t.info.name == name) {
                return false;
            }
            *set = Arc::new(
                set.iter()
                    .filter(|t| t.info.name != name)
                    .cloned()
                    .collect(),
            );
            true
        });
        if removed {
            Ok(())
        } else {
            Err(ProxyFault::ToxicNotFound)
        }
    }

    /// Removes every toxic, upstream and downstream.
    pub(crate) fn clear_toxics(&self) {
        self.toxics.send_if_modified(|set| {
            if set.is_empty() {
                return false;
            }
            *set = Arc::new(Vec::new());
            true
        });
    }
}

/// Cancels the accept loop and every connection, and waits until all are gone, so the
/// listener is closed and no connection is open when this returns.
async fn stop(st: &mut ProxyState) {
    if let Some(running) = st.running.take() {
        running.stop.cancel();
        running.tasks.close();
        running.tasks.wait().await;
    }
    st.enabled = false;
}

/// Binds `listen` (`host:port`, port 0 picks one) with a [`LISTEN_BACKLOG`]-deep accept queue,
/// trying each resolved address in turn.
async fn bind_listener(listen: &str) -> std::io::Result<TcpListener> {
    let mut last_error = None;
    for addr in tokio::net::lookup_host(listen).await? {
        let bound = (|| {
            let socket = if addr.is_ipv4() {
                TcpSocket::new_v4()?
            } else {
                TcpSocket::new_v6()?
            };
            socket.set_reuseaddr(true)?;
            socket.bind(addr)?;
            socket.listen(LISTEN_BACKLOG)
        })();
        match bound {
            Ok(listener) => return Ok(listener),
            Err(e) => last_error = Some(e),
        }
    }
    Err(last_error.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the address resolves to nothing",
        )
    }))
}

async fn accept_loop(
    listener: TcpListener,
    upstream: String,
    toxics: watch::Receiver<ToxicSet>,
    stop: CancellationToken,
    tasks: TaskTracker,
    traffic: Arc<Traffic>,
) {
    let mut backoff = AcceptBackoff::default();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    backoff.succeeded(&upstream);
                    tasks.spawn(run_connection(
                        client,
                        upstream.clone(),
                        toxics.clone(),
                        stop.clone(),
                        traffic.clone(),
                    ));
                }
                Err(e) => {
                    let pause = backoff.failed(&e, &upstream);
                    tokio::select! {
                        () = stop.cancelled() => break,
                        () = tokio::time::sleep(pause) => {}
                    }
                }
            },
        }
    }
}

/// Pause after an accept error (e.g. EMFILE when the process is out of descriptors): starts at
/// [`ACCEPT_BACKOFF_MIN`], doubles per consecutive failure up to [`ACCEPT_BACKOFF_MAX`], and
/// logs once per run of failures (plus a line when accepting works again), so a full
/// descriptor table neither spins the loop nor floods the log.
#[derive(Debug, Default)]
struct AcceptBackoff {
    failures: u64,
    pause: Duration,
}

impl AcceptBackoff {
    fn failed(&mut self, e: &std::io::Error, upstream: &str) -> Duration {
        if self.failures == 0 {
            tracing::warn!(
                error = %e,
                %upstream,
                "toxiproxy: accept failed; backing off (up to {ACCEPT_BACKOFF_MAX:?} between \
                 tries) until it works again. EMFILE/ENFILE mean the process is out of file \
                 descriptors (each proxied connection costs two)"
            );
        }
        self.failures += 1;
        self.pause = (self.pause * 2).clamp(ACCEPT_BACKOFF_MIN, ACCEPT_BACKOFF_MAX);
        self.pause
    }

    fn succeeded(&mut self, upstream: &str) {
        if self.failures > 0 {
            tracing::warn!(
                %upstream,
                failures = self.failures,
                "toxiproxy: accepting connections again"
            );
            self.failures = 0;
            self.pause = Duration::ZERO;
        }
    }
}

/// Every proxy of one server, by name.
pub(crate) struct ProxyRegistry {
    proxies: Mutex<BTreeMap<String, Arc<Proxy>>>,
    root: CancellationToken,
}

impl ProxyRegistry {
    pub(crate) fn new(root: CancellationToken) -> ProxyRegistry {
        ProxyRegistry {
            proxies: Mutex::new(BTreeMap::new()),
            root,
        }
    }

    pub(crate) async fn get(&self, name: &str) -> Result<Arc<Proxy>, ProxyFault> {
        self.proxies
            .lock()
            .await
            .get(name)
            .cloned()
            .ok_or(ProxyFault::ProxyNotFound)
    }

    pub(crate) async fn all(&self) -> Vec<Arc<Proxy>> {
        self.proxies.lock().await.values().cloned().collect()
    }

    /// Creates and (if `enabled`) starts a proxy.
    pub(crate) async fn create(
        &self,
        name: String,
        listen: String,
        upstream: String,
        enabled: bool,
    ) -> Result<Arc<Proxy>, ProxyFault> {
        let mut map = self.proxies.lock().await;
        if map.contains_key(&name) {
            return Err(ProxyFault::ProxyExists);
        }
        let proxy = Arc::new(Proxy::new(
            name.clone(),
            listen,
            upstream,
            self.root.clone(),
        ));
        if enabled {
            proxy.update(None, None, Some(true)).await?;
        }
        map.insert(name, proxy.clone());
        Ok(proxy)
    }

    /// Create-or-replace for `/populate`: an existing proxy with the same listen and upstream
    /// is kept (and enabled as asked); otherwise it is deleted and recreated.
    pub(crate) async fn populate_one(
        &self,
        name: String,
        listen: String,
        upstream: String,
        enabled: bool,
    ) -> Result<Arc<Proxy>, ProxyFault> {
        let existing = self.proxies.lock().await.get(&name).cloned();
        if let Some(p) = existing {
            let same = {
                let st = p.state.lock().await;
                st.listen == listen && st.upstream == upstream
            };
            if same {
                p.update(None, None, Some(enabled)).await?;
                return Ok(p);
            }
            self.remove(&name).await?;
        }
        self.create(name, listen, upstream, enabled).await
    }

    pub(crate) async fn remove(&self, name: &str) -> Result<(), ProxyFault> {
        let proxy = self
            .proxies
            .lock()
            .await
            .remove(name)
            .ok_or(ProxyFault::ProxyNotFound)?;
        proxy.close().await;
        Ok(())
    }

    /// Enables every proxy and removes every toxic (both streams).
    pub(crate) async fn reset(&self) -> Result<(), ProxyFault> {
        for p in self.all().await {
            p.clear_toxics();
            p.update(None, None, Some(true)).await?;
        }
        Ok(())
    }

    /// Stops every proxy (used by shutdown).
    pub(crate) async fn close_all(&self) {
        let proxies: Vec<_> = std::mem::take(&mut *self.proxies.lock().await)
            .into_values()
            .collect();
        for p in proxies {
            p.close().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_backoff_doubles_up_to_its_bound_and_resets() {
        let mut b = AcceptBackoff::default();
        let emfile = std::io::Error::from_raw_os_error(libc::EMFILE);
        let pauses: Vec<Duration> = (0..10).map(|_| b.failed(&emfile, "u")).collect();
        assert_eq!(pauses[0], ACCEPT_BACKOFF_MIN);
        assert_eq!(pauses[1], ACCEPT_BACKOFF_MIN * 2);
        assert!(pauses.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(*pauses.last().unwrap(), ACCEPT_BACKOFF_MAX);
        b.succeeded("u");
        assert_eq!(b.failed(&emfile, "u"), ACCEPT_BACKOFF_MIN);
    }
}
