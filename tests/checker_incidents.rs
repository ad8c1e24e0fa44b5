//! Incidents on hand-built histories and ledgers whose story is known: a holder paused past
//! its lease (with and without a fault window on record), a lease granted twice, a stale write
//! rejected by fencing, and the checker's waiting-view availability. Both the in-memory checker
//! and the file checker (second pass over `history.jsonl` + `ledger.sqlite`) are exercised.

mod common;

use common::ledger::row;
use lockbench::checker::{
    check, check_in_memory, AnomalyKind, CheckOptions, CheckReport, LedgerInput, Verdict,
};
use lockbench::history::{write_events, FaultWindow, HistoryEvent, Op, OpFn, OpKind};
use lockbench::ledger::{FenceMode, LedgerEvent, LedgerFile, LedgerStore, SectionRef, Step};

fn op(c: u32, kind: OpKind, f: OpFn, t: u64) -> Op {
    Op::new(c, kind, f, "r").at(0, t).with_ttl_ms(300)
}

/// Acquire invoke + ok (with token and deadline), release invoke + ok.
fn lease(
    ev: &mut Vec<HistoryEvent>,
    c: u32,
    inv: u64,
    ok: u64,
    token: Option<u64>,
    deadline: u64,
    rel: u64,
) {
    ev.push(HistoryEvent::Op(op(c, OpKind::Invoke, OpFn::Acquire, inv)));
    let mut o = op(c, OpKind::Ok, OpFn::Acquire, ok).with_deadline_us(deadline);
    o.fencing_token = token;
    ev.push(HistoryEvent::Op(o));
    ev.push(HistoryEvent::Op(op(c, OpKind::Invoke, OpFn::Release, rel)));
    ev.push(HistoryEvent::Op(op(
        c,
        OpKind::Ok,
        OpFn::Release,
        rel + 500,
    )));
}

fn sorted(mut ev: Vec<HistoryEvent>) -> Vec<HistoryEvent> {
    let time = |e: &HistoryEvent| match e {
        HistoryEvent::Op(o) => o.time_us,
        HistoryEvent::Crash(c) => c.time_us,
        HistoryEvent::Fault(f) => f.end_us.unwrap_or(f.start_us),
        HistoryEvent::RunEnd(e) => e.time_us,
    };
    ev.sort_by_key(time);
    for (i, e) in ev.iter_mut().enumerate() {
        if let HistoryEvent::Op(o) = e {
            o.index = i as u64;
        }
    }
    ev
}

/// c0 acquires at 5 ms (valid until 300 ms), begins, reads 0, stalls; c1 acquires at 355 ms,
/// runs a whole section (writes 1); c0 wakes, writes 1 over 1 (an increment lost) and ends at
/// 1.13 s: 830 ms after its validity.
fn paused_holder(with_fault: bool) -> (Vec<HistoryEvent>, Vec<LedgerEvent>) {
    let mut ev = Vec::new();
    lease(&mut ev, 0, 0, 5_000, None, 300_000, 1_131_000);
    lease(&mut ev, 1, 300_000, 355_000, None, 655_000, 381_000);
    if with_fault {
        for end in [None, Some(1_100_000)] {
            ev.push(HistoryEvent::Fault(FaultWindow {
                id: 1,
                kind: "client-pause".into(),
                targets: vec!["client-0".into(), "client-1".into()],
                start_us: 20_000,
                end_us: end,
                detail: String::new(),
            }));
        }
    }
    let ledger = vec![
        row(1, 10_000, 1, 0, None, Step::Begin, None, true),
        row(2, 11_000, 1, 0, None, Step::Read, Some(0), true),
        row(3, 360_000, 2, 1, None, Step::Begin, None, true),
        row(4, 361_000, 2, 1, None, Step::Read, Some(0), true),
        row(5, 370_000, 2, 1, None, Step::Write, Some(1), true),
        row(6, 380_000, 2, 1, None, Step::End, None, true),
        row(7, 1_120_000, 1, 0, None, Step::Write, Some(1), true),
        row(8, 1_130_000, 1, 0, None, Step::End, None, true),
    ];
    (sorted(ev), ledger)
}

