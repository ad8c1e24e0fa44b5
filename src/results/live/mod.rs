//! Live metrics of a run, in the OpenMetrics text format (`--metrics ADDR`; served by
//! [`super::live_endpoint`]). Encoded by the `prometheus-client` crate.
//!
//! | family | type | labels | what |
//! |---|---|---|---|
//! | `lockbench_ops_total` | counter | `strategy`, `op`, `outcome` | `acquire` `ok`/`busy`/`error`, `release` `ok`/`error`: the summary's `acquired`, `contended`, `errors`, `release_errors` (and releases that found the lease) |
//! | `lockbench_acquire_latency_seconds` | histogram | `strategy` | successful acquires, from the collector's HdrHistogram (3 significant digits: bucket edges and `_sum` within 0.1 %) |
//! | `lockbench_holders` | gauge | `strategy`, `resource` | clients that believe they hold the resource (acquire-ok until their release returned or they crashed); `r0` up to the highest resource held so far |
//! | `lockbench_faults_active` | gauge | `kind` | fault windows opened by the nemesis and not yet healed |
//! | `lockbench_harness_lag_last_second_seconds` | gauge | `strategy` | the harness-health probe's largest lag in the last complete second |
//! | `lockbench_harness_lag_p99_seconds`, `lockbench_harness_lag_max_seconds` | gauge | `strategy` | the probe's p99 and max lag over the strategy's run |
//! | `lockbench_harness_ledger_queue_max` | gauge | `strategy` | longest ledger queue seen by the probe |
//! | `lockbench_harness_overloaded` | gauge | `strategy` | 1 when the lag reached a tenth of the TTL (`summary.json`'s `harness.overloaded`) |
//! | `lockbench_ledger_anomalies_total` | counter | `strategy`, `kind` | the checker's streaming part ([`crate::checker::LedgerWatch`]): `mutex-violation`, `stale-write-accepted`, `stale-write-rejected`, `lost-update` found so far in the ledger the run is writing (`ledger.rs`); at the end a strategy run's mutex violations and stale writes equal its checker's |
//! | `lockbench_checker_anomalies` | gauge | `strategy`, `kind` | anomalies per kind, set when the strategy's checker has run (every rule, the history's included) |
//! | `toxiproxy_proxy_received_bytes_total`, `toxiproxy_proxy_sent_bytes_total` | counter | `direction`, `proxy`, `listener`, `upstream` | bytes through each embedded proxy, named and labelled as Toxiproxy's own `-proxy-metrics` |
//!
//! The latency histogram is `histogram.rs`'s: buckets set from the collector's HdrHistogram.
//!
//! Nothing here runs on a client's path: the driver's collector already owns every count, and
//! [`StrategyMeter::update`] copies them into the registry once a second (the runner's tick)
//! and once at the end of the strategy's run; proxy bytes are read when scraped. Counters
//! keep growing across the strategies and tests of one process (a matrix runs the same
//! strategy many times): each strategy run adds onto what the previous ones left.

mod histogram;
mod ledger;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use self::histogram::{Buckets, LatencyHistogram};
use super::summary::{CheckSummary, StrategySummary};
use crate::driver::Collector;
use crate::toxiproxy::TrafficProbe;

pub use self::histogram::LATENCY_BOUNDS_S;
pub use self::ledger::LedgerWatcher;

