//! What the matrix records: one [`TrialRecord`] per run (copied from that run's own
//! `summary.json`, which also holds its checker summary), folded into one [`CellRecord`] per
//! strategy × fault class. Pure data and arithmetic: no I/O here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::episode::{EpisodeOutcome, EpisodeTally};
use super::stats::Interval;
use crate::checker::{Liveness, Verdict};
use crate::results::StrategySummary;

/// How one trial ended.
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
pub enum TrialStatus {
    /// Ran to its end and was checked.
    Completed,
    /// Stopped by Ctrl-C / SIGTERM: kept in its directory, left out of the cell's figures.
    Interrupted,
    /// Did not run (a node did not start, a fault could not be injected): `error` says why.
    Failed,
}

/// One trial of a cell: the figures of its run directory's `summary.json` (and the verdict of
/// its `checker.json`). Latencies in µs, throughput in ops/s, availability in %.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialRecord {
    /// 1-based trial number.
    pub trial: u32,
    /// The workload seed of this trial.
    pub seed: u64,
    /// Its run directory, relative to the matrix directory (`trials/single/latency/t1`).
    pub dir: String,
    /// How it ended.
    pub status: TrialStatus,
    /// Why it failed (`status = failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The checker's verdict (`None` when there is no checked evidence).
    pub verdict: Option<Verdict>,
    /// The checker's liveness.
    pub liveness: Option<Liveness>,
    /// Why the verdict is unknown.
    #[serde(default)]
    pub unknown_reasons: Vec<String>,
    /// Anomaly counts per kind (checker names, e.g. `mutex-violation`).
    pub anomaly_counts: BTreeMap<String, u64>,
    /// Critical sections the ledger saw begin.
    pub sections: u64,
    /// Successful acquisitions.
    pub acquired: u64,
    /// Acquisitions that ended in an error or timeout.
    pub errors: u64,
    /// Successful acquire latency p50, µs.
    pub acquire_p50_us: u64,
    /// Successful acquire latency p99, µs.
    pub acquire_p99_us: u64,
    /// Complete lock cycles per second, ops/s.
    pub throughput_ops_s: f64,
    /// Share of time a waiting client could get the lock, % (checker rule 5, waiting view).
    pub availability_pct: Option<f64>,
    /// Its fault episodes, judged ([`super::episode::assess`]).
    #[serde(default)]
    pub episodes: Vec<EpisodeOutcome>,
}

impl TrialRecord {
    /// The record of a trial whose run produced `s` (its `summary.json` entry).
    pub fn from_summary(trial: u32, seed: u64, dir: String, s: &StrategySummary) -> Self {
        let check = s.check.as_ref();
        Self {
            trial,
            seed,
            dir,
            status: TrialStatus::Completed,
            error: None,
            verdict: check.map(|c| c.verdict),
            liveness: check.map(|c| c.liveness),
            unknown_reasons: check.map(|c| c.unknown_reasons.clone()).unwrap_or_default(),
            anomaly_counts: check.map(|c| c.anomaly_counts.clone()).unwrap_or_default(),
            sections: check.map_or(0, |c| c.stats.sections),
            acquired: s.acquired,
            errors: s.errors,
            acquire_p50_us: s.acquire_ok.p50_us,
            acquire_p99_us: s.acquire_ok.p99_us,
            throughput_ops_s: s.throughput_ops_s,
            availability_pct: check.and_then(|c| {
                c.stats
                    .wait_availability_pct
                    .or(Some(c.stats.availability_pct))
            }),
            episodes: Vec::new(),
        }
    }

    /// A trial that did not produce a checked run.
    pub fn not_run(
        trial: u32,
        seed: u64,
        dir: String,
        status: TrialStatus,
        error: Option<String>,
    ) -> Self {
        Self {
            trial,
            seed,
            dir,
            status,
            error,
            verdict: None,
            liveness: None,
            unknown_reasons: Vec::new(),
            anomaly_counts: BTreeMap::new(),
            sections: 0,
            acquired: 0,
            errors: 0,
            acquire_p50_us: 0,
            acquire_p99_us: 0,
            throughput_ops_s: 0.0,
            availability_pct: None,
            episodes: Vec::new(),
        }
    }

    /// Count of one anomaly kind.
    pub fn count(&self, kind: &str) -> u64 {
        self.anomaly_counts.get(kind).copied().unwrap_or(0)
    }

    /// Whether its verdict is not `valid` while none of its episodes that count (exposed, no
    /// harness lag in their span) showed damage: whatever made it invalid or unknown is then
    /// not explained by the evidence, and may be the harness's when it lagged.
    pub fn unexplained_by_evidence(&self) -> bool {
        self.verdict != Some(Verdict::Valid)
            && !self
                .episodes
                .iter()
                .any(|e| e.is_evidence() && !e.damage.is_empty())
    }

