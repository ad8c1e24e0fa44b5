//! Agreement with the claims: every claim scenario in `chaos/` that has a matrix cell is
//! mapped to it (e.g. 05a → `single × failover`), and a cell whose outcome contradicts its
//! claim is flagged.
//!
//! The mapping is a static table ([`mapped_claims`]), one row per claim × strategy × what the
//! claim says about that cell. The scenario files' `[expect.<strategy>]` tables are the truth:
//! a unit test reads every `chaos/*.toml` and checks each row against its file (a damage row's
//! strategy lists a damage kind in `anomalies`; a no-damage row lists one in `absent` or
//! expects `valid`; stuck / not-stuck rows list `stuck-resource` in `anomalies` / `absent`),
//! that the file injects a fault of the row's class, and that every strategy a file expects
//! something of is either mapped or left out below with its reason.
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
//! stretch (see [`super::cluster_shape`]). 20e runs `single-wait` through 20a's kill: in the
//! file every lease attempt fails while the shard's one replica lags, so no holder exists to
//! lose; the matrix gives `single-wait` no lag (there would be no lease to aim at), its
//! replica acknowledges the holder's key before the kill, and the claim — waiting for the
//! shard's replica keeps the shard failover from losing the lock — is judged there. 20g is
//! the `cluster-minority-partition` column: the file cuts r0's primary off the bus and its
//! replica before anyone holds the lock and leaves client 0 on its side; the column cuts the
//! replication before the clients return and the bus 1 ms after the first holder is in, with
//! that holder on the primary's side ([`super::cluster_partition`]): the same two leases,
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
//!
//! [`agreement`] holds each row against its cell's episodes: a claim is contradicted by
//! damage where it says none (any damaging exposed episode, or damage the checker found
//! anywhere in the cell), or by no damage in at least [`MIN_EXPOSED_TO_JUDGE`] exposed
//! episodes where it says damage (likewise for stuck / not stuck); it agrees when the claimed
//! outcome is seen (damage: at least one damaging exposed episode; no damage: none in at
//! least [`MIN_EXPOSED_TO_JUDGE`] exposed episodes); otherwise it is not judged.

use serde::{Deserialize, Serialize};

use super::episode::is_damage;
use super::setup::{MatrixRow, PgSetup, RedisSetup};
use super::{CellRecord, FaultClass};
use crate::checker::AnomalyKind;
use crate::strategy::StrategyKind;

/// What a claim says about its cell.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub enum ClaimSays {
    /// The strategy damages the resource under this fault.
    Damage,
    /// The resource is never damaged under this fault.
    NoDamage,
    /// The resource is left stuck (nobody can take it) under this fault.
    Stuck,
    /// The resource is never left stuck under this fault.
    NotStuck,
}

/// One claim's cell and whether the matrix agrees.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimAgreement {
    /// Claim id (`05a`), from its scenario file name.
    pub claim: String,
    /// Scenario file (`chaos/05a-failover-loses-lock.toml`).
    pub file: String,
    /// Row label (the strategy, `strategy · setup` behind a pooler).
    pub strategy: String,
    /// Fault class (column).
    pub fault: String,
    /// What the claim says.
    pub says: ClaimSays,
    /// What the cell shows, one sentence (`3 of 30 exposed episodes damaging`).
    pub observed: String,
    /// `Some(true)` agrees, `Some(false)` contradicts, `None` not judged (cell not run, or
    /// fewer than the minimum of exposed episodes to contradict a damage claim).
    pub agrees: Option<bool>,
}

/// Exposed episodes a cell needs before "no damage" (or "not stuck") in it says anything:
/// 0 of 10 bounds the rate below 25.9 % (exact one-sided 95 %), enough to contradict a claim
/// whose scenario reproduces its damage every run.
pub const MIN_EXPOSED_TO_JUDGE: u32 = 10;

/// One claim's cell: which strategy under which fault class, and what the claim says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimCell {
    /// Claim id (`05a`).
    pub claim: &'static str,
    /// Scenario file under `chaos/`.
    pub file: &'static str,
    /// Strategy (row).
    pub strategy: StrategyKind,
    /// How the row reaches PostgreSQL (`direct` for every other service).
    pub setup: PgSetup,
    /// How a Redis row is deployed (`standalone` for every other service).
    pub redis: RedisSetup,
    /// Fault class (column).
    pub fault: FaultClass,
    /// What the claim says about the cell.
    pub says: ClaimSays,
}

