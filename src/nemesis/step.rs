//! The nemesis' vocabulary: a [`FaultStep`] is one `[[nemesis]]` step of a scenario (a
//! [`FaultKind`] on a [`Target`] at an offset, for a while, with the fault's parameters).
//! Parameters with a fixed set of values are enums ([`PartitionMode`], [`Link`],
//! [`FailoverMethod`]), so a value the nemesis does not know is rejected where it is parsed,
//! and durations go through [`crate::duration_ms`]: a step round-trips exactly through serde.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Fault kinds of the nemesis catalogue ([`super::catalogue`]). Names through the strum
/// derives, by the same rule as serde ([`crate::variant_names`]).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Deserialize,
    Serialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum FaultKind {
    /// Latency (+ jitter) toxic on the target nodes' proxies.
    Latency,
    /// Bandwidth toxic on the target nodes' proxies: at most `rate` KB/s downstream.
    Bandwidth,
    /// Cut the target links: `mode = "blackhole"` (timeout toxic) or `"refuse"` (proxy disabled).
    Partition,
    /// kill -9 the target nodes; restart after `duration` (empty without persistence).
    Kill,
    /// SIGSTOP the target nodes; SIGCONT after `duration`.
    PauseNode,
    /// Fail the Sentinel primary over (`method = "kill-primary"` or `"sentinel"`).
    Failover,
    /// Jump the target nodes' clocks forward by `delta` (every key's TTL shortened by delta).
    ClockJump,
    /// Pause the target clients for `duration`, freezing their lease renewal (a GC pause).
    ClientPause,
    /// Make the target clients' critical sections `extra` longer; renewal keeps running.
    SlowWork,
    /// The target clients crash the next time they hold a lease (no release). For a strategy
    /// with a crash point inside its acquire (`setnx-expire`), the crash lands there, in the
    /// next acquire: after `SETNX` set the key, before `PEXPIRE` gives it an expiry.
    ClientCrash,
    /// The target clients make no new acquire attempt for `duration` (a client that has not
    /// started yet, or is away); an acquire already under way and a lease already held go on
    /// as usual. With `at = "0s"` a client joins the run only at the end of the window, so it
    /// has no attempt of its own in flight (or left behind on a node) when a fault strikes.
    ClientAbsent,
    /// Move the hash slot of `resource`'s keys (lock key and fencing counter, one slot by their
    /// hash tag) to the target primary's shard, as `redis-cli --cluster reshard` does
    /// (`cluster` only): `CLUSTER SETSLOT … IMPORTING` / `MIGRATING`, the keys moved with
    /// `MIGRATE … KEYS` in batches, then, after `duration`, `CLUSTER SETSLOT … NODE` on every
    /// primary. Clients are redirected with `ASK` in the window and `MOVED` after it.
    MigrateSlot,
}

impl FaultKind {
    /// The name in scenario files and fault windows (`pause-node`), as serde spells it.
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// How a `partition` cuts its links.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum PartitionMode {
    /// A `timeout` toxic with timeout 0 on both streams: data is dropped, connections stay open.
    #[default]
    Blackhole,
    /// The proxy is disabled: connections are closed, new ones refused.
    Refuse,
}

/// Which proxies a network fault (`latency`, `bandwidth`, `partition`) acts on.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum Link {
    /// The client↔node proxies `nX`.
    #[default]
    Client,
    /// The primary→replica replication proxies `nX-repl` (topology `sentinel`).
    Replication,
    /// The member↔member peer proxies `nX-peer` (topology `etcd`).
    Peer,
    /// The pooler→server proxy `nX-server` (topology `postgres` with a pooler): PgBouncer's
    /// connections to the server, while the clients still reach PgBouncer.
    Server,
    /// The cluster bus between the target nodes and every other node, both ways (topology
    /// `cluster`, `partition` only): kernel packet drops per pair of nodes
    /// ([`crate::topology::bus_cut`]); clients and replication are untouched unless
    /// `with_clients` is set.
    Bus,
}

