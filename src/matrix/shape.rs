//! Episode shapes: what one fault episode of each class does on each topology, as nemesis
//! steps relative to the episode's start, with its planned heal, its length (fault, heal and
//! recovery gap: the next episode starts after it) and what it must meet to count
//! ([`Exposure`]).
//!
//! Every episode is **aimed**: it opens with a step on `target = "holder"` (the nemesis waits
//! for a client inside a critical section), and its node or network fault follows 1 ms later,
//! so the fault lands while that client holds a lease. The holder is kept inside until the
//! fault has played out by stretching its section (`slow-work` on the holder), in one of two
//! ways, so that the stretch alone never causes damage:
//!
//! - **within its lease**: 0.6 TTL, no renewal (the section still ends well inside the
//!   lease): `crash-restart-empty`, `node-pause`, `clock-jump`, `partition-minority`,
//!   `failover` off Sentinel. A second holder then means the lock service dropped a live lease.
//! - **renewed**: longer than the TTL with the watchdog renewing the lease (`slow-work`,
//!   `partition-holder`): without the fault the lease is kept (that is what `slow-work`
//!   measures), so a second holder means the fault made the renewal fail.
//!
//! Client faults stall or crash the holder itself (`client-pause`, `client-crash`,
//! `session-loss`). Sentinel's failover is one episode per trial ([`sentinel_failover`]).
//!
//! Times: `T` = the lease TTL of the topology ([`lease_ttl`]), `h` = the longest hold.
//!
//! What the recorded windows look like (for judging an episode): a holder step's window opens
//! when a holder was found (at or just after the planned start) and names it (`client:3`);
//! `client-crash` is an instant window at the request, the crash itself (a `crash` record)
//! comes at the end of the holder's hold (setnx-expire: inside its next acquire); Sentinel's
//! `failover` window opens when the new primary is named, ~2.3 s after the kill.

use std::time::Duration;

use super::cluster_shape;
use super::episode::Exposure;
use super::fault::FaultClass;
use super::service;
use crate::nemesis::{FailoverMethod, FaultKind, FaultStep, Link, PartitionMode, Target};
use crate::strategy::{LockService, StrategyKind};
use crate::topology::TopologyKind;

/// Gap between an episode's holder step and its node or network fault.
pub const AIM_GAP: Duration = Duration::from_millis(1);

/// Replication lag on Sentinel's replication links during a failover trial (as claim 05a):
/// far longer than acquire → kill → promotion, so the holder's key and fencing counter never
/// reach the promoted replica.
pub const FAILOVER_LAG: Duration = Duration::from_secs(8);

/// How long the holder stays inside past its hold in a Sentinel failover episode: the kill,
/// Sentinel's promotion (2.2–2.4 s measured) and the other clients' first acquire on the new
/// primary (within ~0.1 s of it), with a second to spare.
pub const FAILOVER_STRETCH: Duration = Duration::from_millis(3500);

/// The lease TTL of a Sentinel failover trial: longer than [`FAILOVER_STRETCH`] plus the hold,
/// so the holder's lease is still live when a second client acquires (a lease shorter than the
/// failover would run out anyway, and the class asks whether a *live* lease survives).
pub const FAILOVER_TTL: Duration = Duration::from_secs(5);

/// Planned time from the kill to Sentinel naming a new primary (`down-after` 1 s + election;
/// 2.2–2.4 s measured). The nemesis stamps the failover window's start when the new primary is
/// named, so the window opens about this long after the planned start.
pub const FAILOVER_ALLOWANCE: Duration = Duration::from_secs(3);

/// The lease TTL a strategy gets on `topology` from the workload TTL `ttl`: etcd grants leases
/// in whole seconds (at least 1 s), so its TTL is rounded up; every other service uses `ttl`.
pub fn lease_ttl(topology: TopologyKind, ttl: Duration) -> Duration {
    if service::of_topology(topology).whole_second_leases {
        let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
        Duration::from_secs(secs.max(1))
    } else {
        ttl
    }
}

