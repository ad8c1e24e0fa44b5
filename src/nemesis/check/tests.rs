use super::*;

fn ctx(nodes: &[String]) -> StepContext<'_> {
    StepContext {
        topology: TopologyKind::Five,
        nodes,
        clients: 2,
        resources: 1,
        run: Duration::from_secs(5),
        workers: 0,
    }
}

#[test]
fn a_problem_names_its_key() {
    let nodes = node_names(TopologyKind::Five).unwrap();
    let mut s = FaultStep::new(FaultKind::Partition, Target::Minority);
    s.duration = Some(Duration::from_secs(1));
    assert_eq!(s.check(&ctx(&nodes)), Ok(()));
    s.extra = Some(Duration::from_secs(1));
    let p = s.check(&ctx(&nodes)).unwrap_err();
    assert_eq!(p.key, Some("extra"));
    assert!(
        p.message.contains(
            "`extra` is not a parameter of partition (it takes: duration, mode, link, with_clients)"
        ),
        "{}",
        p.message
    );
    s.extra = None;
    s.link = Some(Link::Replication);
    assert_eq!(s.check(&ctx(&nodes)).unwrap_err().key, Some("link"));
    let pause = FaultStep::new(FaultKind::ClientPause, Target::Clients(vec![2]));
    let p = pause.check(&ctx(&nodes)).unwrap_err();
    assert_eq!(p.key, None, "{}", p.message);
    assert!(p.message.contains("needs `duration`"), "{}", p.message);
}

#[test]
fn a_partition_may_cut_clients_off_on_their_own_links_where_they_can_have_them() {
    let nodes = node_names(TopologyKind::Single).unwrap();
    let on = |topology| StepContext {
        topology,
        ..ctx(&nodes)
    };
    let mut s = FaultStep::new(FaultKind::Partition, Target::Holder);
    s.duration = Some(Duration::from_secs(1));
    assert_eq!(s.check(&on(TopologyKind::Single)), Ok(()));
    assert_eq!(s.check(&on(TopologyKind::Postgres)), Ok(()));
    assert!(s.cuts_clients());
    let p = s.check(&on(TopologyKind::Sentinel)).unwrap_err();
    assert_eq!(p.key, Some("target"));
    assert!(p.message.contains("proxies of their own"), "{}", p.message);
    s.link = Some(Link::Replication);
    assert_eq!(
        s.check(&on(TopologyKind::Single)).unwrap_err().key,
        Some("link")
    );
    s.link = None;
    s.target = Target::Clients(vec![2]);
    let p = s.check(&on(TopologyKind::Single)).unwrap_err();
    assert!(
        p.message.contains("client 2 does not exist"),
        "{}",
        p.message
    );
    // Latency still takes nodes only; a node partition cuts no client.
    let mut lat = FaultStep::new(FaultKind::Latency, Target::Holder);
    lat.duration = Some(Duration::from_secs(1));
    lat.latency = Some(Duration::from_millis(5));
    assert_eq!(
        lat.check(&on(TopologyKind::Single)).unwrap_err().key,
        Some("target")
    );
    s.target = Target::AllNodes;
    assert!(!s.cuts_clients());
}

#[test]
fn a_failover_method_needs_its_topology() {
    use super::super::FailoverMethod;
    let nodes = node_names(TopologyKind::Cluster).unwrap();
    let on = |topology| StepContext {
        topology,
        run: Duration::from_secs(10),
        ..ctx(&nodes)
    };
    let mut s = FaultStep::new(FaultKind::Failover, Target::Primary);
    for method in [
        FailoverMethod::KillPrimary,
        FailoverMethod::ClusterFailover,
        FailoverMethod::ClusterFailoverForce,
        FailoverMethod::ClusterFailoverTakeover,
    ] {
        s.method = Some(method);
        assert_eq!(s.check(&on(TopologyKind::Cluster)), Ok(()), "{method}");
    }
    let p = s.check(&on(TopologyKind::Sentinel)).unwrap_err();
    assert_eq!(p.key, Some("method"));
    assert_eq!(
        p.message,
        "`method = \"cluster-failover-takeover\"` needs topology cluster, this scenario has \
         sentinel"
    );
    s.method = Some(FailoverMethod::Sentinel);
    assert_eq!(s.check(&on(TopologyKind::Sentinel)), Ok(()));
    let p = s.check(&on(TopologyKind::Cluster)).unwrap_err();
    assert!(
        p.message.contains("needs topology sentinel"),
        "{}",
        p.message
    );
}

