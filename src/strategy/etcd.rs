//! `etcd-lease`: an etcd lease plus a create-if-absent transaction, through etcd's JSON gateway.
//!
//! **Acquire** (two round trips): `POST /v3/lease/grant {TTL}` grants a lease of the TTL in
//! whole seconds; `POST /v3/kv/txn` puts the lock key `{prefix}lock:{resource}` with our owner
//! token as value, attached to that lease, only if the key's create revision is 0 (the key does
//! not exist). When the transaction fails the key is held: the fresh lease is revoked again
//! (best effort; it would expire by itself) and the attempt reports
//! [`AcquireError::Held`]. The **fencing token** is the revision of the successful transaction,
//! i.e. the key's create revision: etcd's revision counter grows with every write the Raft log
//! commits, so a later holder always gets a larger one (etcd documentation, "API guarantees";
//! the token Kleppmann's "How to do distributed locking" asks a lock service for).
//!
//! **Renewal** (the watchdog) is `POST /v3/lease/keepalive {ID}`; a TTL of 0 or below in the
//! answer, or "lease not found", means the lease expired and the key is gone:
//! [`AcquireError::Lost`]. **Release** is `POST /v3/lease/revoke {ID}`, which deletes every key
//! attached to the lease; "lease not found" means the lease had already expired (the release
//! reports the lease lost). A revoke can only delete keys attached to *our* lease, so it never
//! frees another owner's lock.
//!
//! **Why the JSON gateway and not gRPC.** etcd serves its v3 API both as gRPC and as JSON over
//! HTTP (grpc-gateway, `/v3/…`, keys and values base64) on the same client port. The gateway
//! needs only `reqwest`, which lockbench already uses for the Toxiproxy API; the gRPC crate
//! (`etcd-client`) brings tonic and prost and needs `protoc` at build time, minutes of build on
//! CI's two cores for the same five calls. Each HTTP request gets its own response, so a
//! timed-out request can never be paired with a later reply.
//!
//! **Members.** The client talks to one member at a time and moves to the next after a timeout
//! or a connection error, as etcd's own client balances endpoints.
//!
//! **Connection hygiene.** The rule of every lock service here: a request left without its
//! reply closes its connection. A timed-out call drops its response future; hyper's HTTP/1
//! client then closes that connection (its dispatcher stops waiting for the reply once the
//! receiver is gone, `proto/h1/dispatch.rs`), so no later reply is read and nothing of that
//! request outlives it on the client side; the next call opens a fresh connection. An etcd lock
//! lives in a lease with a TTL, so a session the client gave up on cannot hold it for longer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::json;
use tokio::time::Instant;

use super::backend::{CrashPoint, LockBackend};
use super::quorum;
use super::{StrategyError, StrategyOptions};
use crate::lease::{
    new_owner_token, AcquireError, Lease, NodeFailure, NodeFailureKind, ReleaseOutcome,
};
use crate::node::{ConnectOptions, NodeEndpoint};

/// One client's view of an etcd cluster: the members' client URLs and an HTTP client.
pub(crate) struct EtcdSession {
    members: Vec<NodeEndpoint>,
    http: reqwest::Client,
    /// Index of the member asked next.
    current: AtomicUsize,
}

/// A failed gateway call.
enum CallError {
    /// No answer in time, or no connection: the next call goes to another member.
    Transport(NodeFailure),
    /// etcd answered with an error (`error`/`message` of the gateway's JSON).
    Reply { member: String, message: String },
}

impl CallError {
    fn into_failure(self) -> NodeFailure {
        match self {
            CallError::Transport(f) => f,
            CallError::Reply { member, message } => NodeFailure {
                node: member,
                kind: NodeFailureKind::Command,
                message,
            },
        }
    }

    fn is_lease_not_found(&self) -> bool {
        matches!(self, CallError::Reply { message, .. } if message.contains("lease not found"))
    }
}

#[derive(Deserialize, Default)]
struct Header {
    #[serde(default, deserialize_with = "int_string")]
    revision: i64,
}

#[derive(Deserialize)]
struct GrantReply {
    #[serde(rename = "ID", deserialize_with = "int_string")]
    id: i64,
    #[serde(rename = "TTL", default, deserialize_with = "int_string")]
    ttl: i64,
    #[serde(default)]
    error: String,
}

