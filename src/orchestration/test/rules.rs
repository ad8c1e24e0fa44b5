//! The rules `run` and a scenario file share, written once: [`Test::check_settings`]. Each
//! broken rule is a [`Problem`] about one [`Field`]; `run` names it by its flag
//! ([`Test::validate`]), a scenario by its key at `file:line:col`.

use super::problem::{Field, Problem};
use super::{check_pg_setting, Test};
use crate::driver::{WorkKind, WorkloadError};
use crate::strategy::{LockService, StrategyKind};
use crate::topology::TopologyKind;

impl Test {
    /// The rules of the settings a flag and a scenario key both set: the strategies (each
    /// once, on a topology that serves it and has the shape it needs), the adapter command,
    /// the workload's ranges, the retry, TTL and node timeout, each strategy's options, the
    /// PostgreSQL settings (pooler, server settings, application-side pool) and the workers.
    ///
    /// # Errors
    /// The first [`Problem`] found.
    pub fn check_settings(&self) -> Result<(), Problem> {
        self.check_strategy_list()?;
        self.check_adapter_command()?;
        self.workload.validate().map_err(|e| match e {
            WorkloadError::Invalid { setting, rest } => {
                Problem::new(Field::of_flag_stem(setting).unwrap_or(Field::Clients), rest)
            }
            other => Problem::new(Field::Clients, format!(": {other}")),
        })?;
        let c = &self.client;
        if c.retry.attempts == 0 {
            return Err(Problem::new(
                Field::RetryAttempts,
                " must be at least 1 (1 = no retry)",
            ));
        }
        if c.ttl.is_zero() {
            return Err(Problem::new(Field::Ttl, " must be above 0"));
        }
        if c.node_timeout.is_zero() {
            return Err(Problem::new(Field::NodeTimeout, " must be above 0"));
        }
        for &s in &self.strategies {
            // The pool's own rules come with `pg_pool`, below.
            let mut opts = self.strategy_options(s);
            opts.pg_pool = None;
            opts.validate()
                .map_err(|e| Problem::new(Field::Ttl, format!(" with strategy {s}: {e}")))?;
        }
        self.check_postgres_settings()?;
        self.check_adapter_processes()?;
        self.check_work()?;
        self.check_recorded_workers()
    }

    /// `external` and `job` work need the audit (the sink's table is evidence, and a lock's
    /// job is the counter it read in the ledger) and one process (the sink is served by the
    /// run's own process; workers would each need a way to reach it). A claim strategy (`claim-update`)
    /// serves `job` work only, and `job` work with it claims rows of its jobs table.
    fn check_work(&self) -> Result<(), Problem> {
        let work = self.workload.work;
        if let Some(s) = self.strategies.iter().find(|s| s.is_claim()) {
            if work != WorkKind::Job {
                return Err(Problem::new(
                    Field::Work,
                    format!(
                        " {work} with strategy {s}: a claim takes a job from its jobs table, so \
                         it serves job work only (--work job)"
                    ),
                ));
            }
        }
        if !work.judges_executions() {
            // An idempotency key without a call to carry it: `Workload::validate` says so.
            return Ok(());
        }
        if !self.checker.audit {
            return Err(Problem::new(
                Field::Work,
                format!(
                    " {work} needs the audit: each job's executions are read off the ledger's \
                     sections (and the sink's table judged against them; drop --no-audit)"
                ),
            ));
        }
        if self.workers.is_some() {
            return Err(Problem::new(
                Field::Work,
                format!(
                    " {work} runs in one process for now: the side-effect sink is served by it \
                     and the run's own directory says what work it judges (drop the workers)"
                ),
            ));
        }
        Ok(())
    }