/// Planned time for a killed node to be back (restart until it answers), measured under load
/// (per topology in its service's registration, [`service`]). A restart that runs late
/// delays the next episode's steps (the nemesis runs one step at a time), so these are generous.
pub fn restart_allowance(topology: TopologyKind) -> Duration {
    service::topology(topology).restart_allowance
}

/// Planned time a trial spends outside its run on `topology`: starting the nodes and
/// Toxiproxy, checking the history, tearing down (measured with the release build on a
/// loaded 2-core machine; per topology in its service's registration, [`service`]).
pub fn setup_allowance(topology: TopologyKind) -> Duration {
    service::topology(topology).setup_allowance
}

/// What the episode shapes are computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// The lease TTL on this topology ([`lease_ttl`]).
    pub ttl: Duration,
    /// The longest hold of the workload.
    pub hold: Duration,
}

/// One episode: steps relative to its start.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeShape {
    /// Nemesis steps, `at` counted from the episode's start.
    pub steps: Vec<FaultStep>,
    /// Planned heal of its last fault, from the episode's start.
    pub heal: Duration,
    /// Start → next episode's start (fault, heal and recovery gap).
    pub length: Duration,
    /// What it must meet to count.
    pub exposure: Exposure,
}

/// A step of `fault` on `target` at `at` for `duration`, the other parameters unset.
pub(super) fn step(
    fault: FaultKind,
    target: Target,
    at: Duration,
    duration: Option<Duration>,
) -> FaultStep {
    let mut s = FaultStep::new(fault, target);
    s.at = at;
    s.duration = duration;
    s
}

/// The holder's section made `extra` longer: slow-work on the holder, open long enough for
/// the holder to read it at the end of its hold (then healed, so its next section is normal).
pub(super) fn stretch(t: Timing, extra: Duration) -> FaultStep {
    let mut s = step(
        FaultKind::SlowWork,
        Target::Holder,
        Duration::ZERO,
        Some(t.hold + t.ttl / 10),
    );
    s.extra = Some(extra);
    s
}

/// The node(s) holding the lock: a majority on `five` and `etcd`, the primary of the lock's
/// shard on `cluster`, `n1` elsewhere (the only node, the PostgreSQL server, or Sentinel's
/// primary).
fn lock_nodes(topology: TopologyKind) -> Target {
    service::topology(topology).lock_nodes.target()
}

/// Whether the clock-jump method (shorten every key's TTL on a node) has anything to act on:
/// Redis topologies only.
pub fn clock_applies(topology: TopologyKind) -> bool {
    service::of_topology(topology).clock_jump_void.is_none()
}

/// What an episode of `class` on `topology` must meet to count.
pub fn exposure(class: FaultClass, topology: TopologyKind) -> Exposure {
    if topology == TopologyKind::Cluster && cluster_shape::is_cluster_failover(class) {
        return Exposure::Holder;
    }
    let t = Timing {
        ttl: Duration::from_secs(1),
        hold: Duration::from_millis(10),
    };
    episode(class, topology, t, 1).exposure
}

/// How long a holder is stretched when the stretch must stay inside its lease, with no
/// renewal: 0.6 TTL (the hold is at most a quarter TTL, so the section ends by 0.85 TTL).
pub fn inside_lease(t: Timing) -> Duration {
    t.ttl * 3 / 5
}

/// A node fault aimed at a live lease: the holder stretched inside its lease
/// ([`inside_lease`]), then `fault` 1 ms later; the episode lasts until `heal` (or the
/// holder's exit) plus half a TTL of recovery.
fn at_live_lease(t: Timing, mut fault: FaultStep, heal: Duration) -> EpisodeShape {
    fault.at = AIM_GAP;
    let held = t.hold + inside_lease(t);
    EpisodeShape {
        steps: vec![stretch(t, inside_lease(t)), fault],
        heal,
        length: heal.max(held) + t.ttl / 2,
        exposure: Exposure::LiveLease,
    }
}

