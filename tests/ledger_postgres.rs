//! The ledger on PostgreSQL (`--ledger`), against real `postgres` and `redis-server` processes:
//! the same steps give the same rows as the SQLite ledger; a fault-free run is `valid` and its
//! ledger counts the summary's sections; the negative control is caught; the checker reads the
//! PostgreSQL rows in their commit order; an unreachable database is refused before anything
//! starts.

mod common;

use std::path::Path;
use std::time::Duration;

use common::cli::{assert_refused, expect_code, latest, run_in, spawn_in, summary, summary_so_far};
use common::node::start_topology;
use common::process::{assert_all_gone, assert_none_running_under, pids_under, signal, wait_exit};
use common::wait::wait_for;
use lockbench::checker::{AnomalyKind, Verdict};
use lockbench::driver::{DriverContext, HoldTime, Pacing, StopCondition, Workload};
use lockbench::history::RunClock;
use lockbench::ledger::{
    FenceMode, Ledger, LedgerBackend, LedgerEvent, LedgerFile, PgLedgerUrl, SectionRef, Step,
};
use lockbench::node::ConnectOptions;
use lockbench::orchestration::experiment::{self, Nemesis, NemesisStart};
use lockbench::strategy::{RetryPolicy, StrategyKind, StrategyOptions};
use lockbench::topology::{LocalNode, LocalNodeConfig, ServerProgram, TopologyKind};

/// A `postgres` server of this test's own in `dir`, and a client on it.
async fn start_postgres(dir: &Path) -> (LocalNode, String, tokio_postgres::Client) {
    let config = LocalNodeConfig {
        program: ServerProgram::Postgres,
        ..LocalNodeConfig::new("pg")
    };
    let node = LocalNode::start(&config, dir)
        .await
        .expect("postgres starts");
    let url = node.endpoint().url;
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connects");
    tokio::spawn(conn);
    (node, url, client)
}

/// Every event of a finished ledger file, in commit order.
fn events(path: &Path) -> Vec<LedgerEvent> {
    let f = LedgerFile::open(path).unwrap();
    let mut out = Vec::new();
    f.for_each_event(|e| out.push(e)).unwrap();
    out
}

/// A value of the copy's `meta` table.
fn meta(path: &Path, key: &str) -> Option<String> {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .ok()
}

fn section(
    id: u64,
    client: u32,
    resource: &str,
    token: Option<u64>,
    key: Option<&str>,
) -> SectionRef {
    SectionRef {
        section_id: id,
        client,
        resource: resource.into(),
        fencing_token: token,
        idempotency_key: key.map(str::to_string),
    }
}

/// Drives `ledger` through a fixed script: serial sections, two overlapping ones, a stale
/// token, a duplicate idempotency key, a tokenless section and a crash, with awaited steps
/// between queued ones (so batches are cut in the middle of sections).
async fn script(ledger: &Ledger) {
    for id in 0..5 {
        let s = section(id, 0, "r", Some(10 + id), None);
        ledger.enter(&s);
        ledger.leave(&s);
    }
    // Two overlapping sections on q; the lower token loses its write.
    let (a, b) = (
        section(20, 1, "q", Some(30), None),
        section(21, 2, "q", Some(31), None),
    );
    ledger.enter(&a);
    ledger.enter(&b);
    ledger.leave(&b);
    ledger.leave(&a);
    // An awaited section: its read sees what the queued ones left.
    let c = section(22, 3, "q", Some(32), Some("k1"));
    assert!(ledger.begin(&c).await.unwrap().accepted);
    assert_eq!(ledger.read(&c).await.unwrap(), 1);
    assert!(ledger.write(&c, 2).await.unwrap().accepted);
    let dup = ledger.write(&c, 3).await.unwrap();
    assert!(!dup.accepted, "a second write with key k1 is a duplicate");
    ledger.end(&c, false).await.unwrap();
    // A stale begin, a tokenless section (refused), a crash inside a section.
    assert!(
        !ledger
            .begin(&section(23, 4, "q", Some(1), None))
            .await
            .unwrap()
            .accepted
    );
    let none = section(24, 5, "r", None, None);
    ledger.enter(&none);
    ledger.leave(&none);
    let d = section(25, 6, "s", Some(40), None);
    ledger.enter(&d);
    ledger.end(&d, true).await.unwrap();
}

