//! [`Nemesis`]: inject and heal each fault of the catalogue, and keep its window open until
//! healed.
//!
//! | fault | inject | heal |
//! |---|---|---|
//! | `latency` | latency toxic (`latency` ± `jitter`, downstream) on each target's proxy | remove toxic |
//! | `partition` `mode=blackhole` | `timeout` toxic with timeout 0 on both streams: data is dropped, connections stay open | remove toxics |
//! | `partition` `mode=refuse` | proxy disabled: connections closed, new ones refused | enable proxy |
//! | `partition` `link=bus` | the cluster bus between the target nodes and the others cut both ways, per pair of nodes, in the run's nft table ([`crate::topology::Topology::cut_bus`]); with `with_clients`, each client's own proxies cut by side; a [`BusProbe`] measures | remove the nft elements, undo the client cuts; the probe's report joins the window's detail |
//! | `partition` on `holder` / `clients:…` | either mode on the target clients' own proxies to every node (`nX-cI`, see [`ProxiedTopology::add_client_links`]): only those clients are cut off | as above |
//! | `kill` | SIGKILL the nodes, or `docker kill` their containers (data kept only with AOF always) | restart after max(`duration`, `restart_after`) |
//! | `pause-node` | SIGSTOP (`docker pause`) | SIGCONT (`docker unpause`) |
//! | `failover` `method=kill-primary` | SIGKILL the current primary, wait until the Sentinels name another | restart the old primary |
//! | `failover` `method=sentinel` | `SENTINEL FAILOVER`, wait until the Sentinels name another primary | (instant) |
//! | `failover` `method=cluster-failover`, `-force`, `-takeover` | `CLUSTER FAILOVER` (default mode, `FORCE`, `TAKEOVER`) on the replica of the primary's shard, wait until the cluster names another node for `r0`'s slot | (instant) |
//! | `clock-jump` | every key's TTL shortened by `delta` ([`super::clock`]) | (instant) |
//! | `migrate-slot` | `resource`'s slot `IMPORTING` on the target primary, `MIGRATING` on its own, its keys moved with `MIGRATE` ([`super::migration`]) | `SETSLOT NODE` on every primary after `duration` |
//! | `client-pause` | `ClientControls::set_paused(true)`: the client and its watchdog stall | resume |
//! | `slow-work` | `ClientControls::set_extra_hold(extra)`: longer sections, renewal keeps running | extra = 0 |
//! | `client-crash` | `ClientControls::crash_while_holding`: stops without releasing | (instant) |
//! | target `holder` | (client faults) the clients inside a critical section when the fault starts, or the first to enter one within 5 s | |
//! | `client-absent` | `ClientControls::set_absent(true)`: no new acquire (set before the clients start when `at` = 0) | absent = false |
//! | `client-pause` on `worker:I` | SIGSTOP of the worker process ([`Nemesis::set_workers`]): its clients, renewals and heartbeats stall | SIGCONT |
//! | `client-crash` on `worker:I` | SIGKILL of the worker process | (instant) |
//! | `partition` / `latency` on `worker:I[/nodes]` | as above, on the worker's own proxies to those nodes (`nX-wI`, [`ProxiedTopology::add_worker_links`]); every node without `/nodes` | as above |
//!
//! `link = "replication"` puts `latency` and `partition` on the replication proxies instead
//! (`sentinel` only): a replica's own `nX-repl`, or all of them when the target is the primary.
//! A node's network faults act on its shared client proxy `nX` and on every client's own
//! `nX-cI`. Targets: `minority` = the first ⌊(n−1)/2⌋ nodes, `majority` = the first ⌊n/2⌋+1, `all`,
//! named nodes, `primary` (asked from the Sentinels; on `cluster` the node serving `r0`'s slot;
//! `n1` elsewhere), `replica` (`cluster`: the replica of `primary`'s shard), `clients:…`.

use std::time::{Duration, Instant};

use super::bus_probe::{BusProbe, ProbeTargets};
use super::clock;
use super::migration::SlotMigration;
use super::{
    ClientControls, ClientSide, FailoverMethod, FaultKind, FaultStep, Link, NemesisError,
    PartitionMode, Target,
};
use crate::history::{FaultWindow, RunClock};
use crate::node::ConnectOptions;
use crate::topology::bus_cut::{CutElement, Verdict};
use crate::topology::{ProxiedTopology, TopologyKind};

/// What an injection did: the window's targets, what undoes it (`None`: nothing to undo),
/// the window's detail, and whether it is instant (its window closed at once).
type Injected = (Vec<String>, Option<Undo>, String, bool);
use crate::toxiproxy::{LatencyMs, Stream, ToxicKind, ToxicSpec};

/// Bound on the wait for the Sentinels to name a new primary after a failover.
pub const FAILOVER_WAIT: Duration = Duration::from_secs(30);

/// What undoes an active fault.
#[derive(Debug)]
enum Undo {
    /// Heal a bus cut, then undo its clients' part (if any).
    HealBus {
        verdict: Verdict,
        elements: Vec<CutElement>,
        clients: Option<Box<Undo>>,
    },
    RemoveToxics(Vec<(String, String)>),
    Enable(Vec<String>),
    Restart(Vec<String>),
    Resume(Vec<String>),
    Unpause(ClientControls, Vec<u32>),
    ClearSlow(ClientControls, Vec<u32>),
    Return(ClientControls, Vec<u32>),
    AssignSlot(Box<SlotMigration>),
    ResumeWorker(u32),
}

