//! The acquire-latency histogram of the live metrics: fixed buckets (seconds) filled from the
//! driver's HdrHistogram (µs) in one pass, and encoded as an OpenMetrics histogram.

use std::sync::{Arc, Mutex};

use hdrhistogram::Histogram;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Upper bounds of the acquire-latency buckets, seconds (100 µs .. 10 s; `+Inf` is added).
pub const LATENCY_BOUNDS_S: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// Per-bucket (not cumulative) counts, `_sum` (s) and `_count` of a latency histogram.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Buckets {
    /// One per [`LATENCY_BOUNDS_S`] bound, then `+Inf`.
    counts: [u64; LATENCY_BOUNDS_S.len() + 1],
    sum_s: f64,
    count: u64,
}

impl Buckets {
    /// The buckets of a histogram of µs values, in one pass over its recorded values.
    pub(super) fn from_histogram_us(h: &Histogram<u64>) -> Self {
        let mut b = Buckets::default();
        for v in h.iter_recorded() {
            let us = v.value_iterated_to();
            let n = v.count_at_value();
            let s = us as f64 / 1e6;
            let i = LATENCY_BOUNDS_S
                .iter()
                .position(|&bound| s <= bound)
                .unwrap_or(LATENCY_BOUNDS_S.len());
            b.counts[i] += n;
            b.sum_s += s * n as f64;
            b.count += n;
        }
        b
    }

    /// What `self` has more than `earlier` (an earlier reading of the same histogram).
    pub(super) fn minus(&self, earlier: &Buckets) -> Buckets {
        let mut d = self.clone();
        for (a, b) in d.counts.iter_mut().zip(earlier.counts) {
            *a = a.saturating_sub(b);
        }
        d.sum_s = (d.sum_s - earlier.sum_s).max(0.0);
        d.count = d.count.saturating_sub(earlier.count);
        d
    }
}

/// A histogram whose buckets are set from outside (from an HdrHistogram) instead of observed
/// one value at a time.
#[derive(Debug, Clone, Default)]
pub(super) struct LatencyHistogram(Arc<Mutex<Buckets>>);

impl LatencyHistogram {
    pub(super) fn get(&self) -> Buckets {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(super) fn add(&self, d: &Buckets) {
        let mut b = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for (a, n) in b.counts.iter_mut().zip(d.counts) {
            *a += n;
        }
        b.sum_s += d.sum_s;
        b.count += d.count;
    }
}

impl TypedMetric for LatencyHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let b = self.get();
        let buckets: Vec<(f64, u64)> = LATENCY_BOUNDS_S
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(b.counts)
            .collect();
        encoder.encode_histogram::<NoLabelSet>(b.sum_s, b.count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_split_at_their_bounds() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        h.record(100).unwrap(); // exactly 100 µs: in the first bucket (le is inclusive)
        h.record(101).unwrap();
        let b = Buckets::from_histogram_us(&h);
        assert_eq!(b.counts[0], 1);
        assert_eq!(b.counts[1], 1);
        assert_eq!(b.count, 2);
    }
}
