//! Sub-millisecond waits for the toxics (latency, slicer, bandwidth).
//!
//! tokio's timer wheel ticks in whole milliseconds and rounds every deadline up, so a 1 ms
//! `sleep` takes about 2 ms: a latency toxic of 1 ms used to add ~2.3 ms. [`sleep_until`]
//! sleeps on tokio's timer for the coarse part of a wait (everything but the last
//! [`COARSE_SLACK`]), then hands the remainder to one process-wide timer thread that sleeps
//! on a condition variable with a nanosecond deadline (timer slack set to 1 ns on Linux) and
//! wakes the waiting task. Nothing busy-spins: the thread sleeps between deadlines.
//!
//! The thread is started on first use and lives as long as the process; when no wait is
//! pending it blocks without a timeout.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::AtomicWaker;
use tokio::time::Instant;

/// The part of a wait left to the precise timer thread: tokio's timer can wake up to ~2 ms
/// late (deadline rounded up to the next tick, then the park timeout rounded up again).
pub(crate) const COARSE_SLACK: Duration = Duration::from_millis(3);

/// Waits until `deadline` with µs precision (typically within 20–60 µs of it, more when
/// the machine is overloaded); returns at once if it has passed.
pub(crate) async fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline <= now {
        return;
    }
    if deadline - now > COARSE_SLACK {
        tokio::time::sleep_until(deadline - COARSE_SLACK).await;
    }
    PreciseSleep::new(deadline.into_std()).await;
}

/// Wake-up delay of recent precise waits, µs: how late a task resumed after its wait's
/// deadline (timer thread → wake → the task's runtime polls it), as a running median.
static WAKE_DELAY_US: AtomicU64 = AtomicU64::new(0);
/// The most [`sleep_until_on_median`] aims early, µs.
const WAKE_DELAY_CAP_US: u64 = 300;
/// Step of the running-median estimate, µs per wait.
const MEDIAN_STEP_US: u64 = 2;

/// Waits until `deadline` *at the median*: like [`sleep_until`], but aims the wake-up early by
/// the running median of how late precise waits have resumed (at most
/// [`WAKE_DELAY_CAP_US`]), so half of the waits resume a little before `deadline` and half a
/// little after. This is what a latency toxic promises: data delayed by L at p50 (without it a
/// 0.5 ms toxic added ~0.62 ms on a loaded 2-core machine). A lone wait may end up to the cap
/// early: use [`sleep_until`] where a deadline must never be early.
///
/// The estimate moves by [`MEDIAN_STEP_US`] per wait toward each observed delay (a
/// stochastic-approximation median), so single outliers on a busy machine do not move it.
pub(crate) async fn sleep_until_on_median(deadline: Instant) {
    let early = Duration::from_micros(WAKE_DELAY_US.load(Ordering::Relaxed));
    let target = deadline.checked_sub(early).unwrap_or(deadline);
    if target <= Instant::now() {
        return;
    }
    sleep_until(target).await;
    let late = Instant::now().saturating_duration_since(target).as_micros() as u64;
    let est = WAKE_DELAY_US.load(Ordering::Relaxed);
    let next = if late > est {
        (est + MEDIAN_STEP_US).min(WAKE_DELAY_CAP_US)
    } else {
        est.saturating_sub(MEDIAN_STEP_US)
    };
    WAKE_DELAY_US.store(next, Ordering::Relaxed);
}

/// [`sleep_until`] now + `wait`.
pub(crate) async fn sleep(wait: Duration) {
    if !wait.is_zero() {
        sleep_until(Instant::now() + wait).await;
    }
}

/// One pending wait, shared between its future and the timer thread.
#[derive(Debug, Default)]
struct Slot {
    fired: AtomicBool,
    waker: AtomicWaker,
}

struct Entry {
    deadline: std::time::Instant,
    seq: u64,
    slot: Arc<Slot>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.deadline, self.seq) == (other.deadline, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.deadline, self.seq).cmp(&(other.deadline, other.seq))
    }
}

#[derive(Default)]
struct Queue {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
}

/// The timer thread's queue and the condition variable it sleeps on.
struct TimerThread {
    queue: Mutex<Queue>,
    wake: Condvar,
}

fn timer_thread() -> &'static Arc<TimerThread> {
    static THREAD: OnceLock<Arc<TimerThread>> = OnceLock::new();
    THREAD.get_or_init(|| {
        let shared = Arc::new(TimerThread {
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
        });
        let worker = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("lockbench-toxic-timer".into())
            .spawn(move || worker.run());
        if let Err(e) = spawned {
            // Without the thread precise waits could never end: fail loudly instead.
            panic!("cannot start the toxic timer thread: {e}");
        }
        shared
    })
}