/// A `lockbench worker` process of a multi-worker run, as the nemesis acts on it (target
/// `worker:I`): its pid and the client ids it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerProcess {
    /// Its process id (a child of this process: it cannot be reused while unwaited).
    pub pid: u32,
    /// Its first client id.
    pub first_client: u32,
    /// How many clients it runs.
    pub clients: u32,
}

#[derive(Debug)]
struct Active {
    window: FaultWindow,
    undo: Undo,
    /// The measurement of a bus partition, reported in the window's detail at the heal.
    probe: Option<BusProbe>,
}

impl Active {
    /// Stops the probe (if any) and appends its report to the window's detail.
    async fn report(window: &mut FaultWindow, probe: Option<BusProbe>) {
        if let Some(p) = probe {
            let measured = p.finish().await;
            window.detail = format!("{}; {measured}", window.detail);
        }
    }
}

/// The fault injector of one topology. Owns the [`ProxiedTopology`]; take it back with
/// [`Nemesis::into_proxied`] (after [`Nemesis::heal_all`]) to shut it down. Stamps every fault
/// window in µs on its [`RunClock`].
#[derive(Debug)]
pub struct Nemesis {
    proxied: ProxiedTopology,
    active: Vec<Active>,
    next_id: u64,
    admin: ConnectOptions,
    clock: RunClock,
    workers: Vec<WorkerProcess>,
}

impl Nemesis {
    /// A nemesis for `proxied`, with nothing injected; its clock starts now (give it the run's
    /// with [`Nemesis::set_clock`]).
    pub fn new(proxied: ProxiedTopology) -> Self {
        Self {
            proxied,
            active: Vec::new(),
            next_id: 1,
            clock: RunClock::start(),
            workers: Vec::new(),
            admin: ConnectOptions {
                connect_timeout: Duration::from_secs(1),
                response_timeout: Duration::from_secs(2),
            },
        }
    }

    /// Stamps the windows from now on with `clock` (the run's, which the history uses too).
    pub fn set_clock(&mut self, clock: RunClock) {
        self.clock = clock;
    }

    /// The worker processes `worker:I` names, by slot (a multi-worker run sets them once its
    /// workers are running; empty otherwise).
    pub fn set_workers(&mut self, workers: Vec<WorkerProcess>) {
        self.workers = workers;
    }

    /// The clock windows are stamped with.
    pub fn clock(&self) -> RunClock {
        self.clock
    }

    /// The topology and its proxies.
    pub fn proxied(&self) -> &ProxiedTopology {
        &self.proxied
    }

    /// The topology and its proxies, mutably.
    pub fn proxied_mut(&mut self) -> &mut ProxiedTopology {
        &mut self.proxied
    }

    /// Gives the topology back (call [`Nemesis::heal_all`] first).
    pub fn into_proxied(self) -> ProxiedTopology {
        self.proxied
    }

    /// Windows still open (injected, not healed), oldest first.
    pub fn open_faults(&self) -> Vec<FaultWindow> {
        self.active.iter().map(|a| a.window.clone()).collect()
    }

