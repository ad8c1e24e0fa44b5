//! The rules a test must meet before anything starts: [`Test::validate`] and the checks it is
//! made of.

use std::time::Duration;

use super::{Test, TestError};
use crate::driver::StopCondition;
use crate::nemesis::FaultStep;
use crate::node::redact_url;
use crate::topology::TopologyKind;

impl Test {
    /// Checks combinations a parser cannot see, naming the `run` flag to change.
    ///
    /// # Errors
    /// [`TestError`] naming the option.
    pub fn validate(&self) -> Result<(), TestError> {
        self.validate_for(None)
    }

    /// [`Self::validate`] for a run whose clients are spread over `workers` worker processes
    /// (`run --workers N`; `None`: all in this process): the descriptor budget is then checked
    /// per process ([`Self::check_descriptor_budget_for`]).
    ///
    /// # Errors
    /// [`TestError`] naming the option.
    pub fn validate_for(&self, workers: Option<u32>) -> Result<(), TestError> {
        self.check_bounds()?;
        let invalid = |m: String| Err(TestError::Invalid(m));
        if !(0.0..1.0).contains(&self.client.drift_factor) {
            return invalid("--drift-factor must be in [0, 1), e.g. 0.01".into());
        }
        self.check_settings()
            .map_err(|p| TestError::Invalid(p.with_flag()))?;
        self.check_each_strategy()?;
        self.check_cluster_seeds()?;
        self.check_urls()?;
        self.check_tls()?;
        self.check_server_settings()?;
        if self.topology.direct && !self.nemesis.is_empty() {
            return invalid(
                "--direct reaches the nodes without their proxies, so the nemesis cannot inject \
                 faults: drop --direct or the fault schedule"
                    .into(),
            );
        }
        self.check_descriptor_budget_for(workers)
            .map_err(|p| TestError::Invalid(p.with_flag()))
    }

    /// Each strategy on this topology: its shape, its options, a server that serves it, a
    /// `--url` it can use, and a connection it may share.
    fn check_each_strategy(&self) -> Result<(), TestError> {
        let invalid = |m: String| Err(TestError::Invalid(m));
        let kind = self.topology.kind;
        for &s in &self.strategies {
            if kind == TopologyKind::External {
                for url in &self.topology.urls {
                    crate::topology::pairing::check_url_serves(url, s).map_err(|why| {
                        TestError::Invalid(format!("--url {}: {why}", redact_url(url)))
                    })?;
                }
            }
            if let Some(f) = self
                .per_client_fault()
                .filter(|_| self.workload.shared_connection && s.is_adapter())
            {
                return invalid(format!(
                    "--shared-connection with {s} and a {}: the fault acts on the target \
                     client's own adapter process (SIGKILL, SIGSTOP, its own proxies), which \
                     every client sharing it would suffer too: give each client its own adapter \
                     process",
                    f.fault.name()
                ));
            }
            if self.workload.shared_connection
                && s.service() == crate::strategy::LockService::Postgres
            {
                return invalid(format!(
                    "--shared-connection with {s}: a PostgreSQL advisory lock belongs to its \
                     session, and one session re-grants a lock it holds to every client sharing \
                     it (advisory locks are re-entrant): give each client its own connection"
                ));
            }
        }
        Ok(())
    }

    /// `--url`: only and always with `--topology external`, parsed, one for PostgreSQL, with a
    /// key prefix.
    fn check_urls(&self) -> Result<(), TestError> {
        let invalid = |m: String| Err(TestError::Invalid(m));
        let kind = self.topology.kind;
        match (
            kind,
            self.topology.urls.is_empty() && self.topology.cluster_seeds.is_empty(),
        ) {
            (TopologyKind::External, true) => {
                return invalid(
                    "--topology external needs --url redis://host:port (repeat for each node)"
                        .into(),
                )
            }
            (TopologyKind::External, false) if self.topology.key_prefix.is_empty() => {
                return invalid(
                    "--key-prefix must not be empty with --topology external: lockbench \
                     writes lock keys and INCRs fencing counters in your keyspace (default \
                     `lockbench:`)"
                        .into(),
                )
            }
            (TopologyKind::External, false) if self.topology.urls.is_empty() => {}
            (TopologyKind::External, false) => {
                // A URL that does not parse is bad input, found before anything starts.
                crate::topology::external::parse_endpoints(&self.topology.urls)
                    .map_err(|e| TestError::Invalid(format!("--url: {e}")))?;
                let postgres = self
                    .strategies
                    .iter()
                    .any(|s| s.service() == crate::strategy::LockService::Postgres);
                if postgres && self.topology.urls.len() > 1 {
                    return invalid(format!(
                        "--url is given {} times, but a PostgreSQL advisory lock lives on one \
                         server (lockbench would check every URL and lock only on the first): \
                         give one postgres:// URL",
                        self.topology.urls.len()
                    ));
                }
            }
            (_, false) => return invalid("--url is only for --topology external".into()),
            _ => {}
        }
        Ok(())
    }

