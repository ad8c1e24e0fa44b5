//! The workload: how many clients, how much contention, how long each holds, how fast, for how long.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::duration_ms::DurationError;

/// Errors parsing workload values from the CLI or a scenario file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// A duration that humantime cannot read (`250ms`, `2s`, `1m` are fine).
    #[error("bad duration {input:?}: {reason} (examples: 250ms, 2s, 1m30s)")]
    BadDuration {
        /// What was given.
        input: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A duration longer than [`crate::duration_ms::LONGEST`].
    #[error(
        "duration {input:?} is longer than 24h, the longest duration lockbench takes (run \
         time, hold, TTL, timeouts and fault times stay where no time arithmetic overflows)"
    )]
    TooLong {
        /// What was given.
        input: String,
    },
    /// A hold range whose lower end exceeds the upper end.
    #[error("bad hold range {0:?}: write MIN..MAX with MIN <= MAX, e.g. 5ms..20ms")]
    BadRange(String),
    /// A value outside its allowed range: `--<setting>` and what follows it (`" must be at
    /// least 1"`), so a caller can name the setting in its own words.
    #[error("--{setting}{rest}")]
    Invalid {
        /// The flag's stem (`clients`, `adapter-processes`).
        setting: &'static str,
        /// What follows its name.
        rest: String,
    },
}

/// Parses a human input duration (`250ms`, `2s`, `1m30s`, `0`) with
/// [`crate::duration_ms::parse`], at most [`crate::duration_ms::LONGEST`] (24 h). Every flag,
/// scenario key and matrix setting that takes a duration reads it here.
///
/// # Errors
/// [`WorkloadError::BadDuration`] quoting the input; [`WorkloadError::TooLong`] above 24 h.
pub fn parse_duration(input: &str) -> Result<Duration, WorkloadError> {
    let d = crate::duration_ms::parse(input).map_err(|e| match e {
        DurationError::Unreadable { input, reason } => WorkloadError::BadDuration { input, reason },
    })?;
    if d > crate::duration_ms::LONGEST {
        return Err(WorkloadError::TooLong {
            input: input.trim().to_string(),
        });
    }
    Ok(d)
}

/// How long a client stays inside the critical section once it holds the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HoldTime {
    /// Always the same time.
    Fixed(#[serde(with = "crate::duration_ms")] Duration),
    /// Uniformly random in `[min, max]`, drawn from the client's seeded RNG.
    Range {
        /// Lower bound.
        #[serde(with = "crate::duration_ms")]
        min: Duration,
        /// Upper bound.
        #[serde(with = "crate::duration_ms")]
        max: Duration,
    },
}

impl HoldTime {
    /// Draws one hold time.
    pub fn sample(&self, rng: &mut impl Rng) -> Duration {
        match *self {
            HoldTime::Fixed(d) => d,
            HoldTime::Range { min, max } => {
                let lo = min.as_micros() as u64;
                let hi = max.as_micros() as u64;
                Duration::from_micros(rng.random_range(lo..=hi))
            }
        }
    }

    /// The longest hold this setting can produce.
    pub fn max(&self) -> Duration {
        match *self {
            HoldTime::Fixed(d) => d,
            HoldTime::Range { max, .. } => max,
        }
    }
}

impl FromStr for HoldTime {
    type Err = WorkloadError;

    /// `10ms` (fixed) or `5ms..20ms` (uniform range).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once("..") {
            None => Ok(HoldTime::Fixed(parse_duration(s)?)),
            Some((a, b)) => {
                let min = parse_duration(a)?;
                let max = parse_duration(b)?;
                if min > max {
                    return Err(WorkloadError::BadRange(s.to_string()));
                }
                Ok(HoldTime::Range { min, max })
            }
        }
    }
}

impl fmt::Display for HoldTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HoldTime::Fixed(d) => write!(f, "{}", humantime::format_duration(*d)),
            HoldTime::Range { min, max } => write!(
                f,
                "{}..{}",
                humantime::format_duration(*min),
                humantime::format_duration(*max)
            ),
        }
    }
}