/// One episode of `class` on `topology` (1-based `index`: latency alternates its level).
/// Sentinel's failover is not here: see [`sentinel_failover`].
pub fn episode(class: FaultClass, topology: TopologyKind, t: Timing, index: u32) -> EpisodeShape {
    match class {
        FaultClass::None => baseline(t),
        FaultClass::Latency | FaultClass::PartitionMinority | FaultClass::PartitionHolder => {
            network(class, topology, t, index)
        }
        FaultClass::CrashRestartEmpty
        | FaultClass::NodePause
        | FaultClass::ClockJump
        | FaultClass::Failover
        | FaultClass::ClusterFailover
        | FaultClass::ClusterFailoverForce
        | FaultClass::ClusterFailoverTakeover
        | FaultClass::ClusterPause
        | FaultClass::ClusterMinorityPartition => process(class, topology, t),
        FaultClass::ClientPause
        | FaultClass::ClientCrash
        | FaultClass::SessionLoss
        | FaultClass::SlowWork => client(class, topology, t),
    }
}

/// `latency` (every node's proxy, alternating its level by `index`), `partition-minority`,
/// `partition-holder`.
fn network(class: FaultClass, topology: TopologyKind, t: Timing, index: u32) -> EpisodeShape {
    let ttl = t.ttl;
    match class {
        FaultClass::Latency => {
            let mut s = step(
                FaultKind::Latency,
                Target::AllNodes,
                Duration::ZERO,
                Some(ttl / 2),
            );
            if index % 2 == 1 {
                s.latency = Some(ttl / 20);
                s.jitter = Some(ttl / 40);
            } else {
                s.latency = Some(ttl * 4 / 5);
            }
            EpisodeShape {
                steps: vec![s],
                heal: ttl / 2,
                length: ttl,
                exposure: Exposure::AcquireInFlight,
            }
        }
        FaultClass::PartitionMinority => {
            let (target, len) = if service::topology(topology).minority.is_some() {
                (Target::Minority, ttl * 5 / 4)
            } else {
                (lock_nodes(topology), ttl / 2)
            };
            let s = step(FaultKind::Partition, target, Duration::ZERO, Some(len));
            at_live_lease(t, s, AIM_GAP + len)
        }
        _ => {
            let cut = ttl * 6 / 5;
            // Only the holder is cut (its own proxies, `nX-cI`); the others keep their links
            // and can take the lock once its lease is gone. A lock that ends with its session
            // (PostgreSQL) is freed only when the holder's connection closes, which can be
            // after the heal (its client gives up on the silent connection): the holder
            // works on 1.5 TTL past the heal so that a second holder still meets it.
            // On Sentinel the clients learn the primary's address from the Sentinels, which
            // announce the shared proxies (on a cluster, from the nodes' slot maps, remapped
            // to the shared proxies): there every client is cut off with the holder.
            let target = if shared_proxies(topology) {
                Target::AllNodes
            } else {
                Target::Holder
            };
            let mut s = step(FaultKind::Partition, target, AIM_GAP, Some(cut));
            s.mode = Some(PartitionMode::Blackhole);
            let extra = cut + ttl * 3 / 2;
            EpisodeShape {
                steps: vec![stretch(t, extra), s],
                heal: AIM_GAP + cut,
                length: t.hold + extra + ttl / 4,
                exposure: Exposure::Holder,
            }
        }
    }
}