/// The MIME type of the text this module encodes (OpenMetrics 1.0).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabels {
    strategy: String,
    op: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StrategyLabels {
    strategy: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabels {
    strategy: String,
    resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnomalyLabels {
    strategy: String,
    kind: String,
}

/// Toxiproxy's label set for its proxy byte counters (`collectors/proxy.go`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProxyLabels {
    direction: &'static str,
    proxy: String,
    listener: String,
    upstream: String,
}

/// The (op, outcome) pairs of `lockbench_ops_total`, in [`op_counts`] order.
const OPS: [(&str, &str); 5] = [
    ("acquire", "ok"),
    ("acquire", "busy"),
    ("acquire", "error"),
    ("release", "ok"),
    ("release", "error"),
];

/// A strategy's operation counts in [`OPS`] order, from its summary.
fn op_counts(s: &StrategySummary) -> [u64; 5] {
    [
        s.acquired,
        s.contended,
        s.errors,
        s.release.count.saturating_sub(s.release_errors),
        s.release_errors,
    ]
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// Every family, registered once in one registry.
#[derive(Debug)]
struct Families {
    ops: Family<OpLabels, Counter>,
    acquire_latency: Family<StrategyLabels, LatencyHistogram>,
    holders: Family<ResourceLabels, Gauge>,
    faults: Family<KindLabels, Gauge>,
    lag_last_second: Family<StrategyLabels, FloatGauge>,
    lag_p99: Family<StrategyLabels, FloatGauge>,
    lag_max: Family<StrategyLabels, FloatGauge>,
    ledger_queue_max: Family<StrategyLabels, Gauge>,
    overloaded: Family<StrategyLabels, Gauge>,
    anomalies: Family<AnomalyLabels, Gauge>,
    ledger_anomalies: Family<AnomalyLabels, Counter>,
    proxy_received: Family<ProxyLabels, Counter>,
    proxy_sent: Family<ProxyLabels, Counter>,
}

/// Proxy byte sources being watched, and what each link had already added to the counters.
#[derive(Default)]
struct TrafficState {
    next_id: u64,
    probes: Vec<(u64, TrafficProbe)>,
    /// (probe id, proxy labels) → (received, sent) already counted.
    counted: HashMap<(u64, ProxyLabels), (u64, u64)>,
}

struct Inner {
    registry: Registry,
    families: Families,
    traffic: tokio::sync::Mutex<TrafficState>,
}

/// The live metrics of one lockbench process: a cheap `Clone` handle shared by the runner
/// (which updates it) and the endpoint (which encodes it on every scrape).
#[derive(Clone)]
pub struct LiveMetrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LiveMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveMetrics").finish_non_exhaustive()
    }
}

/// Two handles are equal when they share one registry.
impl PartialEq for LiveMetrics {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Default for LiveMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl LiveMetrics {
    /// An empty registry with every family of the module table (a family shows in the text
    /// once it has a series: the proxy byte counters only when proxies are watched).
    pub fn new() -> Self {
        let families = Families {
            ops: Family::default(),
            acquire_latency: Family::default(),
            holders: Family::default(),
            faults: Family::default(),
            lag_last_second: Family::default(),
            lag_p99: Family::default(),
            lag_max: Family::default(),
            ledger_queue_max: Family::default(),
            overloaded: Family::default(),
            anomalies: Family::default(),
            ledger_anomalies: Family::default(),
            proxy_received: Family::default(),
            proxy_sent: Family::default(),
        };
        let mut r = Registry::default();
        let f = &families;
        r.register(
            "lockbench_ops",
            "Lock operations finished, by strategy, op (acquire, release) and outcome (ok, busy, error)",
            f.ops.clone(),
        );
        r.register_with_unit(
            "lockbench_acquire_latency",
            "Latency of successful acquires (from the run's HdrHistogram)",
            Unit::Seconds,
            f.acquire_latency.clone(),
        );
        r.register(
            "lockbench_holders",
            "Clients that believe they hold the resource (acquire ok until their release returned or they crashed)",
            f.holders.clone(),
        );
        r.register(
            "lockbench_faults_active",
            "Fault windows injected by the nemesis and not yet healed, by fault kind",
            f.faults.clone(),
        );
        r.register_with_unit(
            "lockbench_harness_lag_last_second",
            "Largest lag of the harness-health probe in the last complete second",
            Unit::Seconds,
            f.lag_last_second.clone(),
        );
        r.register_with_unit(
            "lockbench_harness_lag_p99",
            "99th percentile lag of the harness-health probe over the strategy's run",
            Unit::Seconds,
            f.lag_p99.clone(),
        );
        r.register_with_unit(
            "lockbench_harness_lag_max",
            "Largest lag of the harness-health probe over the strategy's run",
            Unit::Seconds,
            f.lag_max.clone(),
        );
        r.register(
            "lockbench_harness_ledger_queue_max",
            "Longest ledger queue seen by the harness-health probe",
            f.ledger_queue_max.clone(),
        );
        r.register(
            "lockbench_harness_overloaded",
            "1 when the harness's lag reached a tenth of the lease TTL",
            f.overloaded.clone(),
        );
        r.register(
            "lockbench_checker_anomalies",
            "Anomalies found by the checker, by kind; set once the strategy's check ran",
            f.anomalies.clone(),
        );
        r.register(
            "lockbench_ledger_anomalies",
            "Anomalies found so far in the ledger the run is writing (the checker's streaming part), by kind",
            f.ledger_anomalies.clone(),
        );
        r.register(
            "toxiproxy_proxy_received_bytes",
            "Bytes received by the proxy, by direction (upstream: from the client; downstream: from the server)",
            f.proxy_received.clone(),
        );
        r.register(
            "toxiproxy_proxy_sent_bytes",
            "Bytes sent on by the proxy, by direction (upstream: to the server; downstream: to the client)",
            f.proxy_sent.clone(),
        );
        Self {
            inner: Arc::new(Inner {
                registry: r,
                families,
                traffic: tokio::sync::Mutex::default(),
            }),
        }
    }

