//! Quorum and validity arithmetic: pure functions, no I/O.
//!
//! Source: the Redis distributed-lock page ("Distributed Locks with Redis", redis.io), section
//! "The Redlock Algorithm": a lock on N independent nodes is held when a majority (N/2+1) of them
//! accepted it, and it is valid for `ttl − elapsed − drift`, where `drift` accounts for clock
//! drift between processes (`ttl × factor + 2 ms`, factor 0.01 by default).

use std::time::Duration;

/// The fixed part of the clock-drift allowance, added to `ttl × drift_factor` (2 ms).
pub const DRIFT_FLOOR: Duration = Duration::from_millis(2);

/// Number of nodes that must accept a lock out of `n` configured nodes: `n / 2 + 1`.
///
/// Always computed from the configured `n`, never from the nodes that happen to be reachable.
/// `quorum(0)` is 1, so an empty node list can never form a quorum.
pub fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// Clock-drift allowance for a lease of `ttl`: `ttl × factor + 2 ms`.
///
/// A negative or non-finite `factor` counts as 0.
pub fn clock_drift(ttl: Duration, factor: f64) -> Duration {
    let factor = if factor.is_finite() && factor > 0.0 {
        factor
    } else {
        0.0
    };
    ttl.mul_f64(factor) + DRIFT_FLOOR
}

/// The least validity a freshly acquired lease must be able to keep (1 ms): a TTL whose
/// validity at zero latency is below this cannot hold a lease for even one round trip.
pub const MIN_VALIDITY: Duration = Duration::from_millis(1);

/// The smallest TTL that can ever give a lease: the smallest whole number of milliseconds
/// (Redis `PX` takes ms) whose validity with zero latency, `ttl − (ttl × factor + 2 ms)`, is at
/// least [`MIN_VALIDITY`]. That is `⌈3 ms / (1 − factor)⌉`: 4 ms for the default factor 0.01,
/// 3 ms for 0. A factor outside `[0, 1)` counts as 0 (the options reject it separately).
pub fn min_workable_ttl(drift_factor: f64) -> Duration {
    let factor = if drift_factor.is_finite() && (0.0..1.0).contains(&drift_factor) {
        drift_factor
    } else {
        0.0
    };
    let needed = (DRIFT_FLOOR + MIN_VALIDITY).as_secs_f64() * 1000.0;
    // Start just below the estimate; step up so rounding in either direction cannot matter.
    let mut ms = ((needed / (1.0 - factor)).floor() as u64)
        .saturating_sub(1)
        .max(1);
    while validity(Duration::from_millis(ms), Duration::ZERO, factor)
        .is_none_or(|v| v < MIN_VALIDITY)
    {
        ms += 1;
    }
    Duration::from_millis(ms)
}

/// Remaining validity of a lease of `ttl` whose acquisition took `elapsed`:
/// `ttl − elapsed − drift`. Returns `None` when that is zero or negative, which means the
/// acquisition must be treated as failed (and released on every node).
pub fn validity(ttl: Duration, elapsed: Duration, drift_factor: f64) -> Option<Duration> {
    let spent = elapsed + clock_drift(ttl, drift_factor);
    ttl.checked_sub(spent).filter(|v| !v.is_zero())
}

/// How the nodes answered one acquisition attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    /// Nodes that set our key.
    pub locked: usize,
    /// Nodes that answered "already held by another owner".
    pub held: usize,
    /// Nodes that failed (error, timeout, unreachable).
    pub failed: usize,
}

/// What an attempt's [`Tally`] and timing mean: the quorum decision on one acquisition attempt
/// (not a checker verdict, which judges a whole history).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuorumDecision {
    /// Quorum reached and validity left: the lease is good for this long.
    Acquired { validity: Duration },
    /// Quorum reached but the attempt took so long that no validity is left.
    ValidityExhausted,
    /// Fewer than a quorum of nodes accepted the lock.
    QuorumNotReached { needed: usize },
    /// Every configured node failed: nothing answered at all.
    AllNodesFailed,
}

