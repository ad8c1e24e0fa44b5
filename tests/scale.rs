//! Many clients: thousands of connections through the embedded proxy, paced connects, the
//! descriptor limit raised, and no verdict invented by the harness.

mod common;

use common::cli::{latest, run_in, summary};
use common::process::{alive, assert_all_gone};

/// 2,000 clients, one connection each, through the node's proxy (6,000 descriptors in this
/// process): every client connects, the fault-free run is `valid`, and no process is left.
/// Timeouts and TTL are generous so that a slow CI machine measures the harness's capacity,
/// not a timeout race; the harness's own lag is reported in the summary either way.
#[test]
fn two_thousand_proxied_clients_connect_and_the_run_is_valid() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run_in(
        [
            "run",
            "--topology",
            "single",
            "-s",
            "single",
            "-c",
            "2000",
            "-r",
            "2000",
            "-d",
            "3s",
            "--ttl",
            "20s",
            "--node-timeout",
            "5s",
            "--response-timeout",
            "5s",
            "--connect-timeout",
            "5s",
        ],
        tmp.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    assert!(
        stderr.contains("connected 2000 clients"),
        "no connect progress line: {stderr}"
    );
    let s = summary(tmp.path());
    assert_eq!(s["status"], "completed", "{s}");
    let st = &s["strategies"][0];
    assert_eq!(st["errors"], 0, "{st}");
    assert!(st["acquired"].as_u64().unwrap() > 0, "{st}");
    assert_eq!(st["check"]["verdict"], "valid", "{st}");
    assert_eq!(st["check"]["stats"]["mutex_violations"], 0, "{st}");
    // The harness measured itself (one lag sample per 10 ms probe tick when it keeps up).
    assert!(
        st["harness"]["scheduler_lag"]["count"].as_u64().unwrap() > 0,
        "{st}"
    );
    let run = latest(tmp.path());
    let left = common::process::pids_under(&run.join("nodes"));
    assert!(left.iter().all(|&p| !alive(p)), "left running: {left:?}");
    assert_all_gone(&left);
}