async fn close(ledger: &Ledger) -> u64 {
    let l = ledger.clone();
    tokio::task::spawn_blocking(move || l.close())
        .await
        .unwrap()
        .unwrap();
    ledger.failed_steps()
}

/// An event without its time (the two ledgers stamp their own clocks).
fn timeless(e: &LedgerEvent) -> LedgerEvent {
    LedgerEvent {
        time_us: 0,
        ..e.clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_steps_give_the_same_rows_on_sqlite_and_postgres() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut pg, url, client) = start_postgres(tmp.path()).await;
    let sqlite_path = tmp.path().join("sqlite.sqlite");
    let copy_path = tmp.path().join("copy.sqlite");
    let sqlite = Ledger::open(&sqlite_path, FenceMode::Fenced, RunClock::start()).unwrap();
    let backend = LedgerBackend::Postgres(PgLedgerUrl::parse(&url).unwrap());
    let postgres = backend
        .prepare(&copy_path, FenceMode::Fenced)
        .await
        .unwrap()
        .start(RunClock::start())
        .unwrap();
    script(&sqlite).await;
    script(&postgres).await;
    // The tokenless section's begin and write are refused by both.
    assert_eq!(close(&sqlite).await, 2);
    assert_eq!(close(&postgres).await, 2);

    let (want, got) = (events(&sqlite_path), events(&copy_path));
    assert_eq!(want.len(), 39, "{want:#?}");
    assert_eq!(
        want.iter().map(timeless).collect::<Vec<_>>(),
        got.iter().map(timeless).collect::<Vec<_>>()
    );
    let counters = LedgerFile::open(&copy_path).unwrap().counters().unwrap();
    assert_eq!(
        counters,
        LedgerFile::open(&sqlite_path).unwrap().counters().unwrap()
    );
    assert_eq!(
        counters,
        vec![("q".into(), 2), ("r".into(), 5), ("s".into(), 0)]
    );

    // The copy holds exactly the schema's rows, in its commit order, times included.
    let schema = meta(&copy_path, "postgres_schema").expect("the copy names its schema");
    assert!(schema.starts_with("lockbench_ledger_"), "{schema}");
    let rows = client
        .query(
            &format!("SELECT seq, time_us, step, accepted FROM {schema}.events ORDER BY seq"),
            &[],
        )
        .await
        .unwrap();
    let in_pg: Vec<(i64, u64, String, bool)> = rows
        .iter()
        .map(|r| (r.get(0), r.get::<_, i64>(1) as u64, r.get(2), r.get(3)))
        .collect();
    let in_copy: Vec<(i64, u64, String, bool)> = got
        .iter()
        .map(|e| (e.seq, e.time_us, e.step.to_string(), e.accepted))
        .collect();
    assert_eq!(in_pg, in_copy);
    pg.stop().await.unwrap();
}

