//! Hand-built histories and ledgers whose answer is known: one per anomaly kind, and valid ones
//! that must come out valid (no false positives).

mod common;

use common::ledger::row;
use lockbench::checker::{
    check, check_dir, check_in_memory, AnomalyKind, CheckOptions, CheckReport, LedgerInput,
    Liveness, Verdict,
};
use lockbench::history::{
    ClientCrash, ErrorKind, FaultWindow, HistoryEvent, HistoryWriter, Op, OpFn, OpKind, RunClock,
};
use lockbench::ledger::{FenceMode, LedgerEvent, LedgerStore, SectionRef, Step};

/// History builder: events are pushed in any order and sorted by time at the end.
#[derive(Default)]
struct H {
    events: Vec<HistoryEvent>,
}

impl H {
    fn op(&mut self, op: Op) -> &mut Self {
        self.events.push(HistoryEvent::Op(op));
        self
    }
    fn invoke(&mut self, t: u64, c: u32, f: OpFn, r: &str) -> &mut Self {
        self.op(Op::new(c, OpKind::Invoke, f, r).at(0, t).with_ttl_ms(1000))
    }
    /// Acquire invoked at `inv`, ok at `ok`, with a token and validity deadline.
    fn acquire(
        &mut self,
        c: u32,
        r: &str,
        inv: u64,
        ok: u64,
        token: Option<u64>,
        deadline: Option<u64>,
    ) -> &mut Self {
        self.invoke(inv, c, OpFn::Acquire, r);
        let mut o = Op::new(c, OpKind::Ok, OpFn::Acquire, r)
            .at(0, ok)
            .with_ttl_ms(1000);
        o.fencing_token = token;
        o.validity_deadline_us = deadline;
        self.op(o)
    }
    fn acquire_no_ttl(&mut self, c: u32, r: &str, inv: u64, ok: u64) -> &mut Self {
        self.op(Op::new(c, OpKind::Invoke, OpFn::Acquire, r).at(0, inv));
        self.op(Op::new(c, OpKind::Ok, OpFn::Acquire, r).at(0, ok))
    }
    fn acquire_fail(
        &mut self,
        c: u32,
        r: &str,
        inv: u64,
        done: u64,
        kind: OpKind,
        err: ErrorKind,
    ) -> &mut Self {
        self.invoke(inv, c, OpFn::Acquire, r);
        self.op(Op::new(c, kind, OpFn::Acquire, r)
            .at(0, done)
            .with_ttl_ms(1000)
            .with_error(err, "x"))
    }
    fn release(&mut self, c: u32, r: &str, inv: u64, ok: u64) -> &mut Self {
        self.invoke(inv, c, OpFn::Release, r);
        self.op(Op::new(c, OpKind::Ok, OpFn::Release, r).at(0, ok))
    }
    fn crash(&mut self, c: u32, t: u64) -> &mut Self {
        self.events.push(HistoryEvent::Crash(ClientCrash {
            index: 0,
            time_us: t,
            client: c,
        }));
        self
    }
    fn fault(&mut self, id: u64, start: u64, end: Option<u64>) -> &mut Self {
        self.events.push(HistoryEvent::Fault(FaultWindow {
            id,
            kind: "client-pause".into(),
            targets: vec!["client-1".into()],
            start_us: start,
            end_us: end,
            detail: String::new(),
        }));
        self
    }
    fn build(&mut self) -> Vec<HistoryEvent> {
        let time = |e: &HistoryEvent| match e {
            HistoryEvent::Op(o) => o.time_us,
            HistoryEvent::Crash(c) => c.time_us,
            HistoryEvent::Fault(f) => f.end_us.unwrap_or(f.start_us),
            HistoryEvent::RunEnd(e) => e.time_us,
        };
        let mut ev = std::mem::take(&mut self.events);
        ev.sort_by_key(time);
        for (i, e) in ev.iter_mut().enumerate() {
            match e {
                HistoryEvent::Op(o) => o.index = i as u64,
                HistoryEvent::Crash(c) => c.index = i as u64,
                HistoryEvent::RunEnd(e) => e.index = i as u64,
                HistoryEvent::Fault(_) => {}
            }
        }
        ev
    }
}

/// Ledger builder in commit order (the order of calls).
struct L {
    mode: FenceMode,
    events: Vec<LedgerEvent>,
}

impl L {
    fn new(mode: FenceMode) -> Self {
        Self {
            mode,
            events: Vec::new(),
        }
    }
    #[allow(clippy::too_many_arguments)]
    fn step(
        &mut self,
        t: u64,
        section: u64,
        client: u32,
        token: Option<u64>,
        step: Step,
        value: Option<i64>,
        accepted: bool,
    ) -> &mut Self {
        let seq = self.events.len() as i64 + 1;
        self.events
            .push(row(seq, t, section, client, token, step, value, accepted));
        self
    }
    /// A whole serial section: begin, read v, write v+1, end.
    fn section(
        &mut self,
        t: u64,
        section: u64,
        client: u32,
        token: Option<u64>,
        v: i64,
    ) -> &mut Self {
        self.step(t, section, client, token, Step::Begin, None, true)
            .step(t + 1, section, client, token, Step::Read, Some(v), true)
            .step(
                t + 2,
                section,
                client,
                token,
                Step::Write,
                Some(v + 1),
                true,
            )
            .step(t + 3, section, client, token, Step::End, None, true)
    }
    fn input(&self) -> LedgerInput {
        LedgerInput {
            mode: self.mode,
            events: self.events.clone(),
            final_counters: None,
        }
    }
}

