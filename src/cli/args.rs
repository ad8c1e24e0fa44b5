//! clap definitions. Values are parsed into the library's types here, so a bad strategy
//! name or duration is rejected before any process starts.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use lockbench::driver::workload::parse_duration;
use lockbench::driver::HoldTime;
use lockbench::strategy::StrategyKind;
use lockbench::topology::{Persistence, TopologyKind};

/// Benchmark and chaos-test distributed locks built on Redis.
#[derive(Debug, Parser)]
#[command(name = "lockbench", version, about, long_about = None)]
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
    /// Serve the embedded Toxiproxy-compatible HTTP API (for containers or other tools).
    Toxiproxy(super::toxiproxy::ToxiproxyArgs),
    /// Re-check saved results and rewrite checker.json and summary.json's verdicts.
    /// Exit code: 0 all valid, 1 any invalid, 3 any unknown (none invalid), 2 cannot check.
    Check(super::check::CheckArgs),
    /// Write each run's report.html and a comparison.html across the runs.
    Report(super::report::ReportArgs),
}

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

/// A comma-separated list of strategy names, parsed up front.
#[derive(Debug, Clone)]
pub struct StrategyList(pub Vec<StrategyKind>);

fn strategies(s: &str) -> Result<StrategyList, String> {
    s.split(',')
        .map(|name| {
            name.trim()
                .parse::<StrategyKind>()
                .map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()
        .map(StrategyList)
}

/// Options of `lockbench run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Topology: single (1 local node), five (5 independent local nodes), sentinel (primary, 2 replicas, 3 sentinels), external (--url ...).
    #[arg(long, default_value = "single")]
    pub topology: TopologyKind,
    /// Node URL for --topology external (redis:// or rediss://, ACL user:password allowed). Repeat per node.
    #[arg(long = "url")]
    pub urls: Vec<String>,
    /// Persistence of local nodes: none or aof-always (appendfsync always).
    #[arg(long, default_value = "none")]
    pub persistence: Persistence,
    /// Prefix of every key written.
    #[arg(long, default_value = "lockbench:")]
    pub key_prefix: String,
    /// Strategies, comma-separated: single, single-fenced, redlock, redlock-fenced, naive-del, get-then-del, no-ttl.
    #[arg(long, short = 's', default_value = "single", value_parser = strategies)]
    pub strategy: StrategyList,
    /// Concurrent clients.
    #[arg(long, short = 'c', default_value_t = 16)]
    pub clients: u32,
    /// Distinct resources (fewer = more contention).
    #[arg(long, short = 'r', default_value_t = 16)]
    pub resources: u32,
    /// Time inside the critical section: fixed (10ms) or a range (5ms..20ms).
    #[arg(long, default_value = "0ms")]
    pub hold: HoldTime,
    /// Lease TTL, a whole number of ms. At least 4ms with the default drift factor: validity =
    /// TTL − (TTL × drift factor + 2ms) must leave 1ms; shorter TTLs are rejected with the minimum.
    #[arg(long, default_value = "1s", value_parser = duration)]
    pub ttl: Duration,
    /// Run time per strategy (ignored when --ops is given).
    #[arg(long, short = 'd', default_value = "5s", value_parser = duration)]
    pub duration: Duration,
    /// Stop after this many acquire attempts per strategy instead of after --duration.
    #[arg(long)]
    pub ops: Option<u64>,
    /// Open loop at this total rate (ops/s); latency is measured from the intended start.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Seed for resource choice and hold times.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Share one connection per node among all clients (default: one per client per node).
    #[arg(long)]
    pub shared_connection: bool,
    /// Acquire attempts per operation (1 = no retry).
    #[arg(long, default_value_t = 3)]
    pub retry_attempts: u32,
    /// Delay between attempts.
    #[arg(long, default_value = "5ms", value_parser = duration)]
    pub retry_delay: Duration,
    /// Random extra delay, uniform in [0, jitter].
    #[arg(long, default_value = "5ms", value_parser = duration)]
    pub retry_jitter: Duration,
    /// Give up an acquire after this long, whatever retries remain.
    #[arg(long, value_parser = duration)]
    pub acquire_timeout: Option<Duration>,
    /// Renew held leases every TTL/3.
    #[arg(long)]
    pub watchdog: bool,
    /// Redlock clock-drift factor: drift = TTL × factor + 2 ms.
    #[arg(long, default_value_t = 0.01)]
    pub drift_factor: f64,
    /// Per-node operation timeout, connect included (default: TTL/10, at least 1ms, at most 500ms).
    #[arg(long, value_parser = duration)]
    pub node_timeout: Option<Duration>,
    /// TCP connect timeout.
    #[arg(long, default_value = "1s", value_parser = duration)]
    pub connect_timeout: Duration,
    /// Reply timeout per command (the redis crate's own default is 500ms).
    #[arg(long, default_value = "500ms", value_parser = duration)]
    pub response_timeout: Duration,
    /// Root directory for results.
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
    /// Never draw a progress bar.
    #[arg(long)]
    pub no_progress: bool,
}