/// `crash-restart-empty`, `node-pause`, `clock-jump`, and `failover` off Sentinel (a kill of
/// the node its service fails over from, restarted at once; a cluster row's own columns are
/// in [`cluster_shape`]).
fn process(class: FaultClass, topology: TopologyKind, t: Timing) -> EpisodeShape {
    let ttl = t.ttl;
    match class {
        FaultClass::CrashRestartEmpty => {
            let s = step(FaultKind::Kill, lock_nodes(topology), Duration::ZERO, None);
            at_live_lease(t, s, AIM_GAP + restart_allowance(topology))
        }
        FaultClass::NodePause => {
            let len = ttl * 6 / 5;
            let s = step(
                FaultKind::PauseNode,
                lock_nodes(topology),
                Duration::ZERO,
                Some(len),
            );
            let mut e = at_live_lease(t, s, AIM_GAP + len);
            if let Some(gap) = service::of_topology(topology).resume_gap {
                e.length = e.heal + gap;
            }
            e
        }
        FaultClass::ClockJump if !clock_applies(topology) => baseline(t),
        FaultClass::ClockJump => {
            let mut s = step(
                FaultKind::ClockJump,
                lock_nodes(topology),
                Duration::ZERO,
                None,
            );
            s.delta = Some(ttl * 2);
            at_live_lease(t, s, AIM_GAP)
        }
        _ => {
            let target = service::topology(topology).failover_kills.target();
            let s = step(FaultKind::Kill, target, Duration::ZERO, None);
            at_live_lease(t, s, AIM_GAP + restart_allowance(topology))
        }
    }
}

/// `client-pause`, `client-crash`, `session-loss`, `slow-work`: the holder itself stalls,
/// dies, loses its connections or works on.
fn client(class: FaultClass, topology: TopologyKind, t: Timing) -> EpisodeShape {
    let ttl = t.ttl;
    match class {
        FaultClass::ClientPause => {
            let pause = ttl * 3 / 2;
            EpisodeShape {
                steps: vec![step(
                    FaultKind::ClientPause,
                    Target::Holder,
                    Duration::ZERO,
                    Some(pause),
                )],
                heal: pause,
                length: pause + ttl / 4,
                exposure: Exposure::Holder,
            }
        }
        FaultClass::ClientCrash => EpisodeShape {
            steps: vec![step(
                FaultKind::ClientCrash,
                Target::Holder,
                Duration::ZERO,
                None,
            )],
            heal: Duration::ZERO,
            length: ttl * 3 / 2,
            exposure: Exposure::Holder,
        },
        FaultClass::SessionLoss => session_loss(topology, t),
        _ => {
            let extra = ttl * 5 / 4;
            let s = stretch(t, extra);
            EpisodeShape {
                heal: s.duration.unwrap_or_default(),
                steps: vec![s],
                length: t.hold + extra + ttl / 4,
                exposure: Exposure::Holder,
            }
        }
    }
}

/// Whether the clients reach the nodes only through proxies every client shares (the
/// topology tells them the addresses): Sentinel and cluster.
pub fn shared_proxies(topology: TopologyKind) -> bool {
    service::topology(topology).shared_proxies.is_some()
}

fn baseline(t: Timing) -> EpisodeShape {
    EpisodeShape {
        steps: Vec::new(),
        heal: Duration::ZERO,
        length: t.ttl / 2,
        exposure: Exposure::Baseline,
    }
}

/// The holder stalls, and 0.1 TTL later its connections are reset (`partition mode=refuse`
/// on every node: connections closed, new ones refused), as in claim 11a. A PostgreSQL session
/// lock has no TTL, so the stall there lasts 1.5 TTL (the server ends the session, another
/// client takes the lock, the holder wakes up believing it holds it); on the TTL locks the
/// stall stays inside the lease (0.4 TTL) and the reset is shorter (0.2 TTL), so a second
/// holder could only come from a lock that lives and dies with its connection.
fn session_loss(topology: TopologyKind, t: Timing) -> EpisodeShape {
    let ttl = t.ttl;
    let (pause, reset) = if service::of_topology(topology).session_lock {
        (ttl * 3 / 2, ttl / 2)
    } else {
        (ttl * 2 / 5, ttl / 5)
    };
    let mut cut = step(
        FaultKind::Partition,
        Target::AllNodes,
        ttl / 10,
        Some(reset),
    );
    cut.mode = Some(PartitionMode::Refuse);
    EpisodeShape {
        steps: vec![
            step(
                FaultKind::ClientPause,
                Target::Holder,
                Duration::ZERO,
                Some(pause),
            ),
            cut,
        ],
        heal: pause.max(ttl / 10 + reset),
        length: pause.max(ttl / 10 + reset) + ttl / 2,
        exposure: Exposure::Holder,
    }
}

