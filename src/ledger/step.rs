//! The vocabulary of a ledger row: fence modes, steps, reject reasons, section references and
//! the `events` row the checker reads.

use serde::{Deserialize, Serialize};

/// Whether the ledger applies the fencing check.
#[derive(
    Debug,
    Clone,
    Copy,
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
#[serde(rename_all = "lowercase")]
#[strum(
    serialize_all = "lowercase",
    parse_err_ty = String,
    parse_err_fn = unknown_fence_mode
)]
pub enum FenceMode {
    /// Reject begins/writes whose token is lower than one already accepted.
    Fenced,
    /// Accept every write.
    Unfenced,
}

impl FenceMode {
    /// `fenced` / `unfenced`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The `FromStr` error of [`FenceMode`].
fn unknown_fence_mode(s: &str) -> String {
    format!("unknown fence mode {s:?} (expected fenced or unfenced)")
}

/// One step of a critical section, as logged in `events.step`.
#[derive(
    Debug,
    Clone,
    Copy,
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
#[serde(rename_all = "lowercase")]
#[strum(
    serialize_all = "lowercase",
    parse_err_ty = String,
    parse_err_fn = unknown_step
)]
pub enum Step {
    Begin,
    Read,
    Write,
    End,
    /// The holder died inside the section.
    Crash,
}

impl Step {
    /// The name stored in SQL.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The `FromStr` error of [`Step`].
fn unknown_step(s: &str) -> String {
    format!("unknown step {s:?}")
}

/// Why a step was rejected (`events.reason`).
#[derive(
    Debug,
    Clone,
    Copy,
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
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum RejectReason {
    /// The token is lower than one already accepted (fenced mode).
    Stale,
    /// The section's idempotency key was already applied.
    Duplicate,
}

impl RejectReason {
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Identifies one critical section in every step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionRef {
    /// Unique per run (the driver numbers sections).
    pub section_id: u64,
    /// Client id (same as in the history).
    pub client: u32,
    /// Resource name (same as in the history).
    pub resource: String,
    /// Fencing token of the lease, if the strategy issues one.
    pub fencing_token: Option<u64>,
    /// Optional idempotency key: a second write with the same key is not applied.
    pub idempotency_key: Option<String>,
}

/// Result of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepOutcome {
    /// The step's `events.seq` (commit order).
    pub seq: i64,
    /// Whether it took effect (always true for read, end, crash, and in unfenced mode for begin).
    pub accepted: bool,
    /// Counter value read (read step) or written (write step).
    pub value: Option<i64>,
}

/// One row of `events`, as the checker reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEvent {
    pub seq: i64,
    pub time_us: u64,
    pub section_id: u64,
    pub client: u32,
    pub resource: String,
    pub fencing_token: Option<u64>,
    pub step: Step,
    pub value: Option<i64>,
    pub accepted: bool,
    pub reason: Option<RejectReason>,
}
