//! The words for one episode of a fault class on a topology, as the matrix report and every
//! trial's scenario give them: what the episode does, with targets and timing, and how many
//! episodes a trial has. The facts come from the service's registration ([`super::service`]);
//! a service words its own faults where they read differently on it (its `describe` and
//! `failover`), and the rest are worded here, by fault family as in `nemesis/`.

use super::cluster_shape;
use super::fault::FaultClass;
use super::plan::MatrixWorkload;
use super::service::{self, ServiceShape, Words};
use super::shape;
use crate::topology::TopologyKind;

/// What one episode of `class` does on `topology` under `w`, and how many episodes a trial has
/// (see [`FaultClass::describe`]).
pub fn episode(class: FaultClass, topology: TopologyKind, w: &MatrixWorkload) -> String {
    // A cluster's own columns are trials of their own, worded with their shapes.
    if topology == TopologyKind::Cluster {
        if let Some(what) = cluster_shape::describe(class, w) {
            return what;
        }
    }
    let service = service::of_topology(topology);
    let ttl = shape::lease_ttl(topology, w.ttl);
    let words = Words {
        ttl,
        aimed: format!(
            "as soon as a client holds the lock, its section is stretched {} (inside its lease, no renewal) and 1 ms later",
            Words::ms(ttl * 3 / 5)
        ),
        topology: service::topology(topology),
        workload: w,
    };
    let what = match class {
        FaultClass::Failover => (service.failover)(topology, &words),
        _ => (service.describe)(class, topology, &words)
            .unwrap_or_else(|| common(class, &service, &words)),
    };
    format!(
        "{what}; {}, after a lead-in of {}",
        per_trial(class, topology, &service, w),
        Words::ms(ttl)
    )
}

fn common(class: FaultClass, service: &ServiceShape, w: &Words) -> String {
    match class {
        FaultClass::None => format!(
            "no fault: the baseline, cut into periods of {}",
            w.part(1, 2)
        ),
        FaultClass::Latency | FaultClass::PartitionMinority | FaultClass::PartitionHolder => {
            network(class, w)
        }
        FaultClass::CrashRestartEmpty | FaultClass::NodePause | FaultClass::ClockJump => {
            process(class, service, w)
        }
        FaultClass::ClientPause
        | FaultClass::ClientCrash
        | FaultClass::SessionLoss
        | FaultClass::SlowWork => client(class, service, w),
        FaultClass::Failover
        | FaultClass::ClusterFailover
        | FaultClass::ClusterFailoverForce
        | FaultClass::ClusterFailoverTakeover
        | FaultClass::ClusterPause
        | FaultClass::ClusterMinorityPartition => {
            "a Redis Cluster fault: only the cluster rows run it".into()
        }
    }
}

/// `latency`, `partition-minority`, `partition-holder`.
fn network(class: FaultClass, w: &Words) -> String {
    let aimed = &w.aimed;
    let holder_stretch = Words::ms(w.ttl * 6 / 5 + w.ttl * 3 / 2);
    match (class, w.topology.minority, w.topology.shared_proxies) {
        (FaultClass::Latency, ..) => format!(
            "latency on every node's proxy for {}, alternating {} ± {} (below the node timeout) and {} (near the TTL {}); {} apart",
            w.part(1, 2), w.part(1, 20), w.part(1, 40), w.part(4, 5), Words::ms(w.ttl), w.part(1, 1)
        ),
        (FaultClass::PartitionMinority, Some(minority), _) => format!(
            "{aimed} a black hole between the clients and {minority} for {} (longer than the TTL)",
            w.part(5, 4)
        ),
        (FaultClass::PartitionMinority, None, _) => format!(
            "one node has no minority to lose: {aimed} a black hole to n1 for {} (shorter than the TTL)",
            w.part(1, 2)
        ),
        (_, _, Some(announcer)) => format!(
            "as soon as a client holds the lock, its section is stretched {holder_stretch} with the watchdog renewing, and 1 ms later every \
             client (the holder among them: {announcer} announces the shared proxies, so a client cannot be cut alone here) is cut \
             off from every node for {} (black hole, longer than the TTL): its renewals fail and its lease runs out while it works",
            w.part(6, 5)
        ),
        (_, _, None) => format!(
            "as soon as a client holds the lock, its section is stretched {holder_stretch} with the watchdog renewing, and 1 ms later that client \
             alone is cut off from every node for {} (black hole on its own proxies; the other clients keep their links, longer \
             than the TTL): its renewals fail and its lease runs out while it works",
            w.part(6, 5)
        ),
    }
}

/// `crash-restart-empty`, `node-pause`, `clock-jump`.
fn process(class: FaultClass, service: &ServiceShape, w: &Words) -> String {
    let aimed = &w.aimed;
    let lock_nodes = w.topology.lock_nodes_words;
    match (class, service.clock_jump_void) {
        (FaultClass::CrashRestartEmpty, _) => format!(
            "{aimed} kill -9 of {lock_nodes}, restarted at once{}",
            service.restarted
        ),
        (FaultClass::NodePause, _) => format!(
            "{aimed} SIGSTOP of {lock_nodes} for {} (longer than the TTL), then SIGCONT",
            w.part(6, 5)
        ),
        (_, Some(why)) => format!(
            "no fault injected: a clock jump has nothing to act on here ({why}), so these episodes are baseline periods of {}",
            w.part(1, 2)
        ),
        (_, None) => format!(
            "{aimed} the clock of {lock_nodes} jumps forward {} (every key's TTL there shortened by that)",
            Words::ms(w.ttl * 2)
        ),
    }
}

/// `client-pause`, `client-crash`, `session-loss`, `slow-work`.
fn client(class: FaultClass, service: &ServiceShape, w: &Words) -> String {
    match class {
        FaultClass::ClientPause => format!(
            "the client holding the lock stalls {} (longer than the TTL; renewal frozen)",
            w.part(3, 2)
        ),
        FaultClass::ClientCrash => format!(
            "the client holding the lock dies inside its section (no release, no renewal{}); a fresh client joins at the next \
             episode, so {} clients keep contending",
            if service.mid_acquire_crash {
                "; setnx-expire dies inside its next acquire, between SETNX and PEXPIRE"
            } else {
                ""
            },
            w.workload.clients
        ),
        FaultClass::SessionLoss => format!(
            "the client holding the lock stalls {} (inside its lease) and {} later every connection to {} is reset for {} \
             (proxy refuses); the lease lives on the server, not in the connection",
            w.part(2, 5), w.part(1, 10), w.topology.session_nodes, w.part(1, 5)
        ),
        _ => format!(
            "the section of the client holding the lock takes {} longer (above the TTL); the watchdog renews every TTL/3",
            w.part(5, 4)
        ),
    }
}

/// How many episodes a trial has, in words.
fn per_trial(
    class: FaultClass,
    topology: TopologyKind,
    service: &ServiceShape,
    w: &MatrixWorkload,
) -> String {
    if class == FaultClass::Failover && topology == TopologyKind::Sentinel {
        "one episode per trial (Sentinel fails a group over automatically once per 2 × failover-timeout)".to_string()
    } else if class == FaultClass::ClientCrash && service.mid_acquire_crash {
        format!(
            "{} episodes per trial (one for no-ttl and setnx-expire, whose first crash leaves the resource stuck)",
            w.episodes_per_trial(shape::exposure(class, topology))
        )
    } else {
        format!(
            "{} episodes per trial",
            w.episodes_per_trial(shape::exposure(class, topology))
        )
    }
}
