//! The process reaper: every redis-server this process starts is registered here, so it can be
//! killed on every way out — normal exit, error, Ctrl-C/SIGTERM, and panic.
//!
//! Four layers, from cooperative to last resort:
//! 1. [`termination_signal`] / [`TerminationListener`] turn SIGINT and SIGTERM into a future, so
//!    the CLI can `select!` between the run and the signal and then tear down cooperatively
//!    (partial results are kept).
//! 2. Dropping a [`super::LocalNode`] or [`super::Topology`] kills its processes.
//! 3. [`install_panic_hook`] chains a panic hook that calls [`kill_all`] (works with
//!    `panic = "abort"` too, where no destructor runs).
//! 4. Children are spawned by one dedicated, never-exiting thread with
//!    `prctl(PR_SET_PDEATHSIG, SIGKILL)`, so even a `kill -9` of this process takes them down.
//!    (The death signal fires when the *thread* that forked the child exits, which is why the
//!    spawning is not done on tokio's short-lived blocking threads.)
//!
//! Each child runs in its own process group (so a terminal's Ctrl-C reaches only this process,
//! which then tears down in order), and [`kill_all`] signals the whole group, which also covers
//! any child redis-server forks for an AOF rewrite.

use std::collections::HashSet;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard, Once, OnceLock, TryLockError};
use std::time::{Duration, Instant};

/// Pids of live children started through [`spawn`].
fn registry() -> &'static Mutex<HashSet<u32>> {
    static PIDS: OnceLock<Mutex<HashSet<u32>>> = OnceLock::new();
    PIDS.get_or_init(|| Mutex::new(HashSet::new()))
}

/// Locks the registry, giving up after `patience` (a panic hook must never deadlock).
fn lock_registry(patience: Duration) -> Option<MutexGuard<'static, HashSet<u32>>> {
    let deadline = Instant::now() + patience;
    loop {
        match registry().try_lock() {
            Ok(guard) => return Some(guard),
            Err(TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(TryLockError::WouldBlock) => return None,
        }
    }
}

/// Adds a child pid to the registry.
pub fn register(pid: u32) {
    registry()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(pid);
}

/// Removes a pid; call this after SIGKILL and *before* reaping it, so a reused pid is never
/// signalled by [`kill_all`].
pub fn unregister(pid: u32) {
    registry()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&pid);
}

/// Pids currently registered (live children of this process started through [`spawn`]).
pub fn registered_pids() -> Vec<u32> {
    let mut pids: Vec<u32> = registry()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .copied()
        .collect();
    pids.sort_unstable();
    pids
}

/// Sends SIGKILL to every registered child (and its process group), then reaps them for up to
/// 1 s so none is left as a zombie, and deletes every nft table of cluster-bus cuts this
/// process created ([`super::bus_cut::remove_all_blocking`]). Returns how many pids were
/// signalled. Safe to call from a panic hook or a signal-driven teardown; a later `Drop` of
/// the node is then a no-op.
pub fn kill_all() -> usize {
    super::bus_cut::remove_all_blocking();
    let pids: Vec<u32> = match lock_registry(Duration::from_millis(200)) {
        Some(mut guard) => guard.drain().collect(),
        None => return 0,
    };
    kill_and_reap(&pids);
    pids.len()
}

/// SIGKILLs each pid's group and reaps it (bounded to 1 s in total).
fn kill_and_reap(pids: &[u32]) {
    for &pid in pids {
        sigkill_group(pid);
    }
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut pending: Vec<u32> = pids.to_vec();
    while !pending.is_empty() && Instant::now() < deadline {
        pending.retain(|&pid| {
            let mut status = 0;
            // SAFETY: waitpid with WNOHANG on a pid; no memory is shared.
            let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) };
            r == 0 // 0 = still running; pid or -1 (ECHILD: reaped elsewhere) = done
        });
        if !pending.is_empty() {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// SIGKILL to the child's process group and to the child itself.
pub(crate) fn sigkill_group(pid: u32) {
    let pid = pid as libc::pid_t;
    // SAFETY: kill(2) has no memory effects; errors (ESRCH) are fine to ignore here.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
        libc::kill(pid, libc::SIGKILL);
    }
}

/// Installs (once per process) a panic hook that calls [`kill_all`] and then the previous hook.
///
/// Meant for binaries. Do not install it in a test harness that runs tests in parallel: a
/// panicking test would kill the other tests' nodes.
pub fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            kill_all();
            previous(info);
        }));
    });
}