    /// Starts counting one strategy run: what it measures is added onto what other runs of
    /// the same strategy in this process counted (before it, or at the same time: a matrix
    /// runs trials at once).
    pub fn strategy(&self, strategy: &str) -> StrategyMeter {
        StrategyMeter {
            live: self.clone(),
            strategy: strategy.to_string(),
            added: Mutex::default(),
        }
    }

    /// A fault window of `kind` opened (`opened`) or healed.
    pub fn fault(&self, kind: &str, opened: bool) {
        let g = self.inner.families.faults.get_or_create(&KindLabels {
            kind: kind.to_string(),
        });
        if opened {
            g.inc();
        } else if g.get() > 0 {
            g.dec();
        }
    }

    /// Watches an embedded Toxiproxy server's proxies; returns the id for
    /// [`unwatch_traffic`](Self::unwatch_traffic).
    pub async fn watch_traffic(&self, probe: TrafficProbe) -> u64 {
        let mut t = self.inner.traffic.lock().await;
        let id = t.next_id;
        t.next_id += 1;
        t.probes.push((id, probe));
        id
    }

    /// Reads the watched proxies' byte counts one last time, then stops watching them (their
    /// series keep their last values).
    pub async fn unwatch_traffic(&self, id: u64) {
        self.refresh_traffic().await;
        let mut t = self.inner.traffic.lock().await;
        t.probes.retain(|(i, _)| *i != id);
        t.counted.retain(|(i, _), _| *i != id);
    }

    /// Adds what every watched proxy forwarded since the last call to the Toxiproxy counters.
    pub async fn refresh_traffic(&self) {
        let mut t = self.inner.traffic.lock().await;
        let probes = t.probes.clone();
        for (id, probe) in probes {
            for link in probe.links().await {
                let labels = ProxyLabels {
                    direction: link.direction.as_str(),
                    proxy: link.proxy,
                    listener: link.listener,
                    upstream: link.upstream,
                };
                let f = &self.inner.families;
                let seen = t.counted.entry((id, labels.clone())).or_insert((0, 0));
                let received = f.proxy_received.get_or_create(&labels);
                received.inc_by(link.received_bytes.saturating_sub(seen.0));
                let sent = f.proxy_sent.get_or_create(&labels);
                sent.inc_by(link.sent_bytes.saturating_sub(seen.1));
                *seen = (seen.0.max(link.received_bytes), seen.1.max(link.sent_bytes));
            }
        }
    }

