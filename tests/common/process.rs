//! Process probes shared by the integration tests.

use std::time::{Duration, Instant};

/// True while `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    // SAFETY: kill(pid, 0) only probes for existence.
    if unsafe { libc::kill(pid as libc::pid_t, 0) } != 0 {
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

/// Pids of live processes whose working directory is under `dir` (every local redis-server
/// runs inside its node directory). Redis rewrites its command line and deletes its pidfile on
/// a clean shutdown, so the working directory is how a test finds survivors after the fact.
pub fn pids_under(dir: &std::path::Path) -> Vec<u32> {
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
