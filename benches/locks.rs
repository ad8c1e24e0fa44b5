//! Acquire + release latency per strategy against real redis-server processes.
//!
//! The bench starts its own nodes once (a `single` topology for the single-node strategies, a
//! `five` topology for `redlock` / `redlock-fenced`) and an embedded Toxiproxy server with two
//! proxies per node: one plain, one with a 1 ms `latency` toxic on the downstream stream (every
//! reply from Redis is held 1 ms, so each round trip costs ≥ 1 ms more). Everything is torn
//! down at the end; the reaper's panic hook kills the nodes if a bench panics.
//!
//! Bench names are `<group>/<path>/<strategy>`:
//!
//! | group | what one iteration is |
//! |---|---|
//! | `uncontended` | one client, a resource nobody else uses: `try_acquire` (must succeed) then `release` |
//! | `contended` | the measured client's `try_acquire` repeated until it gets the lease, then `release`, while [`BACKGROUND_CLIENTS`] other clients loop over the same cycle on the same resource |
//!
//! | path | how the client reaches the nodes |
//! |---|---|
//! | `direct` | straight to redis-server on 127.0.0.1 |
//! | `proxy` | through the embedded Toxiproxy, no toxic (the proxy's own cost) |
//! | `proxy-1ms` | through the embedded Toxiproxy with a 1 ms downstream latency toxic |
//!
//! Every client has its own connection to each node it uses; the TTL is 10 s, so no lease
//! expires during a measurement. A failed contended attempt is retried at once (after a
//! `yield_now`), not with the strategy's retry policy, whose sleeps (≥ 1 ms timer resolution)
//! would dominate the measurement. The background clients run only while a sample is being
//! measured (not during criterion's analysis).
//!
//! Run: `cargo bench --bench locks` (or with a filter, e.g. `cargo bench --bench locks -- uncontended/direct`).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{criterion_group, BenchmarkGroup, Criterion, SamplingMode};
use lockbench::node::{ConnectOptions, NodeEndpoint};
use lockbench::strategy::{LockClient, StrategyKind, StrategyOptions};
use lockbench::topology::{reaper, LocalTopologyOptions, Topology, TopologyKind};
use lockbench::toxiproxy::{LatencyMs, ToxicKind, ToxicSpec, ToxiproxyClient, ToxiproxyServer};
use tokio::runtime::Runtime;
use tokio::sync::watch;
use tokio::time::Instant;

/// Clients contending with the measured one in the `contended` group.
const BACKGROUND_CLIENTS: usize = 3;
/// Lease TTL of every bench client: long enough that nothing expires mid-measurement.
const TTL: Duration = Duration::from_secs(10);
/// Bootstrap resamples per bench (criterion's default is 100 000; 10 000 gives the same
/// confidence intervals to within a few tenths of a percent and halves the analysis time).
const RESAMPLES: usize = 10_000;
/// Latency added by the `proxy-1ms` path's toxic, in ms.
const TOXIC_LATENCY_MS: u64 = 1;

/// How a client reaches the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    Direct,
    Proxy,
    Proxy1ms,
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Direct => "direct",
            Path::Proxy => "proxy",
            Path::Proxy1ms => "proxy-1ms",
        }
    }
}

/// The nodes, the proxies and the runtime every lock bench uses; started once per binary.
struct Fixture {
    rt: Runtime,
    single: Option<Topology>,
    five: Option<Topology>,
    proxy: Option<ToxiproxyServer>,
    /// Endpoints per (path, topology kind).
    endpoints: Vec<(Path, TopologyKind, Vec<NodeEndpoint>)>,
    _dir: tempfile::TempDir,
}

