//! The harness's overhead per adapter request, µs, and where it goes: lockbench's round trip
//! minus the adapter's own time around the library call, split into legs when the adapter
//! reports `received_ns` on the machine's monotonic clock (`docs/adapter-protocol.md`, §3
//! "Timestamps").

use hdrhistogram::Histogram;

/// Overhead histograms (µs) of one adapter process, or merged over several.
#[derive(Debug, Clone)]
pub struct AdapterOverhead {
    /// Round trip minus `finished_ns − started_ns`, every answered request with both.
    pub total: Histogram<u64>,
    /// lockbench's own part: waiting to write the request, and from reading the reply to the
    /// waiting request's wake-up (replies with `received_ns` only, as the legs below).
    pub lockbench: Histogram<u64>,
    /// From lockbench's write to the adapter's read of the line (pipe + the adapter's wake-up).
    pub to_adapter: Histogram<u64>,
    /// Inside the adapter before the library call (`started_ns − received_ns`: parsing,
    /// handing the request to the thread that runs it).
    pub in_adapter: Histogram<u64>,
    /// From `finished_ns` to lockbench's read of the reply (encoding, pipe, lockbench's
    /// reader waking).
    pub from_adapter: Histogram<u64>,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("static histogram bounds are valid")
}

impl Default for AdapterOverhead {
    fn default() -> Self {
        Self {
            total: histogram(),
            lockbench: histogram(),
            to_adapter: histogram(),
            in_adapter: histogram(),
            from_adapter: histogram(),
        }
    }
}

/// One answered request's times, ns: lockbench's clock (`sent`, `read`: `CLOCK_MONOTONIC`) and
/// the adapter's (`received`, `started`, `finished`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RequestTimes {
    /// lockbench's whole round trip, ns (from before taking the stdin lock to the wake-up).
    pub round_trip: u64,
    /// lockbench wrote the request (just before the write).
    pub sent: u64,
    /// lockbench's reader read the reply line.
    pub read: u64,
    /// The adapter read the request (`received_ns`), if it said.
    pub received: Option<u64>,
    /// The adapter's `started_ns`.
    pub started: u64,
    /// The adapter's `finished_ns`.
    pub finished: u64,
}

impl AdapterOverhead {
    /// Records one request (µs, at least 1). The legs only when `received` is given and every
    /// leg is consistent (no negative leg, none longer than the round trip: else the clocks
    /// are not the same one).
    pub(crate) fn record(&mut self, t: RequestTimes) {
        let own = t.finished.saturating_sub(t.started);
        let us = |ns: u64| (ns / 1_000).max(1);
        let _ = self.total.record(us(t.round_trip.saturating_sub(own)));
        let Some(received) = t.received else {
            return;
        };
        let legs = (
            received.checked_sub(t.sent),
            t.started.checked_sub(received),
            t.read.checked_sub(t.finished),
        );
        if let (Some(to), Some(inside), Some(back)) = legs {
            let Some(rest) = t.round_trip.checked_sub(own + to + inside + back) else {
                return;
            };
            let _ = self.to_adapter.record(us(to));
            let _ = self.in_adapter.record(us(inside));
            let _ = self.from_adapter.record(us(back));
            let _ = self.lockbench.record(us(rest));
        }
    }

    /// Adds `other`'s samples to these.
    pub fn add(&mut self, other: &AdapterOverhead) {
        for (mine, theirs) in [
            (&mut self.total, &other.total),
            (&mut self.lockbench, &other.lockbench),
            (&mut self.to_adapter, &other.to_adapter),
            (&mut self.in_adapter, &other.in_adapter),
            (&mut self.from_adapter, &other.from_adapter),
        ] {
            // Same bounds on both sides: adding cannot fail.
            let _ = mine.add(theirs);
        }
    }
}

/// The machine's monotonic clock (`CLOCK_MONOTONIC`), ns: the clock adapters' `*_ns`
/// timestamps are on when they use their language's monotonic clock on Linux.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legs_add_up_to_the_round_trip_and_odd_clocks_leave_them_out() {
        let mut o = AdapterOverhead::default();
        // Sent at 1 000 µs, read by the adapter 30 µs later, started 20 µs after that, library
        // 500 µs, back 40 µs later, woken 10 µs after the read: round trip 600 µs.
        let t = RequestTimes {
            round_trip: 600_000,
            sent: 1_000_000,
            received: Some(1_030_000),
            started: 1_050_000,
            finished: 1_550_000,
            read: 1_590_000,
        };
        o.record(t);
        assert_eq!(o.total.max(), 100);
        assert_eq!(o.to_adapter.max(), 30);
        assert_eq!(o.in_adapter.max(), 20);
        assert_eq!(o.from_adapter.max(), 40);
        assert_eq!(o.lockbench.max(), 10);
        // Another clock: the adapter "received" before lockbench sent. Total only.
        o.record(RequestTimes {
            received: Some(10),
            ..t
        });
        o.record(RequestTimes {
            received: None,
            ..t
        });
        assert_eq!((o.total.len(), o.to_adapter.len()), (3, 1));
        let mut merged = AdapterOverhead::default();
        merged.add(&o);
        merged.add(&o);
        assert_eq!((merged.total.len(), merged.lockbench.len()), (6, 2));
    }
}
