//! The `kubernetes` launcher (cargo feature `kubernetes`): the workers as an **Indexed Job**
//! per strategy run, applied with `kubectl`; `deploy/kubernetes/README.md` is the user's page.
//!
//! - **Slot = completion index.** The Job has `completionMode: Indexed` and `completions =
//!   parallelism = N`; each pod runs `lockbench worker`, which takes its slot from
//!   `JOB_COMPLETION_INDEX` (set by Kubernetes, and set again from the pod's
//!   `batch.kubernetes.io/job-completion-index` annotation for clusters that predate it).
//! - **Retry with the same index:** `backoffLimitPerIndex` (restart policy `Never`): a pod that
//!   fails is replaced by one with the same index, which re-registers for its slot while the
//!   run has not started; after the start the coordinator counts that worker lost (its open
//!   operations `info`), as with the other launchers.
//! - **The coordinator runs in a pod** of [`KubernetesLauncher::coordinator_manifests`]
//!   (`lockbench run … --launcher kubernetes`, with a service account allowed to create and
//!   delete Jobs). A **headless Service** selects that pod: the workers reach the control API
//!   at `http://<name>-coordinator.<namespace>.svc:<control port>` and the embedded proxies
//!   (which then listen on `0.0.0.0`) at the same host and the ports in their slots; headless,
//!   because those ports are chosen at run time and a ClusterIP Service forwards only the ports
//!   it lists.
//! - **Generated manifests, no client crate:** JSON that `kubectl` reads (YAML is a superset),
//!   written with serde_json. `run … --launcher kubernetes --emit-manifests DIR` writes them
//!   without a cluster.
//! - **Always deleted:** the Job (and with it its pods) on the normal and error paths
//!   ([`IndexedJob::delete`]) and from `Drop`; `ttlSecondsAfterFinished` cleans up after a
//!   coordinator that was killed outright.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::process::Command;

use super::super::WorkersError;

/// The control API's port in the coordinator's pod (and its Service's).
pub const DEFAULT_CONTROL_PORT: u16 = 7690;

/// How long one `kubectl` command may take.
const KUBECTL_WITHIN: Duration = Duration::from_secs(60);

/// How often the Job's status is read.
const POLL_EVERY: Duration = Duration::from_secs(2);

/// The `kubernetes` launcher's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesLauncher {
    /// The image with the lockbench binary (and `kubectl`, for the coordinator's pod).
    pub image: String,
    /// The namespace of every object.
    pub namespace: String,
    /// The run's name (`--kube-name`): the coordinator pod and Service are
    /// `<name>-coordinator`, each strategy's Job `<name>-<strategy>`.
    pub name: String,
    /// The control API's port.
    pub control_port: u16,
    /// Retries of one index before it counts as failed (`backoffLimitPerIndex`).
    pub backoff_limit_per_index: u32,
    /// Seconds a finished Job is kept (`ttlSecondsAfterFinished`).
    pub ttl_after_finished_s: u32,
}

impl KubernetesLauncher {
    /// Settings with the defaults: namespace `default`, name `lockbench`, port
    /// [`DEFAULT_CONTROL_PORT`], one retry per index, finished Jobs kept 10 min.
    pub fn new(image: &str) -> Self {
        Self {
            image: image.to_string(),
            namespace: "default".into(),
            name: "lockbench".into(),
            control_port: DEFAULT_CONTROL_PORT,
            backoff_limit_per_index: 1,
            ttl_after_finished_s: 600,
        }
    }

    /// The coordinator's pod and Service name: `<name>-coordinator`.
    pub fn service_name(&self) -> String {
        format!("{}-coordinator", self.name)
    }

    /// The Service's DNS name inside the cluster: `<name>-coordinator.<namespace>.svc`.
    pub fn service_host(&self) -> String {
        format!("{}.{}.svc", self.service_name(), self.namespace)
    }

    /// The control API's URL as the workers use it.
    pub fn coordinator_url(&self) -> String {
        format!("http://{}:{}", self.service_host(), self.control_port)
    }

    /// The Job of strategy `strategy`: `<name>-<strategy>`.
    pub fn job_name(&self, strategy: &str) -> String {
        super::dns_label(&format!("{}-{strategy}", self.name), 52)
    }

    /// The labels of the run's objects; `component` is `coordinator` or `worker`.
    pub fn labels(&self, component: &str) -> Value {
        json!({
            "app.kubernetes.io/name": "lockbench",
            "app.kubernetes.io/instance": self.name,
            "app.kubernetes.io/component": component,
        })
    }

    fn metadata(&self, name: &str, component: &str) -> Value {
        json!({"name": name, "namespace": self.namespace, "labels": self.labels(component)})
    }

