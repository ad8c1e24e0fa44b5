//! [`FaultStep::check`]: whether a step makes sense for a test before anything starts: inside
//! the run, the parameters its fault takes ([`super::catalogue`]), a target of the right sort
//! that exists, a topology the fault works on. Each problem names the step's key it is about,
//! so a scenario file can point at `file:line:col`.

use std::time::Duration;

use super::catalogue::{self, Acts, FaultSpec};
use super::step::{ClientSide, FaultKind, FaultStep, Link, Param, Target, REPLICA};
use crate::topology::TopologyKind;

/// What a step is checked against: the test it belongs to.
#[derive(Debug, Clone, Copy)]
pub struct StepContext<'a> {
    /// The topology the faults act on.
    pub topology: TopologyKind,
    /// Its data nodes by name (`n1`, `n2`, …), see [`node_names`].
    pub nodes: &'a [String],
    /// Number of clients (ids `0..clients`).
    pub clients: u32,
    /// Number of resources (`r0..r{resources-1}`).
    pub resources: u32,
    /// How long the run lasts; every fault must end inside it.
    pub run: Duration,
    /// `lockbench worker` processes running the clients (`workers = N`, `--workers N`); 0 =
    /// every client in the one lockbench process.
    pub workers: u32,
}

/// One problem with a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepProblem {
    /// The step's key it is about (`target`, `mode`, …); `None` = the step as a whole (a
    /// missing key).
    pub key: Option<&'static str>,
    /// What is wrong and what to write instead (without the step's name).
    pub message: String,
}

/// The data nodes of a topology lockbench starts, by name (`None` for `external`).
pub fn node_names(kind: TopologyKind) -> Option<Vec<String>> {
    let n = kind.local_node_count()?;
    Some((1..=n).map(|i| format!("n{i}")).collect())
}

fn problem(key: impl Into<Option<&'static str>>, message: String) -> Result<(), StepProblem> {
    Err(StepProblem {
        key: key.into(),
        message,
    })
}

fn example(param: Param) -> &'static str {
    match param {
        Param::Latency => " = \"50ms\"",
        Param::Delta => " = \"2s\"",
        Param::Rate => " = 100",
        _ => " = \"1s\"",
    }
}

impl FaultStep {
    /// Every time this step sets, by its key: `at`, `duration`, `latency`, `jitter`, `delta`,
    /// `extra`, `restart_after` (unset ones left out).
    pub fn times(&self) -> Vec<(&'static str, Duration)> {
        [
            ("at", Some(self.at)),
            ("duration", self.duration),
            ("latency", self.latency),
            ("jitter", self.jitter),
            ("delta", self.delta),
            ("extra", self.extra),
            ("restart_after", self.restart_after),
        ]
        .into_iter()
        .filter_map(|(k, d)| d.map(|d| (k, d)))
        .collect()
    }

    /// The first time of this step longer than [`crate::duration_ms::LONGEST`] (24 h), as a
    /// problem at its key.
    ///
    /// # Errors
    /// A [`StepProblem`] naming the key and the bound.
    pub fn check_bounds(&self) -> Result<(), StepProblem> {
        match self
            .times()
            .into_iter()
            .find(|(_, d)| *d > crate::duration_ms::LONGEST)
        {
            Some((key, d)) => problem(
                key,
                format!(
                    "`{key}` = {} is longer than 24h, the longest time a fault step takes",
                    humantime::format_duration(d)
                ),
            ),
            None => Ok(()),
        }
    }

    /// Checks this step against `ctx`; the first problem found is returned, in this order:
    /// its times, its parameters, its topology, its target, then the rules of `resource`,
    /// `with_clients`, `method` and `link`.
    ///
    /// # Errors
    /// A [`StepProblem`] naming the key.
    pub fn check(&self, ctx: &StepContext<'_>) -> Result<(), StepProblem> {
        let spec = catalogue::spec(self.fault);
        self.check_bounds()?;
        self.check_inside_run(ctx.run)?;
        self.check_params(spec)?;
        if self.rate == Some(0) {
            return problem(
                "rate",
                "`rate` = 0 is no limit at all (Toxiproxy's 0): give at least 1 (KB/s)".into(),
            );
        }
        self.check_topology(spec, ctx.topology)?;
        if !self.check_worker_target(ctx)? {
            self.check_target(spec.acts, ctx)?;
        }
        if self.fault == FaultKind::MigrateSlot {
            self.check_migration(ctx)?;
        }
        self.check_with_clients(ctx)?;
        self.check_method(ctx.topology)?;
        self.check_link(ctx.topology)
    }