/// How a `failover` makes the Sentinels (or the cluster) elect another primary.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum FailoverMethod {
    /// SIGKILL the current primary (restarted as a replica after `duration`).
    #[default]
    KillPrimary,
    /// `SENTINEL FAILOVER` (instant; the old primary stays up and becomes a replica).
    Sentinel,
    /// `CLUSTER FAILOVER` (default mode) sent to the primary's replica (`cluster` only): the
    /// primary stops its clients, the replica catches up with its replication offset, then
    /// takes over; the old primary stays up and becomes its replica. Redis aborts it when the
    /// replica cannot catch up within 5 s (`CLUSTER_MF_TIMEOUT`).
    ClusterFailover,
    /// `CLUSTER FAILOVER FORCE` sent to the primary's replica (`cluster` only): no handshake
    /// with the primary and no catch-up; the replica asks the other primaries for their votes
    /// at once and takes over with whatever it has replicated. The old primary stays up and
    /// becomes its replica once it learns the new configuration.
    ClusterFailoverForce,
    /// `CLUSTER FAILOVER TAKEOVER` sent to the primary's replica (`cluster` only): no
    /// handshake, no catch-up and no election either; the replica bumps its configuration
    /// epoch on its own and claims the primary's slots with whatever it has replicated.
    ClusterFailoverTakeover,
}

impl FailoverMethod {
    /// The `CLUSTER FAILOVER` mode argument of a cluster method (`""` for the default mode),
    /// `None` for the methods that are not `CLUSTER FAILOVER`.
    pub fn cluster_mode(self) -> Option<&'static str> {
        match self {
            FailoverMethod::ClusterFailover => Some(""),
            FailoverMethod::ClusterFailoverForce => Some("FORCE"),
            FailoverMethod::ClusterFailoverTakeover => Some("TAKEOVER"),
            FailoverMethod::KillPrimary | FailoverMethod::Sentinel => None,
        }
    }

    /// The topology this method needs, when it needs one (`sentinel` for `SENTINEL FAILOVER`,
    /// `cluster` for the `CLUSTER FAILOVER` modes); `None` for `kill-primary`.
    pub fn only_on(self) -> Option<crate::topology::TopologyKind> {
        use crate::topology::TopologyKind;
        match self {
            FailoverMethod::KillPrimary => None,
            FailoverMethod::Sentinel => Some(TopologyKind::Sentinel),
            _ => Some(TopologyKind::Cluster),
        }
    }
}

/// A parameter with a fixed set of values, read by name with a message that names the key and
/// every value (`` `mode` must be "blackhole" or "refuse", not "sideways" ``). Names come from
/// the strum derives, by the serde rule ([`crate::variant_names`]).
trait Choice: Copy + 'static + strum::VariantArray + Into<&'static str> {
    /// The key in scenario files.
    const KEY: &'static str;
}

fn choice<'de, D: Deserializer<'de>, T: Choice>(d: D) -> Result<T, D::Error> {
    let s = String::deserialize(d)?;
    let name = |v: T| -> &'static str { v.into() };
    T::VARIANTS
        .iter()
        .copied()
        .find(|&v| name(v) == s)
        .ok_or_else(|| {
            let names: Vec<String> = T::VARIANTS
                .iter()
                .map(|&v| format!("{:?}", name(v)))
                .collect();
            serde::de::Error::custom(format!(
                "`{}` must be {}, not {s:?}",
                T::KEY,
                names.join(" or ")
            ))
        })
}

macro_rules! choice_param {
    ($ty:ty, $key:literal) => {
        impl Choice for $ty {
            const KEY: &'static str = $key;
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                choice(d)
            }
        }

        impl $ty {
            /// The name in scenario files.
            pub fn name(self) -> &'static str {
                self.into()
            }
        }
    };
}

choice_param!(PartitionMode, "mode");
choice_param!(Link, "link");
choice_param!(FailoverMethod, "method");

/// The clients a `link = "bus"` partition leaves on the target nodes' side (`with_clients`):
/// those reach only the target nodes, every other client reaches every node but them.
/// Written `"none"` (the target nodes are cut off every client), `"client:0"`,
/// `"clients:0,1"` or `"holder"` (the clients inside a critical section when the step starts,
/// or the first to enter one, resolved as `target = "holder"` is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientSide {
    /// These clients (none for `"none"`).
    Clients(Vec<u32>),
    /// The holder when the step starts.
    Holder,
}

