//! [`Nemesis`]: inject and heal each fault of the catalogue, and keep its window open until
//! healed.
//!
//! | fault | inject | heal |
//! |---|---|---|
//! | `latency` | latency toxic (`latency` ± `jitter`, downstream) on each target's proxy | remove toxic |
//! | `bandwidth` | bandwidth toxic (`rate` KB/s, downstream) on each target's proxy | remove toxic |
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
//!
//! Each fault family owns the inject and the undo of its rows: [`super::network`] (`latency`,
//! `bandwidth`, `partition` of proxies), [`super::process`] (`kill`, `pause-node`, a worker process's
//! `client-pause` / `client-crash`), [`super::clock`] (`clock-jump`), [`super::client`] (the
//! client faults), [`super::failover`] (`failover`) and [`super::cluster`] (`partition`
//! `link=bus`, `migrate-slot`); [`super::resolve`] turns targets into nodes, clients and
//! proxies. This file keeps the [`Nemesis`], the dispatch by [`FaultKind`] and the heal.

use std::time::Duration;

use super::bus_probe::BusProbe;
use super::process::WorkerProcess;
use super::{client, cluster, network, process};
use super::{ClientControls, FaultKind, FaultStep, Link, NemesisError, Target};
use crate::history::{FaultWindow, RunClock};
use crate::node::ConnectOptions;
use crate::topology::ProxiedTopology;

pub use super::failover::FAILOVER_WAIT;

/// What an injection did, for its window.
#[derive(Debug)]
pub(super) struct Injection {
    /// The window's targets (`n1`, `client:3`, `worker:0` and its clients, …).
    pub targets: Vec<String>,
    /// What heals it; `None` for an instant fault (its window closes at once).
    pub undo: Option<Undo>,
    /// What the fault did, for the window's detail (after the step's parameters).
    pub detail: String,
    /// The measurement of a bus partition, reported in the window's detail at the heal.
    pub probe: Option<BusProbe>,
}

impl Injection {
    /// A fault that lasts until `undo` heals it.
    pub(super) fn lasting(
        targets: Vec<String>,
        undo: impl Into<Undo>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            targets,
            undo: Some(undo.into()),
            detail: detail.into(),
            probe: None,
        }
    }

    /// A fault that is over once injected: nothing to undo.
    pub(super) fn instant(targets: Vec<String>, detail: impl Into<String>) -> Self {
        Self {
            targets,
            undo: None,
            detail: detail.into(),
            probe: None,
        }
    }
}

/// What undoes an active fault: each family heals its own.
#[derive(Debug)]
pub(super) enum Undo {
    Network(network::Undo),
    Process(process::Undo),
    Client(client::Undo),
    Cluster(cluster::Undo),
}

impl From<network::Undo> for Undo {
    fn from(u: network::Undo) -> Self {
        Undo::Network(u)
    }
}

impl From<process::Undo> for Undo {
    fn from(u: process::Undo) -> Self {
        Undo::Process(u)
    }
}

impl From<client::Undo> for Undo {
    fn from(u: client::Undo) -> Self {
        Undo::Client(u)
    }
}

impl From<cluster::Undo> for Undo {
    fn from(u: cluster::Undo) -> Self {
        Undo::Cluster(u)
    }
}

#[derive(Debug)]
pub(super) struct Active {
    pub(super) window: FaultWindow,
    pub(super) undo: Undo,
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
    pub(super) proxied: ProxiedTopology,
    pub(super) active: Vec<Active>,
    next_id: u64,
    pub(super) admin: ConnectOptions,
    clock: RunClock,
    pub(super) workers: Vec<WorkerProcess>,
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
    /// [`NemesisError::Inject`] naming the step, around what failed (the target, the
    /// operation); nothing stays injected.
    pub async fn inject(
        &mut self,
        step: &FaultStep,
        controls: &ClientControls,
    ) -> Result<FaultWindow, NemesisError> {
        let id = self.next_id;
        self.next_id += 1;
        let injected = match step.fault {
            FaultKind::Partition if step.link == Some(Link::Bus) => {
                self.bus_partition(step, controls, id).await
            }
            FaultKind::Latency => self.latency(step, id).await,
            FaultKind::Bandwidth => self.bandwidth(step, id).await,
            FaultKind::Partition => self.partition(step, controls, id).await,
            FaultKind::Kill => self.kill(step).await,
            FaultKind::PauseNode => self.pause_nodes(step).await,
            FaultKind::Failover => self.failover(step).await,
            FaultKind::MigrateSlot => self.migrate_slot(step).await,
            FaultKind::ClockJump => self.clock_jump(step).await,
            FaultKind::ClientPause | FaultKind::ClientCrash
                if matches!(step.target, Target::Worker { .. }) =>
            {
                self.worker_process_fault(step)
            }
            FaultKind::ClientPause
            | FaultKind::SlowWork
            | FaultKind::ClientCrash
            | FaultKind::ClientAbsent => client::inject(step, controls).await,
        };
        let injection = injected.map_err(|source| NemesisError::Inject {
            step: step.describe(),
            source: Box::new(source),
        })?;
        Ok(self.open(id, step, injection))
    }

    /// The window of an injection, kept open (with what heals it) unless the fault is instant.
    fn open(&mut self, id: u64, step: &FaultStep, injection: Injection) -> FaultWindow {
        let Injection {
            targets,
            undo,
            detail,
            probe,
        } = injection;
        let now = self.clock.now_us();
        let parameters = step.parameters();
        let window = FaultWindow {
            id,
            kind: step.fault.to_string(),
            targets,
            start_us: now,
            end_us: if undo.is_none() { Some(now) } else { None },
            detail: if parameters.is_empty() {
                detail
            } else {
                format!("{parameters}; {detail}")
            },
        };
        if let Some(undo) = undo {
            self.active.push(Active {
                window: window.clone(),
                undo,
                probe,
            });
        }
        window
    }

    /// Heals the open fault `id` and returns its closed window (`None` if not open).
    ///
    /// # Errors
    /// [`NemesisError::Heal`] naming the window, around what failed; the window is closed
    /// anyway (and [`Nemesis::heal_all`] retries the process parts: resume, restart, proxy
    /// reset).
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
            Undo::Cluster(cluster::Undo::AssignSlot(migration)) => migration
                .finish()
                .await
                .map(|note| window.detail.push_str(&format!("; heal: {note}"))),
            other => self.run_undo(other).await,
        };
        window.end_us = Some(self.clock.now_us());
        Active::report(&mut window, probe).await;
        result
            .map(|()| Some(window.clone()))
            .map_err(|e| NemesisError::healing(&window, e))
    }

    /// Heals every open fault (newest first), then makes sure of the end state: every proxy
    /// enabled with no toxic (`POST /reset`), every node and Sentinel resumed and running.
    /// Every closed window goes to `on_window`, even when an undo fails.
    ///
    /// # Errors
    /// The first failure ([`NemesisError::Heal`] for a window's own undo), after everything
    /// else was tried.
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
                first_error.get_or_insert(NemesisError::healing(&window, e));
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

    /// Runs `undo` by its family.
    pub(super) async fn run_undo(&mut self, undo: Undo) -> Result<(), NemesisError> {
        match undo {
            Undo::Network(u) => self.undo_network(u).await,
            Undo::Process(u) => self.undo_process(u).await,
            Undo::Client(u) => {
                u.run();
                Ok(())
            }
            Undo::Cluster(u) => self.undo_cluster(u).await,
        }
    }
}