    /// The step starts before the end of the run, and its `duration` ends inside it.
    fn check_inside_run(&self, run: Duration) -> Result<(), StepProblem> {
        let human = humantime::format_duration;
        if self.at >= run {
            return problem(
                "at",
                format!(
                    "`at` = {} is not before the end of the run (workload.duration = {})",
                    human(self.at),
                    human(run)
                ),
            );
        }
        if let Some(d) = self.duration {
            if self.at.saturating_add(d) > run {
                return problem(
                    "duration",
                    format!(
                        "the fault would last until {}, after the end of the run ({}): \
                         shorten `duration` or lengthen workload.duration{}",
                        human(self.at.saturating_add(d)),
                        human(run),
                        if self.fault == FaultKind::Kill {
                            " (`restart_after` keeps a node down past the end)"
                        } else {
                            ""
                        }
                    ),
                );
            }
        }
        Ok(())
    }

    /// Every parameter the fault needs is set, and none it does not take.
    fn check_params(&self, spec: &FaultSpec) -> Result<(), StepProblem> {
        let set = self.params_set();
        if let Some(&missing) = spec.required.iter().find(|p| !set.contains(p)) {
            return problem(
                None,
                format!("needs `{missing}`, e.g. {missing}{}", example(missing)),
            );
        }
        if let Some(&extra) = set.iter().find(|&&p| !spec.takes(p)) {
            let takes: Vec<&str> = spec
                .required
                .iter()
                .chain(spec.optional)
                .map(|p| p.key())
                .collect();
            return problem(
                extra.key(),
                format!(
                    "`{extra}` is not a parameter of {} (it takes: {})",
                    self.fault,
                    takes.join(", ")
                ),
            );
        }
        Ok(())
    }

    /// The fault works on `topology` ([`FaultSpec::topologies`]).
    fn check_topology(&self, spec: &FaultSpec, topology: TopologyKind) -> Result<(), StepProblem> {
        if let Some(only) = spec.topologies {
            if !only.contains(&topology) {
                let names: Vec<&str> = only.iter().map(|t| t.as_str()).collect();
                return problem(
                    "fault",
                    format!(
                        "needs topology {}, this scenario has {topology}",
                        names.join(" or ")
                    ),
                );
            }
        }
        Ok(())
    }

    /// `with_clients` goes with a bus partition and names clients that exist.
    fn check_with_clients(&self, ctx: &StepContext<'_>) -> Result<(), StepProblem> {
        if let Some(side) = &self.with_clients {
            if self.link != Some(Link::Bus) {
                return problem(
                    "with_clients",
                    "`with_clients` says which clients stay with the target nodes of a \
                     `link = \"bus\"` partition: add `link = \"bus\"` or drop it"
                        .into(),
                );
            }
            let ids = match side {
                ClientSide::Clients(ids) => ids.as_slice(),
                ClientSide::Holder => &[],
            };
            if let Some(bad) = ids.iter().find(|&&id| id >= ctx.clients) {
                return problem(
                    "with_clients",
                    format!(
                        "client {bad} does not exist (clients are 0..{})",
                        ctx.clients
                    ),
                );
            }
        }
        Ok(())
    }

    /// A failover `method` of one topology only is on that topology.
    fn check_method(&self, topology: TopologyKind) -> Result<(), StepProblem> {
        if let Some(method) = self.method {
            if let Some(only) = method.only_on().filter(|&t| t != topology) {
                return problem(
                    "method",
                    format!(
                        "`method = \"{}\"` needs topology {only}, this scenario has {topology}",
                        method.name()
                    ),
                );
            }
        }
        Ok(())
    }