    /// Refuses `adapter_processes` below the client count (processes serving several clients)
    /// with an adapter strategy and a fault that acts on one client's own adapter process:
    /// `client-crash` (SIGKILL), `client-pause` (SIGSTOP), a partition of clients (their own
    /// proxies). Every client sharing the process would suffer it too.
    fn check_adapter_processes(&self) -> Result<(), Problem> {
        let Some(n) = self.workload.adapter_processes else {
            return Ok(());
        };
        let clients = self.workload.clients;
        let Some(s) = self.strategies.iter().find(|s| s.is_adapter()) else {
            return Ok(());
        };
        match self.per_client_fault() {
            Some(f) if n < clients => Err(Problem::of_value(
                Field::AdapterProcesses,
                n,
                format!(
                    " with {s}, {clients} clients and a {}: the fault acts on the target \
                     client's own adapter process (SIGKILL, SIGSTOP, its own proxies), and {n} \
                     processes serve several clients each, who would all suffer it: drop it \
                     (one process per client) or raise it to {clients}",
                    f.fault.name()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Each strategy once, on a topology that serves it and has the shape it needs.
    fn check_strategy_list(&self) -> Result<(), Problem> {
        if self.strategies.is_empty() {
            return Err(Problem::new(Field::Strategies, " needs at least one name"));
        }
        let kind = self.topology.kind;
        for (i, &s) in self.strategies.iter().enumerate() {
            // Each strategy writes into `<run>/<strategy>/`: a repeat would overwrite the first.
            if self.strategies[..i].contains(&s) {
                return Err(Problem::new(
                    Field::Strategy(i),
                    format!(
                        " lists {s} twice: name each strategy once (to repeat a run, run \
                         lockbench again; every run gets its own directory)"
                    ),
                ));
            }
            kind.check_serves(s)
                .and_then(|()| kind.check_shape(s))
                .map_err(|e| Problem::new(Field::Strategy(i), format!(" {s}: {e}")))?;
        }
        Ok(())
    }

    /// The `adapter:command` command line: a command line, and only with that strategy.
    fn check_adapter_command(&self) -> Result<(), Problem> {
        let c = &self.client;
        let wants_command = self.strategies.contains(&StrategyKind::AdapterCommand);
        match (&c.adapter, wants_command) {
            (Some(cmd), true) if c.adapter_argv().is_none() => Err(Problem::of_value(
                Field::Adapter,
                format!("{cmd:?}"),
                ": not a command line (empty, or a quote left open)",
            )),
            (Some(cmd), false) => Err(Problem::of_value(
                Field::Adapter,
                format!("{cmd:?}"),
                " is set but no strategy runs it: add adapter:command to the strategies",
            )),
            _ => Ok(()),
        }
    }

    /// The pooler and the server settings need the `postgres` topology and must be in range;
    /// an application-side pool is for the PostgreSQL strategies it can carry.
    fn check_postgres_settings(&self) -> Result<(), Problem> {
        let kind = self.topology.kind;
        if kind != TopologyKind::Postgres {
            if self.topology.pooler.is_some() {
                return Err(Problem::new(
                    Field::Pooler,
                    format!(
                        " needs topology postgres (PgBouncer pools PostgreSQL sessions), this \
                         test has {kind}"
                    ),
                ));
            }
            if !self.topology.pg_settings.is_empty() {
                return Err(Problem::new(
                    Field::PgSettings,
                    format!(
                        " needs topology postgres (a server lockbench starts), this test has \
                         {kind}"
                    ),
                ));
            }
        }
        if let Some(p) = &self.topology.pooler {
            p.validate()
                .map_err(|e| Problem::new(Field::PoolSize, format!(": {e}")))?;
        }
        for setting in &self.topology.pg_settings {
            check_pg_setting(setting)
                .map_err(|m| Problem::new(Field::PgSettings, format!(": {m}")))?;
        }
        if self.client.pg_pool.is_some() {
            for &s in &self.strategies {
                if s.service() != LockService::Postgres {
                    return Err(Problem::new(
                        Field::PgPool,
                        format!(
                            " is for the PostgreSQL strategies (a pool of PostgreSQL \
                             connections), not {s}"
                        ),
                    ));
                }
                self.strategy_options(s)
                    .validate()
                    .map_err(|e| Problem::new(Field::PgPool, format!(": {e}")))?;
            }
        }
        Ok(())
    }

    /// The workers this test records ([`Test::check_workers`]).
    fn check_recorded_workers(&self) -> Result<(), Problem> {
        match self.workers {
            Some(w) => self.check_workers(w.workers),
            None => Ok(()),
        }
    }

    /// `n` workers for this test's clients: at least one, each with at least one client, on
    /// nodes with plain URLs.
    ///
    /// # Errors
    /// A [`Problem`] with [`Field::Workers`].
    pub fn check_workers(&self, n: u32) -> Result<(), Problem> {
        if n == 0 {
            return Err(Problem::new(Field::Workers, " must be at least 1"));
        }
        if matches!(
            self.topology.kind,
            TopologyKind::Sentinel | TopologyKind::Cluster
        ) {
            return Err(Problem::new(
                Field::Workers,
                format!(
                    " with topology {}: workers reach plain node URLs only (not Sentinel \
                     lookups or cluster routing)",
                    self.topology.kind
                ),
            ));
        }
        if self.workload.clients < n {
            return Err(Problem::of_value(
                Field::Workers,
                n,
                format!(
                    " with {} clients: every worker needs at least one client",
                    self.workload.clients
                ),
            ));
        }
        Ok(())
    }
}