    /// The OpenMetrics text of every family now, ending with `# EOF`.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail; the registry holds only encodable metrics.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.inner.registry) {
            tracing::warn!("live metrics: cannot encode: {e}");
        }
        out
    }
}

/// What one strategy run has added to the shared series so far.
#[derive(Debug, Default)]
struct Added {
    /// To `lockbench_ops_total`, in [`OPS`] order.
    ops: [u64; 5],
    latency: Buckets,
    /// To `lockbench_holders`, per resource index.
    holders: Vec<u64>,
}

/// One strategy run's view of the [`LiveMetrics`]: it adds what the run measured since its
/// last update, so runs of one strategy at the same time add up instead of overwriting.
pub struct StrategyMeter {
    live: LiveMetrics,
    strategy: String,
    added: Mutex<Added>,
}

impl std::fmt::Debug for StrategyMeter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StrategyMeter")
            .field("strategy", &self.strategy)
            .finish_non_exhaustive()
    }
}

impl StrategyMeter {
    fn labels(&self) -> StrategyLabels {
        StrategyLabels {
            strategy: self.strategy.clone(),
        }
    }

    /// Copies the run's figures so far: `summary` (made from `collector` by
    /// [`StrategySummary::from_collector`]) for the counts and the harness's health,
    /// `collector` for the latency buckets and the holders per resource. The harness gauges
    /// show the latest update of any run of the strategy.
    pub fn update(&self, summary: &StrategySummary, collector: &Collector) {
        let f = &self.live.inner.families;
        let mut added = self.added.lock().unwrap_or_else(|p| p.into_inner());
        for (i, n) in op_counts(summary).into_iter().enumerate() {
            let (op, outcome) = OPS[i];
            let labels = OpLabels {
                strategy: self.strategy.clone(),
                op,
                outcome,
            };
            let counter = f.ops.get_or_create(&labels);
            counter.inc_by(n.saturating_sub(added.ops[i]));
            added.ops[i] = added.ops[i].max(n);
        }
        let labels = self.labels();
        let now = Buckets::from_histogram_us(&collector.acquire_ok);
        f.acquire_latency
            .get_or_create(&labels)
            .add(&now.minus(&added.latency));
        added.latency = now;
        let shown = added.holders.len();
        if shown < collector.holders.len() {
            added.holders.resize(collector.holders.len(), 0);
        }
        for (i, &n) in collector.holders.iter().enumerate() {
            let before = added.holders[i];
            // A new resource shows (at 0 too) from its first update on; an unchanged one
            // costs no lookup.
            if n == before && i < shown {
                continue;
            }
            let g = f.holders.get_or_create(&self.resource(i));
            let delta =
                i64::try_from(n).unwrap_or(i64::MAX) - i64::try_from(before).unwrap_or(i64::MAX);
            g.inc_by(delta);
            added.holders[i] = n;
        }
        let h = &summary.harness;
        let secs = |us: u64| us as f64 / 1e6;
        f.lag_last_second
            .get_or_create(&labels)
            .set(secs(collector.last_second_lag_us()));
        f.lag_p99
            .get_or_create(&labels)
            .set(secs(h.scheduler_lag.p99_us));
        f.lag_max
            .get_or_create(&labels)
            .set(secs(h.scheduler_lag.max_us));
        f.ledger_queue_max
            .get_or_create(&labels)
            .set(h.ledger_queue_max.try_into().unwrap_or(i64::MAX));
        f.overloaded
            .get_or_create(&labels)
            .set(i64::from(h.overloaded));
    }

    /// The checker's anomaly counts of this run (set once, after the check).
    pub fn checked(&self, check: &CheckSummary) {
        for (kind, &n) in &check.anomaly_counts {
            self.live
                .inner
                .families
                .anomalies
                .get_or_create(&AnomalyLabels {
                    strategy: self.strategy.clone(),
                    kind: kind.clone(),
                })
                .set(n.try_into().unwrap_or(i64::MAX));
        }
    }

