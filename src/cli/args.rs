//! clap definitions. Values are parsed into the library's types here, so a bad strategy
//! name or duration is rejected before any process starts.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use lockbench::driver::workload::parse_duration;
use lockbench::driver::HoldTime;
use lockbench::orchestration::test::defaults;
use lockbench::strategy::{PgPoolRecycle, StrategyKind};
use lockbench::topology::{Persistence, PoolMode, PoolReset, PoolerKind, TopologyKind};

/// Every subcommand's exit codes (docs/exit-codes.md).
const EXIT_CODES: &str = "\
Exit codes (every subcommand):
  0  done: every verdict valid, every claim as claimed, no regression
  1  done, with a finding: a verdict invalid (run, check), a claim not met (chaos),
     a regression (report --baseline)
  2  bad input: arguments, scenario files, URLs, result directories; nothing was started
  3  done, but some verdict is unknown (evidence missing or cut) and none is invalid
  4  failed while running (node unreachable or refusing, no Docker engine, process died,
     file not writable once started)
  130/143  interrupted by SIGINT/SIGTERM (partial results kept, nothing judged)";

/// Benchmark and chaos-test distributed locks built on Redis.
#[derive(Debug, Parser)]
#[command(name = "lockbench", version, about, long_about = None, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Benchmark one or more strategies on a topology and write results/<run-id>/.
    Run(Box<RunArgs>),
    /// Run chaos scenarios (a chaos/*.toml file or a directory of them) and compare verdicts with the claims.
    Chaos(super::chaos::ChaosArgs),
    /// Run every strategy against every fault class on one workload, trials per cell until it has enough exposed fault episodes; write matrix.html, the claims agreement and the decision table.
    Matrix(Box<super::matrix::MatrixArgs>),
    /// Serve the embedded Toxiproxy-compatible HTTP API (for containers or other tools).
    Toxiproxy(super::toxiproxy::ToxiproxyArgs),
    /// Re-check saved results and rewrite checker.json and summary.json's verdicts.
    Check(super::check::CheckArgs),
    /// Write each run's report.html and a comparison.html across the runs.
    Report(super::report::ReportArgs),
    /// Lock-client adapters (docs/adapter-protocol.md): `adapter check <strategy>` runs the conformance script.
    Adapter(super::adapter::AdapterArgs),
    /// Run one share of a multi-worker run's clients for a coordinator (`run --workers N`
    /// starts these itself; docs/workers.md).
    Worker(super::worker::WorkerArgs),
}

/// Any duration, zero included (`--metrics-linger`).
pub(super) fn any_duration(s: &str) -> Result<Duration, String> {
    duration(s)
}

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// A duration flag whose default comes from [`defaults`] and shows in `--help`.
fn shown_duration(s: &str) -> Result<humantime::Duration, String> {
    duration(s).map(Into::into)
}

/// [`shown_duration`] above zero.
fn shown_positive_duration(s: &str) -> Result<humantime::Duration, String> {
    positive_duration(s).map(Into::into)
}

/// A duration above zero (`--ttl`, `--duration`, timeouts).
pub(super) fn positive_duration(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d.is_zero() {
        return Err("must be above 0 (e.g. 500ms, 2s)".into());
    }
    Ok(d)
}

/// A count of at least 1 (`--clients`, `--resources`, `--retry-attempts`, `--trials`). With
/// `allow_negative_numbers` on the flag, `-3` reaches this parser and is refused with the
/// bound instead of being read as an unknown flag.
pub(super) fn count(s: &str) -> Result<u32, String> {
    match s.trim().parse::<i64>() {
        Ok(n) if n < 1 => Err(format!("must be at least 1, not {n}")),
        Ok(n) => u32::try_from(n).map_err(|_| format!("must be at most {}", u32::MAX)),
        Err(_) => Err("must be a whole number, at least 1".into()),
    }
}

/// `--adapter-processes`: a [`count`], or `cores` (the flag without a value): one per CPU
/// core this process may use.
pub(crate) fn work_kind(s: &str) -> Result<lockbench::driver::WorkKind, String> {
    s.parse().map_err(|_| {
        let names: Vec<&str> = <lockbench::driver::WorkKind as strum::VariantArray>::VARIANTS
            .iter()
            .map(|w| w.into())
            .collect();
        format!(
            "unknown work kind {s:?} (expected one of: {})",
            names.join(", ")
        )
    })
}