/// A whole failover trial on Sentinel (one episode: Sentinel fails a group over automatically
/// only once per 2 × failover-timeout, and after a failover replication no longer runs
/// through the lag proxies). `clients` stay absent for the lead-in while replication starts
/// lagging [`FAILOVER_LAG`] (every replica; only `n3` for a strategy whose acquire waits for a
/// replica's acknowledgement, which could take no lease at all otherwise; they join half-way
/// through it); then the first
/// holder is stretched [`FAILOVER_STRETCH`] and the primary is killed 1 ms later. Returns the
/// trial-wide steps (absolute offsets, run length `run`) and the episode (relative to
/// `lead_in`).
pub fn sentinel_failover(
    strategy: StrategyKind,
    clients: u32,
    lead_in: Duration,
    t: Timing,
) -> (Vec<FaultStep>, EpisodeShape) {
    let mut kill = step(FaultKind::Failover, Target::Primary, AIM_GAP, None);
    kill.method = Some(FailoverMethod::KillPrimary);
    let episode = EpisodeShape {
        steps: vec![stretch(t, FAILOVER_STRETCH), kill],
        heal: AIM_GAP + FAILOVER_ALLOWANCE,
        length: t.hold + FAILOVER_STRETCH + Duration::from_millis(500),
        exposure: Exposure::LiveLease,
    };
    let run = lead_in + episode.length;
    // The clients join half-way through the lead-in: a heal is run only between injects, and
    // the holder step at `lead_in` waits (up to 5 s) for a holder, so they must be back first.
    let absent = step(
        FaultKind::ClientAbsent,
        Target::Clients((0..clients).collect()),
        Duration::ZERO,
        Some(lead_in / 2),
    );
    let lagging = if strategy.needs_replicas() {
        Target::Nodes(vec!["n3".into()])
    } else {
        Target::Primary
    };
    let mut lag = step(
        FaultKind::Latency,
        lagging,
        Duration::ZERO,
        Some(run - Duration::from_millis(100)),
    );
    lag.link = Some(Link::Replication);
    lag.latency = Some(FAILOVER_LAG);
    (vec![absent, lag], episode)
}

/// Whether a crashed holder of `strategy` leaves its key without expiry for good (`no-ttl`;
/// `setnx-expire`, whose crash point is between `SETNX` and `PEXPIRE`): the resource is stuck
/// after the first crash, so a `client-crash` trial of it has one episode (a second could find
/// no holder to aim at).
pub fn crash_leaves_key_forever(strategy: StrategyKind) -> bool {
    strategy.has_mid_acquire_crash_point()
        || (!strategy.has_ttl() && strategy.service() == LockService::Redis)
}

/// A whole trial of one cell: a lead-in (baseline, one TTL) and its episodes back to back.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialShape {
    /// Where it runs.
    pub topology: TopologyKind,
    /// Clients in the run (the workload's, plus the replacements of crashed holders).
    pub clients: u32,
    /// The lease TTL of the cell.
    pub ttl: Duration,
    /// Whether the watchdog renews leases.
    pub watchdog: bool,
    /// Every nemesis step, offsets from the run's start.
    pub steps: Vec<FaultStep>,
    /// The planned episodes (offsets on the run clock).
    pub episodes: Vec<super::episode::EpisodeSpec>,
    /// Run length: lead-in + every episode.
    pub duration: Duration,
}

