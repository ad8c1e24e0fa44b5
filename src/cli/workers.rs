//! `run --workers N --launcher processes|compose|kubernetes` (docs/workers.md): the options,
//! the plan checked before anything starts, `--emit-manifests`, and the run's last line about
//! its workers.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;

use lockbench::orchestration::ledger_choice::LedgerChoice;
use lockbench::orchestration::test::Test;
use lockbench::orchestration::workers::coordinator::WorkersPlan;
use lockbench::orchestration::workers::launcher::compose::ComposeLauncher;
#[cfg(feature = "kubernetes")]
use lockbench::orchestration::workers::launcher::kubernetes::{
    KubernetesLauncher, DEFAULT_CONTROL_PORT,
};
use lockbench::orchestration::workers::launcher::{Launcher, DEFAULT_IMAGE};
use lockbench::topology::TopologyKind;

/// The options of `run` about workers.
#[derive(Debug, Args)]
pub struct WorkersArgs {
    /// Run the clients in N `lockbench worker` processes (this process coordinates: it starts
    /// the topology and the ledger, gives each worker a disjoint range of client ids, and
    /// merges their histories and latency). The workers share a PostgreSQL ledger: `--ledger
    /// sqlite` (the default) becomes `postgres` (started by lockbench). Not with sentinel or
    /// cluster topologies; a `--config` test's fault steps may target `worker:I`.
    /// docs/workers.md.
    #[arg(long, value_name = "N", value_parser = super::args::count, allow_negative_numbers = true)]
    pub workers: Option<u32>,
    /// How --workers are started: processes (local subprocesses of this executable), compose
    /// (containers of the --worker-image through docker compose, on the host's network), or
    /// kubernetes (an Indexed Job; this process must run in the cluster, see
    /// deploy/kubernetes/README.md, or use --emit-manifests).
    #[arg(long, requires = "workers", default_value = "processes")]
    pub launcher: WorkerLauncher,
    /// The image holding the lockbench binary, for --launcher compose and kubernetes
    /// (`docker/build-images.sh --only lockbench` builds it; nothing is pulled).
    #[arg(long, value_name = "IMAGE", default_value = DEFAULT_IMAGE)]
    pub worker_image: String,
    /// --launcher kubernetes: write the manifests (the coordinator's pod, its Service and
    /// role, one Indexed Job per strategy) as JSON into DIR and exit, starting nothing.
    #[cfg(feature = "kubernetes")]
    #[arg(long, value_name = "DIR")]
    pub emit_manifests: Option<PathBuf>,
    /// --launcher kubernetes: the namespace of every object.
    #[cfg(feature = "kubernetes")]
    #[arg(long, value_name = "NS", default_value = "default")]
    pub kube_namespace: String,
    /// --launcher kubernetes: the run's name; the coordinator's pod and Service are
    /// NAME-coordinator, each strategy's Job NAME-<strategy>.
    #[cfg(feature = "kubernetes")]
    #[arg(long, value_name = "NAME", default_value = "lockbench")]
    pub kube_name: String,
    /// --launcher kubernetes: the control API's port (in the pod and its Service).
    #[cfg(feature = "kubernetes")]
    #[arg(long, value_name = "PORT", default_value_t = DEFAULT_CONTROL_PORT)]
    pub control_port: u16,
}

/// `--launcher`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkerLauncher {
    /// Local `lockbench worker` subprocesses.
    Processes,
    /// Containers through docker compose.
    Compose,
    /// An Indexed Job through kubectl.
    #[cfg(feature = "kubernetes")]
    Kubernetes,
}

impl WorkerLauncher {
    /// The library's name for it, for the launchers a test names without further settings
    /// (`None`: kubernetes, which only `run` takes).
    pub fn kind(self) -> Option<lockbench::orchestration::workers::launcher::LauncherKind> {
        use lockbench::orchestration::workers::launcher::LauncherKind;
        match self {
            WorkerLauncher::Processes => Some(LauncherKind::Processes),
            WorkerLauncher::Compose => Some(LauncherKind::Compose),
            #[cfg(feature = "kubernetes")]
            WorkerLauncher::Kubernetes => None,
        }
    }
}

/// The plan of `--workers N`, checked before anything starts (every refusal is bad input).
pub fn plan(args: &WorkersArgs, ledger: &LedgerChoice, test: &Test, n: u32) -> Result<WorkersPlan> {
    test.check_steps_with_workers(n)
        .map_err(|p| anyhow::anyhow!(p.with_flag()))?;
    test.check_workers(n)
        .map_err(|p| anyhow::anyhow!(p.with_flag()))?;
    let launcher = match args.launcher {
        WorkerLauncher::Processes => Launcher::Processes {
            exe: std::env::current_exe().context("cannot find this executable to start workers")?,
        },
        WorkerLauncher::Compose => Launcher::Compose(
            ComposeLauncher::check(&args.worker_image).context("--launcher compose")?,
        ),
        #[cfg(feature = "kubernetes")]
        WorkerLauncher::Kubernetes => Launcher::Kubernetes(kubernetes(args, ledger, test)?),
    };
    #[cfg(not(feature = "kubernetes"))]
    let _ = ledger;
    Ok(WorkersPlan {
        workers: n,
        launcher,
    })
}

