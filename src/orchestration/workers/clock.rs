//! Each worker's clock against the coordinator's, from round trips (as NTP does): a probe sent
//! at `t0` on the worker's clock, stamped `tc` by the coordinator, back at `t1`. The
//! coordinator stamped somewhere between `t0` and `t1` (worker time), so its offset (coordinator
//! − worker) is `tc − (t0 + t1) / 2` give or take half the round trip. The probe with the
//! shortest round trip gives the tightest estimate.
//!
//! A worker starts its run clock at the coordinator's time zero converted with the estimate made
//! at registration. Probes during the run bound how far that estimate is from the truth then:
//! the true offset at probe `i` lies within `offset_i ± rtt_i / 2`, so the error of the
//! registration estimate is at most `e_i = |offset_i − offset_used| + rtt_i / 2`. Every such
//! `e_i` is a true bound at its moment, and a probe that waited in a busy scheduler only gives a
//! loose one; so the probes are taken in windows of [`BOUND_WINDOW_US`] (by send time), each
//! window's tightest `e_i` is its bound, and between probes the error can change by at most the
//! clocks' drift: [`DRIFT_PPM`] of the longest stretch without a probe (at least one window).
//! The worker's **clock bound** is the largest window bound (and at least the registration's own
//! uncertainty) plus that drift allowance; the merged history widens that worker's real-time
//! windows by it.

use serde::{Deserialize, Serialize};

/// One round trip to `GET /clock`, µs since the epoch: `sent_us` and `received_us` on the
/// worker's clock, `coordinator_us` on the coordinator's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockProbe {
    /// Worker clock when the request left.
    pub sent_us: u64,
    /// Coordinator clock when it answered.
    pub coordinator_us: u64,
    /// Worker clock when the answer arrived.
    pub received_us: u64,
}

/// An estimate of (coordinator clock − worker clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockEstimate {
    /// Coordinator − worker, µs.
    pub offset_us: i64,
    /// Half the round trip, µs: the true offset is within `offset_us ± uncertainty_us`.
    pub uncertainty_us: u64,
}

impl ClockProbe {
    /// The estimate of this probe; `None` when the answer "arrived" before the request left
    /// (the worker's clock stepped back meanwhile).
    pub fn estimate(&self) -> Option<ClockEstimate> {
        let rtt = self.received_us.checked_sub(self.sent_us)?;
        let mid = self.sent_us as i128 + (rtt / 2) as i128;
        Some(ClockEstimate {
            offset_us: (self.coordinator_us as i128 - mid) as i64,
            // Rounded up: the bound is never smaller than half the round trip.
            uncertainty_us: rtt.div_ceil(2),
        })
    }
}

/// The estimate of the probe with the shortest round trip; `None` without a usable probe.
pub fn best_estimate(probes: &[ClockProbe]) -> Option<ClockEstimate> {
    probes
        .iter()
        .filter_map(ClockProbe::estimate)
        .min_by_key(|e| e.uncertainty_us)
}

/// Probes are grouped in windows this long (worker clock, µs) for the clock bound.
pub const BOUND_WINDOW_US: u64 = 2_000_000;

/// How fast two clocks may drift apart, parts per million (quartz clocks without NTP: tens of
/// ppm).
pub const DRIFT_PPM: u64 = 50;

