//! The decision table, read off the matrix's fault episodes, the uncontended probes and the
//! claims.
//!
//! **Correctness lock** (a second writer is damage). A strategy qualifies when
//! - no exposed episode in any fault class was damaging ([`super::episode::is_damage`]: mutual
//!   exclusion violated at the ledger, stale write accepted, lost update, token repeated or
//!   regressed), and the checker found no damage anywhere else in its cells either;
//! - every fault class it ran has at least [`MIN_EXPOSED`] exposed episodes (a class below
//!   that keeps it out: "no damage in 4 episodes" rules nothing out); a class in which no
//!   episode ran at all (e.g. `clock-jump` where there is no clock to jump) is named and
//!   counted neither way, but at least one class must have the minimum;
//! - no mapped claim says it damages the resource. A damage claim disqualifies whatever its
//!   cell shows: the claim's scenario reproduces the damage on every run, so a cell without
//!   damage means the matrix's episodes missed the mechanism (the claim table flags that as a
//!   contradiction), not that the strategy is safe. A no-damage claim the cell contradicts
//!   comes with damage in that cell, which already disqualifies; it is cited too.
//!
//! Each qualifying strategy carries its bound: with 0 damaging episodes in n exposed ones, the
//! exact one-sided 95 % upper bound on the damage rate per episode is `1 − 0.05^(1/n)`, quoted
//! for the class with the fewest exposed episodes (so it holds for each class). Each
//! non-qualifying one cites the cell and the first incident that disqualify it. Classes with
//! fewer than [`THIN_EXPOSED`] exposed episodes make the evidence thin (the bound is weaker
//! than "< 10 % per episode").
//!
//! **Efficiency lock** (duplicate work is tolerable). A strategy qualifies when
//! - it was never stuck: no exposed episode in any class after which nobody could take the
//!   resource for two TTLs after it should have been free, and no mapped claim says it gets stuck; every class
//!   with episodes has at least [`MIN_EXPOSED`] exposed ones (fewer do not show it never
//!   gets stuck);
//! - its recovery (from when the resource was free to take after the heal → first successful
//!   acquire, p50 over its exposed episodes; a holder's planned hold past the heal is not
//!   counted, see [`super::episode`]) in every fault class is within the best's interval: at
//!   most [`RECOVERY_FACTOR`] × the lowest recovery p50 any non-control strategy not stuck there
//!   with the minimum of exposed episodes reached in that class, and at least that p50 +
//!   [`RECOVERY_FLOOR_MS`]. So a typical recovery must be no slower than twice the best's
//!   typical one; differences below 100 ms (retry delay, scheduling on a loaded machine) never
//!   count. A lock with a lease TTL is allowed one TTL on top: it waits out a crashed or
//!   cut-off holder's lease by design (a PostgreSQL session lock is freed with the
//!   connection), and the TTL is the team's setting, not the lock's cost — without the
//!   allowance the answer would follow whatever TTL the matrix ran with;
//! - it has an uncontended probe ([`super::probe`]): a strategy without one is not ranked.
//!
//! The qualifying strategies are then ranked by **cost**, not by throughput of a hold-bound
//! workload: first the servers a team has to run ([`super::probe::servers_to_run`]), then the
//! uncontended acquire latency. A probe's interval runs from its p50 to its p99, and at least
//! to [`PROBE_SPREAD`] × its p50 (one scheduler hiccup on a loaded 2-core machine costs more
//! than a local round trip, so a p99 close to the p50 says the run was quiet, not that the
//! lock is that steady). Strategies whose intervals overlap are tied, and a tie goes to fewer
//! servers; the recommendation is the cheapest strategy together with every strategy of the
//! same server count whose interval overlaps it (directly or through another tied one), in
//! row order, so noise inside the intervals never changes the answer.
//!
//! Negative controls are shown but never recommended. The output depends only on the input
//! (cells are read in fault-class order whatever their order in the slice).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::claims::{cell_damage, ClaimAgreement, ClaimSays};
use super::probe::ProbeRecord;
use super::record::CellRecord;
use super::setup::label_strategy;
use super::stats::Interval;
use super::FaultClass;
use crate::driver::WorkKind;
use crate::matrix::MatrixWorkload;
use crate::strategy::StrategyKind;
use thin::{Need, ThinEvidence};

