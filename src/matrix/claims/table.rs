//! The claim table: one row per claim × strategy × what the claim says about its cell, and
//! the claim × strategy pairs left out with their reason.
//!
//! | claim | cell | says |
//! |---|---|---|
//! | 01 | `no-ttl × client-crash` | stuck; no damage |
//! | 01 | `single × client-crash` | not stuck; no damage |
//! | 02 | `naive-del × client-pause`, `single × client-pause` | damage |
//! | 04 | `single × client-pause` | damage |
//! | 04 | `single-fenced × client-pause` | no damage |
//! | 05a | `single × failover` | damage |
//! | 05b | `single-fenced × failover` | damage (token duplicate) |
//! | 06 | `redlock × partition-minority` | no damage |
//! | 07a | `redlock × crash-restart-empty` | damage |
//! | 08 | `redlock × clock-jump` | damage |
//! | 09 | `redlock × client-pause` | damage |
//! | 09 | `redlock-fenced × client-pause` | no damage |
//! | 10a | `single × slow-work` | no damage |
//! | 10b | `single × client-pause` | damage |
//! | 11a | `pg-advisory × session-loss` | damage |
//! | 11a | `pg-advisory-fenced × session-loss` | no damage |
//! | 11b | `pg-advisory × client-crash` | no damage; not stuck |
//! | 12a | `etcd-lease × client-pause` | no damage |
//! | 12b | `etcd-lease × failover` | no damage |
//! | 13 | `setnx-expire × client-crash` | stuck; no damage |
//! | 13 | `single × client-crash` | not stuck; no damage |
//! | 14 | `unchecked-extend × partition-holder`, `single × partition-holder` | damage |
//! | 18 | `pg-advisory-wait × latency` | no damage; not stuck |
//! | 20a | `single · cluster × failover` | damage |
//! | 20b | `single · cluster × cluster-failover` | no damage |
//! | 20c | `single · cluster × cluster-failover-force` | damage |
//! | 20d | `single · cluster × cluster-failover-takeover` | damage |
//! | 20e | `single-wait · cluster × failover` | no damage |
//!
//! Mapping notes: 06 kills a minority of Redlock's nodes for 3 s (six TTLs, so every key they
//! lose would have expired anyway): for the lock that is the minority cut off for longer than
//! the TTL, which is `partition-minority` on `five`. 11b crashes a *client* (`client-crash`
//! at `client:0`), not the server, so its cell is `pg-advisory × client-crash`. 10b and 14
//! run `single` with the watchdog, which the matrix's `client-pause` and `partition-holder`
//! cells do not: a paused process freezes its watchdog and a cut-off one cannot renew, so the
//! outcome (damage) is the same without it. 18 delays the client link of the one
//! PostgreSQL server, which is the matrix's `latency` column on `postgres` (its episodes
//! alternate a delay below the node timeout with one near the TTL, past the blocking
//! acquire's bound of `lock_timeout` + node timeout); the row is judged only in a matrix that
//! runs `pg-advisory-wait`, which the default rows do not.
//!
//! The pooler claims map to rows of a PostgreSQL setup ([`PgSetup`], `--pg-setups`), judged
//! only in a matrix that runs that setup. 15 runs without a fault: its `none` column behind
//! PgBouncer in transaction mode (`pg-advisory · pgbouncer-transaction`, damage;
//! `pg-advisory-xact` there, none). 17a and 17b crash the holder behind PgBouncer in session
//! mode: `client-crash` behind `pgbouncer-session-no-reset` (stuck) and behind
//! `pgbouncer-session`, whose default reset in session mode is the `DISCARD ALL` 17b sets
//! (never stuck, no damage). In the matrix the no-reset cell is stuck after some of its
//! crash episodes, not all (2 of 18 and 1 of 11 in a quick matrix): a replacement client that
//! PgBouncer hands the crashed holder's server connection is granted its lock again
//! (re-entrant per session) and frees it; "stuck" agrees with one stuck episode.
//!
//! The Redis Cluster claims map to the cluster rows ([`RedisSetup::Cluster`],
//! `--redis-setups cluster`), judged only in a matrix that runs them. 20a–20d are the
//! cluster's failover columns as the files run them: replication from the lock's shard lagging
//! behind the holder's key, then its primary killed (`failover`) or `CLUSTER FAILOVER` in the
//! file's mode sent to its replica. The matrix's cluster has its own node timeout
//! (`--cluster-node-timeout`, 1 s by default; 20a's file has 1.5 s) and its episodes cycle
//! inside one trial, each holder stretched past the failover with a lease that outlasts the
//! stretch (see [`crate::matrix::cluster_shape`]). 20e runs `single-wait` through 20a's kill: in the
//! file every lease attempt fails while the shard's one replica lags, so no holder exists to
//! lose; the matrix gives `single-wait` no lag (there would be no lease to aim at), its
//! replica acknowledges the holder's key before the kill, and the claim — waiting for the
//! shard's replica keeps the shard failover from losing the lock — is judged there. 20g is
//! the `cluster-minority-partition` column: the file cuts r0's primary off the bus and its
//! replica before anyone holds the lock and leaves client 0 on its side; the column cuts the
//! replication before the clients return and the bus 1 ms after the first holder is in, with
//! that holder on the primary's side ([`crate::matrix::cluster_partition`]): the same two leases,
//! one on the cut primary and one on the promoted replica.
//!
//! Left out ([`LEFT_OUT`]), because no cell reproduces what the claim is about:
//! - 03 (`get-then-del`): the damage needs the lease to expire between the release's `GET`
//!   and its `DEL` (300 ms replies against 550 ms holds and a 1 s TTL); the matrix's
//!   `latency` column does not aim at that gap, so "no damage in 10 episodes" would not
//!   contradict the claim.
//! - 05c and 05d (`single-wait × failover`): the same strategy and fault class with opposite
//!   outcomes (05c: no damage when every replica lags; 05d: damage when Sentinel promotes a
//!   replica that did not acknowledge). Which one a failover episode meets depends on which
//!   replica lags and which one Sentinel can reach, which the matrix's one failover schedule
//!   does not set; one cell cannot stand for both.
//! - 07b (`redlock`, restart delayed past the TTL): the matrix's `crash-restart-empty`
//!   restarts at once (07a's case); no column restarts late.
//! - 16 (`pg-advisory`, `pg-advisory-fenced`, `pg-advisory-xact` under the server's
//!   `idle_session_timeout`): the matrix runs PostgreSQL with its default settings; no column
//!   sets a server timeout.
//! - 19 (`pg-advisory`, `pg-advisory-wait` borrowing a connection per operation from an
//!   application-side pool, no fault): the matrix's clients keep a session each.
//! - 20f (`single-wait`, the replica that acknowledged the holder's lock restarted empty
//!   behind a lag, then `CLUSTER FAILOVER TAKEOVER`): the takeover column promotes the replica
//!   that acknowledged; no column restarts it first.
//! - 20h (`single`, r0's primary cut off the cluster bus and its replica for 400 ms, shorter
//!   than the node timeout): the `cluster-minority-partition` column cuts for longer than the
//!   node timeout (20g's case); no column cuts shorter.
//! - 22 (`single`, `single-fenced`, `single-wait` while `migrate-slot` moves the held lock's
//!   slot to another shard): the matrix has no slot-migration column yet (a cluster column
//!   would aim `migrate-slot` at a primary of another shard than the lock's, which the step
//!   names by node, and the layout changes from trial to trial).
//! - 26a (`redlock`, `redlock-fenced` with two worker processes, one cut off with a minority
//!   of the nodes and paused): the matrix's columns run every client in one process and aim
//!   at the holder, which a multi-worker run cannot.
//! - 35c's `claim-update-unguarded` × `client-pause` (job work): the matrix's pauses (0.5–2.5
//!   TTL) end past the claim's lease and after a rescue in only 27 % of its episodes (6 of 22
//!   in a quick matrix), which 10 exposed episodes without damage would contradict 4 % of
//!   the time; `claim-update` (11 of 22) and `claim-skip-locked-lease` (5 of 11) are mapped.
//! - 35h (`single`, `single-fenced` with `compute` work): the compute matrix's heat map
//!   counts the lock's double grants as a row-work matrix does (waste for compute), so its
//!   `valid` verdict has no cell that says so.
//!
//! The work-kind claims that are mapped (35a–35g but 35c's control)
//! carry their file's work and key ([`ClaimCell::work`]): a matrix maps the claims of its own
//! kind of work only.

