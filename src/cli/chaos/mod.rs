//! `lockbench chaos <file|dir>`: run scenarios, print each one's verdicts next to what its
//! claim predicts.

mod render;
#[cfg(test)]
mod tests;
mod trials;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use lockbench::orchestration::runner::{Backend, Runner};
use lockbench::orchestration::scenario::{catalogue, Scenario};
use lockbench::orchestration::test::Test;
use lockbench::results::RunDir;
use lockbench::strategy::StrategyKind;
use lockbench::topology::DockerOptions;

use super::exit;
use super::signals::Shutdown;
pub use render::render;
use render::{render_overview, unmet_lines};
use trials::{Batch, ScenarioTrials};

/// The scenario file format and examples, under `lockbench chaos --help`.
const SCENARIO_HELP: &str = "\
Scenario file (TOML; every key is checked before anything starts, errors are file:line:col):
  claim = \"no owner token: a stalled holder's DEL frees someone else's lock\"
  topology = \"single\"                 # single | five | sentinel
  strategies = [\"naive-del\", \"single\"]
  seed = 7
  # workers = 2                        # clients in 2 worker processes (targets worker:0, …)
  [workload]                           # clients, resources, hold, ttl, duration are required
  clients = 6
  resources = 1
  hold = \"20ms\"                        # or \"5ms..20ms\"
  ttl = \"300ms\"
  duration = \"6s\"
  # retry_attempts, retry_delay, retry_jitter, acquire_timeout, watchdog, node_timeout,
  # response_timeout, connect_timeout, rate are optional (defaults as `lockbench run`)
  [[nemesis]]                          # one table per fault step
  at = \"1s\"                            # offset from each strategy's start
  duration = \"800ms\"                   # healed after this long
  fault = \"client-pause\"               # see --list-faults
  target = \"clients:0,1\"
  [expect.naive-del]
  verdict = \"invalid\"                  # valid | invalid | unknown
  anomalies = [\"mutex-violation\"]      # must appear; `absent = [...]` must not

Examples:
  lockbench chaos --list-faults
  lockbench chaos chaos/09-redlock-process-pause.toml
  lockbench chaos chaos/ --results /tmp/r
  lockbench chaos chaos/ --trials 10      # each scenario 10 times: \"as claimed in k/10\"

Exit codes: 0 every claim as claimed (in every trial), 1 some claim not met (in some trial),
2 bad input (nothing started), 4 a scenario failed to run, 130/143 interrupted (partial
results kept, not judged).";

/// Options of `lockbench chaos`.
#[derive(Debug, Args)]
#[command(after_help = SCENARIO_HELP)]
pub struct ChaosArgs {
    /// A scenario file (chaos/02-naive-del-pause.toml) or a directory of them (chaos/).
    #[arg(required_unless_present = "list_faults")]
    pub path: Option<PathBuf>,
    /// Print every fault a scenario's [[nemesis]] step can use (name, target, keys) and exit.
    #[arg(long)]
    pub list_faults: bool,
    /// Never draw the progress line (it is drawn only when stderr is a terminal).
    #[arg(long)]
    pub no_progress: bool,
    /// Root directory for results (created if missing; must not be a file).
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
    /// Trials per scenario, at least 1. Each trial runs the whole scenario again with fresh
    /// nodes, its own run directory (`<scenario>/trial-01`, …) and the seed `seed + trial − 1`;
    /// each expectation is reported as "as claimed in k/N" and counts as met only in N/N.
    #[arg(long, default_value_t = 1, value_parser = super::args::count, allow_negative_numbers = true)]
    pub trials: u32,
    /// The command line of the strategy `adapter:command` (your own lock-client adapter,
    /// quoted as one argument): used by every scenario that lists adapter:command, in place of
    /// its `workload.adapter`.
    #[arg(long, value_name = "COMMAND")]
    pub adapter: Option<String>,
    /// Where nodes and Toxiproxy run.
    #[command(flatten)]
    pub backend: BackendArgs,
    #[command(flatten)]
    pub live: super::metrics::MetricsArgs,
    #[command(flatten)]
    pub coordinator: super::args::CoordinatorArgs,
}

/// `--backend`, `--redis-image`, `--toxiproxy-image` (shared by `chaos` and `matrix`).
#[derive(Debug, Args)]
pub struct BackendArgs {
    /// Where nodes and Toxiproxy run: `local` (redis-server processes, embedded Toxiproxy) or
    /// `docker` (one Redis container per node (and per Sentinel) and a Toxiproxy container, on
    /// a network of the run's own; build the local images first with `docker/build-images.sh`).
    #[arg(long, value_enum, default_value_t = BackendArg::Local)]
    pub backend: BackendArg,
    /// Redis image for `--backend docker` [env: REDIS_IMAGE; default: lockbench/redis:7.0-local].
    #[arg(long)]
    pub redis_image: Option<String>,
    /// Toxiproxy image for `--backend docker` [env: TOXIPROXY_IMAGE; default:
    /// lockbench/toxiproxy:local]; Shopify's `ghcr.io/shopify/toxiproxy` works too.
    #[arg(long)]
    pub toxiproxy_image: Option<String>,
}

/// `--backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendArg {
    /// redis-server processes on this machine.
    Local,
    /// Docker containers started through testcontainers.
    Docker,
}

impl BackendArgs {
    /// The backend with its images (flags, then REDIS_IMAGE / TOXIPROXY_IMAGE, then the local
    /// images). The run tag is set per scenario.
    ///
    /// # Errors
    /// A bad-input error (exit 2) when an image is given with `--backend local`.
    pub fn resolve(&self) -> Result<Backend> {
        if self.backend == BackendArg::Local {
            if self.redis_image.is_some() || self.toxiproxy_image.is_some() {
                return Err(exit::bad_input(anyhow::anyhow!(
                    "--redis-image and --toxiproxy-image need --backend docker"
                )));
            }
            return Ok(Backend::Local);
        }
        let mut options = DockerOptions::new("");
        if let Some(i) = &self.redis_image {
            options.redis_image = i.clone();
        }
        if let Some(i) = &self.toxiproxy_image {
            options.toxiproxy_image = i.clone();
        }
        Ok(Backend::Docker(options))
    }
}

/// Gives `--adapter` to every test that runs `adapter:command`, and checks that each of them
/// has a command line (from `--adapter` or its file's `workload.adapter`).
fn with_adapter(mut tests: Vec<Test>, adapter: Option<&str>) -> Result<Vec<Test>> {
    let mut used = false;
    for t in &mut tests {
        if !t.strategies.contains(&StrategyKind::AdapterCommand) {
            continue;
        }
        used = true;
        if let Some(cmd) = adapter {
            t.client.adapter = Some(cmd.to_string());
        }
        if t.client.adapter_argv().is_none() {
            anyhow::bail!(
                "scenario {}: strategy adapter:command needs a command line: --adapter \
                 'command args…' or `adapter = \"…\"` in its [workload] (empty, or a quote \
                 left open: {:?})",
                t.name,
                t.client.adapter.as_deref().unwrap_or("")
            );
        }
    }
    if let (Some(cmd), false) = (adapter, used) {
        anyhow::bail!("--adapter {cmd:?}: no scenario lists the strategy adapter:command");
    }
    Ok(tests)
}

/// Runs `lockbench chaos`. Exit code by the policy in [`super::exit`].
pub async fn run(args: ChaosArgs) -> Result<ExitCode> {
    if args.list_faults {
        print!("{}", catalogue::render());
        return Ok(exit::code(exit::OK));
    }
    let path = args.path.clone().unwrap_or_default();
    let (tests, skipped) = load_tests(&args, &path)?;
    let backend = args.backend.resolve()?;
    RunDir::check_root(&args.results).map_err(exit::bad_input)?;
    // An unreachable ledger database is bad input: said before anything starts.
    args.coordinator
        .ledger
        .probe()
        .await
        .map_err(exit::bad_input)?;
    // Bound before anything starts: a port in use is bad input with nothing to clean up.
    let endpoint = args.live.start()?;
    let shutdown = Shutdown::install()?;
    let n = args.trials;
    let parent = batch_dir(&args, &path, n)?;
    let batch = Batch {
        args: &args,
        runner: Runner {
            backend,
            metrics: endpoint.as_ref().map(|e| e.metrics().clone()),
            ledger: args.coordinator.ledger.clone(),
            ..Runner::local(shutdown.requested.clone())
        },
        parent,
        n,
    };
    let mut scenario_runs: Vec<ScenarioTrials> = Vec::new();
    for scenario in &tests {
        if *shutdown.requested.borrow() {
            break;
        }
        scenario_runs.push(batch.scenario(scenario).await?);
    }
    let parent = &batch.parent;
    let failures: Vec<&String> = scenario_runs.iter().flat_map(|r| &r.failures).collect();
    let run_dirs: Vec<PathBuf> = scenario_runs
        .iter()
        .flat_map(|r| r.measured.iter().cloned())
        .collect();
    shutdown.disarm();
    if let Some(p) = &parent {
        let table: Vec<serde_json::Value> = scenario_runs.iter().map(|r| r.to_json(n)).collect();
        p.write_json("chaos.json", &table)?;
    }
    let unmet = print_summary(&scenario_runs, n, skipped, failures.len());
    if let Some(p) = &parent {
        write_comparison(p, &run_dirs);
    }
    let interrupted = scenario_runs
        .iter()
        .flat_map(|r| &r.results)
        .any(|t| t.outcome.as_ref().is_some_and(|o| o.interrupted));
    let interrupted = interrupted || *shutdown.requested.borrow();
    super::metrics::finish(endpoint, interrupted).await;
    if interrupted {
        return Ok(shutdown.interrupted_exit_code());
    }
    Ok(exit::code(if !failures.is_empty() {
        exit::FAILED
    } else if !unmet.is_empty() {
        exit::FINDING
    } else {
        exit::OK
    }))
}

/// Loads and validates every scenario at `path` before anything starts, as tests with
/// `--adapter` and `--workers` applied, printing their warnings. Returns them and how many
/// scenarios of a directory were skipped.
///
/// # Errors
/// A bad-input error (exit 2): a file that does not parse or validate, a scenario this
/// machine cannot run when it was asked for alone (or when every one is skipped), a missing
/// adapter command line, a bad `--workers`.
fn load_tests(args: &ChaosArgs, path: &Path) -> Result<(Vec<Test>, usize)> {
    // Every file is parsed and validated before anything starts.
    let scenarios =
        Scenario::load_all_as(path, args.coordinator.workers).map_err(exit::bad_input)?;
    // What this machine cannot give (a bus cut without root or nft): one file asked for is
    // refused; in a directory that scenario is skipped, said here and in the last line, and
    // the others run (unless none is left).
    let mut skipped = Vec::new();
    let mut runnable = Vec::new();
    for s in scenarios {
        match s.check_machine() {
            Ok(()) => runnable.push(s),
            Err(e) if path.is_dir() => skipped.push(e),
            Err(e) => return Err(exit::bad_input(e)),
        }
    }
    if runnable.is_empty() && !skipped.is_empty() {
        return Err(exit::bad_input(skipped.swap_remove(0)));
    }
    for e in &skipped {
        eprintln!("skipped: {e}");
    }
    let scenarios = runnable;
    let mut tests = with_adapter(
        scenarios.iter().map(Scenario::to_test).collect(),
        args.adapter.as_deref(),
    )
    .map_err(exit::bad_input)?;
    if let Some(spec) = args
        .coordinator
        .spec()
        .map_err(|m| exit::bad_input(anyhow::anyhow!(m)))?
    {
        for t in &mut tests {
            t.workers = Some(spec);
        }
    }
    // The warnings `run` prints, for each scenario's test.
    for t in &tests {
        for w in t.warnings() {
            eprintln!("warning: {}: {w}", t.name);
        }
    }
    Ok((tests, skipped.len()))
}

/// The batch directory: several trials of one file get one too (one directory per trial), as
/// does a directory of scenarios; `None` for one scenario run once.
///
/// # Errors
/// A bad-input error when the directory cannot be created under `--results`.
fn batch_dir(args: &ChaosArgs, path: &Path, n: u32) -> Result<Option<RunDir>> {
    if !(path.is_dir() || n > 1) {
        return Ok(None);
    }
    let dir = RunDir::create(&args.results, "chaos")
        .with_context(|| {
            format!(
                "cannot create a run directory under {}",
                args.results.display()
            )
        })
        .map_err(exit::bad_input)?;
    eprintln!("results: {}", dir.path().display());
    Ok(Some(dir))
}

/// Prints the closing lines: the overview (several trials), the counts, and one line per
/// expectation not as claimed. Returns those lines.
fn print_summary(
    scenario_runs: &[ScenarioTrials<'_>],
    n: u32,
    skipped: usize,
    failures: usize,
) -> Vec<String> {
    let tallies = || {
        scenario_runs
            .iter()
            .flat_map(|r| r.tallies.iter().map(move |t| (r.scenario, t)))
    };
    let unmet = unmet_lines(scenario_runs, n);
    let met = tallies().filter(|(_, t)| t.met()).count();
    let unjudged = tallies()
        .filter(|(_, t)| t.not_judged > 0 && t.not_as_claimed == 0)
        .count();
    let mut unjudged = if unjudged > 0 {
        format!(", {unjudged} not judged (interrupted)")
    } else {
        String::new()
    };
    if skipped > 0 {
        unjudged.push_str(&format!(
            ", {skipped} scenario(s) skipped (this machine cannot run them: see `skipped:` above)"
        ));
    }
    if n > 1 {
        print!("{}", render_overview(scenario_runs, n));
    }
    let (times, every) = if n > 1 {
        (format!(" × {n} trials"), format!(" in {n}/{n}"))
    } else {
        (String::new(), String::new())
    };
    println!(
        "\n{} scenario(s){times}, {met} expectation(s) as claimed{every}, {} not{unjudged}, {failures} scenario error(s)",
        scenario_runs.len(),
        unmet.len(),
    );
    for u in &unmet {
        println!("  not as claimed: {u}");
    }
    unmet
}

/// Writes the comparison report of the measured runs into the batch directory (a failure is
/// a warning: the results are saved) and names the directory.
fn write_comparison(parent: &RunDir, run_dirs: &[PathBuf]) {
    if !run_dirs.is_empty() {
        match super::report::write_comparison_for(run_dirs, &parent.file("comparison")) {
            Ok(html) => println!("comparison report (open this): {}", html.display()),
            Err(e) => eprintln!(
                "warning: results are saved, but the comparison could not be written: {e:#}\n\
                 (retry with `lockbench report {}/*/`)",
                parent.path().display()
            ),
        }
    }
    println!("results: {}", parent.path().display());
}
