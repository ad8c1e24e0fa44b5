//! `lockbench run`: start (or reach) the topology, run each strategy, write results as it goes.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::watch;

use lockbench::config::{RunConfig, TopologyConfig};
use lockbench::driver::{self, DriverContext, Pacing, StopCondition, Workload};
use lockbench::experiment;
use lockbench::nemesis::{ProxiedTopology, ProxyOptions};
use lockbench::node::ConnectOptions;
use lockbench::results::{table, CheckSummary, RunDir, RunStatus, RunSummary};
use lockbench::strategy::{RetryPolicy, StrategyOptions};
use lockbench::topology::{LocalTopologyOptions, Topology, TopologyKind};

use super::args::RunArgs;
use super::signals::Shutdown;

/// Builds the validated config from the parsed arguments.
fn config(args: RunArgs) -> Result<RunConfig> {
    let stop = match args.ops {
        Some(n) => StopCondition::Ops(n),
        None => StopCondition::Duration(args.duration),
    };
    let pacing = match args.rate {
        Some(rate_per_s) => Pacing::Open { rate_per_s },
        None => Pacing::Closed,
    };
    let node_timeout = args
        .node_timeout
        .unwrap_or_else(|| StrategyOptions::default_node_timeout(args.ttl));
    let name = args.name.clone().unwrap_or_else(|| {
        args.strategy
            .0
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join("+")
    });
    let cfg = RunConfig {
        name,
        topology: TopologyConfig {
            kind: args.topology,
            urls: args.urls,
            persistence: args.persistence,
            key_prefix: args.key_prefix,
        },
        strategies: args.strategy.0,
        ttl: args.ttl,
        retry: RetryPolicy {
            attempts: args.retry_attempts.max(1),
            delay: args.retry_delay,
            jitter: args.retry_jitter,
            acquire_timeout: args.acquire_timeout,
        },
        watchdog: args.watchdog,
        drift_factor: args.drift_factor,
        node_timeout,
        workload: Workload {
            clients: args.clients,
            resources: args.resources,
            hold: args.hold,
            stop,
            pacing,
            seed: args.seed,
            shared_connection: args.shared_connection,
        },
        connect: ConnectOptions {
            connect_timeout: args.connect_timeout,
            response_timeout: args.response_timeout,
        },
        results_root: args.results,
        direct: args.direct,
    };
    cfg.validate()?;
    Ok(cfg)
}

/// Runs `lockbench run`.
pub async fn run(args: Box<RunArgs>) -> Result<ExitCode> {
    let no_progress = args.no_progress;
    let audit = !args.no_audit;
    let cfg = config(*args)?;
    let shutdown = Shutdown::install()?;
    let dir = RunDir::create(&cfg.results_root, &cfg.name).with_context(|| {
        format!(
            "cannot create a run directory under {}",
            cfg.results_root.display()
        )
    })?;
    let config_json = serde_json::to_value(&cfg).context("cannot serialize the config")?;
    dir.write_json("config.json", &config_json)?;
    let mut summary = RunSummary::start(dir.run_id(), config_json);
    dir.write_json("summary.json", &summary)?;
    eprintln!("results: {}", dir.path().display());

    let outcome = run_strategies(
        &cfg,
        &dir,
        &mut summary,
        shutdown.requested.clone(),
        no_progress,
        audit,
    )
    .await;
    shutdown.disarm();
    summary.finished_at = Some(chrono::Utc::now().to_rfc3339());
    let code = match &outcome {
        Ok(true) => {
            summary.status = RunStatus::Interrupted;
            shutdown.interrupted_exit_code()
        }
        Ok(false) => {
            summary.status = RunStatus::Completed;
            ExitCode::SUCCESS
        }
        Err(e) => {
            summary.status = RunStatus::Failed;
            summary.error = Some(format!("{e:#}"));
            ExitCode::FAILURE
        }
    };
    dir.write_json("summary.json", &summary)?;
    if !summary.strategies.is_empty() {
        println!("\n{}", table::render(&summary.strategies));
    }
    println!("results: {}", dir.path().display());

    // The report reads what is now on disk; if it fails, the results stand and so does the code.
    super::report::after_run(dir.path());
    outcome.map(|_| code)
}

/// The nodes of a run: behind the embedded Toxiproxy (the default, as in chaos runs), or
/// reached directly (`--direct`, for raw speed numbers without the proxy hop).
enum Nodes {
    Direct(Box<Topology>),
    Proxied(Box<ProxiedTopology>),
}

