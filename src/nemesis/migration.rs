//! The `migrate-slot` fault: moves the hash slot of one resource's keys to another shard of a
//! Redis Cluster the way `redis-cli --cluster reshard` moves a slot (the Redis Cluster
//! specification, "Live resharding"):
//!
//! 1. `CLUSTER SETSLOT <slot> IMPORTING <source-id>` on the target primary, then
//!    `CLUSTER SETSLOT <slot> MIGRATING <target-id>` on the source primary;
//! 2. `CLUSTER GETKEYSINSLOT <slot> 10` and `MIGRATE <host> <port> "" 0 5000 KEYS …` on the
//!    source, batch after batch (10 keys each, redis-cli's default `--cluster-pipeline`),
//!    until the source has no key left in the slot;
//! 3. after the step's `duration` (the heal), a last sweep of keys, then
//!    `CLUSTER SETSLOT <slot> NODE <target-id>` on the target, the source and every other
//!    primary.
//!
//! Between 1 and 3 the source answers `ASK <slot> <target>` for every key it does not have (all
//! of them once 2 is done), and the target serves a command on the slot only after `ASKING`; a
//! command with several keys of which some are missing gets `TRYAGAIN` on either side. After 3
//! the source answers `MOVED`. The remaining TTL of every key moved is read before (`PTTL` on
//! the source) and after (`ASKING` + `PTTL` on the target), so the fault window says whether
//! `MIGRATE` carried it.

use std::time::Duration;

use super::NemesisError;
use crate::node::{ConnectOptions, NodeEndpoint};

/// Keys per `MIGRATE` (`redis-cli --cluster reshard`'s default `--cluster-pipeline`).
pub const BATCH: usize = 10;

/// Tries of `CLUSTER SETSLOT … NODE` on one node that does not answer in time.
pub const ASSIGN_ATTEMPTS: u32 = 3;

/// `MIGRATE`'s own timeout, in ms (redis-cli's default `--cluster-timeout` for it).
pub const MIGRATE_TIMEOUT_MS: u64 = 5000;

/// One slot on its way from one primary to another.
#[derive(Debug, Clone)]
pub struct SlotMigration {
    /// The hash slot.
    pub slot: u16,
    /// The resource whose keys hash to it (`r0`).
    pub resource: String,
    /// The primary serving the slot when the migration began (direct, not through a proxy).
    pub source: NodeEndpoint,
    /// The primary receiving it.
    pub target: NodeEndpoint,
    /// Where the source connects to hand keys over (`MIGRATE host port`): the target's own
    /// client port.
    pub target_addr: (String, u16),
    /// The other primaries, told the new owner last.
    pub others: Vec<NodeEndpoint>,
    target_id: String,
}

/// What moving the keys found: how many keys in how many batches, and each key's remaining
/// TTL before and after (ms; `None` = no expiry or no key).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeysMoved {
    /// `MIGRATE` calls made.
    pub batches: usize,
    /// (key, `PTTL` on the source before, `PTTL` on the target after), in the order moved.
    pub keys: Vec<(String, Option<i64>, Option<i64>)>,
}

impl KeysMoved {
    /// One line for the fault window: `2 keys in 1 batch (lock:{r0} pttl 6012 → 6011 ms; …)`.
    pub fn describe(&self) -> String {
        let ttl = |t: Option<i64>| t.map_or("none".to_string(), |ms| format!("{ms} ms"));
        let each: Vec<String> = self
            .keys
            .iter()
            .map(|(k, before, after)| format!("{k} pttl {} -> {}", ttl(*before), ttl(*after)))
            .collect();
        format!(
            "{} key(s) in {} batch(es){}",
            self.keys.len(),
            self.batches,
            if each.is_empty() {
                String::new()
            } else {
                format!(" ({})", each.join("; "))
            }
        )
    }
}

/// Admin connections of the migration: `MIGRATE` may take up to its own timeout.
fn admin() -> ConnectOptions {
    ConnectOptions {
        connect_timeout: Duration::from_secs(1),
        response_timeout: Duration::from_millis(MIGRATE_TIMEOUT_MS + 1000),
    }
}