    /// `--shards` and `--cluster-node-timeout`: with the cluster topology, in range (the
    /// PostgreSQL settings are in [`Test::check_settings`]).
    fn check_server_settings(&self) -> Result<(), TestError> {
        let invalid = |m: String| Err(TestError::Invalid(m));
        let kind = self.topology.kind;
        if let Some(c) = &self.topology.cluster {
            if kind != TopologyKind::Cluster {
                return invalid(format!(
                    "--shards and --cluster-node-timeout need --topology cluster, this test has \
                     {kind}"
                ));
            }
            c.validate()
                .map_err(|e| TestError::Invalid(e.to_string()))?;
        }
        Ok(())
    }

    /// Every duration of this test by the `run` flag that sets it.
    fn times(&self) -> Vec<(&'static str, Duration)> {
        let (c, w) = (&self.client, &self.workload);
        let mut out = vec![
            ("--ttl", c.ttl),
            ("--hold", w.hold.max()),
            ("--retry-delay", c.retry.delay),
            ("--retry-jitter", c.retry.jitter),
            ("--node-timeout", c.node_timeout),
            ("--connect-timeout", c.connect.connect_timeout),
            ("--response-timeout", c.connect.response_timeout),
        ];
        if let StopCondition::Duration(d) = w.stop {
            out.push(("--duration", d));
        }
        if let Some(t) = c.retry.acquire_timeout {
            out.push(("--acquire-timeout", t));
        }
        out
    }

    /// Refuses a duration longer than [`crate::duration_ms::LONGEST`] (24 h): the parsers
    /// refuse them already; a `config.json` (whole ms) is checked here.
    fn check_bounds(&self) -> Result<(), TestError> {
        let longest = crate::duration_ms::LONGEST;
        if let Some((flag, d)) = self.times().into_iter().find(|(_, d)| *d > longest) {
            return Err(TestError::Invalid(format!(
                "{flag} {} is longer than 24h, the longest duration lockbench takes",
                humantime::format_duration(d)
            )));
        }
        for (i, step) in self.nemesis.iter().enumerate() {
            step.check_bounds().map_err(|p| {
                TestError::Invalid(format!("nemesis[{i}] ({}): {}", step.fault, p.message))
            })?;
        }
        Ok(())
    }

    /// Checks every nemesis step against a run of its clients in `workers` worker processes
    /// ([`FaultStep::check`] with [`crate::nemesis::StepContext::workers`]): `worker:I` in range
    /// and on a fault it takes, no `holder` or client-id target. Topologies whose nodes
    /// lockbench does not start are checked for the worker rules only.
    ///
    /// # Errors
    /// A [`Problem`](super::Problem) with the workers: `nemesis[i] (fault): what is wrong`.
    pub fn check_steps_with_workers(&self, workers: u32) -> Result<(), super::Problem> {
        let nodes = crate::nemesis::check::node_names(self.topology.kind).unwrap_or_default();
        let ctx = crate::nemesis::StepContext {
            topology: self.topology.kind,
            nodes: &nodes,
            clients: self.workload.clients,
            resources: self.workload.resources,
            run: self.duration().unwrap_or(crate::duration_ms::LONGEST),
            workers,
        };
        for (i, step) in self.nemesis.iter().enumerate() {
            step.check(&ctx).map_err(|p| {
                super::Problem::of_value(
                    super::Field::Workers,
                    workers,
                    format!(": nemesis[{i}] ({}): {}", step.fault, p.message),
                )
            })?;
        }
        Ok(())
    }

    /// The first nemesis step that acts on one client's own adapter process or links
    /// (client-crash: SIGKILL; client-pause: SIGSTOP; a partition of clients: its own
    /// proxies), if any.
    pub(super) fn per_client_fault(&self) -> Option<&FaultStep> {
        self.nemesis.iter().find(|f| {
            matches!(
                f.fault,
                crate::nemesis::FaultKind::ClientCrash | crate::nemesis::FaultKind::ClientPause
            ) || f.cuts_clients()
        })
    }
}
