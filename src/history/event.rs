//! The records of a history: client operations, fault windows, crashes and the run-end mark.

use serde::{Deserialize, Serialize};

/// The phase of an operation.
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
pub enum OpKind {
    /// The client started the operation.
    Invoke,
    /// It took effect.
    Ok,
    /// It certainly did not take effect.
    Fail,
    /// Unknown outcome (timeout, connection lost mid-request).
    Info,
}

/// What the operation does to the lock.
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
pub enum OpFn {
    /// Take the lock on `resource`.
    Acquire,
    /// Give it back.
    Release,
    /// Extend the lease (watchdog renewal); an `ok` carries the new validity deadline.
    Extend,
}

/// Why an operation failed or has an unknown outcome (set on `fail` / `info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorKind {
    /// Someone else holds the lock (normal contention), after any retries.
    Busy,
    /// The acquire timeout or a response timeout ran out.
    Timeout,
    /// The connection to a node failed or was refused.
    Connection,
    /// Anything else (script error, quorum not reached for another reason, …).
    Other,
}

/// One operation record. `index` and `time_us` are set by [`HistoryRecorder::record`](super::HistoryRecorder::record).
///
/// A client has at most one op per function (`f`) in flight: its completion is matched to the
/// last invoke of the same `(client, f)`. Use distinct client ids for concurrent workers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// Position in the history (0, 1, 2, …), assigned at recording.
    #[serde(default)]
    pub index: u64,
    /// µs on the [`RunClock`](super::RunClock), assigned at recording.
    #[serde(default)]
    pub time_us: u64,
    /// Client (worker task) id.
    pub client: u32,
    /// Phase.
    pub kind: OpKind,
    /// Function.
    pub f: OpFn,
    /// Locked resource name.
    pub resource: String,
    /// Owner token the client put in the lock (random value), on acquire ok and release/extend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Fencing token, on acquire ok of fenced strategies and on the later ops of that lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fencing_token: Option<u64>,
    /// Until when the client may believe it holds the lock, in µs on the run clock. It must be
    /// computed from the acquire *invoke* time: `invoke_us + ttl − drift − elapsed…`, never from the
    /// ok time, or the checker's believed-overlap rule can report false positives. `None` = no
    /// expiry (`no-ttl`). Set on acquire ok and extend ok.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validity_deadline_us: Option<u64>,
    /// Lease TTL requested, ms (on acquire and extend). `None` = no expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Error message on fail/info.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Error class on fail/info (see [`ErrorKind`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<ErrorKind>,
    /// Strategy name (`single`, `redlock-fenced`, …), optional, usually on invokes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// `adapter:*` strategies: the library's own belief that it still owns the lock, as its
    /// adapter answered `hold` after the section's work. Only `Some(false)` is recorded, on an
    /// `extend` `fail` at that moment (the library knows it lost the lock; lockbench's write
    /// still follows, as in an application that does not ask its library).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owns: Option<bool>,
}

impl Op {
    /// A bare op with all optional fields empty; set the others with struct update or the `with_` methods.
    pub fn new(client: u32, kind: OpKind, f: OpFn, resource: impl Into<String>) -> Self {
        Self {
            index: 0,
            time_us: 0,
            client,
            kind,
            f,
            resource: resource.into(),
            owner: None,
            fencing_token: None,
            validity_deadline_us: None,
            ttl_ms: None,
            error: None,
            error_kind: None,
            strategy: None,
            owns: None,
        }
    }

    /// Sets the owner token.
    pub fn with_owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Sets the fencing token.
    pub fn with_token(mut self, token: u64) -> Self {
        self.fencing_token = Some(token);
        self
    }

    /// Sets the validity deadline (µs on the run clock).
    pub fn with_deadline_us(mut self, deadline_us: u64) -> Self {
        self.validity_deadline_us = Some(deadline_us);
        self
    }

    /// Sets the TTL (ms).
    pub fn with_ttl_ms(mut self, ttl_ms: u64) -> Self {
        self.ttl_ms = Some(ttl_ms);
        self
    }

    /// Sets the error message and class.
    pub fn with_error(mut self, kind: ErrorKind, message: impl Into<String>) -> Self {
        self.error_kind = Some(kind);
        self.error = Some(message.into());
        self
    }

    /// Sets the strategy name.
    pub fn with_strategy(mut self, strategy: impl Into<String>) -> Self {
        self.strategy = Some(strategy.into());
        self
    }

    /// Sets index and time (for hand-built histories; the recorder sets them itself).
    pub fn at(mut self, index: u64, time_us: u64) -> Self {
        self.index = index;
        self.time_us = time_us;
        self
    }
}

/// One fault window: a fault the nemesis injected, from the moment it took effect to its heal.
/// The one type a window has from the nemesis (which stamps it on the [`RunClock`](super::RunClock)) through the
/// history and the checker to the report.
///
/// Recorded at start (`end_us: None`) and at heal (same `id`); an instant fault (clock jump,
/// client crash, `SENTINEL FAILOVER`) once, already closed (`end_us` = `start_us`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultWindow {
    /// Unique per run, increasing in injection order.
    pub id: u64,
    /// Fault kind in kebab case (`latency`, `partition`, `kill`, `pause-node`, `failover`,
    /// `clock-jump`, `client-pause`, `slow-work`, `client-crash`, `client-absent`).
    pub kind: String,
    /// What it hit: node names (`n1`), proxy names (`n2-repl`) or clients (`client:3`).
    pub targets: Vec<String>,
    /// µs on the run clock.
    pub start_us: u64,
    /// µs on the run clock; `None` while still active.
    pub end_us: Option<u64>,
    /// The step's parameters and what the fault did, e.g. `latency = 50ms, jitter = 10ms;
    /// latency 50ms ± 10ms downstream` or `method = sentinel; n1 -> n2 after 1200 ms`. Empty in
    /// histories written before windows carried it.
    #[serde(default)]
    pub detail: String,
}

/// A client died (task aborted) and will never release what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientCrash {
    /// Position in the history, assigned at recording.
    #[serde(default)]
    pub index: u64,
    /// µs on the run clock, assigned at recording.
    #[serde(default)]
    pub time_us: u64,
    /// The client that died.
    pub client: u32,
}

/// The workload stopped: from here on clients only finish what they had started (the drain),
/// then the ones still inside an operation are aborted, which records nothing. Acquires still
/// waiting at this mark waited at least until it. Recorded once per strategy run, before the
/// drain; histories written before the mark existed have none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEnd {
    /// Position in the history, assigned at recording.
    #[serde(default)]
    pub index: u64,
    /// µs on the run clock, assigned at recording.
    #[serde(default)]
    pub time_us: u64,
}

/// One line of `history.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum HistoryEvent {
    /// A client operation.
    Op(Op),
    /// A fault window (start or heal).
    Fault(FaultWindow),
    /// A client crash.
    Crash(ClientCrash),
    /// The workload stopped (`{"type":"run-end","index":…,"time_us":…}`).
    #[serde(rename = "run-end")]
    RunEnd(RunEnd),
}

impl HistoryEvent {
    /// The event's time on the run clock, µs (a fault window's start).
    pub fn time_us(&self) -> u64 {
        match self {
            Self::Op(op) => op.time_us,
            Self::Crash(c) => c.time_us,
            Self::Fault(f) => f.start_us,
            Self::RunEnd(e) => e.time_us,
        }
    }
}
