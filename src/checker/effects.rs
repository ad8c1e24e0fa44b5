//! Rule 7, the external side effect: what the sink (`sink.sqlite`, [`crate::sink`]) applied
//! for the jobs the critical sections of `external` work did.
//!
//! A section's job is the resource and the counter value it read under the lock
//! ([`crate::sink::job_name`]). The promise judged is *exactly once at the sink*:
//! * `duplicate-effect` (safety): the sink applied two or more charges for one job — a holder
//!   paused past its lease charged again what its successor had charged. No fencing token
//!   stops this: the sink cannot check one.
//! * `unexpected-effect` (safety): an applied charge for a job no section did (a call whose
//!   section is not in the ledger, or whose job is not the one its section read).
//! * `effect-deduplicated` (not damage): the sink answered a repeat of an idempotency key with
//!   the first charge, or with `409` while the first was in flight — the key at work, as
//!   `stale-write-rejected` is the fencing token at work.
//!
//!
//! Rule 8, the job's executions: every section that read its job executed it once. A job
//! executed by two or more sections is a `duplicate-execution` (work done twice, which an
//! at-least-once queue allows; its damage is what it did twice: a `duplicate-effect` here, a
//! lost update at the row). The claimed jobs' completions are judged in the history pass
//! (`zombie-completion`, `stale-completion-refused`).
//!
//! A section that reached its write in the ledger without a call the sink recorded is missing
//! evidence: the verdict cannot be `valid` (`unknown`, with the count).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::verdict::{Anomaly, AnomalyKind, AnomalySink};
use crate::ledger::{LedgerEvent, Step};
use crate::sink::{job_name, Outcome, SinkRequest};

/// Counts of rule 7 (`stats.effects` in `checker.json`; absent for runs without a sink).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EffectStats {
    /// Requests the sink answered.
    pub requests: u64,
    /// Charges it applied.
    pub charges: u64,
    /// Repeats answered with the first charge (an idempotency key's replay).
    pub replayed: u64,
    /// Repeats refused with `409` while the key's first request was in flight.
    pub conflicts: u64,
    /// Distinct jobs charged at least once.
    pub jobs_charged: u64,
    /// Jobs charged more than once (`duplicate-effect` anomalies, listed or not).
    pub duplicate_effects: u64,
    /// Σ over jobs of (charges − 1): the charges a customer would dispute.
    pub extra_charges: u64,
    /// Applied charges for a job no section did.
    pub unexpected_effects: u64,
    /// Sections that reached their ledger write without a call the sink recorded.
    pub sections_without_call: u64,
    /// Rule 8: sections that executed a job (read it in the ledger).
    #[serde(default)]
    pub executions: u64,
    /// Rule 8: jobs executed by more than one section (`duplicate-execution`).
    #[serde(default)]
    pub duplicate_executions: u64,
    /// Rule 8: Σ over jobs of (executions − 1): work done again.
    #[serde(default)]
    pub extra_executions: u64,
    /// Rule 8: Σ over jobs of the time every execution but the first spent in its section
    /// (begin to end or crash), µs: the work done again, as time.
    #[serde(default)]
    pub wasted_work_us: u64,
}

/// What the ledger says each section worked on, gathered from its events.
#[derive(Debug, Default)]
pub(crate) struct SectionJobs {
    sections: HashMap<u64, SectionJob>,
}

#[derive(Debug, Default)]
struct SectionJob {
    resource: String,
    client: u32,
    begin_us: u64,
    /// When its section ended (or its client crashed), µs.
    end_us: Option<u64>,
    read: Option<i64>,
    wrote: bool,
    token: Option<u64>,
    begin_seq: Option<i64>,
}

impl SectionJobs {
    /// Feeds one ledger event (any order).
    pub(crate) fn feed(&mut self, e: &LedgerEvent) {
        let s = self.sections.entry(e.section_id).or_default();
        if s.resource.is_empty() {
            s.resource.clone_from(&e.resource);
            s.client = e.client;
        }
        s.token = s.token.or(e.fencing_token);
        match e.step {
            Step::Begin => {
                s.begin_seq = Some(e.seq);
                s.begin_us = e.time_us;
            }
            Step::Read => s.read = e.value,
            Step::Write => s.wrote = true,
            Step::End | Step::Crash => s.end_us = Some(e.time_us),
        }
    }

    fn job(&self, section_id: u64) -> Option<String> {
        let s = self.sections.get(&section_id)?;
        Some(job_name(&s.resource, s.read?))
    }
}

