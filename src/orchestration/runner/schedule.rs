//! The nemesis schedule of one strategy run, as the experiment's hook: the test's steps
//! against the shared [`Nemesis`], every fault window logged into that run's history and
//! counted in the live metrics.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::{watch, Mutex};

use crate::history::FaultWindow;
use crate::nemesis::{self, FaultKind, Nemesis, Target};
use crate::orchestration::experiment::{Nemesis as NemesisHook, NemesisStart};
use crate::orchestration::test::Test;
use crate::results::LiveMetrics;

/// Faults open right now, by window id (label: kind and targets).
pub(super) type ActiveFaults = Arc<std::sync::Mutex<BTreeMap<u64, String>>>;

/// Builds the nemesis hook for one strategy: runs the test's schedule against the shared
/// [`Nemesis`], logging every window into that strategy's history, and heals everything
/// before it returns (also on shutdown).
pub(super) fn schedule_hook(
    nemesis: Arc<Mutex<Nemesis>>,
    test: &Test,
    shutdown: watch::Receiver<bool>,
    errors: Arc<std::sync::Mutex<Vec<nemesis::NemesisError>>>,
    active: ActiveFaults,
    live: Option<LiveMetrics>,
) -> NemesisHook {
    let steps = test.nemesis.clone();
    Box::new(move |n: NemesisStart| {
        // A client absent from time zero must not slip an attempt in before the schedule
        // task first runs: the hook is called before the clients start, so mark such clients
        // absent here, synchronously (the schedule then records the window as usual).
        for step in steps
            .iter()
            .filter(|s| s.fault == FaultKind::ClientAbsent && s.at.is_zero())
        {
            if let Target::Clients(ids) = &step.target {
                for &i in ids {
                    n.controls.set_absent(i as usize, true);
                }
            }
        }
        Box::pin(async move {
            let history = n.history.clone();
            let record = move |w: FaultWindow| {
                if let Ok(mut open) = active.lock() {
                    let opened = w.end_us.is_none();
                    // A window is recorded open once and closed once (same id).
                    let counted = if opened {
                        open.insert(w.id, format!("{} {}", w.kind, w.targets.join(",")))
                            .is_none()
                    } else {
                        open.remove(&w.id).is_some()
                    };
                    if let (true, Some(live)) = (counted, &live) {
                        live.fault(&w.kind, opened);
                    }
                }
                history.record_fault(w);
            };
            let mut nem = nemesis.lock().await;
            if let Err(e) = nemesis::run_schedule(
                &mut nem,
                &steps,
                &n.controls,
                n.history.clock(),
                shutdown,
                record,
            )
            .await
            {
                errors.lock().unwrap_or_else(|p| p.into_inner()).push(e);
            }
        })
    })
}
