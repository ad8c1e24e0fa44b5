//! The Redis commands and Lua scripts each strategy sends to one node.
//!
//! Every script runs atomically on its node. Scripts are sent with `EVALSHA` and loaded on
//! `NOSCRIPT`, so a node that restarted empty gets them again.

use std::sync::LazyLock;

use redis::{RedisError, Script};

use super::link::RedisConn;
use super::StrategyKind;

/// `SET NX PX` and, only if it succeeded, `INCR` of the fence key. Returns the new counter or nil.
/// KEYS[1] lock key, KEYS[2] fence key; ARGV[1] owner, ARGV[2] ttl in ms.
const ACQUIRE_FENCED_LUA: &str = r#"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false
"#;
static ACQUIRE_FENCED: LazyLock<Script> = LazyLock::new(|| Script::new(ACQUIRE_FENCED_LUA));

/// Compare-and-delete. KEYS[1] lock key; ARGV[1] owner. Returns 1 if our key was deleted.
const RELEASE_LUA: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"#;
static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_LUA));

/// Compare-and-PEXPIRE. KEYS[1] lock key; ARGV[1] owner, ARGV[2] ttl in ms.
/// Returns 1 if extended, 0 if the key is missing, -1 if another owner holds it.
const EXTEND_LUA: &str = r#"
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if v then return -1 end
return 0
"#;
static EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(EXTEND_LUA));

/// Raises the fence counter to at least ARGV[1], never lowers it; returns the counter after.
/// KEYS[1] fence key.
const RAISE_FENCE_LUA: &str = r#"
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local wanted = tonumber(ARGV[1])
if current < wanted then
  redis.call('SET', KEYS[1], ARGV[1])
  return wanted
end
return current
"#;
static RAISE_FENCE: LazyLock<Script> = LazyLock::new(|| Script::new(RAISE_FENCE_LUA));

/// Loads every script on a fresh connection, so that a command cancelled by the per-node
/// timeout is never an `EVALSHA` answered with `NOSCRIPT` whose retry was never sent.
pub(crate) async fn preload(conn: &mut RedisConn) -> Result<(), RedisError> {
    if let RedisConn::Cluster(cluster) = conn {
        // `SCRIPT LOAD` goes to every primary (the crate's routing for it); a replica promoted
        // later gets them on its first `NOSCRIPT` (the crate's `Script` loads and retries).
        for source in [ACQUIRE_FENCED_LUA, RELEASE_LUA, EXTEND_LUA, RAISE_FENCE_LUA] {
            redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(source)
                .query_async::<()>(cluster)
                .await?;
        }
        return Ok(());
    }
    let mut pipe = redis::pipe();
    for source in [ACQUIRE_FENCED_LUA, RELEASE_LUA, EXTEND_LUA, RAISE_FENCE_LUA] {
        pipe.cmd("SCRIPT").arg("LOAD").arg(source).ignore();
    }
    pipe.query_async::<()>(conn).await
}

/// One node's answer to a lock request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LockReply {
    /// Our key is set; for fenced strategies, the node's new counter.
    Locked(Option<u64>),
    /// Another owner holds the key.
    Held,
}

/// One node's answer to `single-wait`'s lock request (`SET NX PX`, then `WAIT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitReply {
    /// Our key is set; `acked` replicas acknowledged it within the `WAIT` timeout.
    Locked { acked: u32 },
    /// Another owner holds the key (no `WAIT` was sent).
    Held,
}

/// One node's answer to an extend request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExtendReply {
    Extended,
    Missing,
    OtherOwner,
}