/// The clock bound of a worker whose run clock was set with `used`, given every probe since
/// (see the module docs), µs.
pub fn clock_bound_us(used: ClockEstimate, probes: &[ClockProbe]) -> u64 {
    let mut windows: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
    let mut sent: Vec<u64> = Vec::new();
    for p in probes {
        let Some(e) = p.estimate() else { continue };
        let bound = e.offset_us.abs_diff(used.offset_us) + e.uncertainty_us;
        let w = windows
            .entry(p.sent_us / BOUND_WINDOW_US)
            .or_insert(u64::MAX);
        *w = (*w).min(bound);
        sent.push(p.sent_us);
    }
    sent.sort_unstable();
    let longest_gap = sent
        .windows(2)
        .map(|w| w[1] - w[0])
        .fold(BOUND_WINDOW_US, u64::max);
    let allowance = longest_gap * DRIFT_PPM / 1_000_000;
    windows.into_values().fold(used.uncertainty_us, u64::max) + allowance
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(sent_us: u64, coordinator_us: u64, received_us: u64) -> ClockProbe {
        ClockProbe {
            sent_us,
            coordinator_us,
            received_us,
        }
    }

    #[test]
    fn a_probe_gives_the_midpoint_offset_and_half_the_round_trip() {
        // Worker clock 1,000 µs behind: sent at 10,000, stamped 11,050 (= 10,050 worker time),
        // back at 10,100.
        let e = probe(10_000, 11_050, 10_100).estimate().unwrap();
        assert_eq!(e.offset_us, 1_000);
        assert_eq!(e.uncertainty_us, 50);
        // A worker ahead of the coordinator: a negative offset.
        let e = probe(50_000, 47_010, 50_020).estimate().unwrap();
        assert_eq!(e.offset_us, -3_000);
        assert_eq!(e.uncertainty_us, 10);
        // An odd round trip rounds the bound up.
        assert_eq!(probe(0, 0, 3).estimate().unwrap().uncertainty_us, 2);
        // Clock stepped back between send and receive: unusable.
        assert_eq!(probe(100, 5, 90).estimate(), None);
    }

    #[test]
    fn the_shortest_round_trip_wins() {
        let probes = [
            probe(0, 1_500, 1_000),     // rtt 1000: offset 1000 ± 500
            probe(2_000, 3_020, 2_040), // rtt 40: offset 1000 ± 20
            probe(5, 0, 1),             // unusable
            probe(4_000, 5_100, 4_200), // rtt 200: offset 1000 ± 100
        ];
        assert_eq!(
            best_estimate(&probes),
            Some(ClockEstimate {
                offset_us: 1_000,
                uncertainty_us: 20
            })
        );
        assert_eq!(best_estimate(&[]), None);
    }

    #[test]
    fn the_bound_covers_drift_seen_by_later_probes() {
        let used = ClockEstimate {
            offset_us: 1_000,
            uncertainty_us: 20,
        };
        // One window's drift allowance: 2 s at 50 ppm.
        let allowance = 100;
        // No later probe: the registration's own uncertainty.
        assert_eq!(clock_bound_us(used, &[]), 20 + allowance);
        // Probes that agree within their own uncertainty keep the bound small.
        assert_eq!(clock_bound_us(used, &[probe(0, 1_001, 2)]), 20 + allowance);
        // Window 0: 990 ± 5 (error ≤ 15). Window 2 (5 s later): 1,300 ± 30 (drifted: ≤ 330) and
        // a probe stuck 10 ms in a busy scheduler (3,900 ± 5,000: ≤ 7,900, looser, not used).
        let later = [
            probe(100, 1_095, 110),
            probe(5_000_000, 5_001_330, 5_000_060),
            probe(5_000_100, 5_009_000, 5_010_100),
        ];
        // The longest stretch without a probe is 4,999,900 µs: 249 µs of drift at 50 ppm.
        assert_eq!(clock_bound_us(used, &later), 330 + 249);
        // A loose probe beside a tight one in its window is not used ...
        assert_eq!(
            clock_bound_us(used, &[probe(100, 1_095, 110), probe(100, 10_000, 20_100)]),
            20 + allowance
        );
        // ... but alone in its window it is that window's bound: -50 ± 10,050 (≤ 11,100), and
        // 2,499,900 µs without a probe before it (124 µs of drift).
        assert_eq!(
            clock_bound_us(
                used,
                &[
                    probe(100, 1_095, 110),
                    probe(2_500_000, 2_510_000, 2_520_100)
                ]
            ),
            11_100 + 124
        );
    }
}
