//! The strategy names: how a lock is taken, released and extended.

use std::str::FromStr;

use super::{LockService, StrategyError};

/// A way of taking a lock. CLI, config and result files use the kebab-case names
/// (`single`, `single-fenced`, `redlock`, `redlock-fenced`, `naive-del`, `get-then-del`, `no-ttl`,
/// `single-wait`, `setnx-expire`, `unchecked-extend`, and the alternatives to Redis:
/// `pg-advisory`, `pg-advisory-fenced`, `pg-advisory-xact`, `pg-advisory-wait`, `etcd-lease`),
/// and the lock-free alternative for `job` work: `claim-update` (and its negative control
/// `claim-update-unguarded`).
///
/// Single-node strategies use the first configured endpoint only; quorum strategies use all of
/// them; `etcd-lease` uses every member of the etcd cluster (any one answers for the cluster).
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
pub enum StrategyKind {
    /// `SET key owner NX PX ttl`; release is one Lua compare-and-delete; extend is one Lua
    /// compare-and-PEXPIRE.
    Single,
    /// [`Single`](Self::Single) plus a fencing token: `INCR {prefix}fence:{resource}` runs in the
    /// same Lua script as the `SET NX PX`, so a token is issued exactly when the lock is taken.
    SingleFenced,
    /// The same lease on N independent nodes, asked concurrently; held when a quorum
    /// (N/2+1) accepted it and `ttl − elapsed − drift` is still positive. Failed attempts are
    /// released on every node; release always goes to every node. A node that timed out is
    /// cleaned up over a fresh connection, so a late `SET` may land after the clean-up and
    /// keep a key nobody holds until its TTL runs out (safe, but that node stays busy for up
    /// to one TTL).
    Redlock,
    /// [`Redlock`](Self::Redlock) plus a fencing token built from the nodes' own counters.
    ///
    /// **Rule.** Each node runs `SET NX PX` and, only if it succeeded, `INCR` of its fence key, in
    /// one script. The token is the **maximum** counter over the nodes that locked. Before the
    /// lease is returned, every node's counter is raised to that maximum (never lowered), and at
    /// least a quorum must confirm a counter ≥ the token, otherwise the attempt fails and is
    /// released. Because any two quorums share a node, the next holder's quorum contains a node
    /// whose counter is already ≥ our token, and its `INCR` yields a larger one.
    ///
    /// **Known weakness.** The counters live in the same volatile nodes as the locks: a node that
    /// restarts empty (no persistence) comes back with counter 0, and a later quorum made mostly
    /// of restarted or lagging nodes can issue a token that is not larger than one already issued
    /// (a token regression, which the checker reports). The raise is also not atomic with the
    /// lock: it happens one round trip later. Fencing is only as good as the counter's
    /// durability; Kleppmann ("How to do distributed locking", 2016) argues such tokens should
    /// come from a consensus system, and the Redis distributed-lock page (redis.io, "Distributed
    /// Locks with Redis") notes that Redlock itself offers no monotonic token.
    RedlockFenced,
    /// Negative control: like `single`, but released with a plain `DEL` (no owner check), so a
    /// holder that stalled past its TTL deletes the next holder's lock.
    NaiveDel,
    /// Negative control: like `single`, but released with `GET`, compare in the client, then
    /// `DEL`: two round trips, so the key can change hands between them.
    GetThenDel,
    /// Negative control: `SET key owner NX` without expiry; a holder that crashes holds forever.
    NoTtl,
    /// [`Single`](Self::Single), then `WAIT 1 <timeout>` on the same connection: the lease counts
    /// only when at least one replica acknowledged the `SET`; otherwise the key is deleted again
    /// (compare-and-delete) and the attempt fails with
    /// [`AcquireError::NoReplicaAck`](crate::lease::AcquireError::NoReplicaAck). Needs a
    /// primary with replicas (topology `sentinel`). `WAIT` makes a failover lose the lock less often, not
    /// never: the acknowledged copy is in one replica's memory, and Sentinel may promote another
    /// (source: the Redis `WAIT` command page, "WAIT does not make Redis a strongly consistent
    /// store").
    SingleWait,
    /// Negative control: `SETNX key owner`, then `PEXPIRE key ttl` as a second request. A client
    /// that crashes (or loses its connection) between the two leaves a key without expiry: the
    /// resource is stuck for good, as with `no-ttl`. Release is compare-and-delete.
    SetnxExpire,
    /// Negative control: [`Single`](Self::Single), but renewal (the watchdog) is a plain
    /// `PEXPIRE key ttl` with no owner check, so a holder whose lease already passed to another
    /// client extends that client's key and goes on believing it holds the lock.
    UncheckedExtend,
    /// PostgreSQL session advisory lock: `pg_try_advisory_lock(hashtextextended(key, 0))` on
    /// the client's own session; release is `pg_advisory_unlock`. No TTL: the lock lives as
    /// long as the session, so when the connection dies (partition, reset, server restart) the
    /// server releases it while the client may still believe it holds it (PostgreSQL manual,
    /// "Advisory Locks", §13.3.5).
    PgAdvisory,
    /// [`PgAdvisory`](Self::PgAdvisory) plus a fencing token: `nextval` of a sequence, taken in
    /// the same statement as the lock and only when the lock was granted.
    PgAdvisoryFenced,
    /// PostgreSQL transaction-scoped advisory lock: `BEGIN` and
    /// `pg_try_advisory_xact_lock(hashtextextended(key, 0))`; the critical section runs inside
    /// that transaction and the release is `COMMIT`. The lock lives as long as the transaction,
    /// so a transaction pooler (PgBouncer `pool_mode = transaction`), which keeps one server
    /// connection for a whole transaction, cannot hand it to another client; a session that
    /// ends mid-hold frees it as for [`PgAdvisory`](Self::PgAdvisory).
    PgAdvisoryXact,
    /// PostgreSQL session advisory lock taken *blocking*: `SET lock_timeout` to
    /// [`StrategyOptions::lock_wait`](super::StrategyOptions::lock_wait), pipelined with
    /// `pg_advisory_lock(hashtextextended(key, 0))`, so the server queues the request and
    /// grants it when the holder unlocks; a request still queued at the timeout is cancelled by
    /// the server (SQLSTATE `55P03`, lock_not_available), which is a definite refusal (busy),
    /// retried under the retry policy like a refused try-lock. Release and session loss as
    /// for [`PgAdvisory`](Self::PgAdvisory). A client that gives up on the statement (no
    /// answer within `lock_wait + node_timeout`) closes its connection; a grant that arrives
    /// after that goes to a session whose client is gone, and the server frees it when it
    /// finds the socket closed (PostgreSQL manual, "Advisory Locks" and `lock_timeout`).
    PgAdvisoryWait,
    /// etcd lease + create-if-absent: grant a lease of the TTL (whole seconds), then a
    /// transaction puts the lock key with that lease only if the key's create revision is 0;
    /// renewal is lease keep-alive, release is lease revoke. The fencing token is the key's
    /// revision, which etcd's Raft log makes strictly increasing (etcd documentation, "API
    /// guarantees"; Kleppmann, "How to do distributed locking", 2016).
    EtcdLease,
    /// redis-py's `redis.lock.Lock` on one Redis node, driven through the shipped adapter
    /// `adapters/python/redis_py.py` (see `docs/adapter-protocol.md`): `SET NX PX` with the
    /// library's own retry loop, Lua compare-and-delete release, Lua compare-and-PEXPIRE extend,
    /// no fencing token, no renewal of its own. Not in [`StrategyKind::all`] (it needs the
    /// adapters' Python environment): see [`StrategyKind::adapters`].
    #[serde(rename = "adapter:redis-py")]
    #[strum(serialize = "adapter:redis-py")]
    AdapterRedisPy,
    /// python-redis-lock's `redis_lock.Lock` on one Redis node, through the shipped adapter
    /// `adapters/python/python_redis_lock.py`: `SET NX EX` (whole seconds), a blocking wait on
    /// a signal list, Lua compare-and-delete release; with `--watchdog`, the library's own
    /// auto-renewal thread. No fencing token.
    #[serde(rename = "adapter:python-redis-lock")]
    #[strum(serialize = "adapter:python-redis-lock")]
    AdapterPythonRedisLock,
    /// pottery's `Redlock` over independent Redis nodes (topology `five`), through the shipped
    /// adapter `adapters/python/pottery_redlock.py`: the Redlock algorithm as the library
    /// implements it (concurrent `SET NX PX` on every node, quorum and validity check, release
    /// on every node). No fencing token, no renewal of its own.
    #[serde(rename = "adapter:pottery-redlock")]
    #[strum(serialize = "adapter:pottery-redlock")]
    AdapterPotteryRedlock,
    /// A user's own adapter: the command line given with `--adapter 'command args…'` (or the
    /// scenario key `workload.adapter`), started as any adapter and held to the same protocol
    /// (`docs/adapter-protocol.md`); its handshake names the library. Fits any Redis topology
    /// (the adapter gets every node lockbench started and decides what to lock on).
    #[serde(rename = "adapter:command")]
    #[strum(serialize = "adapter:command")]
    AdapterCommand,
    /// No lock: a job queue in a PostgreSQL table, claimed by one conditional `UPDATE` (`SET
    /// state = 'running', owner = $me, lease_until = now() + ttl WHERE id = $j AND (state =
    /// 'pending' OR lease_until < now())`: the affected rows say who won) and completed only
    /// `WHERE owner = $me`, so a worker whose claim expired and was taken over cannot mark the
    /// job done; the claim's number (the job's `claims` count) is the fencing token its row
    /// checks. Only for `job` work (see `strategy::claim`). Not in [`StrategyKind::all`]: see
    /// [`StrategyKind::claims`].
    ClaimUpdate,
    /// Negative control: [`ClaimUpdate`](Self::ClaimUpdate) whose completion has no owner
    /// guard (`WHERE id = $j`) and no token, so a worker whose claim expired and was re-claimed
    /// by another still marks the job done under it (a zombie completion) and writes its row.
    ClaimUpdateUnguarded,
    /// No lock: the jobs table of [`ClaimUpdate`](Self::ClaimUpdate), a job claimed by
    /// `SELECT … FOR UPDATE SKIP LOCKED` in a transaction held open for the work and
    /// completed by an `UPDATE` and `COMMIT` in it (the River / graphile-worker / solid_queue
    /// shape). The row lock lasts as long as the session: a worker that crashes gives the job
    /// back at once, a paused one keeps it (a stall, no second run), and a session that ends
    /// while its worker still works rolls the claim back, so another worker runs the job
    /// again. No TTL and no token. Only for `job` work.
    ClaimSkipLocked,
    /// No lock: the lease variant of [`ClaimSkipLocked`](Self::ClaimSkipLocked): the claim is
    /// one committed `UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED)` setting the
    /// owner and `lease_until`, and an expired claim is rescued by the next worker, as in
    /// [`ClaimUpdate`](Self::ClaimUpdate) (completion `WHERE owner = $me`, the claim's number
    /// the fencing token). Only for `job` work.
    ClaimSkipLockedLease,
}

