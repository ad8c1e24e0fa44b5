//! `lockbench run`: start (or reach) the topology, run each strategy, write results as it goes.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::watch;

use lockbench::driver::{self, DriverContext, DriverError, Pacing, StopCondition, Workload};
use lockbench::nemesis::{ProxiedTopology, ProxyOptions};
use lockbench::node::ConnectOptions;
use lockbench::orchestration::config::{RunConfig, TopologyConfig};
use lockbench::orchestration::experiment::{self, ExperimentError};
use lockbench::results::{table, CheckSummary, RunDir, RunStatus, RunSummary, StrategySummary};
use lockbench::strategy::{RetryPolicy, StrategyOptions};
use lockbench::topology::{LocalTopologyOptions, Topology, TopologyKind};

use super::args::RunArgs;
use super::exit;
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
            attempts: args.retry_attempts,
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
            in_flight: args.in_flight,
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

/// Runs `lockbench run`. Exit code by the policy in [`super::exit`]: 0 all valid (or not
/// audited), 1 some verdict invalid, 3 some unknown, 2 bad input, 4 failed, 130/143
/// interrupted.
pub async fn run(args: Box<RunArgs>) -> Result<ExitCode> {
    let no_progress = args.no_progress;
    let audit = !args.no_audit;
    let cfg = config(*args).map_err(exit::bad_input)?;
    RunDir::check_root(&cfg.results_root).map_err(exit::bad_input)?;
    for w in cfg.warnings() {
        eprintln!("warning: {w}");
    }
    let shutdown = Shutdown::install()?;
    let root_existed = cfg.results_root.exists();
    // `latest` moves to this run only once it has measured something.
    let dir = RunDir::create_unlinked(&cfg.results_root, &cfg.name)
        .with_context(|| {
            format!(
                "cannot create a run directory under {}",
                cfg.results_root.display()
            )
        })
        .map_err(exit::bad_input)?;
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
    .await
    .map_err(|e| explain_connect_failure(e, &cfg));
    shutdown.disarm();
    summary.finished_at = Some(chrono::Utc::now().to_rfc3339());
    let code = match &outcome {
        Ok(true) => {
            summary.status = RunStatus::Interrupted;
            shutdown.interrupted_exit_code()
        }
        Ok(false) => {
            summary.status = RunStatus::Completed;
            exit::code(exit::for_verdicts(
                summary
                    .strategies
                    .iter()
                    .filter_map(|s| s.check.as_ref().map(|c| c.verdict)),
            ))
        }
        Err(e) => {
            summary.status = RunStatus::Failed;
            summary.error = Some(exit::render(e).trim_start_matches("error: ").to_string());
            exit::code(exit::FAILED)
        }
    };
    dir.write_json("summary.json", &summary)?;
    if summary.strategies.is_empty() && outcome.is_err() {
        // Nothing measured: no table, no report, `latest` untouched.
        forget_failed_start(&dir, (!root_existed).then_some(cfg.results_root.as_path()));
        return outcome.map(|_| code);
    }
    if let Err(e) = dir.point_latest() {
        eprintln!("warning: {e}");
    }
    if !summary.strategies.is_empty() {
        println!("\n{}", table::render(&summary.strategies));
    }
    println!("results: {}", dir.path().display());

    // The report reads what is now on disk; if it fails, the results stand and so does the code.
    super::report::after_run(dir.path());
    outcome.map(|_| code)
}

/// A run that failed before measuring anything: its directory is removed (and the results
/// root, when this run created it and nothing else is in it), unless local nodes left their
/// logs in `nodes/`: then it stays, marked `failed` in `summary.json`, and says so.
fn forget_failed_start(dir: &RunDir, created_root: Option<&std::path::Path>) {
    if dir.file("nodes").exists() {
        eprintln!(
            "nothing was measured; {} is kept for the node logs (summary.json says failed; \
             results/latest was not moved)",
            dir.path().display()
        );
        return;
    }
    match std::fs::remove_dir_all(dir.path()) {
        Ok(()) => {
            eprintln!(
                "nothing was measured: removed {} (results/latest was not moved)",
                dir.path().display()
            );
            if let Some(root) = created_root {
                let _ = std::fs::remove_dir(root); // only succeeds when empty
            }
        }
        Err(e) => eprintln!("warning: cannot remove {}: {e}", dir.path().display()),
    }
}

