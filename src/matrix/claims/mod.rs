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
//! something of is either mapped or left out ([`LEFT_OUT`]) with its reason.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | what a claim says, the agreement record, and the judgement of a cell against its claim |
//! | `table` | the claim table itself: every claim row and why each cell, and the claims left out |
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
use crate::driver::WorkKind;
use crate::strategy::StrategyKind;

mod table;
#[cfg(test)]
pub(crate) mod tests;

use table::CLAIMS;
pub use table::LEFT_OUT;

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
    /// The work of the claim's file: a matrix of that work maps it (`row` for most).
    pub work: WorkKind,
    /// The file's `idempotency_key`: a matrix with `--idempotency-key` maps it, one without
    /// does not.
    pub idempotency_key: bool,
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

/// The claims whose cell is in a matrix of `rows` × `faults` of row work, in claim order (a
/// pooler claim only when its row's setup is among the rows).
pub fn mapped_claims(rows: &[MatrixRow], faults: &[FaultClass]) -> Vec<ClaimCell> {
    mapped_claims_for(rows, faults, WorkKind::Row, false)
}

/// [`mapped_claims`] for a matrix of `work` (`keyed`: with `--idempotency-key`): the claims
/// whose file does that work, with that key.
pub fn mapped_claims_for(
    rows: &[MatrixRow],
    faults: &[FaultClass],
    work: WorkKind,
    keyed: bool,
) -> Vec<ClaimCell> {
    CLAIMS
        .iter()
        .filter(|c| rows.contains(&c.row()) && faults.contains(&c.fault))
        .filter(|c| c.work == work && c.idempotency_key == keyed)
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
