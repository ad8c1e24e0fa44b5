//! PgBouncer in the `postgres` topology, against real `postgres` and `pgbouncer` processes
//! lockbench starts: fault-free runs through it in both pool modes, what a session lock and a
//! transaction lock do through a transaction pooler (an unlock that reaches another server
//! session answers `false`: a lost lease), server settings, bad pooler settings refused up
//! front, and no process left after SIGINT.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::cli::{expect_code, run_in, summary, summary_so_far};
use common::process::{alive, assert_all_gone, signal, wait_exit};
use common::wait::wait_for;
use lockbench::lease::{AcquireError, ReleaseFinding};
use lockbench::node::ConnectOptions;
use lockbench::strategy::{LockClient, StrategyKind, StrategyOptions};
use lockbench::topology::{
    LocalTopologyOptions, PoolMode, PoolReset, PoolerSettings, Topology, TopologyKind,
};

/// The command name (`/proc/<pid>/comm`) of a live process.
fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// A `postgres` topology with PgBouncer in `mode` (`pool_size` server connections) and the
/// server settings `pg_settings`, in `dir`.
async fn start(dir: &Path, mode: PoolMode, pool_size: u32, pg_settings: &[&str]) -> Topology {
    start_with_reset(dir, mode, pool_size, pg_settings, PoolReset::Default).await
}

/// [`start`] with PgBouncer's reset of returned server connections set to `reset`.
async fn start_with_reset(
    dir: &Path,
    mode: PoolMode,
    pool_size: u32,
    pg_settings: &[&str],
    reset: PoolReset,
) -> Topology {
    let options = LocalTopologyOptions {
        pooler: Some(PoolerSettings {
            pool_size,
            reset,
            ..PoolerSettings::pgbouncer(mode)
        }),
        pg_settings: pg_settings.iter().map(|s| s.to_string()).collect(),
        ..LocalTopologyOptions::new(dir)
    };
    Topology::start_local(TopologyKind::Postgres, &options)
        .await
        .unwrap_or_else(|e| panic!("postgres + pgbouncer start: {e}"))
}