fn in_memory(ev: Vec<HistoryEvent>, ledger: Vec<LedgerEvent>, mode: FenceMode) -> CheckReport {
    let input = LedgerInput {
        mode,
        events: ledger,
        final_counters: None,
    };
    check_in_memory(ev, Some(&input), &CheckOptions::default())
}

#[test]
fn paused_holder_is_one_incident_with_its_witness_and_overstay() {
    let (ev, ledger) = paused_holder(false);
    let r = in_memory(ev, ledger, FenceMode::Unfenced);
    assert_eq!(r.verdict, Verdict::Invalid);
    // The rules see two anomalies: the ledger's two holders and the lost increment.
    assert_eq!(r.stats.mutex_violations, 1);
    assert_eq!(r.stats.lost_updates, 1);
    assert_eq!(r.incidents.len(), 1, "{:#?}", r.incidents);
    let inc = &r.incidents[0];
    assert_eq!(inc.id, 1);
    assert_eq!(inc.kind, AnomalyKind::MutexViolation);
    assert!(inc.safety);
    assert_eq!(inc.clients, vec![0, 1]);
    assert_eq!(inc.pairs, 1);
    assert_eq!(inc.counts.get(&AnomalyKind::LostUpdate), Some(&1));
    assert_eq!(inc.anomalies.len(), 2);
    // From c0's begin to its late write (the lost increment is a consequence of the overlap).
    assert_eq!((inc.start_us, inc.end_us), (10_000, 1_120_000));
    // Holders: c0's lease and section, then c1's.
    assert_eq!(inc.holders.len(), 2, "{:#?}", inc.holders);
    let c0 = &inc.holders[0];
    assert_eq!(
        (c0.client, c0.acquired_us, c0.validity_end_us),
        (0, Some(5_000), Some(300_000))
    );
    assert_eq!(
        (c0.section_id, c0.section_begin_us, c0.section_end_us),
        (Some(1), Some(10_000), Some(1_130_000))
    );
    assert_eq!(c0.released_us, Some(1_131_000));
    assert_eq!(c0.overstay_ms, Some(830));
    let c1 = &inc.holders[1];
    assert_eq!((c1.client, c1.section_id), (1, Some(2)));
    assert_eq!(c1.overstay_ms, Some(-275));
    assert!(
        inc.cause.starts_with(
            "c0's section ended 830 ms after its lease's validity; no fault active (its acquire took 5 ms"
        ),
        "{}",
        inc.cause
    );
    assert!(
        inc.cause.contains("the section lasted 1120 ms"),
        "{}",
        inc.cause
    );
    // Witness: every row of both sections, every op of both leases.
    let seqs: Vec<i64> = inc.witness.ledger.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=8).collect::<Vec<_>>());
    assert_eq!(inc.witness.ops.len(), 8);
    assert!(inc.witness.ops.windows(2).all(|w| w[0].index < w[1].index));
    assert_eq!(inc.witness.omitted, 0);
}

#[test]
fn paused_holder_inside_a_fault_window_names_the_fault() {
    let (ev, ledger) = paused_holder(true);
    let r = in_memory(ev, ledger, FenceMode::Unfenced);
    assert_eq!(r.incidents.len(), 1);
    let inc = &r.incidents[0];
    assert_eq!(inc.fault_ids, vec![1]);
    assert_eq!(
        inc.cause,
        "c0's section ended 830 ms after its lease's validity; client-pause on client-0, \
         client-1 (0.020 s–1.100 s) held it up"
    );
}