/// What a trial is built from.
#[derive(Debug, Clone, Copy)]
pub struct TrialInput {
    /// The cell's strategy.
    pub strategy: StrategyKind,
    /// Where the cell runs ([`FaultClass::topology`] of its row).
    pub topology: TopologyKind,
    /// `cluster-node-timeout` of a cluster cell.
    pub cluster_node_timeout: Duration,
    /// The workload's acquire timeout.
    pub acquire_timeout: Duration,
    /// The cell's fault class.
    pub class: FaultClass,
    /// The workload's clients.
    pub clients: u32,
    /// The workload's longest hold.
    pub hold: Duration,
    /// The workload's TTL.
    pub ttl: Duration,
    /// Episodes per trial (a Sentinel failover or a stuck-for-good crash has one).
    pub episodes: u32,
}

/// Lays out one trial: lead-in, then `input.episodes` episodes back to back. In a
/// `client-crash` trial every crashed holder is replaced: client `clients + k` stays absent
/// until a quarter TTL before episode `k + 2` (after the `k + 1`-th crash), so every episode
/// still finds `clients` clients contending (a crashed client never comes back).
pub fn trial(input: TrialInput) -> TrialShape {
    let topology = input.topology;
    let sentinel_failover_cell =
        input.class == FaultClass::Failover && topology == TopologyKind::Sentinel;
    let cluster_failover_cell =
        topology == TopologyKind::Cluster && cluster_shape::is_cluster_failover(input.class);
    let nt = input.cluster_node_timeout;
    let ttl = if sentinel_failover_cell {
        FAILOVER_TTL.max(lease_ttl(topology, input.ttl))
    } else if cluster_failover_cell {
        cluster_shape::lease_ttl(input.class, nt, input.hold).max(input.ttl)
    } else {
        lease_ttl(topology, input.ttl)
    };
    let t = Timing {
        ttl,
        hold: input.hold,
    };
    let lead_in = lease_ttl(topology, input.ttl);
    let mut steps = Vec::new();
    let shapes: Vec<EpisodeShape> = if sentinel_failover_cell {
        let (trial_steps, e) = sentinel_failover(input.strategy, input.clients, lead_in, t);
        steps.extend(trial_steps);
        vec![e]
    } else if cluster_failover_cell {
        (1..=input.episodes.max(1))
            .map(|_| {
                let who = cluster_shape::Contenders {
                    clients: input.clients,
                    acquire_timeout: input.acquire_timeout,
                };
                cluster_shape::episode(input.class, input.strategy, nt, t, who)
            })
            .collect()
    } else {
        (1..=input.episodes.max(1))
            .map(|i| episode(input.class, topology, t, i))
            .collect()
    };
    let mut shapes = shapes;
    if input.class == FaultClass::ClientCrash && crash_leaves_key_forever(input.strategy) {
        // Its one crash lands at the holder's next acquire (setnx-expire; that took up to
        // 2.6 s under contention, measured) and the checker calls a resource stuck after
        // 2 TTL without a holder: give it 8 TTL.
        for s in &mut shapes {
            s.length = s.length.max(ttl * 8);
        }
    }
    let mut episodes = Vec::new();
    let mut start = lead_in;
    for (i, shape) in shapes.iter().enumerate() {
        for s in &shape.steps {
            let mut s = s.clone();
            s.at += start;
            steps.push(s);
        }
        let end = start + shape.length;
        episodes.push(super::episode::EpisodeSpec {
            index: i as u32 + 1,
            start,
            heal: start + shape.heal,
            end,
            exposure: shape.exposure,
        });
        start = end;
    }
    let mut clients = input.clients;
    if input.class == FaultClass::ClientCrash {
        for spec in episodes.iter().skip(1) {
            // Back a quarter TTL before the episode (after the previous crash, half a TTL or
            // more before): heals run only between injects, so a heal due with the next
            // holder step would wait out that step's holder wait.
            steps.push(step(
                FaultKind::ClientAbsent,
                Target::Clients(vec![clients]),
                Duration::ZERO,
                Some(spec.start - ttl / 4),
            ));
            clients += 1;
        }
    }
    steps.sort_by_key(|s| s.at);
    TrialShape {
        topology,
        clients,
        ttl,
        watchdog: input.class.watchdog(),
        steps,
        episodes,
        duration: start,
    }
}