impl Fixture {
    fn start() -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let dir = tempfile::tempdir().expect("temporary directory for the bench nodes");
        let opts = LocalTopologyOptions::new(dir.path());
        let (single, five, proxy, endpoints) = rt.block_on(async {
            let single = Topology::start_local(TopologyKind::Single, &opts)
                .await
                .unwrap_or_else(|e| panic!("cannot start the single topology: {e}"));
            let five = Topology::start_local(TopologyKind::Five, &opts)
                .await
                .unwrap_or_else(|e| panic!("cannot start the five topology: {e}"));
            let proxy = ToxiproxyServer::start("127.0.0.1:0".parse().unwrap())
                .await
                .unwrap_or_else(|e| panic!("cannot start the embedded Toxiproxy: {e}"));
            let api = ToxiproxyClient::new(&proxy.base_url()).expect("toxiproxy client");
            let mut endpoints = Vec::new();
            for topology in [&single, &five] {
                let kind = topology.kind();
                let direct = topology.endpoints();
                for path in [Path::Proxy, Path::Proxy1ms] {
                    let mut proxied = Vec::new();
                    for node in &direct {
                        let upstream = node.url.trim_start_matches("redis://").to_string();
                        let name = format!("{kind}-{}-{}", node.name, path.name());
                        let info = api
                            .create_proxy(&name, "127.0.0.1:0", &upstream)
                            .await
                            .unwrap_or_else(|e| panic!("cannot create proxy {name}: {e}"));
                        if path == Path::Proxy1ms {
                            let toxic = ToxicSpec::new(ToxicKind::Latency {
                                latency: TOXIC_LATENCY_MS.into(),
                                jitter: LatencyMs::ZERO,
                            });
                            api.add_toxic(&name, &toxic)
                                .await
                                .unwrap_or_else(|e| panic!("cannot add latency to {name}: {e}"));
                        }
                        proxied.push(NodeEndpoint::new(
                            node.name.clone(),
                            format!("redis://{}", info.listen),
                        ));
                    }
                    endpoints.push((path, kind, proxied));
                }
                endpoints.push((Path::Direct, kind, direct));
            }
            (single, five, proxy, endpoints)
        });
        Fixture {
            rt,
            single: Some(single),
            five: Some(five),
            proxy: Some(proxy),
            endpoints,
            _dir: dir,
        }
    }

    /// A new client (its own connections) for `kind` over `path`.
    fn client(&self, kind: StrategyKind, path: Path) -> LockClient {
        let topology = if kind.is_quorum() {
            TopologyKind::Five
        } else {
            TopologyKind::Single
        };
        let endpoints = &self
            .endpoints
            .iter()
            .find(|(p, t, _)| *p == path && *t == topology)
            .expect("endpoints for every path and topology")
            .2;
        let opts = StrategyOptions::new(kind, TTL);
        self.rt
            .block_on(LockClient::connect(
                endpoints,
                opts,
                &ConnectOptions::default(),
            ))
            .unwrap_or_else(|e| panic!("{kind} client over {}: {e}", path.name()))
    }

    /// Stops the proxies and the nodes (gracefully), and checks no node is left running.
    fn shutdown(mut self) {
        let (single, five, proxy) = (self.single.take(), self.five.take(), self.proxy.take());
        self.rt.block_on(async {
            if let Some(p) = proxy {
                p.shutdown().await;
            }
            for t in [single, five].into_iter().flatten() {
                t.shutdown().await;
            }
        });
        let left = reaper::registered_pids();
        assert!(
            left.is_empty(),
            "redis-server pids left after the benches: {left:?}"
        );
    }
}

