//! Episode shapes of a Redis Cluster row's failover columns: `failover` (the primary of the
//! lock's shard killed, as in claim 20a), `cluster-failover`, `cluster-failover-force`,
//! `cluster-failover-takeover` (`CLUSTER FAILOVER` in its three modes, as in 20b–20d) and
//! `cluster-pause` (that primary SIGSTOPped past the node timeout). The cluster's other
//! columns are the generic shapes of [`super::shape`], aimed at that primary.
//!
//! Unlike Sentinel's one failover per trial, a cluster fails a shard over as often as asked
//! (a primary votes for a replica of the same failed primary once per 2 × node timeout, and
//! every episode fails over the other node of the shard), so a trial cycles its episodes
//! like every other column. One episode, times from its start, `nt` the cluster node timeout,
//! `h` the longest hold:
//!
//! 1. unless the row's strategy waits for a replica or the class is `cluster-pause`: every
//!    client stays away from 0 to `lead` ([`quiet`]: every acquire under way has ended and
//!    its holder left, so no lock key is live), and 50 ms before `lead` the replication from
//!    the shard's primary starts lagging (a latency toxic on its `nX-repl` proxy). So the
//!    replica holds no lock key at all while the lag lasts: a key live when the lag began
//!    would be on a promoted replica and keep the others out (with its own TTL), hiding the
//!    loss — why claims 20a–20d keep their clients away until their lag is in place;
//! 2. at `lead`: the holder's section is stretched ([`stretch`]): the first client in once
//!    the clients return, so its key sits in the lag;
//! 3. 1 ms later the fault: the primary killed (restarted empty as soon as the cluster names
//!    its replica primary, so it rejoins as that one's replica), `CLUSTER FAILOVER
//!    [FORCE|TAKEOVER]` sent to the replica (the nemesis waits until the cluster names
//!    another node for the slot), or the primary SIGSTOPped for [`pause`];
//! 4. the holder stays inside until the other clients have had the promoted replica for a
//!    second; the lag is healed when it leaves; then a recovery gap ([`gap`]) lets the old
//!    primary rejoin and resync before the next episode.
//!
//! A strategy that waits for a replica (`single-wait`) gets no lag: on a shard with one
//! replica a lagging link acknowledges nothing, and no lease would be taken to aim at
//! (claim 20e is that case).

use std::time::Duration;

use super::cluster_partition;
use super::episode::Exposure;
use super::fault::FaultClass;
use super::plan::MatrixWorkload;
use super::shape::{self, EpisodeShape, Timing, AIM_GAP};
use crate::nemesis::{FailoverMethod, FaultKind, FaultStep, Link, Target};
use crate::strategy::StrategyKind;

/// The matrix's default `cluster-node-timeout` (`--cluster-node-timeout`): 1000 ms, as claims
/// 20b–20d (a shard fails over 2.4–2.5 s after its primary dies, measured).
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(1000);

/// Replication lag of the `CLUSTER FAILOVER` columns: longer than the forced (114–211 ms
/// measured) and takeover (6–98 ms) failovers take from the request, inside Redis's 5 s
/// manual-failover timeout that the default mode's catch-up must meet.
pub const MANUAL_LAG: Duration = Duration::from_secs(1);

/// Whether `class` is one of the shapes here (on a cluster row).
pub fn is_cluster_failover(class: FaultClass) -> bool {
    matches!(class, FaultClass::Failover | FaultClass::ClusterPause) || class.cluster_only()
}

/// How long a `cluster-pause` keeps the primary stopped: 2 × `nt` + 2 s, so that the replica
/// is promoted while it is (node timeout, failure reports, election: 2.4–3.7 s measured at
/// 1–1.5 s node timeouts).
pub fn pause(nt: Duration) -> Duration {
    nt * 2 + Duration::from_secs(2)
}

