//! Building a [`StrategyPercentiles`] spectrum from a live histogram or a `.hgrm` file.

use hdrhistogram::Histogram;

use crate::report::error::ReportError;

/// Ticks per half distance, as in HdrHistogram's default percentile output.
const TICKS_PER_HALF_DISTANCE: u32 = 5;

/// The percentile spectrum of `h` (values in µs): `(percentile in 0..=1, latency µs)` at the
/// same steps as the `.hgrm` output (5 ticks per half distance to 100%). Empty in, empty out.
pub fn spectrum_from_histogram(h: &Histogram<u64>) -> Vec<(f64, u64)> {
    if h.is_empty() {
        return Vec::new();
    }
    h.iter_quantiles(TICKS_PER_HALF_DISTANCE)
        .map(|v| {
            (
                v.quantile_iterated_to(),
                h.highest_equivalent(v.value_iterated_to()),
            )
        })
        .collect()
}

/// Parses `.hgrm` text (values in ms, as written by
/// [`results::hgrm::percentile_distribution`](crate::results::hgrm::percentile_distribution))
/// into `(percentile in 0..=1, latency µs)`. Header, blank and `#` footer lines are skipped.
///
/// # Errors
/// [`ReportError::Hgrm`] with the line number when a data row does not have a number in its
/// Value and Percentile columns, or a percentile outside 0..=1.
pub fn parse_hgrm(text: &str) -> Result<Vec<(f64, u64)>, ReportError> {
    let mut points = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with("Value") {
            continue;
        }
        let bad = |message: String| ReportError::Hgrm {
            line: i + 1,
            message,
        };
        let mut cols = trimmed.split_whitespace();
        let value_ms: f64 = cols
            .next()
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| bad(format!("no Value (ms) number in {trimmed:?}")))?;
        let q: f64 = cols
            .next()
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| bad(format!("no Percentile number in {trimmed:?}")))?;
        if !(0.0..=1.0).contains(&q) || !value_ms.is_finite() || value_ms < 0.0 {
            return Err(bad(format!(
                "percentile {q} or value {value_ms} ms out of range"
            )));
        }
        points.push((q, (value_ms * 1000.0).round() as u64));
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::hgrm::percentile_distribution;

    fn histogram() -> Histogram<u64> {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        for v in 1..=10_000u64 {
            h.record(100 + v).unwrap(); // 101 µs .. 10.1 ms
        }
        h
    }

    #[test]
    fn spectrum_is_monotonic_and_ends_at_max() {
        let h = histogram();
        let s = spectrum_from_histogram(&h);
        assert!(s.len() > 30);
        assert!(s.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        let last = s.last().unwrap();
        assert_eq!(last.0, 1.0);
        assert_eq!(last.1, h.highest_equivalent(h.max()));
        assert!(spectrum_from_histogram(&Histogram::<u64>::new(3).unwrap()).is_empty());
    }

    #[test]
    fn hgrm_round_trip_matches_histogram_within_a_microsecond() {
        let h = histogram();
        let parsed = parse_hgrm(&percentile_distribution(&h)).unwrap();
        let direct = spectrum_from_histogram(&h);
        assert_eq!(parsed.len(), direct.len());
        for ((pq, pv), (dq, dv)) in parsed.iter().zip(&direct) {
            assert!((pq - dq).abs() < 1e-9, "{pq} vs {dq}");
            assert!(pv.abs_diff(*dv) <= 1, "{pv} vs {dv}");
        }
    }

    #[test]
    fn bad_row_names_its_line() {
        let err = parse_hgrm("       Value     Percentile\n\n   1.000 abc 3\n").unwrap_err();
        assert!(err.to_string().contains("line 3"), "{err}");
        assert!(parse_hgrm("1.0 1.5 3").is_err());
    }
}
