//! The sentinel topology on real processes: replication through proxies, failover (kill and
//! `SENTINEL FAILOVER`) followed by a `single` LockClient, replication partitions.

use std::time::{Duration, Instant};

use lockbench::nemesis::{
    ClientControls, FailoverMethod, FaultKind, FaultStep, Link, Nemesis, PartitionMode, Target,
};
use lockbench::node::ConnectOptions;
use lockbench::strategy::{LockClient, StrategyKind, StrategyOptions};
use lockbench::topology::sentinel::{info_field, info_replication};
use lockbench::topology::{LocalTopologyOptions, ProxiedTopology, ProxyOptions, TopologyKind};

fn step(fault: FaultKind, target: &str) -> FaultStep {
    FaultStep::new(fault, target.parse::<Target>().unwrap())
}

fn opts() -> ConnectOptions {
    ConnectOptions {
        connect_timeout: Duration::from_millis(500),
        response_timeout: Duration::from_millis(500),
    }
}

async fn sentinel_rig() -> (Nemesis, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let proxied = ProxiedTopology::start(
        TopologyKind::Sentinel,
        &LocalTopologyOptions::new(dir.path()),
        &ProxyOptions::default(),
    )
    .await
    .expect("sentinel topology starts");
    (Nemesis::new(proxied), dir)
}

async fn finish(mut nemesis: Nemesis) {
    nemesis.heal_all(|_| {}).await.unwrap();
    let proxied = nemesis.into_proxied();
    let mut pids: Vec<u32> = proxied
        .topology()
        .local_nodes()
        .iter()
        .filter_map(|n| n.pid())
        .collect();
    assert_eq!(pids.len(), 3);
    let sentinels = proxied.topology().sentinel_endpoints();
    assert_eq!(sentinels.len(), 3);
    let mut proxied = proxied;
    pids.extend(
        proxied
            .topology_mut()
            .sentinel_nodes_mut()
            .iter()
            .filter_map(|n| n.pid()),
    );
    proxied.shutdown().await;
    for pid in pids {
        // SAFETY: kill(pid, 0) only probes.
        assert!(
            unsafe { libc::kill(pid as libc::pid_t, 0) } != 0,
            "{pid} left running"
        );
    }
}

