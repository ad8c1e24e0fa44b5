//! Cutting the cluster bus between pairs of nodes ([`super::super::bus_cut`]) and healing it.

use std::net::Ipv4Addr;

use super::{ClusterGroup, Topology, TopologyError};
use crate::topology::bus_cut::{self, CutElement, Verdict};

impl Topology {
    /// Cuts the cluster bus between every node of `side` (`n1`..) and every other node, both
    /// ways, with `verdict` ([`bus_cut`]); returns the cut's elements, for
    /// [`Topology::heal_bus`]. The nft table is created at the first cut.
    ///
    /// # Errors
    /// [`TopologyError::BusCut`]: not a cluster, a cluster whose nodes share one address (started
    /// without proxies), an unknown node, or what `nft` said.
    pub async fn cut_bus(
        &mut self,
        side: &[String],
        verdict: Verdict,
    ) -> Result<Vec<CutElement>, TopologyError> {
        let names: Vec<String> = self.local.iter().map(|n| n.name().to_string()).collect();
        let group = self.cluster_bus_group()?;
        let index = |n: &String| names.iter().position(|x| x == n);
        if let Some(bad) = side.iter().find(|n| index(n).is_none()) {
            return Err(TopologyError::BusCut {
                reason: format!("no node {bad} (nodes: {})", names.join(", ")),
            });
        }
        let (mut inside, mut outside) = (Vec::new(), Vec::new());
        for (n, b) in names.iter().zip(&group.bus) {
            if side.contains(n) {
                inside.push(*b);
            } else {
                outside.push(*b);
            }
        }
        let elements = bus_cut::cut_elements(&inside, &outside);
        group.firewall.cut(verdict, &elements).await?;
        Ok(elements)
    }

    /// Heals one cut of [`Topology::cut_bus`] (elements another active cut holds stay).
    ///
    /// # Errors
    /// [`TopologyError::BusCut`] with what `nft` said.
    pub async fn heal_bus(
        &mut self,
        verdict: Verdict,
        elements: &[CutElement],
    ) -> Result<(), TopologyError> {
        self.cluster_bus_group()?
            .firewall
            .heal(verdict, elements)
            .await
    }

    /// Heals every bus cut (nothing to do when none was made or this is not a cluster).
    ///
    /// # Errors
    /// [`TopologyError::BusCut`] with what `nft` said.
    pub async fn heal_all_bus(&mut self) -> Result<(), TopologyError> {
        match &mut self.cluster {
            Some(g) => g.firewall.heal_all().await,
            None => Ok(()),
        }
    }

    /// The name of the nft table of the bus cuts while it exists (`cluster` kind, after a cut).
    pub fn bus_table(&self) -> Option<&str> {
        self.cluster
            .as_ref()
            .filter(|g| g.firewall.is_created())
            .map(|g| g.firewall.table())
    }

    fn cluster_bus_group(&mut self) -> Result<&mut ClusterGroup, TopologyError> {
        let group = self.cluster.as_mut().ok_or_else(|| TopologyError::BusCut {
            reason: "only the cluster topology has a cluster bus".into(),
        })?;
        let hosts: std::collections::BTreeSet<Ipv4Addr> =
            group.bus.iter().map(|b| b.host).collect();
        if hosts.len() < group.bus.len() {
            return Err(TopologyError::BusCut {
                reason: "the nodes share one address (a cluster started without proxies):                          their bus cannot be cut per pair of nodes"
                    .into(),
            });
        }
        Ok(group)
    }
}