    /// The Indexed Job running strategy `strategy`'s `workers` workers against `coordinator`.
    pub fn worker_job(&self, strategy: &str, workers: u32, coordinator: &str) -> Value {
        let job = self.job_name(strategy);
        json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": self.metadata(&job, "worker"),
            "spec": {
                "completionMode": "Indexed",
                "completions": workers,
                "parallelism": workers,
                "backoffLimitPerIndex": self.backoff_limit_per_index,
                "ttlSecondsAfterFinished": self.ttl_after_finished_s,
                "template": {
                    "metadata": {"labels": self.labels("worker")},
                    "spec": {
                        "restartPolicy": "Never",
                        "enableServiceLinks": false,
                        "containers": [{
                            "name": "worker",
                            "image": self.image,
                            "imagePullPolicy": "IfNotPresent",
                            "args": ["worker", "--scratch", "/scratch/worker"],
                            "env": [
                                {"name": "LOCKBENCH_COORDINATOR", "value": coordinator},
                                {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                                    "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                                }}},
                            ],
                            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                        }],
                        "volumes": [{"name": "scratch", "emptyDir": {}}],
                    },
                },
            },
        })
    }

    /// What runs the coordinator in the cluster, as one `v1` List: a ServiceAccount, a Role
    /// and RoleBinding letting it create, watch and delete Jobs and delete their pods, the
    /// headless Service the workers reach it through, and its Pod running `lockbench
    /// run_args…` (the run's own arguments, with `--launcher kubernetes`).
    pub fn coordinator_manifests(&self, run_args: &[String]) -> Value {
        let name = self.service_name();
        let coordinator = self.labels("coordinator");
        let mut args = vec!["run".to_string()];
        args.extend(run_args.iter().cloned());
        json!({
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": self.metadata(&name, "coordinator"),
                },
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "Role",
                    "metadata": self.metadata(&name, "coordinator"),
                    "rules": [
                        {"apiGroups": ["batch"], "resources": ["jobs"],
                         "verbs": ["create", "get", "list", "watch", "patch", "delete"]},
                        {"apiGroups": [""], "resources": ["pods"],
                         "verbs": ["get", "list", "watch", "delete"]},
                    ],
                },
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": self.metadata(&name, "coordinator"),
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                    "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": self.namespace}],
                },
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": self.metadata(&name, "coordinator"),
                    "spec": {
                        "clusterIP": "None",
                        "publishNotReadyAddresses": true,
                        "selector": coordinator,
                        "ports": [{"name": "control", "port": self.control_port, "targetPort": self.control_port, "protocol": "TCP"}],
                    },
                },
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": self.metadata(&name, "coordinator"),
                    "spec": {
                        "serviceAccountName": name,
                        "restartPolicy": "Never",
                        "containers": [{
                            "name": "coordinator",
                            "image": self.image,
                            "imagePullPolicy": "IfNotPresent",
                            "args": args,
                            "workingDir": "/work",
                            "ports": [{"name": "control", "containerPort": self.control_port}],
                            "volumeMounts": [{"name": "work", "mountPath": "/work"}],
                        }],
                        "volumes": [{"name": "work", "emptyDir": {}}],
                    },
                },
            ],
        })
    }

    /// Writes `<dir>/job.json` for this strategy run and applies it.
    ///
    /// # Errors
    /// [`WorkersError::Launch`] when the file cannot be written or `kubectl apply` fails.
    pub(super) async fn launch(
        &self,
        workers: u32,
        coordinator: &str,
        dir: &Path,
    ) -> Result<IndexedJob, WorkersError> {
        let strategy = dir
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "workers".into());
        let job = self.job_name(&strategy);
        let file = dir.join("job.json");
        let body = serde_json::to_vec_pretty(&self.worker_job(&strategy, workers, coordinator))
            .map_err(|e| launch_err(e.to_string()))?;
        std::fs::write(&file, body).map_err(|e| launch_err(format!("{}: {e}", file.display())))?;
        let state = Arc::new(Mutex::new(JobState::default()));
        let mut launched = IndexedJob {
            job: job.clone(),
            namespace: self.namespace.clone(),
            file: file.clone(),
            state: state.clone(),
            poller: tokio::spawn(poll(job, self.namespace.clone(), state)),
            deleted: false,
        };
        let f = file.display().to_string();
        if let Err(e) = kubectl(&["apply", "-n", &self.namespace, "-f", &f]).await {
            launched.delete().await;
            return Err(e);
        }
        Ok(launched)
    }
}

fn launch_err(detail: impl Into<String>) -> WorkersError {
    WorkersError::Launch {
        launcher: "kubernetes".into(),
        detail: detail.into(),
    }
}