/// When a strategy's run stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopCondition {
    /// After this much wall time.
    Duration(#[serde(with = "crate::duration_ms")] Duration),
    /// After this many acquire attempts across all clients.
    Ops(u64),
}

/// How clients pace their attempts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pacing {
    /// Each client starts its next attempt as soon as the previous cycle ends.
    Closed,
    /// Attempts are scheduled at a fixed total rate (ops/s) spread over the clients; latency is
    /// measured from each attempt's intended start, so a stall is charged to every attempt it
    /// delayed (no coordinated omission, as in wrk2).
    Open {
        /// Target rate across all clients, ops/s.
        rate_per_s: f64,
    },
}

pub use crate::work::WorkKind;

/// A complete workload description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// Concurrent clients (tokio tasks), each with its own connection per node by default.
    pub clients: u32,
    /// Distinct lock resources; fewer resources means more contention.
    pub resources: u32,
    /// Time spent inside the critical section.
    pub hold: HoldTime,
    /// When to stop.
    pub stop: StopCondition,
    /// Closed or open loop.
    pub pacing: Pacing,
    /// Seed for resource choice and hold times; a run is repeatable up to timing.
    pub seed: u64,
    /// Share one multiplexed connection per node among all clients instead of one each.
    pub shared_connection: bool,
    /// Most acquire operations in flight at once across all clients (0 = no limit; default
    /// [`Workload::DEFAULT_IN_FLIGHT`]). One process on a few cores cannot act like thousands
    /// of independent machines: past a few hundred requests in flight, every request (and
    /// every holder's next step) queues behind the others inside the harness, and per-node
    /// timeouts and leases run out because of the harness. Clients beyond the window wait
    /// for a slot before they start acquiring; that wait counts in their acquire latency
    /// (measured from when they wanted to start). Holders never wait for a slot.
    #[serde(default = "Workload::default_in_flight")]
    pub in_flight: u32,
    /// `adapter:*` strategies: how many adapter processes serve the run's clients
    /// (`--adapter-processes`). `None` (default): one process per client. `Some(n)`: `n`
    /// processes (at most one per client), client `i` served by process `i mod n`, each
    /// process running its logical clients concurrently. Ignored by built-in strategies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter_processes: Option<u32>,
    /// What each critical section protects (default [`WorkKind::Row`]).
    #[serde(default)]
    pub work: WorkKind,
    /// `external` work: every call carries an idempotency key derived from the job (its
    /// resource and the counter it read), so the sink applies a job once and answers a repeat
    /// with the first charge (`--idempotency-key`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idempotency_key: bool,
}

impl Workload {
    /// The default acquire window: enough to keep one local node busy, small enough that a
    /// request's queueing inside the harness stays in the low milliseconds.
    pub const DEFAULT_IN_FLIGHT: u32 = 256;

    fn default_in_flight() -> u32 {
        Self::DEFAULT_IN_FLIGHT
    }

