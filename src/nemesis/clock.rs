//! The clock family: `clock-jump`, a jump forward by Δ on each target node, without touching
//! the clock (instant: nothing to heal).
//!
//! ## Why not the real clock
//! libfaketime preloaded into Debian's redis-server (built with jemalloc) hangs at start
//! (recursive `clock_gettime`), and changing the system clock would move every process. So
//! the nemesis reproduces what a forward jump *does to expiry*.
//!
//! ## Method
//! Redis stores an absolute expiry time per key (`now + PX` at write time) and compares it with
//! its clock. When that clock jumps forward by Δ, every existing key's remaining TTL shrinks by
//! Δ at once, and keys whose remaining TTL was ≤ Δ are expired. [`CLOCK_JUMP_SCRIPT`] does
//! exactly that in one Lua script, atomically on that node: it walks the keyspace with `SCAN`
//! and, for every key with a TTL, runs `PEXPIRE key (pttl − Δ)`, or `DEL key` when
//! `pttl ≤ Δ`. Keys without a TTL are untouched (as with a real jump).
//!
//! ## Limits
//! - Only expiry is affected: `TIME`, `INFO` timestamps, `OBJECT IDLETIME`, the replication
//!   and Sentinel timers of the node keep the true clock.
//! - It is a one-shot step: keys written after the jump get normal TTLs, which is also what a
//!   real (permanent) forward jump does; a *backward* jump is not modelled.
//! - The script blocks the node while it scans: O(keys), fine for the suite's few keys.
//! - Effects replicate (`PEXPIREAT`/`DEL`), so on a primary the replicas see the jump too,
//!   whereas a real jump would affect only that machine's expiry checks.

use std::time::Duration;

use super::faults::Injection;
use super::{FaultStep, Nemesis, NemesisError};
use crate::node::{ConnectOptions, NodeEndpoint};

/// `ARGV[1]` = Δ in ms. Returns `{shortened, deleted}`.
pub const CLOCK_JUMP_SCRIPT: &str = r#"
local delta = tonumber(ARGV[1])
local shortened, deleted = 0, 0
local cursor = "0"
repeat
  local page = redis.call("SCAN", cursor, "COUNT", 1000)
  cursor = page[1]
  for _, key in ipairs(page[2]) do
    local pttl = redis.call("PTTL", key)
    if pttl > 0 then
      if pttl <= delta then
        redis.call("DEL", key)
        deleted = deleted + 1
      else
        redis.call("PEXPIRE", key, pttl - delta)
        shortened = shortened + 1
      end
    end
  end
until cursor == "0"
return {shortened, deleted}
"#;

/// What one jump did on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockJumpEffect {
    /// Keys whose TTL was shortened by Δ.
    pub shortened: u64,
    /// Keys whose remaining TTL was ≤ Δ, deleted.
    pub deleted: u64,
}

/// Jumps `endpoint`'s clock forward by `delta` as described in the module docs.
///
/// # Errors
/// Connection or script errors.
pub async fn jump_forward(
    endpoint: &NodeEndpoint,
    delta: Duration,
    opts: &ConnectOptions,
) -> Result<ClockJumpEffect, redis::RedisError> {
    let mut conn = endpoint.connect_direct(opts).await?;
    let (shortened, deleted): (u64, u64) = redis::Script::new(CLOCK_JUMP_SCRIPT)
        .arg(delta.as_millis() as u64)
        .invoke_async(&mut conn)
        .await?;
    Ok(ClockJumpEffect { shortened, deleted })
}

impl Nemesis {
    /// `clock-jump`: every target node's keys' TTLs shortened by the step's `delta`
    /// ([`jump_forward`]); instant.
    ///
    /// # Errors
    /// Target resolution; [`NemesisError::Redis`] naming the node whose script failed.
    pub(super) async fn clock_jump(&self, step: &FaultStep) -> Result<Injection, NemesisError> {
        let delta = step.delta.unwrap_or_default();
        let nodes = self.resolve_nodes(&step.target).await?;
        let mut effects = Vec::new();
        for n in &nodes {
            let endpoint = self.direct(n)?;
            let e = jump_forward(&endpoint, delta, &self.admin)
                .await
                .map_err(|source| NemesisError::Redis {
                    node: n.clone(),
                    source,
                })?;
            effects.push(format!(
                "{n}: shortened {}, deleted {}",
                e.shortened, e.deleted
            ));
        }
        let detail = format!("forward {delta:?}; {}", effects.join("; "));
        Ok(Injection::instant(nodes, detail))
    }
}