impl ClaimCell {
    /// The claim's row.
    pub fn row(&self) -> MatrixRow {
        MatrixRow {
            strategy: self.strategy,
            setup: self.setup,
            redis: self.redis,
        }
    }
}

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

/// Every claim row, in claim order (see the module docs for why each cell).
const CLAIMS: &[ClaimCell] = {
    use ClaimSays::*;
    use FaultClass as F;
    use PgSetup as P;
    use StrategyKind as S;
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
        "20h",
        StrategyKind::Single,
        "a cluster-bus partition shorter than the node timeout; the cluster-minority-partition \
         column cuts longer (no column cuts shorter)",
    ),
];

/// The claims whose cell is in a matrix of `rows` × `faults`, in claim order (a pooler claim
/// only when its row's setup is among the rows).
pub fn mapped_claims(rows: &[MatrixRow], faults: &[FaultClass]) -> Vec<ClaimCell> {
    CLAIMS
        .iter()
        .filter(|c| rows.contains(&c.row()) && faults.contains(&c.fault))
        .cloned()
        .collect()
}

/// Damage the checker found anywhere in a cell (every checked trial, inside an episode or
/// not): Σ counts of the damage kinds ([`is_damage`]).
pub fn cell_damage(cell: &CellRecord) -> u64 {
    cell.anomalies
        .iter()
        .filter(|(kind, _)| kind.parse::<AnomalyKind>().is_ok_and(is_damage))
        .map(|(_, a)| a.count)
        .sum()
}

/// Whether each claim's cell agrees with it, in the order of `claims` (a cell missing from
/// `cells`, or not run, is not judged).
pub fn agreement(claims: &[ClaimCell], cells: &[CellRecord]) -> Vec<ClaimAgreement> {
    claims
        .iter()
        .map(|claim| {
            let label = claim.row().label();
            let cell = cells
                .iter()
                .find(|c| c.strategy == label && c.fault == claim.fault.name());
            let (observed, agrees) = match cell {
                Some(c) if c.trials_checked > 0 => judge(claim.says, c),
                Some(c) => (format!("cell not run ({})", c.share_text()), None),
                None => ("cell not in this matrix".to_string(), None),
            };
            ClaimAgreement {
                claim: claim.claim.to_string(),
                file: claim.file.to_string(),
                strategy: label,
                fault: claim.fault.to_string(),
                says: claim.says,
                observed,
                agrees,
            }
        })
        .collect()
}