/// Acquires with a `single` client until it works (bounded), returns the lock key's node.
async fn acquire_somewhere(client: &LockClient, resource: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        match client.acquire(resource).await {
            Ok(_) => return,
            Err(e) => assert!(
                Instant::now() < deadline,
                "no acquire within {within:?}: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn exists_on(nemesis: &Nemesis, node: &str, key: &str) -> bool {
    let e = nemesis.proxied().direct_endpoint(node).unwrap().clone();
    let mut c = e.connect(&opts()).await.unwrap();
    let n: i64 = redis::cmd("EXISTS")
        .arg(key)
        .query_async(&mut c)
        .await
        .unwrap();
    n == 1
}

async fn failover_is_followed(method: FailoverMethod) {
    let (mut nemesis, _dir) = sentinel_rig().await;
    assert_eq!(nemesis.proxied().primary().await.unwrap(), "n1");
    // Replicas replicate through their n2-repl / n3-repl proxies.
    let n2 = nemesis.proxied().direct_endpoint("n2").unwrap().clone();
    let info = info_replication(&n2, &opts()).await.unwrap();
    let repl = &nemesis.proxied().replication_links()[0];
    assert_eq!(repl.proxy, "n2-repl");
    assert_eq!(
        info_field(&info, "master_port"),
        Some(repl.listen.rsplit_once(':').unwrap().1)
    );
    let endpoints = nemesis.proxied().endpoints();
    assert_eq!(endpoints.len(), 1);
    let mut o = StrategyOptions::new(StrategyKind::Single, Duration::from_secs(5));
    o.node_timeout = Duration::from_millis(500);
    let client = LockClient::connect(&endpoints, o, &opts()).await.unwrap();
    let lease = client.acquire("before").await.unwrap();
    assert!(exists_on(&nemesis, "n1", "lockbench:lock:before").await);
    client.release(&lease).await.unwrap();

    let mut s = step(FaultKind::Failover, "primary");
    s.method = Some(method);
    let rec = nemesis
        .inject(&s, &ClientControls::new(0))
        .await
        .expect("failover");
    assert_eq!(rec.targets, vec!["n1"]);
    let new = nemesis.proxied().primary().await.unwrap();
    assert_ne!(new, "n1");
    assert!(
        rec.detail.contains(&format!("n1 -> {new}")),
        "{}",
        rec.detail
    );

    // The new primary accepts writes.
    let e = nemesis.proxied().direct_endpoint(&new).unwrap().clone();
    let mut c = e.connect(&opts()).await.unwrap();
    let _: () = redis::cmd("SET")
        .arg("lockbench:after")
        .arg("1")
        .query_async(&mut c)
        .await
        .unwrap();
    // The client follows: its next lock lands on the new primary (bounded).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut i = 0;
    loop {
        i += 1;
        let resource = format!("after{i}");
        acquire_somewhere(&client, &resource, Duration::from_secs(15)).await;
        if exists_on(&nemesis, &new, &format!("lockbench:lock:{resource}")).await {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "client still locks on the old primary"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    finish(nemesis).await;
}

#[tokio::test]
async fn kill_primary_failover_is_followed_by_a_single_client() {
    failover_is_followed(FailoverMethod::KillPrimary).await;
}

#[tokio::test]
async fn sentinel_failover_is_followed_by_a_single_client() {
    failover_is_followed(FailoverMethod::Sentinel).await;
}

async fn link_status(nemesis: &Nemesis, node: &str) -> String {
    let e = nemesis.proxied().direct_endpoint(node).unwrap().clone();
    let info = info_replication(&e, &opts()).await.unwrap();
    info_field(&info, "master_link_status")
        .unwrap_or("")
        .to_string()
}

async fn wait_link(nemesis: &Nemesis, node: &str, want: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        if link_status(nemesis, node).await == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{node} link not {want} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn replication_partition_cuts_the_replica_and_heal_restores_it() {
    let (mut nemesis, _dir) = sentinel_rig().await;
    let controls = ClientControls::new(0);
    let mut s = step(FaultKind::Partition, "n2");
    s.link = Some(Link::Replication);
    s.mode = Some(PartitionMode::Refuse);
    let rec = nemesis.inject(&s, &controls).await.unwrap();
    assert_eq!(rec.targets, vec!["n2-repl"]);
    wait_link(&nemesis, "n2", "down", Duration::from_secs(5)).await;
    assert_eq!(link_status(&nemesis, "n3").await, "up", "only n2 is cut");
    nemesis.heal(rec.id).await.unwrap();
    wait_link(&nemesis, "n2", "up", Duration::from_secs(10)).await;

    // Lag: with 500 ms latency on the replication links a fresh write is not yet on n3.
    let mut lag = step(FaultKind::Latency, "primary");
    lag.link = Some(Link::Replication);
    lag.latency = Some(Duration::from_millis(500));
    let rec = nemesis.inject(&lag, &controls).await.unwrap();
    assert_eq!(rec.targets, vec!["n2-repl", "n3-repl"]);
    let n1 = nemesis.proxied().direct_endpoint("n1").unwrap().clone();
    let mut c = n1.connect(&opts()).await.unwrap();
    let _: () = redis::cmd("SET")
        .arg("lockbench:lag")
        .arg("1")
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(
        !exists_on(&nemesis, "n3", "lockbench:lag").await,
        "replicated without lag"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !exists_on(&nemesis, "n3", "lockbench:lag").await {
        assert!(Instant::now() < deadline, "never replicated");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    nemesis.heal(rec.id).await.unwrap();
    finish(nemesis).await;
}
