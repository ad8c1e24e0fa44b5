//! Agreement with the claims: every claim scenario in `chaos/` maps to a matrix cell (e.g.
//! 05a → `single × failover`), and a cell whose outcome contradicts its claim is flagged.

use serde::{Deserialize, Serialize};

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
    /// Strategy (row).
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

/// One claim's cell: which strategy under which fault class, and what the claim says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimCell {
    /// Claim id (`05a`).
    pub claim: &'static str,
    /// Scenario file under `chaos/`.
    pub file: &'static str,
    /// Strategy (row).
    pub strategy: crate::strategy::StrategyKind,
    /// Fault class (column).
    pub fault: super::FaultClass,
    /// What the claim says about the cell.
    pub says: ClaimSays,
}

/// The claims whose cell is in a matrix of `strategies` × `faults`.
pub fn mapped_claims(
    strategies: &[crate::strategy::StrategyKind],
    faults: &[super::FaultClass],
) -> Vec<ClaimCell> {
    let _ = (strategies, faults);
    Vec::new()
}

/// Whether each claim's cell agrees with it (cells not in `cells` are not judged).
pub fn agreement(claims: &[ClaimCell], cells: &[super::CellRecord]) -> Vec<ClaimAgreement> {
    let _ = (claims, cells);
    Vec::new()
}
