//! Bounded waits: every test that waits for a condition polls it here, with a limit and a
//! message naming what did not happen.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often a condition is polled.
pub const POLL: Duration = Duration::from_millis(20);

/// Polls `f` every [`POLL`] until it returns `Some`, and returns that value; panics with
/// "timed out waiting for {what}" once `limit` has passed.
pub fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what} ({limit:?})"
        );
        std::thread::sleep(POLL);
    }
}

/// The async form of [`wait_for`]: awaits `f()` every [`POLL`] (on the tokio clock) until it
/// gives `Some`; panics naming `what` once `limit` has passed.
pub async fn wait_for_async<T, F, Fut>(limit: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what} ({limit:?})"
        );
        tokio::time::sleep(POLL).await;
    }
}
