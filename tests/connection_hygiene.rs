//! Connection hygiene of the strategy layer against a real redis-server behind the embedded
//! Toxiproxy: after a black hole (a `timeout` toxic with timeout 0 drops every byte), no reply
//! is ever paired with another request, and a client recovers as soon as the fault is healed.

mod common;

use std::time::{Duration, Instant};

use common::nemesis::start_proxied;
use common::node::wait_until_gone;
use lockbench::lease::{AcquireError, NodeFailureKind, ReleaseFinding};
use lockbench::node::ConnectOptions;
use lockbench::orchestration::scenario::Scenario;
use lockbench::results::RunDir;
use lockbench::strategy::{LockClient, RetryPolicy, StrategyError, StrategyKind, StrategyOptions};
use lockbench::topology::ProxiedTopology;
use lockbench::topology::{Persistence, TopologyKind};
use lockbench::toxiproxy::{Stream, ToxicKind, ToxicSpec};

const MS: fn(u64) -> Duration = Duration::from_millis;

/// One redis-server behind the embedded proxy `n1`.
struct Rig {
    proxied: Option<ProxiedTopology>,
    _dir: tempfile::TempDir,
}

impl Rig {
    async fn start() -> Self {
        let (proxied, dir) = start_proxied(TopologyKind::Single, Persistence::None).await;
        Self {
            proxied: Some(proxied),
            _dir: dir,
        }
    }

    fn proxied(&self) -> &ProxiedTopology {
        self.proxied.as_ref().expect("running")
    }

    /// A connection straight to the node, past the proxy, for checking what Redis holds.
    async fn inspect(&self) -> redis::aio::MultiplexedConnection {
        common::node::inspect(self.proxied().direct_endpoint("n1").unwrap()).await
    }

    /// Drops every byte from the node to the clients (replies), keeping connections open.
    async fn black_hole_replies(&self) -> String {
        let spec = ToxicSpec::new(ToxicKind::Timeout { timeout: 0 })
            .stream(Stream::Downstream)
            .named("hygiene-black-hole");
        self.proxied().api().add_toxic("n1", &spec).await.unwrap();
        "hygiene-black-hole".to_string()
    }

    async fn heal(&self, toxic: &str) {
        self.proxied()
            .api()
            .remove_toxic("n1", toxic)
            .await
            .unwrap();
    }

    async fn client(&self, ttl: Duration, node_timeout: Duration) -> LockClient {
        let mut opts = StrategyOptions::new(StrategyKind::Single, ttl);
        opts.retry = RetryPolicy::no_retry();
        opts.node_timeout = node_timeout;
        LockClient::connect(
            &self.proxied().endpoints(),
            opts,
            &ConnectOptions::default(),
        )
        .await
        .expect("connect through the proxy")
    }

    async fn finish(mut self) {
        self.proxied.take().unwrap().shutdown().await;
    }
}

async fn get(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query_async(conn).await.unwrap()
}

async fn pttl(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap()
}

/// Polls (bounded) until Redis has run a command named `cmd` for a client other than the
/// inspecting one: the request went through the proxy even though its reply will not come back.
async fn wait_until_node_ran(conn: &mut redis::aio::MultiplexedConnection, cmd: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(conn)
            .await
            .unwrap();
        if list.lines().any(|l| l.contains(&format!(" cmd={cmd} "))) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no client ran {cmd} within 5 s:\n{list}"
        );
        tokio::time::sleep(MS(5)).await;
    }
}

