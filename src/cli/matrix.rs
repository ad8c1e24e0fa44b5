//! `lockbench matrix`: every selected strategy × every fault class on one workload, each cell
//! run as trials until it has the exposed fault episodes asked for (`--episodes`), written to
//! `results/<time>-matrix/` (matrix.json/.csv/.md/.html).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;

use lockbench::driver::HoldTime;
use lockbench::matrix::run::default_trial_bound;
use lockbench::matrix::{
    self, FaultClass, MatrixPlan, MatrixProgress, MatrixReport, MatrixRunOptions, MatrixStatus,
    MatrixWorkload, PgSetup, RedisSetup, TrialStatus,
};
use lockbench::orchestration::runner::Backend;
use lockbench::report::matrix_export::{
    claims_md, decision_md, matrix_table_md, probes_md, run_line, write_matrix_files,
};
use lockbench::results::RunDir;
use lockbench::strategy::StrategyKind;

use super::args::{positive_duration, strategy_name};
use super::chaos::BackendArgs;
use super::exit;
use super::signals::Shutdown;

/// Examples and exit codes under `lockbench matrix --help`.
const MATRIX_HELP: &str = "\
Fault classes (--faults; default all): none, latency, partition-minority, partition-holder,
crash-restart-empty, node-pause, clock-jump, client-pause, client-crash, session-loss,
failover, slow-work; on Redis Cluster rows also cluster-failover, cluster-failover-force,
cluster-failover-takeover, cluster-pause, cluster-minority-partition. Single-node strategies
run on one node (on Sentinel for failover) or on a cluster (--redis-setups); Redlock on five
nodes; PostgreSQL and etcd strategies on their own servers. matrix.html says what each fault did on each topology.

Episodes: a trial cycles its fault class (fault, heal, recovery gap); each cycle is an episode,
aimed at the lock's state (the holder inside, a live lease, an acquire in flight). An episode is
exposed when it met what it aimed at; only exposed episodes count. A cell runs trials until it
has --episodes exposed episodes or --max-trials trials; then k damaging of n exposed, with the
95 % interval (0 of 30 means < 10 %, 0 of 300 < 1 %).

Before the cells, each strategy's uncontended probe (one client, no hold) measures what its
acquire costs; the efficiency rule ranks by it.

