//! The cluster family (`cluster` topology): faults of a Redis Cluster's own machinery.
//!
//! - `partition` `link=bus`: the cluster bus between the target nodes and the others cut both
//!   ways, per pair of nodes, in the run's nft table
//!   ([`crate::topology::Topology::cut_bus`]); with `with_clients`, each client's own proxies
//!   cut by side ([`Nemesis::cut_proxies`]); a [`BusProbe`] measures until when the cut
//!   primaries accept writes and when the other side promotes. Healed by removing the nft
//!   elements and undoing the client cuts; the probe's report joins the window's detail.
//! - `migrate-slot`: `resource`'s slot `IMPORTING` on the target primary, `MIGRATING` on its
//!   own, its keys moved with `MIGRATE` ([`SlotMigration`]); `SETSLOT NODE` on every primary
//!   at the heal.

use std::time::Instant;

use super::bus_probe::{BusProbe, ProbeTargets};
use super::faults::Injection;
use super::migration::SlotMigration;
use super::resolve::resolve_clients;
use super::PartitionMode;
use super::{network, ClientControls, ClientSide, FaultStep, Nemesis, NemesisError};
use crate::topology::bus_cut::{CutElement, Verdict};
use crate::topology::cluster::ShardLayout;
use crate::topology::TopologyKind;

/// What undoes a cluster fault.
#[derive(Debug)]
pub(super) enum Undo {
    /// Heal a bus cut, then undo its clients' part (if any).
    HealBus {
        verdict: Verdict,
        elements: Vec<CutElement>,
        clients: Option<network::Undo>,
    },
    /// Assign the migrating slot to its target on every primary.
    AssignSlot(Box<SlotMigration>),
}

impl Nemesis {
    /// A `link = "bus"` partition: the bus between the target nodes and every other node cut
    /// both ways ([`crate::topology::Topology::cut_bus`]); with `with_clients`, the clients on
    /// the targets' side cut off every other node and the rest cut off the targets, on their
    /// own proxies (`with_clients = "holder"`: the clients inside a critical section when the
    /// step starts, [`resolve_clients`]); a [`BusProbe`] started at the cut.
    ///
    /// # Errors
    /// Target resolution; the cut failed (a failed client cut heals the bus cut).
    pub(super) async fn bus_partition(
        &mut self,
        step: &FaultStep,
        controls: &ClientControls,
        id: u64,
    ) -> Result<Injection, NemesisError> {
        let side = self.resolve_nodes(&step.target).await?;
        // Before anything is cut: the holder is waited for here, as `target = "holder"` is.
        let with = match &step.with_clients {
            Some(ClientSide::Clients(ids)) => Some(ids.clone()),
            Some(holder) => Some(resolve_clients(&holder.target(), controls).await?),
            None => None,
        };
        let others: Vec<String> = self
            .proxied
            .node_names()
            .into_iter()
            .filter(|n| !side.contains(n))
            .collect();
        let mode = step.mode.unwrap_or_default();
        let verdict = match mode {
            PartitionMode::Blackhole => Verdict::Drop,
            PartitionMode::Refuse => Verdict::Reject,
        };
        // The shards as they are at the cut: which primaries the probe writes to.
        let layout = self.proxied.topology().cluster_layout().await?;
        let elements = self.proxied.topology_mut().cut_bus(&side, verdict).await?;
        let cut_at = Instant::now();
        let clients = match &with {
            None => None,
            Some(with) => match self.cut_clients_by_side(&side, with, mode, id).await {
                Ok(undo) => Some(undo),
                Err(e) => {
                    let undo = Undo::HealBus {
                        verdict,
                        elements,
                        clients: None,
                    };
                    self.undo_cluster(undo).await.ok();
                    return Err(e);
                }
            },
        };
        let detail = self.bus_detail(&side, &others, elements.len(), verdict, with);
        let probe = self.bus_probe(&layout, &side, &others, cut_at)?;
        let undo = Undo::HealBus {
            verdict,
            elements,
            clients,
        };
        Ok(Injection {
            probe: Some(probe),
            ..Injection::lasting(side, undo, detail)
        })
    }

    /// The window's detail of a bus cut: who is cut from whom, how, and the clients' sides.
    fn bus_detail(
        &self,
        side: &[String],
        others: &[String],
        elements: usize,
        verdict: Verdict,
        with: Option<Vec<u32>>,
    ) -> String {
        let table = self.proxied.topology().bus_table().unwrap_or("?");
        let mut detail = format!(
            "bus cut both ways between {} and {} ({elements} nft elements in table {table}, {})",
            side.join(","),
            others.join(","),
            match verdict {
                Verdict::Drop => "drop",
                Verdict::Reject => "reject with tcp reset",
            }
        );
        if let Some(with) = with {
            detail.push_str(&format!(
                "; {} with {}, the other clients cut off {}",
                ClientSide::Clients(with),
                side.join(","),
                side.join(",")
            ));
        }
        detail
    }

    /// The probe of a bus cut made at `cut_at`: it writes to the primaries on the cut side
    /// (of `layout`, the shards at the cut) and watches the others for a promotion.
    fn bus_probe(
        &self,
        layout: &[ShardLayout],
        side: &[String],
        others: &[String],
        cut_at: Instant,
    ) -> Result<BusProbe, NemesisError> {
        let announce = self
            .proxied
            .topology()
            .cluster_announce()
            .unwrap_or_default()
            .to_vec();
        let mut cut_primaries = Vec::new();
        for shard in layout.iter().filter(|s| side.contains(&s.primary)) {
            cut_primaries.push((self.direct(&shard.primary)?, shard.clone()));
        }
        let observers = others
            .iter()
            .map(|n| self.direct(n))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(BusProbe::start(
            ProbeTargets {
                cut_primaries,
                observers,
                announce,
                key_prefix: self.proxied.topology().key_prefix().to_string(),
            },
            cut_at,
        ))
    }