async fn client(topology: &Topology, kind: StrategyKind) -> LockClient {
    let mut opts = StrategyOptions::new(kind, Duration::from_secs(1));
    opts.node_timeout = Duration::from_secs(2);
    LockClient::connect(&topology.endpoints(), opts, &ConnectOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{kind}: connect through pgbouncer: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_reach_the_server_through_pgbouncer_and_it_stops_with_the_topology() {
    let tmp = tempfile::tempdir().unwrap();
    let topology = start(tmp.path(), PoolMode::Transaction, 2, &[]).await;
    let pooler = topology.pooler().expect("a pooler was started");
    let pooler_pid = pooler.pid().unwrap();
    assert_eq!(comm(pooler_pid), "pgbouncer");
    let server_port = topology.local_nodes()[0].port();
    let endpoint = &topology.endpoints()[0];
    assert_eq!(endpoint.name, "n1");
    assert!(
        endpoint.url.contains(&format!(":{}/", pooler.port())) && pooler.port() != server_port,
        "clients use the pooler's port {}, not the server's {server_port}: {}",
        pooler.port(),
        endpoint.url
    );
    let ini = std::fs::read_to_string(pooler.dir().join("pgbouncer.ini")).unwrap();
    assert!(ini.contains(&format!("port={server_port} ")), "{ini}");
    assert!(ini.contains("pool_mode = transaction\n"), "{ini}");
    let a = client(&topology, StrategyKind::PgAdvisoryXact).await;
    let lease = a.try_acquire("r").await.expect("free lock");
    assert_eq!(
        a.release(&lease).await.unwrap().finding(),
        ReleaseFinding::Held
    );
    let pids: Vec<u32> = topology
        .local_nodes()
        .iter()
        .filter_map(|n| n.pid())
        .chain([pooler_pid])
        .collect();
    topology.shutdown().await;
    common::process::assert_none_exist(&pids);
}

/// A session lock's unlock that a transaction pooler sends to another server session than
/// the lock's answers `false`: the release finds the lease lost, never released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_on_another_server_session_is_a_lost_lease() {
    let tmp = tempfile::tempdir().unwrap();
    let topology = start(tmp.path(), PoolMode::Transaction, 2, &[]).await;
    let holder = client(&topology, StrategyKind::PgAdvisory).await;
    let busy = client(&topology, StrategyKind::PgAdvisoryXact).await;
    // The lock lands on the pool's only server connection, S1.
    let lease = holder.try_acquire("r").await.expect("free lock");
    // An open transaction now keeps S1 for itself (PgBouncer reuses the idle S1 for it) ...
    let pinned = busy.try_acquire("other").await.expect("free lock");
    // ... so the unlock goes to a second server connection, whose session holds nothing.
    let released = holder.release(&lease).await.unwrap();
    assert_eq!(released.released_nodes, 0, "{released:?}");
    assert_eq!(released.finding(), ReleaseFinding::Lost);
    busy.release(&pinned).await.unwrap();
    topology.shutdown().await;
}

/// `pg-advisory-xact` through a transaction pooler: the transaction keeps its server
/// connection, so a second client is refused until the holder commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_lock_excludes_through_a_transaction_pooler() {
    let tmp = tempfile::tempdir().unwrap();
    let topology = start(tmp.path(), PoolMode::Transaction, 3, &[]).await;
    let a = client(&topology, StrategyKind::PgAdvisoryXact).await;
    let b = client(&topology, StrategyKind::PgAdvisoryXact).await;
    let lease = a.try_acquire("r").await.expect("free lock");
    for _ in 0..3 {
        let refused = b.try_acquire("r").await.unwrap_err();
        assert!(matches!(refused, AcquireError::Held { .. }), "{refused:?}");
    }
    assert_eq!(
        a.release(&lease).await.unwrap().finding(),
        ReleaseFinding::Held
    );
    let second = b.try_acquire("r").await.expect("free after COMMIT");
    // Committed twice: the second release finds no transaction of this lease.
    assert_eq!(
        a.release(&lease).await.unwrap().finding(),
        ReleaseFinding::Lost
    );
    b.release(&second).await.unwrap();
    // A stale lease's release never commits the transaction of a newer lease.
    let newer = a.try_acquire("r").await.expect("free again");
    assert_eq!(
        a.release(&lease).await.unwrap().finding(),
        ReleaseFinding::Lost
    );
    let refused = b.try_acquire("r").await.unwrap_err();
    assert!(matches!(refused, AcquireError::Held { .. }), "{refused:?}");
    assert_eq!(
        a.release(&newer).await.unwrap().finding(),
        ReleaseFinding::Held
    );
    topology.shutdown().await;
}

