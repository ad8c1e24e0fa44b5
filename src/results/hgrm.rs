//! HdrHistogram percentile-distribution text (`.hgrm`).
//!
//! The layout is the one HdrHistogram's `outputPercentileDistribution` prints and that
//! HistogramLogAnalyzer and the online plotter read: a header, one row per step of
//! `Value Percentile TotalCount 1/(1-Percentile)`, then mean/stddev/max/count footer lines.
//! Values are recorded in µs and printed in ms (scaling ratio 1000).

use std::fmt::Write as _;

use hdrhistogram::Histogram;

/// Ticks per half distance, as in HdrHistogram's default output (5).
const TICKS_PER_HALF_DISTANCE: u32 = 5;
/// Values are recorded in µs; the file shows ms.
const SCALE: f64 = 1000.0;

/// Renders `h` (values in µs) as `.hgrm` text with values in ms.
///
/// An empty histogram renders the header and a zero footer, which plotters accept.
pub fn percentile_distribution(h: &Histogram<u64>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    if !h.is_empty() {
        let mut total = 0u64;
        for v in h.iter_quantiles(TICKS_PER_HALF_DISTANCE) {
            total += v.count_since_last_iteration();
            let q = v.quantile_iterated_to();
            let value = h.highest_equivalent(v.value_iterated_to()) as f64 / SCALE;
            if q < 1.0 {
                let _ = writeln!(
                    out,
                    "{:>12.3} {:>2.12} {:>10} {:>14.2}",
                    value,
                    q,
                    total,
                    1.0 / (1.0 - q)
                );
            } else {
                let _ = writeln!(out, "{value:>12.3} {q:>2.12} {total:>10}");
            }
        }
    }
    let (mean, stdev, max) = if h.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (h.mean() / SCALE, h.stdev() / SCALE, h.max() as f64 / SCALE)
    };
    let _ = writeln!(
        out,
        "#[Mean    = {mean:>12.3}, StdDeviation   = {stdev:>12.3}]"
    );
    let _ = writeln!(
        out,
        "#[Max     = {max:>12.3}, Total count    = {:>12}]",
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        h.distinct_values()
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_monotonic_and_footer_counts_samples() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        for v in 1..=1000u64 {
            h.record(v * 10).unwrap(); // 10 µs .. 10 ms
        }
        let text = percentile_distribution(&h);
        let rows: Vec<(f64, f64, u64)> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty() && !l.contains("Value"))
            .map(|l| {
                let mut it = l.split_whitespace();
                (
                    it.next().unwrap().parse().unwrap(),
                    it.next().unwrap().parse().unwrap(),
                    it.next().unwrap().parse().unwrap(),
                )
            })
            .collect();
        assert!(rows.len() > 20, "too few rows: {}", rows.len());
        assert!(rows
            .windows(2)
            .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1 && w[0].2 <= w[1].2));
        let last = rows.last().unwrap();
        assert_eq!(last.2, 1000, "TotalCount is cumulative");
        assert!((last.1 - 1.0).abs() < 1e-9);
        assert!((last.0 - 10.0).abs() < 0.02, "max row {} ms", last.0);
        assert!(text.contains("Total count    =         1000]"));
    }

    #[test]
    fn empty_histogram_renders_footer() {
        let h = Histogram::<u64>::new(3).unwrap();
        let text = percentile_distribution(&h);
        assert!(text.contains("Total count    =            0]"));
    }
}