    /// Counts the anomalies of the ledger this run writes at `path` (its `ledger.sqlite`) while
    /// it writes them, into `lockbench_ledger_anomalies_total`; [`LedgerWatcher::finish`] once
    /// the ledger has closed.
    pub fn watch_ledger(&self, path: std::path::PathBuf) -> LedgerWatcher {
        LedgerWatcher::start(self.live.clone(), self.strategy.clone(), path)
    }

    fn resource(&self, i: usize) -> ResourceLabels {
        ResourceLabels {
            strategy: self.strategy.clone(),
            resource: crate::driver::Workload::resource_name(i as u32),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::{Sample, SampleKind};
    use std::time::Duration;

    fn sample(kind: SampleKind, us: u64, resource: Option<u32>) -> Sample {
        Sample {
            kind,
            latency_us: us,
            at: Duration::from_millis(10),
            resource,
        }
    }

    /// The value of the sample line `name{labels} value`, labels given in encoding order.
    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .map(|v| v.parse().expect("a number"))
    }

    #[test]
    fn counts_latency_and_holders_come_from_the_collector() {
        let live = LiveMetrics::new();
        let meter = live.strategy("redlock");
        let mut c = Collector::default();
        for us in [50, 300, 2_000, 2_000_000, 20_000_000] {
            c.record(sample(SampleKind::AcquireOk, us, Some(1)));
        }
        c.record(sample(SampleKind::AcquireContended, 40, None));
        c.record(sample(SampleKind::AcquireError("x".into()), 40, None));
        c.record(sample(SampleKind::Release, 40, None));
        c.record(sample(SampleKind::ReleaseError("lost".into()), 40, None));
        c.record(sample(SampleKind::CriticalSection, 40, Some(1)));
        c.record(sample(SampleKind::SectionAbandoned, 40, Some(1)));
        let s = StrategySummary::from_collector(&c, "redlock", Duration::from_secs(1));
        meter.update(&s, &c);
        let text = live.encode();
        let ops = |op: &str, outcome: &str| {
            value(
                &text,
                &format!(
                    "lockbench_ops_total{{strategy=\"redlock\",op=\"{op}\",outcome=\"{outcome}\"}}"
                ),
            )
        };
        assert_eq!(ops("acquire", "ok"), Some(5.0));
        assert_eq!(ops("acquire", "busy"), Some(1.0));
        assert_eq!(ops("acquire", "error"), Some(1.0));
        assert_eq!(ops("release", "ok"), Some(1.0));
        assert_eq!(ops("release", "error"), Some(1.0));
        let bucket = |le: &str| {
            value(
                &text,
                &format!(
                    "lockbench_acquire_latency_seconds_bucket{{le=\"{le}\",strategy=\"redlock\"}}"
                ),
            )
        };
        // Cumulative: 50 µs ≤ 100 µs; 300 µs ≤ 500 µs; 2 ms ≤ 2.5 ms; 2 s ≤ 2.5 s; 20 s only +Inf.
        assert_eq!(bucket("0.0001"), Some(1.0));
        assert_eq!(bucket("0.00025"), Some(1.0));
        assert_eq!(bucket("0.0005"), Some(2.0));
        assert_eq!(bucket("0.0025"), Some(3.0));
        assert_eq!(bucket("2.5"), Some(4.0));
        assert_eq!(bucket("10.0"), Some(4.0));
        assert_eq!(bucket("+Inf"), Some(5.0));
        assert_eq!(
            value(
                &text,
                "lockbench_acquire_latency_seconds_count{strategy=\"redlock\"}"
            ),
            Some(5.0)
        );
        let sum = value(
            &text,
            "lockbench_acquire_latency_seconds_sum{strategy=\"redlock\"}",
        )
        .unwrap();
        assert!((sum - 22.00235).abs() < 22.0 * 0.001, "sum {sum}");
        // Five acquires of r1, one released, one abandoned: three still believe.
        assert_eq!(
            value(
                &text,
                "lockbench_holders{strategy=\"redlock\",resource=\"r1\"}"
            ),
            Some(3.0)
        );
        // r0 was never held, but a higher index was: it shows 0; r2 does not show.
        assert_eq!(
            value(
                &text,
                "lockbench_holders{strategy=\"redlock\",resource=\"r0\"}"
            ),
            Some(0.0)
        );
        assert!(!text.contains("resource=\"r2\""), "{text}");
    }

    #[test]
    fn runs_of_a_strategy_add_up_also_when_they_overlap() {
        let live = LiveMetrics::new();
        // Two runs at once (matrix trials), each ticking twice with the same figures.
        let meters = [live.strategy("single"), live.strategy("single")];
        let mut c = Collector::default();
        for _ in 0..3 {
            c.record(sample(SampleKind::AcquireOk, 1_000, Some(0)));
        }
        let s = StrategySummary::from_collector(&c, "single", Duration::from_secs(1));
        for m in &meters {
            m.update(&s, &c);
        }
        for m in &meters {
            m.update(&s, &c);
        }
        // One of them releases its three holds.
        c.record(sample(SampleKind::CriticalSection, 5, Some(0)));
        c.record(sample(SampleKind::CriticalSection, 5, Some(0)));
        c.record(sample(SampleKind::CriticalSection, 5, Some(0)));
        meters[0].update(&s, &c);
        let text = live.encode();
        assert_eq!(
            value(
                &text,
                "lockbench_ops_total{strategy=\"single\",op=\"acquire\",outcome=\"ok\"}"
            ),
            Some(6.0)
        );
        assert_eq!(
            value(
                &text,
                "lockbench_acquire_latency_seconds_count{strategy=\"single\"}"
            ),
            Some(6.0)
        );
        assert_eq!(
            value(
                &text,
                "lockbench_holders{strategy=\"single\",resource=\"r0\"}"
            ),
            Some(3.0)
        );
    }

    #[test]
    fn the_text_is_openmetrics_with_types_units_and_eof() {
        let live = LiveMetrics::new();
        live.fault("partition", true);
        live.fault("partition", true);
        live.fault("partition", false);
        live.fault("client-pause", false); // healed without an open window: stays 0
        let meter = live.strategy("single");
        let mut c = Collector::default();
        c.record(sample(SampleKind::AcquireOk, 10, Some(0)));
        meter.update(
            &StrategySummary::from_collector(&c, "single", Duration::from_secs(1)),
            &c,
        );
        let mut check = CheckSummary {
            verdict: crate::checker::Verdict::Invalid,
            liveness: crate::checker::Liveness::Live,
            unknown_reasons: Vec::new(),
            anomaly_counts: Default::default(),
            stats: Default::default(),
        };
        check.anomaly_counts.insert("mutex-violation".into(), 4);
        meter.checked(&check);
        let text = live.encode();
        assert!(text.ends_with("# EOF\n"), "{text}");
        for line in [
            "# TYPE lockbench_ops counter",
            "# TYPE lockbench_acquire_latency_seconds histogram",
            "# UNIT lockbench_acquire_latency_seconds seconds",
            "# TYPE lockbench_holders gauge",
            "# TYPE lockbench_harness_lag_max_seconds gauge",
            "# UNIT lockbench_harness_lag_max_seconds seconds",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?}:\n{text}");
        }
        assert_eq!(
            value(&text, "lockbench_faults_active{kind=\"partition\"}"),
            Some(1.0)
        );
        assert_eq!(
            value(&text, "lockbench_faults_active{kind=\"client-pause\"}"),
            Some(0.0)
        );
        assert_eq!(
            value(
                &text,
                "lockbench_checker_anomalies{strategy=\"single\",kind=\"mutex-violation\"}"
            ),
            Some(4.0)
        );
    }
}