impl StrategyKind {
    /// Every strategy, in display order.
    pub fn all() -> &'static [StrategyKind] {
        use StrategyKind::*;
        &[
            Single,
            SingleFenced,
            Redlock,
            RedlockFenced,
            NaiveDel,
            GetThenDel,
            NoTtl,
            SingleWait,
            SetnxExpire,
            UncheckedExtend,
            PgAdvisory,
            PgAdvisoryFenced,
            PgAdvisoryXact,
            PgAdvisoryWait,
            EtcdLease,
        ]
    }

    /// The strategies that drive a lock library through an adapter process (`adapter:*`).
    /// They are kept out of [`all`](Self::all), which the matrix and the benches iterate, until
    /// the adapters' Python environment is part of every machine's setup.
    pub fn adapters() -> &'static [StrategyKind] {
        &[
            StrategyKind::AdapterRedisPy,
            StrategyKind::AdapterPythonRedisLock,
            StrategyKind::AdapterPotteryRedlock,
        ]
    }

    /// The lock-free alternatives that claim jobs instead of taking a lock (`claim-update`,
    /// `claim-update-unguarded`, `claim-skip-locked`, `claim-skip-locked-lease`): they serve
    /// `job` work only, so they are kept out of [`all`](Self::all), which the matrix's
    /// row-work plans and the benches iterate.
    pub fn claims() -> &'static [StrategyKind] {
        &[
            StrategyKind::ClaimUpdate,
            StrategyKind::ClaimUpdateUnguarded,
            StrategyKind::ClaimSkipLocked,
            StrategyKind::ClaimSkipLockedLease,
        ]
    }

    /// True for the strategies that claim a job rather than lock a resource (see
    /// [`claims`](Self::claims)): the driver asks them which job to claim, and their release
    /// completes it.
    pub fn is_claim(self) -> bool {
        matches!(
            self,
            StrategyKind::ClaimUpdate
                | StrategyKind::ClaimUpdateUnguarded
                | StrategyKind::ClaimSkipLocked
                | StrategyKind::ClaimSkipLockedLease
        )
    }

    /// True when an acquire is one attempt, never retried by lockbench's retry policy: an
    /// adapter's library runs its own retry loop, and a lost claim means another worker has
    /// that job (the driver picks the next).
    pub fn acquires_once(self) -> bool {
        self.is_adapter() || self.is_claim()
    }

    /// True for the `adapter:*` strategies, shipped ones and `adapter:command`.
    pub fn is_adapter(self) -> bool {
        matches!(
            self,
            StrategyKind::AdapterRedisPy
                | StrategyKind::AdapterPythonRedisLock
                | StrategyKind::AdapterPotteryRedlock
                | StrategyKind::AdapterCommand
        )
    }

    /// Every strategy name the CLI and scenario files accept: [`all`](Self::all), the shipped
    /// [`adapters`](Self::adapters) and `adapter:command`.
    fn named() -> impl Iterator<Item = StrategyKind> {
        Self::all()
            .iter()
            .chain(Self::adapters())
            .chain(Self::claims())
            .copied()
            .chain(std::iter::once(StrategyKind::AdapterCommand))
    }

    /// The server this strategy locks on.
    pub fn service(self) -> LockService {
        match self {
            StrategyKind::PgAdvisory
            | StrategyKind::PgAdvisoryFenced
            | StrategyKind::PgAdvisoryXact
            | StrategyKind::PgAdvisoryWait
            | StrategyKind::ClaimUpdate
            | StrategyKind::ClaimUpdateUnguarded
            | StrategyKind::ClaimSkipLocked
            | StrategyKind::ClaimSkipLockedLease => LockService::Postgres,
            StrategyKind::EtcdLease => LockService::Etcd,
            _ => LockService::Redis,
        }
    }

    /// The kebab-case name used in CLI, configs and results (the serde name).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// True when a lease carries a fencing token.
    pub fn is_fenced(self) -> bool {
        matches!(
            self,
            StrategyKind::SingleFenced
                | StrategyKind::RedlockFenced
                | StrategyKind::PgAdvisoryFenced
                | StrategyKind::EtcdLease
                | StrategyKind::ClaimUpdate
                | StrategyKind::ClaimSkipLockedLease
        )
    }

    /// True when the lock is taken on a quorum of all configured nodes.
    pub fn is_quorum(self) -> bool {
        matches!(
            self,
            StrategyKind::Redlock
                | StrategyKind::RedlockFenced
                | StrategyKind::AdapterPotteryRedlock
        )
    }

    /// True for the deliberately broken strategies (`naive-del`, `get-then-del`, `no-ttl`,
    /// `setnx-expire`, `unchecked-extend`, `claim-update-unguarded`).
    pub fn is_negative_control(self) -> bool {
        matches!(
            self,
            StrategyKind::NaiveDel
                | StrategyKind::GetThenDel
                | StrategyKind::NoTtl
                | StrategyKind::SetnxExpire
                | StrategyKind::UncheckedExtend
                | StrategyKind::ClaimUpdateUnguarded
        )
    }

    /// True when an acquire needs a replica's acknowledgement (`single-wait`): the strategy only
    /// fits a primary with replicas (topology `sentinel`, or an external primary that has
    /// replicas; see `topology::pairing`). On a lone node every attempt fails with "no replica
    /// acknowledged".
    pub fn needs_replicas(self) -> bool {
        self == StrategyKind::SingleWait
    }

    /// True when the acquire is more than one request to a node with a point between them
    /// where a crash leaves the key behind (`setnx-expire`: after `SETNX`, before `PEXPIRE`).
    /// A `client-crash` fault lands there (see `LockClient::acquire_or_crash`).
    pub fn has_mid_acquire_crash_point(self) -> bool {
        self == StrategyKind::SetnxExpire
    }

    /// True when the lock runs out by itself after the TTL (every strategy except `no-ttl`
    /// and the PostgreSQL ones whose lock (or row lock, `claim-skip-locked`) lasts as long as
    /// the session).
    pub fn has_ttl(self) -> bool {
        !matches!(
            self,
            StrategyKind::NoTtl
                | StrategyKind::PgAdvisory
                | StrategyKind::PgAdvisoryFenced
                | StrategyKind::PgAdvisoryXact
                | StrategyKind::PgAdvisoryWait
                | StrategyKind::ClaimSkipLocked
        )
    }

    /// Whether `--watchdog` can watch this strategy's lease while it is held: renew it (a
    /// lease with a TTL), or check that the session holding it is still the one that took it
    /// (the PostgreSQL session locks). `Err` says why not (`no-ttl`: no TTL to renew and no
    /// session to check; the key stays until deleted).
    ///
    /// For an `adapter:*` strategy `--watchdog` asks the *library* to renew by itself (the
    /// adapter's `init` gets `renewal.auto: true`; lockbench runs no watchdog of its own, and
    /// an adapter without the `auto-renew` capability is refused when it starts).
    pub fn watchable(self) -> Result<(), &'static str> {
        if self.has_ttl() || self.service() == LockService::Postgres {
            Ok(())
        } else {
            Err(
                "its lock has no TTL to renew and no session to check (the key stays until it \
                 is deleted), so a watchdog would do nothing",
            )
        }
    }

    /// Comma-separated list of valid names, for error messages.
    pub fn valid_names() -> String {
        Self::named()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl FromStr for StrategyKind {
    type Err = StrategyError;

    /// Parses a kebab-case name (case-insensitive, surrounding spaces ignored).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        Self::named()
            .find(|k| k.name() == wanted)
            .ok_or_else(|| StrategyError::UnknownStrategy {
                name: s.to_string(),
                valid: Self::valid_names(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::VariantArray;

    #[test]
    fn names_round_trip_through_fromstr_display_and_serde() {
        crate::variant_names::assert_names_match_serde::<StrategyKind>();
        assert_eq!(StrategyKind::named().count(), StrategyKind::VARIANTS.len());
        for k in StrategyKind::named() {
            assert_eq!(k.to_string().parse::<StrategyKind>().unwrap(), k);
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{k}\""));
            assert_eq!(serde_json::from_str::<StrategyKind>(&json).unwrap(), k);
        }
        assert_eq!(
            " Redlock-Fenced ".parse::<StrategyKind>().unwrap(),
            StrategyKind::RedlockFenced
        );
        let redis_py = "adapter:redis-py".parse::<StrategyKind>().unwrap();
        assert_eq!(redis_py, StrategyKind::AdapterRedisPy);
        assert!(redis_py.is_adapter() && !redis_py.is_fenced() && redis_py.has_ttl());
        assert_eq!(redis_py.service(), LockService::Redis);
        assert!(!StrategyKind::all().contains(&redis_py));
        assert_eq!(
            "adapter:python-redis-lock".parse::<StrategyKind>().unwrap(),
            StrategyKind::AdapterPythonRedisLock
        );
        let command = "adapter:command".parse::<StrategyKind>().unwrap();
        assert!(command.is_adapter() && !StrategyKind::adapters().contains(&command));
        let claim = "claim-update".parse::<StrategyKind>().unwrap();
        assert!(claim.is_claim() && claim.has_ttl() && claim.is_fenced());
        assert!(!StrategyKind::ClaimUpdateUnguarded.is_fenced());
        assert_eq!(claim.service(), LockService::Postgres);
        assert!(!claim.is_negative_control() && !StrategyKind::all().contains(&claim));
        let unguarded = StrategyKind::ClaimUpdateUnguarded;
        assert!(unguarded.is_claim() && unguarded.is_negative_control());
        assert!(!StrategyKind::all().iter().any(|k| k.is_claim()));
        let skip = "claim-skip-locked".parse::<StrategyKind>().unwrap();
        assert!(skip.is_claim() && !skip.has_ttl() && !skip.is_fenced());
        assert!(skip.watchable().is_ok() && !skip.is_negative_control());
        let lease = StrategyKind::ClaimSkipLockedLease;
        assert!(lease.is_claim() && lease.has_ttl() && lease.is_fenced());
        assert_eq!(lease.service(), LockService::Postgres);
    }

    #[test]
    fn unknown_name_lists_valid_names() {
        let err = "redlok".parse::<StrategyKind>().unwrap_err().to_string();
        assert!(err.contains("redlok"), "{err}");
        for &k in StrategyKind::all() {
            assert!(err.contains(k.name()), "{err} lacks {k}");
        }
    }

    #[test]
    fn classification() {
        use StrategyKind::*;
        let fenced: Vec<_> = StrategyKind::all()
            .iter()
            .filter(|k| k.is_fenced())
            .collect();
        assert_eq!(
            fenced,
            [&SingleFenced, &RedlockFenced, &PgAdvisoryFenced, &EtcdLease]
        );
        let quorum: Vec<_> = StrategyKind::all()
            .iter()
            .filter(|k| k.is_quorum())
            .collect();
        assert_eq!(quorum, [&Redlock, &RedlockFenced]);
        assert!(AdapterPotteryRedlock.is_quorum() && !AdapterRedisPy.is_quorum());
        let controls: Vec<_> = StrategyKind::all()
            .iter()
            .filter(|k| k.is_negative_control())
            .collect();
        assert_eq!(
            controls,
            [
                &NaiveDel,
                &GetThenDel,
                &NoTtl,
                &SetnxExpire,
                &UncheckedExtend
            ]
        );
        assert!(!NoTtl.has_ttl() && Single.has_ttl() && EtcdLease.has_ttl());
        assert!(!PgAdvisory.has_ttl());
        assert_eq!(PgAdvisoryFenced.service(), LockService::Postgres);
        assert_eq!(PgAdvisoryXact.service(), LockService::Postgres);
        assert!(!PgAdvisoryXact.has_ttl() && !PgAdvisoryXact.is_fenced());
        assert_eq!(PgAdvisoryWait.service(), LockService::Postgres);
        assert!(!PgAdvisoryWait.has_ttl() && !PgAdvisoryWait.is_fenced());
        assert_eq!(EtcdLease.service(), LockService::Etcd);
        assert_eq!(RedlockFenced.service(), LockService::Redis);
        assert_eq!(
            controls,
            [
                &NaiveDel,
                &GetThenDel,
                &NoTtl,
                &SetnxExpire,
                &UncheckedExtend
            ]
        );
        assert!(!NoTtl.has_ttl() && Single.has_ttl());
        assert!(SetnxExpire.has_ttl() && UncheckedExtend.has_ttl() && SingleWait.has_ttl());
        assert!(!SingleWait.is_negative_control() && !SingleWait.is_fenced());
        let replicas: Vec<_> = StrategyKind::all()
            .iter()
            .filter(|k| k.needs_replicas())
            .collect();
        assert_eq!(replicas, [&SingleWait]);
    }
}