/// Sets the lock key on one node the way `kind` does.
pub(crate) async fn lock(
    mut conn: RedisConn,
    kind: StrategyKind,
    key: String,
    fence_key: String,
    owner: String,
    ttl_ms: u64,
) -> Result<LockReply, RedisError> {
    if kind.is_fenced() {
        let counter: Option<u64> = ACQUIRE_FENCED
            .key(key)
            .key(fence_key)
            .arg(owner)
            .arg(ttl_ms)
            .invoke_async(&mut conn)
            .await?;
        return Ok(match counter {
            Some(c) => LockReply::Locked(Some(c)),
            None => LockReply::Held,
        });
    }
    let mut cmd = redis::cmd("SET");
    cmd.arg(key).arg(owner).arg("NX");
    if kind.has_ttl() {
        cmd.arg("PX").arg(ttl_ms);
    }
    let reply: Option<String> = cmd.query_async(&mut conn).await?;
    Ok(if reply.is_some() {
        LockReply::Locked(None)
    } else {
        LockReply::Held
    })
}

/// `SET key owner NX PX ttl_ms`, then, only if it was set, `WAIT replicas wait_ms` on the same
/// connection (`WAIT` counts the replicas that acknowledged every write this connection made
/// so far, ours included; source: the Redis `WAIT` command page). `wait_ms` must be at least 1:
/// `WAIT … 0` blocks forever.
///
/// On a cluster the two go as one pipeline to the lock key's primary, so they share one node
/// connection whatever happens. Sent as two requests, the `WAIT` went wherever the `redis`
/// crate's cluster client routed it then: when the primary's connection was gone (the primary
/// killed between the `SET` and the `WAIT`), to a random connected node, another shard's
/// primary, which answered at once with its own replicas (no write of that connection to
/// wait for): a lease no replica of the lock's shard had acknowledged (measured with chaos
/// 20e). A pipeline that is retried or redirected is sent whole, so the `WAIT` always counts
/// acknowledgements of the `SET` beside it; it is sent even when the `SET` finds the lock
/// held, and its answer is then not used.
pub(crate) async fn lock_and_wait(
    mut conn: RedisConn,
    key: String,
    owner: String,
    ttl_ms: u64,
    replicas: u32,
    wait_ms: u64,
) -> Result<WaitReply, RedisError> {
    let key_for_route = key.clone();
    let mut set = redis::cmd("SET");
    set.arg(key).arg(owner).arg("NX").arg("PX").arg(ttl_ms);
    let mut wait = redis::cmd("WAIT");
    wait.arg(replicas).arg(wait_ms.max(1));
    let acked: i64 = match &mut conn {
        RedisConn::Cluster(cluster) => {
            use redis::cluster_routing::{Route, SingleNodeRoutingInfo, SlotAddr};
            let route = Route::with_key(&key_for_route, SlotAddr::Master);
            let mut pipe = redis::pipe();
            pipe.add_command(set).add_command(wait);
            let mut replies = cluster
                .route_pipeline(pipe, 0, 2, SingleNodeRoutingInfo::SpecificNode(route))
                .await?
                .into_iter();
            let (Some(set_reply), Some(wait_reply)) = (replies.next(), replies.next()) else {
                return Err(RedisError::from((
                    redis::ErrorKind::Client,
                    "SET + WAIT pipeline answered with fewer than 2 replies",
                )));
            };
            if redis::from_redis_value::<Option<String>>(set_reply)?.is_none() {
                return Ok(WaitReply::Held);
            }
            redis::from_redis_value(wait_reply)?
        }
        RedisConn::Node(_) => {
            let set: Option<String> = set.query_async(&mut conn).await?;
            if set.is_none() {
                return Ok(WaitReply::Held);
            }
            wait.query_async(&mut conn).await?
        }
    };
    Ok(WaitReply::Locked {
        acked: u32::try_from(acked.max(0)).unwrap_or(u32::MAX),
    })
}

/// `SETNX key owner`: the key without expiry; true if it was set (nobody held it).
pub(crate) async fn setnx(
    mut conn: RedisConn,
    key: String,
    owner: String,
) -> Result<bool, RedisError> {
    let n: i64 = redis::cmd("SETNX")
        .arg(key)
        .arg(owner)
        .query_async(&mut conn)
        .await?;
    Ok(n == 1)
}