#[test]
fn the_replica_target_is_the_clusters_own() {
    let nodes = node_names(TopologyKind::Cluster).unwrap();
    let on = |topology| StepContext {
        topology,
        run: Duration::from_secs(10),
        ..ctx(&nodes)
    };
    let mut s = FaultStep::new(FaultKind::Kill, "replica".parse().unwrap());
    s.duration = Some(Duration::from_secs(1));
    assert_eq!(s.check(&on(TopologyKind::Cluster)), Ok(()));
    let p = s.check(&on(TopologyKind::Sentinel)).unwrap_err();
    assert_eq!(p.key, Some("target"));
    assert!(
        p.message.contains("needs topology cluster"),
        "{}",
        p.message
    );
    s.target = "n7".parse().unwrap();
    assert!(s.check(&on(TopologyKind::Cluster)).is_err());
}

#[test]
fn a_slot_migration_names_a_resource_and_one_node_on_a_cluster() {
    let nodes = node_names(TopologyKind::Cluster).unwrap();
    let on = |topology| StepContext {
        topology,
        resources: 2,
        ..ctx(&nodes)
    };
    let mut s = FaultStep::new(FaultKind::MigrateSlot, "n2".parse().unwrap());
    assert_eq!(s.check(&on(TopologyKind::Cluster)), Ok(()));
    s.resource = Some("r1".into());
    s.duration = Some(Duration::from_secs(1));
    assert_eq!(s.check(&on(TopologyKind::Cluster)), Ok(()));
    let p = s.check(&on(TopologyKind::Sentinel)).unwrap_err();
    assert_eq!(p.key, Some("fault"));
    assert!(
        p.message.contains("needs topology cluster"),
        "{}",
        p.message
    );
    for (bad, says) in [
        ("r2", "resource r2 does not exist (the workload has r0..r1)"),
        ("x1", "is not a resource name"),
        ("r01", "is not a resource name"),
    ] {
        s.resource = Some(bad.into());
        let p = s.check(&on(TopologyKind::Cluster)).unwrap_err();
        assert_eq!(p.key, Some("resource"), "{bad}");
        assert!(p.message.contains(says), "{bad}: {}", p.message);
    }
    s.resource = None;
    for bad in ["primary", "n2,n3", "all", "replica"] {
        s.target = bad.parse().unwrap();
        let p = s.check(&on(TopologyKind::Cluster)).unwrap_err();
        assert_eq!(p.key, Some("target"), "{bad}: {}", p.message);
    }
    s.target = "n9".parse().unwrap();
    assert!(s
        .check(&on(TopologyKind::Cluster))
        .unwrap_err()
        .message
        .contains("no node n9"));
    let mut kill = FaultStep::new(FaultKind::Kill, Target::Minority);
    kill.resource = Some("r0".into());
    let p = kill.check(&on(TopologyKind::Cluster)).unwrap_err();
    assert_eq!(p.key, Some("resource"), "{}", p.message);
}

