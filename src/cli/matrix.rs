//! `lockbench matrix`: every selected strategy × every fault class on one workload, several
//! trials per cell, written to `results/<time>-matrix/` (matrix.json/.csv/.md/.html).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;

use lockbench::driver::HoldTime;
use lockbench::orchestration::matrix::{
    self, FaultClass, MatrixPlan, MatrixProgress, MatrixReport, MatrixStatus, MatrixWorkload,
    TrialStatus,
};
use lockbench::report::matrix_export::{matrix_table_md, write_matrix_files};
use lockbench::results::RunDir;
use lockbench::strategy::StrategyKind;

use super::args::{positive_duration, strategy_name};
use super::chaos::BackendArgs;
use super::exit;
use super::signals::Shutdown;

/// Examples and exit codes under `lockbench matrix --help`.
const MATRIX_HELP: &str = "\
Fault classes (--faults; default all): none, latency, partition-minority, partition-holder,
crash-restart-empty, node-pause, clock-jump, client-pause, failover, slow-work.
Single-node strategies run on one node (on Sentinel for failover); Redlock on five nodes.
matrix.html says what each fault did on each topology.

matrix.toml (--config; every key optional, flags win):
  strategies = [\"single\", \"redlock-fenced\"]
  faults = [\"none\", \"client-pause\"]
  trials = 3
  clients = 8
  resources = 2
  hold = \"50ms\"
  ttl = \"500ms\"
  episodes = 30
  max_trials = 40
  seed = 1

Examples:
  lockbench matrix --quick                          # 4 strategies x 10 faults x 1 trial, 4 s trials
  lockbench matrix                                  # x 3 trials, 6 s trials
  lockbench matrix --controls --faults none,client-pause --trials 5
  lockbench matrix --quick --backend docker         # every cell in containers (docker/build-images.sh first)

Exit codes: 0 matrix complete (invalid cells are results, not errors), 2 bad input (nothing
started), 4 some trial failed to run, 130/143 interrupted (finished cells kept).";

/// Options of `lockbench matrix`.
#[derive(Debug, Args)]
#[command(after_help = MATRIX_HELP)]
pub struct MatrixArgs {
    /// Strategies (rows), comma-separated [default: single,single-fenced,redlock,redlock-fenced].
    #[arg(long, value_delimiter = ',', value_parser = strategy_name)]
    pub strategies: Option<Vec<StrategyKind>>,
    /// Add the negative controls naive-del, get-then-del, no-ttl, setnx-expire, unchecked-extend.
    #[arg(long)]
    pub controls: bool,
    /// Fault classes (columns), comma-separated [default: all].
    #[arg(long, value_delimiter = ',', value_parser = fault_name)]
    pub faults: Option<Vec<FaultClass>>,
    /// Trials per cell, each with its own seed, nodes and keys [default: 3; 1 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub trials: Option<u32>,
    /// 1 trial per cell, 4 s trials with the fault at 1 s (about 4 minutes for the default matrix).
    #[arg(long)]
    pub quick: bool,
    /// Clients per trial [default: 8].
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..))]
    pub clients: Option<u32>,
    /// Distinct resources [default: 2].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub resources: Option<u32>,
    /// Time inside the critical section: fixed (50ms) or a range (20ms..80ms) [default: 50ms].
    #[arg(long)]
    pub hold: Option<HoldTime>,
    /// Lease TTL [default: 1s].
    #[arg(long, value_parser = positive_duration)]
    pub ttl: Option<Duration>,
    /// Exposed fault episodes wanted per cell [default: 30; 10 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub episodes: Option<u32>,
    /// Most trials per cell [default: 40; 15 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_trials: Option<u32>,
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
}

fn fault_name(s: &str) -> Result<FaultClass, String> {
    s.parse()
}

/// `matrix.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MatrixFile {
    strategies: Option<Vec<String>>,
    faults: Option<Vec<String>>,
    trials: Option<u32>,
    clients: Option<u32>,
    resources: Option<u32>,
    hold: Option<String>,
    ttl: Option<String>,
    seed: Option<u64>,
    episodes: Option<u32>,
    max_trials: Option<u32>,
}

