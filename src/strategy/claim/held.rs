//! `claim-skip-locked`: the claim held by a transaction kept open for the work (see the
//! parent module).

use tokio::time::Instant;

use super::session::close;
use super::{completed, Answer, ClaimQueue, Open, Want};
use crate::lease::{AcquireError, Lease, NodeFailureKind, ReleaseOutcome};
use crate::strategy::{StrategyError, StrategyOptions};

impl ClaimQueue {
    /// `claim-skip-locked`'s claim: `BEGIN` and the job's row `FOR UPDATE SKIP LOCKED`, the
    /// transaction left open for the work. No row: rolled back, [`AcquireError::Held`].
    pub(super) async fn claim_held(
        &self,
        opts: &StrategyOptions,
        resource: &str,
        id: i64,
        owner: String,
        start: Instant,
    ) -> Result<Lease, AcquireError> {
        let mut session = self.session.lock().await;
        if session.as_ref().is_some_and(|o| o.job.is_some()) {
            // A transaction left open by a claim never completed: end it with its session.
            close(&mut session);
        }
        let sql = self.sql.claim.replace("{id}", &id.to_string());
        let answer = self
            .statement(&mut session, opts.node_timeout, &sql, &[], Want::Simple)
            .await;
        match answer {
            Ok(Answer::Simple { rows, .. }) if rows > 0 => {
                if let Some(o) = session.as_mut() {
                    o.job = Some(id);
                }
                Ok(Lease {
                    resource: resource.to_string(),
                    owner,
                    fencing_token: None,
                    acquired_at: start,
                    validity_deadline: start + Lease::NO_EXPIRY,
                    locked_nodes: 1,
                    replica_acks: None,
                })
            }
            Ok(_) => {
                let rolled_back = self
                    .statement(
                        &mut session,
                        opts.node_timeout,
                        "ROLLBACK",
                        &[],
                        Want::Simple,
                    )
                    .await;
                if rolled_back.is_err() {
                    close(&mut session);
                }
                Err(AcquireError::Held {
                    resource: resource.to_string(),
                })
            }
            Err(f) => {
                // Whatever the transaction holds ends with its session.
                close(&mut session);
                Err(AcquireError::Node(f))
            }
        }
    }

    /// `claim-skip-locked`'s heartbeat: `SELECT 1` on the session whose transaction holds job
    /// `id`. That session gone (or another in its place): the claim was rolled back.
    pub(super) async fn heartbeat_held(
        &self,
        opts: &StrategyOptions,
        lease: &Lease,
        id: i64,
    ) -> Result<Lease, AcquireError> {
        let lost = || AcquireError::Lost {
            resource: lease.resource.clone(),
            reason: "the session whose transaction held the job's row ended: the server rolled \
                     the claim back"
                .into(),
        };
        let mut session = self.session.lock().await;
        if !self.holds(&session, id) {
            return Err(lost());
        }
        match self
            .statement(
                &mut session,
                opts.node_timeout,
                "SELECT 1",
                &[],
                Want::Simple,
            )
            .await
        {
            Ok(_) => Ok(lease.clone()),
            Err(f) if f.kind == NodeFailureKind::Timeout => Err(AcquireError::Node(f)),
            Err(_) => Err(lost()),
        }
    }

    /// `claim-skip-locked`'s completion: `UPDATE … SET state = 'done'; COMMIT` in the
    /// transaction that holds job `id`. The session gone before it: nothing completed
    /// (`released_nodes: 0`, the job is pending again).
    ///
    /// # Errors
    /// [`StrategyError::Node`] when the commit's answer did not come (it may have taken
    /// effect).
    pub(super) async fn complete_held(
        &self,
        opts: &StrategyOptions,
        id: i64,
    ) -> Result<ReleaseOutcome, StrategyError> {
        let mut session = self.session.lock().await;
        if !self.holds(&session, id) {
            return Ok(completed(false));
        }
        let sql = self.sql.complete.replace("{id}", &id.to_string());
        let answer = self
            .statement(&mut session, opts.node_timeout, &sql, &[], Want::Simple)
            .await;
        if let Some(o) = session.as_mut() {
            o.job = None;
        }
        match answer {
            Ok(Answer::Simple { affected, .. }) => Ok(completed(affected > 0)),
            Ok(_) => Ok(completed(false)),
            Err(f) => {
                close(&mut session);
                Err(StrategyError::Node(f))
            }
        }
    }

    /// True when the session is open, its connection alive, and its transaction holds job `id`.
    fn holds(&self, session: &Option<Open>, id: i64) -> bool {
        session
            .as_ref()
            .is_some_and(|o| o.job == Some(id) && !o.client.is_closed())
    }
}