impl ClientSide {
    /// The client target this side names (`clients:…` or `holder`), as a client fault's
    /// `target` would, for resolving it when the step starts.
    pub fn target(&self) -> Target {
        match self {
            ClientSide::Clients(ids) => Target::Clients(ids.clone()),
            ClientSide::Holder => Target::Holder,
        }
    }
}

impl FromStr for ClientSide {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim() == "none" {
            return Ok(ClientSide::Clients(Vec::new()));
        }
        match s.parse::<Target>() {
            Ok(Target::Clients(ids)) => Ok(ClientSide::Clients(ids)),
            Ok(Target::Holder) => Ok(ClientSide::Holder),
            Ok(_) => Err(format!(
                "`with_clients` = {s:?}: write \"none\", \"client:0\", \"clients:0,1\" or \"holder\""
            )),
            Err(e) => Err(e),
        }
    }
}

impl fmt::Display for ClientSide {
    /// The scenario-file form [`ClientSide::from_str`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientSide::Clients(ids) if ids.is_empty() => f.write_str("none"),
            other => other.target().fmt(f),
        }
    }
}

impl Serialize for ClientSide {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ClientSide {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ClientSide::from_str(&s).map_err(serde::de::Error::custom)
    }
}

/// The node target naming the (first) replica of the shard that serves `r0`'s slot, as it is
/// when the fault starts (`cluster` only), as `primary` names that shard's primary.
pub const REPLICA: &str = "replica";

/// What a fault acts on. Written and read as in scenario files (`target = "clients:0,1"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Named nodes (`n1`, `primary`, `replica` (cluster), …).
    Nodes(Vec<String>),
    /// The largest minority of nodes (2 of 5, 0 of 1).
    Minority,
    /// A majority of nodes (3 of 5).
    Majority,
    /// Every node.
    AllNodes,
    /// The Sentinel primary.
    Primary,
    /// Client ids.
    Clients(Vec<u32>),
    /// The client(s) inside a critical section when the fault starts; if none is inside at
    /// that instant, the first to enter one (client faults only).
    Holder,
    /// A `lockbench worker` process of a multi-worker run (`worker:1`, slot index): its
    /// process for `client-pause` (SIGSTOP) and `client-crash` (SIGKILL); with `nodes`
    /// (`worker:1/n3,n4,n5`, `worker:1/majority`) or without (every node), its own proxies to
    /// those nodes (`nX-wI`) for `partition` and `latency`.
    Worker {
        /// The worker's slot index.
        worker: u32,
        /// The nodes whose links a network fault acts on (`None`: every node).
        nodes: Option<Box<Target>>,
    },
}

impl FromStr for Target {
    type Err = String;

    /// `n1` · `n1,n2` · `minority` · `majority` · `all` · `primary` · `client:0` · `clients:0,1`
    /// · `holder` · `worker:1` · `worker:1/n3,n4,n5` · `worker:1/majority`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if let Some(rest) = s.strip_prefix("worker:") {
            let (index, nodes) = match rest.split_once('/') {
                Some((i, n)) => (i, Some(n)),
                None => (rest, None),
            };
            let worker = index.trim().parse::<u32>().map_err(|_| {
                format!("bad worker index {index:?} in target {s:?} (worker:1, worker:1/n3,n4)")
            })?;
            let nodes = match nodes.map(Target::from_str).transpose()? {
                None => None,
                Some(t @ (Target::Nodes(_) | Target::Minority | Target::Majority | Target::AllNodes)) => {
                    Some(Box::new(t))
                }
                Some(other) => {
                    return Err(format!(
                        "target {s:?}: after `worker:{worker}/` come nodes (n1,n2, minority, majority, all), not {other}"
                    ))
                }
            };
            return Ok(Target::Worker { worker, nodes });
        }
        let list = |rest: &str| -> Result<Vec<u32>, String> {
            rest.split(',')
                .map(|x| {
                    x.trim()
                        .parse::<u32>()
                        .map_err(|_| format!("bad client id {x:?} in target {s:?}"))
                })
                .collect()
        };
        Ok(match s {
            "minority" => Target::Minority,
            "majority" => Target::Majority,
            "all" => Target::AllNodes,
            "primary" => Target::Primary,
            "holder" => Target::Holder,
            _ if s.starts_with("clients:") => Target::Clients(list(&s[8..])?),
            _ if s.starts_with("client:") => Target::Clients(list(&s[7..])?),
            _ if !s.is_empty() => Target::Nodes(s.split(',').map(|n| n.trim().to_string()).collect()),
            _ => {
                return Err(
                    "empty target: use n1, n1,n2, minority, majority, all, primary, client:0, clients:0,1, holder, worker:1 or worker:1/n3,n4"
                        .into(),
                )
            }
        })
    }
}

