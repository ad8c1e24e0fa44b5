//! Latency and throughput collection off the hot path.
//!
//! Client tasks send [`Sample`]s over an unbounded channel; one collector task owns every
//! HdrHistogram (values in µs, 1 µs .. 1 h, 3 significant digits) and the per-second
//! timeline, so clients never contend on a lock to record a number (the oha/wrk2 layout).

use std::collections::HashMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::sync::mpsc;

/// Highest trackable latency: one hour in µs. Larger samples are clamped (saturating record).
const MAX_TRACKABLE_US: u64 = 3_600_000_000;

/// What a sample measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SampleKind {
    /// Acquire returned a lease.
    AcquireOk,
    /// Acquire refused: another owner held the lock.
    AcquireContended,
    /// Acquire failed with an error, timeout or exhausted validity; the message is kept.
    AcquireError(String),
    /// Release finished (whether or not our key was still there).
    Release,
    /// Release failed with an error; the message is kept.
    ReleaseError(String),
    /// A whole cycle finished: acquire-ok → release done.
    CriticalSection,
    /// A client that held a lease crashed inside its critical section (no release follows):
    /// it no longer believes it holds the sample's resource.
    SectionAbandoned,
    /// The harness's lag probe woke `latency_us` late; `queued` is the
    /// ledger's queue length at that moment.
    HarnessLag {
        /// Ledger requests waiting at the probe's wake-up.
        queued: u64,
    },
}

/// One measurement: kind, latency (µs) and when it ended (offset from the strategy's start).
#[derive(Debug, Clone)]
pub struct Sample {
    /// What was measured.
    pub kind: SampleKind,
    /// Latency in µs.
    pub latency_us: u64,
    /// When the operation ended, from the strategy's start.
    pub at: Duration,
    /// The resource's index (`r<i>`) for the samples that start or end a client's belief that
    /// it holds it ([`SampleKind::AcquireOk`], [`SampleKind::CriticalSection`],
    /// [`SampleKind::SectionAbandoned`]); `None` for the others.
    pub resource: Option<u32>,
}

/// Sender half given to every client task.
pub type SampleSender = mpsc::UnboundedSender<Sample>;

/// An empty latency histogram (µs, 1 µs to one hour, 3 significant figures).
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_TRACKABLE_US, 3).expect("static histogram bounds are valid")
}

/// Counts of one second of the run (second 0 starts with the clients).
#[derive(Default)]
pub struct Second {
    /// Successful acquisitions that ended in this second.
    pub acquired: u64,
    /// Acquisitions refused because the lock was held.
    pub contended: u64,
    /// Acquisitions that failed with an error.
    pub errors: u64,
    /// Successful acquire latency of this second, µs (`None` before the first).
    pub acquire_ok: Option<Histogram<u64>>,
    /// Largest harness lag seen in this second, µs.
    pub lag_max_us: u64,
}

/// Owns every histogram and counter of one strategy's run.
pub struct Collector {
    /// Successful acquire latency, µs.
    pub acquire_ok: Histogram<u64>,
    /// Failed (contended or errored) acquire latency, µs.
    pub acquire_fail: Histogram<u64>,
    /// Release latency, µs.
    pub release: Histogram<u64>,
    /// Whole critical section latency, µs.
    pub critical_section: Histogram<u64>,
    /// The harness's scheduling lag, µs (how late its probe woke up).
    pub harness_lag: Histogram<u64>,
    /// `adapter:*` strategies: the harness's overhead per answered adapter request, µs
    /// (lockbench's round trip minus the adapter's own time around the library call) and its
    /// legs, merged over the run's adapter processes at the end of the run; empty otherwise.
    pub adapter_overhead: crate::strategy::AdapterOverhead,
    /// Longest ledger queue seen at a lag probe.
    pub ledger_queue_max: u64,
    /// The lease TTL the harness's lag is judged against, ms (0 = none).
    pub ttl_ms: u64,
    /// Acquisitions refused because the lock was held.
    pub contended: u64,
    /// Acquisitions that failed with an error, a timeout or exhausted validity.
    pub errors: u64,
    /// Releases that failed.
    pub release_errors: u64,
    /// Whole cycles (acquire-ok → release done).
    pub cycles: u64,
    /// Per-second counts, second 0 first.
    pub seconds: Vec<Second>,
    /// Per resource index: clients that believe they hold it right now (from their
    /// acquire-ok until their release returned or they crashed inside). Sections cut at the
    /// end of the drain stay counted. Only as long as the highest index seen.
    pub holders: Vec<u64>,
    /// Error messages and how often each occurred (at most 64 distinct ones).
    pub error_counts: HashMap<String, u64>,
}