/// How long the holder is kept inside past its hold: the killed primary's replica promoted
/// and the other clients on it for a second (kill: 2 × `nt` + 1.5 s; promoted 2.2 s after the
/// kill at a 1 s node timeout, measured); the pause and 0.5 s more,
/// so that the holder is inside when the old primary resumes; a minority partition: 3 s more
/// than 2 × `nt` (the replica promoted 2.1-2.7 s after the cut at a 1 s node timeout and a
/// majority client in on it up to 3.8 s after, measured in claim 20g); the manual modes: the
/// lag plus 1.5 s (the default mode's catch-up is the lag).
pub fn stretch(class: FaultClass, nt: Duration) -> Duration {
    match class {
        FaultClass::Failover => nt * 2 + Duration::from_millis(1500),
        FaultClass::ClusterPause => pause(nt) + Duration::from_millis(500),
        FaultClass::ClusterMinorityPartition => nt * 2 + Duration::from_secs(3),
        _ => MANUAL_LAG + Duration::from_millis(1500),
    }
}

/// The lease TTL of the cell: the stretched section (hold + [`stretch`]) stays inside 4/5 of
/// it, rounded up to 500 ms (kill at a 1 s node timeout: 4.5 s; manual: 3.5 s; pause: 6 s).
pub fn lease_ttl(class: FaultClass, nt: Duration, hold: Duration) -> Duration {
    let inside = (hold + stretch(class, nt)) * 5 / 4;
    let step = 500u128;
    Duration::from_millis(inside.as_millis().div_ceil(step) as u64 * step as u64)
}

/// Recovery gap after the holder leaves: a killed primary, restarted empty once its replica
/// was promoted (over a second before the holder leaves), has rejoined as a replica and
/// synced by then (1 s); a manual failover's old primary resyncs from its new primary
/// (1.5 s); a resumed or reconnected primary learns it was replaced and resyncs (2 s).
pub fn gap(class: FaultClass) -> Duration {
    match class {
        FaultClass::Failover => Duration::from_secs(1),
        FaultClass::ClusterPause | FaultClass::ClusterMinorityPartition => Duration::from_secs(2),
        _ => Duration::from_millis(1500),
    }
}

/// The replication lag of a lagged episode: the manual modes [`MANUAL_LAG`]; a kill longer
/// than the holder stays inside ([`stretch`] + 2 s), so the key never reaches the replica
/// before it is promoted.
pub fn lag_latency(class: FaultClass, nt: Duration) -> Duration {
    match class {
        FaultClass::Failover => stretch(class, nt) + Duration::from_secs(2),
        _ => MANUAL_LAG,
    }
}

/// Whether the episode lags the shard's replication (see the module docs).
pub fn lags(class: FaultClass, strategy: StrategyKind) -> bool {
    class != FaultClass::ClusterPause && !strategy.needs_replicas()
}

/// The `CLUSTER FAILOVER` method of a class.
fn method(class: FaultClass) -> FailoverMethod {
    match class {
        FaultClass::ClusterFailover => FailoverMethod::ClusterFailover,
        FaultClass::ClusterFailoverForce => FailoverMethod::ClusterFailoverForce,
        FaultClass::ClusterFailoverTakeover => FailoverMethod::ClusterFailoverTakeover,
        _ => FailoverMethod::KillPrimary,
    }
}

/// Who contends in a cluster episode and how long an acquire may take.
#[derive(Debug, Clone, Copy)]
pub struct Contenders {
    /// The trial's clients (ids `0..clients`).
    pub clients: u32,
    /// The workload's acquire timeout (retries included).
    pub acquire_timeout: Duration,
}

/// How long every client stays away before a lagged episode: every acquire under way ends
/// within the acquire timeout, and its holder leaves within one hold; 50 ms to spare.
pub fn quiet(acquire_timeout: Duration, hold: Duration) -> Duration {
    acquire_timeout + hold + Duration::from_millis(50)
}