fn run(h: &mut H, l: &L) -> CheckReport {
    check_in_memory(h.build(), Some(&l.input()), &CheckOptions::default())
}

fn kinds(r: &CheckReport) -> Vec<AnomalyKind> {
    r.anomalies.iter().map(|a| a.kind).collect()
}

/// Two clients taking turns on one resource, with tokens, deadlines and a serial ledger.
fn serial(fenced: bool) -> (H, L) {
    let mut h = H::default();
    let mut l = L::new(if fenced {
        FenceMode::Fenced
    } else {
        FenceMode::Unfenced
    });
    for i in 0..10u64 {
        let c = (i % 2) as u32 + 1;
        let t = i * 1000;
        let tok = fenced.then_some(i + 1);
        h.acquire(c, "r", t, t + 100, tok, Some(t + 900));
        l.section(t + 200, i, c, tok, i as i64);
        h.release(c, "r", t + 600, t + 700);
    }
    (h, l)
}

#[test]
fn serial_histories_are_valid_fenced_and_unfenced() {
    for fenced in [false, true] {
        let (mut h, l) = serial(fenced);
        let r = run(&mut h, &l);
        assert_eq!(r.verdict, Verdict::Valid, "{r:#?}");
        assert_eq!(r.liveness, Liveness::Live);
        assert!(r.anomalies.is_empty(), "{:?}", r.anomalies);
        assert_eq!(r.stats.acquire_ok, 10);
        assert_eq!(r.stats.sections, 10);
        assert_eq!(r.stats.max_concurrent_holders, 1);
        assert_eq!(r.stats.max_believed_holders, 1);
        assert_eq!(r.stats.availability_pct, 100.0);
    }
}

#[test]
fn three_holders_inside_is_one_violation_with_three_holders_and_lost_updates() {
    let mut h = H::default();
    let mut l = L::new(FenceMode::Unfenced);
    // naive-del: all three begin before any ends; all read 0 and write 1.
    for c in 1..=3u32 {
        l.step(c as u64 * 10, c as u64, c, None, Step::Begin, None, true);
    }
    for c in 1..=3u32 {
        l.step(100 + c as u64, c as u64, c, None, Step::Read, Some(0), true);
    }
    for c in 1..=3u32 {
        l.step(
            200 + c as u64,
            c as u64,
            c,
            None,
            Step::Write,
            Some(1),
            true,
        );
        l.step(300 + c as u64, c as u64, c, None, Step::End, None, true);
    }
    // A fourth, serial section afterwards is fine.
    l.section(1000, 4, 4, None, 1);
    h.acquire(1, "r", 0, 5, None, Some(50_000));
    let r = run(&mut h, &l);
    assert_eq!(r.verdict, Verdict::Invalid);
    let v: Vec<_> = r.of_kind(AnomalyKind::MutexViolation).collect();
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].holders, Some(3));
    assert_eq!(v[0].clients, vec![1, 2, 3]);
    assert_eq!(v[0].ledger_seqs, vec![1, 2, 3]);
    assert_eq!(r.stats.mutex_violations, 1);
    assert_eq!(r.stats.max_concurrent_holders, 3);
    // 4 accepted writes, final counter 2.
    assert_eq!(r.stats.lost_updates, 2);
    assert_eq!(r.of_kind(AnomalyKind::LostUpdate).count(), 2);
}

#[test]
fn pause_past_ttl_unfenced_is_invalid_with_stale_write_accepted() {
    // single, unfenced ledger, tokens present: A (token 1) reads, pauses past its TTL,
    // B (token 2) does a whole section, A resumes and writes its stale value.
    let mut h = H::default();
    // Client 3 took token 0 before the others; its lease ran out while it was paused.
    h.acquire(3, "r", 10, 50, Some(0), Some(60));
    h.acquire(1, "r", 0, 100, Some(1), Some(1000));
    h.acquire(2, "r", 1200, 1300, Some(2), Some(2200));
    h.release(2, "r", 1800, 1900);
    let mut l = L::new(FenceMode::Unfenced);
    l.step(200, 1, 1, Some(1), Step::Begin, None, true).step(
        210,
        1,
        1,
        Some(1),
        Step::Read,
        Some(0),
        true,
    );
    l.section(1400, 2, 2, Some(2), 0);
    l.step(3000, 1, 1, Some(1), Step::Write, Some(1), true)
        .step(3010, 1, 1, Some(1), Step::End, None, true);
    let r = run(&mut h, &l);
    assert_eq!(r.verdict, Verdict::Invalid);
    assert_eq!(r.stats.stale_writes_accepted, 1);
    assert_eq!(r.stats.stale_writes_rejected, 0);
    assert_eq!(r.stats.mutex_violations, 1);
    assert_eq!(r.stats.lost_updates, 1);
    assert_eq!(
        r.stats.believed_overlaps, 0,
        "the deadlines did not overlap"
    );
    let s = r.of_kind(AnomalyKind::StaleWriteAccepted).next().unwrap();
    assert_eq!((s.clients.clone(), s.tokens.clone()), (vec![1], vec![1, 2]));
}

