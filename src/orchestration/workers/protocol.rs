//! The control API's messages (JSON over HTTP, see `docs/workers.md`): what a worker sends
//! the coordinator and what it gets back. Latency histograms travel as HdrHistogram V2
//! encodings in base64 (exact counts: the coordinator sums them with
//! [`crate::results::merge_intervals`]).

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::clock::ClockProbe;
use super::WorkersError;
use crate::node::NodeEndpoint;
use crate::orchestration::test::Test;
use crate::strategy::StrategyKind;

/// `POST /register`: a worker says it is there.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Registration {
    /// The slot it was launched for (`--slot`), or `None` for the next free one.
    pub slot: Option<u32>,
    /// Its process id (for the run's `workers.json` and for a launcher that stops it).
    pub pid: u32,
}

/// A node as a worker reaches it: name and URL (the URL may carry a password; the control API
/// listens on loopback for the `processes` launcher).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireEndpoint {
    /// Node name (`n1`).
    pub name: String,
    /// Connection URL.
    pub url: String,
}

impl WireEndpoint {
    /// The endpoint of a plain node (no Sentinel lookup, no cluster routing).
    pub fn from_endpoint(e: &NodeEndpoint) -> Self {
        Self {
            name: e.name.clone(),
            url: e.url.clone(),
        }
    }

    /// The endpoint as seen from another host: a loopback or wildcard host in its URL
    /// (`127.0.0.1`, `localhost`, `0.0.0.0`) becomes `host`; other URLs are kept.
    pub fn on_host(self, host: &str) -> Self {
        let local = |h: &str| matches!(h, "127.0.0.1" | "localhost" | "0.0.0.0" | "::1");
        match crate::node::host_port(&self.url) {
            Ok((h, port)) if local(&h) => {
                match crate::node::with_host_port(&self.url, host, port) {
                    Ok(url) => Self { url, ..self },
                    Err(_) => self,
                }
            }
            _ => self,
        }
    }

    /// Back to a [`NodeEndpoint`].
    pub fn to_endpoint(&self) -> NodeEndpoint {
        NodeEndpoint::new(self.name.clone(), self.url.clone())
    }
}

/// The shared ledger a worker writes to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireLedger {
    /// `postgres://…` URL of the database.
    pub url: String,
    /// The run's schema in it.
    pub schema: String,
}

/// The answer to [`Registration`]: everything a worker needs to run its share.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Slot {
    /// Worker index, `0..workers`.
    pub worker: u32,
    /// Workers in the run.
    pub workers: u32,
    /// Its clients record ids `client_base..client_base + clients`.
    pub client_base: u32,
    /// How many clients it runs.
    pub clients: u32,
    /// Its share of an op-count stop condition (`None`: the test stops after a duration).
    pub ops: Option<u64>,
    /// The test (workload, client settings; its `workload.clients` is the whole run's).
    pub test: Test,
    /// The strategy to run.
    pub strategy: StrategyKind,
    /// The nodes (through the coordinator's proxies unless direct).
    pub endpoints: Vec<WireEndpoint>,
    /// The shared ledger (`None`: not audited).
    pub ledger: Option<WireLedger>,
    /// Its critical-section ids start here (`worker << 40`): unique across the run.
    pub first_section: u64,
}

/// `GET /clock`: the coordinator's wall clock, µs since the Unix epoch.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct ClockReading {
    /// µs since the Unix epoch on the coordinator.
    pub unix_us: u64,
}

/// `POST /ready`: clients connected, clock probed; the answer comes when every worker is ready.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ready {
    /// Worker index.
    pub worker: u32,
    /// Round trips to `GET /clock` just made.
    pub probes: Vec<ClockProbe>,
}

/// The answer to [`Ready`]: when to start, or why not.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Start {
    /// Time zero of the run, µs since the epoch on the coordinator's clock.
    pub start_unix_us: u64,
    /// The coordinator's estimate of (its clock − the worker's), µs: the worker starts at
    /// `start_unix_us − offset_us` on its own clock.
    pub offset_us: i64,
    /// Set when the run was called off: the worker stops without running.
    pub abort: Option<String>,
}