/// The `kubernetes` launcher's settings, refusing what pods could not reach.
#[cfg(feature = "kubernetes")]
fn kubernetes(
    args: &WorkersArgs,
    ledger: &LedgerChoice,
    test: &Test,
) -> Result<KubernetesLauncher> {
    use lockbench::orchestration::workers::launcher::dns_label;
    if test.topology.direct && test.topology.kind != TopologyKind::External {
        anyhow::bail!(
            "--launcher kubernetes with --direct: the nodes lockbench starts listen on the \
             coordinator pod's loopback; drop --direct (the workers reach the proxies through \
             the Service) or use --topology external"
        );
    }
    if test.checker.audit {
        let reachable = match ledger {
            LedgerChoice::Postgres(url) => !matches!(url.host(), "127.0.0.1" | "localhost" | "::1"),
            _ => false,
        };
        if !reachable {
            anyhow::bail!(
                "--launcher kubernetes: the workers write the ledger from their pods; give \
                 --ledger postgres://USER@HOST:PORT/DB with a HOST they reach (not loopback), \
                 or --no-audit"
            );
        }
    }
    if dns_label(&args.kube_name, 40) != args.kube_name || args.kube_name.is_empty() {
        anyhow::bail!(
            "--kube-name {:?}: use lowercase letters, digits and '-', at most 40, starting and \
             ending with a letter or digit",
            args.kube_name
        );
    }
    if dns_label(&args.kube_namespace, 63) != args.kube_namespace || args.kube_namespace.is_empty()
    {
        anyhow::bail!(
            "--kube-namespace {:?}: not a namespace name",
            args.kube_namespace
        );
    }
    Ok(KubernetesLauncher {
        namespace: args.kube_namespace.clone(),
        name: args.kube_name.clone(),
        control_port: args.control_port,
        ..KubernetesLauncher::new(&args.worker_image)
    })
}

/// `--emit-manifests DIR`: writes `coordinator.json` (what runs this very command in the
/// cluster) and `workers-<strategy>.json` per strategy, and returns their paths.
#[cfg(feature = "kubernetes")]
pub fn emit_manifests(plan: &WorkersPlan, test: &Test, dir: &Path) -> Result<Vec<PathBuf>> {
    let Launcher::Kubernetes(k) = &plan.launcher else {
        anyhow::bail!("--emit-manifests goes with --launcher kubernetes");
    };
    std::fs::create_dir_all(dir).with_context(|| format!("--emit-manifests {}", dir.display()))?;
    let run_args = coordinator_args(std::env::args().skip(2));
    let mut written = Vec::new();
    let mut write = |name: String, v: serde_json::Value| -> Result<()> {
        let path = dir.join(name);
        let body = serde_json::to_string_pretty(&v)? + "\n";
        std::fs::write(&path, body).with_context(|| format!("{}", path.display()))?;
        written.push(path);
        Ok(())
    };
    write(
        "coordinator.json".into(),
        k.coordinator_manifests(&run_args),
    )?;
    for s in &test.strategies {
        let name = s.to_string();
        write(
            format!("workers-{name}.json"),
            k.worker_job(&name, plan.workers, &k.coordinator_url()),
        )?;
    }
    Ok(written)
}

/// This `run`'s arguments without `--emit-manifests DIR` and `--results DIR` (a path on this
/// machine): what the coordinator's pod runs, writing its results under its working
/// directory.
#[cfg(feature = "kubernetes")]
fn coordinator_args(args: impl Iterator<Item = String>) -> Vec<String> {
    const DROPPED: [&str; 2] = ["--emit-manifests", "--results"];
    let mut out = Vec::new();
    let mut skip_next = false;
    for a in args {
        if std::mem::take(&mut skip_next) {
            continue;
        }
        if DROPPED.contains(&a.as_str()) {
            skip_next = true;
        } else if !DROPPED.iter().any(|d| a.starts_with(&format!("{d}="))) {
            out.push(a);
        }
    }
    out
}

/// One line on the workers of the run: how many, lost ones, the clock bound.
pub fn line(w: &serde_json::Value) -> String {
    let lost = w["lost"].as_array().map_or(0, Vec::len);
    let mut line = format!(
        "workers: {} ({} launcher), clock bound ±{} µs (real-time windows widened by it)",
        w["workers"],
        w["launcher"].as_str().unwrap_or("?"),
        w["clock_bound_us"]
    );
    if lost > 0 {
        let which: Vec<String> = w["lost"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|l| {
                format!(
                    "worker {} ({})",
                    l["worker"],
                    l["why"].as_str().unwrap_or("?")
                )
            })
            .collect();
        line.push_str(&format!(
            "; LOST {lost}: {} — its unfinished operations are recorded info",
            which.join(", ")
        ));
    }
    line
}

#[cfg(all(test, feature = "kubernetes"))]
mod tests {
    use super::*;

    #[test]
    fn the_coordinator_pod_runs_the_same_arguments_without_emit_manifests() {
        let args = [
            "-s",
            "redlock",
            "--emit-manifests",
            "out",
            "--workers",
            "3",
            "--emit-manifests=x",
        ];
        assert_eq!(
            coordinator_args(args.iter().map(|s| s.to_string())),
            ["-s", "redlock", "--workers", "3"]
        );
    }
}
