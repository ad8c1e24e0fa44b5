//! The network family: faults on the Toxiproxy proxies in front of the nodes, through the
//! Toxiproxy HTTP API only (so the embedded server and Shopify's Toxiproxy both serve).
//!
//! - `latency`: a latency toxic (± jitter, downstream) on each target's proxies;
//! - `bandwidth`: a bandwidth toxic (`rate` KB/s, downstream) on each target's proxies;
//! - `partition` of proxies: `blackhole` = a `timeout` toxic with timeout 0 on both streams
//!   (data dropped, connections kept open), `refuse` = the proxies disabled (connections
//!   closed, new ones refused); on nodes, clients (their own proxies) or a worker's links.
//!
//! Which proxies a target means is [`super::resolve`]'s business; a bus partition (kernel
//! packet drops between cluster nodes) is [`super::cluster`]'s.

use super::faults::Injection;
use super::{ClientControls, FaultStep, Nemesis, NemesisError, PartitionMode, Target};
use crate::toxiproxy::{LatencyMs, Stream, ToxicKind, ToxicSpec};

/// What undoes a network fault.
#[derive(Debug)]
pub(super) enum Undo {
    /// Remove these toxics: (proxy, toxic name).
    RemoveToxics(Vec<(String, String)>),
    /// Enable these proxies again.
    Enable(Vec<String>),
}

impl Nemesis {
    /// `latency`: a latency toxic named `lb-{id}-latency` on every proxy of the targets.
    ///
    /// # Errors
    /// Target resolution ([`super::resolve`]); Toxiproxy errors (what was added is removed).
    pub(super) async fn latency(
        &self,
        step: &FaultStep,
        id: u64,
    ) -> Result<Injection, NemesisError> {
        let latency = step.latency.unwrap_or_default();
        let jitter = step.jitter.unwrap_or_default();
        let (proxies, targets) = self.node_or_worker_proxies(step).await?;
        let spec = ToxicSpec::new(ToxicKind::Latency {
            // µs resolution: "500us" in a scenario is 0.5 ms, not 0.
            latency: LatencyMs::from_duration(latency),
            jitter: LatencyMs::from_duration(jitter),
        })
        .named(format!("lb-{id}-latency"));
        let added = self.add_toxics(&proxies, &[spec]).await?;
        let detail = format!("latency {latency:?} ± {jitter:?} downstream");
        Ok(Injection::lasting(
            targets,
            Undo::RemoveToxics(added),
            detail,
        ))
    }

    /// `bandwidth`: a bandwidth toxic named `lb-{id}-bandwidth` (`rate` KB/s, downstream: what
    /// the node sends its clients) on every proxy of the targets.
    ///
    /// # Errors
    /// Target resolution ([`super::resolve`]); Toxiproxy errors (what was added is removed).
    pub(super) async fn bandwidth(
        &self,
        step: &FaultStep,
        id: u64,
    ) -> Result<Injection, NemesisError> {
        let rate = step.rate.unwrap_or_default();
        let (proxies, targets) = self.node_or_worker_proxies(step).await?;
        let spec =
            ToxicSpec::new(ToxicKind::Bandwidth { rate }).named(format!("lb-{id}-bandwidth"));
        let added = self.add_toxics(&proxies, &[spec]).await?;
        let detail = format!("bandwidth {rate} KB/s downstream");
        Ok(Injection::lasting(
            targets,
            Undo::RemoveToxics(added),
            detail,
        ))
    }

    /// `partition` of proxies: the target nodes', the target clients' own, or a worker's
    /// ([`Nemesis::cut_proxies`]).
    ///
    /// # Errors
    /// Target resolution ([`super::resolve`]); Toxiproxy errors (what was cut is undone).
    pub(super) async fn partition(
        &self,
        step: &FaultStep,
        controls: &ClientControls,
        id: u64,
    ) -> Result<Injection, NemesisError> {
        let (proxies, targets) = match &step.target {
            Target::Holder | Target::Clients(_) => {
                self.own_proxies_of_clients(step, controls).await?
            }
            _ => self.node_or_worker_proxies(step).await?,
        };
        let mode = step.mode.unwrap_or_default();
        let undo = self.cut_proxies(&proxies, mode, id).await?;
        let detail = match mode {
            PartitionMode::Refuse => "refuse: proxy disabled",
            PartitionMode::Blackhole => "blackhole: timeout 0 both streams",
        };
        Ok(Injection::lasting(targets, undo, detail))
    }

    /// Cuts `proxies` as a partition does: `refuse` disables them, `blackhole` adds a
    /// timeout-0 toxic on both streams. Returns what undoes it.
    ///
    /// # Errors
    /// Toxiproxy errors (what was cut is undone).
    pub(super) async fn cut_proxies(
        &self,
        proxies: &[String],
        mode: PartitionMode,
        id: u64,
    ) -> Result<Undo, NemesisError> {
        match mode {
            PartitionMode::Refuse => {
                let mut done = Vec::new();
                for p in proxies {
                    if let Err(e) = self.proxied.api().set_enabled(p, false).await {
                        self.undo_network(Undo::Enable(done)).await.ok();
                        return Err(e.into());
                    }
                    done.push(p.clone());
                }
                Ok(Undo::Enable(done))
            }
            PartitionMode::Blackhole => {
                let specs = [Stream::Upstream, Stream::Downstream].map(|s| {
                    ToxicSpec::new(ToxicKind::Timeout { timeout: 0 })
                        .stream(s)
                        .named(format!("lb-{id}-blackhole-{}", s.as_str()))
                });
                Ok(Undo::RemoveToxics(self.add_toxics(proxies, &specs).await?))
            }
        }
    }

    /// Adds every spec to every proxy; on failure removes what was added.
    async fn add_toxics(
        &self,
        proxies: &[String],
        specs: &[ToxicSpec],
    ) -> Result<Vec<(String, String)>, NemesisError> {
        let mut added = Vec::new();
        for p in proxies {
            for spec in specs {
                match self.proxied.api().add_toxic(p, spec).await {
                    Ok(t) => added.push((p.clone(), t.name)),
                    Err(e) => {
                        self.undo_network(Undo::RemoveToxics(added)).await.ok();
                        return Err(e.into());
                    }
                }
            }
        }
        Ok(added)
    }

    /// Whether an open `refuse` partition holds `proxy` disabled.
    pub(super) fn held_disabled(&self, proxy: &str) -> bool {
        self.active.iter().any(|a| match &a.undo {
            super::faults::Undo::Network(Undo::Enable(list)) => list.iter().any(|p| p == proxy),
            _ => false,
        })
    }

    /// Heals a network fault: removes its toxics (one already gone is fine) or enables its
    /// proxies, every one of them even when one fails.
    ///
    /// # Errors
    /// The first Toxiproxy error.
    pub(super) async fn undo_network(&self, undo: Undo) -> Result<(), NemesisError> {
        let mut first: Option<NemesisError> = None;
        match undo {
            Undo::RemoveToxics(list) => {
                for (proxy, toxic) in list {
                    match self.proxied.api().remove_toxic(&proxy, &toxic).await {
                        Ok(()) => {}
                        Err(e) if e.is_not_found() => {} // already gone (e.g. after a reset)
                        Err(e) => {
                            first.get_or_insert(e.into());
                        }
                    }
                }
            }
            Undo::Enable(list) => {
                for proxy in list {
                    if let Err(e) = self.proxied.api().set_enabled(&proxy, true).await {
                        first.get_or_insert(e.into());
                    }
                }
            }
        }
        first.map_or(Ok(()), Err)
    }
}
