//! A strategy's [`StrategySummary`] from the driver's [`Collector`]: counts, latency
//! percentiles (µs), the per-second timeline and the harness's health.

use std::time::Duration;

use super::summary::{
    AdapterOverheadLegs, HarnessHealth, LatencySummary, StrategySummary, TimelinePoint,
};
use crate::driver::Collector;

impl StrategySummary {
    /// The summary of `strategy` from its collector `c`, after `elapsed` of running.
    /// `check` is left empty (the checker's verdict is added later) and `cut_sections` 0.
    pub fn from_collector(c: &Collector, strategy: &str, elapsed: Duration) -> Self {
        let secs = elapsed.as_secs_f64();
        let acquired = c.acquire_ok.len();
        let mut error_samples: Vec<(String, u64)> = c
            .error_counts
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        error_samples.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        error_samples.truncate(10);
        StrategySummary {
            strategy: strategy.to_string(),
            elapsed_s: secs,
            attempts: acquired + c.contended + c.errors,
            acquired,
            contended: c.contended,
            errors: c.errors,
            release_errors: c.release_errors,
            throughput_ops_s: if secs > 0.0 {
                c.cycles as f64 / secs
            } else {
                0.0
            },
            acquire_ok: LatencySummary::from_histogram(&c.acquire_ok),
            acquire_fail: LatencySummary::from_histogram(&c.acquire_fail),
            release: LatencySummary::from_histogram(&c.release),
            critical_section: LatencySummary::from_histogram(&c.critical_section),
            timeline: c
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
            harness: HarnessHealth {
                adapter_overhead: (!c.adapter_overhead.total.is_empty())
                    .then(|| LatencySummary::from_histogram(&c.adapter_overhead.total)),
                adapter_overhead_legs: (!c.adapter_overhead.lockbench.is_empty()).then(|| {
                    let o = &c.adapter_overhead;
                    AdapterOverheadLegs {
                        lockbench: LatencySummary::from_histogram(&o.lockbench),
                        to_adapter: LatencySummary::from_histogram(&o.to_adapter),
                        in_adapter: LatencySummary::from_histogram(&o.in_adapter),
                        from_adapter: LatencySummary::from_histogram(&o.from_adapter),
                    }
                }),
                ..HarnessHealth::judge(
                    LatencySummary::from_histogram(&c.harness_lag),
                    c.ledger_queue_max,
                    c.ttl_ms,
                )
            },
            check: None,
            cut_sections: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::{Sample, SampleKind};

    fn s(kind: SampleKind, us: u64, at_ms: u64) -> Sample {
        Sample {
            kind,
            latency_us: us,
            at: Duration::from_millis(at_ms),
            resource: None,
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
        let sum = StrategySummary::from_collector(&c, "single", Duration::from_secs(2));
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
