//! The text under `lockbench matrix --help`: the fault classes, episodes, the probe,
//! `matrix.toml`, the PostgreSQL and Redis setups, examples and exit codes.

/// Examples and exit codes under `lockbench matrix --help`.
pub(super) const MATRIX_HELP: &str = "\
Fault classes (--faults; default all): none, latency, partition-minority, partition-holder,
crash-restart-empty, node-pause, clock-jump, client-pause, client-crash, session-loss,
failover, slow-work; on Redis Cluster rows also cluster-failover, cluster-failover-force,
cluster-failover-takeover, cluster-pause, cluster-minority-partition. Single-node strategies
run on one node (on Sentinel for failover) or on a cluster (--redis-setups); Redlock on five
nodes; PostgreSQL and etcd strategies on their own servers. matrix.html says what each fault did on each topology.

Episodes: a trial cycles its fault class (fault, heal, recovery gap); each cycle is an episode,
aimed at the lock's state (the holder inside, a live lease, an acquire in flight). An episode is
exposed when it met what it aimed at; only exposed episodes count. A cell runs trials until it
has --episodes exposed episodes or --max-trials trials; then k damaging of n exposed, with the
95 % interval (0 of 30 means < 10 %, 0 of 300 < 1 %).

Before the cells, each strategy's uncontended probe (one client, no hold) measures what its
acquire costs; the efficiency rule ranks by it.

matrix.toml (--config; every key optional, flags win):
  strategies = [\"single\", \"redlock-fenced\"]
  faults = [\"none\", \"client-pause\"]
  episodes = 30
  max_trials = 8
  jobs = 2
  clients = 4
  resources = 1
  hold = \"50ms\"
  ttl = \"500ms\"
  seed = 1
  pg_setups = [\"direct\", \"pgbouncer-transaction\"]
  redis_setups = [\"standalone\", \"cluster\"]
  cluster_node_timeout = \"1s\"

PostgreSQL setups (--pg-setups; default direct): each PostgreSQL strategy row is run once per
setup and labelled with it (pg-advisory · pgbouncer-transaction); other rows are unaffected.
  direct                       straight to the server, one session per client
  pgbouncer-session            PgBouncer, session mode, 20 server connections, DISCARD ALL on return
  pgbouncer-session-no-reset   the same without a reset (server_reset_query empty)
  pgbouncer-transaction        PgBouncer, transaction mode, 2 server connections
Claims 15 (transaction pooler), 17a (no reset) and 17b (DISCARD ALL) are judged only in a
matrix that runs their setup.

Redis setups (--redis-setups; default standalone): each single-node Redis strategy row (single,
single-fenced, single-wait, the controls) is run once per setup and labelled with it
(single · cluster); Redlock, PostgreSQL and etcd rows are unaffected.
  standalone   one node (Sentinel for failover and for single-wait)
  cluster      a Redis Cluster, 3 shards of a primary and a replica (--cluster-node-timeout,
               default 1s); every node fault aims at the primary of the lock's shard; failover
               kills it while its replication lags; five columns of its own: cluster-failover,
               cluster-failover-force, cluster-failover-takeover (CLUSTER FAILOVER in its three
               modes under the same lag), cluster-pause (that primary SIGSTOPped past the
               node timeout) and cluster-minority-partition (that primary cut off the cluster
               bus and its replica past the node timeout, the holder on its side, the other
               clients cut off it; needs root and nft). Without --faults a cluster matrix runs
               every column (cluster-minority-partition left out, with a warning, when this
               machine cannot cut the bus).
Claims 20a-20e and 20g (shard failover, the three CLUSTER FAILOVER modes, single-wait, a
primary cut off with the holder) are judged only in a matrix that runs the cluster rows.

Examples:
  lockbench matrix --quick                          # >= 10 exposed episodes per cell
  lockbench matrix                                  # >= 30 exposed episodes per cell
  lockbench matrix --episodes 300 --faults failover # < 1 % bound on a clean cell
  lockbench matrix --controls --faults none,client-pause,client-crash --jobs 1
  lockbench matrix --quick --strategies pg-advisory,pg-advisory-xact --faults none \\
      --pg-setups direct,pgbouncer-transaction   # claim 15 beside the direct rows
  lockbench matrix --quick --strategies single,single-fenced,single-wait \\
      --redis-setups standalone,cluster --faults none,failover,cluster-failover,cluster-failover-force
  lockbench matrix --quick --backend docker         # every cell in containers (docker/build-images.sh first)

Exit codes: 0 matrix complete and no cell contradicts a claim (invalid cells are results, not
errors), 1 some cell contradicts its claim (the summary and matrix.md say which), 2 bad input
(nothing started), 4 some trial failed to run, 130/143 interrupted (finished cells kept).";
