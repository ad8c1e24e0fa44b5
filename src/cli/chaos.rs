//! `lockbench chaos <file|dir>`: run scenarios, print each one's verdicts next to what its
//! claim predicts.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use lockbench::chaos::{self, verdict_name, Backend, ScenarioOutcome};
use lockbench::results::{table::fmt_us, RunDir};
use lockbench::scenario::Scenario;
use lockbench::topology::DockerOptions;

use super::signals::Shutdown;

/// Options of `lockbench chaos`.
#[derive(Debug, Args)]
pub struct ChaosArgs {
    /// A scenario file (chaos/02-naive-del-pause.toml) or a directory of them (chaos/).
    pub path: PathBuf,
    /// Root directory for results.
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
                anyhow::bail!("--redis-image and --toxiproxy-image need --backend docker");
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
        let expected = exp
            .and_then(|e| e.expected.as_ref())
            .map_or("-", |e| e.verdict.as_str());
        let result = match exp.and_then(|e| e.met) {
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
        let _ = writeln!(out, "  (interrupted: partial results)");
    }
    out
}

/// Runs `lockbench chaos`.
pub async fn run(args: ChaosArgs) -> Result<ExitCode> {
    // Every file is parsed and validated before anything starts.
    let scenarios = Scenario::load_all(&args.path)?;
    let backend = args.backend()?;
    let shutdown = Shutdown::install()?;
    let batch = args.path.is_dir();
    let parent = if batch {
        let dir = RunDir::create(&args.results, "chaos").with_context(|| {
            format!(
                "cannot create a run directory under {}",
                args.results.display()
            )
        })?;
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
            None => RunDir::create(&args.results, &scenario.name)?,
        };
        eprintln!("{}: {}", scenario.name, dir.path().display());
        let result = chaos::run_scenario_on(
            &backend,
            scenario,
            &dir,
            shutdown.requested.clone(),
            |step| match step.strip_prefix("containers ") {
                Some(tag) => eprintln!("  docker: network and containers {tag}*"),
                None => eprintln!("  running {step} …"),
            },
        )
        .await;
        match result {
            Ok(o) => {
                print!("{}", render(&o));
                super::report::after_run(dir.path());
                outcomes.push(o);
                scenario_dirs.push(dir.path().to_path_buf());
            }
            Err(e) => {
                eprintln!("error: {e:#}");
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
    println!(
        "\n{} scenario(s), {met} expectation(s) as claimed, {} not, {} scenario error(s)",
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
    Ok(if failures.is_empty() && unmet.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
