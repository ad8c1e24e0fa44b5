//! The side-effect sink: a "payment API" on loopback that every critical section of `external`
//! work calls once, and that — like a real payment API or webhook — cannot check a fencing token.
//!
//! A fencing token protects a resource that checks it (the ledger's row). The reference
//! articles' point about external side effects is that they "usually can't": a holder paused
//! past its lease wakes up and calls the API a second time for the same job, and only an
//! idempotent operation (an idempotency key) stops the second charge. The sink makes that
//! measurable: it applies every charge it gets and records it in its own table, and with an
//! idempotency key it applies a key once and answers a repeat with the first charge
//! (a repeat while the first is still being processed gets `409 Conflict`, as Stripe's API
//! documents for concurrent requests with one key).
//!
//! ## HTTP
//! `POST /v1/charges` with a JSON body `{"job": "r0:41", "client": 3, "section_id": 977}` and
//! an optional `Idempotency-Key` header. Answers: `200 {"charge_id": 18, "replayed": false}`
//! (applied), `200 {"charge_id": 17, "replayed": true}` (a repeat of an applied key),
//! `409 {"error": …}` (a repeat of a key still in flight), `400` for a body it cannot read.
//!
//! ## Schema (`sqlite3 sink.sqlite 'select * from requests'`)
//! ```sql
//! CREATE TABLE requests (
//!     seq             INTEGER PRIMARY KEY,  -- the sink's own order of answers, 1, 2, 3, …
//!     time_us         INTEGER NOT NULL,     -- µs on the run clock (same clock as history.jsonl)
//!     job             TEXT    NOT NULL,     -- what the section worked on: "<resource>:<counter read>"
//!     client          INTEGER NOT NULL,
//!     section_id      INTEGER NOT NULL,     -- the ledger's section (events.section_id)
//!     idempotency_key TEXT,                 -- NULL when the call carried none
//!     outcome         TEXT    NOT NULL,     -- 'applied' | 'replayed' | 'conflict'
//!     charge_id       INTEGER);             -- the charge applied (or replayed); NULL on conflict
//! CREATE TABLE idempotency (key TEXT PRIMARY KEY, charge_id INTEGER) WITHOUT ROWID;
//!     -- charge_id NULL while the key's first request is in flight
//! ```
//! Every answer is committed before it is sent (WAL, `synchronous = NORMAL`: a killed
//! lockbench loses nothing the sink answered), so a run's `sink.sqlite` can be re-checked.
//!
//! Files: `store` (schema and the apply logic, synchronous), `server` (the HTTP server task,
//! started and stopped by the caller), `client` (what a critical section calls), `file`
//! (reading a finished `sink.sqlite`).

mod client;
mod file;
mod server;
mod store;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use client::SinkClient;
pub use file::read_requests;
pub use server::SinkServer;
pub use store::SinkStore;

/// The file name of a strategy run's sink table, beside `ledger.sqlite`.
pub const SINK_FILE: &str = "sink.sqlite";

/// Errors of the sink.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The sink's table could not be created or opened.
    #[error("sink {path}: cannot open: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rusqlite::Error,
    },
    /// The file already holds requests: each run needs a fresh sink.
    #[error("sink {path} already holds requests from another run; use a new results directory")]
    NotEmpty {
        /// The file.
        path: PathBuf,
    },
    /// The file is not a lockbench sink table.
    #[error("sink {path}: not a lockbench sink table: {detail}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A statement failed.
    #[error("sink SQL error: {0}")]
    Sql(#[from] rusqlite::Error),
    /// The loopback listener could not be bound.
    #[error("sink: cannot listen on 127.0.0.1: {0}")]
    Bind(#[source] std::io::Error),
    /// A call to the sink failed (no answer, or an answer it should not give).
    #[error("sink call for job {job}: {detail}")]
    Call {
        /// The job of the call.
        job: String,
        /// What happened.
        detail: String,
    },
}

/// One call of a critical section: charge once for `job`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Charge {
    /// What the section worked on: `"<resource>:<counter read>"` ([`job_name`]).
    pub job: String,
    /// The calling client (as recorded in the history and the ledger).
    pub client: u32,
    /// The ledger's section id of the call.
    pub section_id: u64,
}

/// What the sink did with a request.
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
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum Outcome {
    /// A new charge was applied.
    Applied,
    /// A repeat of an applied idempotency key: answered with the first charge, nothing applied.
    Replayed,
    /// A repeat of a key whose first request was still in flight: `409`, nothing applied.
    Conflict,
}

/// One row of `requests`: a request and what the sink did with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkRequest {
    /// The sink's answer order (1, 2, 3, …).
    pub seq: i64,
    /// µs on the run clock.
    pub time_us: u64,
    /// The call.
    pub charge: Charge,
    /// The key the call carried.
    pub idempotency_key: Option<String>,
    /// What the sink did.
    pub outcome: Outcome,
    /// The charge applied or replayed (`None` on conflict).
    pub charge_id: Option<i64>,
}

/// The job a section works on. A lock's job is the one at the head of its resource's queue:
/// the resource and the counter value it read under the lock (`r0:41`); two sections that
/// read the same value did the same job (a holder that was paused past its lease read the
/// value its successor read too). A claimed job (`job:17`, a row of a claim strategy's jobs
/// table, see [`is_claimed_job`]) is its own name, whatever its row's counter says.
pub fn job_name(resource: &str, counter: i64) -> String {
    if is_claimed_job(resource) {
        resource.to_string()
    } else {
        format!("{resource}:{counter}")
    }
}

/// The resource a claim strategy's attempt is recorded on when it could not even pick a job
/// (its jobs table did not answer): the queue itself, served whenever any job is claimed.
pub const JOB_QUEUE: &str = "jobs";

/// True for the resource of a claimed job (`job:<id>`): the claim strategies name the job
/// they claimed so; a lock's resources are `r<i>`. Its acquire is the claim and its release
/// the completion.
pub fn is_claimed_job(resource: &str) -> bool {
    resource
        .strip_prefix("job:")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests;
