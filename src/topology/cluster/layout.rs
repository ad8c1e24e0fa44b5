//! A running cluster's shape: which primary owns which slots ([`ShardLayout`]), read from
//! `CLUSTER NODES`; the key-to-slot hash.

use std::collections::BTreeMap;

use super::{admin, Topology, TopologyError, SLOTS};
use crate::node::NodeEndpoint;

/// One shard as the cluster reports it now.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ShardLayout {
    /// The node serving the shard's slots (`n1`..).
    pub primary: String,
    /// Its replicas.
    pub replicas: Vec<String>,
    /// Slot ranges, inclusive (`[first, last]`).
    pub slots: Vec<(u16, u16)>,
}

impl ShardLayout {
    /// True when `slot` is in one of the shard's ranges.
    pub fn owns(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| (a..=b).contains(&slot))
    }
}

/// The hash slot of `key`: CRC16 (XMODEM) of its hash tag (the part between the first `{`
/// and the next `}`, if not empty) or of the whole key, modulo [`SLOTS`] (the Redis Cluster
/// specification, "Keys distribution model").
pub fn key_slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = bytes.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &bytes[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16::State::<crc16::XMODEM>::calculate(tagged.unwrap_or(bytes)) % SLOTS
}

/// The slot of every key of `resource` with hash-tagged keys (`…{resource}`).
pub fn resource_slot(resource: &str) -> u16 {
    key_slot(&format!("{{{resource}}}"))
}

/// Reads `CLUSTER NODES` into shards, naming nodes by their announced address
/// (`announce[i]` is `n{i+1}`). Nodes flagged `fail` or `noaddr` are left out; so is a
/// primary without slots.
///
/// # Errors
/// A message naming a line that does not parse or an address no node announces.
pub fn parse_cluster_nodes(
    text: &str,
    announce: &[(String, u16)],
) -> Result<Vec<ShardLayout>, String> {
    let name_of = |addr: &str| -> Result<String, String> {
        let host_port = addr.split(['@', ',']).next().unwrap_or(addr);
        let (host, port) = host_port
            .rsplit_once(':')
            .ok_or_else(|| format!("address {addr:?} is not host:port"))?;
        let port: u16 = port
            .parse()
            .map_err(|_| format!("address {addr:?}: bad port"))?;
        announce
            .iter()
            .position(|(h, p)| h == host && *p == port)
            .map(|i| format!("n{}", i + 1))
            .ok_or_else(|| format!("address {host_port} is not announced by any node"))
    };
    let mut primaries: BTreeMap<String, ShardLayout> = BTreeMap::new();
    let mut replica_of: Vec<(String, String)> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 8 {
            return Err(format!(
                "CLUSTER NODES line {line:?} has fewer than 8 fields"
            ));
        }
        let (id, addr, flags, master) = (fields[0], fields[1], fields[2], fields[3]);
        if flags.split(',').any(|f| f == "fail" || f == "noaddr") {
            continue;
        }
        let name = name_of(addr)?;
        if flags.split(',').any(|f| f == "master") {
            let mut slots = Vec::new();
            for s in &fields[8..] {
                if s.starts_with('[') {
                    continue; // a slot being migrated or imported
                }
                let (a, b) = s.split_once('-').unwrap_or((s, s));
                let parse = |x: &str| {
                    x.parse::<u16>()
                        .map_err(|_| format!("slot range {s:?} in line {line:?}"))
                };
                slots.push((parse(a)?, parse(b)?));
            }
            primaries.insert(
                id.to_string(),
                ShardLayout {
                    primary: name,
                    replicas: Vec::new(),
                    slots,
                },
            );
        } else {
            replica_of.push((name, master.to_string()));
        }
    }
    for (name, master) in replica_of {
        if let Some(shard) = primaries.get_mut(&master) {
            shard.replicas.push(name);
        }
    }
    let mut shards: Vec<ShardLayout> = primaries
        .into_values()
        .filter(|s| !s.slots.is_empty())
        .collect();
    for s in &mut shards {
        s.replicas.sort_by_key(|n| node_number(n));
    }
    shards.sort_by_key(|s| s.slots.first().copied());
    Ok(shards)
}

fn node_number(name: &str) -> usize {
    name.trim_start_matches('n').parse().unwrap_or(usize::MAX)
}

impl Topology {
    /// The shards as a live node reports them now (`CLUSTER NODES`, asked of each node in
    /// turn until one answers; nodes flagged failing left out).
    ///
    /// # Errors
    /// [`TopologyError::ClusterNotReady`] when no node answers or the reply does not parse
    /// (`cluster` kind only: else an empty list).
    pub async fn cluster_layout(&self) -> Result<Vec<ShardLayout>, TopologyError> {
        let Some(group) = &self.cluster else {
            return Ok(Vec::new());
        };
        let mut last = String::from("no node");
        for node in self.data_endpoints() {
            match ask_cluster_nodes(&node).await {
                Ok(text) => {
                    return parse_cluster_nodes(&text, &group.announce).map_err(|reason| {
                        TopologyError::ClusterNotReady {
                            waited_ms: 0,
                            reason: format!("{}: {reason}", node.name),
                        }
                    })
                }
                Err(e) => last = format!("{}: {e}", node.name),
            }
        }
        Err(TopologyError::ClusterNotReady {
            waited_ms: 0,
            reason: format!("no node answered CLUSTER NODES (last: {last})"),
        })
    }

    /// The node serving `resource`'s slot now (its keys are hash-tagged, see
    /// [`resource_slot`]).
    ///
    /// # Errors
    /// As [`Topology::cluster_layout`]; [`TopologyError::ClusterNotReady`] when no shard owns
    /// the slot.
    pub async fn cluster_primary_of(&self, resource: &str) -> Result<String, TopologyError> {
        let slot = resource_slot(resource);
        self.cluster_layout()
            .await?
            .into_iter()
            .find(|s| s.owns(slot))
            .map(|s| s.primary)
            .ok_or_else(|| TopologyError::ClusterNotReady {
                waited_ms: 0,
                reason: format!("no live primary serves slot {slot} (resource {resource})"),
            })
    }
}

/// `CLUSTER NODES` asked of `node` directly (short admin timeouts).
///
/// # Errors
/// The connection or the command failed.
pub async fn ask_cluster_nodes(node: &NodeEndpoint) -> Result<String, redis::RedisError> {
    let mut conn = node.connect_direct(&admin()).await?;
    redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async::<String>(&mut conn)
        .await
}