/// One second of a worker's run (second 0 starts with the run).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WireSecond {
    /// Second index.
    pub second: u32,
    /// Successful acquisitions that ended in it.
    pub acquired: u64,
    /// Refused because held.
    pub contended: u64,
    /// Failed with an error.
    pub errors: u64,
    /// Largest harness lag, µs.
    pub lag_max_us: u64,
    /// Successful acquire latency, µs (V2 + base64; `None` before the first).
    pub acquire_ok: Option<String>,
}

/// `POST /events`: history lines since the last batch, seconds updated since, a clock probe;
/// also the heartbeat (sent every [`super::HEARTBEAT`] even when empty).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Batch {
    /// Worker index.
    pub worker: u32,
    /// Lines of its `history.jsonl`, in order, each one event.
    pub events: Vec<String>,
    /// Seconds updated since the last batch (a later copy of a second replaces an earlier).
    pub seconds: Vec<WireSecond>,
    /// A round trip to `GET /clock` made just before.
    pub probe: Option<ClockProbe>,
}

/// The answer to [`Batch`].
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct BatchReply {
    /// Stop the clients now (Ctrl-C at the coordinator, or the run was called off).
    pub stop: bool,
}

/// `POST /done`: the worker's whole measurement, after its last [`Batch`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerReport {
    /// Worker index.
    pub worker: u32,
    /// History events it wrote (all sent in batches).
    pub events: u64,
    /// Refused because held.
    pub contended: u64,
    /// Acquisitions failed with an error.
    pub errors: u64,
    /// Releases failed.
    pub release_errors: u64,
    /// Whole cycles.
    pub cycles: u64,
    /// How long its clients ran, ms.
    pub elapsed_ms: u64,
    /// A shutdown ended it early.
    pub interrupted: bool,
    /// Sections cut at the end of the drain.
    pub cut_sections: u64,
    /// Ledger steps that did not commit.
    pub failed_steps: u64,
    /// Why its clients' lock service broke, if it did.
    pub client_failure: Option<String>,
    /// Successful acquire latency, µs (V2 + base64).
    pub acquire_ok: String,
    /// Failed acquire latency, µs.
    pub acquire_fail: String,
    /// Release latency, µs.
    pub release: String,
    /// Critical section latency, µs.
    pub critical_section: String,
    /// Harness lag, µs.
    pub harness_lag: String,
    /// Every second of its run.
    pub seconds: Vec<WireSecond>,
    /// Error messages and counts.
    pub error_counts: Vec<(String, u64)>,
}

/// Encodes a histogram as V2 + base64.
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut bytes)
        .expect("serializing into memory does not fail");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decodes [`encode_histogram`]'s output.
///
/// # Errors
/// [`WorkersError::Protocol`] for bad base64 or a bad encoding.
pub fn decode_histogram(s: &str) -> Result<Histogram<u64>, WorkersError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| WorkersError::Protocol(format!("histogram: {e}")))?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| WorkersError::Protocol(format!("histogram: {e:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_on_another_host_keeps_its_port_and_password() {
        let e = WireEndpoint {
            name: "n1".into(),
            url: "redis://:pw@127.0.0.1:20123".into(),
        };
        assert_eq!(
            e.clone().on_host("c.ns.svc").url,
            "redis://:pw@c.ns.svc:20123"
        );
        let far = WireEndpoint {
            name: "n1".into(),
            url: "redis://cache.example:6379".into(),
        };
        assert_eq!(far.clone().on_host("c.ns.svc"), far);
    }

    #[test]
    fn a_histogram_survives_the_wire_with_every_count() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        for v in [1, 250, 250, 9_999, 1_234_567] {
            h.record(v).unwrap();
        }
        let back = decode_histogram(&encode_histogram(&h)).unwrap();
        assert_eq!(back.len(), 5);
        assert_eq!(back, h);
        assert!(decode_histogram("not base64!").is_err());
    }
}
