//! What a critical section protects (`--work`): the kinds of work the reference articles name,
//! whose damage under a duplicate execution decides which lock (or no lock) is enough. Used
//! by the driver (what a section does), the checker (what it judges) and the matrix (what
//! it answers for), so it lives below all three.

use serde::{Deserialize, Serialize};

/// What a critical section protects: the damage a duplicate execution does decides which lock
/// (or no lock) is enough (`--work`, scenario `[workload] work`).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum WorkKind {
    /// A database row: the ledger's counter, written with the section's fencing token, which
    /// the row checks (the default; every run before work kinds were named).
    #[default]
    Row,
    /// A computation whose duplicate is merely wasted (a daily report): a section computes the
    /// job at the head of its resource's queue (the counter it read under the lock) for its
    /// hold and writes its result as `row` work does, but the promise is at-least-once: a job
    /// computed twice is waste, counted (`duplicate-execution`, the wasted work time), never
    /// damage, and the lock's own anomalies (two holders, a lost update of the result) are
    /// listed without making the verdict `invalid`.
    Compute,
    /// An external side effect (a payment API) that cannot check a token: every section makes
    /// one call to the side-effect sink ([`crate::sink`]) for the job it read under the lock,
    /// after its work, then writes the row as `row` work does.
    External,
    /// A queue of jobs, each to be done once: a section takes one job, works, charges the
    /// sink for it (the job's effect) and completes it. A lock strategy takes the job at the
    /// head of its resource's queue (the counter it read under the lock, as `external` does)
    /// and completes it with the row's write; a claim strategy (`claim-update`) claims a row
    /// of its jobs table and completes it with its release. The checker counts executions
    /// per job (`duplicate-execution`) besides the sink's charges.
    Job,
}

impl WorkKind {
    /// True when every section calls the side-effect sink (`external`, `job`).
    pub fn calls_sink(self) -> bool {
        matches!(self, WorkKind::External | WorkKind::Job)
    }

    /// True when the checker judges each job's executions from the ledger's sections
    /// (rule 8: `compute`, `external`, `job`).
    pub fn judges_executions(self) -> bool {
        self != WorkKind::Row
    }

    /// True when a second execution is damage the verdict counts: every kind but `compute`,
    /// whose duplicate is waste.
    pub fn counts_damage(self) -> bool {
        self != WorkKind::Compute
    }
}
