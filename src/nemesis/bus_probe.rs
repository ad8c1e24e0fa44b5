//! [`BusProbe`]: what a cluster-bus partition does, measured while it lasts. Every
//! [`PROBE_PERIOD`] it sends `SET <prefix>:bus-probe:{tag}:<n> 1 NX PX 2000` straight to each
//! primary on the cut side (a key in a slot that primary serves; the probe connects from
//! 127.0.0.1, which the cut leaves alone) and asks a node of the other side for `CLUSTER
//! NODES`. At the heal it reports, in ms after the cut: until when each cut primary accepted
//! the `SET NX`, from when it refused (and with what error), and when the other side named
//! another primary for that primary's slots (the promotion).

use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::node::{ConnectOptions, NodeEndpoint};
use crate::topology::cluster::{ask_cluster_nodes, parse_cluster_nodes, resource_slot};
use crate::topology::ShardLayout;

/// How often the probe writes and asks.
pub const PROBE_PERIOD: Duration = Duration::from_millis(20);

/// One primary on the cut side, and what it did.
#[derive(Debug, Clone)]
struct CutPrimary {
    name: String,
    endpoint: NodeEndpoint,
    /// A hash tag whose slot the primary served at the cut.
    tag: String,
    slot: u16,
    last_ok: Option<Duration>,
    first_refusal: Option<(Duration, String)>,
    promoted: Option<(Duration, String)>,
}

/// What the probe needs: the cut side's primaries (name, direct endpoint, their shard at the
/// cut), the other side's nodes (direct endpoints), the announced addresses and the key
/// prefix.
#[derive(Debug, Clone)]
pub struct ProbeTargets {
    /// Primaries on the cut side, each with its shard as it was at the cut.
    pub cut_primaries: Vec<(NodeEndpoint, ShardLayout)>,
    /// Nodes of the other side, asked for `CLUSTER NODES` in turn.
    pub observers: Vec<NodeEndpoint>,
    /// The nodes' announced addresses ([`crate::topology::Topology::cluster_announce`]).
    pub announce: Vec<(String, u16)>,
    /// Prefix of the probe's keys (the run's).
    pub key_prefix: String,
}

/// The running probe of one bus partition; [`BusProbe::finish`] stops it and reports.
#[derive(Debug)]
pub struct BusProbe {
    stop: watch::Sender<bool>,
    task: JoinHandle<String>,
}

/// A hash tag whose slot `shard` serves (`bus0`, `bus1`, …).
fn tag_on(shard: &ShardLayout) -> Option<(String, u16)> {
    (0..100_000)
        .map(|i| format!("bus{i}"))
        .map(|t| {
            let slot = resource_slot(&t);
            (t, slot)
        })
        .find(|(_, slot)| shard.owns(*slot))
}