#[test]
fn pause_past_ttl_fenced_is_valid_with_stale_writes_rejected() {
    // The same run against the real SQLite ledger in fenced mode: no false positive.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    let mut store = LedgerStore::create(&path, FenceMode::Fenced).unwrap();
    let sec = |id, client, token| SectionRef {
        section_id: id,
        client,
        resource: "r".into(),
        fencing_token: Some(token),
        idempotency_key: None,
    };
    let (a, b, c) = (sec(1, 1, 1), sec(2, 2, 2), sec(3, 3, 0));
    assert!(store.begin(&a, 200).unwrap().accepted);
    assert_eq!(store.read(&a, 210).unwrap(), 0);
    assert!(store.begin(&b, 1400).unwrap().accepted);
    assert_eq!(store.read(&b, 1401).unwrap(), 0);
    assert!(store.write(&b, 1, 1402).unwrap().accepted);
    store.end(&b, false, 1403).unwrap();
    assert!(!store.write(&a, 1, 3000).unwrap().accepted);
    store.end(&a, false, 3010).unwrap();
    // A client paused before its begin is fenced out at begin and at write.
    assert!(!store.begin(&c, 3100).unwrap().accepted);
    assert!(!store.write(&c, 1, 3101).unwrap().accepted);
    store.end(&c, false, 3102).unwrap();
    drop(store);

    let mut h = H::default();
    // Client 3 took token 0 before the others; its lease ran out while it was paused.
    h.acquire(3, "r", 10, 50, Some(0), Some(60));
    h.acquire(1, "r", 0, 100, Some(1), Some(1000));
    h.acquire(2, "r", 1200, 1300, Some(2), Some(2200));
    h.release(2, "r", 1800, 1900);
    let hist = dir.path().join("history.jsonl");
    let mut f = std::fs::File::create(&hist).unwrap();
    lockbench::history::write_events(&mut f, &h.build()).unwrap();
    let r = check_dir(dir.path(), &CheckOptions::default()).unwrap();
    assert_eq!(r.verdict, Verdict::Valid, "{r:#?}");
    assert_eq!(r.fence_mode, Some(FenceMode::Fenced));
    assert_eq!(r.stats.stale_writes_rejected, 2);
    assert_eq!(r.stats.stale_writes_accepted, 0);
    assert_eq!(r.stats.mutex_violations, 0);
    assert_eq!(r.stats.lost_updates, 0);
    assert_eq!(r.stats.ledger_events, 11);
    assert_eq!(kinds(&r), vec![AnomalyKind::StaleWriteRejected; 2]);
}

#[test]
fn final_counter_below_accepted_writes_is_a_lost_update() {
    let (mut h, l) = serial(false);
    let mut input = l.input();
    input.final_counters = Some(vec![("r".into(), 7)]);
    let r = check_in_memory(h.build(), Some(&input), &CheckOptions::default());
    assert_eq!(r.verdict, Verdict::Invalid);
    assert_eq!(r.stats.lost_updates, 3);
    let a = r.of_kind(AnomalyKind::LostUpdate).next().unwrap();
    assert!(a.detail.contains("10 accepted writes"), "{}", a.detail);
}

#[test]
fn token_regression_and_duplicate_in_real_time_order() {
    let l = {
        let mut l = L::new(FenceMode::Fenced);
        l.section(150, 1, 1, Some(5), 0);
        l
    };
    let mut h = H::default();
    h.acquire(1, "r", 0, 100, Some(5), Some(900));
    h.release(1, "r", 300, 400);
    h.acquire(2, "r", 1000, 1100, Some(3), Some(1900)); // issued after 5: regression
    h.release(2, "r", 1200, 1300);
    h.acquire(3, "r", 2000, 2100, Some(5), Some(2900)); // equal to the max: duplicate
    h.release(3, "r", 2200, 2300);
    let r = run(&mut h, &l);
    assert_eq!(r.verdict, Verdict::Invalid);
    assert_eq!(r.stats.token_regressions, 1);
    assert_eq!(r.stats.token_duplicates, 1);
    let reg = r.of_kind(AnomalyKind::TokenRegression).next().unwrap();
    assert_eq!(
        (reg.clients.clone(), reg.tokens.clone()),
        (vec![1, 2], vec![3, 5])
    );
    let dup = r.of_kind(AnomalyKind::TokenDuplicate).next().unwrap();
    assert_eq!(
        (dup.clients.clone(), dup.tokens.clone()),
        (vec![1, 3], vec![5])
    );
}

