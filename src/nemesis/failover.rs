//! The failover family: the primary of a `sentinel` or `cluster` topology fails over, and the
//! fault waits until another node is named primary ([`FAILOVER_WAIT`] at most).
//!
//! | method | how | heal |
//! |---|---|---|
//! | `kill-primary` (default) | SIGKILL the current primary | restart the old primary |
//! | `sentinel` | `SENTINEL FAILOVER` | (instant) |
//! | `cluster-failover`, `-force`, `-takeover` | `CLUSTER FAILOVER` (default mode, `FORCE`, `TAKEOVER`) on the replica of the primary's shard | (instant) |

use std::time::{Duration, Instant};

use super::faults::Injection;
use super::{process, FailoverMethod, FaultStep, Nemesis, NemesisError};
use crate::topology::TopologyKind;

/// Bound on the wait for the Sentinels to name a new primary after a failover.
pub const FAILOVER_WAIT: Duration = Duration::from_secs(30);

impl Nemesis {
    /// `failover` by the step's method; returns once another node is primary.
    ///
    /// # Errors
    /// [`NemesisError::Unsupported`] on another topology or a method of the other one;
    /// the failover request failed; [`NemesisError::Timeout`] when no new primary was named
    /// (a killed primary is restarted).
    pub(super) async fn failover(&mut self, step: &FaultStep) -> Result<Injection, NemesisError> {
        let kind = self.proxied.topology().kind();
        if !matches!(kind, TopologyKind::Sentinel | TopologyKind::Cluster) {
            return Err(NemesisError::Unsupported {
                fault: "failover".into(),
                reason: "needs the sentinel or cluster topology".into(),
            });
        }
        let old = self.proxied.primary().await?;
        let began = Instant::now();
        let method = step.method.unwrap_or_default();
        if let Some(only) = method.only_on().filter(|&t| t != kind) {
            return Err(NemesisError::Unsupported {
                fault: format!("failover method {}", method.name()),
                reason: format!("needs the {only} topology"),
            });
        }
        let undo = if method == FailoverMethod::Sentinel {
            self.sentinel_failover().await?;
            None
        } else if let Some(mode) = method.cluster_mode() {
            self.cluster_failover(&old, mode).await?;
            None
        } else {
            self.proxied
                .topology_mut()
                .node_handle(&old)?
                .kill()
                .await?;
            Some(process::Undo::Restart(vec![old.clone()]))
        };
        let new = match self.wait_new_primary(&old).await {
            Ok(n) => n,
            Err(e) => {
                if let Some(u) = undo {
                    self.undo_process(u).await.ok();
                }
                return Err(e);
            }
        };
        let detail = format!(
            "{}: {old} -> {new} after {} ms",
            method.name(),
            began.elapsed().as_millis()
        );
        Ok(match undo {
            Some(undo) => Injection::lasting(vec![old], undo, detail),
            None => Injection::instant(vec![old], detail),
        })
    }

    /// `CLUSTER FAILOVER [mode]` (`mode` "" for the default, `FORCE` or `TAKEOVER`) on the
    /// first replica of `primary`'s shard.
    async fn cluster_failover(&self, primary: &str, mode: &str) -> Result<(), NemesisError> {
        let replica = self.replica_of(primary).await?;
        let endpoint = self.direct(&replica)?;
        let mut conn = endpoint
            .connect_direct(&self.admin)
            .await
            .map_err(|source| NemesisError::Redis {
                node: replica.clone(),
                source,
            })?;
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("FAILOVER");
        if !mode.is_empty() {
            cmd.arg(mode);
        }
        cmd.query_async::<()>(&mut conn)
            .await
            .map_err(|source| NemesisError::Redis {
                node: replica,
                source,
            })
    }

    /// `SENTINEL FAILOVER` asked of each Sentinel in turn until one accepts.
    async fn sentinel_failover(&self) -> Result<(), NemesisError> {
        let name = self
            .proxied
            .topology()
            .master_name()
            .unwrap_or("lockbench")
            .to_string();
        let mut last = None;
        for s in self.proxied.topology().sentinel_endpoints() {
            let asked = async {
                let mut conn = s.connect_direct(&self.admin).await?;
                redis::cmd("SENTINEL")
                    .arg("FAILOVER")
                    .arg(&name)
                    .query_async::<()>(&mut conn)
                    .await
            };
            match asked.await {
                Ok(()) => return Ok(()),
                Err(source) => {
                    last = Some(NemesisError::Redis {
                        node: s.name.clone(),
                        source,
                    })
                }
            }
        }
        Err(last.unwrap_or(NemesisError::Unsupported {
            fault: "failover".into(),
            reason: "no sentinel".into(),
        }))
    }

    /// Polls every 100 ms until the topology names a primary other than `old`.
    async fn wait_new_primary(&self, old: &str) -> Result<String, NemesisError> {
        let began = Instant::now();
        loop {
            if let Ok(now) = self.proxied.primary().await {
                if now != old {
                    return Ok(now);
                }
            }
            if began.elapsed() >= FAILOVER_WAIT {
                return Err(NemesisError::Timeout {
                    what: format!(
                        "{} naming a primary other than {old}",
                        if self.proxied.topology().kind() == TopologyKind::Cluster {
                            "the cluster"
                        } else {
                            "sentinels"
                        }
                    ),
                    waited_ms: began.elapsed().as_millis(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