use super::{ClaimCell, ClaimSays};
use crate::driver::WorkKind;
use crate::matrix::fault::FaultClass;
use crate::matrix::setup::{PgSetup, RedisSetup};
use crate::strategy::StrategyKind;

const fn row(
    claim: &'static str,
    file: &'static str,
    strategy: StrategyKind,
    fault: FaultClass,
    says: ClaimSays,
) -> ClaimCell {
    ClaimCell {
        claim,
        file,
        strategy,
        setup: PgSetup::Direct,
        redis: RedisSetup::Standalone,
        fault,
        says,
        work: WorkKind::Row,
        idempotency_key: false,
    }
}

/// A claim row of a matrix of `work` (`keyed`: with `--idempotency-key`).
const fn doing(work: WorkKind, keyed: bool, cell: ClaimCell) -> ClaimCell {
    ClaimCell {
        work,
        idempotency_key: keyed,
        ..cell
    }
}

/// A claim row whose strategy reaches PostgreSQL through `setup`.
const fn via(setup: PgSetup, cell: ClaimCell) -> ClaimCell {
    ClaimCell { setup, ..cell }
}

/// A claim row whose strategy runs on a Redis Cluster.
const fn on_cluster(cell: ClaimCell) -> ClaimCell {
    ClaimCell {
        redis: RedisSetup::Cluster,
        ..cell
    }
}