impl TimerThread {
    fn register(&self, deadline: std::time::Instant, slot: Arc<Slot>) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let earliest = q.heap.peek().is_none_or(|Reverse(e)| deadline < e.deadline);
        q.seq += 1;
        let seq = q.seq;
        q.heap.push(Reverse(Entry {
            deadline,
            seq,
            slot,
        }));
        drop(q);
        if earliest {
            self.wake.notify_one();
        }
    }

    fn run(&self) {
        set_fine_timer_slack();
        let mut due: Vec<Arc<Slot>> = Vec::new();
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let now = std::time::Instant::now();
            while let Some(Reverse(top)) = q.heap.peek() {
                if top.deadline > now {
                    break;
                }
                if let Some(Reverse(e)) = q.heap.pop() {
                    due.push(e.slot);
                }
            }
            if !due.is_empty() {
                drop(q);
                for slot in due.drain(..) {
                    slot.fired.store(true, Ordering::Release);
                    // A slot only the queue still holds belongs to a dropped future.
                    if Arc::strong_count(&slot) > 1 {
                        slot.waker.wake();
                    }
                }
                q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
                continue;
            }
            q = match q.heap.peek() {
                Some(Reverse(top)) => {
                    let wait = top.deadline.saturating_duration_since(now);
                    self.wake
                        .wait_timeout(q, wait)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
                None => self.wake.wait(q).unwrap_or_else(|p| p.into_inner()),
            };
        }
    }
}

/// Linux adds up to 50 µs of "timer slack" to every sleep of a normal thread; 1 ns keeps the
/// timer thread's wake-ups on time. Best effort: elsewhere (or on failure) the default stays.
fn set_fine_timer_slack() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and only affects this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// The precise final part of a wait.
struct PreciseSleep {
    deadline: std::time::Instant,
    slot: Option<Arc<Slot>>,
}

impl PreciseSleep {
    fn new(deadline: std::time::Instant) -> PreciseSleep {
        PreciseSleep {
            deadline,
            slot: None,
        }
    }
}

impl Future for PreciseSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match &self.slot {
            None => {
                if std::time::Instant::now() >= self.deadline {
                    return Poll::Ready(());
                }
                let slot = Arc::new(Slot::default());
                slot.waker.register(cx.waker());
                timer_thread().register(self.deadline, slot.clone());
                self.slot = Some(slot);
                Poll::Pending
            }
            Some(slot) => {
                slot.waker.register(cx.waker());
                if slot.fired.load(Ordering::Acquire) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Median lateness of `n` waits of `wait` each.
    async fn median_lateness(wait: Duration, n: usize) -> Duration {
        let mut late = Vec::with_capacity(n);
        for _ in 0..n {
            let deadline = Instant::now() + wait;
            sleep_until(deadline).await;
            late.push(Instant::now() - deadline);
        }
        late.sort();
        late[n / 2]
    }

    #[tokio::test]
    async fn waits_end_after_the_deadline_and_close_to_it() {
        for wait in [Duration::from_micros(500), Duration::from_millis(1)] {
            // Never early; retried for a busy machine (the bound is what matters, not speed).
            let mut best = Duration::MAX;
            for _ in 0..3 {
                best = best.min(median_lateness(wait, 50).await);
                if best < Duration::from_micros(300) {
                    break;
                }
            }
            assert!(
                best < Duration::from_micros(300),
                "{wait:?}: median {best:?} late"
            );
        }
        let start = Instant::now();
        sleep(Duration::from_millis(7)).await;
        assert!(start.elapsed() >= Duration::from_millis(7));
    }

    #[tokio::test]
    async fn median_waits_resume_at_the_deadline_at_p50() {
        // 400 waits of 1 ms: the estimate settles within the first ~100, then the median of
        // the last 200 resumptions is within 100 µs of the deadline (early or late).
        // Retried for a busy machine; the bound is what matters.
        let mut best = i64::MAX;
        for _ in 0..3 {
            let mut off = Vec::new();
            for i in 0..400 {
                let deadline = Instant::now() + Duration::from_millis(1);
                sleep_until_on_median(deadline).await;
                let now = Instant::now();
                if i >= 200 {
                    off.push(if now >= deadline {
                        (now - deadline).as_micros() as i64
                    } else {
                        -((deadline - now).as_micros() as i64)
                    });
                }
            }
            off.sort_unstable();
            best = best.min(off[off.len() / 2].abs());
            if best <= 100 {
                break;
            }
        }
        assert!(best <= 100, "median {best} µs off the deadline");
    }

    #[tokio::test]
    async fn a_dropped_wait_does_not_disturb_later_ones() {
        let mut dropped = Box::pin(sleep_until(Instant::now() + Duration::from_micros(300)));
        assert!(futures::poll!(dropped.as_mut()).is_pending());
        drop(dropped);
        let start = Instant::now();
        sleep(Duration::from_micros(800)).await;
        assert!(start.elapsed() >= Duration::from_micros(800));
    }
}
