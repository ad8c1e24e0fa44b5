//! [`TopologyKind`]: which nodes a run uses, by name.

use std::str::FromStr;

use super::{ClusterSettings, TopologyError};

/// Which nodes a run uses. Parsed from and printed as `single`, `five`, `external`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    strum::Display,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum TopologyKind {
    /// One local node.
    Single,
    /// Five independent local nodes (for Redlock), no replication.
    Five,
    /// A primary, two replicas (async replication) and three Sentinels, all local.
    Sentinel,
    /// Nodes given by URL; never started, stopped or flushed by the suite.
    External,
    /// One local PostgreSQL server (`pg-advisory`, `pg-advisory-fenced`).
    Postgres,
    /// A three-member local etcd cluster (`etcd-lease`), peer traffic through proxies.
    Etcd,
    /// A local Redis Cluster: 3 primaries with one replica each by default.
    Cluster,
}

impl TopologyKind {
    /// Every valid name, in the order shown to users.
    pub const NAMES: [&'static str; 7] = [
        "single", "five", "sentinel", "external", "postgres", "etcd", "cluster",
    ];

    /// Number of nodes a local kind starts (`None` for external).
    pub fn local_node_count(self) -> Option<usize> {
        match self {
            TopologyKind::Single => Some(1),
            TopologyKind::Five => Some(5),
            TopologyKind::Sentinel => Some(3),
            TopologyKind::External => None,
            TopologyKind::Postgres => Some(1),
            TopologyKind::Etcd => Some(3),
            TopologyKind::Cluster => Some(ClusterSettings::default().node_count()),
        }
    }

    /// The kebab-case name (the serde name).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl FromStr for TopologyKind {
    type Err = TopologyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        <Self as strum::VariantArray>::VARIANTS
            .iter()
            .copied()
            .find(|k| k.as_str() == wanted)
            .ok_or_else(|| TopologyError::UnknownKind {
                given: s.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_are_the_serde_names_and_parse_loosely() {
        crate::variant_names::assert_names_match_serde::<TopologyKind>();
        let listed: Vec<&str> = <TopologyKind as strum::VariantArray>::VARIANTS
            .iter()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(listed, TopologyKind::NAMES);
        assert_eq!(
            " Five ".parse::<TopologyKind>().unwrap(),
            TopologyKind::Five
        );
        assert!(matches!(
            "seven".parse::<TopologyKind>(),
            Err(TopologyError::UnknownKind { .. })
        ));
    }

    #[test]
    fn kind_parses_displays_and_serializes() {
        for name in TopologyKind::NAMES {
            let kind: TopologyKind = name.parse().unwrap();
            assert_eq!(kind.to_string(), name);
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{name}\""));
        }
        assert_eq!("Five".parse::<TopologyKind>().unwrap(), TopologyKind::Five);
    }

    #[test]
    fn unknown_kind_lists_valid_names() {
        let msg = "three".parse::<TopologyKind>().unwrap_err().to_string();
        assert!(msg.contains("`three`"), "{msg}");
        assert!(msg.contains("single, five, sentinel, external"), "{msg}");
    }

    #[test]
    fn node_counts() {
        assert_eq!(TopologyKind::Single.local_node_count(), Some(1));
        assert_eq!(TopologyKind::Five.local_node_count(), Some(5));
        assert_eq!(TopologyKind::Sentinel.local_node_count(), Some(3));
        assert_eq!(TopologyKind::External.local_node_count(), None);
    }
}