impl fmt::Display for Target {
    /// The scenario-file form [`Target::from_str`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |ids: &[u32]| ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        match self {
            Target::Nodes(names) => f.write_str(&names.join(",")),
            Target::Minority => f.write_str("minority"),
            Target::Majority => f.write_str("majority"),
            Target::AllNodes => f.write_str("all"),
            Target::Primary => f.write_str("primary"),
            Target::Clients(ids) if ids.len() == 1 => write!(f, "client:{}", join(ids)),
            Target::Clients(ids) => write!(f, "clients:{}", join(ids)),
            Target::Holder => f.write_str("holder"),
            Target::Worker {
                worker,
                nodes: None,
            } => write!(f, "worker:{worker}"),
            Target::Worker {
                worker,
                nodes: Some(n),
            } => write!(f, "worker:{worker}/{n}"),
        }
    }
}

impl Serialize for Target {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Target::from_str(&s).map_err(serde::de::Error::custom)
    }
}

/// One step of the nemesis schedule, as a scenario's `[[nemesis]]` table writes it. Which
/// parameters a fault takes, on which targets and topologies, is checked by
/// [`FaultStep::check`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FaultStep {
    /// Start, as an offset from the strategy's start.
    #[serde(with = "crate::duration_ms")]
    pub at: Duration,
    /// How long until the fault is healed; `None` for instant faults (crash, clock jump).
    #[serde(default, with = "crate::duration_ms::option")]
    pub duration: Option<Duration>,
    /// Which fault.
    pub fault: FaultKind,
    /// What it acts on.
    pub target: Target,
    /// Latency toxic value.
    #[serde(default, with = "crate::duration_ms::option")]
    pub latency: Option<Duration>,
    /// Latency toxic jitter.
    #[serde(default, with = "crate::duration_ms::option")]
    pub jitter: Option<Duration>,
    /// Bandwidth toxic rate, KB/s (1 KB = 1000 bytes; Toxiproxy's unit).
    #[serde(default)]
    pub rate: Option<u64>,
    /// Partition mode (default [`PartitionMode::Blackhole`]).
    #[serde(default)]
    pub mode: Option<PartitionMode>,
    /// Partition / latency link (default [`Link::Client`]).
    #[serde(default)]
    pub link: Option<Link>,
    /// Failover method (default [`FailoverMethod::KillPrimary`]).
    #[serde(default)]
    pub method: Option<FailoverMethod>,
    /// Clock jump size.
    #[serde(default, with = "crate::duration_ms::option")]
    pub delta: Option<Duration>,
    /// Extra critical-section time for slow-work.
    #[serde(default, with = "crate::duration_ms::option")]
    pub extra: Option<Duration>,
    /// For `kill`: stay down at least this long before restarting (delayed restart).
    #[serde(default, with = "crate::duration_ms::option")]
    pub restart_after: Option<Duration>,
    /// For `migrate-slot`: the resource whose slot moves (`r0`, `r1`, …; default `r0`).
    #[serde(default)]
    pub resource: Option<String>,
    /// For a `link = "bus"` partition: the clients on the target nodes' side.
    #[serde(default)]
    pub with_clients: Option<ClientSide>,
}

/// A key of a `[[nemesis]]` step that is a fault parameter (besides `at`, `fault`, `target`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    /// `duration`
    Duration,
    /// `latency`
    Latency,
    /// `jitter`
    Jitter,
    /// `rate`
    Rate,
    /// `mode`
    Mode,
    /// `link`
    Link,
    /// `method`
    Method,
    /// `delta`
    Delta,
    /// `extra`
    Extra,
    /// `restart_after`
    RestartAfter,
    /// `resource`
    Resource,
    /// `with_clients`
    WithClients,
}