    /// A `link` other than the client link is on a topology that has it, and a bus link
    /// takes a partition of some of the nodes only.
    fn check_link(&self, topology: TopologyKind) -> Result<(), StepProblem> {
        match self.link {
            Some(Link::Peer) if topology != TopologyKind::Etcd => problem(
                "link",
                format!("`link = \"peer\"` needs topology etcd, this scenario has {topology}"),
            ),
            Some(Link::Server) if topology != TopologyKind::Postgres => problem(
                "link",
                format!(
                    "`link = \"server\"` needs topology postgres with a pooler, this scenario has \
                     {topology}"
                ),
            ),
            Some(Link::Bus) if topology != TopologyKind::Cluster => problem(
                "link",
                format!("`link = \"bus\"` needs topology cluster, this scenario has {topology}"),
            ),
            Some(Link::Bus) if self.fault != FaultKind::Partition => problem(
                "link",
                format!(
                    "`link = \"bus\"` takes a partition only (the bus is cut by kernel packet \
                     drops; {} on it is not built)",
                    self.fault
                ),
            ),
            Some(Link::Bus) if self.target == Target::AllNodes => problem(
                "target",
                "a bus partition of every node leaves no node on the other side: name the \
                 nodes of one side (primary, n1,n2)"
                    .into(),
            ),
            Some(Link::Replication)
                if !matches!(topology, TopologyKind::Sentinel | TopologyKind::Cluster) =>
            {
                problem(
                    "link",
                    format!(
                        "`link = \"replication\"` needs topology sentinel or cluster, this \
                         scenario has {topology}"
                    ),
                )
            }
            _ => Ok(()),
        }
    }

    /// A `migrate-slot` names one resource of the workload and one node to move its slot to
    /// (a primary of another shard when the fault starts, checked then).
    fn check_migration(&self, ctx: &StepContext<'_>) -> Result<(), StepProblem> {
        let resource = self.resource_or_default();
        let index = resource
            .strip_prefix('r')
            .and_then(|i| i.parse::<u32>().ok())
            .filter(|i| resource == format!("r{i}"));
        match index {
            None => {
                return problem(
                    "resource",
                    format!("`resource` = {resource:?} is not a resource name (r0, r1, …)"),
                )
            }
            Some(i) if i >= ctx.resources => {
                return problem(
                    "resource",
                    format!(
                        "resource {resource} does not exist (the workload has r0..r{})",
                        ctx.resources.saturating_sub(1)
                    ),
                )
            }
            Some(_) => {}
        }
        match &self.target {
            Target::Nodes(list)
                if list.len() == 1 && list[0] != "primary" && list[0] != REPLICA =>
            {
                Ok(())
            }
            _ => problem(
                "target",
                format!(
                    "names the one node whose shard receives the slot (a primary of another \
                     shard, e.g. target = \"n2\"), not {:?}",
                    self.target.to_string()
                ),
            ),
        }
    }

    /// The rules of a multi-worker run's targets: `worker:I` exists and fits the fault
    /// (`client-pause`, `client-crash`: the process; `partition`, `latency`: its links, to the
    /// nodes after `/`), and the targets one process must see every client for (`holder`, a
    /// partition of clients) are refused with workers. `Ok(true)` when the target was a
    /// worker's (and is checked).
    fn check_worker_target(&self, ctx: &StepContext<'_>) -> Result<bool, StepProblem> {
        let Target::Worker { worker, nodes } = &self.target else {
            if ctx.workers > 0 && self.aims_at_holder() {
                return problem(
                    if self.target == Target::Holder {
                        "target"
                    } else {
                        "with_clients"
                    },
                    format!(
                        "`holder` needs one process that sees every client enter its section; \
                         with workers = {}, target a worker (`worker:0`)",
                        ctx.workers
                    ),
                )
                .map(|()| false);
            }
            if ctx.workers > 0 && matches!(self.target, Target::Clients(_)) {
                return problem(
                    "target",
                    format!(
                        "with workers = {}, client ids live in the worker processes, which \
                         take no client faults of their own yet: target a worker (`worker:0`: \
                         client-pause, client-crash, partition, latency)",
                        ctx.workers
                    ),
                )
                .map(|()| false);
            }
            return Ok(false);
        };
        if ctx.workers == 0 {
            return problem(
                "target",
                format!(
                    "`{}` targets a worker process, but this test runs every client in one \
                     process: set `workers = N` (or run with --workers N)",
                    self.target
                ),
            )
            .map(|()| false);
        }
        if *worker >= ctx.workers {
            return problem(
                "target",
                format!(
                    "worker {worker} does not exist (workers are 0..{})",
                    ctx.workers
                ),
            )
            .map(|()| false);
        }
        let network = matches!(self.fault, FaultKind::Partition | FaultKind::Latency);
        let process = matches!(self.fault, FaultKind::ClientPause | FaultKind::ClientCrash);
        if !network && !process {
            return problem(
                "target",
                format!(
                    "{} cannot target a worker: `worker:I` takes client-pause (SIGSTOP of the \
                     process), client-crash (SIGKILL), partition and latency (its own links)",
                    self.fault
                ),
            )
            .map(|()| false);
        }
        if process && nodes.is_some() {
            return problem(
                "target",
                format!(
                    "{} acts on the worker's process, not on its links: write `worker:{worker}`",
                    self.fault
                ),
            )
            .map(|()| false);
        }
        if self.link.is_some_and(|l| l != Link::Client) {
            return problem(
                "link",
                "a worker is cut off on its own client links: leave `link` unset".into(),
            )
            .map(|()| false);
        }
        if let Some(n) = nodes {
            // The nodes after `/` follow the node targets' own rules.
            let as_nodes = FaultStep {
                target: (**n).clone(),
                ..self.clone()
            };
            as_nodes.check_target(Acts::Nodes, ctx)?;
        }
        Ok(true)
    }