#[tokio::test]
async fn a_release_replayed_after_a_black_hole_returns_the_truth() {
    let rig = Rig::start().await;
    let ttl = Duration::from_secs(30);
    let client = rig.client(ttl, MS(300)).await;
    let opts = client.options().clone();
    let mut node = rig.inspect().await;

    let lease = client
        .acquire("res")
        .await
        .expect("acquire before the fault");
    let toxic = rig.black_hole_replies().await;
    let err = client
        .release(&lease)
        .await
        .expect_err("the reply is swallowed");
    assert!(
        matches!(&err, StrategyError::Node(f) if f.kind == NodeFailureKind::Timeout),
        "{err:?}"
    );
    // Redis ran the compare-and-delete; only its reply was lost.
    let n1 = rig.proxied().direct_endpoint("n1").unwrap();
    wait_until_gone(n1, &opts.lock_key("res"), Duration::from_secs(5)).await;
    rig.heal(&toxic).await;

    // Replayed on the same client: the key is already gone, and the release says so, instead
    // of timing out on the previous request's reply slot.
    let replay = client.release(&lease).await.expect("release after heal");
    assert_eq!(replay.released_nodes, 0, "{replay:?}");
    assert_eq!(replay.finding(), ReleaseFinding::Lost);

    // Every later command gets its own reply.
    let other = client.acquire("other").await.expect("fresh acquire");
    assert_eq!(
        get(&mut node, &opts.lock_key("other")).await.as_deref(),
        Some(other.owner.as_str())
    );
    let left = pttl(&mut node, &opts.lock_key("other")).await;
    assert!(left > 0 && left <= 30_000, "PTTL {left}");
    let held = client.acquire("other").await.expect_err("already ours");
    assert!(matches!(held, AcquireError::Held { .. }), "{held:?}");
    let extended = client.extend(&other).await.expect("extend");
    assert!(extended.validity_deadline > other.validity_deadline);
    let released = client.release(&other).await.unwrap();
    assert_eq!(released.finding(), ReleaseFinding::Held, "{released:?}");
    assert_eq!(get(&mut node, &opts.lock_key("other")).await, None);
    let again = client.release(&other).await.unwrap();
    assert_eq!(again.finding(), ReleaseFinding::Lost, "{again:?}");
    rig.finish().await;
}

#[tokio::test]
async fn a_release_that_timed_out_before_redis_ran_it_is_replayed_truthfully() {
    // The opposite case: the release's reply is lost and Redis kept the key (the client timed
    // out first, the key is still there), then the replay deletes it and says so.
    let rig = Rig::start().await;
    let client = rig.client(Duration::from_secs(30), MS(300)).await;
    let key = client.options().lock_key("res");
    let mut node = rig.inspect().await;
    let lease = client.acquire("res").await.unwrap();
    // Block the request direction too, so the key stays.
    let up = ToxicSpec::new(ToxicKind::Timeout { timeout: 0 })
        .stream(Stream::Upstream)
        .named("hygiene-up");
    rig.proxied().api().add_toxic("n1", &up).await.unwrap();
    let toxic = rig.black_hole_replies().await;
    client.release(&lease).await.expect_err("black hole");
    assert_eq!(
        get(&mut node, &key).await.as_deref(),
        Some(lease.owner.as_str())
    );
    rig.heal(&toxic).await;
    rig.heal("hygiene-up").await;
    let replay = client.release(&lease).await.expect("release after heal");
    assert_eq!(replay.finding(), ReleaseFinding::Held, "{replay:?}");
    assert_eq!(get(&mut node, &key).await, None);
    rig.finish().await;
}