#[test]
fn a_worker_target_needs_workers_an_index_in_range_and_a_fault_it_takes() {
    let nodes = node_names(TopologyKind::Five).unwrap();
    let with = |workers| StepContext {
        workers,
        ..ctx(&nodes)
    };
    let mut pause = FaultStep::new(FaultKind::ClientPause, "worker:1".parse().unwrap());
    pause.duration = Some(Duration::from_secs(1));
    assert_eq!(pause.check(&with(2)), Ok(()));
    let p = pause.check(&with(0)).unwrap_err();
    assert_eq!(p.key, Some("target"));
    assert!(p.message.contains("set `workers = N`"), "{}", p.message);
    let p = pause.check(&with(1)).unwrap_err();
    assert_eq!(p.message, "worker 1 does not exist (workers are 0..1)");
    pause.target = "worker:1/n1".parse().unwrap();
    assert!(pause
        .check(&with(2))
        .unwrap_err()
        .message
        .contains("write `worker:1`"));
    let mut cut = FaultStep::new(FaultKind::Partition, "worker:0/n3,n4,n5".parse().unwrap());
    cut.duration = Some(Duration::from_secs(1));
    assert_eq!(cut.check(&with(2)), Ok(()));
    cut.target = "worker:0/majority".parse().unwrap();
    assert_eq!(cut.check(&with(2)), Ok(()));
    cut.target = "worker:0/n9".parse().unwrap();
    let p = cut.check(&with(2)).unwrap_err();
    assert!(p.message.contains("no node n9"), "{}", p.message);
    let mut kill = FaultStep::new(FaultKind::Kill, "worker:0".parse().unwrap());
    kill.duration = Some(Duration::from_secs(1));
    assert!(kill
        .check(&with(2))
        .unwrap_err()
        .message
        .contains("kill cannot target a worker"));
    // With workers, the targets one process must see every client for are refused.
    let mut holder = FaultStep::new(FaultKind::ClientPause, Target::Holder);
    holder.duration = Some(Duration::from_secs(1));
    assert_eq!(holder.check(&with(0)), Ok(()));
    assert!(holder
        .check(&with(2))
        .unwrap_err()
        .message
        .contains("`holder` needs one process"));
    let mut ids = FaultStep::new(FaultKind::ClientPause, Target::Clients(vec![1]));
    ids.duration = Some(Duration::from_secs(1));
    assert_eq!(ids.check(&with(0)), Ok(()));
    assert!(ids
        .check(&with(2))
        .unwrap_err()
        .message
        .contains("target a worker"));
}

#[test]
fn a_bus_partition_is_the_clusters_and_a_partitions_own() {
    let nodes = node_names(TopologyKind::Cluster).unwrap();
    let on = |topology| StepContext {
        topology,
        run: Duration::from_secs(10),
        ..ctx(&nodes)
    };
    let mut s = FaultStep::new(FaultKind::Partition, Target::Primary);
    s.duration = Some(Duration::from_secs(1));
    s.link = Some(Link::Bus);
    s.with_clients = Some(ClientSide::Clients(vec![0]));
    assert_eq!(s.check(&on(TopologyKind::Cluster)), Ok(()));
    assert!(s.cuts_clients());
    let p = s.check(&on(TopologyKind::Five)).unwrap_err();
    assert_eq!(p.key, Some("link"));
    assert!(
        p.message.contains("needs topology cluster"),
        "{}",
        p.message
    );
    s.with_clients = Some(ClientSide::Clients(vec![2]));
    let p = s.check(&on(TopologyKind::Cluster)).unwrap_err();
    assert_eq!(p.key, Some("with_clients"), "{}", p.message);
    // The holder, resolved when the step starts, needs one process that sees it.
    s.with_clients = Some(ClientSide::Holder);
    assert_eq!(s.check(&on(TopologyKind::Cluster)), Ok(()));
    assert!(s.aims_at_holder() && s.cuts_clients());
    let workers = StepContext {
        workers: 2,
        ..on(TopologyKind::Cluster)
    };
    let p = s.check(&workers).unwrap_err();
    assert_eq!(p.key, Some("with_clients"), "{}", p.message);
    s.with_clients = None;
    s.target = Target::AllNodes;
    assert_eq!(
        s.check(&on(TopologyKind::Cluster)).unwrap_err().key,
        Some("target")
    );
    let mut lat = FaultStep::new(FaultKind::Latency, Target::Primary);
    lat.duration = Some(Duration::from_secs(1));
    lat.latency = Some(Duration::from_millis(5));
    lat.link = Some(Link::Bus);
    let p = lat.check(&on(TopologyKind::Cluster)).unwrap_err();
    assert!(
        p.message.contains("takes a partition only"),
        "{}",
        p.message
    );
    let mut plain = FaultStep::new(FaultKind::Partition, Target::Primary);
    plain.duration = Some(Duration::from_secs(1));
    plain.with_clients = Some(ClientSide::Clients(vec![]));
    let p = plain.check(&on(TopologyKind::Cluster)).unwrap_err();
    assert_eq!(p.key, Some("with_clients"), "{}", p.message);
    // A client target on the cluster now has proxies of its own.
    plain.with_clients = None;
    plain.target = Target::Holder;
    assert_eq!(plain.check(&on(TopologyKind::Cluster)), Ok(()));
}

#[test]
fn node_names_follow_the_topology() {
    assert_eq!(node_names(TopologyKind::Single).unwrap(), ["n1"]);
    assert_eq!(node_names(TopologyKind::Etcd).unwrap().len(), 3);
    assert_eq!(node_names(TopologyKind::External), None);
}