    fn check_target(&self, acts: Acts, ctx: &StepContext<'_>) -> Result<(), StepProblem> {
        let nodes = ctx.nodes;
        let client_target = matches!(self.target, Target::Clients(_) | Target::Holder);
        let acts = match acts {
            Acts::NodesOrClients if client_target => {
                if ctx.topology == TopologyKind::Sentinel {
                    return problem(
                        "target",
                        format!(
                            "cutting off clients needs proxies of their own, which topology {} \
                             cannot give (its clients learn node addresses from the servers): \
                             target nodes",
                            ctx.topology
                        ),
                    );
                }
                if self.link.is_some_and(|l| l != Link::Client) {
                    return problem(
                        "link",
                        "a client target is cut off on its own client links: leave `link` unset"
                            .into(),
                    );
                }
                Acts::Clients
            }
            Acts::NodesOrClients => Acts::Nodes,
            other => other,
        };
        match (&self.target, acts) {
            (Target::Clients(ids), Acts::Clients) => {
                if let Some(bad) = ids.iter().find(|&&id| id >= ctx.clients) {
                    return problem(
                        "target",
                        format!(
                            "client {bad} does not exist (clients are 0..{})",
                            ctx.clients
                        ),
                    );
                }
                Ok(())
            }
            (Target::Holder, Acts::Clients) => Ok(()),
            (Target::Clients(_) | Target::Holder, Acts::Nodes) => problem(
                "target",
                "targets nodes (n1, minority, majority, all, primary), not clients".into(),
            ),
            (Target::Worker { .. }, _) => problem(
                "target",
                "targets nodes (n1, minority, majority, all, primary), not a worker".into(),
            ),
            (_, Acts::Clients) => problem(
                "target",
                "targets clients (`client:N`, `clients:N,M` or `holder`; with workers also \
                 `worker:I`)"
                    .into(),
            ),
            (Target::Nodes(list), Acts::Nodes)
                if list.iter().any(|n| n == REPLICA) && ctx.topology != TopologyKind::Cluster =>
            {
                problem(
                    "target",
                    format!(
                        "`{REPLICA}` (the replica of r0's shard) needs topology cluster, this \
                         scenario has {}: name the node",
                        ctx.topology
                    ),
                )
            }
            (Target::Nodes(list), Acts::Nodes) => {
                match list
                    .iter()
                    .find(|n| *n != "primary" && *n != REPLICA && !nodes.contains(n))
                {
                    Some(bad) => problem(
                        "target",
                        format!(
                            "no node {bad} in topology {} (nodes: {})",
                            ctx.topology,
                            nodes.join(", ")
                        ),
                    ),
                    None => Ok(()),
                }
            }
            (Target::Minority, Acts::Nodes) if nodes.len() < 3 => problem(
                "target",
                format!(
                    "the minority of {}'s {} node(s) is no node: name one (n1)",
                    ctx.topology,
                    nodes.len()
                ),
            ),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