/// Which signal asked this process to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminationSignal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl TerminationSignal {
    /// The conventional exit code for a process stopped by this signal (128 + signal number).
    pub fn exit_code(self) -> i32 {
        match self {
            TerminationSignal::Interrupt => 128 + libc::SIGINT,
            TerminationSignal::Terminate => 128 + libc::SIGTERM,
        }
    }
}

/// SIGINT and SIGTERM handlers, installed when this is created.
///
/// Create it *before* announcing readiness: a signal that arrives before the handlers are
/// installed still has its default action (the process dies without teardown).
pub struct TerminationListener {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl TerminationListener {
    /// Installs the handlers. Must be called inside a tokio runtime.
    ///
    /// # Errors
    /// The OS refused to install a signal handler.
    pub fn install() -> io::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Resolves at the next SIGINT or SIGTERM.
    pub async fn recv(&mut self) -> TerminationSignal {
        tokio::select! {
            _ = self.interrupt.recv() => TerminationSignal::Interrupt,
            _ = self.terminate.recv() => TerminationSignal::Terminate,
        }
    }
}

/// Resolves on SIGINT or SIGTERM. Use it as one arm of `select!` next to the run.
///
/// The handlers are installed on first poll; use [`TerminationListener::install`] when a signal
/// may arrive before that. If they cannot be installed, a warning is logged and the future never
/// resolves (the run is not cut short by a missing handler).
pub async fn termination_signal() -> TerminationSignal {
    match TerminationListener::install() {
        Ok(mut listener) => listener.recv().await,
        Err(e) => {
            tracing::warn!("cannot install SIGINT/SIGTERM handlers: {e}");
            std::future::pending().await
        }
    }
}

struct SpawnRequest {
    command: Command,
    reply: mpsc::Sender<io::Result<Child>>,
}

/// The dedicated spawning thread's request queue (the thread lives as long as the process).
fn spawner() -> &'static mpsc::Sender<SpawnRequest> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("lockbench-spawner".into())
            .spawn(move || {
                for mut request in rx {
                    let result = request.command.spawn();
                    if let Ok(child) = &result {
                        register(child.id());
                    }
                    if let Err(Ok(mut orphan)) = request.reply.send(result).map_err(|e| e.0) {
                        // Nobody waits for it any more: do not leave it running.
                        unregister(orphan.id());
                        let _ = orphan.kill();
                        let _ = orphan.wait();
                    }
                }
            })
            .expect("cannot start the lockbench-spawner thread");
        tx
    })
}

/// Spawns `command` as a direct child in its own process group, with SIGKILL as its parent-death
/// signal, and registers its pid. Blocks for the fork+exec only (about a millisecond).
///
/// # Errors
/// The spawn failed (binary missing, not executable, …).
pub fn spawn(mut command: Command) -> io::Result<Child> {
    let parent = std::process::id() as libc::pid_t;
    command.process_group(0);
    // SAFETY: the closure runs between fork and exec and only calls async-signal-safe
    // functions (prctl, getppid); it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                // The parent died between fork and prctl.
                return Err(io::Error::other("parent exited during spawn"));
            }
            Ok(())
        });
    }
    let (reply, answer) = mpsc::channel();
    spawner()
        .send(SpawnRequest { command, reply })
        .map_err(|_| io::Error::other("the lockbench-spawner thread is gone"))?;
    answer
        .recv()
        .map_err(|_| io::Error::other("the lockbench-spawner thread dropped the request"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The registry is process-wide: tests that compare its contents take turns.
    static REGISTRY_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn spawned_child_is_registered_then_killed_and_reaped() {
        let _turn = REGISTRY_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        let mut sleeper = Command::new("sleep");
        sleeper.arg("30");
        let child = spawn(sleeper).unwrap();
        let pid = child.id();
        assert!(registered_pids().contains(&pid));
        // Not kill_all(): it is process-wide and other tests may own children.
        unregister(pid);
        kill_and_reap(&[pid]);
        assert!(!registered_pids().contains(&pid));
        // Reaped: the pid no longer exists (not even as a zombie).
        // SAFETY: plain kill(pid, 0) probe.
        let alive = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
        assert!(!alive, "pid {pid} still exists after kill_all");
        drop(child);
    }

    #[test]
    fn spawn_of_missing_binary_fails_without_registering() {
        let _turn = REGISTRY_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        let before = registered_pids();
        let err = spawn(Command::new("/nonexistent/redis-server")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert_eq!(registered_pids(), before);
    }
}