/// The gate of a lagged episode: every client of `who` absent from its start until `lead`
/// ([`quiet`]).
pub fn away(who: Contenders, lead: Duration) -> FaultStep {
    shape::step(
        FaultKind::ClientAbsent,
        Target::Clients((0..who.clients).collect()),
        Duration::ZERO,
        Some(lead),
    )
}

/// How long before the clients return the lag is put in place.
pub const LAG_AHEAD: Duration = Duration::from_millis(50);

/// One episode of `class` ([`is_cluster_failover`]) for `strategy` on a cluster of node
/// timeout `nt`; `t.ttl` is [`lease_ttl`].
pub fn episode(
    class: FaultClass,
    strategy: StrategyKind,
    nt: Duration,
    t: Timing,
    who: Contenders,
) -> EpisodeShape {
    if class == FaultClass::ClusterMinorityPartition {
        return cluster_partition::episode(strategy, nt, t, who);
    }
    let lagged = lags(class, strategy);
    let lead = if lagged {
        quiet(who.acquire_timeout, t.hold)
    } else {
        Duration::ZERO
    };
    let s = stretch(class, nt);
    let until = lead + AIM_GAP + s;
    let mut steps = Vec::new();
    if lagged {
        steps.push(away(who, lead));
        let mut lag = shape::step(
            FaultKind::Latency,
            Target::Primary,
            lead - LAG_AHEAD,
            Some(until - (lead - LAG_AHEAD)),
        );
        lag.link = Some(Link::Replication);
        lag.latency = Some(lag_latency(class, nt));
        steps.push(lag);
    }
    let mut hold = shape::stretch(t, s);
    hold.at = lead;
    steps.push(hold);
    let mut fault = match class {
        FaultClass::ClusterPause => shape::step(
            FaultKind::PauseNode,
            Target::Primary,
            lead + AIM_GAP,
            Some(pause(nt)),
        ),
        // No `duration` for a kill: the nemesis restarts the old primary as soon as the
        // cluster names its replica primary; kept down longer, the next episode's kill could
        // find the new primary without a replica to promote.
        _ => shape::step(FaultKind::Failover, Target::Primary, lead + AIM_GAP, None),
    };
    if fault.fault == FaultKind::Failover {
        fault.method = Some(method(class));
    }
    let healed = lead + AIM_GAP + fault.duration.unwrap_or_default();
    steps.push(fault);
    EpisodeShape {
        steps,
        heal: if lagged { until } else { healed },
        length: t.hold + until + gap(class),
        exposure: Exposure::Holder,
    }
}

