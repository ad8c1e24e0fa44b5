//! Ledger rows as a fenced resource writes them, for checker tests that build a ledger by
//! hand (resource `r`).

use lockbench::ledger::{LedgerEvent, RejectReason, Step};

/// One ledger row of resource `r` at `t` µs: a rejected row (`accepted == false`) carries
/// the reason `stale`.
#[allow(clippy::too_many_arguments)]
pub fn row(
    seq: i64,
    t: u64,
    section: u64,
    client: u32,
    token: Option<u64>,
    step: Step,
    value: Option<i64>,
    accepted: bool,
) -> LedgerEvent {
    LedgerEvent {
        seq,
        time_us: t,
        section_id: section,
        client,
        resource: "r".into(),
        fencing_token: token,
        step,
        value,
        accepted,
        reason: (!accepted).then_some(RejectReason::Stale),
    }
}
