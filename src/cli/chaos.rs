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
use lockbench::orchestration::chaos::{
    self, verdict_name, Backend, ChaosError, ChaosProgress, ScenarioOutcome,
};
use lockbench::orchestration::experiment::ExperimentError;
use lockbench::orchestration::scenario::{catalogue, Scenario};
use lockbench::results::{table::fmt_us, RunDir};
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
  [workload]                           # clients, resources, hold, ttl, duration are required
  clients = 6
  resources = 1
  hold = \"20ms\"                        # or \"5ms..20ms\"
  ttl = \"300ms\"
  duration = \"6s\"
  # retry_attempts, retry_delay, acquire_timeout, watchdog, node_timeout,
  # response_timeout, connect_timeout, rate are optional
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

Exit codes: 0 every claim as claimed, 1 some claim not met, 2 bad input (nothing started),
4 a scenario failed to run, 130/143 interrupted (partial results kept, not judged).";

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
    /// Where nodes and Toxiproxy run: `local` (redis-server processes, embedded Toxiproxy) or
    /// `docker` (one Redis container per node and a Toxiproxy container, on a network of the
    /// run's own; build the local images first with `docker/build-images.sh`).
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

impl ChaosArgs {
    /// The backend with its images (flags, then REDIS_IMAGE / TOXIPROXY_IMAGE, then the local
    /// images). The run tag is set per scenario.
    fn backend(&self) -> Result<Backend> {
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
pub fn render(o: &ScenarioOutcome) -> String {
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
            .map_or_else(|| "-".to_string(), |c| verdict_name(c.verdict));
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

    fn show(&self, event: ChaosProgress<'_>) {
        let line = progress_line(&self.scenario, event);
        match (&self.bar, event) {
            (Some(bar), _) => bar.set_message(line),
            // Without a terminal, only the steps (no line per second).
            (None, ChaosProgress::Tick { .. }) => {}
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
fn progress_line(scenario: &str, event: ChaosProgress<'_>) -> String {
    match event {
        ChaosProgress::Containers(tag) => format!("docker: network and containers {tag}*"),
        ChaosProgress::Strategy(name) => format!("running {name} …"),
        ChaosProgress::Tick {
            strategy,
            elapsed,
            duration,
            acquired,
            errors,
            active_faults,
        } => format!(
            "{scenario} / {strategy}  {}s / {}s  acquired {acquired}, errors {errors}  faults: {}",
            elapsed.as_secs(),
            duration.as_secs(),
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
fn explain(e: &ChaosError, scenario: &Scenario) -> String {
    if let ChaosError::Experiment {
        source: ExperimentError::Driver(DriverError::Connect { client, source, .. }),
        ..
    } = e
    {
        let timeout = scenario
            .workload
            .connect_timeout
            .unwrap_or(Duration::from_secs(1));
        return format!(
            "error: {}: {} clients could not all connect within connect_timeout {} (client \
             {client} failed first: {source}): the nodes were started by lockbench and are up; \
             raise `connect_timeout` in [workload] or lower `clients`",
            scenario.name,
            scenario.workload.clients,
            humantime::format_duration(timeout)
        );
    }
    exit::render_std(e)
}

/// Runs `lockbench chaos`. Exit code by the policy in [`super::exit`].
pub async fn run(args: ChaosArgs) -> Result<ExitCode> {
    if args.list_faults {
        print!("{}", catalogue::render());
        return Ok(exit::code(exit::OK));
    }
    let path = args.path.clone().unwrap_or_default();
    // Every file is parsed and validated before anything starts.
    let scenarios = Scenario::load_all(&path).map_err(exit::bad_input)?;
    let backend = args.backend()?;
    RunDir::check_root(&args.results).map_err(exit::bad_input)?;
    let shutdown = Shutdown::install()?;
    let batch = path.is_dir();
    let parent = if batch {
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
    let mut outcomes = Vec::new();
    let mut failures = Vec::new();
    let mut scenario_dirs = Vec::new();
    for scenario in &scenarios {
        if *shutdown.requested.borrow() {
            break;
        }
        let dir = match &parent {
            Some(p) => RunDir::create_named(p.path(), &scenario.name)?,
            None => RunDir::create_unlinked(&args.results, &scenario.name)?,
        };
        eprintln!("{}: {}", scenario.name, dir.path().display());
        let progress = Progress::new(&scenario.name, args.no_progress);
        // A single scenario's directory becomes `results/latest` once it measures something
        // (a scenario whose nodes do not start never does).
        let linked = std::cell::Cell::new(parent.is_some());
        let link = || {
            if !linked.replace(true) {
                if let Err(e) = dir.point_latest() {
                    eprintln!("warning: {e}");
                }
            }
        };
        let result = chaos::run_scenario_on(
            &backend,
            scenario,
            &dir,
            shutdown.requested.clone(),
            |event| {
                if matches!(event, ChaosProgress::Tick { .. }) {
                    link();
                }
                progress.show(event);
            },
        )
        .await;
        progress.finish();
        match result {
            Ok(o) => {
                link();
                print!("{}", render(&o));
                super::report::after_run(dir.path());
                outcomes.push(o);
                scenario_dirs.push(dir.path().to_path_buf());
            }
            Err(e) => {
                eprintln!("{}", explain(&e, scenario));
                failures.push(format!("{}: {e}", scenario.name));
            }
        }
    }
    shutdown.disarm();
    if let Some(p) = &parent {
        let table: Vec<serde_json::Value> = outcomes
            .iter()
            .map(|o| {
                serde_json::json!({
                    "scenario": o.name,
                    "claim": o.claim,
                    "interrupted": o.interrupted,
                    "expectations": o.expectations,
                })
            })
            .collect();
        p.write_json("chaos.json", &table)?;
    }
    let unmet: Vec<String> = outcomes
        .iter()
        .flat_map(|o| {
            o.expectations
                .iter()
                .filter(|e| e.met == Some(false))
                .map(move |e| format!("{} / {}: {}", o.name, e.strategy, e.mismatches.join("; ")))
        })
        .collect();
    let met = outcomes
        .iter()
        .flat_map(|o| &o.expectations)
        .filter(|e| e.met == Some(true))
        .count();
    let unjudged = outcomes
        .iter()
        .flat_map(|o| &o.expectations)
        .filter(|e| e.interrupted)
        .count();
    let unjudged = if unjudged > 0 {
        format!(", {unjudged} not judged (interrupted)")
    } else {
        String::new()
    };
    println!(
        "\n{} scenario(s), {met} expectation(s) as claimed, {} not{unjudged}, {} scenario error(s)",
        outcomes.len(),
        unmet.len(),
        failures.len()
    );
    for u in &unmet {
        println!("  not as claimed: {u}");
    }
    if let Some(p) = &parent {
        if !scenario_dirs.is_empty() {
            match super::report::write_comparison_for(&scenario_dirs, &p.file("comparison")) {
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
    if outcomes.iter().any(|o| o.interrupted) || *shutdown.requested.borrow() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use lockbench::checker::Verdict;
    use lockbench::orchestration::chaos::ExpectationCheck;
    use lockbench::results::StrategySummary;

    #[test]
    fn an_interrupted_strategy_is_shown_not_judged() {
        let o = ScenarioOutcome {
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
        let line = progress_line(
            "02-naive-del-pause",
            ChaosProgress::Tick {
                strategy: "naive-del",
                elapsed: Duration::from_millis(2400),
                duration: Duration::from_secs(6),
                acquired: 40,
                errors: 1,
                active_faults: &faults,
            },
        );
        assert_eq!(
            line,
            "02-naive-del-pause / naive-del  2s / 6s  acquired 40, errors 1  faults: client-pause client:0"
        );
    }
}