impl MatrixArgs {
    /// The plan: defaults (or --quick), then matrix.toml, then flags; validated.
    fn plan(&self) -> Result<MatrixPlan, String> {
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
            (None, None) => MatrixPlan::STRATEGIES.to_vec(),
        };
        let mut strategies = strategies;
        if self.controls {
            for c in MatrixPlan::CONTROLS {
                if !strategies.contains(&c) {
                    strategies.push(c);
                }
            }
        }
        let faults = match (&self.faults, &file.faults) {
            (Some(f), _) => f.clone(),
            (None, Some(f)) => f
                .iter()
                .map(|n| n.parse::<FaultClass>().map_err(|e| in_file("faults", e)))
                .collect::<Result<_, _>>()?,
            (None, None) => FaultClass::ALL.to_vec(),
        };
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
        if let Some(v) = self.episodes.or(file.episodes) {
            w.episodes = v;
        }
        if let Some(v) = self.max_trials.or(file.max_trials) {
            w.max_trials = v;
        }
        let trials = self
            .trials
            .or(file.trials)
            .unwrap_or(if self.quick { 1 } else { 3 });
        let plan = MatrixPlan {
            strategies,
            faults,
            trials,
            workload: w,
        };
        plan.validate()?;
        Ok(plan)
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

/// The progress bar: trials done / total, the running cell and trial, its elapsed time, ETA.
struct Progress {
    bar: Option<ProgressBar>,
    trials: u32,
    cell: String,
}

impl Progress {
    fn new(total: u64, trials: u32, disabled: bool) -> Self {
        let bar = (!disabled && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template(
                    "{bar:24.cyan/blue} {pos}/{len} trials  {msg}  elapsed {elapsed}, ETA {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.enable_steady_tick(Duration::from_millis(500));
            bar
        });
        Self {
            bar,
            trials,
            cell: String::new(),
        }
    }

    fn show(&mut self, event: MatrixProgress<'_>) {
        match event {
            MatrixProgress::Trial {
                strategy,
                fault,
                trial,
                ..
            } => {
                self.cell = format!("{strategy} × {fault}, trial {trial}/{}", self.trials);
                match &self.bar {
                    Some(bar) => bar.set_message(self.cell.clone()),
                    None => eprintln!("  {} …", self.cell),
                }
            }
            MatrixProgress::Tick { elapsed, duration } => {
                if let Some(bar) = &self.bar {
                    bar.set_message(format!(
                        "{}  {}s / {}s",
                        self.cell,
                        elapsed.as_secs(),
                        duration.as_secs()
                    ));
                }
            }
            MatrixProgress::TrialDone { record, done } => {
                let verdict = record.verdict.map_or_else(|| "-".into(), |v| v.to_string());
                let line = match record.status {
                    TrialStatus::Completed => format!("{}: {verdict}", self.cell),
                    TrialStatus::Interrupted => format!("{}: interrupted", self.cell),
                    TrialStatus::Failed => format!(
                        "{}: FAILED: {}",
                        self.cell,
                        record.error.as_deref().unwrap_or("")
                    ),
                };
                match &self.bar {
                    Some(bar) => {
                        bar.set_position(done);
                        if record.status != TrialStatus::Completed {
                            bar.println(line);
                        }
                    }
                    None => eprintln!("  {line}"),
                }
            }
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Runs `lockbench matrix`. Exit code by the policy in [`super::exit`].
pub async fn run(args: MatrixArgs) -> Result<ExitCode> {
    let plan = args
        .plan()
        .map_err(|e| exit::bad_input(anyhow::anyhow!(e)))?;
    let backend = args.backend.resolve()?;
    if let Some(link) = &args.link_report {
        if !link.is_file() {
            return Err(exit::bad_input(anyhow::anyhow!(
                "--link-report {}: no such file",
                link.display()
            )));
        }
    }
    RunDir::check_root(&args.results).map_err(exit::bad_input)?;
    let shutdown = Shutdown::install()?;
    let dir = RunDir::create(&args.results, "matrix")
        .with_context(|| {
            format!(
                "cannot create a run directory under {}",
                args.results.display()
            )
        })
        .map_err(exit::bad_input)?;
    eprintln!(
        "matrix: {} strategies × {} faults × {} trial(s) = {} trials, about {} min planned, backend {}; results: {}",
        plan.strategies.len(),
        plan.faults.len(),
        plan.trials,
        plan.total_trials(),
        (plan.planned_time(1.0).as_secs_f64() / 60.0).round(),
        backend.name(),
        dir.path().display()
    );
    let mut report = MatrixReport::new(&plan, dir.run_id());
    report.linked_report = args
        .link_report
        .as_deref()
        .map(|l| relative_link(dir.path(), l));
    let mut progress = Progress::new(plan.total_trials(), plan.trials, args.no_progress);
    let mut write_error: Option<String> = None;
    matrix::run_matrix(
        &plan,
        &backend,
        dir.path(),
        &mut report,
        shutdown.requested.clone(),
        |r| {
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
    println!("\n{}", matrix_table_md(&report));
    for r in [&report.decision.efficiency, &report.decision.correctness] {
        println!("{} lock: {}", r.need, r.answer);
        if let Some(b) = &r.bound {
            println!("  bound: {b}");
        }
        if let Some(t) = &r.thin {
            println!("  evidence is thin: {t}");
        }
    }
    println!(
        "\nmatrix report (open this): {}",
        dir.file("matrix.html").display()
    );
    if report.status == MatrixStatus::Interrupted {
        return Ok(shutdown.interrupted_exit_code());
    }
    let failed: u32 = report.cells.iter().map(|c| c.failed).sum();
    if failed > 0 {
        eprintln!("{failed} trial(s) failed to run (see matrix.html, \"Every trial\")");
        return Ok(exit::code(exit::FAILED));
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
}