mod work;

/// Exposed episodes a fault class needs before it counts as evidence for a pick (0 of 10:
/// damage < 25.9 % per episode at 95 %).
pub const MIN_EXPOSED: u32 = 10;

/// Exposed episodes per class below which the evidence is called thin (0 of 30: damage
/// < 9.5 % per episode at 95 %; the default matrix's aim).
pub const THIN_EXPOSED: u32 = 30;

/// A strategy's recovery p50 in a class may be this many times the best recovery p50 there.
pub const RECOVERY_FACTOR: f64 = 2.0;

/// A recovery this much (ms) slower than the best's p50 is never held against a strategy
/// (retry delay, scheduling on a loaded machine).
pub const RECOVERY_FLOOR_MS: f64 = 100.0;

/// A probe's latency interval reaches at least this many times its p50.
pub const PROBE_SPREAD: u64 = 2;

/// One strategy's line in a recommendation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRow {
    /// Strategy name.
    pub strategy: String,
    /// Meets the rule.
    pub eligible: bool,
    /// Why (or why not), citing cells as `strategy × fault` and incidents by trial directory.
    pub reason: String,
    /// The cells this row rests on (`strategy × fault`).
    pub cells: Vec<String>,
    /// Throughput in the `none` cell, ops/s (shown only: a hold-bound workload's throughput
    /// is not the lock's cost, and nothing is ranked by it).
    pub throughput_ops_s: Option<f64>,
    /// Checked trials over every fault.
    pub trials_checked: u32,
    /// Servers to run (efficiency; from the probe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub servers: Option<u32>,
    /// Uncontended acquire p50, µs (efficiency; from the probe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_p50_us: Option<u64>,
    /// Uncontended acquire p99, µs (efficiency; from the probe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_p99_us: Option<u64>,
    /// Its per-episode damage bound (correctness, qualifying strategies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<String>,
}

/// One need's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    /// `efficiency` or `correctness`.
    pub need: String,
    /// The rule, in words.
    pub rule: String,
    /// Recommended strategies (efficiency: the cheapest and those tied with it; correctness:
    /// every qualifying one), in row order.
    pub recommended: Vec<String>,
    /// The sentence a reader takes away.
    pub answer: String,
    /// What the exposed episodes allow one to say (correctness only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<String>,
    /// Set when the evidence is thin (classes below [`THIN_EXPOSED`], cells without
    /// evidence, claims the matrix contradicts, missing probes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thin: Option<String>,
    /// Every strategy, eligible or not.
    pub rows: Vec<DecisionRow>,
    /// Fault classes of [`FaultClass::ALL`] no cell ran (`matrix --faults` left them out): the
    /// answer says nothing about them, and names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untried: Vec<String>,
}

/// Both answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionTable {
    /// For a lock whose double grant costs only duplicate work.
    pub efficiency: Recommendation,
    /// For a lock whose double grant corrupts data.
    pub correctness: Recommendation,
    /// The work the trials did (`row` in files written before work kinds).
    #[serde(default)]
    pub work: WorkKind,
}

fn cite(c: &CellRecord) -> String {
    format!("{} × {}", c.strategy, c.fault)
}

fn is_control(name: &str) -> bool {
    label_strategy(name).is_some_and(|k| k.is_negative_control())
}

/// Column position of a fault class name (unknown names after every class).
fn fault_rank(name: &str) -> usize {
    FaultClass::ALL
        .iter()
        .position(|f| f.name() == name)
        .unwrap_or(FaultClass::ALL.len())
}

/// A strategy's cells in column order, whatever their order in `cells`.
fn cells_of<'a>(cells: &'a [CellRecord], strategy: &str) -> Vec<&'a CellRecord> {
    let mut mine: Vec<&CellRecord> = cells.iter().filter(|c| c.strategy == strategy).collect();
    mine.sort_by(|a, b| {
        fault_rank(&a.fault)
            .cmp(&fault_rank(&b.fault))
            .then_with(|| a.fault.cmp(&b.fault))
    });
    mine
}

