//! Process probes shared by the integration tests, and the handling of a child process a test
//! started: signals and bounded waits for its exit.

use std::path::Path;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// True while a process `pid` exists, zombies included (`kill(pid, 0)` succeeds).
pub fn exists(pid: u32) -> bool {
    // SAFETY: kill(pid, 0) only probes for existence.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

/// True while `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    if !exists(pid) {
        return false; // ESRCH
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // Field 3 (after the parenthesised name) is the state; Z = zombie, X = dead.
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !(state.starts_with('Z') || state.starts_with('X'))
        }
        Err(_) => false,
    }
}

/// Polls until none of `pids` is alive; panics naming the survivors after 5 s.
pub fn assert_all_gone(pids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let survivors: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if survivors.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "redis-server pids still alive after 5 s: {survivors:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts, without waiting, that no process of `pids` exists any more (for processes whose
/// owner has already reaped them, e.g. after a topology's `shutdown().await`).
pub fn assert_none_exist(pids: &[u32]) {
    for &pid in pids {
        assert!(!exists(pid), "process {pid} left running");
    }
}

/// Pids of live processes whose working directory is under `dir` (every local redis-server
/// runs inside its node directory). Redis rewrites its command line and deletes its pidfile on
/// a clean shutdown, so the working directory is how a test finds survivors after the fact.
pub fn pids_under(dir: &Path) -> Vec<u32> {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cwd) = std::fs::read_link(e.path().join("cwd")) else {
            continue;
        };
        if cwd.starts_with(&dir) && alive(pid) {
            pids.push(pid);
        }
    }
    pids
}

/// Asserts that no live process runs under `dir` (see [`pids_under`]).
pub fn assert_none_running_under(dir: &Path) {
    let survivors = pids_under(dir);
    assert!(survivors.is_empty(), "still running: {survivors:?}");
}

/// Sends `signal` to the child this test spawned.
pub fn signal(child: &Child, signal: libc::c_int) {
    // SAFETY: kill(2) to a child this test spawned.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, signal) },
        0,
        "kill({}, {signal})",
        child.id()
    );
}

/// Polls (every 20 ms) until `child` exits and returns its status; panics with "{what} did not
/// exit within {limit}" after `limit`.
pub fn wait_exit(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not exit within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// This process's open-file limits (soft and hard).
fn nofile_limits() -> libc::rlimit {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit with a valid pointer to an rlimit struct.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim
}

/// This process's soft open-file limit.
pub fn soft_nofile() -> u64 {
    nofile_limits().rlim_cur
}

/// Sets this process's soft open-file limit to `n` (at most the hard limit).
pub fn set_soft_nofile(n: u64) {
    let mut lim = nofile_limits();
    lim.rlim_cur = n.min(lim.rlim_max);
    // SAFETY: setrlimit with a valid pointer to an rlimit struct.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
}

/// Raises this process's soft open-file limit to its hard limit, if the kernel lets it;
/// returns the soft limit in force afterwards.
pub fn raise_nofile_to_hard() -> u64 {
    let mut lim = nofile_limits();
    lim.rlim_cur = lim.rlim_max;
    // SAFETY: setrlimit with a valid pointer to an rlimit struct. A refusal (a hard limit
    // above the kernel's maximum) leaves the limit as it was, which the caller checks.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    soft_nofile()
}
