//! `lockbench chaos <file|dir>`: run scenarios, print each one's verdicts next to what its
//! claim predicts.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use lockbench::driver::DriverError;
use lockbench::orchestration::experiment::ExperimentError;
use lockbench::orchestration::runner::{
    Backend, Progress as RunProgress, RunError, Runner, TestOutcome,
};
use lockbench::orchestration::scenario::{catalogue, Scenario};
use lockbench::orchestration::test::Test;
use lockbench::orchestration::trials::{self, ExpectationTally, TrialResult};
use lockbench::results::{table::fmt_us, RunDir};
use lockbench::strategy::{StrategyError, StrategyKind};
use lockbench::topology::DockerOptions;

use super::exit;
use super::signals::Shutdown;

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

/// Renders one scenario's result: claim, then one row per strategy with its verdict and
/// whether the expectation held.
pub fn render(o: &TestOutcome) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n{} — {}", o.name, o.claim);
    let _ = writeln!(
        out,
        "  {:<15} {:>8} {:>9} {:>7} {:>9}  {:<9} {:<9} result",
        "strategy", "ops/s", "acquired", "errors", "p99", "verdict", "expected"
    );
    for s in &o.strategies {
        let exp = o.expectations.iter().find(|e| e.strategy == s.strategy);
        let verdict = s
            .check
            .as_ref()
            .map_or_else(|| "-".to_string(), |c| c.verdict.to_string());
        let interrupted = exp.is_some_and(|e| e.interrupted);
        let expected = exp
            .and_then(|e| e.expected.as_ref())
            .map_or("-", |e| e.verdict.as_str());
        let result = match exp.and_then(|e| e.met) {
            _ if interrupted => "interrupted: not judged".to_string(),
            Some(true) => "as claimed".to_string(),
            Some(false) => format!(
                "NOT AS CLAIMED: {}",
                exp.map(|e| e.mismatches.join("; ")).unwrap_or_default()
            ),
            None => "-".to_string(),
        };
        let _ = writeln!(
            out,
            "  {:<15} {:>8.0} {:>9} {:>7} {:>9}  {:<9} {:<9} {result}",
            s.strategy,
            s.throughput_ops_s,
            s.acquired,
            s.errors,
            fmt_us(s.acquire_ok.p99_us),
            verdict,
            expected
        );
        if let Some(c) = &s.check {
            let counts: Vec<String> = c
                .anomaly_counts
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            if !counts.is_empty() {
                let _ = writeln!(out, "  {:<15} anomalies: {}", "", counts.join(", "));
            }
        }
    }
    if o.interrupted {
        let _ = writeln!(
            out,
            "  (interrupted: partial results kept, not judged against the claim)"
        );
    }
    out
}

/// The progress line on a terminal: scenario, strategy, elapsed / duration, active faults.
struct Progress {
    bar: Option<ProgressBar>,
    scenario: String,
}

impl Progress {
    fn new(scenario: &str, disabled: bool) -> Self {
        let bar = (!disabled && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(250));
            bar
        });
        Self {
            bar,
            scenario: scenario.to_string(),
        }
    }

    fn show(&self, event: RunProgress<'_>) {
        let line = progress_line(&self.scenario, event);
        match (&self.bar, event) {
            (Some(bar), _) => bar.set_message(line),
            // Without a terminal, only the steps (no line per second).
            (None, RunProgress::Tick { .. }) => {}
            (None, _) => eprintln!("  {line}"),
        }
    }

    fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// One progress line, e.g. `06-redlock-minority-loss / redlock  2s / 5s  acquired 812,
/// errors 3  faults: kill n1,n2`.
fn progress_line(scenario: &str, event: RunProgress<'_>) -> String {
    match event {
        RunProgress::Containers(tag) => format!("docker: network and containers {tag}*"),
        RunProgress::Strategy(name) => format!("running {name} …"),
        RunProgress::Tick {
            strategy,
            elapsed,
            duration,
            summary,
            active_faults,
        } => format!(
            "{scenario} / {strategy}  {}s / {}s  acquired {}, errors {}  faults: {}",
            elapsed.as_secs(),
            duration.unwrap_or_default().as_secs(),
            summary.acquired,
            summary.errors,
            if active_faults.is_empty() {
                "none".to_string()
            } else {
                active_faults.join("; ")
            }
        ),
    }
}