/// How much evidence a strategy's cells hold.
struct Evidence<'a> {
    /// Cells with at least [`MIN_EXPOSED`] exposed episodes.
    judged: Vec<&'a CellRecord>,
    /// Why other cells do not count (not run, too few exposed episodes).
    short: Vec<String>,
    /// Run cells in which no episode ran (counted neither way).
    no_episodes: Vec<String>,
}

impl<'a> Evidence<'a> {
    fn of(mine: &[&'a CellRecord]) -> Self {
        let mut e = Evidence {
            judged: Vec::new(),
            short: Vec::new(),
            no_episodes: Vec::new(),
        };
        for &c in mine {
            let t = &c.episodes;
            if c.trials_checked == 0 {
                e.short
                    .push(format!("no evidence in {} ({})", cite(c), c.share_text()));
            } else if t.total == 0 {
                e.no_episodes.push(cite(c));
            } else if t.exposed < MIN_EXPOSED {
                e.short.push(format!(
                    "only {} of {} episodes exposed in {} (fewer than {MIN_EXPOSED})",
                    t.exposed,
                    t.total,
                    cite(c)
                ));
            } else {
                e.judged.push(c);
            }
        }
        if e.judged.is_empty() && e.short.is_empty() {
            e.short.push(format!(
                "no fault class with {MIN_EXPOSED} exposed episodes"
            ));
        }
        e
    }

    /// The judged cell with the fewest exposed episodes.
    fn weakest(&self) -> Option<&'a CellRecord> {
        self.judged
            .iter()
            .copied()
            .min_by_key(|c| c.episodes.exposed)
    }
}

/// The first damaging incident of a cell, for a reason.
fn incident(c: &CellRecord) -> String {
    match &c.episodes.first_incident {
        Some(i) => format!(
            "; first: {} at {} ms, episode {} of {}",
            i.kind,
            i.time_us / 1000,
            i.episode,
            i.dir
        ),
        None => String::new(),
    }
}

/// The first trial of a cell whose checker counted a damage kind.
fn damaged_trial(c: &CellRecord) -> String {
    c.trials
        .iter()
        .find(|t| {
            t.anomaly_counts.iter().any(|(k, &n)| {
                n > 0
                    && k.parse::<crate::checker::AnomalyKind>()
                        .is_ok_and(super::episode::is_damage)
            })
        })
        .map(|t| format!(" (first in {})", t.dir))
        .unwrap_or_default()
}

fn claims_of<'a>(claims: &'a [ClaimAgreement], strategy: &str) -> Vec<&'a ClaimAgreement> {
    claims.iter().filter(|a| a.strategy == strategy).collect()
}

fn row(strategy: &str, mine: &[&CellRecord], eligible: bool, reason: String) -> DecisionRow {
    DecisionRow {
        strategy: strategy.to_string(),
        eligible,
        reason,
        cells: mine.iter().map(|c| cite(c)).collect(),
        throughput_ops_s: mine
            .iter()
            .find(|c| c.fault == "none" && c.trials_checked > 0)
            .map(|c| c.throughput_ops_s),
        trials_checked: mine.iter().map(|c| c.trials_checked).sum(),
        servers: None,
        probe_p50_us: None,
        probe_p99_us: None,
        bound: None,
    }
}

/// Claims the matrix contradicts, one note each (in both answers' thin notes).
fn contradictions(claims: &[ClaimAgreement]) -> Vec<String> {
    claims
        .iter()
        .filter(|a| a.agrees == Some(false))
        .map(|a| {
            format!(
                "claim {} ({} × {} says {}) is contradicted: {}",
                a.claim, a.strategy, a.fault, a.says, a.observed
            )
        })
        .collect()
}

