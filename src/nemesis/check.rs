//! [`FaultStep::check`]: whether a step makes sense for a test before anything starts: inside
//! the run, the parameters its fault takes ([`super::catalogue`]), a target of the right sort
//! that exists, a topology the fault works on. Each problem names the step's key it is about,
//! so a scenario file can point at `file:line:col`.

use std::time::Duration;

use super::catalogue::{self, Acts};
use super::step::{FaultKind, FaultStep, Link, Param, Target, REPLICA};
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

    /// Checks this step against `ctx`; the first problem found is returned.
    ///
    /// # Errors
    /// A [`StepProblem`] naming the key.
    pub fn check(&self, ctx: &StepContext<'_>) -> Result<(), StepProblem> {
        let spec = catalogue::spec(self.fault);
        let run = ctx.run;
        let topology = ctx.topology;
        let human = humantime::format_duration;
        self.check_bounds()?;
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
        self.check_target(spec.acts, ctx)?;
        if self.fault == FaultKind::MigrateSlot {
            self.check_migration(ctx)?;
        }
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

    fn check_target(&self, acts: Acts, ctx: &StepContext<'_>) -> Result<(), StepProblem> {
        let nodes = ctx.nodes;
        let client_target = matches!(self.target, Target::Clients(_) | Target::Holder);
        let acts = match acts {
            Acts::NodesOrClients if client_target => {
                if matches!(ctx.topology, TopologyKind::Sentinel | TopologyKind::Cluster) {
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
            (_, Acts::Clients) => problem(
                "target",
                "targets clients (`client:N`, `clients:N,M` or `holder`)".into(),
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
mod tests {
    use super::*;

    fn ctx(nodes: &[String]) -> StepContext<'_> {
        StepContext {
            topology: TopologyKind::Five,
            nodes,
            clients: 2,
            resources: 1,
            run: Duration::from_secs(5),
        }
    }

    #[test]
    fn a_problem_names_its_key() {
        let nodes = node_names(TopologyKind::Five).unwrap();
        let mut s = FaultStep::new(FaultKind::Partition, Target::Minority);
        s.duration = Some(Duration::from_secs(1));
        assert_eq!(s.check(&ctx(&nodes)), Ok(()));
        s.extra = Some(Duration::from_secs(1));
        let p = s.check(&ctx(&nodes)).unwrap_err();
        assert_eq!(p.key, Some("extra"));
        assert!(
            p.message.contains(
                "`extra` is not a parameter of partition (it takes: duration, mode, link)"
            ),
            "{}",
            p.message
        );
        s.extra = None;
        s.link = Some(Link::Replication);
        assert_eq!(s.check(&ctx(&nodes)).unwrap_err().key, Some("link"));
        let pause = FaultStep::new(FaultKind::ClientPause, Target::Clients(vec![2]));
        let p = pause.check(&ctx(&nodes)).unwrap_err();
        assert_eq!(p.key, None, "{}", p.message);
        assert!(p.message.contains("needs `duration`"), "{}", p.message);
    }

    #[test]
    fn a_partition_may_cut_clients_off_on_their_own_links_where_they_can_have_them() {
        let nodes = node_names(TopologyKind::Single).unwrap();
        let on = |topology| StepContext {
            topology,
            ..ctx(&nodes)
        };
        let mut s = FaultStep::new(FaultKind::Partition, Target::Holder);
        s.duration = Some(Duration::from_secs(1));
        assert_eq!(s.check(&on(TopologyKind::Single)), Ok(()));
        assert_eq!(s.check(&on(TopologyKind::Postgres)), Ok(()));
        assert!(s.cuts_clients());
        let p = s.check(&on(TopologyKind::Sentinel)).unwrap_err();
        assert_eq!(p.key, Some("target"));
        assert!(p.message.contains("proxies of their own"), "{}", p.message);
        s.link = Some(Link::Replication);
        assert_eq!(
            s.check(&on(TopologyKind::Single)).unwrap_err().key,
            Some("link")
        );
        s.link = None;
        s.target = Target::Clients(vec![2]);
        let p = s.check(&on(TopologyKind::Single)).unwrap_err();
        assert!(
            p.message.contains("client 2 does not exist"),
            "{}",
            p.message
        );
        // Latency still takes nodes only; a node partition cuts no client.
        let mut lat = FaultStep::new(FaultKind::Latency, Target::Holder);
        lat.duration = Some(Duration::from_secs(1));
        lat.latency = Some(Duration::from_millis(5));
        assert_eq!(
            lat.check(&on(TopologyKind::Single)).unwrap_err().key,
            Some("target")
        );
        s.target = Target::AllNodes;
        assert!(!s.cuts_clients());
    }

    #[test]
    fn a_failover_method_needs_its_topology() {
        use super::super::FailoverMethod;
        let nodes = node_names(TopologyKind::Cluster).unwrap();
        let on = |topology| StepContext {
            topology,
            run: Duration::from_secs(10),
            ..ctx(&nodes)
        };
        let mut s = FaultStep::new(FaultKind::Failover, Target::Primary);
        for method in [
            FailoverMethod::KillPrimary,
            FailoverMethod::ClusterFailover,
            FailoverMethod::ClusterFailoverForce,
            FailoverMethod::ClusterFailoverTakeover,
        ] {
            s.method = Some(method);
            assert_eq!(s.check(&on(TopologyKind::Cluster)), Ok(()), "{method}");
        }
        let p = s.check(&on(TopologyKind::Sentinel)).unwrap_err();
        assert_eq!(p.key, Some("method"));
        assert_eq!(
            p.message,
            "`method = \"cluster-failover-takeover\"` needs topology cluster, this scenario has \
             sentinel"
        );
        s.method = Some(FailoverMethod::Sentinel);
        assert_eq!(s.check(&on(TopologyKind::Sentinel)), Ok(()));
        let p = s.check(&on(TopologyKind::Cluster)).unwrap_err();
        assert!(
            p.message.contains("needs topology sentinel"),
            "{}",
            p.message
        );
    }

    #[test]
    fn the_replica_target_is_the_clusters_own() {
        let nodes = node_names(TopologyKind::Cluster).unwrap();
        let on = |topology| StepContext {
            topology,
            run: Duration::from_secs(10),
            ..ctx(&nodes)
        };
        let mut s = FaultStep::new(FaultKind::Kill, "replica".parse().unwrap());
        s.duration = Some(Duration::from_secs(1));
        assert_eq!(s.check(&on(TopologyKind::Cluster)), Ok(()));
        let p = s.check(&on(TopologyKind::Sentinel)).unwrap_err();
        assert_eq!(p.key, Some("target"));
        assert!(
            p.message.contains("needs topology cluster"),
            "{}",
            p.message
        );
        s.target = "n7".parse().unwrap();
        assert!(s.check(&on(TopologyKind::Cluster)).is_err());
    }

    #[test]
    fn a_slot_migration_names_a_resource_and_one_node_on_a_cluster() {
        let nodes = node_names(TopologyKind::Cluster).unwrap();
        let on = |topology| StepContext {
            topology,
            resources: 2,
            ..ctx(&nodes)
        };
        let mut s = FaultStep::new(FaultKind::MigrateSlot, "n2".parse().unwrap());
        assert_eq!(s.check(&on(TopologyKind::Cluster)), Ok(()));
        s.resource = Some("r1".into());
        s.duration = Some(Duration::from_secs(1));
        assert_eq!(s.check(&on(TopologyKind::Cluster)), Ok(()));
        let p = s.check(&on(TopologyKind::Sentinel)).unwrap_err();
        assert_eq!(p.key, Some("fault"));
        assert!(
            p.message.contains("needs topology cluster"),
            "{}",
            p.message
        );
        for (bad, says) in [
            ("r2", "resource r2 does not exist (the workload has r0..r1)"),
            ("x1", "is not a resource name"),
            ("r01", "is not a resource name"),
        ] {
            s.resource = Some(bad.into());
            let p = s.check(&on(TopologyKind::Cluster)).unwrap_err();
            assert_eq!(p.key, Some("resource"), "{bad}");
            assert!(p.message.contains(says), "{bad}: {}", p.message);
        }
        s.resource = None;
        for bad in ["primary", "n2,n3", "all", "replica"] {
            s.target = bad.parse().unwrap();
            let p = s.check(&on(TopologyKind::Cluster)).unwrap_err();
            assert_eq!(p.key, Some("target"), "{bad}: {}", p.message);
        }
        s.target = "n9".parse().unwrap();
        assert!(s
            .check(&on(TopologyKind::Cluster))
            .unwrap_err()
            .message
            .contains("no node n9"));
        let mut kill = FaultStep::new(FaultKind::Kill, Target::Minority);
        kill.resource = Some("r0".into());
        let p = kill.check(&on(TopologyKind::Cluster)).unwrap_err();
        assert_eq!(p.key, Some("resource"), "{}", p.message);
    }

    #[test]
    fn node_names_follow_the_topology() {
        assert_eq!(node_names(TopologyKind::Single).unwrap(), ["n1"]);
        assert_eq!(node_names(TopologyKind::Etcd).unwrap().len(), 3);
        assert_eq!(node_names(TopologyKind::External), None);
    }
}