impl Nodes {
    fn endpoints(&self) -> Vec<lockbench::node::NodeEndpoint> {
        match self {
            Nodes::Direct(t) => t.endpoints(),
            Nodes::Proxied(p) => p.endpoints(),
        }
    }

    async fn shutdown(self) {
        match self {
            Nodes::Direct(t) => t.shutdown().await,
            Nodes::Proxied(p) => p.shutdown().await,
        }
    }
}

/// Starts the topology, runs every strategy, tears the topology down. Returns whether the run
/// was interrupted.
async fn run_strategies(
    cfg: &RunConfig,
    dir: &RunDir,
    summary: &mut RunSummary,
    shutdown: watch::Receiver<bool>,
    no_progress: bool,
    audit: bool,
) -> Result<bool> {
    let local = LocalTopologyOptions {
        persistence: cfg.topology.persistence,
        key_prefix: cfg.topology.key_prefix.clone(),
        ..LocalTopologyOptions::new(dir.file("nodes"))
    };
    let topology = match (cfg.topology.kind, cfg.direct) {
        (TopologyKind::External, direct) => {
            let t = Topology::external_with_timeouts(
                &cfg.topology.urls,
                &cfg.topology.key_prefix,
                &cfg.connect,
            )
            .await
            .context("cannot reach the external topology")?;
            if direct {
                Nodes::Direct(Box::new(t))
            } else {
                Nodes::Proxied(Box::new(
                    ProxiedTopology::wrap(t, &ProxyOptions::default()).await?,
                ))
            }
        }
        (kind, true) => Nodes::Direct(Box::new(
            Topology::start_local(kind, &local)
                .await
                .context("cannot start the local topology")?,
        )),
        (kind, false) => Nodes::Proxied(Box::new(
            ProxiedTopology::start(kind, &local, &ProxyOptions::default())
                .await
                .context("cannot start the local topology behind its proxies")?,
        )),
    };
    let result = async {
        let ctx = DriverContext {
            endpoints: topology.endpoints(),
            connect: cfg.connect,
            workload: cfg.workload.clone(),
            shutdown: shutdown.clone(),
        };
        let mut interrupted = false;
        let mut checks = serde_json::Map::new();
        for &kind in &cfg.strategies {
            if *shutdown.borrow() {
                interrupted = true;
                break;
            }
            let opts = cfg.strategy_options(kind);
            let progress = progress_bar(&cfg.workload, &kind.to_string(), no_progress);
            let name = kind.to_string();
            let index = summary.strategies.len();
            summary.strategies.push(Default::default());
            let on_tick = |collector: &driver::Collector, elapsed: Duration| {
                summary.strategies[index] = collector.summary(&name, elapsed);
                if let Err(e) = dir.write_progress(summary, &name, &collector.acquire_ok) {
                    tracing::warn!("cannot rewrite results: {e}");
                }
                if let Some(pb) = &progress {
                    let s = &summary.strategies[index];
                    pb.set_position(match cfg.workload.stop {
                        StopCondition::Duration(_) => elapsed.as_secs(),
                        StopCondition::Ops(_) => s.attempts,
                    });
                    pb.set_message(format!(
                        "{:.0} ops/s, {} errors",
                        s.throughput_ops_s, s.errors
                    ));
                }
            };
            let outcome = experiment::run(&ctx, &opts, &dir.file(&name), audit, None, on_tick)
                .await
                .with_context(|| format!("strategy {name}"))?;
            if let Some(pb) = progress {
                pb.finish_and_clear();
            }
            if let Some(report) = &outcome.check {
                summary.strategies[index].check = Some(CheckSummary::from_report(report));
                checks.insert(name.clone(), serde_json::to_value(report)?);
                dir.write_json("checker.json", &checks)?;
            }
            dir.write_json("summary.json", summary)?;
            let run = outcome.run;
            if run.interrupted {
                interrupted = true;
                break;
            }
        }
        Ok::<bool, anyhow::Error>(interrupted)
    }
    .await;
    topology.shutdown().await;
    result
}

fn progress_bar(workload: &Workload, name: &str, disabled: bool) -> Option<ProgressBar> {
    if disabled || !std::io::stdout().is_terminal() {
        return None;
    }
    let (len, unit) = match workload.stop {
        StopCondition::Duration(d) => (d.as_secs().max(1), "s"),
        StopCondition::Ops(n) => (n, "ops"),
    };
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template(&format!(
            "{{prefix:>16}} [{{bar:30}}] {{pos}}/{{len}}{unit} {{msg}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    pb.set_prefix(name.to_string());
    Some(pb)
}