const F01: &str = "chaos/01-no-ttl-crash.toml";
const F02: &str = "chaos/02-naive-del-pause.toml";
const F04: &str = "chaos/04-expiry-shorter-than-work.toml";
const F05A: &str = "chaos/05a-failover-loses-lock.toml";
const F05B: &str = "chaos/05b-failover-repeats-tokens.toml";
const F06: &str = "chaos/06-redlock-minority-loss.toml";
const F07A: &str = "chaos/07a-redlock-restart-empty.toml";
const F08: &str = "chaos/08-redlock-clock-jump.toml";
const F09: &str = "chaos/09-redlock-process-pause.toml";
const F10A: &str = "chaos/10a-watchdog-slow-work.toml";
const F10B: &str = "chaos/10b-watchdog-pause.toml";
const F11A: &str = "chaos/11a-pg-advisory-session-loss.toml";
const F11B: &str = "chaos/11b-pg-advisory-crash.toml";
const F12A: &str = "chaos/12a-etcd-lease-client-pause.toml";
const F12B: &str = "chaos/12b-etcd-lease-leader-loss.toml";
const F13: &str = "chaos/13-setnx-expire-crash.toml";
const F14: &str = "chaos/14-unchecked-extend-partition.toml";
const F15: &str = "chaos/15-pg-advisory-transaction-pooler.toml";
const F17A: &str = "chaos/17a-pgbouncer-no-reset-keeps-lock.toml";
const F17B: &str = "chaos/17b-pgbouncer-discard-all-frees-lock.toml";
const F18: &str = "chaos/18-pg-wait-late-grant.toml";
const F20A: &str = "chaos/20a-cluster-failover-loses-lock.toml";
const F20B: &str = "chaos/20b-cluster-manual-failover-keeps-lock.toml";
const F20C: &str = "chaos/20c-cluster-forced-failover-loses-lock.toml";
const F20D: &str = "chaos/20d-cluster-takeover-loses-lock.toml";
const F20E: &str = "chaos/20e-cluster-failover-wait-for-replica.toml";
const F20G: &str = "chaos/20g-cluster-minority-primary-grants-second-holder.toml";
const F35A: &str = "chaos/35a-fenced-lock-charges-twice.toml";
const F35B: &str = "chaos/35b-idempotency-key-charges-once.toml";
const F35C: &str = "chaos/35c-claim-lease-shorter-than-the-job.toml";
const F35D: &str = "chaos/35d-claim-with-idempotency-key-needs-no-lock.toml";
const F35E: &str = "chaos/35e-skip-locked-crash-gives-the-job-back.toml";
const F35F: &str = "chaos/35f-skip-locked-pause-keeps-the-job.toml";
const F35G: &str = "chaos/35g-skip-locked-session-reset-runs-twice.toml";