#[tokio::test]
async fn clients_sharing_a_connection_never_get_each_others_replies() {
    let rig = Rig::start().await;
    let ttl = Duration::from_secs(30);
    // One LockClient shared by two tasks, as with --shared-connection.
    let shared = rig.client(ttl, MS(800)).await;
    let other_owner = rig.client(ttl, MS(800)).await;
    let mut node = rig.inspect().await;
    let opts = shared.options().clone();
    let taken = other_owner.acquire("taken").await.unwrap();
    // Its last command is now a script, so the only `set` in CLIENT LIST will be A's.
    let taken = other_owner.extend(&taken).await.unwrap();

    // A asks for a lock someone else holds; its "no" (nil) is swallowed by the black hole.
    let toxic = rig.black_hole_replies().await;
    let a = tokio::spawn({
        let c = shared.clone();
        async move { c.acquire("taken").await }
    });
    wait_until_node_ran(&mut node, "set").await;
    rig.heal(&toxic).await;
    // B asks for a free lock while A still waits: B's "OK" must not become A's answer.
    let b = shared.acquire("free").await;
    let a = a.await.unwrap();
    // A's own answer ("held") was swallowed: it can only time out.
    match &a {
        Ok(l) => panic!(
            "A was told it holds `taken` (owner {}), held by another",
            l.owner
        ),
        Err(AcquireError::Node(f)) => assert_eq!(f.kind, NodeFailureKind::Timeout, "{f}"),
        Err(e) => panic!("A: {e:?}"),
    }
    assert_eq!(
        get(&mut node, &opts.lock_key("taken")).await.as_deref(),
        Some(taken.owner.as_str())
    );
    match &b {
        Ok(l) => assert_eq!(
            get(&mut node, &opts.lock_key("free")).await.as_deref(),
            Some(l.owner.as_str()),
            "B's lease is not the key Redis holds"
        ),
        Err(AcquireError::Node(f)) => assert_eq!(f.kind, NodeFailureKind::Timeout, "{f}"),
        Err(e) => panic!("B: {e:?}"),
    }
    // And the shared client works again with its own replies.
    let c = shared.acquire("third").await.expect("acquire after heal");
    assert_eq!(
        get(&mut node, &opts.lock_key("third")).await.as_deref(),
        Some(c.owner.as_str())
    );
    let held = shared.acquire("taken").await.expect_err("still held");
    assert!(matches!(held, AcquireError::Held { .. }), "{held:?}");
    rig.finish().await;
}

/// `single`, four clients looping through the chaos runner; a one-second black hole on the
/// node's proxy from 1 s to 2 s.
const BLACK_HOLE_SCENARIO: &str = r#"
name = "hygiene-black-hole"
claim = "a client recovers as soon as a black hole heals"
topology = "single"
strategies = ["single"]
seed = 3

[workload]
clients = 4
resources = 4
hold = "0ms"
ttl = "1s"
duration = "4s"
retry_attempts = 1

[[nemesis]]
at = "1s"
duration = "1s"
fault = "partition"
target = "n1"
mode = "blackhole"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisitions_recover_within_a_second_of_a_healed_black_hole() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("hygiene.toml");
    let scenario = Scenario::parse(BLACK_HOLE_SCENARIO, &path).expect("scenario parses");
    let dir = RunDir::create(&tmp.path().join("results"), "hygiene").unwrap();
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let outcome = lockbench::orchestration::runner::Runner::local(shutdown)
        .run(&scenario.to_test(), &dir, |_| {})
        .await
        .expect("scenario runs");
    let s = &outcome.strategies[0];
    let per_second: Vec<u64> = (0..4)
        .map(|sec| {
            s.timeline
                .iter()
                .find(|p| p.second == sec)
                .map_or(0, |p| p.acquired)
        })
        .collect();
    let [before, during, first_after, second_after] = per_second[..] else {
        unreachable!()
    };
    assert!(
        before >= 100,
        "too few acquisitions before the fault: {per_second:?}"
    );
    // The fault happened: almost nothing was acquired while replies were black-holed.
    assert!(
        during * 4 < before,
        "black hole had no effect: {per_second:?}"
    );
    // Counted acquisitions, compared within this run (the machine's speed cancels out): the
    // second after the heal loses at most the in-flight requests' 100 ms per-node timeout.
    assert!(
        first_after * 2 >= before,
        "not recovered within a second of the heal: {per_second:?}"
    );
    assert!(
        second_after * 10 >= before * 7,
        "rate still low a second later: {per_second:?}"
    );
    // No reply was taken for another request's: nobody believed in a lock it did not get.
    // (Acquires whose replies the black hole swallowed are `info`; the checker may call the
    // run `unknown` for them, never `invalid`.)
    let check = s.check.as_ref().expect("audited");
    assert_ne!(
        check.verdict,
        lockbench::checker::Verdict::Invalid,
        "{check:?}"
    );
    assert_eq!(check.stats.mutex_violations, 0, "{check:?}");
    assert_eq!(check.stats.believed_overlaps, 0, "{check:?}");
    assert!(
        check.stats.acquire_info > 0,
        "no acquire was cut off: {check:?}"
    );
    eprintln!("acquisitions per second: {per_second:?}");
}