matrix.toml (--config; every key optional, flags win):
  strategies = [\"single\", \"redlock-fenced\"]
  faults = [\"none\", \"client-pause\"]
  episodes = 30
  max_trials = 8
  jobs = 2
  clients = 4
  resources = 1
  hold = \"50ms\"
  ttl = \"500ms\"
  seed = 1
  pg_setups = [\"direct\", \"pgbouncer-transaction\"]
  redis_setups = [\"standalone\", \"cluster\"]
  cluster_node_timeout = \"1s\"

PostgreSQL setups (--pg-setups; default direct): each PostgreSQL strategy row is run once per
setup and labelled with it (pg-advisory · pgbouncer-transaction); other rows are unaffected.
  direct                       straight to the server, one session per client
  pgbouncer-session            PgBouncer, session mode, 20 server connections, DISCARD ALL on return
  pgbouncer-session-no-reset   the same without a reset (server_reset_query empty)
  pgbouncer-transaction        PgBouncer, transaction mode, 2 server connections
Claims 15 (transaction pooler), 17a (no reset) and 17b (DISCARD ALL) are judged only in a
matrix that runs their setup.

Redis setups (--redis-setups; default standalone): each single-node Redis strategy row (single,
single-fenced, single-wait, the controls) is run once per setup and labelled with it
(single · cluster); Redlock, PostgreSQL and etcd rows are unaffected.
  standalone   one node (Sentinel for failover and for single-wait)
  cluster      a Redis Cluster, 3 shards of a primary and a replica (--cluster-node-timeout,
               default 1s); every node fault aims at the primary of the lock's shard; failover
               kills it while its replication lags; five columns of its own: cluster-failover,
               cluster-failover-force, cluster-failover-takeover (CLUSTER FAILOVER in its three
               modes under the same lag), cluster-pause (that primary SIGSTOPped past the
               node timeout) and cluster-minority-partition (that primary cut off the cluster
               bus and its replica past the node timeout, the holder on its side, the other
               clients cut off it; needs root and nft). Without --faults a cluster matrix runs
               every column (cluster-minority-partition left out, with a warning, when this
               machine cannot cut the bus).
Claims 20a-20e and 20g (shard failover, the three CLUSTER FAILOVER modes, single-wait, a
primary cut off with the holder) are judged only in a matrix that runs the cluster rows.

Examples:
  lockbench matrix --quick                          # >= 10 exposed episodes per cell
  lockbench matrix                                  # >= 30 exposed episodes per cell
  lockbench matrix --episodes 300 --faults failover # < 1 % bound on a clean cell
  lockbench matrix --controls --faults none,client-pause,client-crash --jobs 1
  lockbench matrix --quick --strategies pg-advisory,pg-advisory-xact --faults none \\
      --pg-setups direct,pgbouncer-transaction   # claim 15 beside the direct rows
  lockbench matrix --quick --strategies single,single-fenced,single-wait \\
      --redis-setups standalone,cluster --faults none,failover,cluster-failover,cluster-failover-force
  lockbench matrix --quick --backend docker         # every cell in containers (docker/build-images.sh first)

Exit codes: 0 matrix complete and no cell contradicts a claim (invalid cells are results, not
errors), 1 some cell contradicts its claim (the summary and matrix.md say which), 2 bad input
(nothing started), 4 some trial failed to run, 130/143 interrupted (finished cells kept).";

/// Options of `lockbench matrix`.
#[derive(Debug, Args)]
#[command(after_help = MATRIX_HELP)]
pub struct MatrixArgs {
    /// Strategies (rows), comma-separated [default: single,single-fenced,redlock,redlock-fenced,
    /// pg-advisory,pg-advisory-fenced,etcd-lease: the Redis strategies next to the alternatives
    /// the reference articles name].
    #[arg(long, value_delimiter = ',', value_parser = strategy_name)]
    pub strategies: Option<Vec<StrategyKind>>,
    /// Add the negative controls naive-del, get-then-del, no-ttl, setnx-expire, unchecked-extend.
    #[arg(long)]
    pub controls: bool,
    /// How the PostgreSQL rows reach the server, comma-separated: direct, pgbouncer-session,
    /// pgbouncer-session-no-reset, pgbouncer-transaction; each PostgreSQL strategy is a row
    /// per setup [default: direct].
    #[arg(long, value_delimiter = ',', value_parser = pg_setup_name)]
    pub pg_setups: Option<Vec<PgSetup>>,
    /// How the single-node Redis rows (single, single-fenced, single-wait, the controls) are
    /// deployed, comma-separated: standalone (their own one node, Sentinel for failover and
    /// single-wait), cluster (a Redis Cluster of 3 shards, every node fault aimed at the lock's
    /// shard, and the cluster columns cluster-failover, cluster-failover-force,
    /// cluster-failover-takeover, cluster-pause, cluster-minority-partition); each such
    /// strategy is a row per setup
    /// [default: standalone].
    #[arg(long, value_delimiter = ',', value_parser = redis_setup_name)]
    pub redis_setups: Option<Vec<RedisSetup>>,
    /// cluster-node-timeout of the cluster rows' Redis Cluster: a primary unreachable that
    /// long is marked failing and its replica promoted [default: 1s].
    #[arg(long, value_parser = positive_duration)]
    pub cluster_node_timeout: Option<Duration>,
    /// Fault classes (columns), comma-separated [default: all].
    #[arg(long, value_delimiter = ',', value_parser = fault_name)]
    pub faults: Option<Vec<FaultClass>>,
    /// Exposed episodes wanted per cell [default: 30; 10 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub episodes: Option<u32>,
    /// Most trials per cell, each with its own seed, nodes and keys (a cell stops earlier once
    /// it has --episodes exposed episodes) [default per cell: twice the trials that would reach
    /// --episodes if every planned episode were exposed; a trial whose every exposed episode was
    /// set aside because the harness lagged does not count toward it, up to as many again].
    /// Given, it is kept to the letter. `--trials` is the old name.
    #[arg(long, alias = "trials", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_trials: Option<u32>,
    /// Trials running at once (of different cells, or of one cell that needs several more),
    /// each on its own thread, topology and ports; one fewer each time a trial's harness lags,
    /// one more again after 4 trials in a row without lag
    /// [default: 4 with 2 cores or more, else 1].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub jobs: Option<u32>,
    /// 10 exposed episodes per cell (and the quick workload), for a first look in minutes.
    #[arg(long)]
    pub quick: bool,
    /// Clients per trial [default: 4].
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..))]
    pub clients: Option<u32>,
    /// Distinct resources [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub resources: Option<u32>,
    /// Time inside the critical section: fixed (50ms) or a range (20ms..80ms) [default: 50ms].
    #[arg(long)]
    pub hold: Option<HoldTime>,
    /// Lease TTL (the acquire timeout is two TTLs, the node timeout a quarter) [default: 500ms].
    #[arg(long, value_parser = positive_duration)]
    pub ttl: Option<Duration>,
    /// Seed of trial 1 (trial t uses seed + t - 1) [default: 1].
    #[arg(long)]
    pub seed: Option<u64>,
    /// A matrix.toml with any of the settings above (flags override it).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Another report to link from matrix.html (e.g. the claim scenarios' comparison.html).
    #[arg(long, value_name = "HTML")]
    pub link_report: Option<PathBuf>,
    /// Root directory for results (created if missing; must not be a file).
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
    /// Never draw the progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Where each trial's nodes and Toxiproxy run (`--backend docker`: containers, Sentinel
    /// included, each trial on a network of its own).
    #[command(flatten)]
    pub backend: BackendArgs,
    #[command(flatten)]
    pub live: super::metrics::MetricsArgs,
    #[command(flatten)]
    pub coordinator: super::args::CoordinatorArgs,
}

fn fault_name(s: &str) -> Result<FaultClass, String> {
    s.parse()
}

fn pg_setup_name(s: &str) -> Result<PgSetup, String> {
    s.parse()
}

fn redis_setup_name(s: &str) -> Result<RedisSetup, String> {
    s.parse()
}

/// The rows on the start line: `7 strategies`, or the rows with the setups that repeat them.
fn rows_text(plan: &MatrixPlan) -> String {
    let rows = plan.rows().len();
    let mut per = Vec::new();
    if plan.pg_setups != [PgSetup::Direct] {
        let setups: Vec<&str> = plan.pg_setups.iter().map(|p| p.name()).collect();
        per.push(format!("PostgreSQL ones per setup: {}", setups.join(", ")));
    }
    if plan.redis_setups != [RedisSetup::Standalone] {
        let setups: Vec<&str> = plan.redis_setups.iter().map(|p| p.name()).collect();
        per.push(format!(
            "single-node Redis ones per setup: {}",
            setups.join(", ")
        ));
    }
    if per.is_empty() {
        format!("{rows} strategies")
    } else {
        format!(
            "{rows} rows ({} strategies, {})",
            plan.strategies.len(),
            per.join("; ")
        )
    }
}

/// `matrix.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MatrixFile {
    strategies: Option<Vec<String>>,
    faults: Option<Vec<String>>,
    pg_setups: Option<Vec<String>>,
    redis_setups: Option<Vec<String>>,
    cluster_node_timeout: Option<String>,
    episodes: Option<u32>,
    #[serde(alias = "trials")]
    max_trials: Option<u32>,
    jobs: Option<u32>,
    clients: Option<u32>,
    resources: Option<u32>,
    hold: Option<String>,
    ttl: Option<String>,
    seed: Option<u64>,
}

