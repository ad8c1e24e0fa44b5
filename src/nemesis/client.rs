//! The client family: faults the driver's clients pull from their [`ClientControls`] —
//! `client-pause` (stop the world inside the critical section, renewal frozen), `slow-work`
//! (longer sections, renewal running), `client-crash` (stop while holding, no release) and
//! `client-absent` (no new acquire). On a worker process (`worker:I`) the pause and the crash
//! are signals, [`super::process`]'s.

use super::faults::Injection;
use super::resolve::resolve_clients;
use super::{ClientControls, FaultKind, FaultStep, NemesisError};

/// What undoes a client fault: the control set back on the clients it was set on.
#[derive(Debug)]
pub(super) enum Undo {
    /// Resume the paused clients.
    Unpause(ClientControls, Vec<u32>),
    /// No extra time in the critical section any more.
    ClearSlow(ClientControls, Vec<u32>),
    /// The absent clients acquire again.
    Return(ClientControls, Vec<u32>),
}

impl Undo {
    /// Sets the controls back (cannot fail).
    pub(super) fn run(self) {
        match self {
            Undo::Unpause(controls, ids) => {
                for i in ids {
                    controls.set_paused(i as usize, false);
                }
            }
            Undo::ClearSlow(controls, ids) => {
                for i in ids {
                    controls.set_extra_hold(i as usize, std::time::Duration::ZERO);
                }
            }
            Undo::Return(controls, ids) => {
                for i in ids {
                    controls.set_absent(i as usize, false);
                }
            }
        }
    }
}

/// A client fault on the clients `step` targets (`holder`: waits for one,
/// [`resolve_clients`]).
///
/// # Errors
/// As [`resolve_clients`].
pub(super) async fn inject(
    step: &FaultStep,
    controls: &ClientControls,
) -> Result<Injection, NemesisError> {
    let ids = resolve_clients(&step.target, controls).await?;
    let names = ids.iter().map(|i| format!("client:{i}")).collect();
    Ok(match step.fault {
        FaultKind::ClientPause => {
            for &i in &ids {
                controls.set_paused(i as usize, true);
            }
            let undo = Undo::Unpause(controls.clone(), ids);
            Injection::lasting(names, undo, "paused, renewal frozen")
        }
        FaultKind::SlowWork => {
            let extra = step.extra.unwrap_or_default();
            for &i in &ids {
                controls.set_extra_hold(i as usize, extra);
            }
            let undo = Undo::ClearSlow(controls.clone(), ids);
            let detail = format!("+{extra:?} per critical section, renewal running");
            Injection::lasting(names, undo, detail)
        }
        FaultKind::ClientAbsent => {
            for &i in &ids {
                controls.set_absent(i as usize, true);
            }
            let undo = Undo::Return(controls.clone(), ids);
            Injection::lasting(names, undo, "no new acquire")
        }
        _ => {
            for &i in &ids {
                controls.crash_while_holding(i as usize);
            }
            Injection::instant(names, "crash at next hold, no release")
        }
    })
}