/// What rule 7 found.
pub(crate) struct EffectFindings {
    /// The counts.
    pub stats: EffectStats,
    /// The anomalies (capped per kind).
    pub anomalies: AnomalySink,
    /// Why the evidence is incomplete, if it is.
    pub unknown_reasons: Vec<String>,
}

/// Judges the sink's `requests` (in the sink's order) against the sections of the ledger.
/// Lists at most `cap` anomalies per kind.
pub(crate) fn judge(requests: &[SinkRequest], sections: &SectionJobs, cap: u64) -> EffectFindings {
    let mut stats = EffectStats {
        requests: requests.len() as u64,
        ..EffectStats::default()
    };
    let mut sink = AnomalySink::new(cap);
    let mut applied: BTreeMap<&str, Vec<&SinkRequest>> = BTreeMap::new();
    let mut called: HashSet<u64> = HashSet::new();
    for r in requests {
        called.insert(r.charge.section_id);
        match r.outcome {
            Outcome::Applied => {
                stats.charges += 1;
                applied.entry(r.charge.job.as_str()).or_default().push(r);
                if sections.job(r.charge.section_id).as_deref() != Some(r.charge.job.as_str()) {
                    stats.unexpected_effects += 1;
                    sink.push(unexpected(r, sections));
                }
            }
            Outcome::Replayed | Outcome::Conflict => {
                if r.outcome == Outcome::Replayed {
                    stats.replayed += 1;
                } else {
                    stats.conflicts += 1;
                }
                sink.push(deduplicated(r, sections));
            }
        }
    }
    stats.jobs_charged = applied.len() as u64;
    for (job, charges) in &applied {
        if charges.len() > 1 {
            stats.duplicate_effects += 1;
            stats.extra_charges += charges.len() as u64 - 1;
            sink.push(duplicate(job, charges, sections));
        }
    }
    executions(sections, &mut stats, &mut sink);
    stats.sections_without_call = sections
        .sections
        .iter()
        .filter(|(id, s)| s.wrote && !called.contains(id))
        .count() as u64;
    let mut unknown_reasons = Vec::new();
    if stats.sections_without_call > 0 {
        unknown_reasons.push(format!(
            "{} section(s) of external work reached their ledger write without a call the \
             sink recorded: the sink's table is incomplete",
            stats.sections_without_call
        ));
    }
    EffectFindings {
        stats,
        anomalies: sink,
        unknown_reasons,
    }
}

/// Rule 8 alone, for `compute` work (no sink): each job's executions off the ledger's
/// sections. Lists at most `cap` anomalies per kind.
pub(crate) fn judge_executions(sections: &SectionJobs, cap: u64) -> EffectFindings {
    let mut stats = EffectStats::default();
    let mut sink = AnomalySink::new(cap);
    executions(sections, &mut stats, &mut sink);
    EffectFindings {
        stats,
        anomalies: sink,
        unknown_reasons: Vec::new(),
    }
}

/// Rule 8: every job executed by more than one section is a `duplicate-execution`; the
/// executions after a job's first (by begin) are its extra executions and wasted work time.
fn executions(sections: &SectionJobs, stats: &mut EffectStats, sink: &mut AnomalySink) {
    let mut executed: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (&id, _) in sections.sections.iter().filter(|(_, s)| s.read.is_some()) {
        if let Some(job) = sections.job(id) {
            executed.entry(job).or_default().push(id);
        }
    }
    stats.executions = executed.values().map(|v| v.len() as u64).sum();
    let mut wasted_us = 0u64;
    for (job, ids) in &mut executed {
        if ids.len() > 1 {
            ids.sort_unstable();
            stats.duplicate_executions += 1;
            stats.extra_executions += ids.len() as u64 - 1;
            let mut spans: Vec<(u64, u64)> = ids
                .iter()
                .filter_map(|i| sections.sections.get(i))
                .map(|s| (s.begin_us, s.end_us.unwrap_or(s.begin_us)))
                .collect();
            spans.sort_unstable();
            wasted_us += spans
                .iter()
                .skip(1)
                .map(|&(b, e)| e.saturating_sub(b))
                .sum::<u64>();
            sink.push(executed_twice(job, ids, sections));
        }
    }
    stats.wasted_work_us = wasted_us;
}

fn resource_of<'a>(job: &'a str, section: Option<&'a SectionJob>) -> &'a str {
    section.map_or_else(
        || job.rsplit_once(':').map_or(job, |(r, _)| r),
        |s| &s.resource,
    )
}