fn failed(node: &NodeEndpoint) -> impl FnOnce(redis::RedisError) -> NemesisError + '_ {
    move |source| NemesisError::Redis {
        node: node.name.clone(),
        source,
    }
}

async fn connect(node: &NodeEndpoint) -> Result<redis::aio::MultiplexedConnection, NemesisError> {
    node.connect_direct(&admin()).await.map_err(failed(node))
}

/// `CLUSTER MYID` of `node`.
async fn node_id(node: &NodeEndpoint) -> Result<String, NemesisError> {
    let mut conn = connect(node).await?;
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query_async(&mut conn)
        .await
        .map_err(failed(node))
}

/// `CLUSTER SETSLOT slot <state> [id]` on `node`.
async fn set_slot(
    node: &NodeEndpoint,
    slot: u16,
    state: &str,
    id: Option<&str>,
) -> Result<(), NemesisError> {
    let mut conn = connect(node).await?;
    let mut cmd = redis::cmd("CLUSTER");
    cmd.arg("SETSLOT").arg(slot).arg(state);
    if let Some(id) = id {
        cmd.arg(id);
    }
    cmd.query_async::<()>(&mut conn).await.map_err(failed(node))
}

/// `PTTL` of each key: `None` for no expiry (-1), no key (-2), or a key the node no longer
/// has and redirects with `ASK` (`CLUSTER GETKEYSINSLOT` still lists a key whose TTL ran out
/// until something touches it; on the migrating source the `PTTL` then finds it gone). With
/// `asking`, each `PTTL` is preceded by `ASKING` (the target serves an importing slot only
/// after it).
async fn pttls(
    node: &NodeEndpoint,
    keys: &[String],
    asking: bool,
) -> Result<Vec<Option<i64>>, NemesisError> {
    let mut conn = connect(node).await?;
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for k in keys {
        if asking {
            pipe.cmd("ASKING").ignore();
        }
        pipe.cmd("PTTL").arg(k);
    }
    let ttls: Vec<redis::RedisResult<i64>> =
        pipe.query_async(&mut conn).await.map_err(failed(node))?;
    ttls.into_iter()
        .map(|t| match t {
            Ok(ms) => Ok((ms >= 0).then_some(ms)),
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::Ask) => Ok(None),
            Err(e) => Err(failed(node)(e)),
        })
        .collect()
}

impl SlotMigration {
    /// Step 1 of the migration: reads both primaries' ids and puts the slot in
    /// `IMPORTING` on `target`, `MIGRATING` on `source`. On error the target is set back to
    /// `STABLE` (best effort) and nothing else was touched.
    ///
    /// # Errors
    /// [`NemesisError::Redis`] naming the node that failed.
    pub async fn begin(
        slot: u16,
        resource: &str,
        source: NodeEndpoint,
        target: NodeEndpoint,
        target_addr: (String, u16),
        others: Vec<NodeEndpoint>,
    ) -> Result<Self, NemesisError> {
        let source_id = node_id(&source).await?;
        let target_id = node_id(&target).await?;
        set_slot(&target, slot, "IMPORTING", Some(&source_id)).await?;
        if let Err(e) = set_slot(&source, slot, "MIGRATING", Some(&target_id)).await {
            set_slot(&target, slot, "STABLE", None).await.ok();
            return Err(e);
        }
        Ok(Self {
            slot,
            resource: resource.to_string(),
            source,
            target,
            target_addr,
            others,
            target_id,
        })
    }

