//! A proxy's lifecycle (listen, enable, disable, update) and its toxic list, plus the
//! registry of all proxies of one server.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{watch, Mutex};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::link::run_connection;
use super::model::{ProxyInfo, ToxicInfo, ToxicKind};
use super::toxics::{ActiveToxic, ToxicSet};

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
        }
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
        let listener = TcpListener::bind(st.listen.as_str()).await.map_err(|e| {
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

async fn accept_loop(
    listener: TcpListener,
    upstream: String,
    toxics: watch::Receiver<ToxicSet>,
    stop: CancellationToken,
    tasks: TaskTracker,
) {
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    tasks.spawn(run_connection(
                        client,
                        upstream.clone(),
                        toxics.clone(),
                        stop.clone(),
                    ));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "toxiproxy: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            },
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
