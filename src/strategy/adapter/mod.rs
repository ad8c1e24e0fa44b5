//! `adapter:*`: a lock library under test, driven through a lock-client adapter process that
//! speaks the adapter protocol (`docs/adapter-protocol.md`).
//!
//! One [`AdapterClient`] per [`LockClient`](super::LockClient) starts one adapter process and
//! sends it the `init` with the client's nodes (the proxied addresses when lockbench proxies
//! them), key prefix, TTL, per-node timeout and retry policy. Each acquire takes a free
//! *logical client* id of that process and keeps it until the lease's release is answered, so
//! a process serves one request per logical client at a time however many driver clients share
//! it. lockbench times every request itself; the lease's deadline is lockbench's own
//! `start of the acquire request + ttl − drift`, the rule of the built-in single-node
//! strategies (the library's own belief, if it reports a validity, is never later).
//!
//! Shipped adapters live in `adapters/python/` and run on the interpreter of the virtual
//! environment `scripts/adapters-setup.sh` creates (`.adapters/venv/bin/python`), or on
//! `$LOCKBENCH_ADAPTER_PYTHON` when set.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::backend::{CrashPoint, LockBackend};
use super::{quorum, StrategyError, StrategyKind, StrategyOptions};
use crate::lease::{AcquireError, Lease, NodeFailure, NodeFailureKind, ReleaseOutcome};
use crate::node::{ConnectOptions, NodeEndpoint};

mod overhead;
mod process;
pub(crate) mod protocol;

pub use overhead::AdapterOverhead;

use process::{AdapterProcess, RequestError};
use protocol::{client_request, init_request, Outcome, Reply};

/// How long an adapter may take to start and say hello, and to answer `init`.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the shipped adapters are: `$LOCKBENCH_ADAPTERS_DIR`, else this source tree's
/// `adapters/`.
fn adapters_dir() -> PathBuf {
    std::env::var_os("LOCKBENCH_ADAPTERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("adapters"))
}

/// The command line of a shipped adapter and the directory it runs in.
///
/// # Errors
/// [`StrategyError::Adapter`] when the Python environment is missing (saying how to make it).
pub(crate) fn shipped_command(kind: StrategyKind) -> Result<(Vec<String>, PathBuf), StrategyError> {
    let (name, script) = match kind {
        StrategyKind::AdapterRedisPy => ("redis-py", "redis_py.py"),
        StrategyKind::AdapterPythonRedisLock => ("python-redis-lock", "python_redis_lock.py"),
        StrategyKind::AdapterPotteryRedlock => ("pottery-redlock", "pottery_redlock.py"),
        other => {
            return Err(StrategyError::InvalidOptions(format!(
                "{other} is not an adapter strategy"
            )))
        }
    };
    let dir = adapters_dir().join("python");
    let python = match std::env::var_os("LOCKBENCH_ADAPTER_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => {
            let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".adapters/venv/bin/python");
            if !venv.exists() {
                return Err(StrategyError::Adapter {
                    adapter: name.to_string(),
                    message: format!(
                        "its Python environment {} is missing: run scripts/adapters-setup.sh \
                         (or set LOCKBENCH_ADAPTER_PYTHON to an interpreter that has the \
                         libraries of adapters/python/requirements.txt)",
                        venv.display()
                    ),
                });
            }
            venv
        }
    };
    let argv = vec![
        python.to_string_lossy().into_owned(),
        dir.join(script).to_string_lossy().into_owned(),
    ];
    Ok((argv, dir))
}

/// Logical client ids of one process: free ones, and the one holding each lease.
#[derive(Default)]
struct ClientIds {
    next: u32,
    free: Vec<u32>,
    holding: HashMap<String, u32>,
}

/// A lock library behind an adapter process.
pub(crate) struct AdapterClient {
    process: AdapterProcess,
    ids: Mutex<ClientIds>,
}

