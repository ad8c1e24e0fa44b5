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

/// Pids of live processes whose command line mentions `needle` (e.g. a run directory: every
/// local redis-server / redis-sentinel is started with a config file inside it). Redis deletes
/// its pidfile on a clean shutdown, so this is how a test finds survivors after the fact.
pub fn pids_mentioning(needle: &std::path::Path) -> Vec<u32> {
    let needle = needle.to_string_lossy().into_owned();
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(&needle) && alive(pid) {
            pids.push(pid);
        }
    }
    pids
}