/// Every claim row, in claim order (see the module docs for why each cell).
pub(super) const CLAIMS: &[ClaimCell] = {
    use ClaimSays::*;
    use FaultClass as F;
    use PgSetup as P;
    use StrategyKind as S;
    use WorkKind as W;
    &[
        row("01", F01, S::NoTtl, F::ClientCrash, Stuck),
        row("01", F01, S::NoTtl, F::ClientCrash, NoDamage),
        row("01", F01, S::Single, F::ClientCrash, NotStuck),
        row("01", F01, S::Single, F::ClientCrash, NoDamage),
        row("02", F02, S::NaiveDel, F::ClientPause, Damage),
        row("02", F02, S::Single, F::ClientPause, Damage),
        row("04", F04, S::Single, F::ClientPause, Damage),
        row("04", F04, S::SingleFenced, F::ClientPause, NoDamage),
        row("05a", F05A, S::Single, F::Failover, Damage),
        row("05b", F05B, S::SingleFenced, F::Failover, Damage),
        row("06", F06, S::Redlock, F::PartitionMinority, NoDamage),
        row("07a", F07A, S::Redlock, F::CrashRestartEmpty, Damage),
        row("08", F08, S::Redlock, F::ClockJump, Damage),
        row("09", F09, S::Redlock, F::ClientPause, Damage),
        row("09", F09, S::RedlockFenced, F::ClientPause, NoDamage),
        row("10a", F10A, S::Single, F::SlowWork, NoDamage),
        row("10b", F10B, S::Single, F::ClientPause, Damage),
        row("11a", F11A, S::PgAdvisory, F::SessionLoss, Damage),
        row("11a", F11A, S::PgAdvisoryFenced, F::SessionLoss, NoDamage),
        row("11b", F11B, S::PgAdvisory, F::ClientCrash, NoDamage),
        row("11b", F11B, S::PgAdvisory, F::ClientCrash, NotStuck),
        row("12a", F12A, S::EtcdLease, F::ClientPause, NoDamage),
        row("12b", F12B, S::EtcdLease, F::Failover, NoDamage),
        row("13", F13, S::SetnxExpire, F::ClientCrash, Stuck),
        row("13", F13, S::SetnxExpire, F::ClientCrash, NoDamage),
        row("13", F13, S::Single, F::ClientCrash, NotStuck),
        row("13", F13, S::Single, F::ClientCrash, NoDamage),
        row("14", F14, S::UncheckedExtend, F::PartitionHolder, Damage),
        row("14", F14, S::Single, F::PartitionHolder, Damage),
        via(
            P::PgbouncerTransaction,
            row("15", F15, S::PgAdvisory, F::None, Damage),
        ),
        via(
            P::PgbouncerTransaction,
            row("15", F15, S::PgAdvisoryXact, F::None, NoDamage),
        ),
        via(
            P::PgbouncerSessionNoReset,
            row("17a", F17A, S::PgAdvisory, F::ClientCrash, Stuck),
        ),
        via(
            P::PgbouncerSessionNoReset,
            row("17a", F17A, S::PgAdvisoryWait, F::ClientCrash, Stuck),
        ),
        via(
            P::PgbouncerSession,
            row("17b", F17B, S::PgAdvisory, F::ClientCrash, NotStuck),
        ),
        via(
            P::PgbouncerSession,
            row("17b", F17B, S::PgAdvisory, F::ClientCrash, NoDamage),
        ),
        via(
            P::PgbouncerSession,
            row("17b", F17B, S::PgAdvisoryWait, F::ClientCrash, NotStuck),
        ),
        via(
            P::PgbouncerSession,
            row("17b", F17B, S::PgAdvisoryWait, F::ClientCrash, NoDamage),
        ),
        row("18", F18, S::PgAdvisoryWait, F::Latency, NoDamage),
        row("18", F18, S::PgAdvisoryWait, F::Latency, NotStuck),
        on_cluster(row("20a", F20A, S::Single, F::Failover, Damage)),
        on_cluster(row("20b", F20B, S::Single, F::ClusterFailover, NoDamage)),
        on_cluster(row("20c", F20C, S::Single, F::ClusterFailoverForce, Damage)),
        on_cluster(row(
            "20d",
            F20D,
            S::Single,
            F::ClusterFailoverTakeover,
            Damage,
        )),
        on_cluster(row("20e", F20E, S::SingleWait, F::Failover, NoDamage)),
        on_cluster(row(
            "20g",
            F20G,
            S::Single,
            F::ClusterMinorityPartition,
            Damage,
        )),
        on_cluster(row(
            "20g",
            F20G,
            S::SingleFenced,
            F::ClusterMinorityPartition,
            Damage,
        )),
        doing(
            W::External,
            false,
            row("35a", F35A, S::Single, F::ClientPause, Damage),
        ),
        doing(
            W::External,
            false,
            row("35a", F35A, S::SingleFenced, F::ClientPause, Damage),
        ),
        doing(
            W::External,
            true,
            row("35b", F35B, S::Single, F::ClientPause, Damage),
        ),
        doing(
            W::External,
            true,
            row("35b", F35B, S::SingleFenced, F::ClientPause, NoDamage),
        ),
        doing(
            W::Job,
            false,
            row("35c", F35C, S::ClaimUpdate, F::ClientPause, Damage),
        ),
        doing(
            W::Job,
            true,
            row("35d", F35D, S::ClaimUpdate, F::ClientPause, NoDamage),
        ),
        doing(
            W::Job,
            false,
            row("35e", F35E, S::ClaimSkipLocked, F::ClientCrash, NoDamage),
        ),
        doing(
            W::Job,
            false,
            row(
                "35e",
                F35E,
                S::ClaimSkipLockedLease,
                F::ClientCrash,
                NoDamage,
            ),
        ),
        doing(
            W::Job,
            false,
            row("35f", F35F, S::ClaimSkipLocked, F::ClientPause, NoDamage),
        ),
        doing(
            W::Job,
            false,
            row("35f", F35F, S::ClaimSkipLockedLease, F::ClientPause, Damage),
        ),
        doing(
            W::Job,
            false,
            row("35g", F35G, S::ClaimSkipLocked, F::SessionLoss, Damage),
        ),
    ]
};