#[derive(Deserialize)]
struct TxnReply {
    #[serde(default)]
    header: Header,
    #[serde(default)]
    succeeded: bool,
}

#[derive(Deserialize)]
struct KeepAliveReply {
    #[serde(default)]
    result: Option<KeepAliveResult>,
}

#[derive(Deserialize)]
struct KeepAliveResult {
    #[serde(rename = "TTL", default, deserialize_with = "int_string")]
    ttl: i64,
}

/// etcd's gateway writes 64-bit integers as JSON strings; accept either form.
fn int_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Int {
        Number(i64),
        Text(String),
    }
    match Int::deserialize(d)? {
        Int::Number(n) => Ok(n),
        Int::Text(s) => s.parse().map_err(serde::de::Error::custom),
    }
}

impl LockBackend for EtcdSession {
    /// A session on every member, checked now (some member must answer within the connect +
    /// response timeouts).
    async fn connect(
        endpoints: &[NodeEndpoint],
        _opts: &StrategyOptions,
        conn: &ConnectOptions,
    ) -> Result<Self, StrategyError> {
        let session = EtcdSession::new(endpoints, conn)?;
        session
            .ensure_connected(conn.connect_timeout + conn.response_timeout)
            .await?;
        Ok(session)
    }

    /// The member count: etcd answers as one service.
    fn node_count(&self) -> usize {
        self.members.len()
    }

    /// One attempt: grant a lease, then put the key with it if absent.
    ///
    /// # Errors
    /// [`AcquireError::Held`]; [`AcquireError::Node`] for a member that timed out, was
    /// unreachable or refused; [`AcquireError::ValidityExhausted`] when the two round trips
    /// took longer than the lease's validity.
    async fn try_acquire(
        &self,
        opts: &StrategyOptions,
        resource: &str,
        _crash: &CrashPoint<'_>,
    ) -> Result<Lease, AcquireError> {
        let start = Instant::now();
        let ttl_secs = lease_ttl_secs(opts.ttl);
        let grant: GrantReply = self
            .call(
                "/v3/lease/grant",
                json!({ "TTL": ttl_secs }),
                opts.node_timeout,
            )
            .await
            .map_err(|e| AcquireError::Node(e.into_failure()))?;
        if !grant.error.is_empty() || grant.id == 0 {
            return Err(AcquireError::Node(NodeFailure {
                node: self.member_name(),
                kind: NodeFailureKind::Command,
                message: format!("lease grant refused: {}", grant.error),
            }));
        }
        let owner = format!("{:x}-{}", grant.id, new_owner_token());
        let key = B64.encode(opts.lock_key(resource));
        let body = json!({
            "compare": [{ "target": "CREATE", "key": key, "create_revision": "0" }],
            "success": [{ "request_put": {
                "key": key,
                "value": B64.encode(&owner),
                "lease": grant.id.to_string(),
            }}],
        });
        let txn: Result<TxnReply, CallError> =
            self.call("/v3/kv/txn", body, opts.node_timeout).await;
        let txn = match txn {
            Ok(t) => t,
            Err(e) => {
                // The put may still be applied: revoking the lease removes it either way.
                self.revoke_quietly(grant.id, opts.node_timeout).await;
                return Err(AcquireError::Node(e.into_failure()));
            }
        };
        if !txn.succeeded {
            self.revoke_quietly(grant.id, opts.node_timeout).await;
            return Err(AcquireError::Held {
                resource: resource.to_string(),
            });
        }
        let granted =
            Duration::from_secs(grant.ttl.max(0) as u64).min(opts.ttl.max(Duration::from_secs(1)));
        let elapsed = start.elapsed();
        let Some(validity) = quorum::validity(granted, elapsed, opts.drift_factor) else {
            self.revoke_quietly(grant.id, opts.node_timeout).await;
            return Err(AcquireError::ValidityExhausted {
                elapsed,
                ttl: granted,
            });
        };
        Ok(Lease {
            resource: resource.to_string(),
            owner,
            fencing_token: Some(txn.header.revision.max(0) as u64),
            acquired_at: start,
            validity_deadline: start + elapsed + validity,
            locked_nodes: 1,
            replica_acks: None,
        })
    }