/// A scenario error as the user should read it: a connect failure names the client count and
/// the scenario's `connect_timeout` (the nodes are lockbench's own, so they are up).
fn explain(e: &RunError, test: &Test) -> String {
    if let RunError::Experiment {
        source: ExperimentError::Driver(DriverError::Connect { client, source, .. }),
        ..
    } = e
    {
        if matches!(source, StrategyError::AdapterRefused { .. }) {
            return format!("error: {}: {source}", test.name);
        }
        let timeout = test.client.connect.connect_timeout;
        return format!(
            "error: {}: {} clients could not all connect within connect_timeout {} (client \
             {client} failed first: {source}): the nodes were started by lockbench and are up; \
             raise `connect_timeout` in [workload] or lower `clients`",
            test.name,
            test.workload.clients,
            humantime::format_duration(timeout)
        );
    }
    exit::render_std(e)
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
    // Every file is parsed and validated before anything starts.
    let scenarios =
        Scenario::load_all_as(&path, args.coordinator.workers).map_err(exit::bad_input)?;
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
    // Several trials of one file get a batch directory too (one directory per trial).
    let parent = if path.is_dir() || n > 1 {
        let dir = RunDir::create(&args.results, "chaos")
            .with_context(|| {
                format!(
                    "cannot create a run directory under {}",
                    args.results.display()
                )
            })
            .map_err(exit::bad_input)?;
        eprintln!("results: {}", dir.path().display());
        Some(dir)
    } else {
        None
    };
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
    let tallies = || {
        scenario_runs
            .iter()
            .flat_map(|r| r.tallies.iter().map(move |t| (r.scenario, t)))
    };
    let unmet = unmet_lines(&scenario_runs, n);
    let met = tallies().filter(|(_, t)| t.met()).count();
    let unjudged = tallies()
        .filter(|(_, t)| t.not_judged > 0 && t.not_as_claimed == 0)
        .count();
    let mut unjudged = if unjudged > 0 {
        format!(", {unjudged} not judged (interrupted)")
    } else {
        String::new()
    };
    if !skipped.is_empty() {
        unjudged.push_str(&format!(
            ", {} scenario(s) skipped (this machine cannot run them: see `skipped:` above)",
            skipped.len()
        ));
    }
    if n > 1 {
        print!("{}", render_overview(&scenario_runs, n));
    }
    let (times, every) = if n > 1 {
        (format!(" × {n} trials"), format!(" in {n}/{n}"))
    } else {
        (String::new(), String::new())
    };
    println!(
        "\n{} scenario(s){times}, {met} expectation(s) as claimed{every}, {} not{unjudged}, {} scenario error(s)",
        scenario_runs.len(),
        unmet.len(),
        failures.len()
    );
    for u in &unmet {
        println!("  not as claimed: {u}");
    }
    if let Some(p) = &parent {
        if !run_dirs.is_empty() {
            match super::report::write_comparison_for(&run_dirs, &p.file("comparison")) {
                Ok(html) => println!("comparison report (open this): {}", html.display()),
                Err(e) => eprintln!(
                    "warning: results are saved, but the comparison could not be written: {e:#}\n\
                     (retry with `lockbench report {}/*/`)",
                    p.path().display()
                ),
            }
        }
        println!("results: {}", p.path().display());
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

/// One line per expectation that did not hold in some trial, with why.
fn unmet_lines(scenario_runs: &[ScenarioTrials<'_>], n: u32) -> Vec<String> {
    scenario_runs
        .iter()
        .flat_map(|r| r.tallies.iter().map(move |t| (r.scenario, t)))
        .filter(|(_, t)| t.not_as_claimed > 0)
        .map(|(s, t)| {
            let why: Vec<String> = t
                .misses
                .iter()
                .map(|m| {
                    let text = m.mismatches.join("; ");
                    if n > 1 {
                        format!("trial {}: {text}", m.trial)
                    } else {
                        text
                    }
                })
                .collect();
            if n > 1 {
                format!(
                    "{} / {}: as claimed in {}/{n} ({})",
                    s.name,
                    t.strategy,
                    t.as_claimed,
                    why.join(" | ")
                )
            } else {
                format!("{} / {}: {}", s.name, t.strategy, why.join(" | "))
            }
        })
        .collect()
}

/// What every trial of one `lockbench chaos` shares: its options, the runner, the batch
/// directory (a directory of scenarios, or several trials) and the trial count N.
struct Batch<'a> {
    args: &'a ChaosArgs,
    runner: Runner,
    parent: Option<RunDir>,
    n: u32,
}

impl Batch<'_> {
    /// Runs the N trials of one scenario (fewer when interrupted), printing each, then its
    /// k/N lines.
    async fn scenario<'t>(&self, scenario: &'t Test) -> Result<ScenarioTrials<'t>> {
        let mut runs = ScenarioTrials {
            scenario,
            results: Vec::new(),
            dirs: Vec::new(),
            tallies: Vec::new(),
            failures: Vec::new(),
            measured: Vec::new(),
        };
        for trial in 1..=self.n {
            if *self.runner.shutdown.borrow() {
                break;
            }
            if self.trial(&mut runs, trial).await? {
                break;
            }
        }
        runs.tallies = trials::tally(scenario, self.n, &runs.results);
        if self.n > 1 {
            print!("{}", render_tallies(&scenario.name, &runs.tallies));
        }
        Ok(runs)
    }

    /// Runs one trial into its own directory and records it in `runs`. Returns whether it
    /// was interrupted (then no further trial starts).
    async fn trial(&self, runs: &mut ScenarioTrials<'_>, trial: u32) -> Result<bool> {
        let (scenario, n) = (runs.scenario, self.n);
        let run = scenario.trial(trial);
        let seed = run.workload.seed;
        let dir = match &self.parent {
            Some(p) if n > 1 => RunDir::create_named(
                &p.path().join(&scenario.name),
                &trials::trial_dir_name(trial, n),
            )?,
            Some(p) => RunDir::create_named(p.path(), &scenario.name)?,
            None => RunDir::create_unlinked(&self.args.results, &scenario.name)?,
        };
        let label = if n > 1 {
            format!("{} trial {trial}/{n} (seed {seed})", scenario.name)
        } else {
            scenario.name.clone()
        };
        eprintln!("{label}: {}", dir.path().display());
        let progress = Progress::new(&label, self.args.no_progress);
        // A single scenario's directory becomes `results/latest` once it measures
        // something (a scenario whose nodes do not start never does).
        let linked = std::cell::Cell::new(self.parent.is_some());
        let link = || {
            if !linked.replace(true) {
                if let Err(e) = dir.point_latest() {
                    eprintln!("warning: {e}");
                }
            }
        };
        let result = self
            .runner
            .run(&run, &dir, |event| {
                if matches!(event, RunProgress::Tick { .. }) {
                    link();
                }
                progress.show(event);
            })
            .await;
        progress.finish();
        runs.dirs.push(dir.path().to_path_buf());
        let outcome = match result {
            Ok(o) => {
                link();
                if n > 1 {
                    print!("{}", render_trial(trial, n, seed, &o));
                } else {
                    print!("{}", render(&o));
                }
                super::report::after_run(dir.path());
                runs.measured.push(dir.path().to_path_buf());
                Some(o)
            }
            Err(e) => {
                eprintln!("{}", explain(&e, scenario));
                if n > 1 {
                    println!("  trial {trial}/{n} (seed {seed}): failed to run: {e}");
                }
                runs.failures
                    .push(format!("{} trial {trial}: {e}", scenario.name));
                None
            }
        };
        let interrupted = outcome.as_ref().is_some_and(|o| o.interrupted);
        runs.results.push(TrialResult {
            trial,
            seed,
            outcome,
        });
        Ok(interrupted)
    }
}