/// Exposed episodes per cell by default (`< 10 %` at 95 % when none is damaging).
pub const DEFAULT_EPISODES: u32 = 30;
/// Exposed episodes per cell with `--quick`.
pub const QUICK_EPISODES: u32 = 10;

/// Trials at once by default: 4 when the machine has 2 cores or more, else 1. A trial's 4
/// clients hold a lock most of the time and its nodes and proxy mostly wait (a trial uses a
/// few % of a core between its topology's start and its check), so 4 at once fit on 2 cores;
/// the matrix steps down one at a time whenever a trial's harness lags.
fn default_jobs() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores >= 2 {
        4
    } else {
        1
    }
}

impl MatrixArgs {
    /// The plan and how to run it: defaults (or --quick), then matrix.toml, then flags;
    /// validated.
    fn plan(&self, backend: Backend) -> Result<(MatrixPlan, MatrixRunOptions), String> {
        let file = match &self.config {
            None => MatrixFile::default(),
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| format!("{}: cannot read: {e}", p.display()))?;
                toml::from_str(&text)
                    .map_err(|e| format!("{}: {}", p.display(), e.message().trim()))?
            }
        };
        let in_file = |what: &str, e: String| match &self.config {
            Some(p) => format!("{}: {what}: {e}", p.display()),
            None => e,
        };
        let dur = |v: &Option<String>, what: &str| -> Result<Option<Duration>, String> {
            v.as_deref()
                .map(|s| positive_duration(s).map_err(|e| in_file(what, format!("{s:?} {e}"))))
                .transpose()
        };
        let mut w = if self.quick {
            MatrixWorkload::quick()
        } else {
            MatrixWorkload::standard()
        };
        let strategies = match (&self.strategies, &file.strategies) {
            (Some(s), _) => s.clone(),
            (None, Some(s)) => s
                .iter()
                .map(|n| {
                    n.parse::<StrategyKind>()
                        .map_err(|e| in_file("strategies", e.to_string()))
                })
                .collect::<Result<_, _>>()?,
            (None, None) => MatrixPlan::STRATEGIES
                .into_iter()
                .chain(MatrixPlan::ALTERNATIVES)
                .collect(),
        };
        let mut strategies = strategies;
        if self.controls {
            for c in MatrixPlan::CONTROLS {
                if !strategies.contains(&c) {
                    strategies.push(c);
                }
            }
        }
        let pg_setups = match (&self.pg_setups, &file.pg_setups) {
            (Some(p), _) => p.clone(),
            (None, Some(p)) => p
                .iter()
                .map(|n| n.parse::<PgSetup>().map_err(|e| in_file("pg_setups", e)))
                .collect::<Result<_, _>>()?,
            (None, None) => vec![PgSetup::Direct],
        };
        let redis_setups = match (&self.redis_setups, &file.redis_setups) {
            (Some(p), _) => p.clone(),
            (None, Some(p)) => p
                .iter()
                .map(|n| {
                    n.parse::<RedisSetup>()
                        .map_err(|e| in_file("redis_setups", e))
                })
                .collect::<Result<_, _>>()?,
            (None, None) => vec![RedisSetup::Standalone],
        };
        let faults = match (&self.faults, &file.faults) {
            (Some(f), _) => f.clone(),
            (None, Some(f)) => f
                .iter()
                .map(|n| n.parse::<FaultClass>().map_err(|e| in_file("faults", e)))
                .collect::<Result<_, _>>()?,
            (None, None) => default_faults(redis_setups.contains(&RedisSetup::Cluster)),
        };
        if let Some(v) = self
            .cluster_node_timeout
            .or(dur(&file.cluster_node_timeout, "cluster_node_timeout")?)
        {
            w.cluster_node_timeout = v;
        }
        if let Some(v) = self.clients.or(file.clients) {
            w.clients = v;
        }
        if let Some(v) = self.resources.or(file.resources) {
            w.resources = v;
        }
        if let Some(h) = self.hold {
            w.hold = h;
        } else if let Some(h) = &file.hold {
            w.hold = h
                .parse()
                .map_err(|e| in_file("hold", format!("{h:?}: {e}")))?;
        }
        if let Some(v) = self.ttl.or(dur(&file.ttl, "ttl")?) {
            w.ttl = v;
            // Keep the acquire timeout two TTLs and the node timeout a quarter, as by default.
            w.acquire_timeout = v * 2;
            w.node_timeout = v / 4;
        }
        if let Some(v) = self.seed.or(file.seed) {
            w.seed = v;
        }
        let episodes = self.episodes.or(file.episodes).unwrap_or(if self.quick {
            QUICK_EPISODES
        } else {
            DEFAULT_EPISODES
        });
        if episodes == 0 {
            return Err(in_file("episodes", "must be at least 1".into()));
        }
        let jobs = self.jobs.or(file.jobs).unwrap_or_else(default_jobs);
        if !(1..=16).contains(&jobs) {
            return Err(in_file("jobs", format!("{jobs}: must be 1 to 16")));
        }
        let max_trials = self.max_trials.or(file.max_trials);
        if max_trials == Some(0) {
            return Err(in_file("max_trials", "must be at least 1".into()));
        }
        w.episodes = episodes;
        let mut plan = MatrixPlan {
            pg_setups,
            workers: self.coordinator.spec()?,
            redis_setups,
            ..MatrixPlan::new(strategies, faults, 1, w)
        };
        // The plan's trial count is the largest bound of any cell (what the header promises).
        plan.trials = max_trials.unwrap_or_else(|| {
            plan.cells()
                .into_iter()
                .map(|(r, f)| default_trial_bound(plan.episode_specs(r, f).len(), episodes))
                .max()
                .unwrap_or(1)
        });
        // The workload carries the bound too (its own check needs it to reach the episodes).
        plan.workload.max_trials = plan.trials;
        plan.validate()?;
        Ok((
            plan,
            MatrixRunOptions {
                backend,
                episodes_wanted: episodes,
                max_trials,
                jobs,
                metrics: None,
                ledger: self.coordinator.ledger.clone(),
            },
        ))
    }
}