/// Decides the outcome of one attempt on `n` configured nodes.
///
/// Success needs `tally.locked ≥ quorum(n)` and [`validity`] > 0.
pub fn decide(
    n: usize,
    tally: Tally,
    ttl: Duration,
    elapsed: Duration,
    drift_factor: f64,
) -> QuorumDecision {
    let needed = quorum(n);
    if tally.locked >= needed {
        match validity(ttl, elapsed, drift_factor) {
            Some(validity) => QuorumDecision::Acquired { validity },
            None => QuorumDecision::ValidityExhausted,
        }
    } else if n > 0 && tally.failed >= n {
        QuorumDecision::AllNodesFailed
    } else {
        QuorumDecision::QuorumNotReached { needed }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn quorum_is_a_strict_majority_for_one_to_seven_nodes() {
        let expected = [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4)];
        for (n, q) in expected {
            assert_eq!(quorum(n), q, "quorum({n})");
            // Two quorums of the same N always share a node.
            assert!(2 * quorum(n) > n, "quorum({n}) is not a majority");
        }
        assert_eq!(quorum(0), 1);
    }

    #[test]
    fn drift_is_ttl_times_factor_plus_two_ms() {
        assert_eq!(clock_drift(MS(10_000), 0.01), MS(102));
        assert_eq!(clock_drift(MS(50), 0.01), Duration::from_micros(2_500));
        assert_eq!(clock_drift(MS(1_000), 0.0), MS(2));
        assert_eq!(clock_drift(MS(1_000), -1.0), MS(2));
        assert_eq!(clock_drift(MS(1_000), f64::NAN), MS(2));
    }

    #[test]
    fn validity_subtracts_elapsed_and_drift() {
        // 10 s − 30 ms − (100 ms + 2 ms) = 9 868 ms
        assert_eq!(validity(MS(10_000), MS(30), 0.01), Some(MS(9_868)));
        assert_eq!(validity(MS(1_000), Duration::ZERO, 0.0), Some(MS(998)));
    }

    #[test]
    fn validity_at_or_below_zero_is_none() {
        // 50 ms TTL with 60 ms of latency: nothing left.
        assert_eq!(validity(MS(50), MS(60), 0.01), None);
        // Exactly zero is not valid either: 10 ms − 8 ms − 2 ms.
        assert_eq!(validity(MS(10), MS(8), 0.0), None);
        // A TTL shorter than the drift floor can never be valid.
        assert_eq!(validity(MS(1), Duration::ZERO, 0.01), None);
        // One microsecond left is still valid.
        assert_eq!(
            validity(MS(10), Duration::from_micros(7_999), 0.0),
            Some(Duration::from_micros(1))
        );
    }

    #[test]
    fn min_workable_ttl_leaves_one_ms_of_validity() {
        assert_eq!(min_workable_ttl(0.01), MS(4));
        assert_eq!(min_workable_ttl(0.0), MS(3));
        assert_eq!(min_workable_ttl(0.5), MS(6));
        assert_eq!(min_workable_ttl(0.9), MS(30));
        assert_eq!(min_workable_ttl(f64::NAN), MS(3));
        for factor in [0.0, 0.01, 0.05, 0.25, 0.5, 0.9] {
            let min = min_workable_ttl(factor);
            let left = validity(min, Duration::ZERO, factor).expect("valid at the minimum");
            assert!(left >= MIN_VALIDITY, "{factor}: {left:?}");
            let below = validity(min - MS(1), Duration::ZERO, factor);
            assert!(
                below.is_none_or(|v| v < MIN_VALIDITY),
                "{factor}: {below:?}"
            );
        }
    }

    #[test]
    fn decide_needs_quorum_and_validity() {
        let t = |locked, held, failed| Tally {
            locked,
            held,
            failed,
        };
        assert_eq!(
            decide(5, t(3, 0, 2), MS(1_000), MS(10), 0.0),
            QuorumDecision::Acquired { validity: MS(988) }
        );
        assert_eq!(
            decide(5, t(2, 0, 3), MS(1_000), MS(10), 0.0),
            QuorumDecision::QuorumNotReached { needed: 3 }
        );
        assert_eq!(
            decide(5, t(2, 3, 0), MS(1_000), MS(10), 0.0),
            QuorumDecision::QuorumNotReached { needed: 3 }
        );
        assert_eq!(
            decide(5, t(5, 0, 0), MS(50), MS(60), 0.01),
            QuorumDecision::ValidityExhausted
        );
        assert_eq!(
            decide(5, t(0, 0, 5), MS(1_000), MS(1), 0.0),
            QuorumDecision::AllNodesFailed
        );
        // Even N: 4 nodes need 3, two halves never both win.
        assert_eq!(
            decide(4, t(2, 2, 0), MS(1_000), MS(1), 0.0),
            QuorumDecision::QuorumNotReached { needed: 3 }
        );
        assert_eq!(
            decide(1, t(1, 0, 0), MS(100), MS(1), 0.0),
            QuorumDecision::Acquired { validity: MS(97) }
        );
        assert_eq!(
            decide(1, t(0, 1, 0), MS(100), MS(1), 0.0),
            QuorumDecision::QuorumNotReached { needed: 1 }
        );
    }
}