async fn kubectl(args: &[&str]) -> Result<String, WorkersError> {
    let shown = format!("kubectl {}", args.join(" "));
    let out = tokio::time::timeout(
        KUBECTL_WITHIN,
        Command::new("kubectl")
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| launch_err(format!("`{shown}` took longer than {KUBECTL_WITHIN:?}")))?
    .map_err(|e| launch_err(format!("`{shown}`: {e}")))?;
    if !out.status.success() {
        return Err(launch_err(format!(
            "`{shown}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Indexes in a Job's `status.failedIndexes` (`"1,3-5"`).
pub fn parse_indexes(s: &str) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
            out.extend(a..=b);
        }
    }
    out
}

/// The Job as last read.
#[derive(Debug, Default)]
struct JobState {
    failed_indexes: BTreeSet<usize>,
    failed: Option<String>,
}

async fn poll(job: String, namespace: String, state: Arc<Mutex<JobState>>) {
    loop {
        tokio::time::sleep(POLL_EVERY).await;
        let Ok(text) = kubectl(&["get", "job", &job, "-n", &namespace, "-o", "json"]).await else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
        s.failed_indexes = parse_indexes(v["status"]["failedIndexes"].as_str().unwrap_or(""));
        s.failed = v["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Failed" && c["status"] == "True")
            .map(|c| format!("the Job failed: {}", c["reason"].as_str().unwrap_or("?")));
    }
}

/// An applied Indexed Job.
#[derive(Debug)]
pub struct IndexedJob {
    job: String,
    namespace: String,
    file: PathBuf,
    state: Arc<Mutex<JobState>>,
    poller: tokio::task::JoinHandle<()>,
    deleted: bool,
}

impl IndexedJob {
    /// Index `i` failed more often than `backoffLimitPerIndex` allows (or the Job failed).
    pub(super) fn exited(&self, i: usize) -> Option<String> {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.failed_indexes.contains(&i) {
            return Some(format!(
                "index {i} of Job {} failed past its retries",
                self.job
            ));
        }
        s.failed.clone()
    }

    /// Deletes index `i`'s pod.
    pub(super) async fn kill(&self, i: usize) {
        let selector = format!(
            "batch.kubernetes.io/job-name={},batch.kubernetes.io/job-completion-index={i}",
            self.job
        );
        let _ = kubectl(&[
            "delete",
            "pod",
            "-n",
            &self.namespace,
            "-l",
            &selector,
            "--wait=false",
        ])
        .await;
    }

    /// Deletes the Job and its pods (idempotent).
    pub async fn delete(&mut self) {
        if std::mem::replace(&mut self.deleted, true) {
            return;
        }
        self.poller.abort();
        let f = self.file.display().to_string();
        if let Err(e) = kubectl(&[
            "delete",
            "-n",
            &self.namespace,
            "-f",
            &f,
            "--ignore-not-found",
            "--wait=false",
            "--cascade=background",
        ])
        .await
        {
            tracing::error!("Job {}: {e}", self.job);
        }
    }
}

impl Drop for IndexedJob {
    fn drop(&mut self) {
        if self.deleted {
            return;
        }
        self.poller.abort();
        let _ = std::process::Command::new("kubectl")
            .args(["delete", "-n", &self.namespace, "-f"])
            .arg(&self.file)
            .args(["--ignore-not-found", "--wait=false", "--cascade=background"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_indexes_are_read_as_kubernetes_writes_them() {
        assert_eq!(parse_indexes(""), BTreeSet::new());
        assert_eq!(
            parse_indexes("1,3-5,9"),
            [1, 3, 4, 5, 9].into_iter().collect()
        );
    }

    #[test]
    fn the_job_is_indexed_with_one_pod_per_slot_and_finds_the_coordinator_by_its_service() {
        let k = KubernetesLauncher::new("lockbench/lockbench:local");
        let job = k.worker_job("redlock", 4, &k.coordinator_url());
        assert_eq!(job["metadata"]["name"], "lockbench-redlock");
        let spec = &job["spec"];
        assert_eq!(spec["completionMode"], "Indexed");
        assert_eq!(spec["completions"], 4);
        assert_eq!(spec["parallelism"], 4);
        assert_eq!(spec["template"]["spec"]["restartPolicy"], "Never");
        let env = &spec["template"]["spec"]["containers"][0]["env"];
        assert_eq!(
            env[0]["value"],
            "http://lockbench-coordinator.default.svc:7690"
        );
        assert_eq!(env[1]["name"], "JOB_COMPLETION_INDEX");
        let list = k.coordinator_manifests(&["--workers".into(), "4".into()]);
        let items = list["items"].as_array().unwrap();
        let service = items.iter().find(|i| i["kind"] == "Service").unwrap();
        let pod = items.iter().find(|i| i["kind"] == "Pod").unwrap();
        assert_eq!(service["spec"]["selector"], pod["metadata"]["labels"]);
        assert_eq!(pod["spec"]["containers"][0]["args"][0], "run");
    }
}
