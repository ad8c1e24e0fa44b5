//! Per-client fault hooks the nemesis pulls: pause (a GC-like stall that also freezes lease
//! renewal), crash while holding (the client stops without releasing) and absence (the client
//! starts no new acquire, e.g. it joins the run late).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// Controls for one client.
#[derive(Debug)]
pub struct ClientControl {
    paused: watch::Sender<bool>,
    absent: watch::Sender<bool>,
    crash_next_hold: AtomicBool,
    crashed: AtomicBool,
    extra_hold_us: AtomicU64,
    inside: AtomicBool,
}

impl ClientControl {
    fn new() -> Self {
        Self {
            paused: watch::channel(false).0,
            absent: watch::channel(false).0,
            crash_next_hold: AtomicBool::new(false),
            crashed: AtomicBool::new(false),
            extra_hold_us: AtomicU64::new(0),
            inside: AtomicBool::new(false),
        }
    }

    /// A receiver that reads `true` while the client is paused. The watchdog gets one too, so a
    /// paused client stops renewing its lease, as a stop-the-world GC would.
    pub fn paused_receiver(&self) -> watch::Receiver<bool> {
        self.paused.subscribe()
    }

    /// A receiver that reads `true` while the client is absent (starts no new acquire).
    pub fn absent_receiver(&self) -> watch::Receiver<bool> {
        self.absent.subscribe()
    }

    /// Marks the client inside a critical section (`true` from the start of the section until
    /// it has passed the point where a pause would stall it), for the `holder` target.
    pub fn set_inside(&self, inside: bool) {
        self.inside.store(inside, Ordering::Release);
    }

    /// Whether the client is paused now.
    pub fn is_paused(&self) -> bool {
        *self.paused.borrow()
    }

    /// Extra time added to every critical section (slow work); renewal keeps running.
    pub fn extra_hold(&self) -> Duration {
        Duration::from_micros(self.extra_hold_us.load(Ordering::Acquire))
    }

    /// Has this client crashed (it will take no more locks)?
    pub fn has_crashed(&self) -> bool {
        self.crashed.load(Ordering::Acquire)
    }

    /// Called by the client when it holds a lease: returns `true` (and marks the client
    /// crashed) if a crash was requested, in which case the client must stop without releasing.
    pub fn take_crash(&self) -> bool {
        if self.crash_next_hold.swap(false, Ordering::AcqRel) {
            self.crashed.store(true, Ordering::Release);
            true
        } else {
            false
        }
    }
}

/// The controls of every client of a run, indexed by client id.
#[derive(Debug, Clone)]
pub struct ClientControls(Arc<Vec<ClientControl>>);

impl ClientControls {
    /// Controls for `n` clients, none paused or crashing.
    pub fn new(n: usize) -> Self {
        Self(Arc::new((0..n).map(|_| ClientControl::new()).collect()))
    }

    /// Number of clients.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are no clients.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The control of client `i`; `None` when out of range.
    pub fn get(&self, i: usize) -> Option<&ClientControl> {
        self.0.get(i)
    }

    /// The ids of the clients inside a critical section now (see [`ClientControl::set_inside`]).
    pub fn inside(&self) -> Vec<u32> {
        self.0
            .iter()
            .enumerate()
            .filter(|(_, c)| c.inside.load(Ordering::Acquire))
            .map(|(i, _)| i as u32)
            .collect()
    }

    /// Pauses (`true`) or resumes (`false`) client `i`. Out-of-range ids are ignored.
    pub fn set_paused(&self, i: usize, paused: bool) {
        if let Some(c) = self.0.get(i) {
            c.paused.send_replace(paused);
        }
    }

    /// Makes client `i` absent (`true`: it starts no new acquire until set back to `false`).
    /// An acquire under way and a lease held are not affected. Out-of-range ids are ignored.
    pub fn set_absent(&self, i: usize, absent: bool) {
        if let Some(c) = self.0.get(i) {
            c.absent.send_replace(absent);
        }
    }

    /// Makes client `i`'s critical sections `extra` longer (slow work, `Duration::ZERO` heals).
    /// Unlike a pause, the client's lease renewal keeps running.
    pub fn set_extra_hold(&self, i: usize, extra: Duration) {
        if let Some(c) = self.0.get(i) {
            c.extra_hold_us
                .store(extra.as_micros() as u64, Ordering::Release);
        }
    }

    /// Asks client `i` to crash the next time it holds a lease (or now, if it holds one); a
    /// `setnx-expire` client crashes inside its next acquire instead, between `SETNX` and
    /// `PEXPIRE` (see `LockClient::acquire_or_crash`).
    pub fn crash_while_holding(&self, i: usize) {
        if let Some(c) = self.0.get(i) {
            c.crash_next_hold.store(true, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_is_seen_by_receivers_and_crash_fires_once() {
        let c = ClientControls::new(2);
        let rx = c.get(1).unwrap().paused_receiver();
        c.set_paused(1, true);
        assert!(*rx.borrow());
        assert!(!c.get(0).unwrap().is_paused());
        c.crash_while_holding(0);
        assert!(c.get(0).unwrap().take_crash());
        assert!(!c.get(0).unwrap().take_crash());
        assert!(c.get(0).unwrap().has_crashed());
        c.set_paused(9, true); // ignored, no panic
    }

    #[test]
    fn absence_is_seen_by_receivers_and_healed() {
        let c = ClientControls::new(2);
        let rx = c.get(0).unwrap().absent_receiver();
        c.set_absent(0, true);
        assert!(*rx.borrow());
        assert!(!*c.get(1).unwrap().absent_receiver().borrow());
        c.set_absent(0, false);
        assert!(!*rx.borrow());
        c.set_absent(5, true); // ignored
    }

    #[test]
    fn inside_lists_the_clients_in_a_section() {
        let c = ClientControls::new(3);
        assert!(c.inside().is_empty());
        c.get(2).unwrap().set_inside(true);
        c.get(0).unwrap().set_inside(true);
        assert_eq!(c.inside(), vec![0, 2]);
        c.get(0).unwrap().set_inside(false);
        assert_eq!(c.inside(), vec![2]);
    }

    #[test]
    fn slow_work_sets_extra_hold_without_pausing() {
        let c = ClientControls::new(2);
        c.set_extra_hold(1, Duration::from_millis(700));
        assert_eq!(c.get(1).unwrap().extra_hold(), Duration::from_millis(700));
        assert!(!c.get(1).unwrap().is_paused());
        assert_eq!(c.get(0).unwrap().extra_hold(), Duration::ZERO);
        c.set_extra_hold(1, Duration::ZERO);
        assert_eq!(c.get(1).unwrap().extra_hold(), Duration::ZERO);
        c.set_extra_hold(7, Duration::from_secs(1)); // ignored
    }
}