#[test]
fn concurrent_acquires_completing_out_of_token_order_are_not_a_regression() {
    // A is invoked first and issued 5, B issued 6, but A's reply arrives last. A's lease had
    // already expired when its reply came (deadline 15 < ok 30), so nobody overlapped either.
    let mut h = H::default();
    h.acquire(1, "r", 0, 30, Some(5), Some(15));
    h.acquire(2, "r", 10, 20, Some(6), Some(900));
    h.release(2, "r", 500, 600);
    let mut l = L::new(FenceMode::Fenced);
    l.section(100, 1, 2, Some(6), 0);
    let r = run(&mut h, &l);
    assert_eq!(r.verdict, Verdict::Valid, "{:?}", r.anomalies);
    assert_eq!(r.stats.token_regressions + r.stats.token_duplicates, 0);
}

#[test]
fn overlapping_validity_windows_are_a_believed_overlap_with_three_holders() {
    let (_, l) = serial(false);
    let mut h = H::default();
    h.fault(7, 50, Some(150));
    h.acquire(1, "r", 0, 10, None, Some(10_000));
    h.acquire(2, "r", 20, 100, None, Some(10_000));
    h.acquire(3, "r", 30, 200, None, Some(10_000));
    h.release(1, "r", 300, 310);
    h.release(2, "r", 400, 410);
    h.release(3, "r", 500, 510);
    let r = run(&mut h, &l);
    assert_eq!(r.verdict, Verdict::Invalid);
    assert_eq!(r.stats.believed_overlaps, 1);
    assert_eq!(r.stats.max_believed_holders, 3);
    let o = r.of_kind(AnomalyKind::BelievedOverlap).next().unwrap();
    assert_eq!(o.clients, vec![1, 2, 3]);
    assert_eq!(o.holders, Some(3));
    assert_eq!(o.resource, "r");
    assert_eq!((o.time_us, o.end_us), (10, Some(400)));
    assert_eq!(o.fault_ids, vec![7]);
}

#[test]
fn windows_that_touch_or_expire_do_not_overlap() {
    let (_, l) = serial(false);
    let mut h = H::default();
    // A releases at 100 exactly when B's ok arrives; C acquires after B's deadline passed.
    h.acquire(1, "r", 0, 10, None, Some(10_000));
    h.invoke(100, 1, OpFn::Release, "r");
    h.acquire(2, "r", 50, 100, None, Some(500));
    h.acquire(3, "r", 450, 500, None, Some(5000));
    h.release(3, "r", 600, 700);
    let r = run(&mut h, &l);
    assert_eq!(r.verdict, Verdict::Valid, "{:?}", r.anomalies);
    assert_eq!(r.stats.believed_overlaps, 0);
}

#[test]
fn extend_moves_the_deadline() {
    let (_, l) = serial(false);
    let with_extend = |extend: bool| {
        let mut h = H::default();
        h.acquire(1, "r", 0, 10, None, Some(1000));
        if extend {
            h.invoke(800, 1, OpFn::Extend, "r");
            h.op(Op::new(1, OpKind::Ok, OpFn::Extend, "r")
                .at(0, 900)
                .with_deadline_us(2000));
        }
        h.acquire(2, "r", 1100, 1500, None, Some(3000));
        h.release(2, "r", 2500, 2600);
        run(&mut h, &l)
    };
    assert_eq!(with_extend(false).verdict, Verdict::Valid);
    let r = with_extend(true);
    assert_eq!(r.verdict, Verdict::Invalid);
    assert_eq!(
        r.of_kind(AnomalyKind::BelievedOverlap)
            .next()
            .unwrap()
            .clients,
        vec![1, 2]
    );
}

#[test]
fn info_acquire_overlap_is_listed_but_leaves_the_verdict_to_the_ledger() {
    let (_, l) = serial(false);
    let mut h = H::default();
    // A's acquire timed out (info) at 50; it may hold the lock until 50 + 1000 ms.
    h.acquire_fail(1, "r", 0, 50, OpKind::Info, ErrorKind::Timeout);
    h.acquire(2, "r", 100, 200, None, Some(900_000));
    h.release(2, "r", 300, 400);
    let r = run(&mut h, &l);
    // The serial ledger shows one holder at a time: an acquire whose outcome is unknown does
    // not make the verdict unknown (docs/design.md, rule 6), it is listed as a possible overlap.
    assert_eq!(r.verdict, Verdict::Valid);
    assert_eq!(r.stats.possible_overlaps, 1);
    assert_eq!(r.stats.acquire_info, 1);
    assert_eq!(r.stats.acquire_timeouts, 1);
    assert!(r.unknown_reasons.is_empty(), "{:?}", r.unknown_reasons);
    let p = r.of_kind(AnomalyKind::PossibleOverlap).next().unwrap();
    assert_eq!(p.clients, vec![1, 2]);
    // The same info acquire long before B (its TTL over) changes nothing.
    let mut h = H::default();
    h.acquire_fail(1, "r", 0, 50, OpKind::Info, ErrorKind::Timeout);
    h.acquire(2, "r", 2_000_000, 2_000_100, None, Some(2_900_000));
    h.release(2, "r", 2_000_300, 2_000_400);
    assert_eq!(run(&mut h, &l).verdict, Verdict::Valid);
}

