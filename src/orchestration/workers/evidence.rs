//! The merged evidence of a multi-worker run: the workers' streamed seconds and reports added
//! into one collector (live, then final), their histories merged into `history.jsonl`,
//! `workers.json`, and the shared ledger copied and checked.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use hdrhistogram::Histogram;

use super::api::{Board, Shared, WorkerState};
use super::clock::clock_bound_us;
use super::coordinator::{LatencyCheck, LostWorker, WorkerLine, WorkersPlan, WorkersSummary};
use super::merge::{merge_histories, WorkerHistory};
use super::protocol::{decode_histogram, WireSecond, WorkerReport};
use super::{WorkersError, REGISTRATION_PROBES};
use crate::checker::{self, CheckOptions, CheckReport};
use crate::driver::metrics::{new_histogram, Second};
use crate::driver::{Collector, StrategyRun};
use crate::history::{read_history, write_events, FaultWindow, HistoryEvent};
use crate::ledger::PgLedgerUrl;
use crate::orchestration::experiment::{self, Experiment, ExperimentError};
use crate::orchestration::test::Test;

/// A file of the run that could not be read or written.
fn files(path: &Path, e: &dyn std::fmt::Display) -> WorkersError {
    WorkersError::Files {
        path: path.to_path_buf(),
        detail: e.to_string(),
    }
}

/// Merges what the workers sent into the strategy's directory and checks it.
pub(super) async fn finish(
    shared: &Shared,
    test: &Test,
    plan: &WorkersPlan,
    dir: &Path,
    shared_ledger: Option<(PgLedgerUrl, String)>,
    windows: Vec<FaultWindow>,
) -> Result<(Experiment, WorkersSummary), WorkersError> {
    let b = std::mem::replace(
        &mut *shared.board(),
        Board {
            slots: Vec::new(),
            workers: Vec::new(),
            start_unix_us: None,
            abort: None,
            stop: false,
        },
    );
    let Gathered {
        mut histories,
        lines,
        interval_sources,
        single,
        mut collector,
        run,
    } = gather(&b, &shared.history_dir, test)?;
    let latency_check = merge_latency(&mut collector, &interval_sources, &single)?;
    let fault_windows = windows.len() as u64;
    histories.push(super::faults::fault_history(windows));
    let merged = merge_histories(&histories);
    write_history(&dir.join("history.jsonl"), &merged)?;
    let summary = WorkersSummary {
        workers: plan.workers,
        launcher: plan.launcher.name().into(),
        clock_bound_us: lines.iter().map(|l| l.clock_bound_us).max().unwrap_or(0),
        per_worker: lines,
        lost: lost_workers(&b.workers),
        merged_events: merged.len() as u64,
        fault_windows,
        latency_check,
    };
    crate::atomic_file::write_json(&dir.join("workers.json"), &summary)
        .map_err(|e| files(&dir.join("workers.json"), &e))?;
    let strategy_run = StrategyRun {
        collector,
        elapsed: Duration::from_millis(run.elapsed_ms),
        interrupted: run.interrupted,
        cut_sections: run.cut_sections,
        client_failure: run.client_failure.clone(),
    };
    let check = match shared_ledger {
        None => None,
        Some((url, schema)) => Some(check_shared_ledger(dir, url, schema, &run).await?),
    };
    Ok((
        Experiment {
            run: strategy_run,
            check,
            history_events: merged.len() as u64,
        },
        summary,
    ))
}

/// What the workers left, gathered: their histories, their lines in `workers.json`, their
/// per-second acquire histograms, the single histogram of every acquire (the cross-check), the
/// collector their figures were added into and the run-level parts of their reports.
struct Gathered {
    histories: Vec<WorkerHistory>,
    lines: Vec<WorkerLine>,
    interval_sources: Vec<Vec<Histogram<u64>>>,
    single: Histogram<u64>,
    collector: Collector,
    run: RunParts,
}

