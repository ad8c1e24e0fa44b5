//! Latency and throughput collection off the hot path.
//!
//! Client tasks send [`Sample`]s over an unbounded channel; one collector task owns every
//! HdrHistogram (values in µs, 1 µs .. 1 h, 3 significant digits) and the per-second
//! timeline, so clients never contend on a lock to record a number (the oha/wrk2 layout).

use std::collections::HashMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::sync::mpsc;

use crate::results::{HarnessHealth, LatencySummary, StrategySummary, TimelinePoint};

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
    /// The harness's lag probe woke `latency_us` late (see [`HarnessHealth`]); `queued` is the
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
}

/// Sender half given to every client task.
pub type SampleSender = mpsc::UnboundedSender<Sample>;

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_TRACKABLE_US, 3).expect("static histogram bounds are valid")
}

#[derive(Default)]
struct Second {
    acquired: u64,
    contended: u64,
    errors: u64,
    acquire_ok: Option<Histogram<u64>>,
    lag_max_us: u64,
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
    /// The harness's scheduling lag, µs (see [`HarnessHealth`]).
    pub harness_lag: Histogram<u64>,
    ledger_queue_max: u64,
    ttl_ms: u64,
    contended: u64,
    errors: u64,
    release_errors: u64,
    cycles: u64,
    seconds: Vec<Second>,
    error_counts: HashMap<String, u64>,
}

impl Default for Collector {
    fn default() -> Self {
        Self {
            acquire_ok: new_histogram(),
            acquire_fail: new_histogram(),
            release: new_histogram(),
            critical_section: new_histogram(),
            harness_lag: new_histogram(),
            ledger_queue_max: 0,
            ttl_ms: 0,
            contended: 0,
            errors: 0,
            release_errors: 0,
            cycles: 0,
            seconds: Vec::new(),
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
            SampleKind::HarnessLag { queued } => {
                self.harness_lag.saturating_record(v);
                self.ledger_queue_max = self.ledger_queue_max.max(queued);
                bucket.lag_max_us = bucket.lag_max_us.max(s.latency_us);
            }
        }
    }

    fn count_error(&mut self, msg: String) {
        // Bound memory if a node produces many distinct messages.
        if self.error_counts.len() < 64 || self.error_counts.contains_key(&msg) {
            *self.error_counts.entry(msg).or_insert(0) += 1;
        }
    }

    /// Builds the summary for `strategy` after `elapsed` of running.
    pub fn summary(&self, strategy: &str, elapsed: Duration) -> StrategySummary {
        let secs = elapsed.as_secs_f64();
        let acquired = self.acquire_ok.len();
        let mut error_samples: Vec<(String, u64)> = self
            .error_counts
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        error_samples.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        error_samples.truncate(10);
        StrategySummary {
            strategy: strategy.to_string(),
            elapsed_s: secs,
            attempts: acquired + self.contended + self.errors,
            acquired,
            contended: self.contended,
            errors: self.errors,
            release_errors: self.release_errors,
            throughput_ops_s: if secs > 0.0 {
                self.cycles as f64 / secs
            } else {
                0.0
            },
            acquire_ok: LatencySummary::from_histogram(&self.acquire_ok),
            acquire_fail: LatencySummary::from_histogram(&self.acquire_fail),
            release: LatencySummary::from_histogram(&self.release),
            critical_section: LatencySummary::from_histogram(&self.critical_section),
            timeline: self
                .seconds
                .iter()
                .enumerate()
                .map(|(i, b)| TimelinePoint {
                    second: i as u64,
                    acquired: b.acquired,
                    contended: b.contended,
                    errors: b.errors,
                    acquire_p99_us: b
                        .acquire_ok
                        .as_ref()
                        .map(|h| h.value_at_quantile(0.99))
                        .unwrap_or(0),
                    harness_lag_max_us: b.lag_max_us,
                })
                .collect(),
            error_samples,
            harness: HarnessHealth::judge(
                LatencySummary::from_histogram(&self.harness_lag),
                self.ledger_queue_max,
                self.ttl_ms,
            ),
            check: None,
            cut_sections: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(kind: SampleKind, us: u64, at_ms: u64) -> Sample {
        Sample {
            kind,
            latency_us: us,
            at: Duration::from_millis(at_ms),
        }
    }

    #[test]
    fn counts_and_percentiles() {
        let mut c = Collector::default();
        for i in 1..=100 {
            c.record(s(SampleKind::AcquireOk, i * 10, i * 15));
            c.record(s(SampleKind::CriticalSection, i * 20, i * 15));
        }
        c.record(s(SampleKind::AcquireContended, 50, 10));
        c.record(s(SampleKind::AcquireError("boom".into()), 70, 1_200));
        c.record(s(SampleKind::AcquireError("boom".into()), 70, 1_300));
        let sum = c.summary("single", Duration::from_secs(2));
        assert_eq!(sum.acquired, 100);
        assert_eq!(sum.contended, 1);
        assert_eq!(sum.errors, 2);
        assert_eq!(sum.attempts, 103);
        assert!((sum.throughput_ops_s - 50.0).abs() < 1e-9);
        assert_eq!(sum.acquire_ok.p50_us, 500);
        assert_eq!(sum.acquire_ok.max_us, 1_000);
        assert_eq!(sum.timeline.len(), 2);
        assert_eq!(sum.timeline[0].acquired, 66);
        assert_eq!(sum.timeline[1].acquired, 34);
        assert_eq!(sum.timeline[1].errors, 2);
        assert_eq!(sum.error_samples, vec![("boom".to_string(), 2)]);
    }
}