fn adapter_processes(s: &str) -> Result<u32, String> {
    if s.trim() == "cores" {
        return Ok(std::thread::available_parallelism().map_or(1, |c| c.get() as u32));
    }
    count(s).map_err(|e| format!("{e} (or `cores`: one per CPU core)"))
}

/// [`count`] for `u64` flags (`--ops`).
/// `key=value`, checked as the test checks it.
fn pg_setting(s: &str) -> Result<String, String> {
    lockbench::orchestration::test::check_pg_setting(s)?;
    Ok(s.trim().to_string())
}

fn count64(s: &str) -> Result<u64, String> {
    match s.trim().parse::<i128>() {
        Ok(n) if n < 1 => Err(format!("must be at least 1, not {n}")),
        Ok(n) => u64::try_from(n).map_err(|_| format!("must be at most {}", u64::MAX)),
        Err(_) => Err("must be a whole number, at least 1".into()),
    }
}

/// A positive, finite rate in ops/s.
fn rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err("must be a positive number of ops/s (e.g. 0.5, 5000)".into()),
    }
}

/// A fraction in [0, 1).
fn drift_factor(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(f) if (0.0..1.0).contains(&f) => Ok(f),
        _ => Err("must be in [0, 1), e.g. 0.01".into()),
    }
}

/// Examples shown under `lockbench run --help`.
const RUN_EXAMPLES: &str = "\
Examples:
  lockbench run -s single,redlock --topology five -c 32 -r 8 --hold 1ms --ttl 2s -d 10s
  lockbench run -s single --rate 5000 -d 30s           # open loop at 5000 ops/s
  lockbench run -s single --hold 2s --ttl 1s           # leases expire inside the section
  lockbench run --topology external --url redis://10.0.0.5:6379 --key-prefix bench: -s single

Exit codes: 0 all verdicts valid, 1 some verdict invalid, 2 bad input, 3 some verdict unknown,
4 failed while running, 130/143 interrupted (see docs/exit-codes.md).";

/// A comma-separated list of strategy names, parsed up front.
#[derive(Debug, Clone)]
pub struct StrategyList(pub Vec<StrategyKind>);

fn strategies(s: &str) -> Result<StrategyList, String> {
    s.split(',')
        .map(strategy_name)
        .collect::<Result<_, _>>()
        .map(StrategyList)
}

/// One strategy name (surrounding spaces ignored).
pub(super) fn strategy_name(s: &str) -> Result<StrategyKind, String> {
    s.trim().parse::<StrategyKind>().map_err(|e| e.to_string())
}