    /// Injects one step now and returns its window: open (`end_us` = `None`) for faults that are
    /// healed later, closed for instant ones (clock jump, client crash, `SENTINEL FAILOVER`).
    /// How long to keep it is the caller's business ([`super::run_schedule`] uses the step's
    /// `duration` / `restart_after`).
    ///
    /// # Errors
    /// [`NemesisError`] naming the target or the failed operation; nothing stays injected.
    pub async fn inject(
        &mut self,
        step: &FaultStep,
        controls: &ClientControls,
    ) -> Result<FaultWindow, NemesisError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut probe = None;
        let (targets, undo, detail, instant) = match step.fault {
            FaultKind::Partition if step.link == Some(Link::Bus) => {
                let (cut, measuring) = self.bus_partition(step, controls, id).await?;
                probe = Some(measuring);
                cut
            }
            FaultKind::Latency => {
                let latency = step.latency.unwrap_or_default();
                let jitter = step.jitter.unwrap_or_default();
                let (proxies, targets) = match &step.target {
                    Target::Worker { .. } => self.worker_proxies(step).await?,
                    _ => {
                        let targets = self.link_proxies(step).await?;
                        (self.with_own_links(&targets), targets)
                    }
                };
                let spec = ToxicSpec::new(ToxicKind::Latency {
                    // µs resolution: "500us" in a scenario is 0.5 ms, not 0.
                    latency: LatencyMs::from_duration(latency),
                    jitter: LatencyMs::from_duration(jitter),
                })
                .named(format!("lb-{id}-latency"));
                let added = self.add_toxics(&proxies, &[spec]).await?;
                let detail = format!("latency {latency:?} ± {jitter:?} downstream");
                (targets, Some(Undo::RemoveToxics(added)), detail, false)
            }
            FaultKind::Partition => {
                let (proxies, targets) = match &step.target {
                    Target::Holder | Target::Clients(_) => {
                        self.own_proxies_of_clients(step, controls).await?
                    }
                    Target::Worker { .. } => self.worker_proxies(step).await?,
                    _ => {
                        let targets = self.link_proxies(step).await?;
                        (self.with_own_links(&targets), targets)
                    }
                };
                let mode = step.mode.unwrap_or_default();
                let undo = self.cut_proxies(&proxies, mode, id).await?;
                let detail = match mode {
                    PartitionMode::Refuse => "refuse: proxy disabled",
                    PartitionMode::Blackhole => "blackhole: timeout 0 both streams",
                };
                (targets, Some(undo), detail.to_string(), false)
            }
            FaultKind::Kill => {
                let nodes = self.resolve_nodes(&step.target).await?;
                for n in &nodes {
                    self.proxied.topology_mut().node_handle(n)?.kill().await?;
                }
                if self.proxied.topology().is_docker() {
                    self.drop_connections(&nodes).await?;
                }
                let detail = format!("kill -9 (persistence {})", self.persistence_of(&nodes));
                (nodes.clone(), Some(Undo::Restart(nodes)), detail, false)
            }
            FaultKind::PauseNode => {
                let nodes = self.resolve_nodes(&step.target).await?;
                let mut done = Vec::new();
                for n in &nodes {
                    let paused = match self.proxied.topology_mut().node_handle(n) {
                        Ok(mut x) => x.pause().await,
                        Err(e) => Err(e),
                    };
                    if let Err(e) = paused {
                        self.run_undo(Undo::Resume(done)).await.ok();
                        return Err(e.into());
                    }
                    done.push(n.clone());
                }
                (
                    nodes,
                    Some(Undo::Resume(done)),
                    "SIGSTOP".to_string(),
                    false,
                )
            }
            FaultKind::Failover => self.failover(step).await?,
            FaultKind::MigrateSlot => self.migrate_slot(step).await?,
            FaultKind::ClockJump => {
                let delta = step.delta.unwrap_or_default();
                let nodes = self.resolve_nodes(&step.target).await?;
                let mut effects = Vec::new();
                for n in &nodes {
                    let endpoint = self.direct(n)?;
                    let e = clock::jump_forward(&endpoint, delta, &self.admin)
                        .await
                        .map_err(|source| NemesisError::Redis {
                            node: n.clone(),
                            source,
                        })?;
                    effects.push(format!(
                        "{n}: shortened {}, deleted {}",
                        e.shortened, e.deleted
                    ));
                }
                let detail = format!("forward {delta:?}; {}", effects.join("; "));
                (nodes, None, detail, true)
            }
            FaultKind::ClientPause | FaultKind::ClientCrash
                if matches!(step.target, Target::Worker { .. }) =>
            {
                self.worker_process_fault(step)?
            }
            FaultKind::ClientPause
            | FaultKind::SlowWork
            | FaultKind::ClientCrash
            | FaultKind::ClientAbsent => {
                let ids = &resolve_clients(&step.target, controls).await?;
                let names = ids.iter().map(|i| format!("client:{i}")).collect();
                match step.fault {
                    FaultKind::ClientPause => {
                        for &i in ids {
                            controls.set_paused(i as usize, true);
                        }
                        let undo = Undo::Unpause(controls.clone(), ids.clone());
                        (names, Some(undo), "paused, renewal frozen".into(), false)
                    }
                    FaultKind::SlowWork => {
                        let extra = step.extra.unwrap_or_default();
                        for &i in ids {
                            controls.set_extra_hold(i as usize, extra);
                        }
                        let undo = Undo::ClearSlow(controls.clone(), ids.clone());
                        let detail = format!("+{extra:?} per critical section, renewal running");
                        (names, Some(undo), detail, false)
                    }
                    FaultKind::ClientAbsent => {
                        for &i in ids {
                            controls.set_absent(i as usize, true);
                        }
                        let undo = Undo::Return(controls.clone(), ids.clone());
                        (names, Some(undo), "no new acquire".into(), false)
                    }
                    _ => {
                        for &i in ids {
                            controls.crash_while_holding(i as usize);
                        }
                        (names, None, "crash at next hold, no release".into(), true)
                    }
                }
            }
        };
        let now = self.clock.now_us();
        let parameters = step.parameters();
        let window = FaultWindow {
            id,
            kind: step.fault.to_string(),
            targets,
            start_us: now,
            end_us: if instant || undo.is_none() {
                Some(now)
            } else {
                None
            },
            detail: if parameters.is_empty() {
                detail
            } else {
                format!("{parameters}; {detail}")
            },
        };
        if let (Some(undo), None) = (undo, window.end_us) {
            self.active.push(Active {
                window: window.clone(),
                undo,
                probe,
            });
        }
        Ok(window)
    }

    /// Heals the open fault `id` and returns its closed window (`None` if not open).
    ///
    /// # Errors
    /// The undo failed; the window is closed anyway (and [`Nemesis::heal_all`] retries the
    /// process parts: resume, restart, proxy reset).
    pub async fn heal(&mut self, id: u64) -> Result<Option<FaultWindow>, NemesisError> {
        let Some(pos) = self.active.iter().position(|a| a.window.id == id) else {
            return Ok(None);
        };
        let Active {
            mut window,
            undo,
            probe,
        } = self.active.remove(pos);
        let result = match undo {
            // Its window also says how the slot was handed over.
            Undo::AssignSlot(migration) => migration
                .finish()
                .await
                .map(|note| window.detail.push_str(&format!("; heal: {note}"))),
            other => self.run_undo(other).await,
        };
        window.end_us = Some(self.clock.now_us());
        Active::report(&mut window, probe).await;
        result.map(|()| Some(window))
    }

    /// Heals every open fault (newest first), then makes sure of the end state: every proxy
    /// enabled with no toxic (`POST /reset`), every node and Sentinel resumed and running.
    /// Every closed window goes to `on_window`, even when an undo fails.
    ///
    /// # Errors
    /// The first failure, after everything else was tried.
    pub async fn heal_all(
        &mut self,
        mut on_window: impl FnMut(FaultWindow),
    ) -> Result<(), NemesisError> {
        let mut first_error: Option<NemesisError> = None;
        while let Some(Active {
            mut window,
            undo,
            probe,
        }) = self.active.pop()
        {
            if let Err(e) = self.run_undo(undo).await {
                tracing::warn!(fault = window.id, "heal failed: {e}");
                first_error.get_or_insert(e);
            }
            window.end_us = Some(self.clock.now_us());
            Active::report(&mut window, probe).await;
            on_window(window);
        }
        if let Err(e) = self.proxied.reset().await {
            first_error.get_or_insert(e.into());
        }
        if let Err(e) = self.proxied.topology_mut().heal_all_bus().await {
            first_error.get_or_insert(e.into());
        }
        if let Err(e) = self.ensure_processes_running().await {
            first_error.get_or_insert(e);
        }
        first_error.map_or(Ok(()), Err)
    }

    async fn ensure_processes_running(&mut self) -> Result<(), NemesisError> {
        let topology = self.proxied.topology_mut();
        if topology.is_external() {
            return Ok(());
        }
        let mut first: Option<NemesisError> = None;
        for mut node in topology.node_handles() {
            if node.is_paused() {
                if let Err(e) = node.resume().await {
                    first.get_or_insert(e.into());
                }
            }
            if !node.is_running().await {
                if let Err(e) = node.restart().await {
                    first.get_or_insert(e.into());
                }
            }
        }
        for mut node in topology.sentinel_handles() {
            if node.is_paused() {
                node.resume().await.ok();
            }
            if !node.is_running().await {
                if let Err(e) = node.restart().await {
                    first.get_or_insert(e.into());
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    async fn run_undo(&mut self, undo: Undo) -> Result<(), NemesisError> {
        let mut first: Option<NemesisError> = None;
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
                    .await;
                if let Err(e) = healed {
                    first.get_or_insert(e.into());
                }
                if let Some(c) = clients {
                    if let Err(e) = Box::pin(self.run_undo(*c)).await {
                        first.get_or_insert(e);
                    }
                }
            }
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
            Undo::Restart(nodes) => {
                for n in nodes {
                    let restarted = async {
                        let mut node = self.proxied.topology_mut().node_handle(&n)?;
                        if !node.is_running().await {
                            node.restart().await?;
                        }
                        Ok::<_, crate::topology::TopologyError>(())
                    };
                    if let Err(e) = restarted.await {
                        first.get_or_insert(e.into());
                    }
                }
            }
            Undo::Resume(nodes) => {
                for n in nodes {
                    let resumed = match self.proxied.topology_mut().node_handle(&n) {
                        Ok(mut node) if node.is_paused() => node.resume().await,
                        Ok(_) => Ok(()),
                        Err(e) => Err(e),
                    };
                    if let Err(e) = resumed {
                        first.get_or_insert(e.into());
                    }
                }
            }
            Undo::Unpause(controls, ids) => {
                for i in ids {
                    controls.set_paused(i as usize, false);
                }
            }
            Undo::ClearSlow(controls, ids) => {
                for i in ids {
                    controls.set_extra_hold(i as usize, Duration::ZERO);
                }
            }
            Undo::Return(controls, ids) => {
                for i in ids {
                    controls.set_absent(i as usize, false);
                }
            }
            Undo::AssignSlot(migration) => {
                if let Err(e) = migration.finish().await {
                    first.get_or_insert(e);
                }
            }
            Undo::ResumeWorker(pid) => {
                // A worker that exited meanwhile (ESRCH) needs no resume.
                if let Err(e) = signal_worker(pid, libc::SIGCONT) {
                    if e.raw_os_error() != Some(libc::ESRCH) {
                        first.get_or_insert(NemesisError::Unsupported {
                            fault: "client-pause of a worker".into(),
                            reason: format!("SIGCONT to worker process {pid}: {e}"),
                        });
                    }
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Closes every open connection of the nodes' client proxies (disable, then enable).
    ///
    /// A killed local process's sockets are closed by its kernel, and the proxy passes the
    /// close on to the clients. A killed container's network namespace can vanish before its
    /// FIN leaves, so the proxy's upstream connection would hang until TCP gives up and the
    /// clients would wait on it; closing them here gives clients what a local kill gives.
    async fn drop_connections(&self, nodes: &[String]) -> Result<(), NemesisError> {
        for p in nodes.iter().flat_map(|n| self.proxied.client_proxies_of(n)) {
            // A proxy a `refuse` partition holds disabled has no connections and stays so.
            let held_off = self.active.iter().any(|a| match &a.undo {
                Undo::Enable(list) => list.contains(&p),
                _ => false,
            });
            if held_off {
                continue;
            }
            self.proxied.api().set_enabled(&p, false).await?;
            self.proxied.api().set_enabled(&p, true).await?;
        }
        Ok(())
    }

    /// Adds every spec to every proxy; on failure removes what was added.
    async fn add_toxics(
        &mut self,
        proxies: &[String],
        specs: &[ToxicSpec],
    ) -> Result<Vec<(String, String)>, NemesisError> {
        let mut added = Vec::new();
        for p in proxies {
            for spec in specs {
                match self.proxied.api().add_toxic(p, spec).await {
                    Ok(t) => added.push((p.clone(), t.name)),
                    Err(e) => {
                        self.run_undo(Undo::RemoveToxics(added)).await.ok();
                        return Err(e.into());
                    }
                }
            }
        }
        Ok(added)
    }

    /// A `link = "bus"` partition: the bus between the target nodes and every other node cut
    /// both ways ([`crate::topology::Topology::cut_bus`]); with `with_clients`, the clients on
    /// the targets' side cut off every other node and the rest cut off the targets, on their
    /// own proxies (`with_clients = "holder"`: the clients inside a critical section when the
    /// step starts, [`resolve_clients`]); a [`BusProbe`] started at the cut.
    async fn bus_partition(
        &mut self,
        step: &FaultStep,
        controls: &ClientControls,
        id: u64,
    ) -> Result<(Injected, BusProbe), NemesisError> {
        let side = self.resolve_nodes(&step.target).await?;
        // Before anything is cut: the holder is waited for here, as `target = "holder"` is.
        let with = match &step.with_clients {
            Some(ClientSide::Clients(ids)) => Some(ids.clone()),
            Some(holder) => Some(resolve_clients(&holder.target(), controls).await?),
            None => None,
        };
        let names = self.proxied.node_names();
        let others: Vec<String> = names
            .iter()
            .filter(|n| !side.contains(n))
            .cloned()
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
                Ok(undo) => Some(Box::new(undo)),
                Err(e) => {
                    let undo = Undo::HealBus {
                        verdict,
                        elements,
                        clients: None,
                    };
                    self.run_undo(undo).await.ok();
                    return Err(e);
                }
            },
        };
        let table = self
            .proxied
            .topology()
            .bus_table()
            .unwrap_or("?")
            .to_string();
        let mut detail = format!(
            "bus cut both ways between {} and {} ({} nft elements in table {table}, {})",
            side.join(","),
            others.join(","),
            elements.len(),
            match verdict {
                Verdict::Drop => "drop",
                Verdict::Reject => "reject with tcp reset",
            }
        );
        if let Some(with) = &with {
            detail.push_str(&format!(
                "; {} with {}, the other clients cut off {}",
                ClientSide::Clients(with.clone()),
                side.join(","),
                side.join(",")
            ));
        }
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
        let probe = BusProbe::start(
            ProbeTargets {
                cut_primaries,
                observers,
                announce,
                key_prefix: self.proxied.topology().key_prefix().to_string(),
            },
            cut_at,
        );
        let undo = Undo::HealBus {
            verdict,
            elements,
            clients,
        };
        Ok(((side, Some(undo), detail, false), probe))
    }

    /// Cuts each client with its own proxies by side: those in `with` off every node not in
    /// `side`, the others off every node in `side` (`mode` as a partition of proxies).
    ///
    /// # Errors
    /// [`NemesisError::Unsupported`] when the clients have no proxies of their own; Toxiproxy
    /// errors (what was cut is undone).
    async fn cut_clients_by_side(
        &mut self,
        side: &[String],
        with: &[u32],
        mode: PartitionMode,
        id: u64,
    ) -> Result<Undo, NemesisError> {
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

    /// Cuts `proxies` as a partition does: `refuse` disables them, `blackhole` adds a
    /// timeout-0 toxic on both streams. Returns what undoes it.
    ///
    /// # Errors
    /// Toxiproxy errors (what was cut is undone).
    async fn cut_proxies(
        &mut self,
        proxies: &[String],
        mode: PartitionMode,
        id: u64,
    ) -> Result<Undo, NemesisError> {
        match mode {
            PartitionMode::Refuse => {
                let mut done = Vec::new();
                for p in proxies {
                    if let Err(e) = self.proxied.api().set_enabled(p, false).await {
                        self.run_undo(Undo::Enable(done)).await.ok();
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

    async fn failover(&mut self, step: &FaultStep) -> Result<Injected, NemesisError> {
        let kind = self.proxied.topology().kind();
        if !matches!(kind, TopologyKind::Sentinel | TopologyKind::Cluster) {
            return Err(NemesisError::Unsupported {
                fault: "failover".into(),
                reason: "needs the sentinel or cluster topology".into(),
            });
        }
        let old = self.proxied.primary().await?;
        let began = Instant::now();
        let method = step.method.unwrap_or_default();
        if let Some(only) = method.only_on().filter(|&t| t != kind) {
            return Err(NemesisError::Unsupported {
                fault: format!("failover method {}", method.name()),
                reason: format!("needs the {only} topology"),
            });
        }
        let undo = if method == FailoverMethod::Sentinel {
            self.sentinel_failover().await?;
            None
        } else if let Some(mode) = method.cluster_mode() {
            self.cluster_failover(&old, mode).await?;
            None
        } else {
            self.proxied
                .topology_mut()
                .node_handle(&old)?
                .kill()
                .await?;
            Some(Undo::Restart(vec![old.clone()]))
        };
        let new = match self.wait_new_primary(&old).await {
            Ok(n) => n,
            Err(e) => {
                if let Some(u) = undo {
                    self.run_undo(u).await.ok();
                }
                return Err(e);
            }
        };
        let detail = format!(
            "{}: {old} -> {new} after {} ms",
            method.name(),
            began.elapsed().as_millis()
        );
        let instant = undo.is_none();
        Ok((vec![old], undo, detail, instant))
    }

    /// `migrate-slot`: the slot of the step's resource from the primary serving it now to the
    /// target node's shard ([`SlotMigration`]); the keys move at once, the slot is assigned
    /// to the target at the heal.
    async fn migrate_slot(
        &mut self,
        step: &FaultStep,
    ) -> Result<(Vec<String>, Option<Undo>, String, bool), NemesisError> {
        let topology = self.proxied.topology();
        if topology.kind() != TopologyKind::Cluster {
            return Err(NemesisError::Unsupported {
                fault: "migrate-slot".into(),
                reason: "needs the cluster topology".into(),
            });
        }
        let resource = step.resource_or_default().to_string();
        let slot = crate::topology::cluster::resource_slot(&resource);
        let layout = topology.cluster_layout().await?;
        let source = layout
            .iter()
            .find(|s| s.owns(slot))
            .map(|s| s.primary.clone())
            .ok_or_else(|| NemesisError::Target {
                target: resource.clone(),
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
        let target_endpoint = self.direct(&target)?;
        let target_addr = crate::node::host_port(&target_endpoint.url).map_err(|reason| {
            NemesisError::Target {
                target: target.clone(),
                reason,
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
        Ok((
            vec![source, target],
            Some(Undo::AssignSlot(Box::new(migration))),
            detail,
            false,
        ))
    }

    /// The first replica of the shard `primary` serves (`cluster` only).
    async fn replica_of(&self, primary: &str) -> Result<String, NemesisError> {
        if self.proxied.topology().kind() != TopologyKind::Cluster {
            return Err(NemesisError::Target {
                target: super::step::REPLICA.into(),
                reason: "only the cluster topology has a replica target".into(),
            });
        }
        let layout = self.proxied.topology().cluster_layout().await?;
        layout
            .iter()
            .find(|s| s.primary == primary)
            .and_then(|s| s.replicas.first())
            .cloned()
            .ok_or_else(|| NemesisError::Target {
                target: primary.to_string(),
                reason: "no live replica in its shard".into(),
            })
    }

    /// The first replica of the shard serving `r0`'s slot now (target `replica`).
    async fn replica_of_primary(&self) -> Result<String, NemesisError> {
        let primary = self.proxied.primary().await?;
        self.replica_of(&primary).await
    }

    /// `CLUSTER FAILOVER [mode]` (`mode` "" for the default, `FORCE` or `TAKEOVER`) on the
    /// first replica of `primary`'s shard.
    async fn cluster_failover(&self, primary: &str, mode: &str) -> Result<(), NemesisError> {
        let replica = self.replica_of(primary).await?;
        let endpoint = self.direct(&replica)?;
        let mut conn = endpoint
            .connect_direct(&self.admin)
            .await
            .map_err(|source| NemesisError::Redis {
                node: replica.clone(),
                source,
            })?;
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("FAILOVER");
        if !mode.is_empty() {
            cmd.arg(mode);
        }
        cmd.query_async::<()>(&mut conn)
            .await
            .map_err(|source| NemesisError::Redis {
                node: replica,
                source,
            })
    }

    async fn sentinel_failover(&self) -> Result<(), NemesisError> {
        let name = self
            .proxied
            .topology()
            .master_name()
            .unwrap_or("lockbench")
            .to_string();
        let mut last = None;
        for s in self.proxied.topology().sentinel_endpoints() {
            let asked = async {
                let mut conn = s.connect_direct(&self.admin).await?;
                redis::cmd("SENTINEL")
                    .arg("FAILOVER")
                    .arg(&name)
                    .query_async::<()>(&mut conn)
                    .await
            };
            match asked.await {
                Ok(()) => return Ok(()),
                Err(source) => {
                    last = Some(NemesisError::Redis {
                        node: s.name.clone(),
                        source,
                    })
                }
            }
        }
        Err(last.unwrap_or(NemesisError::Unsupported {
            fault: "failover".into(),
            reason: "no sentinel".into(),
        }))
    }

    async fn wait_new_primary(&self, old: &str) -> Result<String, NemesisError> {
        let began = Instant::now();
        loop {
            if let Ok(now) = self.proxied.primary().await {
                if now != old {
                    return Ok(now);
                }
            }
            if began.elapsed() >= FAILOVER_WAIT {
                return Err(NemesisError::Timeout {
                    what: format!(
                        "{} naming a primary other than {old}",
                        if self.proxied.topology().kind() == TopologyKind::Cluster {
                            "the cluster"
                        } else {
                            "sentinels"
                        }
                    ),
                    waited_ms: began.elapsed().as_millis(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn direct(&self, node: &str) -> Result<crate::node::NodeEndpoint, NemesisError> {
        self.proxied
            .direct_endpoint(node)
            .cloned()
            .ok_or_else(|| NemesisError::Target {
                target: node.to_string(),
                reason: format!(
                    "no such node (nodes: {})",
                    self.proxied.node_names().join(", ")
                ),
            })
    }

    fn persistence_of(&mut self, nodes: &[String]) -> String {
        self.proxied
            .topology_mut()
            .node_handles()
            .iter()
            .find(|n| nodes.iter().any(|x| x == n.name()))
            .map_or("unknown".to_string(), |n| n.persistence().to_string())
    }

    /// The data nodes a node target names.
    ///
    /// # Errors
    /// [`NemesisError::Target`] for client targets or unknown names.
    pub async fn resolve_nodes(&self, target: &Target) -> Result<Vec<String>, NemesisError> {
        let names = self.proxied.node_names();
        let n = names.len();
        let first = |k: usize| names.iter().take(k).cloned().collect::<Vec<_>>();
        Ok(match target {
            Target::Minority => first(n.saturating_sub(1) / 2),
            Target::Majority => first(n / 2 + 1),
            Target::AllNodes => names.clone(),
            Target::Primary => vec![self.proxied.primary().await?],
            Target::Nodes(list) => {
                let mut out = Vec::new();
                for x in list {
                    let name = if x == "primary" {
                        self.proxied.primary().await?
                    } else if x == super::step::REPLICA {
                        self.replica_of_primary().await?
                    } else if names.contains(x) {
                        x.clone()
                    } else {
                        return Err(NemesisError::Target {
                            target: x.clone(),
                            reason: format!("no such node (nodes: {})", names.join(", ")),
                        });
                    };
                    if !out.contains(&name) {
                        out.push(name);
                    }
                }
                out
            }
            Target::Clients(_) | Target::Holder | Target::Worker { .. } => {
                return Err(NemesisError::Target {
                    target: target.to_string(),
                    reason: "this fault targets nodes, not clients or workers".into(),
                })
            }
        })
    }

    /// Proxy names a network fault acts on: the targets' client proxies, or with
    /// `link = "replication"` / `"peer"` / `"server"` their replication, peer or pooler→server
    /// proxies.
    fn link_proxies_for(&self, nodes: &[String], link: Link) -> Result<Vec<String>, NemesisError> {
        if link == Link::Client {
            return Ok(nodes.to_vec());
        }
        let repl = self.proxied.replication_links();
        if link == Link::Server {
            let server: Vec<String> = repl
                .iter()
                .filter(|l| l.proxy.ends_with("-server") && nodes.contains(&l.node))
                .map(|l| l.proxy.clone())
                .collect();
            if server.is_empty() {
                return Err(NemesisError::Unsupported {
                    fault: "server link fault".into(),
                    reason: "only topology postgres with a pooler has a pooler→server proxy \
                             (`[pooler]` in a scenario, --pooler on run)"
                        .into(),
                });
            }
            return Ok(server);
        }
        let postgres = self.proxied.topology().kind() == TopologyKind::Postgres;
        let etcd = self.proxied.topology().kind() == TopologyKind::Etcd;
        if repl.is_empty() || postgres || etcd != (link == Link::Peer) {
            return Err(NemesisError::Unsupported {
                fault: format!("{} link fault", link.name()),
                reason: "only the sentinel and cluster topologies have replication proxies, and only the etcd \
                         topology has peer proxies"
                    .into(),
            });
        }
        if etcd {
            return Ok(repl
                .iter()
                .filter(|l| nodes.contains(&l.node))
                .map(|l| l.proxy.clone())
                .collect());
        }
        let primary_targeted = nodes.iter().any(|n| !repl.iter().any(|l| &l.node == n));
        Ok(repl
            .iter()
            .filter(|l| primary_targeted || nodes.contains(&l.node))
            .map(|l| l.proxy.clone())
            .collect())
    }

    /// `proxies` with each shared client proxy (`nX`) followed by the clients' own proxies to
    /// that node (`nX-cI`, when they have them): a node's network fault reaches every client.
    /// The window keeps naming `nX` alone.
    fn with_own_links(&self, proxies: &[String]) -> Vec<String> {
        proxies
            .iter()
            .flat_map(
                |p| match self.proxied.client_links().iter().find(|l| &l.proxy == p) {
                    Some(shared) => self.proxied.client_proxies_of(&shared.node),
                    None => vec![p.clone()],
                },
            )
            .collect()
    }

    /// A partition of clients: the target clients' own proxies to every node
    /// ([`ProxiedTopology::add_client_links`]), and the window's targets (`client:3`).
    ///
    /// # Errors
    /// [`NemesisError::Unsupported`] when the clients have no proxies of their own or `link`
    /// is not the client link; as [`resolve_clients`].
    async fn own_proxies_of_clients(
        &self,
        step: &FaultStep,
        controls: &ClientControls,
    ) -> Result<(Vec<String>, Vec<String>), NemesisError> {
        let unsupported = |reason: String| NemesisError::Unsupported {
            fault: "partition of clients".into(),
            reason,
        };
        if step.link.unwrap_or_default() != Link::Client {
            return Err(unsupported(
                "a client is cut off on its own client links only (leave `link` unset)".into(),
            ));
        }
        let ids = resolve_clients(&step.target, controls).await?;
        let mut proxies = Vec::new();
        for &i in &ids {
            let own = self.proxied.links_of_client(i);
            if own.is_empty() {
                return Err(unsupported(format!(
                    "client {i} has no proxies of its own ({} clients have)",
                    self.proxied.client_link_count()
                )));
            }
            proxies.extend(own.iter().map(|l| l.proxy.clone()));
        }
        let names = ids.iter().map(|i| format!("client:{i}")).collect();
        Ok((proxies, names))
    }

    /// The worker a `worker:I` target names, and the window's targets: the target as written,
    /// then the worker's clients (`client:4`, …), so the checker ties the window to them.
    fn worker_of(
        &self,
        step: &FaultStep,
    ) -> Result<(u32, WorkerProcess, Vec<String>), NemesisError> {
        let Target::Worker { worker, .. } = &step.target else {
            return Err(NemesisError::Target {
                target: step.target.to_string(),
                reason: "not a worker target".into(),
            });
        };
        let w =
            self.workers
                .get(*worker as usize)
                .cloned()
                .ok_or_else(|| NemesisError::Target {
                    target: step.target.to_string(),
                    reason: format!(
                        "no such worker (this run has {} worker process(es))",
                        self.workers.len()
                    ),
                })?;
        let mut targets = vec![step.target.to_string()];
        targets.extend((w.first_client..w.first_client + w.clients).map(|c| format!("client:{c}")));
        Ok((*worker, w, targets))
    }

    /// `client-pause` (SIGSTOP, healed by SIGCONT) or `client-crash` (SIGKILL) of a worker
    /// process: every one of its clients stalls or dies with it, its lease renewals and its
    /// heartbeats too, as when an application host stops the world.
    fn worker_process_fault(
        &mut self,
        step: &FaultStep,
    ) -> Result<(Vec<String>, Option<Undo>, String, bool), NemesisError> {
        let (_, w, targets) = self.worker_of(step)?;
        let crash = step.fault == FaultKind::ClientCrash;
        let sig = if crash { libc::SIGKILL } else { libc::SIGSTOP };
        signal_worker(w.pid, sig).map_err(|e| NemesisError::Unsupported {
            fault: format!("{} {}", step.fault, step.target),
            reason: format!("signal to worker process {}: {e}", w.pid),
        })?;
        Ok(if crash {
            let detail = format!(
                "SIGKILL of worker process {}: its clients stop, no release",
                w.pid
            );
            (targets, None, detail, true)
        } else {
            let detail = format!(
                "SIGSTOP of worker process {}: its clients, renewals and heartbeats stall",
                w.pid
            );
            (targets, Some(Undo::ResumeWorker(w.pid)), detail, false)
        })
    }

    /// A network fault on a worker's own proxies (`nX-wI`) to the nodes after `/` (every node
    /// without), and the window's targets ([`Nemesis::worker_of`]).
    ///
    /// # Errors
    /// [`NemesisError::Unsupported`] when the worker has no proxies of its own or `link` is
    /// not the client link; node targets as [`Nemesis::resolve_nodes`].
    async fn worker_proxies(
        &self,
        step: &FaultStep,
    ) -> Result<(Vec<String>, Vec<String>), NemesisError> {
        let (worker, _, targets) = self.worker_of(step)?;
        if step.link.unwrap_or_default() != Link::Client {
            return Err(NemesisError::Unsupported {
                fault: format!("{} {}", step.fault, step.target),
                reason: "a worker is cut off on its own client links only (leave `link` unset)"
                    .into(),
            });
        }
        let nodes = match &step.target {
            Target::Worker {
                nodes: Some(nodes), ..
            } => self.resolve_nodes(nodes).await?,
            _ => self.proxied.node_names(),
        };
        let proxies: Vec<String> = self
            .proxied
            .links_of_worker(worker)
            .iter()
            .filter(|l| nodes.contains(&l.node))
            .map(|l| l.proxy.clone())
            .collect();
        if proxies.is_empty() {
            return Err(NemesisError::Unsupported {
                fault: format!("{} {}", step.fault, step.target),
                reason: format!("worker {worker} has no proxies of its own"),
            });
        }
        Ok((proxies, targets))
    }

    async fn link_proxies(&self, step: &FaultStep) -> Result<Vec<String>, NemesisError> {
        let nodes = self.resolve_nodes(&step.target).await?;
        self.link_proxies_for(&nodes, step.link.unwrap_or_default())
    }
}

/// kill(2) of a worker process this process started.
fn signal_worker(pid: u32, sig: libc::c_int) -> std::io::Result<()> {
    // 0 (and anything that is not a positive pid_t) would signal a whole process group.
    if pid == 0 || pid > i32::MAX as u32 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("no worker process id ({pid})"),
        ));
    }
    // SAFETY: kill(2) on the pid of a child worker process; no memory effects.
    if unsafe { libc::kill(pid as libc::pid_t, sig) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The clients a client target names: `clients:…` as given, `holder` = the clients inside a
/// critical section now (or the first to enter one, [`wait_for_holder`]).
///
/// # Errors
/// [`NemesisError::Target`] for a node target or a client that does not exist;
/// [`NemesisError::Timeout`] when no client held a lease in time.
async fn resolve_clients(
    target: &Target,
    controls: &ClientControls,
) -> Result<Vec<u32>, NemesisError> {
    let ids = match target {
        Target::Clients(ids) => ids.clone(),
        Target::Holder => wait_for_holder(controls).await?,
        other => {
            return Err(NemesisError::Target {
                target: format!("{other:?}"),
                reason: "client faults target clients (`clients:0,1`, `holder`)".into(),
            })
        }
    };
    if let Some(bad) = ids.iter().find(|&&i| i as usize >= controls.len()) {
        return Err(NemesisError::Target {
            target: format!("client:{bad}"),
            reason: format!("no such client (clients are 0..{})", controls.len()),
        });
    }
    Ok(ids)
}

/// How long a `holder` target waits for some client to enter a critical section.
pub(crate) const HOLDER_WAIT: Duration = Duration::from_secs(5);

/// The clients inside a critical section now; if none, polls every millisecond until one
/// enters (at most [`HOLDER_WAIT`]).
///
/// # Errors
/// [`NemesisError::Timeout`] when no client held a lease within [`HOLDER_WAIT`].
async fn wait_for_holder(controls: &ClientControls) -> Result<Vec<u32>, NemesisError> {
    let deadline = Instant::now() + HOLDER_WAIT;
    loop {
        let inside = controls.inside();
        if !inside.is_empty() {
            return Ok(inside);
        }
        if Instant::now() >= deadline {
            return Err(NemesisError::Timeout {
                what: "a client inside a critical section (target `holder`)".into(),
                waited_ms: HOLDER_WAIT.as_millis(),
            });
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