/// What a run cell shows against what the claim says: (sentence, agrees).
fn judge(says: ClaimSays, c: &CellRecord) -> (String, Option<bool>) {
    let e = &c.episodes;
    let enough = e.exposed >= MIN_EXPOSED_TO_JUDGE;
    let short = || {
        format!(
            "only {} exposed episode(s) of {} (fewer than {MIN_EXPOSED_TO_JUDGE} to judge)",
            e.exposed, e.total
        )
    };
    match says {
        ClaimSays::Damage | ClaimSays::NoDamage => {
            let outside = cell_damage(c);
            let mut seen = format!("{} of {} exposed episodes damaging", e.damaging, e.exposed);
            if let Some(i) = &e.first_incident {
                seen.push_str(&format!(
                    " (first: {} at {} ms in {} episode {})",
                    i.kind,
                    i.time_us / 1000,
                    i.dir,
                    i.episode
                ));
            }
            if e.damaging == 0 && outside > 0 {
                seen.push_str(&format!(
                    "; the checker found {outside} damage anomaly(ies) outside the exposed episodes"
                ));
            }
            let damage = e.damaging > 0;
            let agrees = match says {
                ClaimSays::Damage if damage => Some(true),
                ClaimSays::Damage if enough => Some(false),
                ClaimSays::NoDamage if damage || outside > 0 => Some(false),
                ClaimSays::NoDamage if enough => Some(true),
                _ => None,
            };
            if agrees.is_none() {
                return (format!("{seen}; {}", short()), None);
            }
            (seen, agrees)
        }
        ClaimSays::Stuck | ClaimSays::NotStuck => {
            let seen = format!("{} of {} exposed episodes stuck", e.stuck, e.exposed);
            let stuck = e.stuck > 0;
            let agrees = match says {
                ClaimSays::Stuck if stuck => Some(true),
                ClaimSays::NotStuck if stuck => Some(false),
                _ if enough => Some(says == ClaimSays::NotStuck),
                _ => None,
            };
            if agrees.is_none() {
                return (format!("{seen}; {}", short()), None);
            }
            (seen, agrees)
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;

    use super::*;
    use crate::checker::Verdict;
    use crate::matrix::episode::{EpisodeTally, Incident};
    use crate::matrix::record::tests::trial;
    use crate::nemesis::{FailoverMethod, FaultKind};
    use crate::orchestration::scenario::Scenario;
    use crate::topology::TopologyKind;
    use crate::topology::{PoolMode, PoolReset};

    #[test]
    fn claim_says_names_match_serde() {
        crate::variant_names::assert_names_match_serde::<ClaimSays>();
    }

    /// The nemesis faults that make a scenario's schedule an instance of `class`.
    fn kinds_of(class: FaultClass) -> &'static [FaultKind] {
        match class {
            FaultClass::None => &[],
            FaultClass::Latency => &[FaultKind::Latency],
            // 06 kills the minority for six TTLs: as good as cut off.
            FaultClass::PartitionMinority => &[FaultKind::Partition, FaultKind::Kill],
            FaultClass::PartitionHolder => &[FaultKind::Partition],
            FaultClass::CrashRestartEmpty => &[FaultKind::Kill],
            FaultClass::NodePause => &[FaultKind::PauseNode],
            FaultClass::ClockJump => &[FaultKind::ClockJump],
            FaultClass::ClientPause => &[FaultKind::ClientPause],
            FaultClass::ClientCrash => &[FaultKind::ClientCrash],
            // 11a: the holder stalls and its connection is refused and dropped.
            FaultClass::SessionLoss => &[FaultKind::Partition],
            FaultClass::Failover => &[FaultKind::Failover, FaultKind::Kill],
            FaultClass::SlowWork => &[FaultKind::SlowWork],
            FaultClass::ClusterFailover
            | FaultClass::ClusterFailoverForce
            | FaultClass::ClusterFailoverTakeover => &[FaultKind::Failover],
            FaultClass::ClusterPause => &[FaultKind::PauseNode],
            FaultClass::ClusterMinorityPartition => &[FaultKind::Partition],
        }
    }

    /// The failover method a scenario's failover must use to be an instance of `class` on a
    /// cluster row (`None`: any).
    fn method_of(class: FaultClass) -> Option<FailoverMethod> {
        match class {
            FaultClass::Failover => Some(FailoverMethod::KillPrimary),
            FaultClass::ClusterFailover => Some(FailoverMethod::ClusterFailover),
            FaultClass::ClusterFailoverForce => Some(FailoverMethod::ClusterFailoverForce),
            FaultClass::ClusterFailoverTakeover => Some(FailoverMethod::ClusterFailoverTakeover),
            _ => None,
        }
    }

    fn claim_id(s: &Scenario) -> String {
        s.name.split('-').next().unwrap_or_default().to_string()
    }

    #[test]
    fn the_table_agrees_with_every_scenario_file() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("chaos");
        let scenarios = Scenario::load_all(&dir).expect("chaos/ parses");
        let by_file = |file: &str| {
            scenarios
                .iter()
                .find(|s| s.path.ends_with(file.trim_start_matches("chaos/")))
                .unwrap_or_else(|| panic!("{file} is not in chaos/"))
        };
        let is_damage_name = |k: &String| k.parse::<AnomalyKind>().is_ok_and(is_damage);
        for row in CLAIMS {
            let s = by_file(row.file);
            let what = format!(
                "{} {} × {} says {}",
                row.claim, row.strategy, row.fault, row.says
            );
            assert_eq!(claim_id(s), row.claim, "{what}: file and claim id");
            let e = s
                .expect
                .get(row.strategy.name())
                .unwrap_or_else(|| panic!("{what}: no [expect.{}]", row.strategy));
            let holds = match row.says {
                ClaimSays::Damage => e.anomalies.iter().any(is_damage_name),
                ClaimSays::NoDamage => e.verdict == "valid" || e.absent.iter().any(is_damage_name),
                ClaimSays::Stuck => e.anomalies.iter().any(|k| k == "stuck-resource"),
                ClaimSays::NotStuck => e.absent.iter().any(|k| k == "stuck-resource"),
            };
            assert!(holds, "{what}: the file expects {e:?}");
            let faulted = if row.fault == FaultClass::None {
                s.nemesis.is_empty()
            } else {
                s.nemesis
                    .iter()
                    .any(|n| kinds_of(row.fault).contains(&n.fault))
            };
            assert!(
                faulted,
                "{what}: the file's faults are not an instance of {}",
                row.fault
            );
            // The row's setup is the file's pooler: the same mode, and a returned server
            // connection reset or not alike (PgBouncer's default reset in session mode is
            // the `DISCARD ALL` a file may set explicitly).
            let resets = |p: &crate::topology::PoolerSettings| p.reset != PoolReset::None;
            let pooler = row.setup.pooler();
            assert_eq!(
                pooler.map(|p| (p.pool_mode, resets(&p))),
                s.pooler.map(|p| (p.pool_mode, resets(&p))),
                "{what}: setup {} is not the file's pooler {:?}",
                row.setup,
                s.pooler
            );
            if let (Some(p), Some(f)) = (pooler, s.pooler) {
                if p.pool_mode == PoolMode::Transaction {
                    assert!(
                        p.pool_size < 4 && f.pool_size < s.workload.clients,
                        "{what}: clients must share server connections"
                    );
                }
            }
            assert!(
                s.pg_settings.is_empty() && s.workload.pg_pool.is_none(),
                "{what}: the matrix sets no server setting and no client pool"
            );
            // A cluster row is a cluster file, with the cluster's failover of the column's
            // method (the lag and the node timeout are the matrix's own, see the module docs).
            assert_eq!(
                row.redis == RedisSetup::Cluster,
                s.topology == TopologyKind::Cluster,
                "{what}: setup {} is not the file's topology {}",
                row.redis,
                s.topology
            );
            if row.redis == RedisSetup::Cluster {
                let m = method_of(row.fault);
                assert!(
                    m.is_none()
                        || s.nemesis.iter().any(|n| n.fault == FaultKind::Failover
                            && n.method.unwrap_or_default() == m.unwrap()),
                    "{what}: the file's failover is not {m:?}"
                );
                assert!(
                    s.nemesis
                        .iter()
                        .any(|n| n.link == Some(crate::nemesis::Link::Replication)),
                    "{what}: the cluster's failover columns run under replication lag"
                );
                // The minority partition is a bus cut with clients on the primary's side.
                assert_eq!(
                    row.fault == FaultClass::ClusterMinorityPartition,
                    s.nemesis
                        .iter()
                        .any(|n| n.link == Some(crate::nemesis::Link::Bus)
                            && n.with_clients.is_some()),
                    "{what}: a bus cut with clients on the cut side is this column's"
                );
            }
        }
        // Every strategy a file expects something of is mapped or left out with a reason.
        for s in &scenarios {
            let id = claim_id(s);
            for name in s.expect.keys() {
                let mapped = CLAIMS
                    .iter()
                    .any(|r| r.claim == id && r.strategy.name() == name);
                let left = LEFT_OUT
                    .iter()
                    .any(|(c, k, _)| *c == id && k.name() == name);
                assert!(
                    mapped ^ left,
                    "{}: [expect.{name}] must be mapped to a cell or left out (mapped {mapped}, left out {left})",
                    s.path.display()
                );
            }
        }
    }

    #[test]
    fn mapped_claims_keep_the_cells_of_the_matrix_only() {
        let got = mapped_claims(
            &[StrategyKind::Single.into(), StrategyKind::Redlock.into()],
            &[FaultClass::Failover, FaultClass::ClientPause],
        );
        let ids: Vec<(&str, &str)> = got.iter().map(|c| (c.claim, c.strategy.name())).collect();
        assert_eq!(
            ids,
            vec![
                ("02", "single"),
                ("04", "single"),
                ("05a", "single"),
                ("09", "redlock"),
                ("10b", "single")
            ]
        );
        assert!(mapped_claims(&[StrategyKind::EtcdLease.into()], &[FaultClass::None]).is_empty());
        // The pooler claims only where their setup is a row.
        let pg = [StrategyKind::PgAdvisory, StrategyKind::PgAdvisoryXact];
        let standalone = [RedisSetup::Standalone];
        let direct = MatrixRow::expand(&pg, &[PgSetup::Direct], &standalone);
        assert!(mapped_claims(&direct, &[FaultClass::None]).is_empty());
        let pooled = MatrixRow::expand(
            &pg,
            &[PgSetup::Direct, PgSetup::PgbouncerTransaction],
            &standalone,
        );
        let got = mapped_claims(&pooled, &[FaultClass::None, FaultClass::ClientCrash]);
        let ids: Vec<(&str, String, ClaimSays)> = got
            .iter()
            .map(|c| (c.claim, c.row().label(), c.says))
            .collect();
        assert_eq!(
            ids,
            vec![
                ("11b", "pg-advisory".into(), ClaimSays::NoDamage),
                ("11b", "pg-advisory".into(), ClaimSays::NotStuck),
                (
                    "15",
                    "pg-advisory · pgbouncer-transaction".into(),
                    ClaimSays::Damage
                ),
                (
                    "15",
                    "pg-advisory-xact · pgbouncer-transaction".into(),
                    ClaimSays::NoDamage
                ),
            ]
        );
    }

    #[test]
    fn the_cluster_claims_are_judged_on_the_cluster_rows_only() {
        use FaultClass as F;
        let faults = [F::Failover]
            .into_iter()
            .chain(F::CLUSTER)
            .collect::<Vec<_>>();
        let strategies = [StrategyKind::Single, StrategyKind::SingleWait];
        let standalone =
            MatrixRow::expand(&strategies, &[PgSetup::Direct], &[RedisSetup::Standalone]);
        let ids: Vec<&str> = mapped_claims(&standalone, &faults)
            .iter()
            .map(|c| c.claim)
            .collect();
        assert_eq!(ids, ["05a"], "Sentinel's failover cell only");
        let both = MatrixRow::expand(
            &strategies,
            &[PgSetup::Direct],
            &[RedisSetup::Standalone, RedisSetup::Cluster],
        );
        let got: Vec<(&str, String, &str, ClaimSays)> = mapped_claims(&both, &faults)
            .iter()
            .map(|c| (c.claim, c.row().label(), c.fault.name(), c.says))
            .collect();
        assert_eq!(
            got,
            [
                ("05a", "single".into(), "failover", ClaimSays::Damage),
                (
                    "20a",
                    "single · cluster".into(),
                    "failover",
                    ClaimSays::Damage
                ),
                (
                    "20b",
                    "single · cluster".into(),
                    "cluster-failover",
                    ClaimSays::NoDamage
                ),
                (
                    "20c",
                    "single · cluster".into(),
                    "cluster-failover-force",
                    ClaimSays::Damage
                ),
                (
                    "20d",
                    "single · cluster".into(),
                    "cluster-failover-takeover",
                    ClaimSays::Damage
                ),
                (
                    "20e",
                    "single-wait · cluster".into(),
                    "failover",
                    ClaimSays::NoDamage
                ),
                (
                    "20g",
                    "single · cluster".into(),
                    "cluster-minority-partition",
                    ClaimSays::Damage
                ),
            ]
        );
        // Judged against the cell of the cluster row, not the Sentinel one of the same name.
        let sentinel = cell("single", "failover", 12, 0, 0);
        let cluster = cell("single · cluster", "failover", 11, 4, 0);
        let claims = mapped_claims(&both, &[F::Failover]);
        let a = agreement(&claims, &[sentinel, cluster]);
        assert_eq!(
            a[0].agrees,
            Some(false),
            "05a on Sentinel: {}",
            a[0].observed
        );
        assert_eq!(
            a[1].agrees,
            Some(true),
            "20a on the cluster: {}",
            a[1].observed
        );
        assert_eq!(a[2].agrees, None, "20e: its cell is not given");
    }

    /// A run cell of `strategy × fault` whose episodes add up to `exposed` exposed episodes,
    /// `damaging` of them damaging and `stuck` of them stuck.
    pub(crate) fn cell(
        strategy: &str,
        fault: &str,
        exposed: u32,
        damaging: u32,
        stuck: u32,
    ) -> CellRecord {
        let anomalies: &[(&str, u64)] = if damaging > 0 {
            &[("mutex-violation", 1)]
        } else {
            &[]
        };
        let verdict = if damaging > 0 {
            Verdict::Invalid
        } else {
            Verdict::Valid
        };
        let mut c = CellRecord::fold(
            strategy,
            fault,
            "single",
            "x",
            1,
            vec![trial(1, verdict, 100, anomalies, 5000, 10.0)],
        );
        c.episodes = EpisodeTally {
            total: exposed + 2,
            exposed,
            damaging,
            stuck,
            damage_rate: crate::matrix::Interval::of(u64::from(damaging), u64::from(exposed)),
            recovery_p50_ms: Some(20.0),
            recovery_p99_ms: Some(80.0),
            first_incident: (damaging > 0).then(|| Incident {
                dir: format!("trials/{strategy}/{fault}/t1"),
                trial: 1,
                episode: 3,
                time_us: 2_345_000,
                kind: AnomalyKind::MutexViolation,
            }),
            ..EpisodeTally::default()
        };
        c
    }

    fn judged(says: ClaimSays, c: CellRecord) -> ClaimAgreement {
        let claim = ClaimCell {
            claim: "x",
            file: "chaos/x.toml",
            strategy: c.strategy.parse().unwrap(),
            setup: PgSetup::Direct,
            redis: RedisSetup::Standalone,
            fault: c.fault.parse().unwrap(),
            says,
        };
        agreement(&[claim], &[c]).remove(0)
    }

    #[test]
    fn damage_claims_agree_on_one_damaging_episode_and_are_contradicted_by_ten_clean_ones() {
        let a = judged(ClaimSays::Damage, cell("single", "failover", 3, 1, 0));
        assert_eq!(a.agrees, Some(true), "{}", a.observed);
        assert!(
            a.observed.contains("1 of 3 exposed episodes damaging (first: mutex-violation at 2345 ms in trials/single/failover/t1 episode 3)"),
            "{}",
            a.observed
        );
        let a = judged(ClaimSays::Damage, cell("single", "failover", 10, 0, 0));
        assert_eq!(a.agrees, Some(false), "{}", a.observed);
        let a = judged(ClaimSays::Damage, cell("single", "failover", 9, 0, 0));
        assert_eq!(a.agrees, None);
        assert!(
            a.observed.contains("only 9 exposed episode(s) of 11"),
            "{}",
            a.observed
        );
    }

    #[test]
    fn no_damage_claims_are_contradicted_by_any_damage_and_agree_on_ten_clean_episodes() {
        let fenced =
            |exposed, damaging| cell("single-fenced", "client-pause", exposed, damaging, 0);
        assert_eq!(
            judged(ClaimSays::NoDamage, fenced(2, 1)).agrees,
            Some(false)
        );
        assert_eq!(
            judged(ClaimSays::NoDamage, fenced(10, 0)).agrees,
            Some(true)
        );
        assert_eq!(judged(ClaimSays::NoDamage, fenced(9, 0)).agrees, None);
        // Damage the checker found outside every exposed episode contradicts it too.
        let mut c = fenced(12, 0);
        c.anomalies = cell("single", "none", 1, 1, 0).anomalies;
        let a = judged(ClaimSays::NoDamage, c);
        assert_eq!(a.agrees, Some(false));
        assert!(
            a.observed.contains("1 damage anomaly(ies) outside"),
            "{}",
            a.observed
        );
    }

    #[test]
    fn stuck_claims_and_cells_not_run() {
        let crash = |exposed, stuck| cell("setnx-expire", "client-crash", exposed, 0, stuck);
        assert_eq!(judged(ClaimSays::Stuck, crash(1, 1)).agrees, Some(true));
        assert_eq!(judged(ClaimSays::Stuck, crash(10, 0)).agrees, Some(false));
        assert_eq!(judged(ClaimSays::Stuck, crash(4, 0)).agrees, None);
        assert_eq!(judged(ClaimSays::NotStuck, crash(1, 1)).agrees, Some(false));
        assert_eq!(judged(ClaimSays::NotStuck, crash(10, 0)).agrees, Some(true));
        let not_run = CellRecord::fold("single", "failover", "sentinel", "x", 3, vec![]);
        let a = judged(ClaimSays::Damage, not_run);
        assert_eq!(
            (a.agrees, a.observed.as_str()),
            (None, "cell not run (not run)")
        );
        let claims = mapped_claims(&[StrategyKind::Single.into()], &[FaultClass::Failover]);
        let a = agreement(&claims, &[]);
        assert_eq!(a[0].agrees, None);
        assert_eq!(a[0].observed, "cell not in this matrix");
        assert_eq!(a[0].file, "chaos/05a-failover-loses-lock.toml");
    }
}