/// Reads each worker's history batch file and adds its seconds and report (or, for a worker
/// that never reported, its streamed seconds) into one collector.
///
/// # Errors
/// [`WorkersError::Files`] for a history that cannot be read, [`WorkersError::Protocol`] for
/// a histogram that does not decode or add.
fn gather(b: &Board, history_dir: &Path, test: &Test) -> Result<Gathered, WorkersError> {
    let mut histories = Vec::new();
    let mut lines = Vec::new();
    let mut interval_sources: Vec<Vec<Histogram<u64>>> = Vec::new();
    let mut single = new_histogram();
    let mut collector = Collector::for_ttl(test.client.ttl.as_millis() as u64);
    let mut run = RunParts::default();
    for (i, w) in b.workers.iter().enumerate() {
        let path = history_dir.join(format!("w{i}.history.jsonl"));
        let events: Vec<HistoryEvent> = if path.exists() {
            read_history(&path)
                .map_err(|e| files(&path, &e))?
                .collect::<Result<_, _>>()
                .map_err(|e| files(&path, &e))?
        } else {
            Vec::new()
        };
        // The registration's probes set the estimate; the bound is judged on the later ones.
        let later = &w.probes[w.probes.len().min(REGISTRATION_PROBES)..];
        let bound_us = w.estimate.map_or(0, |e| clock_bound_us(e, later));
        histories.push(WorkerHistory {
            worker: i as u32,
            events,
            bound_us,
            lost_at_us: w.lost.as_ref().map(|l| l.at_us),
        });
        // Interval histograms: every second it sent (all of them in its report).
        let mut intervals = Vec::new();
        let mut acquired = 0;
        for (&s, sec) in &w.seconds {
            let h = add_second(&mut collector, sec, false)?;
            while intervals.len() < s as usize {
                intervals.push(new_histogram());
            }
            intervals.push(h);
            acquired += sec.acquired;
        }
        match &w.report {
            Some(r) => {
                let ok = decode_histogram(&r.acquire_ok)?;
                single
                    .add(&ok)
                    .map_err(|e| WorkersError::Protocol(format!("{e:?}")))?;
                run.add(r, &mut collector)?;
                acquired = ok.len();
            }
            None => {
                for h in &intervals {
                    single
                        .add(h)
                        .map_err(|e| WorkersError::Protocol(format!("{e:?}")))?;
                }
            }
        }
        interval_sources.push(intervals);
        lines.push(WorkerLine {
            worker: i as u32,
            pid: w.pid,
            client_base: b.slots[i].client_base,
            clients: b.slots[i].clients,
            events: w.events,
            acquired,
            clock: w.estimate,
            clock_bound_us: bound_us,
            probes: w.probes.len(),
        });
    }
    Ok(Gathered {
        histories,
        lines,
        interval_sources,
        single,
        collector,
        run,
    })
}

/// Merges the workers' per-second acquire histograms into the collector's (overall and per
/// second) and returns the cross-check against the single histogram of every acquire.
///
/// # Errors
/// [`WorkersError::Protocol`] when the intervals cannot be merged.
fn merge_latency(
    collector: &mut Collector,
    interval_sources: &[Vec<Histogram<u64>>],
    single: &Histogram<u64>,
) -> Result<LatencyCheck, WorkersError> {
    let merged_latency = crate::results::merged::merge_intervals(interval_sources)
        .map_err(|e| WorkersError::Protocol(e.to_string()))?;
    let quantiles = |h: &Histogram<u64>| {
        [0.5, 0.9, 0.99, 0.999]
            .iter()
            .map(|&q| h.value_at_quantile(q))
            .chain([h.max()])
            .collect::<Vec<_>>()
    };
    let latency_check = LatencyCheck {
        merged_count: merged_latency.overall.len(),
        single_count: single.len(),
        merged_us: quantiles(&merged_latency.overall),
        single_us: quantiles(single),
    };
    collector.acquire_ok = merged_latency.overall;
    for (s, h) in merged_latency.per_second.into_iter().enumerate() {
        second_at(&mut collector.seconds, s).acquire_ok = (!h.is_empty()).then_some(h);
    }
    Ok(latency_check)
}

/// Writes the merged history to `history_path`.
///
/// # Errors
/// [`WorkersError::Files`] when it cannot be created or written.
fn write_history(history_path: &Path, merged: &[HistoryEvent]) -> Result<(), WorkersError> {
    let f = std::fs::File::create(history_path).map_err(|e| files(history_path, &e))?;
    let mut out = std::io::BufWriter::new(f);
    write_events(&mut out, merged).map_err(|e| files(history_path, &e))?;
    out.flush().map_err(|e| files(history_path, &e))?;
    Ok(())
}

/// The workers that were lost, with what killed them when it was the nemesis.
fn lost_workers(workers: &[WorkerState]) -> Vec<LostWorker> {
    // A crash's window can be recorded a moment after the exit was seen: say it here too.
    workers
        .iter()
        .filter_map(|w| {
            let mut l = w.lost.clone()?;
            if let Some(by) = w
                .killed_by_nemesis
                .as_ref()
                .filter(|by| !l.why.contains(*by))
            {
                l.why = format!("{}: {by}", l.why);
            }
            Some(l)
        })
        .collect()
}