#[test]
fn fenced_rejection_is_a_benign_incident_naming_both_tokens() {
    // c0 (token 1) stalls past its lease; c1 (token 2) runs; c0's late write is rejected.
    let mut ev = Vec::new();
    lease(&mut ev, 0, 0, 5_000, Some(1), 300_000, 1_131_000);
    lease(&mut ev, 1, 300_000, 355_000, Some(2), 655_000, 381_000);
    let ledger = vec![
        row(1, 10_000, 1, 0, Some(1), Step::Begin, None, true),
        row(2, 11_000, 1, 0, Some(1), Step::Read, Some(0), true),
        row(3, 360_000, 2, 1, Some(2), Step::Begin, None, true),
        row(4, 361_000, 2, 1, Some(2), Step::Read, Some(0), true),
        row(5, 370_000, 2, 1, Some(2), Step::Write, Some(1), true),
        row(6, 380_000, 2, 1, Some(2), Step::End, None, true),
        row(7, 1_120_000, 1, 0, Some(1), Step::Write, Some(1), false),
        row(8, 1_130_000, 1, 0, Some(1), Step::End, None, true),
    ];
    let r = in_memory(sorted(ev), ledger, FenceMode::Fenced);
    assert_eq!(r.verdict, Verdict::Valid, "{:?}", r.anomalies);
    assert_eq!(r.stats.stale_writes_rejected, 1);
    assert_eq!(r.incidents.len(), 1);
    let inc = &r.incidents[0];
    assert_eq!(inc.kind, AnomalyKind::StaleWriteRejected);
    assert!(!inc.safety);
    assert_eq!(inc.tokens, vec![1, 2]);
    assert_eq!((inc.start_us, inc.end_us), (1_120_000, 1_120_000));
    assert_eq!(inc.holders.len(), 1);
    assert_eq!(inc.holders[0].overstay_ms, Some(830));
    assert!(
        inc.witness
            .ledger
            .iter()
            .any(|r| r.seq == 7 && !r.accepted && r.fencing_token == Some(1)),
        "{:?}",
        inc.witness.ledger
    );
    assert!(
        inc.cause.starts_with("c0 (token 1)'s section ended 830 ms"),
        "{}",
        inc.cause
    );
}

#[test]
fn a_lease_granted_twice_says_how_long_the_first_was_still_valid() {
    // c1 holds a lease valid until 900 ms; c3, whose own lease ended at 50 ms, stalls before
    // releasing and its release (a plain DEL) returns at 390.5 ms; c2 is granted the lock at
    // 400 ms.
    let mut ev = Vec::new();
    lease(&mut ev, 3, 0, 1_000, None, 50_000, 390_000);
    lease(&mut ev, 1, 60_000, 100_000, None, 900_000, 600_000);
    lease(&mut ev, 2, 390_000, 400_000, None, 1_300_000, 700_000);
    let ledger = vec![
        row(1, 2_000, 3, 3, None, Step::Begin, None, true),
        row(2, 40_000, 3, 3, None, Step::End, None, true),
        row(3, 110_000, 1, 1, None, Step::Begin, None, true),
        row(4, 410_000, 2, 2, None, Step::Begin, None, true),
        row(5, 590_000, 1, 1, None, Step::End, None, true),
        row(6, 690_000, 2, 2, None, Step::End, None, true),
    ];
    let r = in_memory(sorted(ev), ledger, FenceMode::Unfenced);
    assert_eq!(r.stats.believed_overlaps, 1);
    assert_eq!(r.stats.mutex_violations, 1);
    assert_eq!(r.incidents.len(), 1, "ledger and history views merge");
    let inc = &r.incidents[0];
    assert_eq!(inc.counts.len(), 2);
    assert_eq!(inc.clients, vec![1, 2]);
    assert_eq!(
        inc.cause,
        "c2 acquired at 0.400 s while c1's lease was still valid for 500 ms (c3's release \
         ran from 0.390 s to 0.391 s, in between); no fault active"
    );
    // The third client's release is part of the witness.
    assert!(inc
        .witness
        .ops
        .iter()
        .any(|o| o.client == 3 && o.f == OpFn::Release && o.kind == OpKind::Ok));
}

#[test]
fn separate_overlaps_are_separate_incidents() {
    let mut ev = Vec::new();
    lease(&mut ev, 1, 0, 100_000, None, 900_000, 600_000);
    lease(&mut ev, 2, 390_000, 400_000, None, 1_300_000, 700_000);
    lease(&mut ev, 1, 2_000_000, 2_100_000, None, 2_900_000, 2_600_000);
    lease(&mut ev, 2, 2_390_000, 2_400_000, None, 3_300_000, 2_700_000);
    let r = in_memory(sorted(ev), Vec::new(), FenceMode::Unfenced);
    assert_eq!(r.stats.believed_overlaps, 2);
    let ids: Vec<u32> = r.incidents.iter().map(|i| i.id).collect();
    assert_eq!(ids, vec![1, 2]);
    assert!(r.incidents[0].end_us < r.incidents[1].start_us);
}