/// What one episode of `class` does on a cluster row under `w`, in words, or `None` for the
/// classes of [`super::shape`] (which [`FaultClass::describe`] words itself).
pub fn describe(class: FaultClass, w: &MatrixWorkload) -> Option<String> {
    if !is_cluster_failover(class) {
        return None;
    }
    let nt = w.cluster_node_timeout;
    let ms = |d: Duration| format!("{} ms", d.as_millis());
    let s = stretch(class, nt);
    let lag = |l: Duration| {
        format!(
            "every client stays away {} (until every acquire under way has ended and no lock key is live), and from 50 ms \
             before they return the replication from the primary of the lock's shard to its replica lags {} (single-wait: \
             no lag and no wait, its WAIT would never be answered through the shard's one replica); the first client in \
             holds the lock (its key sits in the lag), its section is stretched {} and 1 ms later",
            ms(quiet(w.acquire_timeout, w.hold.max())),
            ms(l),
            ms(s)
        )
    };
    let what = match class {
        FaultClass::Failover => format!(
            "{} that primary is killed; after the node timeout its replica is promoted (without the holder's key, unless \
             single-wait had it acknowledged); the killed node is restarted empty once the replica is promoted and \
             rejoins as its replica",
            lag(lag_latency(class, nt))
        ),
        FaultClass::ClusterFailover => format!(
            "{} CLUSTER FAILOVER (default mode) is sent to the replica: the primary stops its clients and the replica \
             catches up with its replication offset (the holder's key included) before it takes over",
            lag(MANUAL_LAG)
        ),
        FaultClass::ClusterFailoverForce => format!(
            "{} CLUSTER FAILOVER FORCE is sent to the replica: no catch-up, it takes over with the votes of the other \
             primaries and what it has replicated",
            lag(MANUAL_LAG)
        ),
        FaultClass::ClusterFailoverTakeover => format!(
            "{} CLUSTER FAILOVER TAKEOVER is sent to the replica: no catch-up, no election, it claims the slots with what \
             it has replicated",
            lag(MANUAL_LAG)
        ),
        FaultClass::ClusterMinorityPartition => {
            cluster_partition::describe(nt, w.acquire_timeout, w.hold.max())
        }
        _ => format!(
            "as soon as a client holds the lock its section is stretched {} and 1 ms later the primary of the lock's shard \
             is SIGSTOPped for {} (longer than the node timeout: its replica, which has the holder's key, is promoted \
             meanwhile), then SIGCONT: it serves as a stale primary until it learns it was replaced",
            ms(s),
            ms(pause(nt))
        ),
    };
    Some(format!(
        "Redis Cluster (3 shards, a primary and a replica each, cluster-node-timeout {}), TTL {} in this cell (a lease \
         shorter than the failover would run out anyway): {what}; the old primary rejoins as the replica in a recovery \
         gap of {}; {} episodes per trial, after a lead-in of {}",
        ms(nt),
        ms(lease_ttl(class, nt, w.hold.max())),
        ms(gap(class)),
        w.episodes_per_trial(Exposure::Holder),
        ms(w.ttl)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHO: Contenders = Contenders {
        clients: 4,
        acquire_timeout: Duration::from_secs(1),
    };

    fn timing(class: FaultClass) -> Timing {
        let hold = Duration::from_millis(50);
        Timing {
            ttl: lease_ttl(class, DEFAULT_NODE_TIMEOUT, hold),
            hold,
        }
    }

    #[test]
    fn a_shard_failover_episode_keeps_the_replica_keyless_then_aims_at_the_first_holder_in() {
        let nt = DEFAULT_NODE_TIMEOUT;
        let t = timing(FaultClass::Failover);
        assert_eq!(t.ttl, Duration::from_millis(4500));
        let e = episode(FaultClass::Failover, StrategyKind::Single, nt, t, WHO);
        let kinds: Vec<FaultKind> = e.steps.iter().map(|s| s.fault).collect();
        assert_eq!(
            kinds,
            [
                FaultKind::ClientAbsent,
                FaultKind::Latency,
                FaultKind::SlowWork,
                FaultKind::Failover
            ]
        );
        let (away, lag, hold, kill) = (&e.steps[0], &e.steps[1], &e.steps[2], &e.steps[3]);
        // Every client away for the acquire timeout and a hold: no key is live when the
        // lag begins, so the replica has none to be promoted with.
        assert_eq!(away.target, Target::Clients(vec![0, 1, 2, 3]));
        let back = away.at + away.duration.unwrap();
        assert_eq!(back, Duration::from_millis(1100));
        assert_eq!(
            (lag.link, lag.target.clone()),
            (Some(Link::Replication), Target::Primary)
        );
        assert_eq!(lag.at + LAG_AHEAD, back);
        // The first client in is the holder; the kill follows at once.
        assert_eq!((hold.at, hold.target.clone()), (back, Target::Holder));
        assert_eq!(kill.at, hold.at + AIM_GAP);
        assert_eq!(kill.method, Some(FailoverMethod::KillPrimary));
        // Restarted as soon as the replica is promoted (never before: it would come back an
        // empty primary, crash-restart-empty, not a failover).
        assert_eq!(kill.duration, None);
        // Nothing crosses the lag while the holder is inside.
        assert!(lag.latency.unwrap() > lag.duration.unwrap());
        assert_eq!(lag.latency, Some(Duration::from_millis(5500)));
        assert_eq!(lag.at + lag.duration.unwrap(), e.heal);
        assert_eq!(e.heal, back + AIM_GAP + Duration::from_millis(3500));
        // The stretch stays inside the lease.
        assert!((t.hold + hold.extra.unwrap()) * 5 <= t.ttl * 4);
        assert_eq!(e.length, t.hold + e.heal + Duration::from_secs(1));
        assert_eq!(e.exposure, Exposure::Holder);
    }

    #[test]
    fn the_manual_modes_differ_only_in_their_method_and_single_wait_gets_no_lag() {
        let nt = DEFAULT_NODE_TIMEOUT;
        let modes = [
            (FaultClass::ClusterFailover, FailoverMethod::ClusterFailover),
            (
                FaultClass::ClusterFailoverForce,
                FailoverMethod::ClusterFailoverForce,
            ),
            (
                FaultClass::ClusterFailoverTakeover,
                FailoverMethod::ClusterFailoverTakeover,
            ),
        ];
        for (class, m) in modes {
            let t = timing(class);
            assert_eq!(t.ttl, Duration::from_millis(3500), "{class}");
            let e = episode(class, StrategyKind::Single, nt, t, WHO);
            let lag = &e.steps[1];
            assert_eq!(lag.fault, FaultKind::Latency, "{class}");
            assert_eq!(
                lag.latency,
                Some(MANUAL_LAG),
                "{class}: the catch-up fits in 5 s"
            );
            // The holder stays inside well past the default mode's catch-up.
            assert!(e.steps[2].extra.unwrap() >= MANUAL_LAG + Duration::from_secs(1));
            assert_eq!(e.steps[3].method, Some(m));
            assert_eq!(e.steps[3].duration, None, "the old primary stays up");
            let wait = episode(class, StrategyKind::SingleWait, nt, t, WHO);
            let kinds: Vec<FaultKind> = wait.steps.iter().map(|s| s.fault).collect();
            assert_eq!(kinds, [FaultKind::SlowWork, FaultKind::Failover], "{class}");
            assert_eq!(wait.steps[0].at, Duration::ZERO);
            assert_eq!(wait.steps[1].at, AIM_GAP);
        }
    }

    #[test]
    fn a_cluster_pause_outlasts_the_node_timeout_and_the_holder_outlasts_the_pause() {
        for nt in [DEFAULT_NODE_TIMEOUT, Duration::from_millis(1500)] {
            let hold = Duration::from_millis(50);
            let t = Timing {
                ttl: lease_ttl(FaultClass::ClusterPause, nt, hold),
                hold,
            };
            let e = episode(FaultClass::ClusterPause, StrategyKind::Single, nt, t, WHO);
            assert_eq!(e.steps.len(), 2, "no lag: the replica has the holder's key");
            let p = &e.steps[1];
            assert_eq!(p.fault, FaultKind::PauseNode);
            assert_eq!(p.target, Target::Primary);
            assert!(p.duration.unwrap() >= nt * 2 + Duration::from_secs(2));
            assert!(e.steps[0].extra.unwrap() > p.duration.unwrap());
            assert!((hold + e.steps[0].extra.unwrap()) * 5 <= t.ttl * 4);
        }
    }

    #[test]
    fn descriptions_name_the_node_timeout_the_lag_and_the_mode() {
        let w = MatrixWorkload::quick();
        let d = describe(FaultClass::ClusterFailoverTakeover, &w).unwrap();
        assert!(
            d.contains("cluster-node-timeout 1000 ms")
                && d.contains("stays away 1100 ms")
                && d.contains("lags 1000 ms")
                && d.contains("TAKEOVER")
                && d.contains("TTL 3500 ms")
                && d.contains("11 episodes per trial"),
            "{d}"
        );
        let d = describe(FaultClass::Failover, &w).unwrap();
        assert!(d.contains("is killed") && d.contains("TTL 4500 ms"), "{d}");
        assert!(describe(FaultClass::NodePause, &w).is_none());
    }
}