/// The soft limit on open files of this process (`ulimit -n`).
fn open_file_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes into the struct we pass.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0).then_some(lim.rlim_cur)
}

/// Turns "client N could not connect" into a message that says what to change: the client
/// count and `--connect-timeout`, and (for external nodes only) whether the server runs.
fn explain_connect_failure(e: anyhow::Error, cfg: &RunConfig) -> anyhow::Error {
    let failed = e
        .chain()
        .find_map(|c| match c.downcast_ref::<ExperimentError>() {
            Some(ExperimentError::Driver(DriverError::Connect { client, source, .. })) => {
                Some((*client, source.to_string()))
            }
            _ => None,
        });
    let Some((client, cause)) = failed else {
        return e;
    };
    let clients = cfg.workload.clients;
    let timeout = humantime::format_duration(cfg.connect.connect_timeout);
    let hint = if cause.contains("os error 24") {
        format!(
            "lockbench ran out of file descriptors (each client opens one connection per node): \
             raise the open-file limit (`ulimit -n`, now {}), lower --clients, or use \
             --shared-connection",
            open_file_limit().map_or_else(|| "unknown".to_string(), |n| n.to_string())
        )
    } else if cfg.topology.kind == TopologyKind::External {
        format!(
            "check that the --url nodes accept connections, or raise --connect-timeout \
             (now {timeout})"
        )
    } else if cfg.workload.shared_connection {
        format!("raise --connect-timeout (now {timeout})")
    } else {
        format!(
            "the nodes were started by lockbench and are up; with {clients} clients opening \
             their own connections, raise --connect-timeout (now {timeout}), lower --clients, \
             or use --shared-connection"
        )
    };
    anyhow::anyhow!(
        "{clients} clients could not all connect within --connect-timeout {timeout} (client \
         {client} failed first: {cause}): {hint}"
    )
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
            connect_progress: connect_progress(cfg.workload.clients, no_progress),
        };
        let mut interrupted = false;
        let mut checks = serde_json::Map::new();
        // `results/latest` follows this run from its first measurement on.
        let mut measuring = false;
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
                summary.strategies[index] =
                    StrategySummary::from_collector(collector, &name, elapsed);
                if !std::mem::replace(&mut measuring, true) {
                    if let Err(e) = dir.point_latest() {
                        tracing::warn!("{e}");
                    }
                }
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
            let outcome =
                match experiment::run(&ctx, &opts, &dir.file(&name), audit, None, on_tick).await {
                    Ok(o) => o,
                    Err(e) => {
                        if summary.strategies[index].strategy.is_empty() {
                            // Never measured: no blank row in the summary or the table.
                            summary.strategies.remove(index);
                        }
                        return Err(e).with_context(|| format!("strategy {name}"));
                    }
                };
            if let Some(pb) = progress {
                pb.finish_and_clear();
            }
            summary.strategies[index].cut_sections = outcome.run.cut_sections;
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

/// A progress line while many clients connect: rewritten in place on a terminal, one line
/// when done otherwise (only for 1,000+ clients, where connecting takes a noticeable time).
fn connect_progress(clients: u32, disabled: bool) -> Option<driver::ConnectProgress> {
    if disabled || clients < 1000 {
        return None;
    }
    let terminal = std::io::stderr().is_terminal();
    let started = std::time::Instant::now();
    Some(std::sync::Arc::new(move |done: u32, total: u32| {
        let secs = started.elapsed().as_secs_f64();
        if terminal {
            eprint!("\rconnecting clients: {done}/{total} ({secs:.1} s)");
            if done == total {
                eprintln!();
            }
        } else if done == total {
            eprintln!("connected {total} clients in {secs:.1} s");
        }
    }))
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