/// A client of `kind` straight to the server, past PgBouncer.
async fn direct_client(topology: &Topology, kind: StrategyKind) -> LockClient {
    let mut opts = StrategyOptions::new(kind, Duration::from_secs(1));
    opts.node_timeout = Duration::from_secs(2);
    LockClient::connect(&topology.data_endpoints(), opts, &ConnectOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{kind}: connect to the server: {e}"))
}

/// A session-mode PgBouncer with one server connection: a client takes a session lock and
/// disconnects without unlocking; the next client is handed the same server connection.
/// Without a reset that connection keeps the lock: the next client is granted it (advisory
/// locks are re-entrant per session) although nobody released it, its own unlock leaves it
/// held, and a client past the pooler is refused. With `DISCARD ALL` the lock is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_returned_server_connection_keeps_its_session_lock_without_a_reset() {
    for (reset, kept) in [(PoolReset::None, true), (PoolReset::DiscardAll, false)] {
        let tmp = tempfile::tempdir().unwrap();
        let topology = start_with_reset(tmp.path(), PoolMode::Session, 1, &[], reset).await;
        let ini = std::fs::read_to_string(topology.pooler().unwrap().dir().join("pgbouncer.ini"))
            .unwrap();
        let always = if kept { "0" } else { "1" };
        assert!(
            ini.contains(&format!("server_reset_query_always = {always}\n")),
            "{ini}"
        );
        let leaver = client(&topology, StrategyKind::PgAdvisory).await;
        leaver.try_acquire("r").await.expect("free lock");
        drop(leaver);
        // The pool's only server connection: the next statement runs once the leaver's
        // connection is back in the pool (and reset, when it is).
        let next = client(&topology, StrategyKind::PgAdvisory).await;
        let inherited = next
            .try_acquire("r")
            .await
            .expect("granted to the next client");
        let outsider = direct_client(&topology, StrategyKind::PgAdvisory).await;
        let seen = outsider.try_acquire("r").await;
        assert!(matches!(seen, Err(AcquireError::Held { .. })), "{seen:?}");
        // The next client's unlock undoes its own grant only: without a reset the leaver's
        // stays with the server session.
        assert_eq!(
            next.release(&inherited).await.unwrap().finding(),
            ReleaseFinding::Held
        );
        let after = outsider.try_acquire("r").await;
        assert_eq!(
            matches!(after, Err(AcquireError::Held { .. })),
            kept,
            "{reset}: {after:?}"
        );
        topology.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_settings_reach_the_server() {
    let tmp = tempfile::tempdir().unwrap();
    let topology = start(
        tmp.path(),
        PoolMode::Session,
        1,
        &["idle_session_timeout=1234ms", "application_name=lb-test"],
    )
    .await;
    let url = topology.data_endpoints()[0].url.clone();
    let (db, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let task = tokio::spawn(connection);
    let row = db
        .query_one("SELECT current_setting('idle_session_timeout')", &[])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "1234ms");
    drop(db);
    let _ = task.await;
    topology.shutdown().await;
}

fn fault_free_run(mode: &str, strategies: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let out = run_in(
        [
            "run",
            "--topology",
            "postgres",
            "--pooler",
            "pgbouncer",
            "--pool-mode",
            mode,
            "--pool-size",
            "4",
            "-s",
            strategies,
            "-c",
            "6",
            "-r",
            "2",
            "--hold",
            "1ms",
            "-d",
            "2s",
            "--no-progress",
        ],
        tmp.path(),
    );
    expect_code(
        &out,
        0,
        &format!("a fault-free run through pgbouncer ({mode})"),
    );
    let s = summary(tmp.path());
    assert_eq!(s["status"], "completed");
    assert_eq!(s["config"]["topology"]["pooler"]["pool_mode"], mode);
    let measured = s["strategies"].as_array().unwrap();
    assert_eq!(measured.len(), strategies.split(',').count());
    for st in measured {
        assert!(st["acquired"].as_u64().unwrap() > 0, "{st}");
        assert_eq!(st["check"]["verdict"], "valid", "{st}");
    }
    let run = common::cli::latest(tmp.path());
    assert!(run.join("nodes/pooler/pgbouncer.ini").exists());
    common::process::assert_none_running_under(&run);
}

#[test]
fn a_fault_free_run_through_a_session_pooler_is_valid() {
    fault_free_run("session", "pg-advisory,pg-advisory-xact,pg-advisory-wait");
}

#[test]
fn a_fault_free_run_through_a_transaction_pooler_is_valid_with_transaction_locks() {
    fault_free_run("transaction", "pg-advisory-xact");
}

#[test]
fn sigint_during_a_pgbouncer_run_leaves_no_pgbouncer_or_postgres() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = common::cli::spawn_in(
        [
            "run",
            "--topology",
            "postgres",
            "--pooler",
            "pgbouncer",
            "-s",
            "pg-advisory-xact",
            "-c",
            "4",
            "-d",
            "60s",
            "--no-progress",
        ],
        tmp.path(),
        Stdio::null(),
        Stdio::piped(),
    );
    wait_for(
        Duration::from_secs(30),
        "a summary with acquisitions",
        || {
            let s = summary_so_far(tmp.path())?;
            (s["strategies"][0]["acquired"].as_u64()? > 0).then_some(())
        },
    );
    let run = common::cli::latest(tmp.path());
    let pids = common::process::pids_under(&run.join("nodes"));
    let names: Vec<String> = pids.iter().map(|&p| comm(p)).collect();
    assert!(names.iter().any(|n| n == "pgbouncer"), "{names:?}");
    assert!(names.iter().any(|n| n == "postgres"), "{names:?}");
    assert!(pids.iter().all(|&p| alive(p)));
    signal(&child, libc::SIGINT);
    let status = wait_exit(&mut child, Duration::from_secs(20), "lockbench");
    assert_eq!(status.code(), Some(130));
    assert_eq!(summary(tmp.path())["status"], "interrupted");
    assert_all_gone(&pids);
    common::process::assert_none_running_under(&run);
}

#[test]
fn bad_pooler_settings_are_refused_with_the_valid_values() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let cases: [(&[&str], &str); 8] = [
        (&["--pooler", "pgpool"], "valid poolers are pgbouncer"),
        (
            &["--pooler", "pgbouncer", "--pool-mode", "statement"],
            "valid pool modes are session, transaction",
        ),
        (
            &["--pooler", "pgbouncer", "--pool-size", "0"],
            "--pool-size",
        ),
        (&["--pool-mode", "session"], "--pooler"),
        (
            &["--pooler", "pgbouncer", "--pooler-reset", "always"],
            "valid pooler resets are default, discard-all, none",
        ),
        (&["--pooler-reset", "none"], "--pooler"),
        (&["--pg-setting", "idle_session_timeout"], "key=value"),
        (&["--pg-setting", "=1s"], "key=value"),
    ];
    for (args, needle) in cases {
        let all = [
            &["run", "--topology", "postgres", "-s", "pg-advisory"],
            args,
        ]
        .concat();
        let out = common::cli::assert_refused(&all, &results, needle);
        assert_eq!(out.status.code(), Some(2), "{all:?}");
    }
    let out = common::cli::assert_refused(
        &["run", "--topology", "single", "--pooler", "pgbouncer"],
        &results,
        "--pooler needs topology postgres",
    );
    assert_eq!(out.status.code(), Some(2));
    // The same in a scenario file: refused with file:line and the valid values.
    let shipped = std::fs::read_to_string(common::cli::shipped_scenario(
        "15-pg-advisory-transaction-pooler.toml",
    ))
    .unwrap();
    for (from, to, needle) in [
        (
            "pool_mode = \"transaction\"",
            "pool_mode = \"statement\"",
            "expected `session` or `transaction`",
        ),
        ("pool_size = 2", "pool_size = 0", "at least 1"),
        (
            "pool_size = 2",
            "pool_size = 2\nreset = \"always\"",
            "`default`, `discard-all`, `none`",
        ),
        ("kind = \"pgbouncer\"", "kind = \"pgpool\"", "`pgbouncer`"),
        (
            "[pooler]",
            "pg_settings = [\"nokey\"]\n[pooler]",
            "key=value",
        ),
        (
            "[pooler]\nkind = \"pgbouncer\"\npool_mode = \"transaction\"\npool_size = 2\n",
            "[[nemesis]]\nat = \"1s\"\nduration = \"1s\"\nfault = \"partition\"\ntarget = \"n1\"\nlink = \"server\"\n",
            "add a `[pooler]` table",
        ),
    ] {
        assert!(shipped.contains(from), "{from}");
        let file = tmp.path().join("bad.toml");
        std::fs::write(&file, shipped.replace(from, to)).unwrap();
        let out = common::cli::assert_refused(&["chaos", file.to_str().unwrap()], &results, needle);
        assert_eq!(out.status.code(), Some(2), "{to}");
        let (_, stderr) = common::cli::text(&out);
        assert!(stderr.contains("bad.toml:"), "{stderr}");
    }
}

