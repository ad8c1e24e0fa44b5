//! Synthetic runs for benchmarks: a history + ledger that are serial by construction (valid),
//! of any size, written as fast as the disk allows.
//!
//! `resources` resources progress in lock step; in each round every resource goes through one
//! cycle by a different client: acquire invoke/ok, ledger begin/read/write/end, release
//! invoke/ok. So 4 history ops and 4 ledger events per critical section.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use crate::history::{write_events, HistoryEvent, Op, OpFn, OpKind};
use crate::ledger::{FenceMode, LedgerError, LedgerStore, SectionRef, Step};

/// Errors while writing a synthetic run.
#[derive(Debug, thiserror::Error)]
pub enum SyntheticError {
    #[error("synthetic history {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Sink(#[from] crate::sink::SinkError),
    #[error("synthetic run needs clients ≥ resources ≥ 1 (got {clients} clients, {resources} resources)")]
    Shape { clients: u32, resources: u32 },
}

/// Shape of a synthetic run.
#[derive(Debug, Clone, Copy)]
pub struct SyntheticSpec {
    /// History operations to write (rounded down to a multiple of 4).
    pub ops: u64,
    /// Clients (≥ resources).
    pub clients: u32,
    /// Resources.
    pub resources: u32,
    /// Whether tokens are issued and the ledger is fenced.
    pub fenced: bool,
    /// TTL, ms; the validity deadline is `invoke + ttl`.
    pub ttl_ms: u64,
}

impl Default for SyntheticSpec {
    fn default() -> Self {
        Self {
            ops: 1_000_000,
            clients: 64,
            resources: 16,
            fenced: true,
            ttl_ms: 1000,
        }
    }
}

/// What was written.
#[derive(Debug, Clone)]
pub struct SyntheticRun {
    pub history_path: PathBuf,
    pub ledger_path: PathBuf,
    pub history_ops: u64,
    pub ledger_events: u64,
}

/// Writes `history.jsonl` and `ledger.sqlite` into `dir` (which must exist; files are replaced).
pub fn write_synthetic_run(
    dir: impl AsRef<Path>,
    spec: &SyntheticSpec,
) -> Result<SyntheticRun, SyntheticError> {
    if spec.resources == 0 || spec.clients < spec.resources {
        return Err(SyntheticError::Shape {
            clients: spec.clients,
            resources: spec.resources,
        });
    }
    let dir = dir.as_ref();
    let history_path = dir.join("history.jsonl");
    let ledger_path = dir.join("ledger.sqlite");
    for p in [
        &ledger_path,
        &dir.join("ledger.sqlite-wal"),
        &dir.join("ledger.sqlite-shm"),
    ] {
        let _ = std::fs::remove_file(p);
    }
    let io = |source| SyntheticError::Io {
        path: history_path.clone(),
        source,
    };
    let mode = if spec.fenced {
        FenceMode::Fenced
    } else {
        FenceMode::Unfenced
    };
    let mut ledger = LedgerStore::create(&ledger_path, mode)?;
    let mut out = BufWriter::with_capacity(1 << 20, File::create(&history_path).map_err(io)?);
    let sections = spec.ops / 4;
    let r_count = spec.resources as u64;
    let mut index = 0u64;
    let mut t = 0u64;
    let mut section_id = 0u64;
    let mut ledger_events = 0u64;
    let mut counters = vec![0i64; spec.resources as usize];
    let names: Vec<String> = (0..spec.resources).map(|r| format!("r{r}")).collect();
    let mut events: Vec<HistoryEvent> = Vec::with_capacity(4 * r_count as usize);
    let mut refs: Vec<SectionRef> = Vec::with_capacity(r_count as usize);
    let mut round = 0u64;
    while section_id < sections {
        let n = (sections - section_id).min(r_count);
        events.clear();
        refs.clear();
        let mut op = |client: u32, kind, f, r: usize, t: u64| {
            let o = Op::new(client, kind, f, names[r].clone()).at(index, t);
            index += 1;
            o
        };
        let clients: Vec<u32> = (0..n)
            .map(|r| ((round * r_count + r) % spec.clients as u64) as u32)
            .collect();
        let t0 = t;
        for (r, &client) in clients.iter().enumerate() {
            events.push(HistoryEvent::Op(
                op(client, OpKind::Invoke, OpFn::Acquire, r, t0 + r as u64)
                    .with_ttl_ms(spec.ttl_ms),
            ));
        }
        for (r, &client) in clients.iter().enumerate() {
            let token = round + 1;
            let mut o = op(client, OpKind::Ok, OpFn::Acquire, r, t0 + 100 + r as u64)
                .with_deadline_us(t0 + r as u64 + spec.ttl_ms * 1000);
            if spec.fenced {
                o = o.with_token(token);
            }
            events.push(HistoryEvent::Op(o));
            refs.push(SectionRef {
                section_id: section_id + r as u64,
                client,
                resource: names[r].clone(),
                fencing_token: spec.fenced.then_some(token),
                idempotency_key: None,
            });
        }
        let mut steps = Vec::with_capacity(4 * n as usize);
        for (r, s) in refs.iter().enumerate() {
            let base = t0 + 200 + 10 * r as u64;
            counters[r] += 1;
            steps.push((Step::Begin, s, None, base));
            steps.push((Step::Read, s, None, base + 1));
            steps.push((Step::Write, s, Some(counters[r]), base + 2));
            steps.push((Step::End, s, None, base + 3));
        }
        ledger_events += steps.len() as u64;
        ledger.apply_batch(steps)?;
        let t1 = t0 + 200 + 10 * n + 100;
        for (r, &client) in clients.iter().enumerate() {
            events.push(HistoryEvent::Op(op(
                client,
                OpKind::Invoke,
                OpFn::Release,
                r,
                t1 + r as u64,
            )));
        }
        for (r, &client) in clients.iter().enumerate() {
            events.push(HistoryEvent::Op(op(
                client,
                OpKind::Ok,
                OpFn::Release,
                r,
                t1 + 100 + r as u64,
            )));
        }
        write_events(&mut out, &events).map_err(io)?;
        section_id += n;
        t = t1 + 200 + n;
        round += 1;
    }
    std::io::Write::flush(&mut out).map_err(io)?;
    Ok(SyntheticRun {
        history_path,
        ledger_path,
        history_ops: index,
        ledger_events,
    })
}