#[test]
fn no_ttl_crash_leaves_the_resource_stuck() {
    let mut h = H::default();
    let mut l = L::new(FenceMode::Unfenced);
    h.acquire_no_ttl(1, "r", 0, 100);
    l.step(200, 1, 1, None, Step::Begin, None, true);
    l.step(300, 1, 1, None, Step::Read, Some(0), true);
    h.crash(1, 1_000_000);
    l.step(1_000_000, 1, 1, None, Step::Crash, None, true);
    // Two clients retry for 4 s; every attempt fails (busy).
    for k in 0..40u64 {
        let c = 2 + (k % 2) as u32;
        let t = 1_000_100 + k * 100_000;
        h.acquire_fail(c, "r", t, t + 50_000, OpKind::Fail, ErrorKind::Busy);
    }
    let r = run(&mut h, &l);
    assert_eq!(r.verdict, Verdict::Valid, "{:?}", r.anomalies);
    assert_eq!(r.liveness, Liveness::Stuck);
    assert_eq!(r.stats.stuck_resources, 1);
    assert_eq!(r.stats.acquire_fail, 40);
    let s = r.of_kind(AnomalyKind::StuckResource).next().unwrap();
    assert_eq!((s.time_us, s.end_us), (1_000_100, Some(4_950_100)));
    assert_eq!(s.clients, vec![2, 3]);
    assert_eq!(r.stats.unavailable_ms, 3950);
    // Observed from the first acquire (0) to the last failure (4.95 s); 3.95 s unavailable.
    assert!(
        (r.stats.availability_pct - 20.2).abs() < 0.1,
        "{}",
        r.stats.availability_pct
    );
}

#[test]
fn crash_with_ttl_waits_out_the_lease_then_is_degraded_not_stuck() {
    let mut h = H::default();
    let (_, l) = serial(false);
    // Client 1 takes the lock at 100 µs with a 1 s TTL and crashes at 0.2 s: nobody releases
    // it, the service frees it at 1.0001 s. Waiting that out is the design, not unavailability.
    h.acquire(1, "r", 0, 100, None, Some(900_000));
    h.crash(1, 200_000);
    for k in 0..4u64 {
        let t = 210_000 + k * 100_000;
        h.acquire_fail(2, "r", t, t + 50_000, OpKind::Fail, ErrorKind::Busy);
    }
    // After the TTL nobody holds it, yet acquires fail: that is unavailability.
    for k in 0..4u64 {
        let t = 1_100_000 + k * 100_000;
        h.acquire_fail(2, "r", t, t + 50_000, OpKind::Fail, ErrorKind::Busy);
    }
    h.acquire(2, "r", 1_500_000, 1_500_100, None, Some(2_400_000));
    h.release(2, "r", 1_600_000, 1_600_100);
    let r = run(&mut h, &l);
    assert_eq!(r.verdict, Verdict::Valid);
    assert_eq!(r.liveness, Liveness::Degraded);
    assert_eq!(r.stats.stuck_resources, 0);
    assert_eq!(r.stats.unavailable_ms, 350);
    let u = r.of_kind(AnomalyKind::Unavailable).next().unwrap();
    assert_eq!((u.time_us, u.end_us), (1_100_000, Some(1_450_000)));
}

#[test]
fn waiting_out_a_crashed_holders_ttl_is_not_unavailability() {
    // (the crashed lease has a TTL, failures inside it) → unavailable ms; without a TTL the
    // key stays: every failure is unexplained (no-ttl's stuck case has its own test).
    for (ttl, unavailable_ms) in [(true, 0), (false, 350)] {
        let mut h = H::default();
        let (_, l) = serial(false);
        if ttl {
            h.acquire(1, "r", 0, 100, None, Some(900_000));
        } else {
            h.acquire_no_ttl(1, "r", 0, 100);
        }
        h.crash(1, 200_000);
        for k in 0..4u64 {
            let t = 210_000 + k * 100_000;
            h.acquire_fail(2, "r", t, t + 50_000, OpKind::Fail, ErrorKind::Busy);
        }
        h.acquire(2, "r", 1_100_000, 1_100_100, None, Some(2_000_000));
        h.release(2, "r", 1_200_000, 1_200_100);
        let r = run(&mut h, &l);
        assert_eq!(r.stats.unavailable_ms, unavailable_ms, "ttl {ttl}");
        assert_eq!(
            r.of_kind(AnomalyKind::Unavailable).count(),
            usize::from(unavailable_ms > 0),
            "ttl {ttl}"
        );
    }
}

#[test]
fn contention_and_races_are_not_unavailability() {
    let (_, l) = serial(false);
    let mut h = H::default();
    // B fails while A holds; then A releases and B and C race: B wins, C's fail is reported
    // before B's ok arrives.
    h.acquire(1, "r", 0, 100, None, Some(900_000));
    h.acquire_fail(2, "r", 200, 800_000, OpKind::Fail, ErrorKind::Busy);
    h.release(1, "r", 850_000, 860_000);
    h.invoke(870_000, 2, OpFn::Acquire, "r");
    h.acquire_fail(3, "r", 871_000, 990_000, OpKind::Fail, ErrorKind::Busy);
    h.op(Op::new(2, OpKind::Ok, OpFn::Acquire, "r")
        .at(0, 995_000)
        .with_deadline_us(1_800_000));
    h.release(2, "r", 1_000_000, 1_000_100);
    let r = run(&mut h, &l);
    assert_eq!(r.verdict, Verdict::Valid);
    assert_eq!(r.liveness, Liveness::Live, "{:?}", r.anomalies);
    assert_eq!(r.stats.unavailable_ms, 0);
    assert_eq!(r.stats.acquire_fail, 2);
}