    /// Revokes the lease (deleting the lock key attached to it).
    ///
    /// # Errors
    /// [`StrategyError::Node`] when the member timed out, was unreachable or refused for
    /// another reason than "lease not found" (which is a lost lease: `released_nodes` 0).
    async fn release(
        &self,
        opts: &StrategyOptions,
        lease: &Lease,
    ) -> Result<ReleaseOutcome, StrategyError> {
        let outcome = ReleaseOutcome {
            needed_nodes: 1,
            ..ReleaseOutcome::default()
        };
        let id = lease_id(lease);
        match self
            .call::<serde_json::Value>(
                "/v3/lease/revoke",
                json!({ "ID": id.to_string() }),
                opts.node_timeout,
            )
            .await
        {
            Ok(_) => Ok(ReleaseOutcome {
                released_nodes: 1,
                ..outcome
            }),
            Err(e) if e.is_lease_not_found() => Ok(outcome),
            Err(e) => Err(StrategyError::Node(e.into_failure())),
        }
    }

    /// Lease keep-alive; the new deadline is `start of this call + TTL − drift`.
    ///
    /// # Errors
    /// [`AcquireError::Lost`] when the lease expired; [`AcquireError::Node`] for a member that
    /// did not answer; [`AcquireError::ValidityExhausted`] when the call took the whole TTL.
    async fn extend(&self, opts: &StrategyOptions, lease: &Lease) -> Result<Lease, AcquireError> {
        let start = Instant::now();
        let id = lease_id(lease);
        let lost = |why: &str| AcquireError::Lost {
            resource: lease.resource.clone(),
            reason: why.to_string(),
        };
        let reply: KeepAliveReply = match self
            .call(
                "/v3/lease/keepalive",
                json!({ "ID": id.to_string() }),
                opts.node_timeout,
            )
            .await
        {
            Ok(r) => r,
            Err(e) if e.is_lease_not_found() => return Err(lost("lease not found")),
            Err(e) => return Err(AcquireError::Node(e.into_failure())),
        };
        let ttl = reply.result.map_or(0, |r| r.ttl);
        if ttl <= 0 {
            return Err(lost("lease expired (keep-alive returned TTL ≤ 0)"));
        }
        let elapsed = start.elapsed();
        let validity =
            quorum::validity(Duration::from_secs(ttl as u64), elapsed, opts.drift_factor).ok_or(
                AcquireError::ValidityExhausted {
                    elapsed,
                    ttl: Duration::from_secs(ttl as u64),
                },
            )?;
        Ok(Lease {
            validity_deadline: start + elapsed + validity,
            ..lease.clone()
        })
    }
}

impl EtcdSession {
    /// A session on `members` (`http://host:port` client URLs).
    ///
    /// # Errors
    /// [`StrategyError::NoEndpoints`] without members; [`StrategyError::InvalidOptions`] when
    /// the HTTP client cannot be built.
    fn new(members: &[NodeEndpoint], conn: &ConnectOptions) -> Result<Self, StrategyError> {
        if members.is_empty() {
            return Err(StrategyError::NoEndpoints);
        }
        let http = reqwest::Client::builder()
            .connect_timeout(conn.connect_timeout)
            .pool_max_idle_per_host(1)
            .tcp_nodelay(true)
            .build()
            .map_err(|e| StrategyError::InvalidOptions(format!("HTTP client for etcd: {e}")))?;
        Ok(Self {
            members: members.to_vec(),
            http,
            current: AtomicUsize::new(0),
        })
    }