impl Param {
    /// Every parameter, in the order of [`FaultStep`]'s fields.
    pub const ALL: [Param; 12] = [
        Param::Duration,
        Param::Latency,
        Param::Jitter,
        Param::Rate,
        Param::Mode,
        Param::Link,
        Param::Method,
        Param::Delta,
        Param::Extra,
        Param::RestartAfter,
        Param::Resource,
        Param::WithClients,
    ];

    /// The key in scenario files.
    pub fn key(self) -> &'static str {
        match self {
            Param::Duration => "duration",
            Param::Latency => "latency",
            Param::Jitter => "jitter",
            Param::Rate => "rate",
            Param::Mode => "mode",
            Param::Link => "link",
            Param::Method => "method",
            Param::Delta => "delta",
            Param::Extra => "extra",
            Param::RestartAfter => "restart_after",
            Param::Resource => "resource",
            Param::WithClients => "with_clients",
        }
    }
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

impl FaultStep {
    /// A step of `fault` on `target` at offset 0 with no parameters set (for code that builds
    /// schedules by hand; scenario files set the fields they need).
    pub fn new(fault: FaultKind, target: Target) -> Self {
        Self {
            at: Duration::ZERO,
            duration: None,
            fault,
            target,
            latency: None,
            jitter: None,
            rate: None,
            mode: None,
            link: None,
            method: None,
            delta: None,
            extra: None,
            restart_after: None,
            resource: None,
            with_clients: None,
        }
    }

    /// Whether this step waits for a holder when it starts: `target = "holder"` or
    /// `with_clients = "holder"`.
    pub fn aims_at_holder(&self) -> bool {
        self.target == Target::Holder || self.with_clients == Some(ClientSide::Holder)
    }

    /// Whether this step cuts clients off (a `partition` on `holder` or `clients:…`, or one
    /// with `with_clients`): the run
    /// then gives every client proxies of its own
    /// ([`crate::topology::ProxiedTopology::add_client_links`]).
    pub fn cuts_clients(&self) -> bool {
        self.fault == FaultKind::Partition
            && (matches!(self.target, Target::Holder | Target::Clients(_))
                || self.with_clients.is_some())
    }

    /// The step's value of `param` as written in a scenario file (`"50ms"`, `"refuse"`), or
    /// `None` when it is not set.
    pub fn value(&self, param: Param) -> Option<String> {
        let d = |v: Option<Duration>| v.map(crate::duration_ms::format);
        match param {
            Param::Duration => d(self.duration),
            Param::Latency => d(self.latency),
            Param::Jitter => d(self.jitter),
            Param::Rate => self.rate.map(|r| r.to_string()),
            Param::Mode => self.mode.map(|m| m.name().to_string()),
            Param::Link => self.link.map(|l| l.name().to_string()),
            Param::Method => self.method.map(|m| m.name().to_string()),
            Param::Delta => d(self.delta),
            Param::Extra => d(self.extra),
            Param::RestartAfter => d(self.restart_after),
            Param::Resource => self.resource.clone(),
            Param::WithClients => self.with_clients.as_ref().map(ToString::to_string),
        }
    }

    /// The resource a `migrate-slot` moves the slot of (`resource`, default `r0`).
    pub fn resource_or_default(&self) -> &str {
        self.resource.as_deref().unwrap_or("r0")
    }

    /// The parameters this step sets, in [`Param::ALL`] order.
    pub fn params_set(&self) -> Vec<Param> {
        Param::ALL
            .into_iter()
            .filter(|&p| self.value(p).is_some())
            .collect()
    }

    /// The step in one phrase, for errors: `partition on n1 at 2s`.
    pub fn describe(&self) -> String {
        format!(
            "{} on {} at {}",
            self.fault,
            self.target,
            crate::duration_ms::format(self.at)
        )
    }

