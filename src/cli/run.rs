//! `lockbench run`: a test from flags (or a past run's `config.json`), run by the one runner;
//! the table and the report at the end.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use lockbench::driver::{self, DriverError, Pacing, StopCondition, Workload};
use lockbench::node::TlsFiles;
use lockbench::orchestration::experiment::ExperimentError;
use lockbench::orchestration::ledger_choice::LedgerChoice;
use lockbench::orchestration::runner::{Backend, Progress, RunError, Runner};
use lockbench::orchestration::test::{
    defaults, CheckerSpec, ClientSpec, Test, TopologySpec, WorkersSpec,
};
use lockbench::results::{table, RunDir, RunSummary};
use lockbench::strategy::{PgPool, RetryPolicy, StrategyError, StrategyKind};
use lockbench::topology::pgbouncer::DEFAULT_POOL_SIZE;
use lockbench::topology::{ClusterSettings, DockerOptions, PoolerSettings, TopologyKind};

use super::args::RunArgs;
use super::exit;
use super::signals::Shutdown;

/// Builds the validated test from the parsed arguments, or reads it from `--config`.
/// The workers as config.json records them, so that `run --config` reruns the same split (the
/// kubernetes launcher takes settings a test does not carry: its runs record none).
fn recorded_workers(args: &RunArgs) -> Option<WorkersSpec> {
    let workers = args.workers.workers?;
    Some(WorkersSpec {
        workers,
        launcher: args.workers.launcher.kind()?,
    })
}

/// The ledger as config.json records it: `None` for the default, `postgres` for a server
/// lockbench starts, or the URL with its password redacted.
fn recorded_ledger(ledger: &LedgerChoice) -> Option<String> {
    match ledger {
        LedgerChoice::Sqlite => None,
        LedgerChoice::StartPostgres => Some("postgres".into()),
        LedgerChoice::Postgres(url) => Some(url.redacted().to_string()),
    }
}

/// The backend a test records (`--config` of a test that ran on `--backend docker` reruns it on
/// the same images; any other test runs on local processes).
fn recorded_backend(test: &Test) -> Backend {
    match &test.docker {
        None => Backend::Local,
        Some(images) => Backend::Docker(DockerOptions {
            redis_image: images.redis_image.clone(),
            toxiproxy_image: images.toxiproxy_image.clone(),
            ..DockerOptions::new(&test.name)
        }),
    }
}

fn test(args: &RunArgs) -> Result<Test> {
    if let Some(path) = &args.config {
        let mut test = Test::load(path)?;
        if let Some(name) = &args.name {
            test.name = name.clone();
        }
        test.validate_for(test.workers.map(|w| w.workers))
            .with_context(|| format!("{}: not a test this machine can run", path.display()))?;
        return Ok(test);
    }
    let stop = match args.ops {
        Some(n) => StopCondition::Ops(n),
        None => StopCondition::Duration(args.duration),
    };
    let pacing = match args.rate {
        Some(rate_per_s) => Pacing::Open { rate_per_s },
        None => Pacing::Closed,
    };
    let strategies = run_strategies(args);
    let name = args.name.clone().unwrap_or_else(|| {
        strategies
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join("+")
    });
    let test = Test {
        name,
        claim: None,
        description: String::new(),
        topology: TopologySpec {
            kind: args.topology,
            urls: args.urls.clone(),
            cluster_seeds: args.cluster_seeds.clone(),
            tls: TlsFiles {
                ca: args.tls_ca.clone(),
                cert: args.tls_cert.clone(),
                key: args.tls_key.clone(),
            },
            persistence: args.persistence,
            key_prefix: args.key_prefix.clone(),
            direct: args.direct,
            pooler: args.pooler.map(|kind| PoolerSettings {
                kind,
                pool_mode: args.pool_mode.unwrap_or_default(),
                pool_size: args.pool_size.unwrap_or(DEFAULT_POOL_SIZE),
                reset: args.pooler_reset.unwrap_or_default(),
            }),
            pg_settings: args.pg_settings.clone(),
            cluster: (args.topology == TopologyKind::Cluster
                || args.shards.is_some()
                || args.cluster_node_timeout.is_some())
            .then(|| {
                let d = ClusterSettings::default();
                ClusterSettings {
                    shards: args.shards.map_or(d.shards, |s| s as usize),
                    node_timeout: args.cluster_node_timeout.unwrap_or(d.node_timeout),
                }
            }),
        },
        strategies,
        client: ClientSpec {
            ttl: args.ttl,
            retry: RetryPolicy {
                attempts: args.retry_attempts,
                delay: args.retry_delay.into(),
                jitter: args.retry_jitter.into(),
                acquire_timeout: args.acquire_timeout,
            },
            watchdog: args.watchdog,
            drift_factor: args.drift_factor,
            node_timeout: args
                .node_timeout
                .unwrap_or_else(|| defaults::node_timeout(args.ttl)),
            connect: lockbench::node::ConnectOptions {
                connect_timeout: args.connect_timeout.into(),
                response_timeout: args.response_timeout.into(),
            },
            pg_pool: args.pg_pool.map(|size| PgPool {
                size,
                recycle: args.pg_pool_recycle.unwrap_or_default(),
            }),
            adapter: args.adapter.clone(),
        },
        workload: Workload {
            clients: args.clients,
            resources: args.resources,
            hold: args.hold,
            stop,
            pacing,
            seed: args.seed,
            shared_connection: args.shared_connection,
            in_flight: args.in_flight,
            adapter_processes: args.adapter_processes,
            work: args.work,
            idempotency_key: args.idempotency_key,
        },
        nemesis: Vec::new(),
        checker: CheckerSpec {
            audit: !args.no_audit,
        },
        expect: Default::default(),
        workers: recorded_workers(args),
        ledger: recorded_ledger(&args.ledger),
        // `run` runs on local processes; a config.json from `chaos`/`matrix --backend docker`
        // brings its images (`--config` above).
        docker: None,
    };
    test.validate_for(args.workers.workers)?;
    if test.client.watchdog {
        for s in &test.strategies {
            if let Err(why) = s.watchable() {
                anyhow::bail!("--watchdog with {s}: {why}; drop --watchdog or run {s} without it");
            }
        }
    }
    Ok(test)
}

