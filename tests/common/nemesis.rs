//! A local topology behind the embedded Toxiproxy with its Nemesis, torn down leaving no
//! process; fault steps; and what a test looks at on a proxied topology (keys on one node,
//! the replication link, where a Sentinel group's lock client locks).

use std::time::Duration;

use lockbench::nemesis::{
    ClientControls, FailoverMethod, FaultKind, FaultStep, Link, Nemesis, PartitionMode, Target,
};
use lockbench::node::{ConnectOptions, NodeEndpoint};
use lockbench::strategy::{LockClient, StrategyKind, StrategyOptions};
use lockbench::topology::sentinel::{info_field, info_replication};
use lockbench::topology::{
    LocalTopologyOptions, Persistence, ProxiedTopology, ProxyOptions, TopologyKind,
};

use super::process::assert_none_exist;
use super::wait::wait_for_async;

/// A fault step of `fault` on `target` (as a scenario file writes it: `n1`, `clients:0`, ...).
pub fn step(fault: FaultKind, target: &str) -> FaultStep {
    FaultStep::new(fault, target.parse::<Target>().unwrap())
}

/// Connection timeouts for looking at a node (500 ms each).
pub fn admin() -> ConnectOptions {
    ConnectOptions {
        connect_timeout: Duration::from_millis(500),
        response_timeout: Duration::from_millis(500),
    }
}

/// Starts a local topology of `kind` behind the embedded Toxiproxy (default proxy options)
/// in a temporary directory; the directory lives as long as the returned guard.
pub async fn start_proxied(
    kind: TopologyKind,
    persistence: Persistence,
) -> (ProxiedTopology, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let opts = LocalTopologyOptions {
        persistence,
        ..LocalTopologyOptions::new(dir.path())
    };
    let proxied = ProxiedTopology::start(kind, &opts, &ProxyOptions::default())
        .await
        .unwrap_or_else(|e| panic!("proxied {kind} topology starts: {e}"));
    (proxied, dir)
}

/// A proxied local topology and the Nemesis that owns it.
pub struct NemesisRig {
    /// The nemesis (its topology: `nemesis.proxied()`).
    pub nemesis: Nemesis,
    _dir: tempfile::TempDir,
}

impl NemesisRig {
    /// A topology of `kind` without persistence.
    pub async fn start(kind: TopologyKind) -> NemesisRig {
        Self::start_with(kind, Persistence::None).await
    }

    /// A topology of `kind` whose data nodes use `persistence`.
    pub async fn start_with(kind: TopologyKind, persistence: Persistence) -> NemesisRig {
        let (proxied, dir) = start_proxied(kind, persistence).await;
        NemesisRig {
            nemesis: Nemesis::new(proxied),
            _dir: dir,
        }
    }

    /// Heals every open fault and asserts that none is left open.
    pub async fn heal_all(&mut self) {
        self.nemesis.heal_all(|_| {}).await.unwrap();
        assert!(self.nemesis.open_faults().is_empty());
    }

    /// Pids of the running data nodes.
    pub fn node_pids(&self) -> Vec<u32> {
        self.nemesis
            .proxied()
            .topology()
            .local_nodes()
            .iter()
            .filter_map(|n| n.pid())
            .collect()
    }

    /// Heals, shuts the topology down and asserts that every process of it (data nodes and
    /// Sentinels) is gone.
    pub async fn finish(mut self) {
        self.heal_all().await;
        let mut pids = self.node_pids();
        assert!(!pids.is_empty());
        let mut proxied = self.nemesis.into_proxied();
        pids.extend(
            proxied
                .topology_mut()
                .sentinel_nodes_mut()
                .iter()
                .filter_map(|n| n.pid()),
        );
        proxied.shutdown().await;
        assert_none_exist(&pids);
    }
}

/// The endpoint of `node` past its proxy.
pub fn direct(nemesis: &Nemesis, node: &str) -> NodeEndpoint {
    nemesis
        .proxied()
        .direct_endpoint(node)
        .unwrap_or_else(|| panic!("no node {node}"))
        .clone()
}

/// Whether `key` is on `node` (asked past the proxy).
pub async fn exists_on(nemesis: &Nemesis, node: &str, key: &str) -> bool {
    let mut c = direct(nemesis, node).connect(&admin()).await.unwrap();
    let n: i64 = redis::cmd("EXISTS")
        .arg(key)
        .query_async(&mut c)
        .await
        .unwrap();
    n == 1
}