/// The trials of one scenario, as run.
struct ScenarioTrials<'a> {
    scenario: &'a Test,
    results: Vec<TrialResult>,
    /// Each trial's run directory, in trial order (also those that failed to run).
    dirs: Vec<PathBuf>,
    tallies: Vec<ExpectationTally>,
    /// Trials that failed to run, one line each.
    failures: Vec<String>,
    /// The directories of the trials that ran (the comparison report reads them).
    measured: Vec<PathBuf>,
}

impl ScenarioTrials<'_> {
    /// The scenario's record in `chaos.json`: k/N per expectation, then every trial.
    fn to_json(&self, n: u32) -> serde_json::Value {
        let runs: Vec<serde_json::Value> = self
            .results
            .iter()
            .zip(&self.dirs)
            .map(|(t, dir)| {
                serde_json::json!({
                    "trial": t.trial,
                    "seed": t.seed,
                    "dir": dir,
                    "ran": t.outcome.is_some(),
                    "interrupted": t.outcome.as_ref().is_some_and(|o| o.interrupted),
                    "expectations": t.outcome.as_ref().map(|o| &o.expectations),
                })
            })
            .collect();
        serde_json::json!({
            "scenario": self.scenario.name,
            "claim": self.scenario.claim.as_deref().unwrap_or_default(),
            "trials": n,
            "interrupted": self.results.iter().any(|t| t.outcome.as_ref().is_some_and(|o| o.interrupted))
                || (self.results.len() as u32) < n,
            "expectations": self.tallies,
            "runs": runs,
        })
    }
}

