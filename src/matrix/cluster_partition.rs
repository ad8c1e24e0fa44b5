//! The episode shape of a Redis Cluster row's `cluster-minority-partition` column: claim
//! 20g as aimed episodes. The primary of the lock's shard is cut off the cluster bus and off
//! its replica for longer than the node timeout, with the holder on its side (it keeps
//! reaching that primary and nothing else) and every other client cut off it, so the majority
//! promotes the replica and a second holder can get in there.
//!
//! One episode, times from its start, `nt` the node timeout (see [`super::cluster_shape`] for
//! [`quiet`], [`stretch`] and [`gap`]):
//!
//! 1. unless the strategy waits for a replica: every client stays away from 0 to `lead`
//!    ([`quiet`]: no lock key is live), and 50 ms before `lead` the primary's replication
//!    is cut (`partition`, `link = "replication"`), so its replica never gets the holder's
//!    key (nor, for `single-fenced`, its fencing counter's `INCR`);
//! 2. at `lead`: the first client in holds the lock on the primary, its section stretched;
//! 3. 1 ms later: the bus between that primary and the five other nodes cut both ways
//!    (`link = "bus"`, `with_clients = "holder"`: the holder stays on the primary's side, the
//!    other clients are cut off the primary on their own proxies). A `single-wait` row has its
//!    replication cut here too, after its `WAIT` had the holder's key acknowledged;
//! 4. both cuts heal as the stretch ends; the old primary learns from the bus that it was
//!    replaced, turns replica of the promoted node and resyncs in the recovery gap. The next
//!    episode aims at the shard's primary as it is then (`target = "primary"` is resolved
//!    when each step starts).

use std::time::Duration;

use super::cluster_shape::{away, gap, quiet, stretch, Contenders, LAG_AHEAD};
use super::episode::Exposure;
use super::fault::FaultClass;
use super::shape::{self, EpisodeShape, Timing, AIM_GAP};
use crate::nemesis::{ClientSide, FaultKind, Link, Target};
use crate::strategy::StrategyKind;

const CLASS: FaultClass = FaultClass::ClusterMinorityPartition;

/// Whether the replication is cut before the holder's acquire (every strategy that does not
/// wait for a replica): see the module docs.
pub fn cuts_replication_first(strategy: StrategyKind) -> bool {
    !strategy.needs_replicas()
}

/// One `cluster-minority-partition` episode for `strategy` on a cluster of node timeout
/// `nt`; `t.ttl` is [`super::cluster_shape::lease_ttl`].
pub fn episode(strategy: StrategyKind, nt: Duration, t: Timing, who: Contenders) -> EpisodeShape {
    let first = cuts_replication_first(strategy);
    let lead = if first {
        quiet(who.acquire_timeout, t.hold)
    } else {
        Duration::ZERO
    };
    let s = stretch(CLASS, nt);
    let cut_at = lead + AIM_GAP;
    let until = cut_at + s;
    let mut steps = Vec::new();
    if first {
        steps.push(away(who, lead));
    }
    let repl_at = if first { lead - LAG_AHEAD } else { cut_at };
    let mut repl = shape::step(
        FaultKind::Partition,
        Target::Primary,
        repl_at,
        Some(until - repl_at),
    );
    repl.link = Some(Link::Replication);
    let mut hold = shape::stretch(t, s);
    hold.at = lead;
    let mut bus = shape::step(FaultKind::Partition, Target::Primary, cut_at, Some(s));
    bus.link = Some(Link::Bus);
    bus.with_clients = Some(ClientSide::Holder);
    if first {
        steps.extend([repl, hold, bus]);
    } else {
        steps.extend([hold, bus, repl]);
    }
    EpisodeShape {
        steps,
        heal: until,
        length: t.hold + until + gap(CLASS),
        exposure: Exposure::Holder,
    }
}