fn joined(notes: Vec<String>) -> Option<String> {
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// Builds the decision table from the matrix's cells (`strategies` in display order), the
/// uncontended probes, the claims' agreement and the workload's lease TTL (the wait a lease
/// lock's recovery is allowed, see the module docs).
pub fn decide(
    strategies: &[String],
    cells: &[CellRecord],
    probes: &[ProbeRecord],
    claims: &[ClaimAgreement],
    lease_ttl: Duration,
) -> DecisionTable {
    let ttl_ms = lease_ttl.as_secs_f64() * 1000.0;
    let untried = untried(cells);
    let mut table = DecisionTable {
        efficiency: efficiency(strategies, cells, probes, claims, ttl_ms),
        correctness: correctness(strategies, cells, claims),
        work: WorkKind::Row,
    };
    for r in [&mut table.efficiency, &mut table.correctness] {
        if !untried.is_empty() && !r.recommended.is_empty() {
            r.answer.push_str(&format!(
                " — among the fault classes tried; not tried: {} (this answer says nothing \
                 about them)",
                untried.join(", ")
            ));
        }
        r.untried.clone_from(&untried);
    }
    table
}

/// [`decide`] for the matrix's workload: its lease TTL, and the work its trials did. With
/// `external` work a duplicate or unexpected charge at the side-effect sink is damage (rule 7),
/// so a fenced lock no longer protects what a correctness answer promises; the answers say
/// which work they are about, and when no lock qualified, that the effect needs an idempotency
/// key of its own. With `job` work a zombie completion is damage too, a lock row's servers
/// count the jobs' database, and a qualifying claim row is answered first as "no lock"
/// (`work`).
pub fn decide_for(
    strategies: &[String],
    cells: &[CellRecord],
    probes: &[ProbeRecord],
    claims: &[ClaimAgreement],
    workload: &MatrixWorkload,
) -> DecisionTable {
    let counted;
    let probes = if workload.work == WorkKind::Job {
        counted = work::with_the_jobs_database(probes);
        &counted[..]
    } else {
        probes
    };
    let mut table = decide(strategies, cells, probes, claims, workload.ttl);
    table.work = workload.work;
    match workload.work {
        WorkKind::Row => {}
        WorkKind::Compute => work::answer_for_compute(&mut table),
        WorkKind::External => work::answer_for_external(&mut table, workload.idempotency_key),
        WorkKind::Job => work::answer_for_jobs(&mut table, workload.idempotency_key),
    }
    table
}

/// The fault classes of [`FaultClass::ALL`] that no cell ran, in column order.
fn untried(cells: &[CellRecord]) -> Vec<String> {
    FaultClass::ALL
        .iter()
        .map(|f| f.name())
        .filter(|name| !cells.iter().any(|c| c.fault == *name))
        .map(str::to_string)
        .collect()
}

/// The exact one-sided bound of 0 damaging in the weakest judged class, for people.
fn bound_of(weakest: &CellRecord) -> String {
    let n = weakest.episodes.exposed;
    weakest
        .episodes
        .damage_rate
        .filter(|i| i.k == 0 && i.n == u64::from(n))
        .or_else(|| Interval::of(0, u64::from(n)))
        .map_or_else(String::new, |i| i.text(false))
}

fn correctness_row(s: &str, cells: &[CellRecord], claims: &[ClaimAgreement]) -> DecisionRow {
    let mine = cells_of(cells, s);
    if mine.is_empty() {
        return row(s, &mine, false, "not run".into());
    }
    let mut problems = Vec::new();
    if is_control(s) {
        problems.push("negative control (deliberately broken), never recommended".to_string());
    }
    for &c in &mine {
        let t = &c.episodes;
        if t.damaging > 0 {
            problems.push(format!(
                "{} of {} exposed episodes damaging in {}{}",
                t.damaging,
                t.exposed,
                cite(c),
                incident(c)
            ));
        } else if cell_damage(c) > 0 {
            problems.push(format!(
                "{} damage anomaly(ies) outside the exposed episodes in {}{}",
                cell_damage(c),
                cite(c),
                damaged_trial(c)
            ));
        }
    }
    for a in claims_of(claims, s) {
        match (a.says, a.agrees) {
            (ClaimSays::Damage, Some(false)) => problems.push(format!(
                "claim {} ({}) shows damage in {} × {} (this matrix contradicts it: {})",
                a.claim, a.file, a.strategy, a.fault, a.observed
            )),
            (ClaimSays::Damage, _) => problems.push(format!(
                "claim {} ({}) shows damage in {} × {} ({})",
                a.claim, a.file, a.strategy, a.fault, a.observed
            )),
            (ClaimSays::NoDamage, Some(false)) => problems.push(format!(
                "contradicts claim {} (no damage in {} × {})",
                a.claim, a.strategy, a.fault
            )),
            _ => {}
        }
    }
    let evidence = Evidence::of(&mine);
    problems.extend(evidence.short.iter().cloned());
    let weakest = evidence.weakest().filter(|_| problems.is_empty());
    let Some(weakest) = weakest else {
        return row(s, &mine, false, problems.join("; "));
    };
    let bound = format!(
        "damage {} per episode in each of {} classes (≥ {} exposed each)",
        bound_of(weakest),
        evidence.judged.len(),
        weakest.episodes.exposed
    );
    let mut reason =
        format!("0 damaging episodes in every fault class and no claim showing damage: {bound}");
    if !evidence.no_episodes.is_empty() {
        reason.push_str(&format!(
            "; no episode ran in {} (counted neither way)",
            evidence.no_episodes.join(", ")
        ));
    }
    let mut r = row(s, &mine, true, reason);
    r.bound = Some(bound);
    r
}

fn correctness(
    strategies: &[String],
    cells: &[CellRecord],
    claims: &[ClaimAgreement],
) -> Recommendation {
    let rows: Vec<DecisionRow> = strategies
        .iter()
        .map(|s| correctness_row(s, cells, claims))
        .collect();
    let picked: Vec<&DecisionRow> = rows.iter().filter(|r| r.eligible).collect();
    let recommended: Vec<String> = picked.iter().map(|r| r.strategy.clone()).collect();
    let bound = joined(
        picked
            .iter()
            .filter_map(|r| r.bound.as_ref().map(|b| format!("{}: {b}", r.strategy)))
            .collect(),
    )
    .map(|b| format!("{b} (exact one-sided 95 %)"));
    let answer = if recommended.is_empty() {
        "none: every strategy run had damage, a claim showing damage, or too few exposed \
         episodes in some fault class (see each row); a correctness lock needs a fenced \
         resource and a token from a consensus system"
            .to_string()
    } else {
        format!(
            "{}: no damaging episode in any fault class and no claim showing damage",
            recommended.join(", ")
        )
    };
    let thin = ThinEvidence::of(
        Need::Correctness,
        &recommended,
        strategies,
        cells,
        &[],
        claims,
    )
    .note();
    Recommendation {
        need: "correctness".into(),
        rule: format!(
            "a second writer corrupts data: 0 damaging episodes (mutual-exclusion violation, accepted stale write, \
             lost update, repeated or regressed token) in every fault class, each with at least {MIN_EXPOSED} exposed \
             episodes, and no claim scenario showing damage; negative controls never"
        ),
        recommended,
        answer,
        bound,
        thin,
        rows,
        untried: Vec::new(),
    }
}

/// The lowest recovery p50 (ms) in `fault` among non-control strategies with the minimum of
/// exposed episodes there and no stuck episode there (nor a claim saying they get stuck
/// there), with the strategy that reached it. Stuck in another class does not count: the best
/// of one class must not move with what happened in another (an etcd trial stuck in
/// node-pause once moved the partition-holder limit and another strategy across it). The p50, not
/// the p99: with 10–30 exposed episodes a p99 is the slowest one, and one slow episode of the
/// best strategy moved the limit by hundreds of ms between runs (and another strategy across
/// it).
fn best_recovery<'a>(
    fault: &str,
    strategies: &'a [String],
    cells: &[CellRecord],
    claims: &[ClaimAgreement],
) -> Option<(&'a str, f64)> {
    strategies
        .iter()
        .filter(|s| {
            !is_control(s)
                && !claims_of(claims, s)
                    .iter()
                    .any(|a| a.says == ClaimSays::Stuck && a.fault == fault)
        })
        .filter_map(|s| {
            let c = cells
                .iter()
                .find(|c| &c.strategy == s && c.fault == fault)?;
            let p50 = c.episodes.recovery_p50_ms?;
            (c.episodes.exposed >= MIN_EXPOSED && c.episodes.stuck == 0)
                .then_some((s.as_str(), p50))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// Why a strategy's recovery is not within the best's interval, per class.
fn slow_recovery(
    mine: &[&CellRecord],
    strategies: &[String],
    cells: &[CellRecord],
    claims: &[ClaimAgreement],
    lease_wait_ms: Option<f64>,
) -> Vec<String> {
    let mut out = Vec::new();
    for &c in mine {
        if c.fault == FaultClass::None.name() || c.episodes.exposed < MIN_EXPOSED {
            continue;
        }
        let Some((best, best_p50)) = best_recovery(&c.fault, strategies, cells, claims) else {
            continue;
        };
        // The cell's own TTL where it was recorded (etcd and Sentinel-failover cells differ).
        let lease_wait = lease_wait_ms.map(|ttl| match c.lease_ttl_ms {
            0 => ttl,
            own => own as f64,
        });
        let limit = (best_p50 * RECOVERY_FACTOR).max(best_p50 + RECOVERY_FLOOR_MS)
            + lease_wait.unwrap_or(0.0);
        let allowance = match lease_wait {
            Some(ttl) => format!(
                "{RECOVERY_FACTOR} × the best p50, {best_p50:.0} ms, of {best} (at least that p50 + {RECOVERY_FLOOR_MS:.0} ms), plus one TTL, {ttl:.0} ms"
            ),
            None => format!(
                "{RECOVERY_FACTOR} × the best p50, {best_p50:.0} ms, of {best} (at least that p50 + {RECOVERY_FLOOR_MS:.0} ms)"
            ),
        };
        match c.episodes.recovery_p50_ms {
            Some(p50) if p50 <= limit => {}
            Some(p50) => out.push(format!(
                "recovery p50 {p50:.0} ms in {} vs at most {limit:.0} ms ({allowance})",
                cite(c)
            )),
            None => out.push(format!("no recovery measured in {}", cite(c))),
        }
    }
    out
}

fn probe_of<'a>(probes: &'a [ProbeRecord], s: &str) -> Option<&'a ProbeRecord> {
    probes.iter().find(|p| p.strategy == s)
}

/// A usable probe: it ran and measured acquires.
fn measured(p: &ProbeRecord) -> bool {
    p.error.is_none() && p.acquires > 0
}

fn efficiency_row(
    s: &str,
    strategies: &[String],
    cells: &[CellRecord],
    probes: &[ProbeRecord],
    claims: &[ClaimAgreement],
    ttl_ms: f64,
) -> DecisionRow {
    let mine = cells_of(cells, s);
    if mine.is_empty() {
        return row(s, &mine, false, "not run".into());
    }
    let mut problems = Vec::new();
    if is_control(s) {
        problems.push("negative control (deliberately broken), never recommended".to_string());
    }
    for &c in &mine {
        if c.episodes.stuck > 0 {
            problems.push(format!(
                "stuck after {} of {} exposed episodes in {}",
                c.episodes.stuck,
                c.episodes.exposed,
                cite(c)
            ));
        }
    }
    for a in claims_of(claims, s) {
        if a.says == ClaimSays::Stuck {
            problems.push(format!(
                "claim {} ({}) shows it stuck in {} × {}",
                a.claim, a.file, a.strategy, a.fault
            ));
        }
    }
    let evidence = Evidence::of(&mine);
    problems.extend(
        evidence
            .short
            .iter()
            .map(|s| format!("{s}: cannot say it never gets stuck")),
    );
    let lease_wait_ms = label_strategy(s)
        .is_some_and(StrategyKind::has_ttl)
        .then_some(ttl_ms);
    problems.extend(slow_recovery(
        &mine,
        strategies,
        cells,
        claims,
        lease_wait_ms,
    ));
    let probe = probe_of(probes, s);
    let mut r = match probe {
        Some(p) if measured(p) && problems.is_empty() => {
            let reason = format!(
                "never stuck, recovery within the best's interval in every class; {} server(s), uncontended acquire p50 {} µs, p99 {} µs",
                p.servers, p.p50_us, p.p99_us
            );
            row(s, &mine, true, reason)
        }
        Some(p) if measured(p) => row(s, &mine, false, problems.join("; ")),
        other => {
            let why = other
                .and_then(|p| p.error.clone())
                .unwrap_or_else(|| "no probe run".into());
            problems.push(format!("no uncontended probe ({why}): not ranked"));
            row(s, &mine, false, problems.join("; "))
        }
    };
    if let Some(p) = probe.filter(|p| measured(p)) {
        r.servers = Some(p.servers);
        r.probe_p50_us = Some(p.p50_us);
        r.probe_p99_us = Some(p.p99_us);
    }
    r
}

/// A probe's latency interval, µs: [p50, max(p99, PROBE_SPREAD × p50)].
fn probe_interval(r: &DecisionRow) -> (u64, u64) {
    let p50 = r.probe_p50_us.unwrap_or(0);
    let p99 = r.probe_p99_us.unwrap_or(0);
    (p50, p99.max(p50.saturating_mul(PROBE_SPREAD)))
}

fn overlap(a: &DecisionRow, b: &DecisionRow) -> bool {
    let (a0, a1) = probe_interval(a);
    let (b0, b1) = probe_interval(b);
    a0 <= b1 && b0 <= a1
}

/// The cheapest eligible rows: fewest servers, then the lowest probe p50, and every row of
/// the same server count tied with it through overlapping probe intervals; in row order.
fn cheapest(rows: &[DecisionRow]) -> Vec<&DecisionRow> {
    let eligible: Vec<&DecisionRow> = rows.iter().filter(|r| r.eligible).collect();
    let Some(leader) = eligible
        .iter()
        .min_by_key(|r| (r.servers, probe_interval(r)))
        .copied()
    else {
        return Vec::new();
    };
    let same: Vec<&DecisionRow> = eligible
        .into_iter()
        .filter(|r| r.servers == leader.servers)
        .collect();
    let mut tied = vec![leader.strategy.as_str()];
    loop {
        let before = tied.len();
        for r in &same {
            if !tied.contains(&r.strategy.as_str())
                && same
                    .iter()
                    .any(|t| tied.contains(&t.strategy.as_str()) && overlap(r, t))
            {
                tied.push(&r.strategy);
            }
        }
        if tied.len() == before {
            break;
        }
    }
    rows.iter()
        .filter(|r| tied.contains(&r.strategy.as_str()))
        .collect()
}

fn efficiency(
    strategies: &[String],
    cells: &[CellRecord],
    probes: &[ProbeRecord],
    claims: &[ClaimAgreement],
    ttl_ms: f64,
) -> Recommendation {
    let rows: Vec<DecisionRow> = strategies
        .iter()
        .map(|s| efficiency_row(s, strategies, cells, probes, claims, ttl_ms))
        .collect();
    let picked = cheapest(&rows);
    let recommended: Vec<String> = picked.iter().map(|r| r.strategy.clone()).collect();
    let describe = |r: &DecisionRow| {
        format!(
            "{} ({} server(s), uncontended p50 {} µs, p99 {} µs)",
            r.strategy,
            r.servers.unwrap_or(0),
            r.probe_p50_us.unwrap_or(0),
            r.probe_p99_us.unwrap_or(0)
        )
    };
    let answer = match picked.as_slice() {
        [] => "none of the strategies run qualifies (see each row)".to_string(),
        [one] => format!(
            "{}: the cheapest that never got stuck and recovered within the best's interval in every fault class",
            describe(one)
        ),
        many => format!(
            "{}: tied as the cheapest that never got stuck and recovered within the best's interval (same servers, overlapping uncontended latency)",
            many.iter().map(|r| describe(r)).collect::<Vec<_>>().join(", ")
        ),
    };
    let thin = ThinEvidence::of(
        Need::Efficiency,
        &recommended,
        strategies,
        cells,
        probes,
        claims,
    )
    .note();
    Recommendation {
        need: "efficiency".into(),
        rule: format!(
            "duplicate work is tolerable: never stuck after an exposed episode (each class with at least {MIN_EXPOSED}), \
             recovery p50 in every class at most {RECOVERY_FACTOR} × the best recovery p50 there of a strategy not stuck there \
             (at least that p50 + {RECOVERY_FLOOR_MS:.0} ms; plus one TTL for a lock with a lease TTL), recovery counted \
             from when the resource was free to take; then the cheapest: fewest servers to run, then uncontended acquire latency \
             (probe p50–p99); overlapping probe intervals are tied and a tie goes to fewer servers; negative controls never"
        ),
        recommended,
        answer,
        bound: None,
        thin,
        rows,
        untried: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
pub mod thin;