#[test]
fn connection_errors_while_free_are_unavailability() {
    let (_, l) = serial(false);
    let mut h = H::default();
    h.acquire(1, "r", 0, 100, None, Some(900));
    h.release(1, "r", 200, 300);
    h.acquire_fail(2, "r", 1000, 200_000, OpKind::Fail, ErrorKind::Connection);
    h.acquire_fail(
        2,
        "r",
        210_000,
        400_000,
        OpKind::Fail,
        ErrorKind::Connection,
    );
    h.acquire(2, "r", 410_000, 410_100, None, Some(1_000_000));
    h.release(2, "r", 500_000, 500_100);
    let r = run(&mut h, &l);
    assert_eq!(r.stats.acquire_errors, 2);
    assert_eq!(r.liveness, Liveness::Degraded);
    assert_eq!(r.stats.unavailability_windows, 1);
    assert_eq!(r.stats.unavailable_ms, 399);
}

#[test]
fn crash_ends_the_believed_window() {
    let (_, l) = serial(false);
    let mut h = H::default();
    h.acquire_no_ttl(1, "r", 0, 100);
    h.crash(1, 500);
    h.acquire(2, "r", 600, 700, None, Some(5000));
    h.release(2, "r", 800, 900);
    let r = run(&mut h, &l);
    assert_eq!(r.verdict, Verdict::Valid, "{:?}", r.anomalies);
}

#[test]
fn a_library_saying_it_lost_the_lock_ends_the_believed_window() {
    // Client 1's library answers its hold with owns=false at 300, before its deadline; client
    // 2 acquires at 400. Only the owns=false op tells them apart from a believed overlap.
    let (_, l) = serial(false);
    let history = |lost: bool| {
        let mut h = H::default();
        h.acquire(1, "r", 0, 10, None, Some(10_000));
        if lost {
            let mut o = Op::new(1, OpKind::Fail, OpFn::Extend, "r")
                .at(0, 300)
                .with_error(
                    ErrorKind::Other,
                    "the library no longer believes it owns the lock",
                );
            o.owns = Some(false);
            h.op(o);
        }
        h.acquire(2, "r", 350, 400, None, Some(10_000));
        h.release(1, "r", 500, 510);
        h.release(2, "r", 600, 610);
        h
    };
    let r = run(&mut history(true), &l);
    assert_eq!(r.stats.library_lost_notices, 1);
    assert_eq!(r.stats.believed_overlaps, 0, "{:?}", r.anomalies);
    let r = run(&mut history(false), &l);
    assert_eq!(r.stats.library_lost_notices, 0);
    assert_eq!(r.stats.believed_overlaps, 1, "{:?}", r.anomalies);
}

#[test]
fn fenced_equal_tokens_inside_together_are_a_violation() {
    // After a failover the same token is issued twice: fencing cannot tell them apart.
    let (mut h, _) = serial(true);
    let mut l = L::new(FenceMode::Fenced);
    l.step(10, 1, 1, Some(4), Step::Begin, None, true)
        .step(20, 2, 2, Some(4), Step::Begin, None, true)
        .step(30, 1, 1, Some(4), Step::End, None, true)
        .step(40, 2, 2, Some(4), Step::End, None, true);
    let r = run(&mut h, &l);
    assert_eq!(r.verdict, Verdict::Invalid);
    let v = r.of_kind(AnomalyKind::MutexViolation).next().unwrap();
    assert_eq!(
        (v.clients.clone(), v.tokens.clone(), v.holders),
        (vec![1, 2], vec![4], Some(2))
    );
    // A higher token fences the older holder out: not a violation.
    let mut l = L::new(FenceMode::Fenced);
    l.step(10, 1, 1, Some(4), Step::Begin, None, true)
        .step(20, 2, 2, Some(5), Step::Begin, None, true)
        .step(30, 2, 2, Some(5), Step::End, None, true)
        .step(40, 1, 1, Some(4), Step::End, None, true);
    assert_eq!(run(&mut h, &l).stats.mutex_violations, 0);
}

#[test]
fn missing_ledger_or_nothing_acquired_is_unknown() {
    let (mut h, _) = serial(false);
    let r = check_in_memory(h.build(), None, &CheckOptions::default());
    assert_eq!(r.verdict, Verdict::Unknown);
    assert!(r.unknown_reasons[0].contains("no ledger"));
    let mut h = H::default();
    h.acquire_fail(1, "r", 0, 10, OpKind::Fail, ErrorKind::Busy);
    let r = run(&mut h, &L::new(FenceMode::Unfenced));
    assert_eq!(r.verdict, Verdict::Unknown);
    assert!(r
        .unknown_reasons
        .iter()
        .any(|s| s.contains("nothing to check")));
}