/// Plain `PEXPIRE key ttl_ms`, no owner check: true if a key was there (whoever owns it).
pub(crate) async fn pexpire(
    mut conn: RedisConn,
    key: String,
    ttl_ms: u64,
) -> Result<bool, RedisError> {
    let n: i64 = redis::cmd("PEXPIRE")
        .arg(key)
        .arg(ttl_ms)
        .query_async(&mut conn)
        .await?;
    Ok(n == 1)
}

/// Releases on one node the way `kind` does, in one request; returns true if a key was
/// deleted.
///
/// `naive-del` deletes whatever key is there (true even if it belonged to someone else);
/// every other strategy uses the atomic compare-and-delete script. `get-then-del` is two
/// requests ([`get`], compare in the client, then [`delete`]) and is not handled here.
pub(crate) async fn release(
    conn: RedisConn,
    kind: StrategyKind,
    key: String,
    owner: String,
) -> Result<bool, RedisError> {
    match kind {
        StrategyKind::NaiveDel => delete(conn, key).await,
        _ => release_owned(conn, key, owner).await,
    }
}

/// `GET key`: the current owner token, if any.
pub(crate) async fn get(mut conn: RedisConn, key: String) -> Result<Option<String>, RedisError> {
    redis::cmd("GET").arg(key).query_async(&mut conn).await
}

/// Plain `DEL key`, no owner check; returns true if a key was deleted.
pub(crate) async fn delete(mut conn: RedisConn, key: String) -> Result<bool, RedisError> {
    let n: i64 = redis::cmd("DEL").arg(key).query_async(&mut conn).await?;
    Ok(n > 0)
}

/// Atomic compare-and-delete, whatever the strategy (used to clean up failed attempts).
pub(crate) async fn release_owned(
    mut conn: RedisConn,
    key: String,
    owner: String,
) -> Result<bool, RedisError> {
    let n: i64 = RELEASE.key(key).arg(owner).invoke_async(&mut conn).await?;
    Ok(n > 0)
}

/// Extends our key's expiry to `ttl_ms` (compare-and-PEXPIRE). For `no-ttl` it only checks
/// ownership, since the key has no expiry to extend. For `unchecked-extend` it is a plain
/// `PEXPIRE`: whatever key is there counts as ours ([`ExtendReply::Extended`]), which is the
/// bug that strategy shows.
pub(crate) async fn extend(
    mut conn: RedisConn,
    kind: StrategyKind,
    key: String,
    owner: String,
    ttl_ms: u64,
) -> Result<ExtendReply, RedisError> {
    if kind == StrategyKind::UncheckedExtend {
        return Ok(if pexpire(conn, key, ttl_ms).await? {
            ExtendReply::Extended
        } else {
            ExtendReply::Missing
        });
    }
    if !kind.has_ttl() {
        let current: Option<String> = redis::cmd("GET").arg(key).query_async(&mut conn).await?;
        return Ok(match current {
            Some(v) if v == owner => ExtendReply::Extended,
            Some(_) => ExtendReply::OtherOwner,
            None => ExtendReply::Missing,
        });
    }
    let r: i64 = EXTEND
        .key(key)
        .arg(owner)
        .arg(ttl_ms)
        .invoke_async(&mut conn)
        .await?;
    Ok(match r {
        1 => ExtendReply::Extended,
        -1 => ExtendReply::OtherOwner,
        _ => ExtendReply::Missing,
    })
}

/// Raises one node's fence counter to at least `token`; returns the counter afterwards.
pub(crate) async fn raise_fence(
    mut conn: RedisConn,
    fence_key: String,
    token: u64,
) -> Result<u64, RedisError> {
    RAISE_FENCE
        .key(fence_key)
        .arg(token)
        .invoke_async(&mut conn)
        .await
}