    /// Step 2: moves every key the source still has in the slot, [`BATCH`] at a time, and
    /// reads each key's TTL before and after.
    ///
    /// # Errors
    /// [`NemesisError::Redis`] when a command fails (`MIGRATE` answers `IOERR` when the target
    /// is unreachable, `BUSYKEY` when it already has the key).
    pub async fn move_keys(&self) -> Result<KeysMoved, NemesisError> {
        let mut moved = KeysMoved::default();
        let mut conn = connect(&self.source).await?;
        let (host, port) = &self.target_addr;
        loop {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(self.slot)
                .arg(BATCH)
                .query_async(&mut conn)
                .await
                .map_err(failed(&self.source))?;
            if keys.is_empty() {
                return Ok(moved);
            }
            let before = pttls(&self.source, &keys, false).await?;
            let mut migrate = redis::cmd("MIGRATE");
            migrate
                .arg(host)
                .arg(*port)
                .arg("")
                .arg(0)
                .arg(MIGRATE_TIMEOUT_MS)
                .arg("KEYS")
                .arg(&keys);
            // "OK", or "NOKEY" when every key expired in between.
            migrate
                .query_async::<String>(&mut conn)
                .await
                .map_err(failed(&self.source))?;
            moved.batches += 1;
            let after = pttls(&self.target, &keys, true).await?;
            moved.keys.extend(
                keys.into_iter()
                    .zip(before.into_iter().zip(after))
                    .map(|(k, (b, a))| (k, b, a)),
            );
        }
    }

    /// Step 3: a last sweep of keys (none is expected: the source sends every missing key's
    /// command to the target), then `CLUSTER SETSLOT <slot> NODE <target>` on the target, the
    /// source and every other primary, in that order (redis-cli's).
    ///
    /// Returns what it did, for the fault window: `swept 0 key(s) in 0 batch(es); SETSLOT NODE
    /// on n1, n2, n3 in 4 ms`.
    ///
    /// # Errors
    /// [`NemesisError::Sweep`] when the last sweep failed, else [`NemesisError::Redis`]
    /// naming the node that failed; the others are still told.
    pub async fn finish(&self) -> Result<String, NemesisError> {
        let began = std::time::Instant::now();
        let swept = self
            .move_keys()
            .await
            .map_err(|source| NemesisError::Sweep {
                slot: self.slot,
                source: Box::new(source),
            });
        let mut first = None;
        for node in std::iter::once(&self.target)
            .chain(std::iter::once(&self.source))
            .chain(&self.others)
        {
            if let Err(e) = self.assign(node).await {
                first.get_or_insert(e);
            }
        }
        let told: Vec<&str> = std::iter::once(&self.target)
            .chain(std::iter::once(&self.source))
            .chain(&self.others)
            .map(|n| n.name.as_str())
            .collect();
        match (swept, first) {
            (Err(e), _) | (Ok(_), Some(e)) => Err(e),
            (Ok(swept), None) => Ok(format!(
                "swept {}; SETSLOT NODE on {} in {} ms",
                swept.describe(),
                told.join(", "),
                began.elapsed().as_millis()
            )),
        }
    }

    /// `CLUSTER SETSLOT <slot> NODE <target>` on `node`, tried up to [`ASSIGN_ATTEMPTS`]
    /// times when the node does not answer in time (the command is idempotent; a heal that
    /// gives up leaves the slot half-migrated on that node).
    async fn assign(&self, node: &NodeEndpoint) -> Result<(), NemesisError> {
        let mut attempt = 1;
        loop {
            match set_slot(node, self.slot, "NODE", Some(&self.target_id)).await {
                Err(NemesisError::Redis { source, .. })
                    if attempt < ASSIGN_ATTEMPTS
                        && (source.is_timeout() || source.is_io_error()) =>
                {
                    tracing::warn!(node = %node.name, attempt, "SETSLOT NODE: {source}; again");
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// `slot 5798 (r0): n2 -> n1` for the fault window.
    pub fn describe(&self) -> String {
        format!(
            "slot {} ({}): {} -> {}",
            self.slot, self.resource, self.source.name, self.target.name
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_names_every_key_and_its_ttls() {
        let moved = KeysMoved {
            batches: 1,
            keys: vec![
                ("lock:{r0}".into(), Some(6012), Some(6010)),
                ("fence:{r0}".into(), None, None),
            ],
        };
        assert_eq!(
            moved.describe(),
            "2 key(s) in 1 batch(es) (lock:{r0} pttl 6012 ms -> 6010 ms; fence:{r0} pttl none \
             -> none)"
        );
        assert_eq!(KeysMoved::default().describe(), "0 key(s) in 0 batch(es)");
    }
}