/// Lockbench's bound on one request other than `hold`: four per-node timeouts plus 1 s (the
/// library may make a few requests to its node), plus for an acquire the time its retry policy
/// may spend.
fn request_bound(opts: &StrategyOptions, acquire: bool) -> Duration {
    let base = opts.node_timeout * 4 + Duration::from_secs(1);
    if !acquire {
        return base;
    }
    let retry = &opts.retry;
    let retries = retry.acquire_timeout.unwrap_or_else(|| {
        (retry.delay + retry.jitter + opts.node_timeout) * retry.attempts.max(1)
    });
    base + retries
}

impl AdapterClient {
    fn take_id(&self) -> u32 {
        let mut ids = self.ids.lock().expect("ids");
        ids.free.pop().unwrap_or_else(|| {
            ids.next += 1;
            ids.next - 1
        })
    }

    fn give_back(&self, id: u32) {
        self.ids.lock().expect("ids").free.push(id);
    }

    fn holder(&self, lease: &Lease) -> Result<u32, String> {
        self.ids
            .lock()
            .expect("ids")
            .holding
            .get(&lease.owner)
            .copied()
            .ok_or_else(|| {
                format!(
                    "no logical client of adapter {} holds this lease",
                    self.name()
                )
            })
    }

    fn name(&self) -> &str {
        self.process.name()
    }

    /// Why the process failed, if it did (a broken protocol, an exit).
    pub(crate) fn failure(&self) -> Option<String> {
        self.process.failure()
    }

    /// The harness overhead per answered request of this process so far, µs.
    pub(crate) fn overhead(&self) -> AdapterOverhead {
        self.process.overhead()
    }

    /// The adapter process's id, while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Closes the adapter's stdin and waits up to `bound` for it to exit (see
    /// [`AdapterProcess::close_and_wait`]).
    pub(crate) async fn close_and_wait(&self, bound: Duration) -> Option<std::process::ExitStatus> {
        self.process.close_and_wait(bound).await
    }

    /// Kills the adapter process (`SIGKILL`, a `client-crash`) and waits up to `bound` until
    /// it is gone; see [`AdapterProcess::crash`]. Returns whether it is gone.
    pub(crate) async fn crash(&self, bound: Duration) -> bool {
        self.process.crash(bound).await
    }

    fn error(&self, definite: bool, kind: NodeFailureKind, message: String) -> AcquireError {
        AcquireError::Adapter {
            adapter: self.name().to_string(),
            definite,
            kind,
            message,
        }
    }

    /// An `info`/`fail` reply or a missing one as an [`AcquireError`].
    fn reply_error(&self, resource: &str, reply: Result<Reply, RequestError>) -> AcquireError {
        match reply {
            Ok(r) => {
                let kind = match r.error.as_deref() {
                    Some("timeout") => NodeFailureKind::Timeout,
                    Some("connection") => NodeFailureKind::Unreachable,
                    _ => NodeFailureKind::Command,
                };
                match (r.outcome, r.error.as_deref()) {
                    (Outcome::Fail, Some("busy")) => AcquireError::Held {
                        resource: resource.to_string(),
                    },
                    (Outcome::Fail, Some("not_owner")) => AcquireError::Lost {
                        resource: resource.to_string(),
                        reason: format!("adapter {}: {}", self.name(), r.message()),
                    },
                    (Outcome::Fail, _) => self.error(true, kind, r.message()),
                    _ => self.error(false, kind, r.message()),
                }
            }
            Err(RequestError::Timeout(b)) => self.error(
                false,
                NodeFailureKind::Timeout,
                format!(
                    "no reply within {b:?} (a late reply is recorded in adapter-messages.jsonl)"
                ),
            ),
            Err(RequestError::Failed(why)) => self.error(false, NodeFailureKind::Unreachable, why),
        }
    }

    /// Runs the critical section's work inside the adapter: it sleeps `hold`, then says whether
    /// the library still believes it owns the lock (`None`: it could not tell, or no answer).
    /// Waits as long as the adapter takes (a paused adapter answers late, as a stalled
    /// application would); the run's drain bounds it.
    pub(crate) async fn hold(&self, lease: &Lease, hold: Duration) -> Option<bool> {
        let id = self.holder(lease).ok()?;
        let ms = hold.as_secs_f64() * 1e3;
        let request = client_request(0, id, "hold", json!({ "ms": ms }));
        match self.process.request(request, None).await {
            Ok((reply, _)) if reply.outcome == Outcome::Ok => reply.bool("owns"),
            Ok((reply, _)) => {
                tracing::debug!("adapter {} hold: {}", self.name(), reply.message());
                None
            }
            Err(e) => {
                tracing::debug!("adapter {} hold: {e:?}", self.name());
                None
            }
        }
    }