#[test]
fn truncated_history_file_is_unknown_and_corrupt_line_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (mut h, _) = serial(true);
    let ledger_path = dir.path().join("ledger.sqlite");
    let mut store = LedgerStore::create(&ledger_path, FenceMode::Fenced).unwrap();
    for i in 0..10u64 {
        let s = SectionRef {
            section_id: i,
            client: (i % 2) as u32 + 1,
            resource: "r".into(),
            fencing_token: Some(i + 1),
            idempotency_key: None,
        };
        store.begin(&s, i * 1000 + 200).unwrap();
        let v = store.read(&s, i * 1000 + 201).unwrap();
        assert!(store.write(&s, v + 1, i * 1000 + 202).unwrap().accepted);
        store.end(&s, false, i * 1000 + 203).unwrap();
    }
    drop(store);
    let hist = dir.path().join("history.jsonl");
    let mut text = Vec::new();
    lockbench::history::write_events(&mut text, &h.build()).unwrap();
    std::fs::write(&hist, &text).unwrap();
    let opts = CheckOptions::default();
    assert_eq!(
        check(&hist, Some(&ledger_path), &opts).unwrap().verdict,
        Verdict::Valid
    );
    text.extend_from_slice(b"{\"type\":\"op\",\"ind");
    std::fs::write(&hist, &text).unwrap();
    let r = check(&hist, Some(&ledger_path), &opts).unwrap();
    assert_eq!(r.verdict, Verdict::Unknown);
    assert!(r.history_truncated);
    text.extend_from_slice(b"\n{}\n");
    std::fs::write(&hist, &text).unwrap();
    let err = check(&hist, Some(&ledger_path), &opts).unwrap_err();
    assert!(err.to_string().contains("line 41"), "{err}");
}

#[test]
fn recorded_history_and_async_ledger_check_end_to_end() {
    // The real writer and the real async ledger, two clients overlapping on purpose.
    let dir = tempfile::tempdir().unwrap();
    let clock = RunClock::start();
    let writer = HistoryWriter::create(dir.path().join("history.jsonl"), clock).unwrap();
    let rec = writer.recorder();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ledger = lockbench::ledger::Ledger::open(
            dir.path().join("ledger.sqlite"),
            FenceMode::Unfenced,
            clock,
        )
        .unwrap();
        let sec = |c: u32| SectionRef {
            section_id: c as u64,
            client: c,
            resource: "r".into(),
            fencing_token: None,
            idempotency_key: None,
        };
        for c in [1u32, 2] {
            rec.record(Op::new(c, OpKind::Invoke, OpFn::Acquire, "r").with_ttl_ms(10_000));
            let deadline = clock.now_us() + 5_000_000;
            rec.record(Op::new(c, OpKind::Ok, OpFn::Acquire, "r").with_deadline_us(deadline));
            ledger.begin(&sec(c)).await.unwrap();
        }
        let mut seen = Vec::new();
        for c in [1u32, 2] {
            seen.push(ledger.read(&sec(c)).await.unwrap());
        }
        for (c, v) in [1u32, 2].into_iter().zip(seen) {
            assert!(ledger.write(&sec(c), v + 1).await.unwrap().accepted);
        }
        for c in [1u32, 2] {
            ledger.end(&sec(c), false).await.unwrap();
            rec.record(Op::new(c, OpKind::Invoke, OpFn::Release, "r"));
            rec.record(Op::new(c, OpKind::Ok, OpFn::Release, "r"));
        }
        let l2 = ledger.clone();
        tokio::task::spawn_blocking(move || l2.close())
            .await
            .unwrap()
            .unwrap();
    });
    assert_eq!(writer.finish().unwrap(), 8);
    let r = check_dir(dir.path(), &CheckOptions::default()).unwrap();
    assert_eq!(r.verdict, Verdict::Invalid);
    assert_eq!(r.stats.mutex_violations, 1);
    assert_eq!(r.stats.believed_overlaps, 1);
    assert_eq!(r.stats.lost_updates, 1);
    let json = serde_json::to_string(&r).unwrap();
    assert!(
        json.contains("\"verdict\":\"invalid\"") && json.contains("\"kind\":\"mutex-violation\""),
        "{json}"
    );
}

#[test]
fn synthetic_runs_are_valid_and_fully_counted() {
    use lockbench::checker::synthetic::{write_synthetic_run, SyntheticSpec};
    let dir = tempfile::tempdir().unwrap();
    for fenced in [true, false] {
        let spec = SyntheticSpec {
            ops: 4_000,
            clients: 8,
            resources: 3,
            fenced,
            ttl_ms: 1000,
        };
        let run = write_synthetic_run(dir.path(), &spec).unwrap();
        assert_eq!((run.history_ops, run.ledger_events), (4_000, 4_000));
        let r = check(
            &run.history_path,
            Some(&run.ledger_path),
            &CheckOptions::default(),
        )
        .unwrap();
        assert_eq!(r.verdict, Verdict::Valid, "{:?}", r.anomalies);
        assert_eq!(r.liveness, Liveness::Live);
        assert_eq!(
            (
                r.stats.history_events,
                r.stats.ledger_events,
                r.stats.acquire_ok
            ),
            (4_000, 4_000, 1_000)
        );
    }
}

