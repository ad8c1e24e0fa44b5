//! `lockbench matrix`: every selected strategy × every fault class on one workload, each cell
//! run as trials until it has the exposed fault episodes asked for (`--episodes`), written to
//! `results/<time>-matrix/` (matrix.json/.csv/.md/.html); with several kinds of work
//! (`--work external,job`) a matrix per kind under `<kind>/` and the run's own works.json,
//! matrix.md and matrix.html answering per kind ([`lockbench::matrix::works`]).
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | the flags ([`MatrixArgs`]) and the run: checks, start line, trials, exit code |
//! | `help` | the text under `--help` |
//! | `plan` | the plan and run options from defaults, `matrix.toml` and flags |
//! | `progress` | the progress bar (or lines) while trials run |
//! | `summary` | what it prints when it ends |

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

use lockbench::driver::HoldTime;
use lockbench::matrix::decision::thin::{BRIEF_CELLS, WORST_CELLS};
use lockbench::matrix::plan::work_title;
use lockbench::matrix::WorksReport;
use lockbench::matrix::{
    self, FaultClass, MatrixPlan, MatrixReport, MatrixRunOptions, MatrixStatus, PgSetup, RedisSetup,
};
use lockbench::orchestration::runner::Backend;
use lockbench::report::matrix::{write_matrix_files, write_works_files};
use lockbench::results::RunDir;
use lockbench::strategy::StrategyKind;

use super::args::{positive_duration, strategy_name};
use super::chaos::BackendArgs;
use super::exit;
use super::signals::Shutdown;

mod help;
mod plan;
mod progress;
mod summary;
#[cfg(test)]
mod tests;

use help::MATRIX_HELP;
use plan::default_faults;
use progress::Progress;
use summary::print_summary;

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
    /// What each critical section protects, comma-separated: row (default: the fenced ledger
    /// write), compute (a duplicate is waste; the correctness answer defers to efficiency),
    /// external (one call per section to the side-effect sink, which cannot check a
    /// fencing token), job (a queue of jobs each to be done once; adds claim-update and
    /// claim-skip-locked to the default rows). The decision answers for each kind; with several kinds each is a matrix
    /// of its own under `<kind>/`, and matrix.html answers per kind.
    #[arg(long, value_delimiter = ',', value_parser = crate::cli::args::work_kind)]
    pub work: Option<Vec<lockbench::driver::WorkKind>>,
    /// With --work external or job: every call to the sink carries the job's idempotency key
    /// (ignored by the row matrix of several kinds).
    #[arg(long)]
    pub idempotency_key: bool,
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