#[test]
fn a_fault_free_run_on_a_started_postgres_ledger_is_valid_and_counts_every_section() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run_in(
        [
            "run",
            "--ledger",
            "postgres",
            "-s",
            "single,redlock",
            "--topology",
            "five",
            "-c",
            "8",
            "-r",
            "4",
            "--ops",
            "600",
            "--ttl",
            "2s",
            "--no-progress",
        ],
        tmp.path(),
    );
    expect_code(&out, 0, "fault-free run with --ledger postgres");
    let s = summary(tmp.path());
    let ledger = s["config"]["ledger"].as_str().unwrap();
    assert!(
        ledger.starts_with("postgres://lockbench@127.0.0.1:")
            && ledger.ends_with("(started by lockbench)"),
        "{ledger}"
    );
    let run = latest(tmp.path());
    for st in s["strategies"].as_array().unwrap() {
        let name = st["strategy"].as_str().unwrap();
        assert_eq!(st["check"]["verdict"], "valid", "{st}");
        let sections = st["critical_section"]["count"].as_u64().unwrap();
        assert!(sections > 100, "{st}");
        let copy = run.join(name).join("ledger.sqlite");
        let evs = events(&copy);
        let ended = evs.iter().filter(|e| e.step == Step::End).count() as u64;
        let written = evs
            .iter()
            .filter(|e| e.step == Step::Write && e.accepted)
            .count() as u64;
        assert_eq!((ended, written), (sections, sections), "{name}");
        let total: i64 = LedgerFile::open(&copy)
            .unwrap()
            .counters()
            .unwrap()
            .iter()
            .map(|(_, c)| c)
            .sum();
        assert_eq!(total as u64, sections, "{name}: no lost update");
        assert!(meta(&copy, "postgres_schema").is_some());
    }
    // The server lockbench started is gone.
    assert!(run.join("ledger-postgres").is_dir());
    assert_none_running_under(&run.join("ledger-postgres"));
}

#[test]
fn ctrl_c_stops_the_started_ledger_server_and_keeps_its_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = spawn_in(
        [
            "run",
            "--ledger",
            "postgres",
            "-c",
            "4",
            "--duration",
            "60s",
            "--no-progress",
        ],
        tmp.path(),
        std::process::Stdio::null(),
        std::process::Stdio::null(),
    );
    wait_for(
        Duration::from_secs(30),
        "a summary with acquisitions",
        || {
            let s = summary_so_far(tmp.path())?;
            (s["strategies"][0]["acquired"].as_u64()? > 0).then_some(())
        },
    );
    let run = latest(tmp.path());
    let server = pids_under(&run.join("ledger-postgres"));
    assert!(!server.is_empty(), "the ledger's postgres runs");
    signal(&child, libc::SIGINT);
    let status = wait_exit(&mut child, Duration::from_secs(30), "lockbench");
    assert_eq!(status.code(), Some(130));
    assert_eq!(summary(tmp.path())["status"], "interrupted");
    assert_all_gone(&server);
    assert_none_running_under(&run.join("ledger-postgres"));
    // What was committed before the interrupt was copied for the checker.
    assert!(!events(&run.join("single/ledger.sqlite")).is_empty());
}