    /// Cuts each client with its own proxies by side: those in `with` off every node not in
    /// `side`, the others off every node in `side` (`mode` as a partition of proxies).
    ///
    /// # Errors
    /// [`NemesisError::Unsupported`] when the clients have no proxies of their own; Toxiproxy
    /// errors (what was cut is undone).
    async fn cut_clients_by_side(
        &self,
        side: &[String],
        with: &[u32],
        mode: PartitionMode,
        id: u64,
    ) -> Result<network::Undo, NemesisError> {
        let count = self.proxied.client_link_count();
        if count == 0 {
            return Err(NemesisError::Unsupported {
                fault: "partition with_clients".into(),
                reason: "the clients have no proxies of their own".into(),
            });
        }
        let proxies: Vec<String> = (0..count)
            .flat_map(|i| {
                let with_side = with.contains(&i);
                self.proxied
                    .links_of_client(i)
                    .iter()
                    .filter(move |l| side.contains(&l.node) != with_side)
                    .map(|l| l.proxy.clone())
            })
            .collect();
        self.cut_proxies(&proxies, mode, id).await
    }

    /// `migrate-slot`: the slot of the step's resource from the primary serving it now to the
    /// target node's shard ([`SlotMigration`]); the keys move at once, the slot is assigned
    /// to the target at the heal.
    ///
    /// # Errors
    /// [`NemesisError::Unsupported`] off `cluster`; as [`Nemesis::migration_ends`]; a
    /// command of the migration failed (what was begun is finished).
    pub(super) async fn migrate_slot(
        &mut self,
        step: &FaultStep,
    ) -> Result<Injection, NemesisError> {
        if self.proxied.topology().kind() != TopologyKind::Cluster {
            return Err(NemesisError::Unsupported {
                fault: "migrate-slot".into(),
                reason: "needs the cluster topology".into(),
            });
        }
        let resource = step.resource_or_default().to_string();
        let slot = crate::topology::cluster::resource_slot(&resource);
        let (source, target, primaries) = self.migration_ends(step, &resource, slot).await?;
        let target_endpoint = self.direct(&target)?;
        let target_addr = crate::node::host_port(&target_endpoint.url).map_err(|reason| {
            NemesisError::Target {
                target: target.clone(),
                reason: reason.to_string(),
            }
        })?;
        let others = primaries
            .iter()
            .filter(|p| **p != source && **p != target)
            .map(|p| self.direct(p))
            .collect::<Result<Vec<_>, _>>()?;
        let began = Instant::now();
        let migration = SlotMigration::begin(
            slot,
            &resource,
            self.direct(&source)?,
            target_endpoint,
            target_addr,
            others,
        )
        .await?;
        let moved = match migration.move_keys().await {
            Ok(moved) => moved,
            Err(e) => {
                migration.finish().await.ok();
                return Err(e);
            }
        };
        let detail = format!(
            "{}; IMPORTING/MIGRATING, {} moved in {} ms; SETSLOT NODE at the heal",
            migration.describe(),
            moved.describe(),
            began.elapsed().as_millis()
        );
        let undo = Undo::AssignSlot(Box::new(migration));
        Ok(Injection::lasting(vec![source, target], undo, detail))
    }

    /// The two ends of a slot migration and every primary now: the primary serving `slot`
    /// (`resource`'s), and the one target node, which must be another shard's primary.
    ///
    /// # Errors
    /// [`NemesisError::Target`] when no live primary serves the slot, or the target is not
    /// one node that is another shard's primary.
    async fn migration_ends(
        &self,
        step: &FaultStep,
        resource: &str,
        slot: u16,
    ) -> Result<(String, String, Vec<String>), NemesisError> {
        let layout = self.proxied.topology().cluster_layout().await?;
        let source = layout
            .iter()
            .find(|s| s.owns(slot))
            .map(|s| s.primary.clone())
            .ok_or_else(|| NemesisError::Target {
                target: resource.to_string(),
                reason: format!("no live primary serves its slot {slot}"),
            })?;
        let target = match self.resolve_nodes(&step.target).await?.as_slice() {
            [one] => one.clone(),
            _ => {
                return Err(NemesisError::Target {
                    target: step.target.to_string(),
                    reason: "name one node".into(),
                })
            }
        };
        let primaries: Vec<String> = layout.iter().map(|s| s.primary.clone()).collect();
        if target == source || !primaries.contains(&target) {
            return Err(NemesisError::Target {
                target,
                reason: format!(
                    "not a primary of another shard than {source}, which serves slot {slot} \
                     ({resource}); primaries now: {}",
                    primaries.join(", ")
                ),
            });
        }
        Ok((source, target, primaries))
    }

    /// Heals a cluster fault: removes the bus cut's nft elements and undoes its client cuts,
    /// or assigns the migrating slot to its target ([`SlotMigration::finish`]).
    ///
    /// # Errors
    /// The first failure; the client cuts are undone even when the bus heal failed.
    pub(super) async fn undo_cluster(&mut self, undo: Undo) -> Result<(), NemesisError> {
        match undo {
            Undo::HealBus {
                verdict,
                elements,
                clients,
            } => {
                let healed = self
                    .proxied
                    .topology_mut()
                    .heal_bus(verdict, &elements)
                    .await
                    .map_err(NemesisError::from);
                let clients = match clients {
                    Some(c) => self.undo_network(c).await,
                    None => Ok(()),
                };
                healed.and(clients)
            }
            Undo::AssignSlot(migration) => migration.finish().await.map(|_| ()),
        }
    }
}