impl BusProbe {
    /// Starts probing; times are counted from `cut` (the instant the cut was in place).
    pub fn start(targets: ProbeTargets, cut: Instant) -> Self {
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut primaries: Vec<CutPrimary> = targets
                .cut_primaries
                .iter()
                .filter_map(|(endpoint, shard)| {
                    let (tag, slot) = tag_on(shard)?;
                    Some(CutPrimary {
                        name: shard.primary.clone(),
                        endpoint: endpoint.clone(),
                        tag,
                        slot,
                        last_ok: None,
                        first_refusal: None,
                        promoted: None,
                    })
                })
                .collect();
            let opts = ConnectOptions {
                connect_timeout: Duration::from_millis(250),
                response_timeout: Duration::from_millis(250),
            };
            let mut n: u64 = 0;
            let mut tick = tokio::time::interval(PROBE_PERIOD);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stopped.changed() => break,
                }
                for p in &mut primaries {
                    n += 1;
                    let key = format!("{}:bus-probe:{{{}}}:{n}", targets.key_prefix, p.tag);
                    let wrote = async {
                        let mut conn = p.endpoint.connect_direct(&opts).await?;
                        redis::cmd("SET")
                            .arg(&key)
                            .arg(1)
                            .arg("NX")
                            .arg("PX")
                            .arg(2000)
                            .query_async::<Option<String>>(&mut conn)
                            .await
                    };
                    let at = cut.elapsed();
                    match wrote.await {
                        Ok(_) => p.last_ok = Some(at),
                        Err(e) => {
                            p.first_refusal.get_or_insert((at, e.to_string()));
                        }
                    }
                }
                if primaries.iter().all(|p| p.promoted.is_some()) {
                    continue;
                }
                let at = cut.elapsed();
                let mut seen = None;
                for o in &targets.observers {
                    if let Ok(text) = ask_cluster_nodes(o).await {
                        if let Ok(layout) = parse_cluster_nodes(&text, &targets.announce) {
                            seen = Some(layout);
                            break;
                        }
                    }
                }
                for p in primaries.iter_mut().filter(|p| p.promoted.is_none()) {
                    let now = seen
                        .iter()
                        .flatten()
                        .find(|s| s.owns(p.slot))
                        .filter(|s| s.primary != p.name);
                    if let Some(s) = now {
                        p.promoted = Some((at, s.primary.clone()));
                    }
                }
            }
            report(&primaries, cut.elapsed())
        });
        Self { stop, task }
    }

    /// Stops the probe and returns its report (one clause per cut primary, `;`-separated).
    pub async fn finish(self) -> String {
        let _ = self.stop.send(true);
        self.task
            .await
            .unwrap_or_else(|e| format!("bus probe failed: {e}"))
    }
}

fn report(primaries: &[CutPrimary], lasted: Duration) -> String {
    let ms = |d: Duration| d.as_millis();
    if primaries.is_empty() {
        return "no primary on the cut side".into();
    }
    primaries
        .iter()
        .map(|p| {
            let writes = match (&p.last_ok, &p.first_refusal) {
                (Some(ok), Some((at, e))) => format!(
                    "{} accepted SET NX until +{} ms, refused from +{} ms ({})",
                    p.name,
                    ms(*ok),
                    ms(*at),
                    short(e)
                ),
                (Some(ok), None) => format!(
                    "{} accepted SET NX throughout (last at +{} ms)",
                    p.name,
                    ms(*ok)
                ),
                (None, Some((at, e))) => format!(
                    "{} refused SET NX from +{} ms ({})",
                    p.name,
                    ms(*at),
                    short(e)
                ),
                (None, None) => format!("{} was not probed", p.name),
            };
            let promoted = match &p.promoted {
                Some((at, by)) => format!("the other side promoted {by} at +{} ms", ms(*at)),
                None => format!("the other side promoted no node within {} ms", ms(lasted)),
            };
            format!("{writes}; {promoted}")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The first words of an error (`CLUSTERDOWN: The cluster is down`).
fn short(e: &str) -> String {
    e.chars().take(60).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn primary() -> CutPrimary {
        CutPrimary {
            name: "n1".into(),
            endpoint: NodeEndpoint::new("n1", "redis://127.0.0.1:1"),
            tag: "bus0".into(),
            slot: 0,
            last_ok: Some(Duration::from_millis(1480)),
            first_refusal: Some((Duration::from_millis(1500), "CLUSTERDOWN x".into())),
            promoted: Some((Duration::from_millis(2600), "n5".into())),
        }
    }

    #[test]
    fn the_report_names_the_times_after_the_cut() {
        assert_eq!(
            report(&[primary()], Duration::from_secs(4)),
            "n1 accepted SET NX until +1480 ms, refused from +1500 ms (CLUSTERDOWN x); the \
             other side promoted n5 at +2600 ms"
        );
        let mut p = primary();
        p.first_refusal = None;
        p.promoted = None;
        assert_eq!(
            report(&[p], Duration::from_millis(800)),
            "n1 accepted SET NX throughout (last at +1480 ms); the other side promoted no \
             node within 800 ms"
        );
    }

    #[test]
    fn a_probe_tag_lands_on_the_shard() {
        let shard = ShardLayout {
            primary: "n2".into(),
            replicas: vec![],
            slots: vec![(5461, 10922)],
        };
        let (tag, slot) = tag_on(&shard).unwrap();
        assert!(shard.owns(slot));
        assert_eq!(resource_slot(&tag), slot);
    }
}