#[test]
fn an_external_postgres_ledger_touches_nothing_else_in_its_database() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (mut pg, url, client) = rt.block_on(start_postgres(tmp.path()));
    rt.block_on(client.batch_execute(
        "CREATE TABLE public.events (seq int); INSERT INTO public.events VALUES (7); \
         CREATE SCHEMA meta; CREATE TABLE meta.resources (x int)",
    ))
    .unwrap();
    let results = tmp.path().join("results");
    let out = run_in(
        [
            "run",
            "--ledger",
            url.as_str(),
            "-c",
            "4",
            "--ops",
            "300",
            "--ttl",
            "2s",
            "--no-progress",
        ],
        &results,
    );
    expect_code(&out, 0, "run with --ledger <url>");
    let s = summary(&results);
    assert_eq!(s["config"]["ledger"], url.as_str());
    assert_eq!(s["strategies"][0]["check"]["verdict"], "valid");
    let copy = latest(&results).join("single/ledger.sqlite");
    let schema = meta(&copy, "postgres_schema").unwrap();
    rt.block_on(async {
        // The database's own tables are as they were; one schema was added and kept.
        let n: i64 = client
            .query_one("SELECT count(*) FROM public.events WHERE seq = 7", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 1);
        client
            .query_one("SELECT count(*) FROM meta.resources", &[])
            .await
            .unwrap();
        let schemas: Vec<String> = client
            .query(
                "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'lockbench%'",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(schemas, vec![schema.clone()]);
        let in_pg: i64 = client
            .query_one(&format!("SELECT count(*) FROM {schema}.events"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(in_pg as usize, events(&copy).len());
        pg.stop().await.unwrap();
    });
}

#[test]
fn an_unreachable_or_bad_ledger_url_is_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("postgres://bench:secret@127.0.0.1:{port}/ledgers");
    let out = assert_refused(
        &["run", "--ledger", &url],
        &tmp.path().join("r"),
        &format!("postgres://bench:***@127.0.0.1:{port}/ledgers cannot be reached"),
    );
    let (_, stderr) = expect_code(&out, 2, "unreachable ledger");
    assert!(!stderr.contains("secret"), "{stderr}");
    let out = assert_refused(
        &["run", "--ledger", "postgres://127.0.0.1/db"],
        &tmp.path().join("r"),
        "postgres://127.0.0.1/db: no user",
    );
    expect_code(&out, 2, "ledger URL without a user");
}

/// Pauses `clients` inside their sections from `at` for `length` (as in `checker_e2e`).
fn pause(clients: &'static [usize], at: Duration, length: Duration) -> Nemesis {
    Box::new(move |n: NemesisStart| {
        Box::pin(async move {
            tokio::time::sleep_until(n.start + at).await;
            for &c in clients {
                n.controls.set_paused(c, true);
            }
            tokio::time::sleep(length).await;
            for &c in clients {
                n.controls.set_paused(c, false);
            }
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn naive_del_under_pauses_is_caught_with_the_postgres_ledger() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut pg, url, _client) = start_postgres(tmp.path()).await;
    let topology = start_topology(TopologyKind::Single, &tmp.path().join("nodes")).await;
    let (_tx, shutdown) = tokio::sync::watch::channel(false);
    let ctx = DriverContext {
        endpoints: topology.endpoints(),
        client_endpoints: Vec::new(),
        connect: ConnectOptions::default(),
        workload: Workload {
            clients: 3,
            resources: 1,
            hold: HoldTime::Fixed(Duration::from_millis(10)),
            stop: StopCondition::Duration(Duration::from_secs(3)),
            pacing: Pacing::Closed,
            seed: 7,
            shared_connection: false,
            in_flight: Workload::DEFAULT_IN_FLIGHT,
            adapter_processes: None,
            work: lockbench::driver::WorkKind::Row,
            idempotency_key: false,
        },
        shutdown,
        connect_progress: None,
    };
    let mut opts = StrategyOptions::new(StrategyKind::NaiveDel, Duration::from_millis(150));
    opts.key_prefix = "pgledger:naive-del:".into();
    opts.retry = RetryPolicy {
        attempts: 1000,
        delay: Duration::from_millis(5),
        jitter: Duration::from_millis(5),
        acquire_timeout: Some(Duration::from_millis(500)),
    };
    let dir = tmp.path().join("run/naive-del");
    let backend = LedgerBackend::Postgres(PgLedgerUrl::parse(&url).unwrap());
    let nemesis = pause(
        &[0, 1],
        Duration::from_millis(200),
        Duration::from_millis(1300),
    );
    let outcome =
        experiment::run_with_ledger(&ctx, &opts, &dir, true, &backend, Some(nemesis), |_, _| {})
            .await
            .unwrap();
    topology.shutdown().await;
    let r = outcome.check.expect("audited");
    assert_eq!(r.verdict, Verdict::Invalid, "{:?}", r.stats);
    assert!(r.stats.mutex_violations > 0, "{:?}", r.stats);
    assert!(r.of_kind(AnomalyKind::MutexViolation).next().is_some());
    assert!(meta(&dir.join("ledger.sqlite"), "postgres_schema").is_some());
    pg.stop().await.unwrap();
}
