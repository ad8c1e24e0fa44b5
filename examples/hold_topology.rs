//! Starts a local topology, prints its processes, and holds it until told to stop.
//!
//! ```text
//! cargo run --example hold_topology -- single|five [wait|exit|error|panic]
//! ```
//! Prints one `PID <pid> PORT <port>` line per node, then `READY`. Then, by mode:
//! - `wait` (default): waits for SIGINT/SIGTERM (exits 130/143) or for stdin to close (exits 0),
//!   and shuts the nodes down;
//! - `exit`: shuts down and exits 0 at once;
//! - `error`: returns an error from `main` (exit code 1) without an explicit shutdown;
//! - `panic`: panics while the nodes run, leaving the cleanup to the panic hook;
//! - `panic-in-thread`: after one line on stdin, a thread panics (and is joined) while this
//!   process lives on; prints `PANICKED`, then behaves as `wait`. Shows that the panic hook alone kills the nodes.
//!
//! `tests/topology.rs` uses it to prove that no redis-server outlives it on any of these paths.

use std::io::{Read, Write};

use lockbench::topology::reaper::{self, TerminationListener};
use lockbench::topology::{LocalTopologyOptions, Topology, TopologyKind};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let kind: TopologyKind = args.first().map_or("single", String::as_str).parse()?;
    let mode = args.get(1).map_or("wait", String::as_str).to_string();
    if !["wait", "exit", "error", "panic", "panic-in-thread"].contains(&mode.as_str()) {
        return Err(format!(
            "unknown mode `{mode}`: use wait, exit, error, panic or panic-in-thread"
        )
        .into());
    }

    reaper::install_panic_hook();
    // Before READY: a signal that arrives earlier must not hit the default action.
    let mut signals = TerminationListener::install()?;
    let base = tempfile::Builder::new()
        .prefix("lockbench-hold-")
        .tempdir()?;
    let topology = Topology::start_local(kind, &LocalTopologyOptions::new(base.path())).await?;

    let mut out = std::io::stdout().lock();
    for node in topology.local_nodes() {
        let pid = node.pid().ok_or("node stopped before READY")?;
        writeln!(out, "PID {pid} PORT {}", node.port())?;
    }
    writeln!(out, "READY")?;
    out.flush()?;
    drop(out);

    let mut exit_code = 0;
    match mode.as_str() {
        "exit" => {}
        "error" => return Err("error mode: returning an error while the nodes run".into()),
        "panic" => {
            // Only the panic hook (and, last, the parent-death signal) may clean up.
            std::mem::forget(topology);
            panic!("panic mode: panicking while the nodes run");
        }
        _ => {
            if mode == "panic-in-thread" {
                // Wait for the caller's go-ahead line, so it can see the nodes alive first.
                std::io::stdin().read_line(&mut String::new())?;
                let joined = std::thread::spawn(|| panic!("panic-in-thread mode")).join();
                assert!(joined.is_err());
                println!("PANICKED");
            }
            let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
            // A plain thread: a blocking stdin read must not hold up the runtime's shutdown.
            std::thread::spawn(move || {
                let mut sink = Vec::new();
                let _ = std::io::stdin().read_to_end(&mut sink);
                let _ = closed_tx.send(());
            });
            tokio::select! {
                signal = signals.recv() => {
                    eprintln!("hold_topology: {signal:?}, shutting down");
                    exit_code = signal.exit_code();
                }
                _ = closed_rx => eprintln!("hold_topology: stdin closed, shutting down"),
            }
        }
    }
    topology.shutdown().await;
    drop(base);
    if exit_code != 0 {
        std::process::exit(exit_code);
    }
    Ok(())
}
