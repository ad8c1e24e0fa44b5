//! The cluster topology on real processes: 3 shards of a primary and a replica each, created
//! with `redis-cli --cluster create`, behind a client proxy and a replication proxy per node;
//! locks on every shard through the cluster client; a lock key and its fence counter on one
//! shard; a kill-primary failover followed by the client; a client-side partition of one node
//! that leaves the bus and replication alone; a two-way partition of the cluster bus (nft)
//! with a client on each side, its nft table gone with the topology and after SIGINT. Every
//! test ends with no redis-server left.

mod common;

use std::time::Duration;

use common::nemesis::{admin, direct, step, NemesisRig};
use common::wait::wait_for_async;
use lockbench::lease::Lease;
use lockbench::nemesis::{ClientControls, FailoverMethod, FaultKind, Link, Nemesis, PartitionMode};
use lockbench::node::ConnectOptions;
use lockbench::strategy::{LockClient, RetryPolicy, StrategyKind, StrategyOptions};
use lockbench::topology::cluster::{ask_cluster_nodes, resource_slot, SLOTS};
use lockbench::topology::{ShardLayout, TopologyKind};

/// Options of `kind` with hash-tagged keys (as a run on `cluster` sets them), no retry.
fn options(kind: StrategyKind) -> StrategyOptions {
    let mut o = StrategyOptions::new(kind, Duration::from_secs(5));
    o.retry = RetryPolicy::no_retry();
    o.node_timeout = Duration::from_millis(500);
    o.hash_tag = true;
    o
}

async fn client(nemesis: &Nemesis, kind: StrategyKind) -> LockClient {
    let endpoints = nemesis.proxied().endpoints();
    assert_eq!(endpoints.len(), 1, "one cluster endpoint");
    assert!(endpoints[0].cluster.is_some());
    LockClient::connect(&endpoints, options(kind), &ConnectOptions::default())
        .await
        .expect("cluster client connects")
}

/// The first lease `c` gets on r0 within `limit`, trying again until then.
async fn lock_r0_within(c: &LockClient, limit: Duration, what: &str) -> Lease {
    wait_for_async(limit, what, || async move { c.acquire("r0").await.ok() }).await
}

/// A resource name whose slot `shard` serves.
fn resource_on(shard: &ShardLayout) -> String {
    (0..10_000)
        .map(|i| format!("r{i}"))
        .find(|r| shard.owns(resource_slot(r)))
        .expect("some resource hashes to every shard")
}

/// GET `key` on `node` directly (a replica answers after READONLY).
async fn get_on(nemesis: &Nemesis, node: &str, key: &str) -> Option<String> {
    let mut conn = direct(nemesis, node)
        .connect_direct(&admin())
        .await
        .unwrap();
    redis::cmd("READONLY")
        .query_async::<()>(&mut conn)
        .await
        .unwrap();
    redis::cmd("GET")
        .arg(key)
        .query_async(&mut conn)
        .await
        .unwrap()
}

async fn layout(nemesis: &Nemesis) -> Vec<ShardLayout> {
    nemesis.proxied().topology().cluster_layout().await.unwrap()
}

/// r0's primary now and its shard's replica.
async fn primary_and_replica(nemesis: &Nemesis) -> (String, String) {
    let primary = nemesis.proxied().primary().await.unwrap();
    let replica = layout(nemesis)
        .await
        .into_iter()
        .find(|s| s.primary == primary)
        .map(|s| s.replicas[0].clone())
        .unwrap();
    (primary, replica)
}

