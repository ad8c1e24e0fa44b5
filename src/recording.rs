//! How the recording threads (the history writer and the ledger) share the CPU with what they
//! record.
//!
//! Both threads are fed through channels and never stretch a critical section's timing, but on
//! a small machine they still compete for cores with the clients and the servers under test:
//! on 2 cores a waking ledger thread delays `redis-server` or the clients' event loop, and
//! with both of those waiting on each other the whole run slows by far more than the
//! recording's own CPU time (measured: 64 uncontended clients at 0.55–0.60 of the no-audit
//! rate with 25 % of the CPU idle). So a recording thread runs under Linux's `SCHED_IDLE`
//! policy while its backlog is small: it only gets CPU that nothing measured wants. When its
//! backlog passes a high mark it returns to the normal policy until it has caught up to a low
//! mark, so the backlog (and its memory) stays bounded and the run still ends with every
//! step recorded. The policy only changes the threads' scheduling, never the order or the
//! times of what they record (every event carries its client's time).
//!
//! Going back from `SCHED_IDLE` to the normal policy needs `CAP_SYS_NICE` (or an
//! `RLIMIT_NICE` of 20); [`RecordingPriority::new`] probes that once per process in a
//! throwaway thread and, where it is not allowed, leaves the threads at the normal policy
//! (lowering without being able to raise again could starve the recording).

use std::sync::OnceLock;

/// Switches the calling thread between `SCHED_IDLE` and `SCHED_OTHER` by its backlog, with
/// hysteresis. Create it on the recording thread itself (the policy is per thread).
#[derive(Debug)]
pub struct RecordingPriority {
    high: u64,
    low: u64,
    /// `None`: priority changes are not allowed here; the thread keeps the normal policy.
    idle: Option<bool>,
    /// How many times the backlog passed the high mark.
    raised: u64,
}

impl RecordingPriority {
    /// Puts the calling thread at `SCHED_IDLE` if it could be raised again later. `high` and
    /// `low` are backlog sizes (queued requests or events, `low < high`).
    pub fn new(high: u64, low: u64) -> Self {
        let idle = can_switch_back().then(|| set_idle(true));
        Self {
            high,
            low: low.min(high),
            idle,
            raised: 0,
        }
    }

    /// Called with the current backlog: back to the normal policy at `high` or more (or at
    /// once when `hurry`: somebody waits for the thread, e.g. an awaited step or the end of
    /// the run), to `SCHED_IDLE` again at `low` or less when nobody waits.
    pub fn adjust(&mut self, backlog: u64, hurry: bool) {
        match self.idle {
            Some(true) if backlog >= self.high || hurry => {
                set_idle(false);
                self.idle = Some(false);
                self.raised += 1;
            }
            Some(false) if backlog <= self.low && !hurry => self.idle = Some(set_idle(true)),
            _ => {}
        }
    }

    /// Whether the thread runs at `SCHED_IDLE` right now.
    pub fn is_idle(&self) -> bool {
        self.idle == Some(true)
    }

    /// How many times the backlog reached the high mark (the recording had to take CPU from
    /// the run to keep up).
    pub fn times_raised(&self) -> u64 {
        self.raised
    }
}

/// Sets the calling thread's policy; returns whether it is now `SCHED_IDLE`.
fn set_idle(idle: bool) -> bool {
    let policy = if idle {
        libc::SCHED_IDLE
    } else {
        libc::SCHED_OTHER
    };
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 = the calling thread; `param` is a valid sched_param for both policies.
    let ok = unsafe { libc::sched_setscheduler(0, policy, &param) } == 0;
    idle && ok
}

/// Whether a thread of this process can go from `SCHED_IDLE` back to `SCHED_OTHER` (probed
/// once, in a thread of its own, so no recording thread is ever left stuck at idle).
/// `LOCKBENCH_RECORDING_PRIORITY=normal` turns the lowering off.
fn can_switch_back() -> bool {
    static PROBE: OnceLock<bool> = OnceLock::new();
    *PROBE.get_or_init(|| {
        if std::env::var("LOCKBENCH_RECORDING_PRIORITY").as_deref() == Ok("normal") {
            return false;
        }
        std::thread::Builder::new()
            .name("priority-probe".into())
            .spawn(|| {
                if !set_idle(true) {
                    return false;
                }
                let param = libc::sched_param { sched_priority: 0 };
                // SAFETY: as in `set_idle`.
                unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) == 0 }
            })
            .ok()
            .and_then(|t| t.join().ok())
            .unwrap_or(false)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy_of_this_thread() -> i32 {
        // SAFETY: pid 0 = the calling thread.
        unsafe { libc::sched_getscheduler(0) }
    }

    #[test]
    fn the_thread_goes_idle_returns_at_the_high_mark_and_idles_again_at_the_low_mark() {
        std::thread::spawn(|| {
            let mut p = RecordingPriority::new(100, 10);
            if !can_switch_back() {
                // Not permitted here: the thread must stay at the normal policy throughout.
                assert!(!p.is_idle());
                p.adjust(1_000, true);
                assert_eq!(policy_of_this_thread(), libc::SCHED_OTHER);
                return;
            }
            assert!(p.is_idle());
            assert_eq!(policy_of_this_thread(), libc::SCHED_IDLE);
            p.adjust(99, false);
            assert!(p.is_idle(), "below the high mark it stays idle");
            p.adjust(100, false);
            assert!(!p.is_idle());
            assert_eq!(policy_of_this_thread(), libc::SCHED_OTHER);
            p.adjust(11, false);
            assert!(
                !p.is_idle(),
                "above the low mark it keeps the normal policy"
            );
            p.adjust(10, false);
            assert!(p.is_idle());
            assert_eq!(policy_of_this_thread(), libc::SCHED_IDLE);
            p.adjust(0, true);
            assert!(!p.is_idle(), "a waiter raises it whatever the backlog");
            p.adjust(0, true);
            assert!(!p.is_idle(), "and it stays raised while somebody waits");
            p.adjust(0, false);
            assert!(p.is_idle());
            assert_eq!(p.times_raised(), 2);
        })
        .join()
        .unwrap();
    }
}
