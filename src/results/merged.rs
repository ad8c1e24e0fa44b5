//! Exact merged latency: per-second interval HdrHistograms from several sources (the workers of
//! a multi-worker run, or any set of recorders of one run) summed per second and overall.
//!
//! HdrHistogram counts are additive: the sum of histograms (hdrhistogram's `add`) holds exactly
//! the counts one histogram would hold had it recorded every sample itself, so percentiles of
//! the merge are those of the whole run, not an average of the sources' percentiles (which is
//! what load tools that spread out report, and which is wrong for any percentile). The only
//! approximation is HdrHistogram's own bucket width (its significant figures), the same as for
//! one histogram.

use hdrhistogram::Histogram;

/// Errors of merging interval histograms.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A source's histogram could not be added (a value beyond what the merged histogram can
    /// track, and it cannot grow).
    #[error("latency of source {source_index}, second {second}: cannot merge: {detail}")]
    Add {
        /// Index of the source in the input.
        source_index: usize,
        /// The interval (seconds since the run's start).
        second: usize,
        /// hdrhistogram's reason.
        detail: String,
    },
    /// A merged histogram could not be created with the sources' precision.
    #[error("cannot create a merged histogram with {sigfig} significant figures: {detail}")]
    Create {
        /// Significant figures asked for.
        sigfig: u8,
        /// hdrhistogram's reason.
        detail: String,
    },
}

/// Latency of several sources merged: one histogram per second and one for the whole run.
#[derive(Debug, Clone)]
pub struct MergedLatency {
    /// `per_second[s]`: every sample any source recorded in second `s` (µs, or whatever unit
    /// the sources recorded in). As long as the longest source; a second no source recorded
    /// anything in is an empty histogram.
    pub per_second: Vec<Histogram<u64>>,
    /// Every sample of every source and second.
    pub overall: Histogram<u64>,
}

/// Merges `sources`, each a list of per-second interval histograms (`source[s]` = the samples of
/// second `s`), into one histogram per second and one overall. The merged histograms track
/// from 1 with the highest significant figures of the inputs (3 when there is no input) and
/// grow to any value a source holds.
///
/// # Errors
/// [`MergeError::Create`] for precision hdrhistogram refuses, [`MergeError::Add`] when a
/// histogram cannot be added.
pub fn merge_intervals(sources: &[Vec<Histogram<u64>>]) -> Result<MergedLatency, MergeError> {
    let sigfig = sources
        .iter()
        .flatten()
        .map(Histogram::sigfig)
        .max()
        .unwrap_or(3);
    let empty = || {
        let mut h = Histogram::<u64>::new(sigfig).map_err(|e| MergeError::Create {
            sigfig,
            detail: e.to_string(),
        })?;
        h.auto(true);
        Ok::<_, MergeError>(h)
    };
    let seconds = sources.iter().map(Vec::len).max().unwrap_or(0);
    let mut per_second = (0..seconds)
        .map(|_| empty())
        .collect::<Result<Vec<_>, _>>()?;
    let mut overall = empty()?;
    for (source_index, intervals) in sources.iter().enumerate() {
        for (second, h) in intervals.iter().enumerate() {
            let add_err = |e: hdrhistogram::AdditionError| MergeError::Add {
                source_index,
                second,
                detail: format!("{e:?}"),
            };
            per_second[second].add(h).map_err(add_err)?;
            overall.add(h).map_err(add_err)?;
        }
    }
    Ok(MergedLatency {
        per_second,
        overall,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn hist() -> Histogram<u64> {
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap()
    }

    /// Three sources of different lengths and latency shapes, and one histogram that recorded
    /// every sample: the merged percentiles are the same at every quantile, per second too.
    #[test]
    fn merged_percentiles_equal_those_of_one_histogram_holding_every_sample() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(26);
        let lengths = [5usize, 3, 4];
        let mut sources: Vec<Vec<Histogram<u64>>> = Vec::new();
        let mut all = hist();
        let mut all_per_second: Vec<Histogram<u64>> = (0..5).map(|_| hist()).collect();
        for (w, &len) in lengths.iter().enumerate() {
            let mut intervals = Vec::new();
            for in_second in all_per_second.iter_mut().take(len) {
                let mut h = hist();
                // A fast worker, a slow one, and one with a long tail.
                for _ in 0..rng.random_range(100..2_000) {
                    let v = match w {
                        0 => rng.random_range(50..400),
                        1 => rng.random_range(5_000..9_000),
                        _ if rng.random_bool(0.02) => rng.random_range(100_000..3_000_000),
                        _ => rng.random_range(200..1_000),
                    };
                    h.record(v).unwrap();
                    all.record(v).unwrap();
                    in_second.record(v).unwrap();
                }
                intervals.push(h);
            }
            sources.push(intervals);
        }
        let merged = merge_intervals(&sources).unwrap();
        assert_eq!(merged.per_second.len(), 5);
        assert_eq!(merged.overall.len(), all.len());
        let quantiles = [0.0, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0];
        for q in quantiles {
            assert_eq!(
                merged.overall.value_at_quantile(q),
                all.value_at_quantile(q),
                "q {q}"
            );
        }
        for (s, (m, one)) in merged.per_second.iter().zip(&all_per_second).enumerate() {
            assert_eq!(m.len(), one.len(), "second {s}");
            for q in quantiles {
                assert_eq!(
                    m.value_at_quantile(q),
                    one.value_at_quantile(q),
                    "second {s} q {q}"
                );
            }
        }
        // The average of the sources' p99 is far from the true p99: what merging fixes.
        let p99s: Vec<u64> = sources
            .iter()
            .map(|src| {
                let mut h = hist();
                src.iter().for_each(|i| h.add(i).unwrap());
                h.value_at_quantile(0.99)
            })
            .collect();
        let averaged = p99s.iter().sum::<u64>() / p99s.len() as u64;
        assert_ne!(averaged, all.value_at_quantile(0.99));
    }

    #[test]
    fn no_sources_merge_to_nothing_and_a_gap_second_is_empty() {
        let m = merge_intervals(&[]).unwrap();
        assert!(m.per_second.is_empty());
        assert_eq!(m.overall.len(), 0);
        let mut late = hist();
        late.record(700).unwrap();
        let m = merge_intervals(&[vec![hist(), hist(), late]]).unwrap();
        assert_eq!(
            m.per_second.iter().map(Histogram::len).collect::<Vec<_>>(),
            vec![0, 0, 1]
        );
        assert_eq!(m.overall.max(), m.overall.highest_equivalent(700));
    }
}