    /// Checks that some member answers (`POST /v3/maintenance/status`).
    ///
    /// # Errors
    /// [`StrategyError::Connect`] naming the members tried.
    async fn ensure_connected(&self, timeout: Duration) -> Result<(), StrategyError> {
        let mut last = None;
        for _ in 0..self.members.len() {
            match self
                .call::<serde_json::Value>("/v3/maintenance/status", json!({}), timeout)
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) => last = Some(e.into_failure()),
            }
        }
        let names: Vec<String> = self.members.iter().map(ToString::to_string).collect();
        Err(StrategyError::Connect {
            node: names.join(", "),
            message: last.map_or_else(|| "no member".into(), |f| f.message),
            os_error: None,
        })
    }

    async fn revoke_quietly(&self, id: i64, timeout: Duration) {
        let _ = self
            .call::<serde_json::Value>("/v3/lease/revoke", json!({ "ID": id.to_string() }), timeout)
            .await;
    }

    fn member_name(&self) -> String {
        let i = self.current.load(Ordering::Relaxed) % self.members.len();
        self.members[i].name.clone()
    }

    /// `POST <member><path>` with `body`, bounded by `timeout`; after a transport failure the
    /// next call goes to the next member.
    async fn call<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: serde_json::Value,
        timeout: Duration,
    ) -> Result<T, CallError> {
        let i = self.current.load(Ordering::Relaxed) % self.members.len();
        let member = &self.members[i];
        let url = format!("{}{path}", member.url.trim_end_matches('/'));
        let transport = |kind, message: String| {
            self.current
                .compare_exchange(
                    i,
                    (i + 1) % self.members.len(),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .ok();
            CallError::Transport(NodeFailure {
                node: member.name.clone(),
                kind,
                message,
            })
        };
        let sent = tokio::time::timeout(timeout, async {
            let response = self.http.post(&url).json(&body).send().await?;
            let status = response.status();
            let bytes = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, bytes))
        })
        .await;
        let (status, bytes) = match sent {
            Err(_) => {
                return Err(transport(
                    NodeFailureKind::Timeout,
                    format!("no answer within {} ms", timeout.as_millis()),
                ))
            }
            Ok(Err(e)) => return Err(transport(NodeFailureKind::Unreachable, e.to_string())),
            Ok(Ok(x)) => x,
        };
        if !status.is_success() {
            let message = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| {
                    v.get("message")
                        .or_else(|| v.get("error"))
                        .and_then(|m| m.as_str().map(str::to_owned))
                })
                .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned());
            return Err(CallError::Reply {
                member: member.name.clone(),
                message: format!("HTTP {status}: {message}"),
            });
        }
        // keep-alive answers as a stream of JSON objects, one per line: read the first.
        let first = bytes
            .split(|b| *b == b'\n')
            .find(|line| !line.iter().all(u8::is_ascii_whitespace))
            .unwrap_or(&bytes);
        serde_json::from_slice(first).map_err(|e| CallError::Reply {
            member: member.name.clone(),
            message: format!(
                "unexpected answer to {path}: {e}: {}",
                String::from_utf8_lossy(first)
            ),
        })
    }
}

/// The lease TTL etcd is asked for: the strategy TTL in whole seconds (validated to be one).
pub(crate) fn lease_ttl_secs(ttl: Duration) -> u64 {
    ttl.as_secs().max(1)
}

/// The lease ID a lease's owner token starts with (`<hex id>-<random>`).
fn lease_id(lease: &Lease) -> i64 {
    lease
        .owner
        .split('-')
        .next()
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .map_or(0, |v| v as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_id_round_trips_through_the_owner_token() {
        let lease = Lease {
            resource: "r".into(),
            owner: format!("{:x}-{}", 7_587_869_119_862_161_410_i64, new_owner_token()),
            fencing_token: Some(3),
            acquired_at: Instant::now(),
            validity_deadline: Instant::now(),
            locked_nodes: 1,
            replica_acks: None,
        };
        assert_eq!(lease_id(&lease), 7_587_869_119_862_161_410);
    }

    #[test]
    fn gateway_integers_parse_from_strings_and_numbers() {
        let g: GrantReply = serde_json::from_str(r#"{"ID":"42","TTL":"5"}"#).unwrap();
        assert_eq!((g.id, g.ttl), (42, 5));
        let t: TxnReply =
            serde_json::from_str(r#"{"header":{"revision":"17"},"succeeded":true}"#).unwrap();
        assert!(t.succeeded);
        assert_eq!(t.header.revision, 17);
        let t: TxnReply = serde_json::from_str(r#"{"header":{"revision":18}}"#).unwrap();
        assert!(!t.succeeded, "a failed txn omits `succeeded`");
        let k: KeepAliveReply = serde_json::from_str(r#"{"result":{"ID":"42"}}"#).unwrap();
        assert_eq!(
            k.result.unwrap().ttl,
            0,
            "an expired lease's keep-alive omits TTL"
        );
    }

    #[test]
    fn lease_ttl_is_whole_seconds() {
        assert_eq!(lease_ttl_secs(Duration::from_secs(2)), 2);
        assert_eq!(lease_ttl_secs(Duration::from_millis(500)), 1);
    }
}