/// Copies the shared ledger schema into `dir/ledger.sqlite`, checks the run and writes the
/// checker's report (marking a ledger with failed steps incomplete and cut sections).
///
/// # Errors
/// The ledger's or the checker's error; [`WorkersError::Protocol`] when their task fails.
async fn check_shared_ledger(
    dir: &Path,
    url: PgLedgerUrl,
    schema: String,
    run: &RunParts,
) -> Result<CheckReport, WorkersError> {
    let copy = dir.join("ledger.sqlite");
    tokio::task::spawn_blocking(move || crate::ledger::copy_shared_schema(&url, &schema, &copy))
        .await
        .map_err(|e| WorkersError::Protocol(format!("ledger copy: {e}")))?
        .map_err(ExperimentError::from)?;
    let check_dir = dir.to_path_buf();
    let mut report = tokio::task::spawn_blocking(move || {
        checker::check_dir(&check_dir, &CheckOptions::default())
    })
    .await
    .map_err(|e| WorkersError::Protocol(format!("checker: {e}")))?
    .map_err(ExperimentError::from)?;
    checker::evidence::mark_incomplete_ledger(&mut report, run.failed_steps);
    checker::evidence::mark_all_cut(&mut report, run.cut_sections);
    experiment::write_report(dir, &report)?;
    Ok(report)
}

fn second_at(seconds: &mut Vec<Second>, s: usize) -> &mut Second {
    while seconds.len() <= s {
        seconds.push(Second::default());
    }
    &mut seconds[s]
}

/// Adds one streamed second of a worker into `c` (counts into its second and, with
/// `totals`, into the run's contended and error counts); returns its acquire-latency
/// histogram (empty before the first).
fn add_second(
    c: &mut Collector,
    sec: &WireSecond,
    totals: bool,
) -> Result<Histogram<u64>, WorkersError> {
    let h = match &sec.acquire_ok {
        Some(enc) => decode_histogram(enc)?,
        None => new_histogram(),
    };
    if totals {
        c.contended += sec.contended;
        c.errors += sec.errors;
    }
    let slot = second_at(&mut c.seconds, sec.second as usize);
    slot.acquired += sec.acquired;
    slot.contended += sec.contended;
    slot.errors += sec.errors;
    slot.lag_max_us = slot.lag_max_us.max(sec.lag_max_us);
    Ok(h)
}

/// The merged figures of the seconds the workers have streamed so far: per-second counts and
/// acquire latency, their totals. What is not streamed (releases, holders, other histograms)
/// stays empty until the workers report.
///
/// # Errors
/// [`WorkersError::Protocol`] for a histogram that does not decode or add.
pub(super) fn live_collector(
    workers: &[Vec<WireSecond>],
    ttl_ms: u64,
) -> Result<Collector, WorkersError> {
    let mut c = Collector::for_ttl(ttl_ms);
    for seconds in workers {
        for sec in seconds {
            let h = add_second(&mut c, sec, true)?;
            let add = |into: &mut Histogram<u64>| {
                into.add(&h)
                    .map_err(|e| WorkersError::Protocol(format!("{e:?}")))
            };
            add(&mut c.acquire_ok)?;
            let slot = second_at(&mut c.seconds, sec.second as usize);
            match &mut slot.acquire_ok {
                Some(into) => add(into)?,
                None if !h.is_empty() => slot.acquire_ok = Some(h),
                None => {}
            }
        }
    }
    Ok(c)
}

/// The run-level parts of the workers' reports, summed.
#[derive(Default)]
struct RunParts {
    elapsed_ms: u64,
    interrupted: bool,
    cut_sections: u64,
    failed_steps: u64,
    client_failure: Option<String>,
}

impl RunParts {
    fn add(&mut self, r: &WorkerReport, c: &mut Collector) -> Result<(), WorkersError> {
        self.elapsed_ms = self.elapsed_ms.max(r.elapsed_ms);
        self.interrupted |= r.interrupted;
        self.cut_sections += r.cut_sections;
        self.failed_steps += r.failed_steps;
        if self.client_failure.is_none() {
            self.client_failure = r.client_failure.clone();
        }
        c.contended += r.contended;
        c.errors += r.errors;
        c.release_errors += r.release_errors;
        c.cycles += r.cycles;
        let add = |into: &mut Histogram<u64>, enc: &str| -> Result<(), WorkersError> {
            into.add(decode_histogram(enc)?)
                .map_err(|e| WorkersError::Protocol(format!("{e:?}")))
        };
        add(&mut c.acquire_fail, &r.acquire_fail)?;
        add(&mut c.release, &r.release)?;
        add(&mut c.critical_section, &r.critical_section)?;
        add(&mut c.harness_lag, &r.harness_lag)?;
        for (msg, n) in &r.error_counts {
            *c.error_counts.entry(msg.clone()).or_insert(0) += n;
        }
        Ok(())
    }
}