    /// The parameters this step sets as `key = value` pairs (`latency = 50ms, link = replication`),
    /// empty when it sets none: the parameter part of a fault window's detail.
    pub fn parameters(&self) -> String {
        Param::ALL
            .into_iter()
            .filter_map(|p| self.value(p).map(|v| format!("{p} = {v}")))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_print_as_they_are_written() {
        for text in [
            "n1",
            "n1,n2",
            "minority",
            "majority",
            "all",
            "primary",
            "client:0",
            "clients:0,1",
            "holder",
            "worker:1",
            "worker:0/n3,n4,n5",
            "worker:2/majority",
        ] {
            let t: Target = text.parse().unwrap();
            assert_eq!(t.to_string(), text);
        }
        assert!("".parse::<Target>().is_err());
        assert!("clients:0,x".parse::<Target>().is_err());
        assert_eq!(
            "worker:1/n1,n2".parse::<Target>().unwrap(),
            Target::Worker {
                worker: 1,
                nodes: Some(Box::new(Target::Nodes(vec!["n1".into(), "n2".into()])))
            }
        );
        assert!("worker:x".parse::<Target>().is_err());
        let e = "worker:1/holder".parse::<Target>().unwrap_err();
        assert!(e.contains("after `worker:1/` come nodes"), "{e}");
    }

    #[test]
    fn names_are_the_serde_names() {
        for kind in crate::nemesis::catalogue::FAULTS.map(|f| f.kind) {
            let back: FaultKind =
                serde_json::from_value(serde_json::Value::String(kind.name().into())).unwrap();
            assert_eq!(back, kind);
            assert_eq!(kind.to_string(), kind.name());
        }
        crate::variant_names::assert_names_match_serde::<PartitionMode>();
        crate::variant_names::assert_names_match_serde::<Link>();
        crate::variant_names::assert_names_match_serde::<FailoverMethod>();
        let err = serde_json::from_value::<FailoverMethod>("cluster-failover-sideways".into())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "`method` must be \"kill-primary\" or \"sentinel\" or \"cluster-failover\" or \
             \"cluster-failover-force\" or \"cluster-failover-takeover\", not \
             \"cluster-failover-sideways\""
        );
        assert_eq!(
            serde_json::from_value::<FailoverMethod>("cluster-failover-takeover".into()).unwrap(),
            FailoverMethod::ClusterFailoverTakeover
        );
        assert_eq!(
            FailoverMethod::ClusterFailoverForce.cluster_mode(),
            Some("FORCE")
        );
        assert_eq!(FailoverMethod::KillPrimary.cluster_mode(), None);
        let err = serde_json::from_value::<Link>("sideways".into())
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "`link` must be \"client\" or \"replication\" or \"peer\" or \"server\" or \"bus\", \
             not \"sideways\""
        );
    }

    #[test]
    fn parameters_name_every_key_set() {
        let mut s = FaultStep::new(FaultKind::Partition, Target::Minority);
        assert_eq!(s.parameters(), "");
        s.duration = Some(Duration::from_millis(800));
        s.mode = Some(PartitionMode::Refuse);
        s.link = Some(Link::Replication);
        assert_eq!(
            s.parameters(),
            "duration = 800ms, mode = refuse, link = replication"
        );
        assert_eq!(s.params_set(), [Param::Duration, Param::Mode, Param::Link]);
    }

    #[test]
    fn client_sides_read_back_as_written() {
        for text in ["none", "client:0", "clients:0,2", "holder"] {
            let side: ClientSide = text.parse().unwrap();
            assert_eq!(side.to_string(), text);
        }
        assert_eq!(
            "none".parse::<ClientSide>().unwrap(),
            ClientSide::Clients(vec![])
        );
        let err = "primary".parse::<ClientSide>().unwrap_err();
        assert!(err.contains("write \"none\""), "{err}");
        assert_eq!(
            "holder".parse::<ClientSide>().unwrap().target(),
            Target::Holder
        );
        let mut s = FaultStep::new(FaultKind::Partition, Target::Primary);
        assert!(!s.cuts_clients());
        s.with_clients = Some(ClientSide::Clients(vec![1]));
        assert!(s.cuts_clients(), "its clients are cut on their own proxies");
        assert_eq!(s.parameters(), "with_clients = client:1");
    }

    #[test]
    fn a_step_round_trips_through_json() {
        let mut s = FaultStep::new(FaultKind::Latency, Target::Clients(vec![0, 3]));
        s.at = Duration::from_millis(1500);
        s.duration = Some(Duration::from_secs(2));
        s.latency = Some(Duration::from_micros(500));
        s.jitter = Some(Duration::from_micros(1_250));
        s.link = Some(Link::Peer);
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains(r#""latency":"500us""#), "{json}");
        assert!(json.contains(r#""target":"clients:0,3""#), "{json}");
        assert_eq!(serde_json::from_str::<FaultStep>(&json).unwrap(), s);
    }
}