#[tokio::test]
async fn cluster_comes_up_and_serves_a_lock_on_every_shard() {
    let rig = NemesisRig::start(TopologyKind::Cluster).await;
    let nemesis = &rig.nemesis;
    assert_eq!(rig.node_pids().len(), 6);
    let shards = layout(nemesis).await;
    assert_eq!(shards.len(), 3, "{shards:?}");
    let mut names: Vec<String> = shards
        .iter()
        .flat_map(|s| std::iter::once(s.primary.clone()).chain(s.replicas.clone()))
        .collect();
    names.sort();
    assert_eq!(names, ["n1", "n2", "n3", "n4", "n5", "n6"]);
    let covered: u32 = shards
        .iter()
        .flat_map(|s| &s.slots)
        .map(|&(a, b)| u32::from(b - a) + 1)
        .sum();
    assert_eq!(covered, u32::from(SLOTS));
    assert!(shards.iter().all(|s| s.replicas.len() == 1), "{shards:?}");

    let single = client(nemesis, StrategyKind::Single).await;
    for shard in &shards {
        let resource = resource_on(shard);
        let lease = single.acquire(&resource).await.expect("lock on its shard");
        let key = single.options().lock_key(&resource);
        assert_eq!(
            get_on(nemesis, &shard.primary, &key).await.as_deref(),
            Some(lease.owner.as_str()),
            "{key} on {}",
            shard.primary
        );
        let released = single.release(&lease).await.unwrap();
        assert_eq!(released.released_nodes, 1);
        assert_eq!(get_on(nemesis, &shard.primary, &key).await, None);
    }
    rig.finish().await;
}

#[tokio::test]
async fn lock_key_and_fence_counter_land_on_one_shard() {
    let rig = NemesisRig::start(TopologyKind::Cluster).await;
    let nemesis = &rig.nemesis;
    let shards = layout(nemesis).await;
    let fenced = client(nemesis, StrategyKind::SingleFenced).await;
    for shard in &shards {
        let resource = resource_on(shard);
        let first = fenced.acquire(&resource).await.expect("fenced lock");
        fenced.release(&first).await.unwrap();
        let second = fenced.acquire(&resource).await.expect("fenced lock again");
        assert_eq!(first.fencing_token, Some(1));
        assert_eq!(second.fencing_token, Some(2));
        let fence = fenced.options().fence_key(&resource);
        let lock = fenced.options().lock_key(&resource);
        // Both keys on the shard's primary (one script touched both: no CROSSSLOT).
        assert_eq!(
            get_on(nemesis, &shard.primary, &fence).await.as_deref(),
            Some("2")
        );
        assert_eq!(
            get_on(nemesis, &shard.primary, &lock).await.as_deref(),
            Some(second.owner.as_str())
        );
        fenced.release(&second).await.unwrap();
    }
    rig.finish().await;
}

#[tokio::test]
async fn kill_primary_failover_next_lock_is_served_by_the_promoted_replica() {
    let mut rig = NemesisRig::start(TopologyKind::Cluster).await;
    let nemesis = &mut rig.nemesis;
    let shards = layout(nemesis).await;
    let old = nemesis.proxied().primary().await.unwrap();
    let shard = shards
        .iter()
        .find(|s| s.primary == old)
        .expect("r0's shard");
    assert!(shard.owns(resource_slot("r0")));
    let replica = shard.replicas[0].clone();
    let single = client(nemesis, StrategyKind::Single).await;
    let before = single.acquire("r0").await.expect("lock before");
    single.release(&before).await.unwrap();

    let mut kill = step(FaultKind::Failover, "primary");
    kill.method = Some(FailoverMethod::KillPrimary);
    let rec = nemesis
        .inject(&kill, &ClientControls::new(0))
        .await
        .expect("failover");
    assert_eq!(rec.targets, vec![old.clone()]);
    assert_eq!(nemesis.proxied().primary().await.unwrap(), replica);

    // The client follows the promotion: a lock on r0 lands on the promoted replica.
    let nemesis_ref: &Nemesis = nemesis;
    let lease = lock_r0_within(
        &single,
        Duration::from_secs(15),
        "a lock on r0 after the failover",
    )
    .await;
    let key = single.options().lock_key("r0");
    assert_eq!(
        get_on(nemesis_ref, &replica, &key).await.as_deref(),
        Some(lease.owner.as_str())
    );
    single.release(&lease).await.unwrap();
    rig.finish().await;
}