    /// Whether the harness's lag took all it exposed: it exposed episodes and set every one
    /// aside ([`EpisodeOutcome::harness_lag_us`]). Such a trial does not count toward its
    /// cell's bound (the lag, not the cell, left it without evidence).
    pub fn lost_to_lag(&self) -> bool {
        self.episodes.iter().any(|e| e.exposed)
            && !self.episodes.iter().any(EpisodeOutcome::is_evidence)
    }

    /// True when it ran to the end and the checker had something to say.
    pub fn is_evidence(&self) -> bool {
        self.status == TrialStatus::Completed && self.verdict.is_some()
    }
}

/// One anomaly kind summed over a cell's trials, with its rate per critical section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnomalyRate {
    /// Σ over completed trials.
    pub count: u64,
    /// Trials in which it appeared at least once.
    pub trials: u32,
    /// count / Σ sections with its 95 % interval (multiply by 1,000 for "per 1,000 critical
    /// sections"); `None` when no section ran.
    pub per_section: Option<Interval>,
}

/// One strategy × fault class: its trials and what they add up to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellRecord {
    /// Strategy name.
    pub strategy: String,
    /// Fault class name.
    pub fault: String,
    /// Topology the trials ran on (`single`, `five`, `sentinel`).
    pub topology: String,
    /// What the fault did there (targets, timing).
    pub what: String,
    /// Trials asked for.
    pub trials_planned: u32,
    /// Trials with checked evidence (completed, with a verdict).
    pub trials_checked: u32,
    /// Trials whose verdict was `invalid`.
    pub invalid: u32,
    /// Trials whose verdict was `valid`.
    pub valid: u32,
    /// Trials whose verdict was `unknown`.
    pub unknown: u32,
    /// Trials that failed to run.
    pub failed: u32,
    /// Trials stopped by Ctrl-C.
    pub interrupted: u32,
    /// `valid` (every checked trial valid), `invalid` (some trial invalid), `unknown` (some
    /// unknown, none invalid, or no checked trial at all), or `not-run`.
    pub verdict: String,
    /// Share of checked trials that were invalid, with its 95 % interval.
    pub invalid_share: Option<Interval>,
    /// Σ critical sections over checked trials.
    pub sections: u64,
    /// Per anomaly kind: sums and rate per section.
    pub anomalies: BTreeMap<String, AnomalyRate>,
    /// Σ accepted stale writes (damage a fencing check should have stopped).
    pub stale_writes_accepted: u64,
    /// Σ rejected stale writes (fencing doing its job).
    pub stale_writes_rejected: u64,
    /// Σ lost updates.
    pub lost_updates: u64,
    /// Σ stuck resources (held until the end of a trial).
    pub stuck_resources: u64,
    /// Median of the trials' acquire p50, µs.
    pub acquire_p50_us: u64,
    /// Largest of the trials' acquire p99, µs (the worst trial).
    pub acquire_p99_us: u64,
    /// Mean of the trials' throughput, ops/s.
    pub throughput_ops_s: f64,
    /// Mean of the trials' availability (share of time a waiting client could get the lock), %.
    pub availability_pct: Option<f64>,
    /// Smallest of the trials' availability, %.
    pub availability_min_pct: Option<f64>,
    /// The fault episodes of its checked trials added up (exposed, damaging, interval,
    /// recovery).
    #[serde(default)]
    pub episodes: EpisodeTally,
    /// The lease TTL this cell's trials ran with, ms (a cell may differ from the workload's:
    /// etcd grants whole seconds, a Sentinel failover cell runs with a lease that outlasts the
    /// promotion); 0 in files written before it was recorded.
    #[serde(default)]
    pub lease_ttl_ms: u64,
    /// Every trial, in order.
    pub trials: Vec<TrialRecord>,
}

/// Median of a non-empty list (lower middle for even lengths); 0 when empty.
fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    if v.is_empty() {
        0
    } else {
        v[(v.len() - 1) / 2]
    }
}

