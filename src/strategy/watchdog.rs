//! Watchdog: renews a lease every TTL/3 while its holder runs, and reports when it was lost.
//!
//! For the PostgreSQL session locks (no TTL) a "renewal" is a check that the session that took
//! the lock is still open (`SELECT 1` on it, every TTL/3): a session that ended (reset, server
//! restarted, closed after a timeout) took the lock with it, and the lease is reported lost.
//!
//! This is the renewal pattern of Redisson-style locks: slow but alive work keeps its lock.
//! It does not help a paused process: while the `paused` signal is `true` the watchdog renews
//! nothing (the whole process is frozen, renewal thread included), so a pause longer than the
//! remaining validity loses the lease, and the first renewal after the pause reports it lost.
//!
//! `unchecked-extend` renews with a plain `PEXPIRE`, which "succeeds" on whatever key is there,
//! another client's included, and its renewal timer, like the libraries that shipped that bug,
//! is blind: it keeps firing until the holder releases, whatever the replies say. It never
//! concludes that the lease is lost (not from its own clock while renewals fail during a
//! partition, not from a missing key), so once the next holder has set its key, the next tick
//! extends that key and the old holder believes it holds the lock again.

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{LockClient, StrategyKind};
use crate::lease::Lease;

/// What a watchdog did, returned by [`Watchdog::stop`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchdogReport {
    /// Successful renewals.
    pub renewals: u32,
    /// Why the lease was lost during renewal, if it was (key gone or owned by another client,
    /// or validity ran out while renewals kept failing). Renewal stops when this is set.
    pub lost: Option<String>,
    /// The lease with the latest deadline it obtained.
    pub lease: Lease,
}

#[derive(Debug, Clone)]
struct State {
    lease: Lease,
    renewals: u32,
    lost: Option<String>,
}

/// A running renewal task for one lease. Stop it before releasing the lease; dropping it
/// also ends the task (at its next tick).
pub struct Watchdog {
    stop: watch::Sender<bool>,
    state: watch::Receiver<State>,
    task: JoinHandle<()>,
}

impl Watchdog {
    pub(crate) fn spawn(client: LockClient, lease: Lease, paused: watch::Receiver<bool>) -> Self {
        let (stop, stop_rx) = watch::channel(false);
        let (state_tx, state) = watch::channel(State {
            lease: lease.clone(),
            renewals: 0,
            lost: None,
        });
        let interval = (client.options().ttl / 3).max(Duration::from_millis(1));
        let task = tokio::spawn(renew(client, interval, paused, stop_rx, state_tx));
        Self { stop, state, task }
    }

    /// The lease with the latest validity deadline obtained so far.
    pub fn current(&self) -> Lease {
        self.state.borrow().lease.clone()
    }

    /// Why the lease was lost, once renewal found it lost.
    pub fn lost(&self) -> Option<String> {
        self.state.borrow().lost.clone()
    }

    /// Resolves with the reason as soon as renewal finds the lease lost, or with `None` when
    /// the watchdog ends without losing it. Independent of `self` (a task can await it while
    /// the holder works).
    pub fn when_lost(&self) -> impl std::future::Future<Output = Option<String>> + Send + 'static {
        let mut state = self.state.clone();
        async move {
            loop {
                if let Some(why) = state.borrow_and_update().lost.clone() {
                    return Some(why);
                }
                if state.changed().await.is_err() {
                    return state.borrow().lost.clone();
                }
            }
        }
    }

    /// Successful renewals so far.
    pub fn renewals(&self) -> u32 {
        self.state.borrow().renewals
    }

    /// Stops renewing and waits for the task to end (at most one renewal in flight, bounded by
    /// the per-node timeout). No renewal happens after this returns.
    pub async fn stop(self) -> WatchdogReport {
        let _ = self.stop.send(true);
        let joined = self.task.await;
        let state = self.state.borrow().clone();
        let lost = match joined {
            Ok(()) => state.lost,
            Err(e) => Some(format!("watchdog task ended abnormally: {e}")),
        };
        WatchdogReport {
            renewals: state.renewals,
            lost,
            lease: state.lease,
        }
    }
}

async fn renew(
    client: LockClient,
    interval: Duration,
    mut paused: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
    state: watch::Sender<State>,
) {
    let mut next = Instant::now() + interval;
    loop {
        tokio::select! {
            biased;
            _ = stop.changed() => return,
            _ = tokio::time::sleep_until(next) => {}
        }
        // Frozen while the holder is paused: no renewal until it resumes.
        while *paused.borrow_and_update() {
            tokio::select! {
                biased;
                _ = stop.changed() => return,
                changed = paused.changed() => {
                    if changed.is_err() {
                        break; // nobody can pause us any more
                    }
                }
            }
        }
        let current = state.borrow().lease.clone();
        match client.extend(&current).await {
            Ok(renewed) => {
                state.send_modify(|s| {
                    s.lease = renewed;
                    s.renewals += 1;
                });
                next = Instant::now() + interval;
            }
            Err(_) if client.kind() == StrategyKind::UncheckedExtend => {
                // Blind timer: whatever went wrong, try again at the next tick.
                next = Instant::now() + (interval / 3).max(Duration::from_millis(1));
            }
            Err(e) if e.is_lost() => {
                state.send_modify(|s| s.lost = Some(e.to_string()));
                return;
            }
            Err(e) => {
                if !current.is_valid() {
                    let why = format!("validity ran out while renewal kept failing: {e}");
                    state.send_modify(|s| s.lost = Some(why));
                    return;
                }
                // Transient failure: try again sooner, well before the deadline.
                next = Instant::now() + (interval / 3).max(Duration::from_millis(1));
            }
        }
    }
}