/// Writes `sink_path` for the synthetic run whose ledger is `ledger_path`, as `external` work
/// would have left it: one applied charge per section, for the job it read, and one more for
/// every `duplicate_every`-th section (`0`: none). Returns the requests written.
///
/// # Errors
/// [`SyntheticError::Ledger`] reading the ledger; [`SyntheticError::Sink`] writing the sink.
pub fn write_synthetic_sink(
    ledger_path: &Path,
    sink_path: &Path,
    duplicate_every: u64,
) -> Result<u64, SyntheticError> {
    use crate::sink::{job_name, Charge, SinkStore};
    let mut charges = Vec::new();
    let mut reads = 0u64;
    crate::ledger::LedgerFile::open(ledger_path)?.for_each_event(|e| {
        if e.step != Step::Read {
            return;
        }
        reads += 1;
        let charge = Charge {
            job: job_name(&e.resource, e.value.unwrap_or(0)),
            client: e.client,
            section_id: e.section_id,
        };
        if duplicate_every > 0 && reads.is_multiple_of(duplicate_every) {
            charges.push((e.time_us + 1, charge.clone()));
        }
        charges.push((e.time_us, charge));
    })?;
    let mut store = SinkStore::create(sink_path)?;
    store.apply_batch(&charges)?;
    store.checkpoint()?;
    Ok(charges.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::{check_with_sink, AnomalyKind, CheckOptions, Verdict};

    #[test]
    fn rule_7_from_the_files_finds_every_planted_second_charge_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let spec = SyntheticSpec {
            ops: 400,
            clients: 8,
            resources: 4,
            ..SyntheticSpec::default()
        };
        let run = write_synthetic_run(dir.path(), &spec).unwrap();
        let sink = dir.path().join(crate::sink::SINK_FILE);
        // 100 sections, a second charge for every 10th: 110 requests, 10 duplicates.
        assert_eq!(
            write_synthetic_sink(&run.ledger_path, &sink, 10).unwrap(),
            110
        );
        let opts = CheckOptions::default();
        let r = check_with_sink(
            &run.history_path,
            Some(&run.ledger_path),
            Some(&sink),
            &opts,
        )
        .unwrap();
        assert_eq!(r.verdict, Verdict::Invalid);
        let e = r.stats.effects.clone().unwrap();
        assert_eq!(
            (
                e.charges,
                e.jobs_charged,
                e.duplicate_effects,
                e.extra_charges
            ),
            (110, 100, 10, 10)
        );
        assert_eq!(r.of_kind(AnomalyKind::DuplicateEffect).count(), 10);
        assert_eq!(r.anomalies.len(), 10, "{:?}", r.anomalies);
        // Without the planted charges: valid, every section charged once.
        let clean = dir.path().join("clean.sqlite");
        write_synthetic_sink(&run.ledger_path, &clean, 0).unwrap();
        let r = check_with_sink(
            &run.history_path,
            Some(&run.ledger_path),
            Some(&clean),
            &opts,
        )
        .unwrap();
        assert_eq!(r.verdict, Verdict::Valid, "{:?}", r.anomalies);
        assert_eq!(r.stats.effects.unwrap().duplicate_effects, 0);
    }
}