/// A claimed job (`job:17`) rescued while its first worker stalls: client 1 claims it (token 1,
/// lease to 400 µs), stalls; client 2 re-claims it at 600 (token 2), does it and completes;
/// client 1 then completes too. Fenced ledger: client 1's row write is rejected.
fn rescued_job(stale_completion: OpKind) -> (H, L) {
    let mut h = H::default();
    let mut l = L::new(FenceMode::Fenced);
    h.acquire(1, "job:17", 0, 100, Some(1), Some(400));
    l.step(200, 1, 1, Some(1), Step::Begin, None, true).step(
        201,
        1,
        1,
        Some(1),
        Step::Read,
        Some(0),
        true,
    );
    h.acquire(2, "job:17", 500, 600, Some(2), Some(900));
    l.section(700, 2, 2, Some(2), 0);
    h.release(2, "job:17", 750, 760);
    l.step(1000, 1, 1, Some(1), Step::Write, Some(1), false)
        .step(1001, 1, 1, Some(1), Step::End, None, true);
    h.invoke(1100, 1, OpFn::Release, "job:17");
    let done = Op::new(1, stale_completion, OpFn::Release, "job:17").at(0, 1200);
    h.op(match stale_completion {
        OpKind::Fail => done.with_error(ErrorKind::Other, "not owner"),
        _ => done,
    });
    (h, l)
}

#[test]
fn a_stale_workers_completion_is_refused_by_the_owner_guard_or_a_zombie_without_it() {
    let (mut h, l) = rescued_job(OpKind::Fail);
    let r = run(&mut h, &l);
    assert_eq!(r.verdict, Verdict::Valid, "{r:#?}");
    assert_eq!(
        (
            r.stats.stale_completions_refused,
            r.stats.zombie_completions
        ),
        (1, 0)
    );
    let refused = r
        .anomalies
        .iter()
        .find(|a| a.kind == AnomalyKind::StaleCompletionRefused)
        .unwrap();
    assert_eq!(
        (refused.clients.clone(), refused.time_us),
        (vec![1, 2], 1200)
    );
    assert!(
        refused
            .detail
            .contains("client 2 claimed it again at 600 µs"),
        "{}",
        refused.detail
    );

    let (mut h, l) = rescued_job(OpKind::Ok);
    let r = run(&mut h, &l);
    assert_eq!(r.verdict, Verdict::Invalid, "{r:#?}");
    assert_eq!(
        (
            r.stats.stale_completions_refused,
            r.stats.zombie_completions
        ),
        (0, 1)
    );
    assert!(kinds(&r).contains(&AnomalyKind::ZombieCompletion));
    // The same completions on a lock's resource are releases, not completions.
    let (mut h, l) = rescued_job(OpKind::Ok);
    for e in &mut h.events {
        if let HistoryEvent::Op(o) = e {
            o.resource = "r0".into();
        }
    }
    let l = L {
        events: l
            .events
            .iter()
            .map(|e| LedgerEvent {
                resource: "r0".into(),
                ..e.clone()
            })
            .collect(),
        ..l
    };
    let r = run(&mut h, &l);
    assert_eq!(r.stats.zombie_completions, 0);
    assert!(!kinds(&r).contains(&AnomalyKind::ZombieCompletion));
}

#[test]
fn a_claim_queue_is_served_by_any_claim_and_stuck_only_when_no_job_can_be_claimed() {
    // Workers that could not pick a job (the table did not answer) record a failed acquire of
    // the queue; the claims after it are the queue serving them again.
    let queue_down = |h: &mut H, from: u64, to: u64| {
        for t in (from..to).step_by(100_000) {
            h.acquire_fail(1, "jobs", t, t + 50, OpKind::Fail, ErrorKind::Connection);
        }
    };
    // Twenty claims, one every 0.5 s from 0.6 s (the run's building takes the history's
    // events, so the second run adds them again).
    let claims = |h: &mut H| {
        for i in 0..20u64 {
            let (t, job) = (600_000 + i * 500_000, format!("job:{}", i + 1));
            h.acquire(2, &job, t, t + 100, Some(1), Some(t + 400_000));
            h.release(2, &job, t + 1_000, t + 1_100);
        }
    };
    let mut h = H::default();
    let mut l = L::new(FenceMode::Fenced);
    queue_down(&mut h, 1_000, 500_000);
    claims(&mut h);
    for i in 0..20u64 {
        // The ledger's rows are one serial resource here; the queue is what is judged.
        l.section(600_200 + i * 500_000, i, 2, Some(i + 1), i as i64);
    }
    let r = run(&mut h, &l);
    assert_eq!(r.verdict, Verdict::Valid, "{:?}", kinds(&r));
    assert_eq!(r.stats.stuck_resources, 0, "{:?}", kinds(&r));

    // The same, and then the queue never answers again: stuck.
    queue_down(&mut h, 11_000_000, 20_000_000);
    claims(&mut h);
    let r = run(&mut h, &l);
    let stuck: Vec<&str> = r
        .anomalies
        .iter()
        .filter(|a| a.kind == AnomalyKind::StuckResource)
        .map(|a| a.resource.as_str())
        .collect();
    assert_eq!(stuck, ["jobs"], "{:?}", kinds(&r));
}