/// Claim 15 once: session locks through a transaction pooler give two holders, and the
/// unlocks that reach another server session are lost leases in the history (release `fail`,
/// "not owner"), never releases; `pg-advisory-xact` stays valid through the same pooler.
#[test]
fn claim_15_session_locks_break_through_a_transaction_pooler_and_xact_locks_do_not() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = common::cli::copy_shipped_scenarios(
        tmp.path(),
        &["15-pg-advisory-transaction-pooler.toml"],
    );
    let results = tmp.path().join("results");
    let out = run_in(["chaos", dir.to_str().unwrap()], &results);
    let (stdout, _) = common::cli::expect_success(&out, "claim 15");
    assert!(
        stdout.contains("2 expectation(s) as claimed, 0 not"),
        "{stdout}"
    );
    let run = common::cli::latest(&results).join("15-pg-advisory-transaction-pooler");
    let history = std::fs::read_to_string(run.join("pg-advisory/history.jsonl")).unwrap();
    let releases: Vec<serde_json::Value> = history
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|o| o["type"] == "op" && o["f"] == "release" && o["kind"] != "invoke")
        .collect();
    let lost = releases
        .iter()
        .filter(|o| {
            o["kind"] == "fail" && o["error"].as_str().is_some_and(|m| m.contains("not owner"))
        })
        .count();
    assert!(
        lost > 0 && lost < releases.len(),
        "{lost} of {} releases found the lease lost",
        releases.len()
    );
    common::process::assert_none_running_under(&run);
}

