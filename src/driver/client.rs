//! One client's loop: pick a resource, acquire, run the critical section, release.
//!
//! The critical section is where faults bite: a pause (GC-like stall) happens after the hold
//! and before the write, so a paused holder writes with whatever token it had when it stalled.

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

use super::control::ClientControls;
use super::metrics::{Sample, SampleKind, SampleSender};
use super::workload::{Pacing, Workload};
use super::StopState;
use crate::lease::Lease;
use crate::strategy::LockClient;

/// What the critical section writes to besides the metrics (history and ledger).
#[derive(Clone, Default)]
pub struct SectionHooks {}

/// One client task's state.
pub struct Client {
    /// Client id, `0..clients`.
    pub id: u32,
    /// Its connections and strategy.
    pub lock: LockClient,
    /// The workload.
    pub workload: Workload,
    /// Nemesis hooks.
    pub controls: ClientControls,
    /// History and ledger.
    pub hooks: SectionHooks,
    /// Where samples go.
    pub samples: SampleSender,
    /// Shared stop state.
    pub stop: Arc<StopState>,
    /// The strategy's start instant (timeline origin).
    pub start: Instant,
}

impl Client {
    fn send(&self, kind: SampleKind, began: Instant) {
        let now = Instant::now();
        let _ = self.samples.send(Sample {
            kind,
            latency_us: now.saturating_duration_since(began).as_micros() as u64,
            at: now.saturating_duration_since(self.start),
        });
    }

    /// Runs until the stop state says so, the client crashes, or the task is aborted.
    pub async fn run(self) {
        let mut rng = StdRng::seed_from_u64(
            self.workload
                .seed
                .wrapping_add((self.id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        );
        let control = self.controls.get(self.id as usize);
        // Open loop: client i owns every clients-th slot of the global schedule.
        let interval = match self.workload.pacing {
            Pacing::Open { rate_per_s } => Some(Duration::from_secs_f64(
                self.workload.clients as f64 / rate_per_s,
            )),
            Pacing::Closed => None,
        };
        let mut next_intended = interval
            .map(|iv| self.start + iv.mul_f64(self.id as f64 / self.workload.clients as f64));
        while self.stop.claim_attempt() {
            if control.is_some_and(|c| c.has_crashed()) {
                return;
            }
            let began = match (next_intended, interval) {
                (Some(at), Some(iv)) => {
                    tokio::time::sleep_until(at).await;
                    next_intended = Some(at + iv);
                    at
                }
                _ => Instant::now(),
            };
            let resource = Workload::resource_name(rng.random_range(0..self.workload.resources));
            match self.lock.acquire(&resource).await {
                Ok(lease) => {
                    self.send(SampleKind::AcquireOk, began);
                    let acquired = Instant::now();
                    if !self.critical_section(&lease, &mut rng).await {
                        return; // crashed while holding: no release
                    }
                    let rel = Instant::now();
                    match self.lock.release(&lease).await {
                        Ok(_) => self.send(SampleKind::Release, rel),
                        Err(e) => self.send(SampleKind::ReleaseError(e.to_string()), rel),
                    }
                    self.send(SampleKind::CriticalSection, acquired);
                }
                Err(e) if e.is_contention() => self.send(SampleKind::AcquireContended, began),
                Err(e) => self.send(SampleKind::AcquireError(e.to_string()), began),
            }
        }
    }

    /// Holds the lease for the workload's hold time, stalls while paused, then "writes".
    /// Returns `false` when the client crashed while holding.
    async fn critical_section(&self, lease: &Lease, rng: &mut StdRng) -> bool {
        let control = self.controls.get(self.id as usize);
        if control.is_some_and(|c| c.take_crash()) {
            return false;
        }
        let _ = lease;
        let hold = self.workload.hold.sample(rng);
        if !hold.is_zero() {
            tokio::time::sleep(hold).await;
        }
        // Slow work (nemesis): a longer section; renewal keeps running.
        let extra = control.map_or(std::time::Duration::ZERO, |c| c.extra_hold());
        if !extra.is_zero() {
            tokio::time::sleep(extra).await;
        }
        if let Some(c) = control {
            let mut paused = c.paused_receiver();
            while *paused.borrow_and_update() {
                if paused.changed().await.is_err() {
                    break;
                }
            }
            if c.take_crash() {
                return false;
            }
        }
        true
    }
}