/// Options of `lockbench run`.
#[derive(Debug, Args)]
#[command(after_help = RUN_EXAMPLES)]
pub struct RunArgs {
    /// Topology: single (1 local node), five (5 independent local nodes), sentinel (primary, 2 replicas, 3 sentinels), postgres (1 local PostgreSQL server, for pg-advisory*), etcd (3 local etcd members, for etcd-lease), cluster (a local Redis Cluster: --shards primaries with one replica each, default 3), external (--url ..., or --cluster seeds).
    #[arg(long, default_value = "single")]
    pub topology: TopologyKind,
    /// Node URL for --topology external (redis:// or rediss://, ACL user:password allowed; postgres://user@host/db for pg-advisory*; http://host:2379 per etcd member for etcd-lease). Repeat per node.
    #[arg(long = "url")]
    pub urls: Vec<String>,
    /// --topology external: seed URLs of a Redis Cluster lockbench did not start
    /// (redis:// or rediss://, comma-separated or repeated; instead of --url). Clients read the
    /// slot map from them and follow MOVED/ASK. Needs --direct.
    #[arg(long = "cluster", value_name = "URL[,URL…]", value_delimiter = ',')]
    pub cluster_seeds: Vec<String>,
    /// --topology external with rediss:// URLs: trust the CA certificate(s) in this PEM file
    /// instead of the system's roots. Read and parsed before anything starts.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// Mutual TLS: the client certificate (PEM) presented to the rediss:// nodes; needs
    /// --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Mutual TLS: the client certificate's private key (PEM); needs --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Persistence of local nodes: none or aof-always (appendfsync always).
    #[arg(long, default_value = "none")]
    pub persistence: Persistence,
    /// Prefix of every key written (lock keys and fencing counters). Must not be empty with
    /// --topology external: lockbench INCRs its fence counters under it in your keyspace.
    #[arg(long, default_value = defaults::KEY_PREFIX)]
    pub key_prefix: String,
    /// A pooler between the clients and the PostgreSQL server of --topology postgres:
    /// pgbouncer (started by lockbench in the run directory; the client proxy leads to it).
    #[arg(long)]
    pub pooler: Option<PoolerKind>,
    /// The pooler's pool mode: session or transaction (default transaction).
    #[arg(long, requires = "pooler")]
    pub pool_mode: Option<PoolMode>,
    /// Server connections the pooler opens at most, at least 1 (default 20, PgBouncer's own).
    #[arg(long, requires = "pooler", value_parser = count, allow_negative_numbers = true)]
    pub pool_size: Option<u32>,
    /// What the pooler runs on a server connection it takes back: default (PgBouncer's own:
    /// DISCARD ALL when a session-mode client disconnects), discard-all (DISCARD ALL every
    /// time, both pool modes), none (a returned connection keeps its session's advisory locks).
    #[arg(long, requires = "pooler")]
    pub pooler_reset: Option<PoolReset>,
    /// PostgreSQL strategies: the clients borrow a connection per operation from one
    /// application-side pool of N connections (deadpool-postgres), as web applications do,
    /// instead of keeping a session each. Runs pg-advisory and pg-advisory-wait.
    #[arg(long, value_name = "N", value_parser = count, allow_negative_numbers = true)]
    pub pg_pool: Option<u32>,
    /// What the --pg-pool pool does to a connection before lending it again: fast (nothing:
    /// its advisory locks stay with it) or clean (reset, pg_advisory_unlock_all()).
    #[arg(long, requires = "pg_pool")]
    pub pg_pool_recycle: Option<PgPoolRecycle>,
    /// A setting of the PostgreSQL server of --topology postgres, key=value (passed as
    /// `postgres -c key=value`), e.g. idle_session_timeout=2s. Repeat per setting.
    #[arg(long = "pg-setting", value_name = "KEY=VALUE", value_parser = pg_setting)]
    pub pg_settings: Vec<String>,
    /// --topology cluster: primaries, each with one replica (3 to 50; default 3).
    #[arg(long, value_parser = count, allow_negative_numbers = true)]
    pub shards: Option<u32>,
    /// --topology cluster: `cluster-node-timeout`, how long a primary may be unreachable before
    /// a replica is promoted (default 1500ms).
    #[arg(long, value_parser = duration)]
    pub cluster_node_timeout: Option<std::time::Duration>,
    /// Strategies, comma-separated: single, single-fenced, redlock, redlock-fenced, naive-del, get-then-del, no-ttl, single-wait (topology sentinel or cluster), setnx-expire, unchecked-extend, pg-advisory, pg-advisory-fenced, pg-advisory-xact, pg-advisory-wait (topology postgres), etcd-lease (topology etcd).
    /// Default: single (adapter:command alone with --adapter).
    #[arg(long, short = 's', value_parser = strategies)]
    pub strategy: Option<StrategyList>,
    /// A lock-client adapter of your own as the strategy `adapter:command`: its command line,
    /// quoted as one argument ('python3 my_adapter.py --flag'; split as a POSIX shell would,
    /// no shell is run). It must speak docs/adapter-protocol.md (its hello is checked when it
    /// starts). Runs alone unless --strategy names others too.
    #[arg(long, value_name = "COMMAND")]
    pub adapter: Option<String>,
    /// Concurrent clients (at least 1).
    #[arg(long, short = 'c', default_value_t = 16, value_parser = count, allow_negative_numbers = true)]
    pub clients: u32,
    /// Distinct resources, at least 1 (fewer = more contention).
    #[arg(long, short = 'r', default_value_t = 16, value_parser = count, allow_negative_numbers = true)]
    pub resources: u32,
    /// Time inside the critical section: fixed (10ms) or a range (5ms..20ms).
    #[arg(long, default_value = "0ms")]
    pub hold: HoldTime,
    /// Lease TTL, a whole number of ms. At least 4ms with the default drift factor: validity =
    /// TTL − (TTL × drift factor + 2ms) must leave 1ms; shorter TTLs are rejected with the minimum.
    #[arg(long, default_value = "1s", value_parser = positive_duration)]
    pub ttl: Duration,
    /// Run time per strategy (ignored when --ops is given). Sections still inside at the end
    /// get a grace period to finish; those cut are counted and reported.
    #[arg(long, short = 'd', default_value = "5s", value_parser = positive_duration)]
    pub duration: Duration,
    /// Stop after this many acquire attempts per strategy (at least 1) instead of after --duration.
    #[arg(long, value_parser = count64, allow_negative_numbers = true)]
    pub ops: Option<u64>,
    /// Open loop at this total rate (ops/s, above 0); latency is measured from the intended
    /// start. No attempt starts after --duration.
    #[arg(long, value_parser = rate, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Seed for resource choice and hold times.
    #[arg(long, default_value_t = defaults::SEED)]
    pub seed: u64,
    /// Share one connection per node among all clients (default: one per client per node).
    #[arg(long)]
    pub shared_connection: bool,
    /// `adapter:*` strategies: serve the clients from N adapter processes (client i by process
    /// i mod N, each running its clients concurrently) instead of one process per client.
    /// Without a value (or `cores`): one per CPU core. Refused with faults that act on one
    /// client's process (client-crash, client-pause, a partition of clients).
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "cores",
          value_parser = adapter_processes, allow_negative_numbers = true,
          conflicts_with = "shared_connection")]
    pub adapter_processes: Option<u32>,
    /// Most acquire operations in flight at once (0 = no limit). With more clients, the rest
    /// wait for a slot and that wait counts in their acquire latency; holders never wait. Keeps
    /// the harness's own queueing out of leases and timeouts at thousands of clients.
    #[arg(long, default_value_t = lockbench::driver::Workload::DEFAULT_IN_FLIGHT)]
    pub in_flight: u32,
    /// What each critical section protects: `row` (the fenced ledger row; default), `compute`
    /// (a duplicate is waste: jobs computed twice are counted, never `invalid`), `external`
    /// (one call per section to a side-effect sink, a "payment API" lockbench starts on
    /// loopback that cannot check a fencing token; judged by rule 7, `duplicate-effect`) or
    /// `job` (a queue of jobs each done once; the claim strategies need it).
    #[arg(long, default_value = "row", value_parser = work_kind)]
    pub work: lockbench::driver::WorkKind,
    /// `--work external` or `job`: every call carries an idempotency key derived from the job, so the
    /// sink applies a job once and answers a repeat with the first charge.
    #[arg(long)]
    pub idempotency_key: bool,
    /// Acquire attempts per operation, at least 1 (1 = no retry).
    #[arg(long, default_value_t = defaults::retry().attempts, value_parser = count, allow_negative_numbers = true)]
    pub retry_attempts: u32,
    /// Delay between attempts.
    #[arg(long, default_value_t = defaults::retry().delay.into(), value_parser = shown_duration)]
    pub retry_delay: humantime::Duration,
    /// Random extra delay, uniform in [0, jitter].
    #[arg(long, default_value_t = defaults::retry().jitter.into(), value_parser = shown_duration)]
    pub retry_jitter: humantime::Duration,
    /// Give up an acquire after this long, whatever retries remain.
    #[arg(long, value_parser = positive_duration)]
    pub acquire_timeout: Option<Duration>,
    /// Renew held leases every TTL/3.
    #[arg(long)]
    pub watchdog: bool,
    /// Redlock clock-drift factor in [0, 1): drift = TTL × factor + 2 ms.
    #[arg(long, default_value_t = defaults::DRIFT_FACTOR, value_parser = drift_factor)]
    pub drift_factor: f64,
    /// Per-node operation timeout, connect included (default: TTL/10, at least 1ms, at most 500ms).
    #[arg(long, value_parser = positive_duration)]
    pub node_timeout: Option<Duration>,
    /// TCP connect timeout per connection (many clients on a busy machine may need more).
    #[arg(long, default_value_t = defaults::connect().connect_timeout.into(), value_parser = shown_positive_duration)]
    pub connect_timeout: humantime::Duration,
    /// Reply timeout per command (the redis crate's own default is 500ms).
    #[arg(long, default_value_t = defaults::connect().response_timeout.into(), value_parser = shown_positive_duration)]
    pub response_timeout: humantime::Duration,
    /// Root directory for results (created if missing; must not be a file).
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
    /// Run name (part of the result directory name).
    #[arg(long)]
    pub name: Option<String>,
    /// Reach the nodes directly instead of through the embedded Toxiproxy (raw speed numbers;
    /// by default every node is behind a proxy, as in chaos runs).
    #[arg(long)]
    pub direct: bool,
    /// Skip history, ledger and checker (pure speed run; no verdict).
    #[arg(long)]
    pub no_audit: bool,
    /// Where the ledger lives: `sqlite` (default, `ledger.sqlite` per strategy), `postgres`
    /// (lockbench starts a postgres server in the run directory) or
    /// `postgres://user@host:port/db` (a schema of the run's own in that database; nothing
    /// else there is touched). A PostgreSQL ledger is copied into `ledger.sqlite` after each
    /// strategy, which the checker reads.
    #[arg(long, default_value = "sqlite", conflicts_with = "no_audit")]
    pub ledger: lockbench::orchestration::ledger_choice::LedgerChoice,
    /// Never draw a progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Rerun a past test exactly: read its resolved test from a run's `config.json` (same
    /// topology, strategies, workload, faults, seed, audit) and run it in a new directory.
    /// Its workers, launcher, ledger and (for a test `chaos` or `matrix` ran with
    /// `--backend docker`) container images are the recorded ones.
    /// Only --results, --name, --no-progress and --metrics may go with it. A chaos scenario's test is
    /// judged as `chaos` judges it: exit 0 when every expectation held, 1 when one did not.
    #[arg(long, value_name = "CONFIG_JSON", conflicts_with_all = [
        "topology", "urls", "cluster_seeds", "tls_ca", "tls_cert", "tls_key", "persistence", "key_prefix", "pooler", "pool_mode", "pool_size",
        "pooler_reset", "pg_pool", "pg_pool_recycle",
        "pg_settings", "shards", "cluster_node_timeout", "strategy", "clients", "resources",
        "hold", "ttl", "duration", "ops", "rate", "seed", "shared_connection", "in_flight",
        "adapter_processes", "work", "idempotency_key",
        "retry_attempts", "retry_delay", "retry_jitter", "acquire_timeout", "watchdog",
        "drift_factor", "node_timeout", "connect_timeout", "response_timeout", "direct",
        "no_audit", "adapter", "ledger", "workers", "launcher",
    ])]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub live: super::metrics::MetricsArgs,
    #[command(flatten)]
    pub workers: super::workers::WorkersArgs,
}

