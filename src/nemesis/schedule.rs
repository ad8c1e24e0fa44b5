//! [`run_schedule`]: runs a scenario's `[[nemesis]]` steps against a [`Nemesis`] at their
//! offsets from the strategy's start, heals each after its hold, and heals everything at the end.

use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::resolve::HOLDER_WAIT;
use super::{ClientControls, FaultKind, FaultStep, Nemesis, NemesisError};
use crate::duration_ms::instant_after as at;
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
/// primary, ≤ 30 s; restart: until PING) delays the steps and heals due after it. A step on
/// `target = "holder"` is the exception: while no client is inside a critical section it
/// heals whatever falls due (for at most 5 s), so a fault that keeps every client out is
/// still healed on time and lets the holder in.
///
/// # Errors
/// The first inject or heal failure ([`NemesisError::Inject`] / [`NemesisError::Heal`], naming
/// the step or window); the schedule stops there (a fault that did not happen
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
            let step_due = order.get(next).map(|s| at(start, s.at));
            let next_heal = heals.iter().map(|(t, _)| *t).min();
            let Some(when) = [step_due, next_heal].into_iter().flatten().min() else {
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
            while let Some(step) = order
                .get(next)
                .filter(|s| at(start, s.at) <= Instant::now())
            {
                // Behind time (a loaded machine), events keep their order: the heals due
                // before this step's time come first, those due after it wait for it.
                heal_due(nemesis, &mut heals, at(start, step.at), &mut on_window).await?;
                if step.aims_at_holder() {
                    // A fault that keeps every client out (a paused majority, a node still
                    // restarting) must not outlive its hold because the next aimed step waits
                    // for a holder that only its heal lets in: heal while waiting.
                    heal_until_holder(nemesis, controls, &mut heals, &mut on_window, &shutdown)
                        .await?;
                }
                next += 1;
                let window = nemesis.inject(step, controls).await?;
                if window.end_us.is_none() {
                    let took_effect = start + Duration::from_micros(window.start_us);
                    heals.push((at(took_effect, hold_of(step)), window.id));
                }
                on_window(window);
            }
            heal_due(nemesis, &mut heals, Instant::now(), &mut on_window).await?;
        }
    }
    .await;
    let healed = nemesis.heal_all(&mut on_window).await;
    result.and(healed)
}

/// Takes the ids of the faults whose heal time has come by `now` out of `heals`, ascending.
fn take_due(heals: &mut Vec<(Instant, u64)>, now: Instant) -> Vec<u64> {
    let mut due: Vec<u64> = heals
        .iter()
        .filter(|(t, _)| *t <= now)
        .map(|(_, id)| *id)
        .collect();
    due.sort_unstable();
    heals.retain(|(t, _)| *t > now);
    due
}

/// Heals every fault whose hold has run out by `by`.
async fn heal_due(
    nemesis: &mut Nemesis,
    heals: &mut Vec<(Instant, u64)>,
    by: Instant,
    on_window: &mut impl FnMut(FaultWindow),
) -> Result<(), NemesisError> {
    for id in take_due(heals, by) {
        if let Some(window) = nemesis.heal(id).await? {
            on_window(window);
        }
    }
    Ok(())
}

/// Until some client is inside a critical section (at most [`HOLDER_WAIT`], or until
/// `shutdown`), heals every fault whose hold runs out, checking every millisecond. The step's
/// own inject then resolves the holder (and waits for one itself if none came).
async fn heal_until_holder(
    nemesis: &mut Nemesis,
    controls: &ClientControls,
    heals: &mut Vec<(Instant, u64)>,
    on_window: &mut impl FnMut(FaultWindow),
    shutdown: &watch::Receiver<bool>,
) -> Result<(), NemesisError> {
    let deadline = Instant::now() + HOLDER_WAIT;
    while controls.inside().is_empty() && Instant::now() < deadline && !*shutdown.borrow() {
        heal_due(nemesis, heals, Instant::now(), on_window).await?;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(())
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
    fn due_heals_are_taken_in_id_order_and_the_rest_kept() {
        let now = Instant::now();
        let later = now + Duration::from_secs(1);
        let mut heals = vec![(now, 7), (later, 3), (now - Duration::from_millis(5), 2)];
        assert_eq!(take_due(&mut heals, now), vec![2, 7]);
        assert_eq!(heals, vec![(later, 3)]);
        assert!(take_due(&mut heals, now).is_empty());
        assert_eq!(take_due(&mut heals, later), vec![3]);
        assert!(heals.is_empty());
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
