//! [`run_schedule`]: runs a scenario's `[[nemesis]]` steps against a [`Nemesis`] at their
//! offsets from the strategy's start, heals each after its hold, and heals everything at the end.

use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{ClientControls, FaultKind, FaultStep, Nemesis, NemesisError};
use crate::history::{FaultWindow, RunClock};

/// How long a step stays injected before it is healed: `kill` stays down for
/// max(`duration`, `restart_after`) (zero = restart at once); `failover` by kill keeps the old
/// primary down for `duration` (zero = restart once a new primary is named); other faults use
/// `duration` (instant faults have none).
pub fn hold_of(step: &FaultStep) -> Duration {
    let d = step.duration.unwrap_or_default();
    match step.fault {
        FaultKind::Kill => d.max(step.restart_after.unwrap_or_default()),
        _ => d,
    }
}

/// Runs `steps` (in `at` order) against `nemesis`, `at` counted from `clock`'s time zero (the
/// strategy's start), and heals each injected fault [`hold_of`] after it took effect. The
/// nemesis stamps its windows on `clock` ([`Nemesis::set_clock`]); every window goes to
/// `on_window` twice for faults that last (opened, then closed with the same id) and once for
/// instant faults.
///
/// Returns when every step has been injected and healed, or as soon as `shutdown` reads
/// `true` (a dropped sender only stops the watching, not the schedule). In every case
/// [`Nemesis::heal_all`] runs before returning, so no fault outlives the call and every window
/// is closed. Run it next to the driver and flip `shutdown` when the strategy's run ends:
///
/// ```ignore
/// let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
/// let clock = lockbench::history::RunClock::start();
/// let run = async { let r = run_strategy(&ctx, &opts, &controls, &hooks, |_, _| {}).await;
///                   let _ = stop_tx.send(true); r };
/// let (run, faults) = tokio::join!(run, run_schedule(&mut nemesis, &steps, &controls, clock, stop_rx, record));
/// ```
///
/// Steps run one at a time: an inject that waits (failover: until the Sentinels name a new
/// primary, ≤ 30 s; restart: until PING) delays the steps and heals due after it.
///
/// # Errors
/// The first inject or heal failure; the schedule stops there (a fault that did not happen
/// makes the experiment meaningless), and everything injected is healed before returning.
pub async fn run_schedule(
    nemesis: &mut Nemesis,
    steps: &[FaultStep],
    controls: &ClientControls,
    clock: RunClock,
    mut shutdown: watch::Receiver<bool>,
    mut on_window: impl FnMut(FaultWindow),
) -> Result<(), NemesisError> {
    nemesis.set_clock(clock);
    let start = clock.origin();
    let mut order: Vec<&FaultStep> = steps.iter().collect();
    order.sort_by_key(|s| s.at);
    let mut next = 0;
    let mut heals: Vec<(Instant, u64)> = Vec::new();
    let mut watching = true;
    let result: Result<(), NemesisError> = async {
        loop {
            if watching && *shutdown.borrow() {
                return Ok(());
            }
            let step_due = order.get(next).map(|s| start + s.at);
            let heal_due = heals.iter().map(|(t, _)| *t).min();
            let Some(when) = [step_due, heal_due].into_iter().flatten().min() else {
                return Ok(());
            };
            tokio::select! {
                _ = tokio::time::sleep_until(tokio::time::Instant::from_std(when)) => {}
                changed = shutdown.changed(), if watching => {
                    if changed.is_err() {
                        watching = false;
                    }
                    continue;
                }
            }
            let now = Instant::now();
            let mut due: Vec<u64> = heals
                .iter()
                .filter(|(t, _)| *t <= now)
                .map(|(_, id)| *id)
                .collect();
            due.sort_unstable();
            heals.retain(|(t, _)| *t > now);
            for id in due {
                if let Some(window) = nemesis.heal(id).await? {
                    on_window(window);
                }
            }
            while let Some(step) = order.get(next).filter(|s| start + s.at <= Instant::now()) {
                next += 1;
                let window = nemesis.inject(step, controls).await?;
                if window.end_us.is_none() {
                    let took_effect = start + Duration::from_micros(window.start_us);
                    heals.push((took_effect + hold_of(step), window.id));
                }
                on_window(window);
            }
        }
    }
    .await;
    let healed = nemesis.heal_all(&mut on_window).await;
    result.and(healed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::Target;

    fn step(fault: FaultKind) -> FaultStep {
        FaultStep {
            at: Duration::from_secs(1),
            ..FaultStep::new(fault, Target::Minority)
        }
    }

    #[test]
    fn kill_stays_down_for_the_longer_of_duration_and_restart_after() {
        let mut s = step(FaultKind::Kill);
        assert_eq!(hold_of(&s), Duration::ZERO);
        s.duration = Some(Duration::from_millis(200));
        s.restart_after = Some(Duration::from_millis(900));
        assert_eq!(hold_of(&s), Duration::from_millis(900));
        let mut p = step(FaultKind::PauseNode);
        p.duration = Some(Duration::from_millis(300));
        p.restart_after = Some(Duration::from_secs(5));
        assert_eq!(hold_of(&p), Duration::from_millis(300));
    }
}