/// `--workers`, `--launcher` and `--ledger` of `chaos` and `matrix`: where each test's clients
/// run and where its ledger lives.
#[derive(Debug, clap::Args)]
pub struct CoordinatorArgs {
    /// Run every test's clients in N `lockbench worker` processes, in place of a scenario's
    /// own `workers = N`; each step is checked against it at its place in the file (`worker:I`
    /// must exist; `holder` and client ids are refused). The ledger becomes `postgres` unless
    /// --ledger names one. docs/workers.md.
    #[arg(long, value_name = "N", value_parser = count, allow_negative_numbers = true)]
    pub workers: Option<u32>,
    /// How --workers are started: processes (local subprocesses of this executable) or
    /// compose (containers of the default worker image, `docker/build-images.sh --only
    /// lockbench`, on the host's network); kubernetes is for `run`.
    #[arg(long, requires = "workers", default_value = "processes")]
    pub launcher: super::workers::WorkerLauncher,
    /// Where each test's ledger lives: `sqlite` (default; `postgres` for a test with workers),
    /// `postgres` (lockbench starts a server per test) or `postgres://user@host:port/db` (a
    /// schema of each strategy's own in that database).
    #[arg(long, default_value = "sqlite")]
    pub ledger: lockbench::orchestration::ledger_choice::LedgerChoice,
}

impl CoordinatorArgs {
    /// `--workers` as a test's workers (`None` without the flag), its launcher checked now
    /// (compose, the engine and the image there), before anything starts.
    ///
    /// # Errors
    /// `--launcher kubernetes` (only `run` takes it), or what the launcher lacks.
    pub fn spec(&self) -> Result<Option<lockbench::orchestration::test::WorkersSpec>, String> {
        let Some(workers) = self.workers else {
            return Ok(None);
        };
        let launcher = self.launcher.kind().ok_or_else(|| {
            format!(
                "--launcher {:?}: chaos and matrix start workers as processes or compose; \
                 an Indexed Job runs one `run` (see deploy/kubernetes/README.md)",
                self.launcher
            )
        })?;
        lockbench::orchestration::workers::launcher::Launcher::of_kind(launcher)
            .map_err(|e| format!("--launcher {launcher}: {e}"))?;
        Ok(Some(lockbench::orchestration::test::WorkersSpec {
            workers,
            launcher,
        }))
    }
}
