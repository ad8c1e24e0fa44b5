use super::*;

#[test]
fn key_slots_follow_the_specification() {
    // Examples from the Redis Cluster specification and `CLUSTER KEYSLOT`.
    assert_eq!(key_slot("123456789"), 0x31C3 % SLOTS);
    assert_eq!(key_slot("foo"), 12182);
    assert_eq!(key_slot("{user1000}.following"), key_slot("user1000"));
    assert_eq!(key_slot("foo{}{bar}"), key_slot("foo{}{bar}"));
    assert_ne!(key_slot("foo{}{bar}"), key_slot("bar"));
    assert_eq!(
        key_slot("lockbench:single:lock:{r0}"),
        key_slot("lockbench:single-fenced:fence:{r0}")
    );
    assert_eq!(resource_slot("r0"), key_slot("r0"));
}

#[test]
fn cluster_nodes_become_shards() {
    let announce: Vec<(String, u16)> = (1..=6)
        .map(|i| ("127.0.0.1".to_string(), 7000 + i))
        .collect();
    let text = "\
a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460
a2 127.0.0.1:7002@17002 master - 0 0 2 connected 5461-10922
a3 127.0.0.1:7003@17003 master - 0 0 3 connected 10923-16383
a4 127.0.0.1:7004@17004 slave a2 0 0 2 connected
a5 127.0.0.1:7005@17005 slave a3 0 0 3 connected
a6 127.0.0.1:7006@17006 slave a1 0 0 1 connected
";
    let shards = parse_cluster_nodes(text, &announce).unwrap();
    assert_eq!(shards.len(), 3);
    assert_eq!(shards[0].primary, "n1");
    assert_eq!(shards[0].replicas, vec!["n6".to_string()]);
    assert_eq!(shards[2].slots, vec![(10923, 16383)]);
    assert!(shards[1].owns(5461) && !shards[1].owns(5460));
    let failed = text.replace("myself,master", "master,fail");
    let shards = parse_cluster_nodes(&failed, &announce).unwrap();
    assert_eq!(
        shards.len(),
        2,
        "a failing primary's shard has no live primary"
    );
    assert!(
        parse_cluster_nodes("a1 10.0.0.1:1@2 master - 0 0 1 connected 0-1", &announce)
            .unwrap_err()
            .contains("not announced")
    );
}

#[test]
fn settings_are_checked() {
    assert!(ClusterSettings::default().validate().is_ok());
    let two = ClusterSettings {
        shards: 2,
        ..ClusterSettings::default()
    };
    assert_eq!(
        two.validate().unwrap_err().to_string(),
        "--shards 2: a Redis Cluster needs 3 to 50 shards (redis-cli --cluster create needs at least 3 primaries)"
    );
}

#[test]
fn nodes_announce_their_given_address_and_bus_port() {
    let mut a = ClusterAddressing {
        hosts: vec![Ipv4Addr::LOCALHOST],
        node_ports: vec![7001],
        bus_ports: vec![17001],
        announce: vec![("127.0.0.1".into(), 4001)],
    };
    let lines = node_lines(0, &a, &ClusterSettings::default());
    assert!(lines.contains(&"cluster-announce-port 4001".to_string()));
    assert!(lines.contains(&"cluster-announce-bus-port 17001".to_string()));
    assert!(!lines.iter().any(|l| l.starts_with("bind-source-addr")));
    a.hosts = own_hosts(1);
    let lines = node_lines(0, &a, &ClusterSettings::default());
    assert!(
        lines.contains(&format!("bind-source-addr {}", a.hosts[0])),
        "{lines:?}"
    );
    assert!(lines.contains(&"cluster-node-timeout 1500".to_string()));
}