/// Claim × strategy pairs with an expectation in `chaos/` but no cell: (claim id, strategy,
/// why). The module docs say more.
pub const LEFT_OUT: &[(&str, StrategyKind, &str)] = &[
    (
        "03",
        StrategyKind::GetThenDel,
        "needs the lease to expire between the release's GET and DEL; no column aims there",
    ),
    (
        "05c",
        StrategyKind::SingleWait,
        "single-wait × failover: safe only when every replica lags (05c), unsafe when Sentinel promotes a replica that did not acknowledge (05d); one cell cannot stand for both",
    ),
    (
        "05d",
        StrategyKind::SingleWait,
        "see 05c: depends on which replica lags and which one Sentinel reaches",
    ),
    (
        "07b",
        StrategyKind::Redlock,
        "a restart delayed past the TTL; crash-restart-empty restarts at once",
    ),
    (
        "16",
        StrategyKind::PgAdvisory,
        "under idle_session_timeout; the matrix sets no server timeout",
    ),
    (
        "16",
        StrategyKind::PgAdvisoryFenced,
        "under idle_session_timeout; the matrix sets no server timeout",
    ),
    (
        "16",
        StrategyKind::PgAdvisoryXact,
        "under idle_session_timeout; the matrix sets no server timeout",
    ),
    (
        "19",
        StrategyKind::PgAdvisory,
        "clients borrowing from a connection pool; the matrix's clients keep a session each",
    ),
    (
        "19",
        StrategyKind::PgAdvisoryWait,
        "clients borrowing from a connection pool; the matrix's clients keep a session each",
    ),
    (
        "20f",
        StrategyKind::SingleWait,
        "the acknowledging replica restarted empty before a CLUSTER FAILOVER TAKEOVER; the \
         takeover column promotes the replica that acknowledged, no column restarts it first",
    ),
    (
        "22",
        StrategyKind::Single,
        "a slot migration on a Redis Cluster; the matrix has no slot-migration column",
    ),
    (
        "22",
        StrategyKind::SingleFenced,
        "a slot migration on a Redis Cluster; the matrix has no slot-migration column",
    ),
    (
        "22",
        StrategyKind::SingleWait,
        "a slot migration on a Redis Cluster; the matrix has no slot-migration column",
    ),
    (
        "26a",
        StrategyKind::Redlock,
        "two worker processes, one cut off with a minority and paused; the matrix's columns run \
         every client in one process",
    ),
    (
        "26a",
        StrategyKind::RedlockFenced,
        "see 26a redlock: a per-worker partition and pause, not a matrix column",
    ),
    (
        "35c",
        StrategyKind::ClaimUpdateUnguarded,
        "job work × client-pause: the matrix's pauses (0.5–2.5 TTL) end past the claim's lease \
         and after a rescue in 6 of 22 exposed episodes (27 %, a quick matrix), which 10 clean \
         episodes would contradict 4 % of the time",
    ),
    (
        "35h",
        StrategyKind::Single,
        "compute work: a duplicate is waste, never damage, while the compute matrix's heat map \
         counts the lock's double grants as damage as row work does",
    ),
    (
        "35h",
        StrategyKind::SingleFenced,
        "see 35h single: compute work",
    ),
    (
        "20h",
        StrategyKind::Single,
        "a cluster-bus partition shorter than the node timeout; the cluster-minority-partition \
         column cuts longer (no column cuts shorter)",
    ),
];