fn duplicate(job: &str, charges: &[&SinkRequest], sections: &SectionJobs) -> Anomaly {
    let of = |r: &SinkRequest| sections.sections.get(&r.charge.section_id);
    let clients: BTreeSet<u32> = charges.iter().map(|r| r.charge.client).collect();
    let tokens: BTreeSet<u64> = charges.iter().filter_map(|r| of(r)?.token).collect();
    let seqs: Vec<i64> = charges.iter().filter_map(|r| of(r)?.begin_seq).collect();
    let ids: Vec<String> = charges
        .iter()
        .map(|r| format!("{} (client {})", r.seq, r.charge.client))
        .collect();
    let fenced = if tokens.is_empty() {
        String::new()
    } else {
        let t: Vec<String> = tokens.iter().map(u64::to_string).collect();
        format!(
            " with fencing tokens {}; the sink cannot check a token",
            t.join(", ")
        )
    };
    Anomaly {
        kind: AnomalyKind::DuplicateEffect,
        resource: resource_of(job, charges.first().and_then(|r| of(r))).to_string(),
        time_us: charges[1].time_us,
        end_us: charges.last().map(|r| r.time_us),
        clients: clients.into_iter().collect(),
        tokens: tokens.into_iter().collect(),
        holders: Some(charges.len() as u32),
        ledger_seqs: seqs,
        fault_ids: Vec::new(),
        detail: format!(
            "job {job} was charged {} times at the sink (requests {}){fenced}",
            charges.len(),
            ids.join(", ")
        ),
    }
}

fn executed_twice(job: &str, ids: &[u64], sections: &SectionJobs) -> Anomaly {
    let of: Vec<&SectionJob> = ids
        .iter()
        .filter_map(|i| sections.sections.get(i))
        .collect();
    let clients: BTreeSet<u32> = of.iter().map(|s| s.client).collect();
    let tokens: BTreeSet<u64> = of.iter().filter_map(|s| s.token).collect();
    let mut seqs: Vec<i64> = of.iter().filter_map(|s| s.begin_seq).collect();
    seqs.sort_unstable();
    let mut times: Vec<u64> = of.iter().map(|s| s.begin_us).collect();
    times.sort_unstable();
    let list: Vec<String> = ids.iter().map(u64::to_string).collect();
    Anomaly {
        kind: AnomalyKind::DuplicateExecution,
        resource: resource_of(job, of.first().copied()).to_string(),
        time_us: times.get(1).copied().unwrap_or_default(),
        end_us: times.last().copied(),
        clients: clients.into_iter().collect(),
        tokens: tokens.into_iter().collect(),
        holders: Some(ids.len() as u32),
        ledger_seqs: seqs,
        fault_ids: Vec::new(),
        detail: format!(
            "job {job} was executed by {} sections ({}): the work was done again",
            ids.len(),
            list.join(", ")
        ),
    }
}

fn unexpected(r: &SinkRequest, sections: &SectionJobs) -> Anomaly {
    let section = sections.sections.get(&r.charge.section_id);
    let did = match sections.job(r.charge.section_id) {
        Some(j) => format!("its section {} did job {j}", r.charge.section_id),
        None => format!(
            "no section {} read a job in the ledger",
            r.charge.section_id
        ),
    };
    on_request(
        AnomalyKind::UnexpectedEffect,
        r,
        section,
        format!(
            "the sink applied a charge for job {} (request {}), but {did}",
            r.charge.job, r.seq
        ),
    )
}

fn deduplicated(r: &SinkRequest, sections: &SectionJobs) -> Anomaly {
    let section = sections.sections.get(&r.charge.section_id);
    let what = match (r.outcome, r.charge_id) {
        (Outcome::Replayed, Some(id)) => format!("answered with the first charge ({id})"),
        _ => "refused with 409 while the first request was in flight".to_string(),
    };
    on_request(
        AnomalyKind::EffectDeduplicated,
        r,
        section,
        format!(
            "a repeat charge for job {} by client {} (request {}, key {}) was {what}: \
             nothing applied twice",
            r.charge.job,
            r.charge.client,
            r.seq,
            r.idempotency_key.as_deref().unwrap_or("-")
        ),
    )
}

/// An anomaly of one sink request: its client, time and resource, and its section's token
/// and begin row when the ledger has that section.
fn on_request(
    kind: AnomalyKind,
    r: &SinkRequest,
    section: Option<&SectionJob>,
    detail: String,
) -> Anomaly {
    Anomaly {
        kind,
        resource: resource_of(&r.charge.job, section).to_string(),
        time_us: r.time_us,
        end_us: None,
        clients: vec![r.charge.client],
        tokens: section.and_then(|s| s.token).into_iter().collect(),
        holders: None,
        ledger_seqs: section.and_then(|s| s.begin_seq).into_iter().collect(),
        fault_ids: Vec::new(),
        detail,
    }
}

#[cfg(test)]
mod tests;