/// Runs a measurement loop as a task on a runtime worker, as application code runs, rather
/// than on the thread that called `block_on` (there every reply would need a cross-thread
/// wake-up, which on this 2-core machine roughly doubled the uncontended `single` cycle).
async fn on_worker<F>(measure: F) -> Duration
where
    F: std::future::Future<Output = Duration> + Send + 'static,
{
    match tokio::spawn(measure).await {
        Ok(elapsed) => elapsed,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// One acquire + release that must succeed (the resource is free).
async fn cycle_uncontended(client: &LockClient, resource: &str) {
    let lease = client
        .try_acquire(resource)
        .await
        .unwrap_or_else(|e| panic!("{}: uncontended acquire failed: {e}", client.kind()));
    let out = client
        .release(&lease)
        .await
        .unwrap_or_else(|e| panic!("{}: release failed: {e}", client.kind()));
    assert!(
        out.released_nodes >= 1,
        "{}: release deleted nothing",
        client.kind()
    );
}

/// Retries `try_acquire` (no sleep) until it gets the lease, then releases it. Returns the
/// number of attempts, or `Err` with the message of an error that is not contention.
async fn cycle_contended(client: &LockClient, resource: &str) -> Result<u64, String> {
    let mut attempts = 0;
    loop {
        attempts += 1;
        match client.try_acquire(resource).await {
            Ok(lease) => {
                client.release(&lease).await.map_err(|e| e.to_string())?;
                return Ok(attempts);
            }
            Err(e) if e.is_contention() => tokio::task::yield_now().await,
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn uncontended(
    g: &mut BenchmarkGroup<'_, WallTime>,
    fx: &Fixture,
    path: Path,
    kinds: &[StrategyKind],
) {
    for &kind in kinds {
        let client = fx.client(kind, path);
        let resource = format!("uncontended-{kind}-{}", path.name());
        g.bench_function(format!("{}/{kind}", path.name()), |b| {
            b.to_async(&fx.rt).iter_custom(|iters| {
                let client = client.clone();
                let resource = resource.clone();
                on_worker(async move {
                    let start = Instant::now();
                    for _ in 0..iters {
                        cycle_uncontended(&client, &resource).await;
                    }
                    start.elapsed()
                })
            })
        });
    }
}

fn contended(
    g: &mut BenchmarkGroup<'_, WallTime>,
    fx: &Fixture,
    path: Path,
    kinds: &[StrategyKind],
) {
    for &kind in kinds {
        let resource = format!("contended-{kind}-{}", path.name());
        let measured = fx.client(kind, path);
        // Background clients cycle while `active` is true (only inside a measured sample).
        let (active, _) = watch::channel(false);
        let background_cycles = Arc::new(AtomicU64::new(0));
        let background_errors = Arc::new(AtomicU64::new(0));
        let (stop, _) = watch::channel(false);
        let tasks: Vec<_> = (0..BACKGROUND_CLIENTS)
            .map(|_| {
                let client = fx.client(kind, path);
                let resource = resource.clone();
                let mut active = active.subscribe();
                let mut stop = stop.subscribe();
                let cycles = background_cycles.clone();
                let errors = background_errors.clone();
                fx.rt.spawn(async move {
                    loop {
                        tokio::select! {
                            _ = stop.wait_for(|s| *s) => return,
                            r = active.wait_for(|a| *a) => if r.is_err() { return },
                        }
                        while *active.borrow() && !*stop.borrow() {
                            match cycle_contended(&client, &resource).await {
                                Ok(_) => cycles.fetch_add(1, Ordering::Relaxed),
                                Err(_) => errors.fetch_add(1, Ordering::Relaxed),
                            };
                        }
                    }
                })
            })
            .collect();
        let measured_attempts = Arc::new(AtomicU64::new(0));
        let measured_cycles = Arc::new(AtomicU64::new(0));
        g.bench_function(format!("{}/{kind}", path.name()), |b| {
            b.to_async(&fx.rt).iter_custom(|iters| {
                let client = measured.clone();
                let resource = resource.clone();
                let active = active.clone();
                let attempts = measured_attempts.clone();
                let cycles = measured_cycles.clone();
                on_worker(async move {
                    active.send_replace(true);
                    // Let the background clients start contending before the clock starts.
                    tokio::task::yield_now().await;
                    let start = Instant::now();
                    for _ in 0..iters {
                        let n = cycle_contended(&client, &resource)
                            .await
                            .unwrap_or_else(|e| panic!("{kind}: contended cycle failed: {e}"));
                        attempts.fetch_add(n, Ordering::Relaxed);
                    }
                    let elapsed = start.elapsed();
                    active.send_replace(false);
                    cycles.fetch_add(iters, Ordering::Relaxed);
                    elapsed
                })
            })
        });
        stop.send_replace(true);
        active.send_replace(false);
        fx.rt.block_on(async {
            for t in tasks {
                let _ = t.await;
            }
        });
        let (m_cycles, m_attempts) = (
            measured_cycles.load(Ordering::Relaxed),
            measured_attempts.load(Ordering::Relaxed),
        );
        if m_cycles == 0 {
            continue; // filtered out on the command line
        }
        eprintln!(
            "contended/{}/{kind}: measured client {m_cycles} cycles, {:.2} attempts per lease; \
             {} background cycles, {} background errors",
            path.name(),
            m_attempts as f64 / m_cycles.max(1) as f64,
            background_cycles.load(Ordering::Relaxed),
            background_errors.load(Ordering::Relaxed),
        );
    }
}

fn lock_benches(c: &mut Criterion) {
    use StrategyKind::*;
    let all = StrategyKind::all();
    let fx = Fixture::start();

    // Sub-millisecond paths: 50 linear samples in 2 s. Millisecond paths (1 ms toxic): flat
    // sampling, 10 samples in 2 s. A full run of this binary takes about 2–3 minutes.
    let mut g = c.benchmark_group("uncontended");
    fast(&mut g);
    uncontended(&mut g, &fx, Path::Direct, all);
    uncontended(&mut g, &fx, Path::Proxy, &[Single, Redlock]);
    slow(&mut g);
    uncontended(&mut g, &fx, Path::Proxy1ms, all);
    g.finish();

    let mut g = c.benchmark_group("contended");
    fast(&mut g);
    contended(&mut g, &fx, Path::Direct, all);
    slow(&mut g);
    contended(
        &mut g,
        &fx,
        Path::Proxy1ms,
        &[Single, SingleFenced, Redlock, RedlockFenced],
    );
    g.finish();

    fx.shutdown();
}

/// Settings for benches whose iteration is well under a millisecond.
fn fast(g: &mut BenchmarkGroup<'_, WallTime>) {
    g.sampling_mode(SamplingMode::Linear);
    g.sample_size(50);
    g.nresamples(RESAMPLES);
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(2));
}

/// Settings for benches whose iteration takes milliseconds (the 1 ms toxic paths).
fn slow(g: &mut BenchmarkGroup<'_, WallTime>) {
    g.sampling_mode(SamplingMode::Flat);
    g.sample_size(10);
    g.nresamples(RESAMPLES);
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
}

criterion_group!(benches, lock_benches);

fn main() {
    reaper::install_panic_hook();
    common::register_plot_font();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