/// What one episode does, in words (the part [`super::cluster_shape::describe`] frames).
pub fn describe(nt: Duration, acquire_timeout: Duration, hold: Duration) -> String {
    let ms = |d: Duration| format!("{} ms", d.as_millis());
    format!(
        "every client stays away {} (no lock key is live) and from 50 ms before they return the primary of the lock's \
         shard is cut off its replica (replication link; single-wait: no wait before, its replication is cut with the \
         bus, after its WAIT was answered); the first client in holds the lock there, its section is stretched {}, and \
         1 ms later the cluster bus between that primary and the other five nodes is cut both ways for {} (longer than \
         the node timeout; nft drops, needs root) with the holder on the primary's side and every other client cut \
         off it: the majority promotes the replica, which never had the holder's key (single-wait: it had), and the \
         others can take the lock there",
        ms(quiet(acquire_timeout, hold)),
        ms(stretch(CLASS, nt)),
        ms(stretch(CLASS, nt)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::cluster_shape::{lease_ttl, DEFAULT_NODE_TIMEOUT};

    const WHO: Contenders = Contenders {
        clients: 4,
        acquire_timeout: Duration::from_secs(1),
    };

    fn timing() -> Timing {
        let hold = Duration::from_millis(50);
        Timing {
            ttl: lease_ttl(CLASS, DEFAULT_NODE_TIMEOUT, hold),
            hold,
        }
    }

    #[test]
    fn the_replica_is_cut_off_keyless_then_the_bus_with_the_holder_on_the_primarys_side() {
        let nt = DEFAULT_NODE_TIMEOUT;
        let t = timing();
        assert_eq!(t.ttl, Duration::from_millis(6500));
        let e = episode(StrategyKind::Single, nt, t, WHO);
        let kinds: Vec<FaultKind> = e.steps.iter().map(|s| s.fault).collect();
        assert_eq!(
            kinds,
            [
                FaultKind::ClientAbsent,
                FaultKind::Partition,
                FaultKind::SlowWork,
                FaultKind::Partition
            ]
        );
        let (away, repl, hold, bus) = (&e.steps[0], &e.steps[1], &e.steps[2], &e.steps[3]);
        let back = away.at + away.duration.unwrap();
        assert_eq!(back, Duration::from_millis(1100));
        // The replication is cut before anyone can take the lock: the replica stays keyless.
        assert_eq!(repl.link, Some(Link::Replication));
        assert_eq!(repl.target, Target::Primary);
        assert_eq!(repl.at + LAG_AHEAD, back);
        assert_eq!((hold.at, hold.target.clone()), (back, Target::Holder));
        // The bus cut follows the holder in, keeps it with the primary, outlasts the node
        // timeout by far (promotion measured 2.1-2.7 s after the cut at 1 s) and heals with
        // the replication.
        assert_eq!(bus.link, Some(Link::Bus));
        assert_eq!(bus.target, Target::Primary);
        assert_eq!(bus.with_clients, Some(ClientSide::Holder));
        assert!(bus.aims_at_holder() && bus.cuts_clients());
        assert_eq!(bus.at, hold.at + AIM_GAP);
        assert!(bus.duration.unwrap() >= nt * 2 + Duration::from_secs(2));
        let healed = |s: &crate::nemesis::FaultStep| s.at + s.duration.unwrap();
        assert_eq!(healed(bus), e.heal);
        assert_eq!(healed(repl), e.heal);
        // The holder is inside while the cut lasts, and inside its lease.
        assert_eq!(hold.extra, bus.duration);
        assert!((t.hold + hold.extra.unwrap()) * 5 <= t.ttl * 4);
        assert_eq!(e.length, t.hold + e.heal + Duration::from_secs(2));
        assert_eq!(e.exposure, Exposure::Holder);
    }

    #[test]
    fn single_wait_has_its_key_acknowledged_before_the_replication_is_cut() {
        let e = episode(
            StrategyKind::SingleWait,
            DEFAULT_NODE_TIMEOUT,
            timing(),
            WHO,
        );
        let kinds: Vec<(FaultKind, Option<Link>)> =
            e.steps.iter().map(|s| (s.fault, s.link)).collect();
        assert_eq!(
            kinds,
            [
                (FaultKind::SlowWork, None),
                (FaultKind::Partition, Some(Link::Bus)),
                (FaultKind::Partition, Some(Link::Replication)),
            ]
        );
        assert_eq!(e.steps[0].at, Duration::ZERO);
        assert!(e.steps[1..].iter().all(|s| s.at == AIM_GAP));
        assert_eq!(e.steps[2].at + e.steps[2].duration.unwrap(), e.heal);
    }
}