impl CellRecord {
    /// Folds `trials` into a cell. Only checked trials (completed, with a verdict) count in
    /// the figures; failed and interrupted ones are counted and listed.
    pub fn fold(
        strategy: &str,
        fault: &str,
        topology: &str,
        what: &str,
        trials_planned: u32,
        trials: Vec<TrialRecord>,
    ) -> Self {
        let checked: Vec<&TrialRecord> = trials.iter().filter(|t| t.is_evidence()).collect();
        let n = checked.len() as u32;
        let with = |v: Verdict| checked.iter().filter(|t| t.verdict == Some(v)).count() as u32;
        let (invalid, valid, unknown) = (
            with(Verdict::Invalid),
            with(Verdict::Valid),
            with(Verdict::Unknown),
        );
        let failed = trials
            .iter()
            .filter(|t| t.status == TrialStatus::Failed)
            .count() as u32;
        let interrupted = trials
            .iter()
            .filter(|t| t.status == TrialStatus::Interrupted)
            .count() as u32;
        let verdict = if trials.is_empty() {
            "not-run"
        } else if invalid > 0 {
            "invalid"
        } else if n == 0 || unknown > 0 {
            // Never `valid` on empty evidence.
            "unknown"
        } else {
            "valid"
        };
        let sections: u64 = checked.iter().map(|t| t.sections).sum();
        let mut anomalies: BTreeMap<String, AnomalyRate> = BTreeMap::new();
        for t in &checked {
            for (kind, &c) in &t.anomaly_counts {
                let e = anomalies.entry(kind.clone()).or_insert(AnomalyRate {
                    count: 0,
                    trials: 0,
                    per_section: None,
                });
                e.count += c;
                e.trials += u32::from(c > 0);
            }
        }
        for a in anomalies.values_mut() {
            a.per_section = Interval::of(a.count, sections);
        }
        let sum = |kind: &str| checked.iter().map(|t| t.count(kind)).sum::<u64>();
        let avail: Vec<f64> = checked.iter().filter_map(|t| t.availability_pct).collect();
        Self {
            strategy: strategy.to_string(),
            fault: fault.to_string(),
            topology: topology.to_string(),
            what: what.to_string(),
            trials_planned,
            trials_checked: n,
            invalid,
            valid,
            unknown,
            failed,
            interrupted,
            verdict: verdict.to_string(),
            invalid_share: Interval::of(u64::from(invalid), u64::from(n)),
            sections,
            stale_writes_accepted: sum("stale-write-accepted"),
            stale_writes_rejected: sum("stale-write-rejected"),
            lost_updates: sum("lost-update"),
            stuck_resources: sum("stuck-resource"),
            anomalies,
            acquire_p50_us: median(checked.iter().map(|t| t.acquire_p50_us).collect()),
            acquire_p99_us: checked.iter().map(|t| t.acquire_p99_us).max().unwrap_or(0),
            throughput_ops_s: if n == 0 {
                0.0
            } else {
                checked.iter().map(|t| t.throughput_ops_s).sum::<f64>() / f64::from(n)
            },
            availability_pct: (!avail.is_empty())
                .then(|| avail.iter().sum::<f64>() / avail.len() as f64),
            availability_min_pct: avail.iter().copied().reduce(f64::min),
            lease_ttl_ms: 0,
            episodes: EpisodeTally::of(
                &checked
                    .iter()
                    .flat_map(|t| t.episodes.iter().map(|e| (t.dir.clone(), e.clone())))
                    .collect::<Vec<_>>(),
            ),
            trials,
        }
    }

    /// Count of one anomaly kind over the cell.
    pub fn count(&self, kind: &str) -> u64 {
        self.anomalies.get(kind).map_or(0, |a| a.count)
    }

