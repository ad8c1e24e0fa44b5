//! Rule 8's completions: a claimed job's completion (its release) against the job's last
//! claim, in the history pass.

use super::verdict::{Anomaly, AnomalyKind, AnomalySink};
use super::Stats;
use crate::history::{Op, OpKind};

/// Rule 8: a claimed job's completion (its release `op`, `ok` = it took effect, `fail` = refused
/// as not the owner's) against the job's last claim: a completion after another client's
/// claim is a `zombie-completion` when it took effect, a `stale-completion-refused` when not.
pub(super) fn judge(
    op: &Op,
    last_claim: Option<(u32, u64)>,
    sink: &mut AnomalySink,
    stats: &mut Stats,
) {
    let Some((claimant, claimed_us)) = last_claim.filter(|&(c, _)| c != op.client) else {
        return;
    };
    let (kind, what) = match op.kind {
        OpKind::Ok => {
            stats.zombie_completions += 1;
            (
                AnomalyKind::ZombieCompletion,
                "took effect: the job is marked done while",
            )
        }
        OpKind::Fail => {
            stats.stale_completions_refused += 1;
            (
                AnomalyKind::StaleCompletionRefused,
                "was refused (not the owner) since",
            )
        }
        _ => return,
    };
    sink.push(Anomaly {
        kind,
        resource: op.resource.clone(),
        time_us: op.time_us,
        end_us: None,
        clients: {
            let mut c = vec![op.client, claimant];
            c.sort_unstable();
            c
        },
        tokens: Vec::new(),
        holders: None,
        ledger_seqs: Vec::new(),
        fault_ids: Vec::new(),
        detail: format!(
            "client {}'s completion of {} {what} client {claimant} claimed it again at {} µs",
            op.client, op.resource, claimed_us
        ),
    });
}