/// `target` relative to `from` (both made absolute), for a link between two pages.
fn relative_link(from: &Path, target: &Path) -> String {
    let abs = |p: &Path| {
        std::fs::canonicalize(p)
            .unwrap_or_else(|_| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
    };
    let (from, target) = (abs(from), abs(target));
    let a: Vec<_> = from.components().collect();
    let b: Vec<_> = target.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut rel = PathBuf::new();
    for _ in common..a.len() {
        rel.push("..");
    }
    for c in &b[common..] {
        rel.push(c);
    }
    rel.to_string_lossy().into_owned()
}

/// The progress bar: exposed episodes so far out of cells × wanted, the trials running, ETA.
struct Progress {
    bar: Option<ProgressBar>,
    running: Vec<String>,
}

impl Progress {
    fn new(total: u64, disabled: bool) -> Self {
        let bar = (!disabled && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template(
                    "{bar:24.cyan/blue} {pos}/{len} exposed episodes  {msg}  elapsed {elapsed}, ETA {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.enable_steady_tick(Duration::from_millis(500));
            bar
        });
        Self {
            bar,
            running: Vec::new(),
        }
    }

    fn line(&self, text: String) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => eprintln!("  {text}"),
        }
    }

    fn show(&mut self, event: MatrixProgress<'_>) {
        match event {
            MatrixProgress::Probe { strategy } => {
                let text = format!("uncontended probe: {strategy} …");
                match &self.bar {
                    Some(bar) => bar.set_message(text),
                    None => eprintln!("  {text}"),
                }
            }
            MatrixProgress::Trial {
                strategy,
                fault,
                trial,
                ..
            } => {
                let cell = format!("{strategy} × {fault} t{trial}");
                if self.bar.is_none() {
                    eprintln!("  {cell} …");
                }
                self.running.push(cell);
                if let Some(bar) = &self.bar {
                    bar.set_message(self.running.join(", "));
                }
            }
            MatrixProgress::TrialDone {
                record,
                strategy,
                fault,
                exposed,
                progress,
            } => {
                let cell = format!("{strategy} × {fault} t{}", record.trial);
                self.running.retain(|c| c != &cell);
                let episodes = record.episodes.len();
                let hit = record.episodes.iter().filter(|e| e.exposed).count();
                let line = match record.status {
                    TrialStatus::Completed => {
                        format!("{cell}: {hit}/{episodes} episodes exposed, cell at {exposed}")
                    }
                    TrialStatus::Interrupted => format!("{cell}: interrupted"),
                    TrialStatus::Failed => {
                        format!("{cell}: FAILED: {}", record.error.as_deref().unwrap_or(""))
                    }
                };
                match &self.bar {
                    Some(bar) => {
                        bar.set_position(progress);
                        bar.set_message(self.running.join(", "));
                        if record.status != TrialStatus::Completed {
                            bar.println(line);
                        }
                    }
                    None => eprintln!("  {line}"),
                }
            }
            MatrixProgress::BackOff { note } => self.line(format!("jobs: {note}")),
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Writes the trial report (`report.html`, whose timeline shows the incident) of every cell's
/// first damaging incident not written yet, so the heat map's links open.
fn write_incident_reports(
    dir: &Path,
    report: &MatrixReport,
    written: &mut std::collections::BTreeSet<String>,
) {
    for c in &report.cells {
        let Some(i) = &c.episodes.first_incident else {
            continue;
        };
        if written.insert(i.dir.clone()) {
            if let Err(e) = super::report::write_for_run(&dir.join(&i.dir)) {
                eprintln!("warning: {}: cannot write its report: {e}", i.dir);
            }
        }
    }
}

/// What `lockbench matrix` prints when it ends: the grid, the run line, probes, claims
/// agreement, shortfalls, decision table.
fn print_summary(report: &MatrixReport) {
    println!(
        "\nDamaging of exposed episodes (95 % interval) · recovery p50 per cell \
         (* fewer exposed than wanted, ! contradicts a claim):\n"
    );
    println!("{}", matrix_table_md(report));
    println!("{}.\n", run_line(report));
    println!("Acquire latency, uncontended probe beside contended p99:\n");
    println!("{}", probes_md(report));
    println!("Agreement with the claims:\n");
    println!("{}", claims_md(report));
    for s in &report.shortfalls {
        println!(
            "short: {} × {}: {} of {} exposed: {}",
            s.strategy, s.fault, s.exposed, s.wanted, s.reason
        );
    }
    if !report.set_aside.is_empty() {
        println!(
            "{} trial(s) set aside (the harness lagged beside other trials; see matrix.md)",
            report.set_aside.len()
        );
    }
    println!("\nDecision table:\n");
    println!("{}", decision_md(report));
    for c in report.contradictions() {
        println!(
            "CONTRADICTION: claim {} ({}) says {} for {} × {}; the cell shows {}",
            c.claim, c.file, c.says, c.strategy, c.fault, c.observed
        );
    }
}

/// The columns without `--faults` (or `faults` in matrix.toml): every class, and the cluster
/// columns too when a cluster row runs them.
fn default_faults(cluster: bool) -> Vec<FaultClass> {
    let cluster_columns = if cluster {
        &FaultClass::CLUSTER[..]
    } else {
        &[]
    };
    FaultClass::ALL
        .into_iter()
        .chain(cluster_columns.iter().copied())
        .collect()
}

/// Runs `lockbench matrix`. Exit code by the policy in [`super::exit`]: interrupted, then a
/// trial that failed to run, then a cell contradicting its claim.
pub async fn run(args: MatrixArgs) -> Result<ExitCode> {
    let backend = args.backend.resolve()?;
    let (mut plan, mut options) = args
        .plan(backend.clone())
        .map_err(|e| exit::bad_input(anyhow::anyhow!(e)))?;
    if let Some(link) = &args.link_report {
        if !link.is_file() {
            return Err(exit::bad_input(anyhow::anyhow!(
                "--link-report {}: no such file",
                link.display()
            )));
        }
    }
    RunDir::check_root(&args.results).map_err(exit::bad_input)?;
    // What the machine must give (kept out of the plan, as a scenario file's `check_machine`
    // is): the bus cut of `cluster-minority-partition` needs nft and root.
    let cuts_bus = plan.faults.contains(&FaultClass::ClusterMinorityPartition)
        && plan.rows().iter().any(|r| r.on_cluster());
    if cuts_bus {
        if let Err(why) = lockbench::topology::bus_cut::check_available() {
            // Asked for (--faults or matrix.toml): refused. Among the default columns it is
            // left out, so a cluster matrix still runs without root.
            if plan.faults != default_faults(true) {
                return Err(exit::bad_input(anyhow::anyhow!(
                    "--faults cluster-minority-partition: {why}"
                )));
            }
            plan.faults
                .retain(|&f| f != FaultClass::ClusterMinorityPartition);
            eprintln!(
                "warning: the cluster-minority-partition column is left out (claim 20g not \
                 judged): {why}"
            );
        }
    }
    // An unreachable ledger database is bad input: said before anything starts.
    args.coordinator
        .ledger
        .probe()
        .await
        .map_err(exit::bad_input)?;
    // Bound before anything starts: a port in use is bad input with nothing to clean up.
    let endpoint = args.live.start()?;
    options.metrics = endpoint.as_ref().map(|e| e.metrics().clone());
    // The warnings `run` and `chaos` print, once each, with the cells they apply to.
    let cells = plan.cells().len();
    for (w, n) in plan.warnings() {
        eprintln!("warning: {w} (in {n} of {cells} cells, each of their trials)");
    }
    let shutdown = Shutdown::install()?;
    let dir = RunDir::create(&args.results, "matrix")
        .with_context(|| {
            format!(
                "cannot create a run directory under {}",
                args.results.display()
            )
        })
        .map_err(exit::bad_input)?;
    let rows_text = rows_text(&plan);
    eprintln!(
        "matrix: {rows_text} × {} faults = {cells} cells, {} exposed episodes wanted per cell, at most {} trial(s) \
         per cell, up to {} at once (about {} min planned), backend {}; results: {}",
        plan.faults.len(),
        options.episodes_wanted,
        plan.trials,
        options.jobs,
        (plan.planned_time(f64::from(options.jobs)).as_secs_f64() / 60.0).round(),
        backend.name(),
        dir.path().display()
    );
    let mut report = MatrixReport::new(&plan, dir.run_id());
    report.linked_report = args
        .link_report
        .as_deref()
        .map(|l| relative_link(dir.path(), l));
    let total = cells as u64 * u64::from(options.episodes_wanted);
    let mut progress = Progress::new(total, args.no_progress);
    let mut write_error: Option<String> = None;
    let mut incidents = std::collections::BTreeSet::new();
    matrix::run_matrix(
        &plan,
        dir.path(),
        &mut report,
        &options,
        shutdown.requested.clone(),
        |r| {
            write_incident_reports(dir.path(), r, &mut incidents);
            if let Err(e) = write_matrix_files(dir.path(), r) {
                write_error = Some(e.to_string());
            }
        },
        |e| progress.show(e),
    )
    .await;
    progress.finish();
    shutdown.disarm();
    if let Some(e) = write_error {
        return Err(anyhow::anyhow!("cannot write the matrix files: {e}"));
    }
    print_summary(&report);
    println!(
        "\nmatrix report (open this): {}",
        dir.file("matrix.html").display()
    );
    super::metrics::finish(endpoint, report.status == MatrixStatus::Interrupted).await;
    if report.status == MatrixStatus::Interrupted {
        return Ok(shutdown.interrupted_exit_code());
    }
    // A failed trial is replaced by another; it costs the run only when its cell then fell
    // short of the exposed episodes wanted.
    let failed: u32 = report.cells.iter().map(|c| c.failed).sum();
    if failed > 0 {
        eprintln!("{failed} trial(s) failed to run (see matrix.html, \"Every trial\")");
        let short: Vec<String> = report
            .cells
            .iter()
            .filter(|c| c.failed > 0 && c.episodes.exposed < report.episodes_wanted)
            .map(|c| format!("{} × {}", c.strategy, c.fault))
            .collect();
        if !short.is_empty() {
            eprintln!(
                "failed trials left {} short of {} exposed episodes",
                short.join(", "),
                report.episodes_wanted
            );
            return Ok(exit::code(exit::FAILED));
        }
        eprintln!("every cell still reached its exposed episodes: the failed trials were replaced");
    }
    let contradictions = report.contradictions().len();
    if contradictions > 0 {
        eprintln!("{contradictions} cell(s) contradict their claim (see above and matrix.md)");
        return Ok(exit::code(exit::FINDING));
    }
    Ok(exit::code(exit::OK))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_relative_between_pages() {
        assert_eq!(
            relative_link(
                Path::new("/r/m"),
                Path::new("/r/c/comparison/comparison.html")
            ),
            "../c/comparison/comparison.html"
        );
    }

    fn parse(args: &[&str]) -> Result<MatrixArgs, clap::Error> {
        use clap::Parser;
        let cli = super::super::args::Cli::try_parse_from(
            ["lockbench", "matrix"].iter().chain(args).copied(),
        )?;
        match cli.command {
            super::super::args::Command::Matrix(m) => Ok(*m),
            other => panic!("not matrix: {other:?}"),
        }
    }

    fn labels(args: &[&str]) -> Vec<String> {
        let (plan, _) = parse(args).unwrap().plan(Backend::Local).unwrap();
        let report = MatrixReport::new(&plan, "m");
        assert_eq!(report.cells.len(), plan.cells().len());
        report.strategies
    }

    #[test]
    fn pg_setups_repeat_the_postgres_rows_and_bad_ones_are_refused() {
        // Default: direct only, the rows are the strategies as before the option.
        let default = labels(&[]);
        assert_eq!(
            default,
            [
                "single",
                "single-fenced",
                "redlock",
                "redlock-fenced",
                "pg-advisory",
                "pg-advisory-fenced",
                "etcd-lease"
            ]
        );
        let got = labels(&[
            "--strategies",
            "single,pg-advisory,pg-advisory-xact",
            "--faults",
            "none",
            "--pg-setups",
            "direct,pgbouncer-transaction",
        ]);
        assert_eq!(
            got,
            [
                "single",
                "pg-advisory",
                "pg-advisory · pgbouncer-transaction",
                "pg-advisory-xact",
                "pg-advisory-xact · pgbouncer-transaction"
            ]
        );
        // matrix.toml, and the flag over it.
        let dir = tempfile::tempdir().unwrap();
        let toml = dir.path().join("matrix.toml");
        std::fs::write(
            &toml,
            "strategies = [\"pg-advisory\"]\nfaults = [\"client-crash\"]\npg_setups = [\"pgbouncer-session-no-reset\"]\n",
        )
        .unwrap();
        let path = toml.to_str().unwrap();
        assert_eq!(
            labels(&["--config", path]),
            ["pg-advisory · pgbouncer-session-no-reset"]
        );
        assert_eq!(
            labels(&["--config", path, "--pg-setups", "pgbouncer-session"]),
            ["pg-advisory · pgbouncer-session"]
        );
        // Refused up front, naming the valid setups.
        let err = parse(&["--pg-setups", "direct,bouncer"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown PostgreSQL setup `bouncer`")
                && err.contains(
                    "direct, pgbouncer-session, pgbouncer-session-no-reset, pgbouncer-transaction"
                ),
            "{err}"
        );
        std::fs::write(&toml, "pg_setups = [\"transaction\"]\n").unwrap();
        let err = parse(&["--config", path])
            .unwrap()
            .plan(Backend::Local)
            .unwrap_err();
        assert!(
            err.contains("pg_setups: unknown PostgreSQL setup `transaction`: valid"),
            "{err}"
        );
        let err = parse(&["--pg-setups", "direct,direct"])
            .unwrap()
            .plan(Backend::Local)
            .unwrap_err();
        assert_eq!(err, "PostgreSQL setup direct is listed twice");
    }

    #[test]
    fn redis_setups_add_cluster_rows_and_columns_and_bad_ones_are_refused() {
        let plan = |args: &[&str]| parse(args).unwrap().plan(Backend::Local);
        let (p, _) = plan(&[
            "--strategies",
            "single,single-wait,redlock",
            "--redis-setups",
            "standalone,cluster",
        ])
        .unwrap();
        let labels: Vec<String> = p.rows().iter().map(|r| r.label()).collect();
        assert_eq!(
            labels,
            [
                "single",
                "single · cluster",
                "single-wait",
                "single-wait · cluster",
                "redlock"
            ]
        );
        // Without --faults a cluster matrix runs every column, the cluster ones too.
        assert_eq!(p.faults.len(), 17);
        assert_eq!(&p.faults[12..], FaultClass::CLUSTER);
        assert_eq!(p.workload.cluster_node_timeout, Duration::from_millis(1000));
        assert_eq!(
            rows_text(&p),
            "5 rows (3 strategies, single-node Redis ones per setup: standalone, cluster)"
        );
        let report = MatrixReport::new(&p, "m");
        assert_eq!(report.cells.len(), 3 * 12 + 2 * 16);
        // The default matrix is untouched: standalone rows, the 12 classes.
        let (d, _) = plan(&[]).unwrap();
        assert_eq!(d.redis_setups, [RedisSetup::Standalone]);
        assert_eq!(d.faults, FaultClass::ALL);
        assert_eq!(rows_text(&d), "7 strategies");
        // matrix.toml, and the flags over it.
        let dir = tempfile::tempdir().unwrap();
        let toml = dir.path().join("matrix.toml");
        std::fs::write(
            &toml,
            "strategies = [\"single\"]\nfaults = [\"cluster-pause\"]\nredis_setups = [\"cluster\"]\n\
             cluster_node_timeout = \"1500ms\"\n",
        )
        .unwrap();
        let path = toml.to_str().unwrap();
        let (f, _) = plan(&["--config", path]).unwrap();
        assert_eq!(f.rows()[0].label(), "single · cluster");
        assert_eq!(f.workload.cluster_node_timeout, Duration::from_millis(1500));
        let (f, _) = plan(&["--config", path, "--cluster-node-timeout", "2s"]).unwrap();
        assert_eq!(f.workload.cluster_node_timeout, Duration::from_secs(2));
        // Refused up front, naming the flag and the valid values.
        let err = parse(&["--redis-setups", "sentinel"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "unknown Redis setup `sentinel`: valid Redis setups are standalone, cluster"
            ),
            "{err}"
        );
        let err = plan(&["--config", path, "--redis-setups", "standalone"]).unwrap_err();
        assert!(
            err.starts_with("fault class cluster-pause runs only on Redis Cluster rows"),
            "{err}"
        );
        let err = plan(&[
            "--strategies",
            "single",
            "--redis-setups",
            "cluster",
            "--faults",
            "node-pause",
            "--cluster-node-timeout",
            "500ms",
        ])
        .unwrap_err();
        assert!(
            err.starts_with("--cluster-node-timeout 500 ms must be longer"),
            "{err}"
        );
        std::fs::write(&toml, "redis_setups = [\"shard\"]\n").unwrap();
        let err = plan(&["--config", path]).unwrap_err();
        assert!(
            err.contains("redis_setups: unknown Redis setup `shard`: valid"),
            "{err}"
        );
    }
}