/// `master_link_status` of the replica `node` (`up` / `down`; empty when not a replica).
pub async fn link_status(nemesis: &Nemesis, node: &str) -> String {
    let info = info_replication(&direct(nemesis, node), &admin())
        .await
        .unwrap();
    info_field(&info, "master_link_status")
        .unwrap_or("")
        .to_string()
}

/// Polls `master_link_status` of `node` until it is `want`, at most `within`.
pub async fn wait_link(nemesis: &Nemesis, node: &str, want: &str, within: Duration) {
    wait_for_async(within, &format!("{node} link {want}"), || async move {
        (link_status(nemesis, node).await == want).then_some(())
    })
    .await;
}

/// Cuts the replication link of replica n2 (a `refuse` partition through `n2-repl`): asserts
/// that n2's link goes down within `down_within` while n3's stays up, then heals it and
/// asserts that n2's link is up again within `up_within` (Sentinel topologies).
pub async fn cut_and_heal_replication_of_n2(
    nemesis: &mut Nemesis,
    down_within: Duration,
    up_within: Duration,
) {
    let mut cut = step(FaultKind::Partition, "n2");
    cut.link = Some(Link::Replication);
    cut.mode = Some(PartitionMode::Refuse);
    let rec = nemesis.inject(&cut, &ClientControls::new(0)).await.unwrap();
    assert_eq!(rec.targets, vec!["n2-repl"]);
    wait_link(nemesis, "n2", "down", down_within).await;
    assert_eq!(link_status(nemesis, "n3").await, "up", "only n2 is cut");
    nemesis.heal(rec.id).await.unwrap();
    wait_link(nemesis, "n2", "up", up_within).await;
}

/// Asserts that replica n2 replicates through its `n2-repl` proxy (Sentinel topologies).
pub async fn assert_replicas_replicate_through_proxies(nemesis: &Nemesis) {
    let info = info_replication(&direct(nemesis, "n2"), &admin())
        .await
        .unwrap();
    let repl = &nemesis.proxied().replication_links()[0];
    assert_eq!(repl.proxy, "n2-repl");
    assert_eq!(
        info_field(&info, "master_port"),
        Some(repl.listen.rsplit_once(':').unwrap().1)
    );
}

/// A `single` client (5 s TTL, 500 ms per-node timeout) of the topology's endpoints; asserts
/// that its lock lands on `primary` and releases it.
pub async fn single_client_locking_on(nemesis: &Nemesis, primary: &str) -> LockClient {
    let mut o = StrategyOptions::new(StrategyKind::Single, Duration::from_secs(5));
    o.node_timeout = Duration::from_millis(500);
    let client = LockClient::connect(&nemesis.proxied().endpoints(), o, &admin())
        .await
        .unwrap();
    let lease = client.acquire("before").await.unwrap();
    assert!(exists_on(nemesis, primary, "lockbench:lock:before").await);
    client.release(&lease).await.unwrap();
    client
}

/// Fails the primary n1 over by `method` (`kill-primary`, `sentinel`); asserts that another
/// node is primary and the fault record says so; returns the new primary.
pub async fn fail_over_n1(nemesis: &mut Nemesis, method: FailoverMethod) -> String {
    let mut s = step(FaultKind::Failover, "primary");
    s.method = Some(method);
    let rec = nemesis
        .inject(&s, &ClientControls::new(0))
        .await
        .unwrap_or_else(|e| panic!("failover by {}: {e}", method.name()));
    assert_eq!(rec.targets, vec!["n1"]);
    let new = nemesis.proxied().primary().await.unwrap();
    assert_ne!(new, "n1");
    assert!(
        rec.detail.contains(&format!("n1 -> {new}")),
        "{}",
        rec.detail
    );
    new
}

/// Locks fresh resources with `client` until a lock lands on `node`, at most `within`
/// (every 200 ms). With `acquire_within`, each acquire is retried until it succeeds, at most
/// that long; without, a failed acquire counts as a miss.
pub async fn wait_until_locks_land_on(
    client: &LockClient,
    nemesis: &Nemesis,
    node: &str,
    within: Duration,
    acquire_within: Option<Duration>,
) {
    let deadline = tokio::time::Instant::now() + within;
    let mut i = 0;
    loop {
        i += 1;
        let resource = format!("after{i}");
        let acquired = match acquire_within {
            Some(bound) => {
                let resource = resource.as_str();
                wait_for_async(bound, &format!("an acquire of {resource}"), || async move {
                    client.acquire(resource).await.ok()
                })
                .await;
                true
            }
            None => client.acquire(&resource).await.is_ok(),
        };
        if acquired && exists_on(nemesis, node, &format!("lockbench:lock:{resource}")).await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the client did not lock on {node} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