/// One `SELECT 1` through `url`, bounded by 2 s.
async fn select_one(url: &str) -> Result<(), String> {
    tokio::time::timeout(Duration::from_secs(2), async {
        let (db, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .map_err(|e| e.to_string())?;
        let task = tokio::spawn(connection);
        let answer = db.simple_query("SELECT 1").await.map_err(|e| e.to_string());
        drop(db);
        let _ = task.await;
        answer.map(|_| ())
    })
    .await
    .map_err(|_| "no answer within 2 s".to_string())?
}

/// Behind the proxies, the clients reach PgBouncer through `n1` and PgBouncer reaches the
/// server through `n1-server`: cutting `n1-server` (`link = "server"`) cuts PgBouncer off from
/// the server while the clients still reach PgBouncer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxies_sit_on_both_sides_of_pgbouncer() {
    let tmp = tempfile::tempdir().unwrap();
    let options = LocalTopologyOptions {
        pooler: Some(PoolerSettings::pgbouncer(PoolMode::Transaction)),
        ..LocalTopologyOptions::new(tmp.path())
    };
    let proxied = lockbench::topology::ProxiedTopology::start(
        TopologyKind::Postgres,
        &options,
        &lockbench::topology::ProxyOptions::default(),
    )
    .await
    .unwrap();
    let pooler = proxied.topology().pooler().expect("a pooler");
    let client = &proxied.client_links()[0];
    assert_eq!(
        (client.proxy.as_str(), client.upstream.clone()),
        ("n1", format!("127.0.0.1:{}", pooler.port()))
    );
    let server = &proxied.replication_links()[0];
    let server_port = proxied.topology().local_nodes()[0].port();
    assert_eq!(
        (server.proxy.as_str(), server.upstream.clone()),
        ("n1-server", format!("127.0.0.1:{server_port}"))
    );
    let ini = std::fs::read_to_string(pooler.dir().join("pgbouncer.ini")).unwrap();
    let (_, listen_port) = server.listen.rsplit_once(':').unwrap();
    assert!(ini.contains(&format!("port={listen_port} ")), "{ini}");
    let url = proxied.endpoints()[0].url.clone();
    select_one(&url).await.expect("through both proxies");
    proxied.api().set_enabled("n1-server", false).await.unwrap();
    let cut = select_one(&url).await;
    assert!(cut.is_err(), "PgBouncer still reached the server: {cut:?}");
    proxied.api().set_enabled("n1-server", true).await.unwrap();
    common::wait::wait_for_async(
        Duration::from_secs(10),
        "PgBouncer back at the server",
        || {
            let url = url.clone();
            async move { select_one(&url).await.ok() }
        },
    )
    .await;
    proxied.shutdown().await;
    common::process::assert_none_running_under(tmp.path());
}