    /// Checks ranges.
    ///
    /// # Errors
    /// [`WorkloadError::Invalid`] naming the bad field.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let invalid = |setting, rest: &str| WorkloadError::Invalid {
            setting,
            rest: rest.to_string(),
        };
        if self.clients == 0 {
            return Err(invalid("clients", " must be at least 1"));
        }
        if self.adapter_processes == Some(0) {
            return Err(invalid("adapter-processes", " must be at least 1"));
        }
        if self.adapter_processes.is_some() && self.shared_connection {
            return Err(invalid(
                "adapter-processes",
                " and --shared-connection: a shared connection is one adapter process for \
                 every client; give one of them",
            ));
        }
        if self.resources == 0 {
            return Err(invalid("resources", " must be at least 1"));
        }
        if self.idempotency_key && !self.work.calls_sink() {
            return Err(invalid(
                "idempotency-key",
                &format!(
                    " needs external or job work: a key is carried by the call to a side \
                     effect, and {} work is protected by the fencing token its row checks (set \
                     the work to external or job, or drop the key)",
                    self.work
                ),
            ));
        }
        match self.stop {
            StopCondition::Duration(d) if d.is_zero() => {
                return Err(invalid("duration", " must be above 0"))
            }
            StopCondition::Ops(0) => return Err(invalid("ops", " must be at least 1")),
            _ => {}
        }
        if let Pacing::Open { rate_per_s } = self.pacing {
            if !(rate_per_s.is_finite() && rate_per_s > 0.0) {
                return Err(invalid("rate", " must be a positive number of ops/s"));
            }
            // Each client starts one attempt every clients/rate seconds.
            let slowest = f64::from(self.clients) / crate::duration_ms::LONGEST.as_secs_f64();
            if rate_per_s < slowest {
                return Err(invalid(
                    "rate",
                    &format!(
                        " {rate_per_s:e} ops/s leaves more than 24h between one client's \
                         attempts with {} clients: use at least {:.6} ops/s",
                        self.clients,
                        (slowest * 1e6).ceil() / 1e6
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Name of resource number `i` (`r0`, `r1`, …).
    pub fn resource_name(i: u32) -> String {
        format!("r{i}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn durations_past_a_day_are_refused_at_parse() {
        assert_eq!(parse_duration("24h").unwrap(), crate::duration_ms::LONGEST);
        let e = parse_duration("18446744073709551615s").unwrap_err();
        assert!(matches!(e, WorkloadError::TooLong { .. }), "{e:?}");
        assert!(e.to_string().contains("longer than 24h"), "{e}");
        let e = "1ms..25h".parse::<HoldTime>().unwrap_err();
        assert!(matches!(e, WorkloadError::TooLong { .. }), "{e:?}");
    }

    #[test]
    fn parses_fixed_and_range_hold() {
        assert_eq!(
            "10ms".parse::<HoldTime>().unwrap(),
            HoldTime::Fixed(Duration::from_millis(10))
        );
        assert_eq!(
            "5ms..20ms".parse::<HoldTime>().unwrap(),
            HoldTime::Range {
                min: Duration::from_millis(5),
                max: Duration::from_millis(20)
            }
        );
        assert!(matches!(
            "20ms..5ms".parse::<HoldTime>(),
            Err(WorkloadError::BadRange(_))
        ));
        let err = "10 parsecs".parse::<HoldTime>().unwrap_err().to_string();
        assert!(err.contains("10 parsecs") && err.contains("250ms"), "{err}");
    }

    #[test]
    fn range_samples_stay_in_bounds() {
        let h: HoldTime = "5ms..6ms".parse().unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..1000 {
            let d = h.sample(&mut rng);
            assert!(d >= Duration::from_millis(5) && d <= Duration::from_millis(6));
        }
    }

    #[test]
    fn validation_names_the_field() {
        let w = Workload {
            clients: 0,
            resources: 1,
            hold: HoldTime::Fixed(Duration::ZERO),
            stop: StopCondition::Ops(1),
            pacing: Pacing::Closed,
            seed: 1,
            shared_connection: false,
            in_flight: Workload::DEFAULT_IN_FLIGHT,
            adapter_processes: None,
            work: WorkKind::Row,
            idempotency_key: false,
        };
        assert!(w.validate().unwrap_err().to_string().contains("--clients"));
        let w = Workload {
            clients: 4,
            adapter_processes: Some(0),
            ..w
        };
        assert!(w
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--adapter-processes"));
        let w = Workload {
            adapter_processes: Some(2),
            shared_connection: true,
            ..w
        };
        assert!(w
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--shared-connection"));
        let w = Workload {
            shared_connection: false,
            ..w
        };
        assert!(w.validate().is_ok());
        let keyed_row = Workload {
            idempotency_key: true,
            ..w.clone()
        };
        let e = keyed_row.validate().unwrap_err().to_string();
        assert!(
            e.starts_with("--idempotency-key needs external or job work"),
            "{e}"
        );
        let keyed_external = Workload {
            work: WorkKind::External,
            ..keyed_row
        };
        assert!(keyed_external.validate().is_ok());
        crate::variant_names::assert_names_match_serde::<WorkKind>();
    }
}
