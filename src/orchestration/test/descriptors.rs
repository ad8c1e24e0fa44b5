//! The descriptor budget: how many clients this process (or each worker process) can hold
//! open ([`crate::topology::limits`]).

use super::{Field, Problem, Test};
use crate::topology::TopologyKind;

impl Test {
    /// Refuses a client count this process cannot hold open (see
    /// [`crate::topology::limits`]): the one capacity check of `run`, `chaos` and the matrix
    /// (scenario files and matrix trials come through [`super::scenario::validate`]).
    ///
    /// # Errors
    /// A [`Problem`] with [`Field::Clients`]: the descriptors needed, the hard limit, and the
    /// most clients it allows.
    pub fn check_descriptor_budget(&self) -> Result<(), Problem> {
        self.check_descriptor_budget_for(None)
    }

    /// [`Self::check_descriptor_budget`] for clients spread over `workers` worker processes:
    /// each worker holds its share's connections; this process (the coordinator) holds the
    /// embedded proxy's two descriptors per proxied connection; a local node holds one per
    /// client that connects to it (its `maxclients` is its limit less 32). The first of
    /// those that does not fit is refused, naming the process.
    ///
    /// # Errors
    /// A [`Problem`] with [`Field::Clients`]: which process, the descriptors it needs, the
    /// limit, the most clients.
    pub fn check_descriptor_budget_for(&self, workers: Option<u32>) -> Result<(), Problem> {
        if self.workload.shared_connection {
            return Ok(());
        }
        if let Some(n) = workers {
            return match crate::topology::limits::raise_nofile_limit() {
                Ok(limit) => self.check_split_descriptor_budget(n, limit),
                Err(_) => Ok(()), // cannot tell; the connects will say so
            };
        }
        let Ok(limit) = crate::topology::limits::raise_nofile_limit() else {
            return Ok(()); // cannot tell; the connects will say so
        };
        let per_client = self.connections_per_client();
        let proxied = !self.topology.direct;
        let most = limit.max_clients(proxied, per_client);
        if u64::from(self.workload.clients) <= most {
            return Ok(());
        }
        let each = per_client * if proxied { 3 } else { 1 };
        let problem = Problem::of_value(
            Field::Clients,
            self.workload.clients,
            format!(
                " needs about {} descriptors ({each} per client{}), but this process may open {} \
                 (hard limit, `ulimit -Hn`): use at most {most} clients",
                u64::from(self.workload.clients) * each
                    + crate::topology::limits::RESERVED_DESCRIPTORS,
                if proxied {
                    ": its connection and the embedded proxy's two"
                } else {
                    ""
                },
                limit.hard,
            ),
        );
        Err(if proxied {
            problem.with_flag_hint(", or --direct")
        } else {
            problem
        })
    }

    /// Connections one client opens: one per node for quorum strategies and cluster clients,
    /// else one.
    fn connections_per_client(&self) -> u64 {
        let nodes = match self.topology.kind {
            TopologyKind::External => {
                (self.topology.urls.len() + self.topology.cluster_seeds.len()) as u64
            }
            TopologyKind::Five => 5,
            // A cluster client connects to every primary (one connection per node at most).
            TopologyKind::Cluster => self.topology.cluster.unwrap_or_default().node_count() as u64,
            _ => 1,
        };
        let cluster = self.topology.kind == TopologyKind::Cluster;
        self.strategies
            .iter()
            .map(|k| if k.is_quorum() || cluster { nodes } else { 1 })
            .max()
            .unwrap_or(1)
    }

    /// The per-process budget of [`Self::check_descriptor_budget_for`] with `workers`, every
    /// process under `limit`.
    pub(super) fn check_split_descriptor_budget(
        &self,
        workers: u32,
        limit: crate::topology::limits::NofileLimit,
    ) -> Result<(), Problem> {
        use crate::topology::limits::RESERVED_DESCRIPTORS;
        let total = u64::from(self.workload.clients);
        let per_client = self.connections_per_client();
        let proxied = !self.topology.direct;
        let room = limit.soft.saturating_sub(RESERVED_DESCRIPTORS);
        let share = total.div_ceil(u64::from(workers.max(1)));
        let mut needs = vec![(
            format!("each worker ({share} clients)"),
            share * per_client,
            room,
            room / per_client * u64::from(workers.max(1)),
        )];
        if proxied {
            needs.push((
                "the coordinator's embedded proxy (two descriptors per proxied connection)"
                    .to_string(),
                2 * total * per_client,
                room,
                room / (2 * per_client),
            ));
        }
        if self.topology.kind != TopologyKind::External {
            // Every client that uses a node connects to it once; its maxclients is its limit
            // less Redis's own 32.
            let node_room = limit.soft.saturating_sub(32);
            needs.push((
                "a local node (one connection per client)".to_string(),
                total,
                node_room,
                node_room,
            ));
        }
        for (who, need, room, most) in needs {
            if need > room {
                let problem = Problem::of_value(
                    Field::Clients,
                    total,
                    format!(
                        " over {workers} workers: {who} needs about {need} descriptors, but a \
                         process here may open {} (hard limit, `ulimit -Hn`): use at most {most} \
                         clients",
                        limit.hard,
                    ),
                );
                return Err(if proxied {
                    problem.with_flag_hint(", or --direct")
                } else {
                    problem
                });
            }
        }
        Ok(())
    }
}
