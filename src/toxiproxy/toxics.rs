//! What each toxic does to one chunk of bytes, as pure functions, and the per-connection
//! state of the toxics on one link (toxicity draw, start time, byte counters).
//!
//! The pumps in [`super::link`] call these; keeping them free of I/O lets unit tests check
//! slice sizes, throttling plans and byte limits on hand-built input.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;
use tokio::time::Instant;

use super::model::{LatencyMs, Stream, ToxicInfo, ToxicKind};

/// A toxic as the engine keeps it: the API view plus a revision that changes on every update
/// (so links redraw toxicity and restart timers for updated toxics, like Toxiproxy).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ActiveToxic {
    pub info: ToxicInfo,
    pub revision: u64,
}

/// The toxics of one proxy in creation order (both streams). Published through a
/// `tokio::sync::watch` channel so live connections see changes at once.
pub(crate) type ToxicSet = Arc<Vec<ActiveToxic>>;

/// One piece of output: wait `wait`, then write `data`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Piece {
    pub wait: Duration,
    pub data: Vec<u8>,
}

/// Delay for one chunk: `latency` ± a uniform `jitter`, drawn in whole µs, never negative.
pub(crate) fn latency_delay(latency: LatencyMs, jitter: LatencyMs, rng: &mut StdRng) -> Duration {
    let (base, spread) = (latency.as_micros(), jitter.as_micros());
    if spread == 0 {
        return Duration::from_micros(base);
    }
    let offset = i128::from(rng.random_range(0..=spread.saturating_mul(2))) - i128::from(spread);
    Duration::from_micros((i128::from(base) + offset).clamp(0, i128::from(u64::MAX)) as u64)
}

/// Cuts `piece` into slices of `average` ± `variation` bytes (at least 1), each after a pause
/// of `delay_us` µs; the first slice keeps the piece's own wait.
pub(crate) fn slice(
    piece: Piece,
    average: u64,
    variation: u64,
    delay_us: u64,
    rng: &mut StdRng,
) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut rest = piece.data.as_slice();
    let mut wait = piece.wait;
    while !rest.is_empty() {
        let variation = variation.min(average.saturating_sub(1));
        let size = if variation == 0 {
            average
        } else {
            rng.random_range(average - variation..=average + variation)
        };
        let size = (size.max(1) as usize).min(rest.len());
        out.push(Piece {
            wait,
            data: rest[..size].to_vec(),
        });
        rest = &rest[size..];
        wait = Duration::from_micros(delay_us);
    }
    out
}

/// Spreads `piece` over time at `rate_kbs` KB/s (1 KB = 1000 bytes): pieces of at most
/// 100 ms worth of bytes, each preceded by the time its bytes take at that rate.
/// A rate of 0 means unlimited.
pub(crate) fn throttle(piece: Piece, rate_kbs: u64) -> Vec<Piece> {
    if rate_kbs == 0 {
        return vec![piece];
    }
    let bytes_per_tick = (rate_kbs * 100).max(1) as usize;
    let mut out = Vec::new();
    let mut first_wait = piece.wait;
    for part in piece.data.chunks(bytes_per_tick) {
        // bytes / (rate * 1000 B/s) seconds = bytes * 1000 / rate µs
        let cost = Duration::from_micros(part.len() as u64 * 1000 / rate_kbs);
        out.push(Piece {
            wait: first_wait + cost,
            data: part.to_vec(),
        });
        first_wait = Duration::ZERO;
    }
    out
}

/// Keeps at most `remaining` bytes of `pieces`; returns the pieces kept and the byte count kept.
pub(crate) fn truncate(pieces: Vec<Piece>, remaining: u64) -> (Vec<Piece>, u64) {
    let mut left = remaining;
    let mut kept = Vec::new();
    for mut p in pieces {
        if left == 0 {
            break;
        }
        if p.data.len() as u64 > left {
            p.data.truncate(left as usize);
        }
        left -= p.data.len() as u64;
        kept.push(p);
    }
    (kept, remaining - left)
}

/// A toxic that applies to this link (its stream matched and the toxicity draw hit).
#[derive(Debug, Clone)]
pub(crate) struct LinkToxic {
    pub name: String,
    pub kind: ToxicKind,
    /// When this link first saw this revision of the toxic (timers of timeout/reset_peer).
    pub since: Instant,
}

#[derive(Debug)]
struct DrawnToxic {
    revision: u64,
    affected: bool,
    since: Instant,
    passed: u64,
}

/// Toxic state of one direction of one connection.
#[derive(Debug)]
pub(crate) struct LinkState {
    stream: Stream,
    rng: StdRng,
    drawn: HashMap<String, DrawnToxic>,
}

impl LinkState {
    pub(crate) fn new(stream: Stream, rng: StdRng) -> LinkState {
        LinkState {
            stream,
            rng,
            drawn: HashMap::new(),
        }
    }

    pub(crate) fn rng(&mut self) -> &mut StdRng {
        &mut self.rng
    }

    /// The toxics of `set` that affect this link, in chain order. Toxicity is drawn once per
    /// link and toxic revision; the byte counter of `limit_data` survives updates.
    pub(crate) fn chain(&mut self, set: &ToxicSet) -> Vec<LinkToxic> {
        let now = Instant::now();
        self.drawn
            .retain(|name, _| set.iter().any(|t| &t.info.name == name));
        let mut chain = Vec::new();
        for t in set.iter().filter(|t| t.info.stream == self.stream) {
            let rng = &mut self.rng;
            let entry = self
                .drawn
                .entry(t.info.name.clone())
                .or_insert_with(|| DrawnToxic {
                    revision: t.revision,
                    affected: draw(t.info.toxicity, rng),
                    since: now,
                    passed: 0,
                });
            if entry.revision != t.revision {
                entry.revision = t.revision;
                entry.affected = draw(t.info.toxicity, rng);
                entry.since = now;
            }
            if entry.affected {
                chain.push(LinkToxic {
                    name: t.info.name.clone(),
                    kind: t.info.kind.clone(),
                    since: entry.since,
                });
            }
        }
        chain
    }