#[tokio::test]
async fn client_partition_of_a_node_leaves_its_bus_and_replication_alone() {
    let mut rig = NemesisRig::start(TopologyKind::Cluster).await;
    let nemesis = &mut rig.nemesis;
    let (primary, replica) = primary_and_replica(nemesis).await;
    let single = client(nemesis, StrategyKind::Single).await;

    let mut cut = step(FaultKind::Partition, &primary);
    cut.mode = Some(PartitionMode::Refuse);
    let rec = nemesis.inject(&cut, &ClientControls::new(0)).await.unwrap();
    assert_eq!(rec.targets, vec![primary.clone()]);
    // Clients cannot lock on r0's shard …
    assert!(single.acquire("r0").await.is_err());
    // … while a write on the primary still reaches its replica.
    let mut conn = direct(nemesis, &primary)
        .connect_direct(&admin())
        .await
        .unwrap();
    redis::cmd("SET")
        .arg("lockbench:probe:{r0}")
        .arg("1")
        .query_async::<()>(&mut conn)
        .await
        .unwrap();
    let nemesis_ref: &Nemesis = nemesis;
    let replica_ref = &replica;
    wait_for_async(
        Duration::from_secs(5),
        "the replica to replicate",
        || async move {
            get_on(nemesis_ref, replica_ref, "lockbench:probe:{r0}")
                .await
                .map(|_| ())
        },
    )
    .await;
    // … and the bus is untouched: for twice the node timeout no node marks the primary
    // failing, and it keeps r0's slot.
    let timeout = nemesis
        .proxied()
        .topology()
        .cluster_settings()
        .unwrap()
        .node_timeout;
    let watched = std::time::Instant::now();
    while watched.elapsed() < timeout * 2 {
        for viewer in nemesis.proxied().node_names() {
            let Some(flags) = flags_seen_by(nemesis, &viewer).await else {
                continue; // no answer in time: nothing seen
            };
            assert!(
                !flags.iter().any(|(_, f)| failing(f)),
                "{viewer} sees a failing node while only clients are cut: {flags:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(nemesis.proxied().primary().await.unwrap(), primary);
    nemesis.heal(rec.id).await.unwrap();
    let lease = lock_r0_within(
        &single,
        Duration::from_secs(10),
        "a lock on r0 after the heal",
    )
    .await;
    single.release(&lease).await.unwrap();
    rig.finish().await;
}

#[test]
fn sigint_during_a_cluster_run_leaves_no_process_and_records_the_layout() {
    use common::cli::{latest, spawn_in, summary_so_far};
    use common::process::{assert_none_running_under, pids_under, signal, wait_exit};
    use std::process::Stdio;

    let tmp = tempfile::tempdir().unwrap();
    let mut child = spawn_in(
        [
            "run",
            "--topology",
            "cluster",
            "-s",
            "single",
            "-c",
            "4",
            "--resources",
            "3",
            "--duration",
            "60s",
            "--no-progress",
        ],
        tmp.path(),
        Stdio::null(),
        Stdio::null(),
    );
    // Wait (bounded) until the run has measured something: the cluster is up and serving.
    let run = common::wait::wait_for(Duration::from_secs(60), "a measuring cluster run", || {
        summary_so_far(tmp.path())
            .is_some_and(|s| s["strategies"][0]["acquired"].as_u64().unwrap_or(0) > 0)
            .then(|| latest(tmp.path()))
    });
    assert_eq!(pids_under(&run).len(), 6, "six redis-server processes");
    signal(&child, libc::SIGINT);
    let status = wait_exit(&mut child, Duration::from_secs(30), "run after SIGINT");
    assert_eq!(status.code(), Some(130));
    assert_none_running_under(&run);
    let s = common::cli::json(&run.join("summary.json"));
    assert_eq!(s["status"], "interrupted");
    let layout = &s["config"]["cluster_layout"];
    assert_eq!(
        layout["shards"].as_array().map(Vec::len),
        Some(3),
        "{layout}"
    );
    for r in ["r0", "r1", "r2"] {
        let slot = layout["resources"][r]["slot"].as_u64().unwrap();
        assert_eq!(slot, u64::from(resource_slot(r)));
        let shard = layout["resources"][r]["shard"].as_u64().unwrap() as usize;
        let primary = layout["shards"][shard]["primary"].as_str().unwrap();
        assert_eq!(layout["resources"][r]["primary"], primary);
    }
}

#[tokio::test]
async fn single_wait_asks_only_the_locks_own_shard() {
    let mut rig = NemesisRig::start(TopologyKind::Cluster).await;
    let nemesis = &mut rig.nemesis;
    let shards = layout(nemesis).await;
    let own = nemesis.proxied().primary().await.unwrap();
    let other = shards
        .iter()
        .find(|s| s.primary != own)
        .map(|s| s.primary.clone())
        .unwrap();
    let mut opts = options(StrategyKind::SingleWait);
    opts.node_timeout = Duration::from_millis(1_000);
    let conn = ConnectOptions {
        response_timeout: Duration::from_millis(2_000),
        ..ConnectOptions::default()
    };
    let wait = LockClient::connect(&nemesis.proxied().endpoints(), opts, &conn)
        .await
        .unwrap();
    let controls = ClientControls::new(0);
    let cut_replication_of = |node: &str| {
        let mut s = step(FaultKind::Partition, node);
        s.mode = Some(PartitionMode::Refuse);
        s.link = Some(lockbench::nemesis::Link::Replication);
        s
    };

    // Another shard's replica cut off: a WAIT sent to every primary would count 0 there.
    let rec = nemesis
        .inject(&cut_replication_of(&other), &controls)
        .await
        .unwrap();
    assert_eq!(rec.targets, vec![format!("{other}-repl")]);
    let lease = wait
        .acquire("r0")
        .await
        .expect("acknowledged by r0's replica");
    assert_eq!(lease.replica_acks, Some(1));
    wait.release(&lease).await.unwrap();
    nemesis.heal(rec.id).await.unwrap();

    // r0's own replica cut off: no acknowledgement, no lease, the key deleted again.
    let rec = nemesis
        .inject(&cut_replication_of(&own), &controls)
        .await
        .unwrap();
    let err = wait.acquire("r0").await.unwrap_err();
    assert!(
        matches!(
            err,
            lockbench::lease::AcquireError::NoReplicaAck { acked: 0, .. }
        ),
        "{err:?}"
    );
    let key = wait.options().lock_key("r0");
    assert_eq!(get_on(nemesis, &own, &key).await, None);
    nemesis.heal(rec.id).await.unwrap();
    rig.finish().await;
}

/// Waits (bounded) until the cluster's layout names `replica` as a replica of `primary`'s
/// shard, which serves r0's slot.
async fn wait_layout(nemesis: &Nemesis, primary: &str, replica: &str) {
    wait_for_async(
        Duration::from_secs(15),
        "the old primary listed as the new one's replica",
        || async move {
            let shards = nemesis.proxied().topology().cluster_layout().await.ok()?;
            shards
                .iter()
                .find(|s| s.primary == primary)
                .filter(|s| s.owns(resource_slot("r0")) && s.replicas == [replica])
                .map(|_| ())
        },
    )
    .await;
}

#[tokio::test]
async fn forced_and_takeover_failovers_swap_the_shards_primary_and_replica() {
    let mut rig = NemesisRig::start(TopologyKind::Cluster).await;
    let nemesis = &mut rig.nemesis;
    let (old, replica) = primary_and_replica(nemesis).await;
    let controls = ClientControls::new(0);
    // The `replica` target names r0's shard's replica.
    let mut pause = step(FaultKind::PauseNode, "replica");
    pause.duration = Some(Duration::from_millis(100));
    let rec = nemesis.inject(&pause, &controls).await.unwrap();
    assert_eq!(rec.targets, vec![replica.clone()]);
    nemesis.heal(rec.id).await.unwrap();

    // FORCE: the replica takes over; the old primary stays up and becomes its replica.
    let mut force = step(FaultKind::Failover, "primary");
    force.method = Some(FailoverMethod::ClusterFailoverForce);
    let rec = nemesis.inject(&force, &controls).await.unwrap();
    assert_eq!(rec.targets, vec![old.clone()]);
    assert!(rec.end_us.is_some(), "an instant fault");
    assert!(
        rec.detail
            .contains(&format!("cluster-failover-force: {old} -> {replica}")),
        "{}",
        rec.detail
    );
    assert_eq!(nemesis.proxied().primary().await.unwrap(), replica);
    wait_layout(nemesis, &replica, &old).await;

    // TAKEOVER back: the old primary, now the replica, claims the slots again.
    let mut takeover = step(FaultKind::Failover, "primary");
    takeover.method = Some(FailoverMethod::ClusterFailoverTakeover);
    let rec = nemesis.inject(&takeover, &controls).await.unwrap();
    assert!(
        rec.detail
            .contains(&format!("cluster-failover-takeover: {replica} -> {old}")),
        "{}",
        rec.detail
    );
    assert_eq!(nemesis.proxied().primary().await.unwrap(), old);
    wait_layout(nemesis, &old, &replica).await;

    // Clients follow: a lock on r0 lands on the primary again.
    let single = client(nemesis, StrategyKind::Single).await;
    let lease = lock_r0_within(
        &single,
        Duration::from_secs(15),
        "a lock on r0 after the takeover",
    )
    .await;
    let key = single.options().lock_key("r0");
    assert_eq!(
        get_on(nemesis, &old, &key).await.as_deref(),
        Some(lease.owner.as_str())
    );
    single.release(&lease).await.unwrap();
    rig.finish().await;
}

/// `GET key` on `node` directly after `ASKING` (a node importing the key's slot serves it only
/// then).
async fn get_asking(nemesis: &Nemesis, node: &str, key: &str) -> Option<String> {
    let mut conn = direct(nemesis, node)
        .connect_direct(&admin())
        .await
        .unwrap();
    let mut pipe = redis::pipe();
    pipe.cmd("ASKING").ignore().cmd("GET").arg(key);
    let (value,): (Option<String>,) = pipe.query_async(&mut conn).await.unwrap();
    value
}

#[tokio::test]
async fn a_slot_migrated_under_a_held_lock_keeps_the_lock_its_ttl_and_its_fence() {
    use lockbench::lease::{AcquireError, ReleaseFinding};
    let mut rig = NemesisRig::start(TopologyKind::Cluster).await;
    let nemesis = &mut rig.nemesis;
    let source = nemesis.proxied().primary().await.unwrap();
    let target = layout(nemesis)
        .await
        .into_iter()
        .map(|s| s.primary)
        .find(|p| *p != source)
        .unwrap();
    let single = client(nemesis, StrategyKind::Single).await;
    // Its own keys in r0's slot, as a run gives each strategy (`lockbench:<strategy>:`).
    let mut fenced_options = options(StrategyKind::SingleFenced);
    fenced_options.key_prefix = "lockbench:single-fenced:".into();
    let fenced = LockClient::connect(
        &nemesis.proxied().endpoints(),
        fenced_options,
        &ConnectOptions::default(),
    )
    .await
    .unwrap();
    let held = single.acquire("r0").await.expect("single lock");
    let first = fenced.acquire("r0").await.expect("fenced lock");
    fenced.release(&first).await.unwrap();
    let fenced_held = fenced.acquire("r0").await.expect("fenced lock again");
    assert_eq!(fenced_held.fencing_token, Some(2));

    let mut migrate = step(FaultKind::MigrateSlot, &target);
    migrate.duration = Some(Duration::from_secs(1));
    let controls = ClientControls::new(0);
    let window = nemesis.inject(&migrate, &controls).await.expect("migrate");
    assert_eq!(window.targets, vec![source.clone(), target.clone()]);
    assert!(window.end_us.is_none(), "open until SETSLOT NODE");
    let slot = resource_slot("r0");
    assert!(
        window.detail.contains(&format!(
            "slot {slot} (r0): {source} -> {target}; IMPORTING/MIGRATING, 3 key(s) in 1 batch(es)"
        )),
        "{}",
        window.detail
    );
    // The TTL travels with the key (MIGRATE carries it): a few ms less, never none.
    let lock_key = single.options().lock_key("r0");
    let after = window
        .detail
        .split(&format!("{lock_key} pttl "))
        .nth(1)
        .and_then(|t| t.split(" -> ").nth(1))
        .and_then(|t| t.split(" ms").next())
        .and_then(|t| t.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no TTL after the move in {}", window.detail));
    assert!((4000..5000).contains(&after), "{}", window.detail);

    // In the ASK window: the keys are on the target, not the source.
    assert_eq!(
        get_asking(nemesis, &target, &lock_key).await.as_deref(),
        Some(held.owner.as_str())
    );
    let fence_key = fenced.options().fence_key("r0");
    assert_eq!(
        get_asking(nemesis, &target, &fence_key).await.as_deref(),
        Some("2")
    );
    // The held lock stays held: a second acquire follows ASK and finds the key.
    let other = client(nemesis, StrategyKind::Single).await;
    assert!(
        matches!(other.acquire("r0").await, Err(AcquireError::Held { .. })),
        "a second holder during the ASK window"
    );
    // The release follows ASK and finds its key; a new lock is then set on the target.
    let released = single.release(&held).await.unwrap();
    assert_eq!(released.finding(), ReleaseFinding::Held);
    let next = other.acquire("r0").await.expect("a lock through ASK");
    assert_eq!(
        get_asking(nemesis, &target, &lock_key).await.as_deref(),
        Some(next.owner.as_str())
    );
    other.release(&next).await.unwrap();
    // A fenced acquire touches two keys: with the lock key missing on the target it gets
    // TRYAGAIN until the slot is assigned.
    assert_eq!(
        fenced.release(&fenced_held).await.unwrap().finding(),
        ReleaseFinding::Held
    );
    match fenced.acquire("r0").await {
        Err(AcquireError::Node(f)) => assert!(f.message.contains("TryAgain"), "{f:?}"),
        other => panic!("a fenced acquire in the ASK window: {other:?}"),
    }

    let healed = nemesis.heal(window.id).await.unwrap().expect("open");
    assert!(healed.end_us.is_some());
    assert!(
        healed.detail.contains(&format!(
            "heal: swept 0 key(s) in 0 batch(es); SETSLOT NODE on {target}, {source}, "
        )),
        "{}",
        healed.detail
    );
    assert!(layout(nemesis)
        .await
        .iter()
        .any(|s| s.primary == target && s.owns(slot)));
    assert_eq!(nemesis.proxied().primary().await.unwrap(), target);
    // After SETSLOT NODE (MOVED): the counter moved with the lock, so the token goes on.
    let after_move = fenced
        .acquire("r0")
        .await
        .expect("fenced lock after the move");
    assert_eq!(after_move.fencing_token, Some(3));
    assert_eq!(
        get_on(nemesis, &target, &fence_key).await.as_deref(),
        Some("3")
    );
    fenced.release(&after_move).await.unwrap();
    rig.finish().await;
}

/// The flags `viewer`'s `CLUSTER NODES` gives each node, by name (`n1` → `master,fail?`);
/// `None` when it did not answer in time (a loaded machine).
async fn flags_seen_by(nemesis: &Nemesis, viewer: &str) -> Option<Vec<(String, String)>> {
    let text = ask_cluster_nodes(&direct(nemesis, viewer)).await.ok()?;
    let announce = nemesis.proxied().topology().cluster_announce().unwrap();
    let flags = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let host_port = f.get(1)?.split('@').next()?;
            let i = announce
                .iter()
                .position(|(h, p)| format!("{h}:{p}") == host_port)?;
            Some((format!("n{}", i + 1), f.get(2)?.to_string()))
        })
        .collect();
    Some(flags)
}

fn failing(flags: &str) -> bool {
    flags.split(',').any(|f| f == "fail" || f == "fail?")
}

/// A lock client of `kind` locking through client `i`'s own proxies.
async fn own_client(nemesis: &Nemesis, i: u32, kind: StrategyKind) -> LockClient {
    let endpoints = nemesis.proxied().client_endpoints(i).unwrap();
    assert_eq!(endpoints.len(), 1, "one cluster endpoint");
    LockClient::connect(&endpoints, options(kind), &ConnectOptions::default())
        .await
        .expect("cluster client connects through its own proxies")
}

/// The ms figures of the probe's clause "nX accepted SET NX until +A ms, refused from +B ms
/// (…); the other side promoted nY at +C ms".
fn probe_times(detail: &str) -> (u64, u64, String, u64) {
    let after = |marker: &str| -> u64 {
        let rest = &detail[detail
            .find(marker)
            .unwrap_or_else(|| panic!("{marker} in {detail}"))
            + marker.len()..];
        rest.split(' ').next().unwrap().parse().unwrap()
    };
    let promoted = detail.split("promoted ").nth(1).unwrap();
    (
        after("until +"),
        after("refused from +"),
        promoted.split(' ').next().unwrap().to_string(),
        after(" at +"),
    )
}

#[tokio::test]
async fn a_bus_partition_is_two_way_and_the_majority_promotes_the_cut_primarys_replica() {
    let mut rig = NemesisRig::start(TopologyKind::Cluster).await;
    let nemesis = &mut rig.nemesis;
    nemesis.proxied_mut().add_client_links(2).await.unwrap();
    let (primary, replica) = primary_and_replica(nemesis).await;
    let others: Vec<String> = nemesis
        .proxied()
        .node_names()
        .into_iter()
        .filter(|n| *n != primary)
        .collect();
    let minority = own_client(nemesis, 0, StrategyKind::Single).await;
    let majority = own_client(nemesis, 1, StrategyKind::Single).await;

    // The holder (client 0, marked inside its section as the driver marks it) stays on the
    // primary's side: `with_clients = "holder"` is resolved when the step starts.
    let mut cut = step(FaultKind::Partition, "primary");
    cut.link = Some(Link::Bus);
    cut.with_clients = Some("holder".parse().unwrap());
    let controls = ClientControls::new(2);
    controls.get(0).unwrap().set_inside(true);
    let rec = nemesis.inject(&cut, &controls).await.unwrap();
    assert_eq!(rec.targets, vec![primary.clone()]);
    assert!(
        rec.detail.contains(&format!(
            "; client:0 with {primary}, the other clients cut off {primary}"
        )),
        "{}",
        rec.detail
    );
    let table = nemesis
        .proxied()
        .topology()
        .bus_table()
        .expect("the cut made the nft table")
        .to_string();
    assert!(nft_tables().contains(&table));
    // The client on the primary's side still locks there after the cut.
    let lease = minority
        .acquire("r0")
        .await
        .expect("the minority side locks");

    let n: &Nemesis = nemesis;
    let (p, o) = (&primary, &others);
    // Two-way: the cut primary marks every other node failing (it gets no PONG on its own
    // links either), and every other node marks it failing.
    wait_for_async(
        Duration::from_secs(15),
        "the primary to see the others fail",
        || async move {
            let flags = flags_seen_by(n, p).await?;
            o.iter()
                .all(|x| flags.iter().any(|(m, f)| m == x && failing(f)))
                .then_some(())
        },
    )
    .await;
    wait_for_async(
        Duration::from_secs(15),
        "the others to see the primary fail",
        || async move {
            for x in o {
                let flags = flags_seen_by(n, x).await?;
                if !flags.iter().any(|(m, f)| m == p && failing(f)) {
                    return None;
                }
                if let Some((m, f)) = flags.iter().find(|(m, f)| m != p && failing(f)) {
                    panic!("{x} marks {m} ({f}) failing: only {p} is cut off");
                }
            }
            Some(())
        },
    )
    .await;
    // The majority promotes the cut primary's replica; the client on its side locks there.
    let r = &replica;
    wait_for_async(
        Duration::from_secs(15),
        "the replica's promotion",
        || async move {
            let text = ask_cluster_nodes(&direct(n, &o[0])).await.ok()?;
            let announce = n.proxied().topology().cluster_announce().unwrap();
            let shards = lockbench::topology::cluster::parse_cluster_nodes(&text, announce).ok()?;
            shards
                .iter()
                .any(|s| &s.primary == r && s.owns(resource_slot("r0")))
                .then_some(())
        },
    )
    .await;
    let second = lock_r0_within(
        &majority,
        Duration::from_secs(15),
        "a second holder on the majority side",
    )
    .await;
    assert_ne!(second.owner, lease.owner);

    let healed = nemesis.heal(rec.id).await.unwrap().unwrap();
    let (accepted, refused, promoted, promoted_at) = probe_times(&healed.detail);
    let timeout = nemesis
        .proxied()
        .topology()
        .cluster_settings()
        .unwrap()
        .node_timeout;
    let timeout = timeout.as_millis() as u64;
    assert_eq!(promoted, replica, "{}", healed.detail);
    // The minority primary keeps accepting writes for about the node timeout, then refuses.
    assert!(accepted >= timeout / 2, "{}", healed.detail);
    assert!(
        refused > accepted && refused <= timeout + 2_000,
        "{}",
        healed.detail
    );
    assert!(promoted_at > refused, "{}", healed.detail);
    // After the heal the old primary rejoins as a replica and the cluster is whole again.
    nemesis
        .proxied()
        .topology()
        .wait_cluster_ready(Duration::from_secs(30))
        .await
        .unwrap();
    assert!(
        nft_tables().contains(&table),
        "kept until the topology goes"
    );
    rig.finish().await;
    assert!(
        !nft_tables().contains(&table),
        "the nft table goes with the topology"
    );
}

/// The names of the nft tables now (`nft list tables`).
fn nft_tables() -> Vec<String> {
    let out = std::process::Command::new("nft")
        .args(["list", "tables"])
        .output()
        .unwrap();
    assert!(out.status.success(), "nft list tables: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("table ip ").map(str::to_string))
        .collect()
}

// The nft table of a bus cut goes on Ctrl-C too: SIGINT while 20g's partition is in place
// leaves no table of that process and no redis-server.
#[test]
fn sigint_during_a_bus_partition_leaves_no_nft_table_and_no_process() {
    use common::cli::{latest, shipped_scenario, spawn_in};
    use common::process::{assert_none_running_under, signal, wait_exit};
    use std::process::Stdio;

    let tmp = tempfile::tempdir().unwrap();
    let scenario = shipped_scenario("20g-cluster-minority-primary-grants-second-holder.toml");
    let mut child = spawn_in(
        ["chaos", scenario.to_str().unwrap()],
        tmp.path(),
        Stdio::null(),
        Stdio::null(),
    );
    let prefix = format!("lockbench_{}_", child.id());
    let (table, run) = common::wait::wait_for(
        Duration::from_secs(60),
        "the bus cut's nft table and a measuring run",
        || {
            let table = nft_tables().into_iter().find(|t| t.starts_with(&prefix))?;
            tmp.path()
                .join("latest")
                .exists()
                .then(|| (table, latest(tmp.path())))
        },
    );
    signal(&child, libc::SIGINT);
    let status = wait_exit(&mut child, Duration::from_secs(30), "chaos after SIGINT");
    assert_eq!(status.code(), Some(130));
    assert!(!nft_tables().contains(&table), "{table} left after SIGINT");
    assert_none_running_under(&run);
}