/// One line per trial when a scenario runs several times: each strategy's verdict and whether
/// its expectation held.
pub fn render_trial(trial: u32, n: u32, seed: u64, o: &TestOutcome) -> String {
    let parts: Vec<String> = o
        .expectations
        .iter()
        .map(|e| {
            let result = match e.met {
                _ if e.interrupted => "interrupted: not judged".to_string(),
                Some(true) => "as claimed".to_string(),
                Some(false) => format!("NOT AS CLAIMED: {}", e.mismatches.join("; ")),
                None => "-".to_string(),
            };
            format!("{} {} {result}", e.strategy, e.observed)
        })
        .collect();
    let mut out = String::new();
    if trial == 1 {
        let _ = writeln!(out, "\n{} — {}", o.name, o.claim);
    }
    let _ = writeln!(
        out,
        "  trial {trial}/{n} (seed {seed}): {}",
        parts.join(" · ")
    );
    out
}

/// The k/N lines of one scenario after its trials.
pub fn render_tallies(scenario: &str, tallies: &[ExpectationTally]) -> String {
    let mut out = String::new();
    for t in tallies {
        let _ = writeln!(
            out,
            "  {scenario} / {}: expected {} — {}",
            t.strategy,
            expected_text(&t.expected),
            t.label()
        );
    }
    out
}

/// `invalid + mutex-violation, no stale-write-accepted`.
fn expected_text(e: &lockbench::orchestration::expectation::Expectation) -> String {
    let mut out = e.verdict.clone();
    for a in &e.anomalies {
        let _ = write!(out, " + {a}");
    }
    for a in &e.absent {
        let _ = write!(out, ", no {a}");
    }
    out
}

/// The table of every expectation after all scenarios: `as claimed in k/N`.
fn render_overview(runs: &[ScenarioTrials<'_>], n: u32) -> String {
    let mut out = format!("\nas claimed per expectation over {n} trials:\n");
    for r in runs {
        for t in &r.tallies {
            let _ = writeln!(
                out,
                "  {:<36} {:<15} {:>5}  {}",
                r.scenario.name,
                t.strategy,
                format!("{}/{}", t.as_claimed, t.trials),
                if t.met() { String::new() } else { t.label() }
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockbench::checker::Verdict;
    use lockbench::orchestration::expectation::ExpectationCheck;
    use lockbench::results::StrategySummary;

    #[test]
    fn an_interrupted_strategy_is_shown_not_judged() {
        let o = TestOutcome {
            name: "04".into(),
            claim: "expiry shorter than the work".into(),
            strategies: vec![StrategySummary {
                strategy: "single".into(),
                ..Default::default()
            }],
            expectations: vec![ExpectationCheck {
                strategy: "single".into(),
                observed: Verdict::Valid,
                expected: None,
                met: None,
                mismatches: vec![],
                interrupted: true,
            }],
            interrupted: true,
        };
        let text = render(&o);
        assert!(text.contains("interrupted: not judged"), "{text}");
        assert!(!text.contains("NOT AS CLAIMED"), "{text}");
    }

    #[test]
    fn progress_line_names_elapsed_duration_and_faults() {
        let faults = vec!["client-pause client:0".to_string()];
        let summary = StrategySummary {
            acquired: 40,
            errors: 1,
            ..Default::default()
        };
        let line = progress_line(
            "02-naive-del-pause",
            RunProgress::Tick {
                strategy: "naive-del",
                elapsed: Duration::from_millis(2400),
                duration: Some(Duration::from_secs(6)),
                summary: &summary,
                active_faults: &faults,
            },
        );
        assert_eq!(
            line,
            "02-naive-del-pause / naive-del  2s / 6s  acquired 40, errors 1  faults: client-pause client:0"
        );
    }
}