    /// Bytes already let through by the named `limit_data` toxic on this link.
    pub(crate) fn passed_mut(&mut self, name: &str) -> Option<&mut u64> {
        self.drawn.get_mut(name).map(|d| &mut d.passed)
    }
}

fn draw(toxicity: f32, rng: &mut StdRng) -> bool {
    if toxicity >= 1.0 {
        true
    } else if toxicity <= 0.0 {
        false
    } else {
        rng.random::<f32>() < toxicity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toxiproxy::model::Stream;
    use rand::SeedableRng;

    fn rng() -> StdRng {
        StdRng::seed_from_u64(7)
    }

    fn piece(n: usize) -> Piece {
        Piece {
            wait: Duration::ZERO,
            data: (0..n).map(|i| i as u8).collect(),
        }
    }

    #[test]
    fn slicer_keeps_bytes_and_bounds_sizes() {
        let out = slice(piece(1000), 10, 3, 50, &mut rng());
        let joined: Vec<u8> = out.iter().flat_map(|p| p.data.clone()).collect();
        assert_eq!(joined, piece(1000).data);
        assert!(out.len() >= 1000 / 13);
        for p in &out[..out.len() - 1] {
            assert!((7..=13).contains(&p.data.len()), "slice {}", p.data.len());
        }
        assert_eq!(out[0].wait, Duration::ZERO);
        assert!(out[1..].iter().all(|p| p.wait == Duration::from_micros(50)));
    }

    #[test]
    fn throttle_costs_bytes_over_rate() {
        // 1 KB/s: 250 bytes cost 250 ms, in 100-byte pieces.
        let out = throttle(piece(250), 1);
        assert_eq!(
            out.iter().map(|p| p.data.len()).collect::<Vec<_>>(),
            [100, 100, 50]
        );
        let total: Duration = out.iter().map(|p| p.wait).sum();
        assert_eq!(total, Duration::from_millis(250));
        assert_eq!(throttle(piece(10), 0), vec![piece(10)]);
    }

    #[test]
    fn truncate_stops_at_budget() {
        let (kept, n) = truncate(vec![piece(4), piece(4)], 6);
        assert_eq!(n, 6);
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[1].data.len(), 2);
        let (kept, n) = truncate(vec![piece(4)], 0);
        assert!(kept.is_empty());
        assert_eq!(n, 0);
    }

    #[test]
    fn latency_jitter_stays_in_range() {
        let mut r = rng();
        for _ in 0..200 {
            let d = latency_delay(50.into(), 10.into(), &mut r);
            assert!((40_000..=60_000).contains(&(d.as_micros() as u64)));
        }
        // Jitter larger than the latency saturates at 0 instead of going negative.
        let small: Vec<u128> = (0..400)
            .map(|_| latency_delay(5.into(), 10.into(), &mut r).as_micros())
            .collect();
        assert!(small.iter().all(|&d| d <= 15_000));
        assert!(small.contains(&0));
    }

    #[test]
    fn jitter_is_drawn_in_microseconds() {
        // 1 ms ± 0.5 ms: draws spread over the whole interval, not just 0.5/1/1.5 ms.
        let mut r = rng();
        let draws: Vec<u64> = (0..2000)
            .map(|_| {
                latency_delay(1.into(), LatencyMs::from_micros(500), &mut r).as_micros() as u64
            })
            .collect();
        assert!(draws.iter().all(|d| (500..=1500).contains(d)));
        let distinct: std::collections::BTreeSet<_> = draws.iter().collect();
        assert!(
            distinct.len() > 500,
            "only {} distinct delays",
            distinct.len()
        );
        let mean = draws.iter().sum::<u64>() as f64 / draws.len() as f64;
        assert!((950.0..=1050.0).contains(&mean), "mean {mean} µs");
        assert_eq!(
            latency_delay(LatencyMs::from_micros(500), LatencyMs::ZERO, &mut r),
            Duration::from_micros(500)
        );
    }

    #[test]
    fn chain_filters_stream_and_toxicity_and_redraws_on_update() {
        let mk = |name: &str, stream, toxicity, revision| ActiveToxic {
            info: ToxicInfo {
                name: name.into(),
                kind: ToxicKind::Latency {
                    latency: 1.into(),
                    jitter: LatencyMs::ZERO,
                },
                stream,
                toxicity,
            },
            revision,
        };
        let mut link = LinkState::new(Stream::Downstream, rng());
        let set: ToxicSet = Arc::new(vec![
            mk("a", Stream::Downstream, 1.0, 1),
            mk("b", Stream::Upstream, 1.0, 2),
            mk("c", Stream::Downstream, 0.0, 3),
        ]);
        let names: Vec<_> = link.chain(&set).into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["a"]);
        let set: ToxicSet = Arc::new(vec![
            mk("a", Stream::Downstream, 0.0, 4),
            mk("c", Stream::Downstream, 1.0, 5),
        ]);
        let names: Vec<_> = link.chain(&set).into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["c"]);
    }
}
