//! Retry policy: how often, how far apart, and for how long an acquire is retried.

use std::future::Future;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use crate::lease::AcquireError;

/// How an acquire retries after a failed attempt.
///
/// An acquire makes at most `attempts` attempts (0 counts as 1). Between two attempts it waits
/// `delay` plus a uniform random extra in `[0, jitter]`. With `acquire_timeout`, it never
/// starts an attempt after the timeout has passed and never gives up before it while attempts
/// remain: it returns [`AcquireError::Timeout`] at the timeout plus at most the duration of the
/// attempt in flight.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RetryPolicy {
    /// Maximum number of attempts, the first included.
    pub attempts: u32,
    /// Fixed wait between attempts (ms in configs).
    #[serde(with = "crate::duration_ms")]
    pub delay: Duration,
    /// Upper bound of the random extra wait added to `delay` (ms in configs).
    #[serde(with = "crate::duration_ms")]
    pub jitter: Duration,
    /// Overall bound on one acquire, all attempts included (ms in configs; none = unbounded).
    #[serde(default, with = "optional_ms")]
    pub acquire_timeout: Option<Duration>,
}

impl Default for RetryPolicy {
    /// 3 attempts, 5 ms apart plus up to 5 ms of jitter, no overall timeout: the one default
    /// of `run`, `chaos` and the matrix (see docs/running.md, "One test, one runner, one set of defaults"). A client that finds the
    /// lock taken tries twice more over 10–20 ms: enough to ride out a holder of a few
    /// milliseconds (the common case for a lock guarding one write), short enough that a
    /// contended acquire fails within tens of ms instead of queueing; the jitter keeps
    /// retrying clients from colliding again in step (the Redis distributed-lock page's
    /// advice: retry after a random delay).
    fn default() -> Self {
        Self {
            attempts: 3,
            delay: Duration::from_millis(5),
            jitter: Duration::from_millis(5),
            acquire_timeout: None,
        }
    }
}

impl RetryPolicy {
    /// One attempt, no waiting.
    pub fn no_retry() -> Self {
        Self {
            attempts: 1,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            acquire_timeout: None,
        }
    }

    /// The wait before the next attempt: `delay + uniform[0, jitter]`.
    pub fn next_wait(&self) -> Duration {
        let jitter_us = self.jitter.as_micros().min(u64::MAX as u128) as u64;
        let extra = if jitter_us == 0 {
            0
        } else {
            rand::rng().random_range(0..=jitter_us)
        };
        self.delay + Duration::from_micros(extra)
    }

    /// Runs `attempt` under this policy. Non-retryable errors are returned at once; when the
    /// attempts run out the last error is returned; when the acquire timeout passes,
    /// [`AcquireError::Timeout`] wraps the last error.
    pub async fn run<T, F, Fut>(&self, mut attempt: F) -> Result<T, AcquireError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, AcquireError>>,
    {
        let started = Instant::now();
        let deadline = self.acquire_timeout.map(|t| started + t);
        let max_attempts = self.attempts.max(1);
        let mut made = 0u32;
        loop {
            made += 1;
            let err = match attempt().await {
                Ok(v) => return Ok(v),
                Err(e) if !e.is_retryable() => return Err(e),
                Err(e) => e,
            };
            if made >= max_attempts {
                return Err(err);
            }
            let next = Instant::now() + self.next_wait();
            if let Some(deadline) = deadline {
                tokio::time::sleep_until(next.min(deadline)).await;
                if Instant::now() >= deadline {
                    return Err(AcquireError::Timeout {
                        waited: started.elapsed(),
                        attempts: made,
                        last: Box::new(err),
                    });
                }
            } else {
                tokio::time::sleep_until(next).await;
            }
        }
    }
}

/// Serde adapter for `Option<Duration>` as optional integer milliseconds.
mod optional_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&(d.as_millis() as u64)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn held() -> AcquireError {
        AcquireError::Held {
            resource: "r".into(),
        }
    }

    fn policy(attempts: u32, delay_ms: u64, timeout_ms: Option<u64>) -> RetryPolicy {
        RetryPolicy {
            attempts,
            delay: Duration::from_millis(delay_ms),
            jitter: Duration::ZERO,
            acquire_timeout: timeout_ms.map(Duration::from_millis),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn attempts_run_out_and_return_the_last_error() {
        let calls = Cell::new(0);
        let start = Instant::now();
        let r: Result<(), _> = policy(4, 100, None)
            .run(|| {
                calls.set(calls.get() + 1);
                async { Err(held()) }
            })
            .await;
        assert!(matches!(r, Err(AcquireError::Held { .. })));
        assert_eq!(calls.get(), 4);
        assert_eq!(start.elapsed(), Duration::from_millis(300));
    }

    #[tokio::test(start_paused = true)]
    async fn timeout_is_never_early_and_at_most_one_delay_late() {
        let calls = Cell::new(0);
        let start = Instant::now();
        let r: Result<(), _> = policy(1_000, 300, Some(2_000))
            .run(|| {
                calls.set(calls.get() + 1);
                async {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    Err(held())
                }
            })
            .await;
        let waited = start.elapsed();
        match r {
            Err(AcquireError::Timeout { attempts, last, .. }) => {
                assert_eq!(attempts, calls.get());
                assert!(last.is_contention());
            }
            other => panic!("expected Timeout, got {other:?}"),
        }
        assert!(waited >= Duration::from_millis(2_000), "{waited:?}");
        assert!(waited <= Duration::from_millis(2_300), "{waited:?}");
        // Attempts at 0, 305, 610, …, 1830 ms: 7 of them.
        assert_eq!(calls.get(), 7);
    }

    #[tokio::test(start_paused = true)]
    async fn success_after_retries_returns_the_value() {
        let calls = Cell::new(0);
        let r = policy(5, 10, Some(1_000))
            .run(|| {
                calls.set(calls.get() + 1);
                let n = calls.get();
                async move {
                    if n < 3 {
                        Err(held())
                    } else {
                        Ok(n)
                    }
                }
            })
            .await;
        assert_eq!(r.unwrap(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn non_retryable_errors_stop_at_once() {
        let calls = Cell::new(0);
        let r: Result<(), _> = policy(5, 10, None)
            .run(|| {
                calls.set(calls.get() + 1);
                async {
                    Err(AcquireError::Lost {
                        resource: "r".into(),
                        reason: "gone".into(),
                    })
                }
            })
            .await;
        assert!(r.unwrap_err().is_lost());
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn jitter_stays_within_bounds() {
        let p = RetryPolicy {
            attempts: 2,
            delay: Duration::from_millis(10),
            jitter: Duration::from_millis(5),
            acquire_timeout: None,
        };
        for _ in 0..1_000 {
            let w = p.next_wait();
            assert!(
                w >= Duration::from_millis(10) && w <= Duration::from_millis(15),
                "{w:?}"
            );
        }
        assert_eq!(RetryPolicy::no_retry().next_wait(), Duration::ZERO);
    }
}