/// The strategies of `run`: `--strategy` (default `single`), plus `adapter:command` with
/// `--adapter` (alone when `--strategy` is not given).
fn run_strategies(args: &RunArgs) -> Vec<StrategyKind> {
    let mut list = match (&args.strategy, &args.adapter) {
        (Some(l), _) => l.0.clone(),
        (None, Some(_)) => Vec::new(),
        (None, None) => vec![StrategyKind::Single],
    };
    if args.adapter.is_some() && !list.contains(&StrategyKind::AdapterCommand) {
        list.push(StrategyKind::AdapterCommand);
    }
    list
}

/// Runs `lockbench run`. Exit code by the policy in [`super::exit`]: 0 all valid (or not
/// audited), 1 some verdict invalid, 3 some unknown, 2 bad input, 4 failed, 130/143
/// interrupted.
pub async fn run(args: Box<RunArgs>) -> Result<ExitCode> {
    let no_progress = args.no_progress;
    let results_root = args.results.clone();
    let test = test(&args).map_err(exit::bad_input)?;
    // `--config` takes the ledger the test records (clap refuses `--ledger` with it).
    let ledger = match (&args.config, &test.ledger) {
        (Some(_), Some(recorded)) => recorded
            .parse::<LedgerChoice>()
            .map_err(|e| exit::bad_input(anyhow::anyhow!("ledger {recorded:?}: {e}")))?,
        (Some(_), None) => LedgerChoice::Sqlite,
        (None, _) => args.ledger.clone(),
    };
    let workers = args
        .workers
        .workers
        .map(|n| super::workers::plan(&args.workers, &ledger, &test, n))
        .transpose()
        .map_err(exit::bad_input)?;
    #[cfg(feature = "kubernetes")]
    if let Some(dir) = &args.workers.emit_manifests {
        let Some(plan) = &workers else {
            return Err(exit::bad_input(anyhow::anyhow!(
                "--emit-manifests goes with --workers N --launcher kubernetes"
            )));
        };
        let written = super::workers::emit_manifests(plan, &test, dir).map_err(exit::bad_input)?;
        for path in written {
            println!("wrote {}", path.display());
        }
        println!(
            "apply with: kubectl apply -f {} (the coordinator's pod then applies each Job)",
            dir.join("coordinator.json").display()
        );
        return Ok(exit::code(exit::OK));
    }
    RunDir::check_root(&results_root).map_err(exit::bad_input)?;
    // An unreachable ledger database is bad input: said before anything starts.
    ledger.probe().await.map_err(exit::bad_input)?;
    // Bound before anything starts: a port in use is bad input with nothing to clean up.
    let endpoint = args.live.start()?;
    for w in test.warnings() {
        eprintln!("warning: {w}");
    }
    let shutdown = Shutdown::install()?;
    let root_existed = results_root.exists();
    // `latest` moves to this run only once it has measured something.
    let dir = RunDir::create_unlinked(&results_root, &test.name)
        .with_context(|| {
            format!(
                "cannot create a run directory under {}",
                results_root.display()
            )
        })
        .map_err(exit::bad_input)?;
    eprintln!("results: {}", dir.path().display());

    let runner = Runner {
        backend: recorded_backend(&test),
        link_latest: true,
        connect_progress: connect_progress(test.workload.clients, no_progress),
        ledger,
        metrics: endpoint.as_ref().map(|e| e.metrics().clone()),
        workers,
        ..Runner::local(shutdown.requested.clone())
    };
    let mut bars = Bars::new(&test, no_progress);
    let outcome = runner
        .run(&test, &dir, |event| bars.show(event))
        .await
        .map_err(|e| explain_connect_failure(e, &test));
    bars.finish();
    shutdown.disarm();
    // The runner wrote the final summary (also on failure).
    let summary: RunSummary = std::fs::read(dir.file("summary.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .context("cannot read back summary.json")?;
    let code = match &outcome {
        Ok(o) if o.interrupted => shutdown.interrupted_exit_code(),
        // A test with a claim (a scenario's or a matrix trial's config.json) is judged as
        // `chaos` judges it: by whether each expectation held.
        Ok(o) if test.claim.is_some() => {
            exit::code(if o.all_met() { exit::OK } else { exit::FINDING })
        }
        Ok(_) => exit::code(exit::for_verdicts(
            summary
                .strategies
                .iter()
                .filter_map(|s| s.check.as_ref().map(|c| c.verdict)),
        )),
        Err(_) => exit::code(exit::FAILED),
    };
    if summary.strategies.is_empty() && outcome.is_err() {
        // Nothing measured: no table, no report, `latest` untouched.
        forget_failed_start(&dir, (!root_existed).then_some(results_root.as_path()));
        return outcome.map(|_| code);
    }
    if let Err(e) = dir.point_latest() {
        eprintln!("warning: {e}");
    }
    if !summary.strategies.is_empty() {
        println!("\n{}", table::render(&summary.strategies));
    }
    if let Some(w) = summary.config.get("workers") {
        println!("{}", super::workers::line(w));
    }
    if let (Ok(o), Some(_)) = (&outcome, &test.claim) {
        print!("{}", super::chaos::render(o));
    }
    println!("results: {}", dir.path().display());

    // The report reads what is now on disk; if it fails, the results stand and so does the code.
    super::report::after_run(dir.path());
    let interrupted = matches!(&outcome, Ok(o) if o.interrupted);
    super::metrics::finish(endpoint, interrupted).await;
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
fn explain_connect_failure(e: RunError, test: &Test) -> anyhow::Error {
    let RunError::Experiment {
        source: ExperimentError::Driver(DriverError::Connect { client, source, .. }),
        ..
    } = &e
    else {
        return match e {
            RunError::Topology { source, .. } if test.topology.kind == TopologyKind::External => {
                anyhow::Error::new(source).context("cannot reach the external topology")
            }
            RunError::Topology { source, .. } => {
                anyhow::Error::new(source).context("cannot start the local topology")
            }
            RunError::Nemesis { source, .. } => source.into(),
            RunError::Experiment {
                strategy, source, ..
            } => anyhow::Error::new(source).context(format!("strategy {strategy}")),
            other => other.into(),
        };
    };
    // The adapter said no to the settings: bad input, whatever the client count or timeout.
    if matches!(source, StrategyError::AdapterRefused { .. }) {
        return exit::bad_input(anyhow::anyhow!("{source}"));
    }
    let (client, cause) = (*client, source.to_string());
    let clients = test.workload.clients;
    let timeout = humantime::format_duration(test.client.connect.connect_timeout);
    let hint = if source.out_of_descriptors() {
        format!(
            "lockbench ran out of file descriptors (each client opens one connection per node): \
             raise the open-file limit (`ulimit -n`, now {}), lower --clients, or use \
             --shared-connection",
            open_file_limit().map_or_else(|| "unknown".to_string(), |n| n.to_string())
        )
    } else if test.topology.kind == TopologyKind::External {
        format!(
            "check that the --url nodes accept connections, or raise --connect-timeout \
             (now {timeout})"
        )
    } else if test.workload.shared_connection {
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

/// One progress bar per strategy on a terminal: seconds (or ops) done, ops/s and errors.
struct Bars {
    bar: Option<ProgressBar>,
    stop: StopCondition,
    disabled: bool,
}

impl Bars {
    fn new(test: &Test, no_progress: bool) -> Self {
        Self {
            bar: None,
            stop: test.workload.stop,
            disabled: no_progress || !std::io::stdout().is_terminal(),
        }
    }

    fn show(&mut self, event: Progress<'_>) {
        match event {
            Progress::Strategy(name) => {
                self.finish();
                self.bar = progress_bar(self.stop, name, self.disabled);
            }
            Progress::Tick {
                elapsed, summary, ..
            } => {
                if let Some(pb) = &self.bar {
                    pb.set_position(match self.stop {
                        StopCondition::Duration(_) => elapsed.as_secs(),
                        StopCondition::Ops(_) => summary.attempts,
                    });
                    pb.set_message(format!(
                        "{:.0} ops/s, {} errors",
                        summary.throughput_ops_s, summary.errors
                    ));
                }
            }
            // A `--config` of a test that ran on `--backend docker`: say what to look for
            // (as `chaos` does) before the containers start.
            Progress::Containers(tag) => eprintln!("docker: network and containers {tag}*"),
        }
    }

    fn finish(&mut self) {
        if let Some(pb) = self.bar.take() {
            pb.finish_and_clear();
        }
    }
}

fn progress_bar(stop: StopCondition, name: &str, disabled: bool) -> Option<ProgressBar> {
    if disabled {
        return None;
    }
    let (len, unit) = match stop {
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