    fn deadline(opts: &StrategyOptions, start: Instant, reply: &Reply) -> Instant {
        let own = opts
            .ttl
            .saturating_sub(quorum::clock_drift(opts.ttl, opts.drift_factor));
        let reported = reply
            .fields
            .get("validity_ms")
            .and_then(serde_json::Value::as_f64)
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(|v| Duration::from_secs_f64(v / 1e3));
        start + reported.map_or(own, |r| r.min(own))
    }
}

impl LockBackend for AdapterClient {
    async fn connect(
        endpoints: &[NodeEndpoint],
        opts: &StrategyOptions,
        _conn: &ConnectOptions,
    ) -> Result<Self, StrategyError> {
        let (name, argv, cwd) = match opts.kind {
            StrategyKind::AdapterCommand => {
                let argv = opts.adapter_command.clone().unwrap_or_default();
                if argv.is_empty() {
                    return Err(StrategyError::InvalidOptions(
                        "adapter:command needs the adapter's command line: --adapter \
                         'command args…' (scenario key workload.adapter)"
                            .into(),
                    ));
                }
                (format!("`{}`", argv.join(" ")), argv, None)
            }
            kind => {
                let (argv, cwd) = shipped_command(kind)?;
                let name = kind.name().trim_start_matches("adapter:").to_string();
                (name, argv, Some(cwd))
            }
        };
        let failed = |message: String| StrategyError::Adapter {
            adapter: name.clone(),
            message,
        };
        let refused = |message: String| StrategyError::AdapterRefused {
            adapter: name.clone(),
            message,
        };
        let process = AdapterProcess::spawn(
            &name,
            &argv,
            cwd.as_deref(),
            opts.adapter_log.as_deref(),
            START_TIMEOUT,
        )
        .await
        .map_err(&failed)?;
        if opts.watchdog && !process.hello.capabilities.iter().any(|c| c == "auto-renew") {
            return Err(refused(format!(
                "--watchdog asks the library to renew by itself, and {} {} has no auto-renew \
                 capability: run without --watchdog",
                process.hello.library.name, process.hello.library.version
            )));
        }
        let nodes: Vec<(String, String)> = endpoints
            .iter()
            .map(|e| (e.name.clone(), e.url.clone()))
            .collect();
        let init = init_request(0, &nodes, opts);
        match process.request(init, Some(START_TIMEOUT)).await {
            Ok((reply, _)) if reply.outcome == Outcome::Ok => {}
            Ok((reply, _)) => return Err(refused(format!("init: {}", reply.message()))),
            Err(RequestError::Timeout(b)) => {
                return Err(failed(format!("no answer to init within {b:?}")))
            }
            Err(RequestError::Failed(why)) => return Err(failed(why)),
        }
        tracing::debug!(
            "adapter {} ({}) runs {} {}",
            name,
            process.command(),
            process.hello.library.name,
            process.hello.library.version
        );
        Ok(Self {
            process,
            ids: Mutex::new(ClientIds::default()),
        })
    }

    fn node_count(&self) -> usize {
        1
    }