/// What the machine must give (kept out of the plan, as a scenario file's `check_machine`
/// is): the bus cut of `cluster-minority-partition` needs nft and root. Asked for (`--faults`
/// or matrix.toml) it is refused; among the default columns it is left out with a warning,
/// so a cluster matrix still runs without root.
fn check_machine(plan: &mut MatrixPlan) -> Result<()> {
    let cuts_bus = plan.faults.contains(&FaultClass::ClusterMinorityPartition)
        && plan.rows().iter().any(|r| r.on_cluster());
    if !cuts_bus {
        return Ok(());
    }
    if let Err(why) = lockbench::topology::bus_cut::check_available() {
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
    Ok(())
}

/// The line `lockbench matrix` starts with: rows × faults, episodes wanted, bound, trials at
/// once, planned time, backend and where the results go.
fn start_line(
    plan: &MatrixPlan,
    options: &MatrixRunOptions,
    backend: &Backend,
    dir: &Path,
) -> String {
    format!(
        "matrix: {} × {} faults = {} cells, {} exposed episodes wanted per cell, at most {} trial(s) \
         per cell, up to {} at once (about {} min planned), backend {}; results: {}",
        rows_text(plan),
        plan.faults.len(),
        plan.cells().len(),
        options.episodes_wanted,
        plan.trials,
        options.jobs,
        (plan.planned_time(f64::from(options.jobs)).as_secs_f64() / 60.0).round(),
        backend.name(),
        dir.display()
    )
}

/// Runs `lockbench matrix`. Exit code by the policy in [`super::exit`]: interrupted, then a
/// trial that failed to run, then a cell contradicting its claim (with several kinds of work,
/// the worst of theirs).
pub async fn run(args: MatrixArgs) -> Result<ExitCode> {
    let backend = args.backend.resolve()?;
    let mut plans = args
        .plans(backend.clone())
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
    for (plan, _) in &mut plans {
        check_machine(plan)?;
    }
    // An unreachable ledger database is bad input: said before anything starts.
    args.coordinator
        .ledger
        .probe()
        .await
        .map_err(exit::bad_input)?;
    // Bound before anything starts: a port in use is bad input with nothing to clean up.
    let endpoint = args.live.start()?;
    for (plan, options) in &mut plans {
        options.metrics = endpoint.as_ref().map(|e| e.metrics().clone());
        // The warnings `run` and `chaos` print, once each, with the cells they apply to.
        let cells = plan.cells().len();
        for (w, n) in plan.warnings() {
            eprintln!("warning: {w} (in {n} of {cells} cells, each of their trials)");
        }
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
    let reports = run_kinds(&args, &plans, &backend, &dir, &shutdown).await?;
    let several = plans.len() > 1;
    for report in &reports {
        if several {
            let w = &report.workload;
            println!("\n== {} ==", work_title(w.work, w.idempotency_key));
        }
        print_summary(report);
    }
    println!(
        "\nmatrix report (open this): {}",
        dir.file("matrix.html").display()
    );
    let interrupted = reports.len() < plans.len()
        || reports
            .iter()
            .any(|r| r.status == MatrixStatus::Interrupted);
    super::metrics::finish(endpoint, interrupted).await;
    if interrupted {
        return Ok(shutdown.interrupted_exit_code());
    }
    // The worst outcome of the kinds: failed, then a finding, then done.
    let codes: Vec<u8> = reports.iter().map(outcome).collect();
    let worst = [exit::FAILED, exit::FINDING]
        .into_iter()
        .find(|c| codes.contains(c))
        .unwrap_or(exit::OK);
    Ok(exit::code(worst))
}

/// Runs each kind of work's matrix in turn (the run's own directory with one kind, `<kind>/`
/// with several, and then the run's `works.json`, `matrix.md` and `matrix.html`), writing
/// the files after every trial; stops at an interrupt. The reports of the kinds that ran.
async fn run_kinds(
    args: &MatrixArgs,
    plans: &[(MatrixPlan, MatrixRunOptions)],
    backend: &Backend,
    dir: &RunDir,
    shutdown: &Shutdown,
) -> Result<Vec<MatrixReport>> {
    let several = plans.len() > 1;
    // Each kind of work's matrix: its directory (the run's own with one kind) and report.
    let kinds: Vec<(String, PathBuf, MatrixReport)> = plans
        .iter()
        .map(|(plan, _)| {
            let name = plan.workload.work.to_string();
            let path = if several {
                dir.path().join(&name)
            } else {
                dir.path().to_path_buf()
            };
            let id = if several {
                format!("{}/{name}", dir.run_id())
            } else {
                dir.run_id().to_string()
            };
            let mut report = MatrixReport::new(plan, &id);
            report.linked_report = args.link_report.as_deref().map(|l| relative_link(&path, l));
            (name, path, report)
        })
        .collect();
    let mut works = several.then(|| {
        let fresh: Vec<(String, &MatrixReport)> =
            kinds.iter().map(|(n, _, r)| (n.clone(), r)).collect();
        let mut w = WorksReport::new(dir.run_id(), &fresh);
        w.linked_report = args
            .link_report
            .as_deref()
            .map(|l| relative_link(dir.path(), l));
        w
    });
    for ((plan, options), (_, path, _)) in plans.iter().zip(&kinds) {
        eprintln!("{}", start_line(plan, options, backend, path));
    }
    let total: u64 = plans
        .iter()
        .map(|(p, o)| p.cells().len() as u64 * u64::from(o.episodes_wanted))
        .sum();
    let mut progress = Progress::new(total, args.no_progress);
    let mut write_error: Option<String> = None;
    let mut reports = Vec::new();
    if let Some(w) = &works {
        if let Err(e) = write_works_files(dir.path(), w) {
            write_error = Some(e.to_string());
        }
    }
    for (i, ((plan, options), (_, path, mut report))) in plans.iter().zip(kinds).enumerate() {
        if *shutdown.requested.borrow() {
            break;
        }
        std::fs::create_dir_all(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let mut incidents = std::collections::BTreeSet::new();
        matrix::run_matrix(
            plan,
            &path,
            &mut report,
            options,
            shutdown.requested.clone(),
            |r| {
                write_incident_reports(&path, r, &mut incidents);
                if let Err(e) = write_matrix_files(&path, r) {
                    write_error = Some(e.to_string());
                }
                if let Some(w) = works.as_mut() {
                    w.update(i, r);
                    if let Err(e) = write_works_files(dir.path(), w) {
                        write_error = Some(e.to_string());
                    }
                }
            },
            |e| progress.show(e),
        )
        .await;
        let stop = report.status == MatrixStatus::Interrupted;
        reports.push(report);
        if stop {
            break;
        }
    }
    progress.finish();
    shutdown.disarm();
    if let Some(w) = works.as_mut() {
        w.finish();
        if let Err(e) = write_works_files(dir.path(), w) {
            write_error = Some(e.to_string());
        }
    }
    if let Some(e) = write_error {
        return Err(anyhow::anyhow!("cannot write the matrix files: {e}"));
    }
    Ok(reports)
}

/// Cells named on one line: every one when there are at most [`BRIEF_CELLS`], else how many
/// and the first [`WORST_CELLS`] (matrix.md names each).
fn cells_in_brief(cells: &[String]) -> String {
    if cells.len() <= BRIEF_CELLS {
        return cells.join(", ");
    }
    format!(
        "{} cells ({}, …; see matrix.md)",
        cells.len(),
        cells[..WORST_CELLS].join(", ")
    )
}

/// The exit code of a matrix that ran to its end: a failed trial is replaced by another; it
/// costs the run only when its cell then fell short of the exposed episodes wanted; then a
/// cell contradicting its claim.
fn outcome(report: &MatrixReport) -> u8 {
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
                cells_in_brief(&short),
                report.episodes_wanted
            );
            return exit::FAILED;
        }
        eprintln!("every cell still reached its exposed episodes: the failed trials were replaced");
    }
    let contradictions = report.contradictions().len();
    if contradictions > 0 {
        eprintln!("{contradictions} cell(s) contradict their claim (see above and matrix.md)");
        return exit::FINDING;
    }
    exit::OK
}