    /// `2/3 invalid`, `0/3 invalid`, `no evidence (2 failed)`.
    pub fn share_text(&self) -> String {
        if self.trials_checked == 0 {
            let mut why = Vec::new();
            if self.failed > 0 {
                why.push(format!("{} failed", self.failed));
            }
            if self.interrupted > 0 {
                why.push(format!("{} interrupted", self.interrupted));
            }
            return if why.is_empty() {
                "not run".to_string()
            } else {
                format!("no evidence ({})", why.join(", "))
            };
        }
        let mut s = format!("{}/{} invalid", self.invalid, self.trials_checked);
        if self.unknown > 0 {
            s.push_str(&format!(", {} unknown", self.unknown));
        }
        s
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn status_names_match_serde() {
        crate::variant_names::assert_names_match_serde::<TrialStatus>();
        crate::variant_names::assert_names_match_serde::<super::super::MatrixStatus>();
    }

    /// A completed trial with `verdict`, `sections`, anomalies, p99 and throughput.
    pub(crate) fn trial(
        n: u32,
        verdict: Verdict,
        sections: u64,
        anomalies: &[(&str, u64)],
        p99_us: u64,
        ops: f64,
    ) -> TrialRecord {
        let mut t =
            TrialRecord::not_run(n, n as u64, format!("t{n}"), TrialStatus::Completed, None);
        t.verdict = Some(verdict);
        t.liveness = Some(Liveness::Live);
        t.sections = sections;
        t.acquired = sections;
        t.anomaly_counts = anomalies.iter().map(|(k, c)| (k.to_string(), *c)).collect();
        t.acquire_p50_us = p99_us / 10;
        t.acquire_p99_us = p99_us;
        t.throughput_ops_s = ops;
        t.availability_pct = Some(90.0 + n as f64);
        t
    }

    #[test]
    fn a_cell_sums_its_trials() {
        let trials = vec![
            trial(
                1,
                Verdict::Invalid,
                400,
                &[("mutex-violation", 2)],
                9000,
                100.0,
            ),
            trial(2, Verdict::Valid, 500, &[], 7000, 120.0),
            trial(
                3,
                Verdict::Invalid,
                100,
                &[("mutex-violation", 1), ("lost-update", 1)],
                8000,
                80.0,
            ),
        ];
        let c = CellRecord::fold("single", "client-pause", "single", "x", 3, trials);
        assert_eq!(
            (c.invalid, c.valid, c.unknown, c.trials_checked),
            (2, 1, 0, 3)
        );
        assert_eq!(c.verdict, "invalid");
        assert_eq!(c.sections, 1000);
        assert_eq!(c.count("mutex-violation"), 3);
        assert_eq!(c.anomalies["mutex-violation"].trials, 2);
        let rate = c.anomalies["mutex-violation"].per_section.unwrap();
        assert_eq!((rate.k, rate.n), (3, 1000));
        assert_eq!(c.lost_updates, 1);
        assert_eq!(c.acquire_p99_us, 9000);
        assert_eq!(c.acquire_p50_us, 800);
        assert!((c.throughput_ops_s - 100.0).abs() < 1e-9);
        assert_eq!(c.availability_min_pct, Some(91.0));
        assert!((c.availability_pct.unwrap() - 92.0).abs() < 1e-9);
        assert_eq!(c.share_text(), "2/3 invalid");
        let share = c.invalid_share.unwrap();
        assert_eq!((share.k, share.n), (2, 3));
    }

    #[test]
    fn a_cell_tallies_the_episodes_of_its_checked_trials() {
        use crate::checker::AnomalyKind;
        let episode = |trial: u32, index: u32, damage: bool| EpisodeOutcome {
            trial,
            index,
            start_us: 1_000_000 * u64::from(index),
            heal_us: Some(1_000_000 * u64::from(index) + 500_000),
            end_us: 1_000_000 * u64::from(index + 1),
            targets: vec!["client:1".into()],
            exposed: true,
            exposure: "client:1 held r0".into(),
            damage: if damage {
                vec![AnomalyKind::MutexViolation]
            } else {
                vec![]
            },
            first_damage_us: damage.then_some(1_000_000 * u64::from(index) + 700_000),
            unsafe_belief: false,
            stuck: false,
            recovery_us: Some(20_000 * u64::from(index)),
            harness_lag_us: None,
        };
        let mut t1 = trial(1, Verdict::Valid, 10, &[], 1, 1.0);
        t1.episodes = vec![episode(1, 1, false), episode(1, 2, false)];
        let mut t2 = trial(2, Verdict::Invalid, 10, &[("mutex-violation", 1)], 1, 1.0);
        t2.episodes = vec![episode(2, 1, false), episode(2, 2, true)];
        // A failed trial's episodes are not evidence.
        let mut failed =
            TrialRecord::not_run(3, 3, "t3".into(), TrialStatus::Failed, Some("boom".into()));
        failed.episodes = vec![episode(3, 1, true)];
        let c = CellRecord::fold(
            "redlock",
            "client-pause",
            "five",
            "x",
            3,
            vec![t1, t2, failed],
        );
        let e = &c.episodes;
        assert_eq!((e.total, e.exposed, e.damaging), (4, 4, 1));
        let rate = e.damage_rate.unwrap();
        assert_eq!((rate.k, rate.n), (1, 4));
        let first = e.first_incident.as_ref().unwrap();
        assert_eq!(
            (first.dir.as_str(), first.trial, first.episode),
            ("t2", 2, 2)
        );
        assert_eq!(e.recovery_p50_ms, Some(20.0));
    }

    #[test]
    fn a_cell_without_evidence_is_never_valid() {
        let failed =
            TrialRecord::not_run(1, 1, "t1".into(), TrialStatus::Failed, Some("boom".into()));
        let c = CellRecord::fold("redlock", "failover", "five", "x", 1, vec![failed]);
        assert_eq!(c.verdict, "unknown");
        assert_eq!(c.trials_checked, 0);
        assert!(c.invalid_share.is_none());
        assert_eq!(c.share_text(), "no evidence (1 failed)");
        let none = CellRecord::fold("redlock", "failover", "five", "x", 3, vec![]);
        assert_eq!(none.verdict, "not-run");
        let unknown = CellRecord::fold(
            "redlock",
            "none",
            "five",
            "x",
            2,
            vec![
                trial(1, Verdict::Valid, 10, &[], 1, 1.0),
                trial(2, Verdict::Unknown, 10, &[], 1, 1.0),
            ],
        );
        assert_eq!(unknown.verdict, "unknown");
        assert_eq!(unknown.share_text(), "0/2 invalid, 1 unknown");
    }
}