    async fn try_acquire(
        &self,
        opts: &StrategyOptions,
        resource: &str,
        _crash: &CrashPoint<'_>,
    ) -> Result<Lease, AcquireError> {
        let id = self.take_id();
        let request = client_request(0, id, "acquire", json!({ "resource": resource }));
        let start = Instant::now();
        let answer = self
            .process
            .request(request, Some(request_bound(opts, true)))
            .await;
        // A request without an answer keeps its logical client busy for good (its late reply
        // may still come); an answered one frees it unless it now holds a lease.
        let reply = match answer {
            Ok((r, _)) if r.outcome == Outcome::Ok && r.str("owner").is_some() => r,
            Ok((r, _)) if r.outcome == Outcome::Ok => {
                self.give_back(id);
                return Err(self.error(
                    false,
                    NodeFailureKind::Command,
                    "its acquire reply has no `owner`".into(),
                ));
            }
            Ok((r, _)) => {
                self.give_back(id);
                return Err(self.reply_error(resource, Ok(r)));
            }
            Err(e @ RequestError::Timeout(_)) => return Err(self.reply_error(resource, Err(e))),
            Err(e) => {
                self.give_back(id);
                return Err(self.reply_error(resource, Err(e)));
            }
        };
        let owner = reply.str("owner").unwrap_or_default().to_string();
        self.ids
            .lock()
            .expect("ids")
            .holding
            .insert(owner.clone(), id);
        Ok(Lease {
            resource: resource.to_string(),
            owner,
            fencing_token: reply.u64("fencing_token"),
            acquired_at: start,
            validity_deadline: Self::deadline(opts, start, &reply),
            locked_nodes: 1,
            replica_acks: None,
        })
    }

    async fn release(
        &self,
        opts: &StrategyOptions,
        lease: &Lease,
    ) -> Result<ReleaseOutcome, StrategyError> {
        let failed = |message: String| StrategyError::Adapter {
            adapter: self.name().to_string(),
            message,
        };
        let id = self.holder(lease).map_err(failed)?;
        let request = client_request(0, id, "release", json!({}));
        let answer = self
            .process
            .request(request, Some(request_bound(opts, false)))
            .await;
        let mut ids = self.ids.lock().expect("ids");
        ids.holding.remove(&lease.owner);
        if !matches!(answer, Err(RequestError::Timeout(_))) {
            ids.free.push(id);
        }
        drop(ids);
        let outcome = |released_nodes, failed_nodes| ReleaseOutcome {
            released_nodes,
            failed_nodes,
            needed_nodes: 1,
        };
        match answer {
            Ok((r, _)) => match (r.outcome, r.error.as_deref()) {
                (Outcome::Ok, _) if r.bool("released") == Some(false) => Ok(outcome(0, 0)),
                (Outcome::Ok, _) => Ok(outcome(1, 0)),
                (Outcome::Fail, Some("not_owner")) => Ok(outcome(0, 0)),
                (Outcome::Fail, _) => Err(failed(format!("release failed: {}", r.message()))),
                (Outcome::Info, _) => Err(StrategyError::Node(NodeFailure {
                    node: format!("adapter {}", self.name()),
                    kind: NodeFailureKind::Command,
                    message: r.message(),
                })),
            },
            Err(RequestError::Timeout(b)) => Ok(outcome(0, 1)).inspect(|_| {
                tracing::debug!("adapter {} release: no reply within {b:?}", self.name());
            }),
            Err(RequestError::Failed(why)) => Err(failed(why)),
        }
    }

    async fn extend(&self, opts: &StrategyOptions, lease: &Lease) -> Result<Lease, AcquireError> {
        let id = self
            .holder(lease)
            .map_err(|m| self.error(true, NodeFailureKind::Command, m))?;
        let request = client_request(0, id, "extend", json!({}));
        let start = Instant::now();
        match self
            .process
            .request(request, Some(request_bound(opts, false)))
            .await
        {
            Ok((r, _)) if r.outcome == Outcome::Ok => Ok(Lease {
                validity_deadline: Self::deadline(opts, start, &r),
                ..lease.clone()
            }),
            Ok((r, _)) => Err(self.reply_error(&lease.resource, Ok(r))),
            Err(e) => Err(self.reply_error(&lease.resource, Err(e))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_bounds_cover_the_retry_policy() {
        let mut opts = StrategyOptions::new(StrategyKind::AdapterRedisPy, Duration::from_secs(1));
        assert_eq!(request_bound(&opts, false), Duration::from_millis(1_400));
        // 3 × (5 + 5 + 100 ms) on top of the base
        assert_eq!(request_bound(&opts, true), Duration::from_millis(1_730));
        opts.retry.acquire_timeout = Some(Duration::from_secs(2));
        assert_eq!(request_bound(&opts, true), Duration::from_millis(3_400));
    }
}