impl Default for Collector {
    fn default() -> Self {
        Self {
            acquire_ok: new_histogram(),
            acquire_fail: new_histogram(),
            release: new_histogram(),
            critical_section: new_histogram(),
            harness_lag: new_histogram(),
            adapter_overhead: Default::default(),
            ledger_queue_max: 0,
            ttl_ms: 0,
            contended: 0,
            errors: 0,
            release_errors: 0,
            cycles: 0,
            seconds: Vec::new(),
            holders: Vec::new(),
            error_counts: HashMap::new(),
        }
    }
}

impl Collector {
    /// A collector that judges the harness's lag against a lease TTL of `ttl_ms` (0 = none).
    pub fn for_ttl(ttl_ms: u64) -> Self {
        Self {
            ttl_ms,
            ..Self::default()
        }
    }

    /// Largest harness lag seen in the last complete second, µs.
    pub fn last_second_lag_us(&self) -> u64 {
        let n = self.seconds.len();
        if n < 2 {
            return self.seconds.first().map_or(0, |b| b.lag_max_us);
        }
        self.seconds[n - 2].lag_max_us
    }

    /// Records one sample.
    pub fn record(&mut self, s: Sample) {
        let sec = s.at.as_secs() as usize;
        if self.seconds.len() <= sec {
            self.seconds.resize_with(sec + 1, Second::default);
        }
        self.count_holder(&s);
        let bucket = &mut self.seconds[sec];
        let v = s.latency_us.max(1);
        match s.kind {
            SampleKind::AcquireOk => {
                self.acquire_ok.saturating_record(v);
                bucket.acquired += 1;
                bucket
                    .acquire_ok
                    .get_or_insert_with(new_histogram)
                    .saturating_record(v);
            }
            SampleKind::AcquireContended => {
                self.acquire_fail.saturating_record(v);
                self.contended += 1;
                bucket.contended += 1;
            }
            SampleKind::AcquireError(msg) => {
                self.acquire_fail.saturating_record(v);
                self.errors += 1;
                bucket.errors += 1;
                self.count_error(msg);
            }
            SampleKind::Release => self.release.saturating_record(v),
            SampleKind::ReleaseError(msg) => {
                self.release.saturating_record(v);
                self.release_errors += 1;
                self.count_error(msg);
            }
            SampleKind::CriticalSection => {
                self.critical_section.saturating_record(v);
                self.cycles += 1;
            }
            SampleKind::SectionAbandoned => {}
            SampleKind::HarnessLag { queued } => {
                self.harness_lag.saturating_record(v);
                self.ledger_queue_max = self.ledger_queue_max.max(queued);
                bucket.lag_max_us = bucket.lag_max_us.max(s.latency_us);
            }
        }
    }

    /// Keeps [`holders`](Self::holders) in step with a sample that starts or ends a belief.
    fn count_holder(&mut self, s: &Sample) {
        let Some(r) = s.resource else { return };
        let r = r as usize;
        match s.kind {
            SampleKind::AcquireOk => {
                if self.holders.len() <= r {
                    self.holders.resize(r + 1, 0);
                }
                self.holders[r] += 1;
            }
            SampleKind::CriticalSection | SampleKind::SectionAbandoned => {
                if let Some(h) = self.holders.get_mut(r) {
                    *h = h.saturating_sub(1);
                }
            }
            _ => {}
        }
    }

    fn count_error(&mut self, msg: String) {
        // Bound memory if a node produces many distinct messages.
        if self.error_counts.len() < 64 || self.error_counts.contains_key(&msg) {
            *self.error_counts.entry(msg).or_insert(0) += 1;
        }
    }
}