#[test]
fn valid_runs_have_no_incidents_and_old_checker_files_still_parse() {
    let mut ev = Vec::new();
    lease(&mut ev, 1, 0, 100_000, None, 300_000, 200_000);
    lease(&mut ev, 2, 200_100, 210_000, None, 500_000, 300_000);
    let r = in_memory(sorted(ev), Vec::new(), FenceMode::Unfenced);
    assert!(r.incidents.is_empty());
    // A checker.json written before incidents and the waiting view existed.
    let mut v = serde_json::to_value(&r).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("incidents");
    o.remove("incidents_partial");
    o["stats"]
        .as_object_mut()
        .unwrap()
        .remove("wait_blocked_ms");
    o["stats"]
        .as_object_mut()
        .unwrap()
        .remove("wait_availability_pct");
    let old: CheckReport = serde_json::from_value(v).unwrap();
    assert!(old.incidents.is_empty());
    assert_eq!(old.stats.wait_availability_pct, None);
}

#[test]
fn a_client_waiting_on_a_stalled_node_lowers_waiting_availability() {
    // c0 holds 0–20 ms; c1's acquire waits from 50 ms to 2.05 s (a paused node) and succeeds:
    // no attempt failed, yet nobody could have the lock for 2 s.
    let mut ev = Vec::new();
    lease(&mut ev, 0, 0, 1_000, None, 1_000_000, 20_000);
    lease(&mut ev, 1, 50_000, 2_050_000, None, 2_300_000, 2_100_000);
    let r = in_memory(sorted(ev), Vec::new(), FenceMode::Unfenced);
    assert_eq!(r.stats.availability_pct, 100.0, "the old view sees nothing");
    assert_eq!(r.stats.wait_blocked_ms, 2_000);
    let pct = r.stats.wait_availability_pct.unwrap();
    // Observed 0 → 2.1005 s.
    assert!((pct - 4.78).abs() < 0.05, "{pct}");
    // Short waits (the normal round trip) do not count.
    let mut ev = Vec::new();
    lease(&mut ev, 0, 0, 1_000, None, 300_000, 20_000);
    lease(&mut ev, 1, 21_000, 25_000, None, 320_000, 100_000);
    let r = in_memory(sorted(ev), Vec::new(), FenceMode::Unfenced);
    assert_eq!(r.stats.wait_blocked_ms, 0);
    assert_eq!(r.stats.wait_availability_pct, Some(100.0));
}

#[test]
fn the_file_checker_collects_the_same_witness() {
    let tmp = tempfile::tempdir().unwrap();
    let (ev, ledger) = paused_holder(true);
    let history = tmp.path().join("history.jsonl");
    let mut f = std::fs::File::create(&history).unwrap();
    write_events(&mut f, &ev).unwrap();
    drop(f);
    let path = tmp.path().join("ledger.sqlite");
    let mut store = LedgerStore::create(&path, FenceMode::Unfenced).unwrap();
    for r in &ledger {
        let s = SectionRef {
            section_id: r.section_id,
            client: r.client,
            resource: r.resource.clone(),
            fencing_token: r.fencing_token,
            idempotency_key: None,
        };
        match r.step {
            Step::Begin => {
                store.begin(&s, r.time_us).unwrap();
            }
            Step::Read => {
                store.read(&s, r.time_us).unwrap();
            }
            Step::Write => {
                store.write(&s, r.value.unwrap(), r.time_us).unwrap();
            }
            Step::End | Step::Crash => {
                store.end(&s, r.step == Step::Crash, r.time_us).unwrap();
            }
        }
    }
    drop(store);
    let from_files = check(&history, Some(&path), &CheckOptions::default()).unwrap();
    let in_mem = in_memory(ev, ledger, FenceMode::Unfenced);
    assert_eq!(from_files.incidents.len(), 1);
    let (a, b) = (&from_files.incidents[0], &in_mem.incidents[0]);
    assert_eq!(a.cause, b.cause);
    assert_eq!(a.holders, b.holders);
    assert_eq!(a.witness.ops, b.witness.ops);
    // The rows in checker.json are the ledger's own rows.
    let mut stored = Vec::new();
    LedgerFile::open(&path)
        .unwrap()
        .for_each_event(|e| stored.push(e))
        .unwrap();
    assert_eq!(a.witness.ledger, stored);
}
