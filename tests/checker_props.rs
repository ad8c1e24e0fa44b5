//! Property tests: histories serial by construction are valid; the same histories with one
//! injected overlap are invalid and the overlap is named (clients and resource).

use lockbench::checker::{check_in_memory, AnomalyKind, CheckOptions, LedgerInput, Verdict};
use lockbench::history::{ErrorKind, HistoryEvent, Op, OpFn, OpKind};
use lockbench::ledger::{FenceMode, LedgerEvent, Step};
use proptest::prelude::*;

/// One critical section's timing, µs.
#[derive(Debug, Clone)]
struct SectionShape {
    gap: u64,
    acquire_latency: u64,
    hold: u64,
    /// Validity beyond the release invoke (0 = the lease ends exactly at release).
    spare_validity: u64,
    holder: u32,
    contenders: u8,
    extend: bool,
}

fn section_shape() -> impl Strategy<Value = SectionShape> {
    (
        0u64..5_000,
        1u64..2_000,
        100u64..20_000,
        0u64..10_000,
        0u32..3,
        0u8..3,
        any::<bool>(),
    )
        .prop_map(
            |(gap, acquire_latency, hold, spare_validity, holder, contenders, extend)| {
                SectionShape {
                    gap,
                    acquire_latency,
                    hold,
                    spare_validity,
                    holder,
                    contenders,
                    extend,
                }
            },
        )
}

#[derive(Debug, Clone)]
struct Spec {
    fenced: bool,
    resources: Vec<Vec<SectionShape>>,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        any::<bool>(),
        prop::collection::vec(prop::collection::vec(section_shape(), 1..25), 1..4),
    )
        .prop_map(|(fenced, resources)| Spec { fenced, resources })
}

/// Where a generated section sits, for injecting an intruder into it.
#[derive(Debug, Clone, Copy)]
struct Placed {
    client: u32,
    ok: u64,
    window_end: u64,
    begin: u64,
    end: u64,
    token: Option<u64>,
}

struct Built {
    history: Vec<(u64, HistoryEvent)>,
    ledger: Vec<LedgerEvent>,
    placed: Vec<Vec<Placed>>,
}

fn op(t: u64, c: u32, kind: OpKind, f: OpFn, r: &str) -> (u64, HistoryEvent) {
    (
        t,
        HistoryEvent::Op(Op::new(c, kind, f, r).at(0, t).with_ttl_ms(1000)),
    )
}

fn lev(
    t: u64,
    section: u64,
    c: u32,
    r: &str,
    token: Option<u64>,
    step: Step,
    value: Option<i64>,
) -> LedgerEvent {
    LedgerEvent {
        seq: 0,
        time_us: t,
        section_id: section,
        client: c,
        resource: r.into(),
        fencing_token: token,
        step,
        value,
        accepted: true,
        reason: None,
    }
}

/// Builds a serial history: per resource, sections one after another; clients of resource `r`
/// are `10 r + k` (holders k < 3, the contender k = 9), so no client has two ops in flight.
fn build(spec: &Spec) -> Built {
    let mut history = Vec::new();
    let mut ledger = Vec::new();
    let mut placed = Vec::new();
    let mut section_id = 0u64;
    for (ri, shapes) in spec.resources.iter().enumerate() {
        let r = format!("r{ri}");
        let mut t = 1_000u64;
        let mut here = Vec::new();
        for (k, s) in shapes.iter().enumerate() {
            let counter = k as i64;
            let c = 10 * ri as u32 + s.holder;
            let contender = 10 * ri as u32 + 9;
            let token = spec.fenced.then_some(k as u64 + 1);
            let inv = t + s.gap;
            let ok = inv + s.acquire_latency;
            let rel = ok + 100 + s.hold;
            let deadline = rel + s.spare_validity;
            history.push(op(inv, c, OpKind::Invoke, OpFn::Acquire, &r));
            let mut okop = Op::new(c, OpKind::Ok, OpFn::Acquire, &r)
                .at(0, ok)
                .with_ttl_ms(1000);
            okop.fencing_token = token;
            okop.validity_deadline_us = Some(if s.extend { ok + 60 } else { deadline });
            history.push((ok, HistoryEvent::Op(okop)));
            if s.extend {
                // Renewed before the first deadline, to the final one.
                history.push(op(ok + 40, c, OpKind::Invoke, OpFn::Extend, &r));
                let mut e = Op::new(c, OpKind::Ok, OpFn::Extend, &r)
                    .at(0, ok + 50)
                    .with_ttl_ms(1000);
                e.validity_deadline_us = Some(deadline);
                history.push((ok + 50, HistoryEvent::Op(e)));
            }
            // Critical section strictly inside [ok, rel].
            let b = ok + 10 + s.hold / 10;
            let e = rel - 10;
            ledger.push(lev(b, section_id, c, &r, token, Step::Begin, None));
            ledger.push(lev(
                b + 1,
                section_id,
                c,
                &r,
                token,
                Step::Read,
                Some(counter),
            ));
            ledger.push(lev(
                e - 1,
                section_id,
                c,
                &r,
                token,
                Step::Write,
                Some(counter + 1),
            ));
            ledger.push(lev(e, section_id, c, &r, token, Step::End, None));
            section_id += 1;
            // Contenders fail (busy) while the lock is held.
            let span = (rel - ok) / (s.contenders as u64 + 1);
            for j in 0..s.contenders as u64 {
                let ci = ok + 1 + j * span;
                history.push(op(ci, contender, OpKind::Invoke, OpFn::Acquire, &r));
                let f = Op::new(contender, OpKind::Fail, OpFn::Acquire, &r)
                    .at(0, ci + span / 2)
                    .with_error(ErrorKind::Busy, "busy");
                history.push((ci + span / 2, HistoryEvent::Op(f)));
            }
            history.push(op(rel, c, OpKind::Invoke, OpFn::Release, &r));
            history.push(op(rel + 5, c, OpKind::Ok, OpFn::Release, &r));
            here.push(Placed {
                client: c,
                ok,
                window_end: rel.min(deadline),
                begin: b,
                end: e,
                token,
            });
            // The next section may start while this lease is still valid: the release ended it.
            t = rel + 6;
        }
        placed.push(here);
    }
    Built {
        history,
        ledger,
        placed,
    }
}

fn run(b: &Built, fenced: bool) -> lockbench::checker::CheckReport {
    let mut h = b.history.clone();
    h.sort_by_key(|(t, _)| *t);
    let events = h.into_iter().enumerate().map(|(i, (_, mut e))| {
        if let HistoryEvent::Op(o) = &mut e {
            o.index = i as u64;
        }
        e
    });
    let mut l = b.ledger.clone();
    l.sort_by_key(|e| e.time_us);
    for (i, e) in l.iter_mut().enumerate() {
        e.seq = i as i64 + 1;
    }
    let input = LedgerInput {
        mode: if fenced {
            FenceMode::Fenced
        } else {
            FenceMode::Unfenced
        },
        events: l,
        final_counters: None,
    };
    check_in_memory(events, Some(&input), &CheckOptions::default())
}

#[derive(Debug, Clone, Copy)]
enum Inject {
    /// The intruder begins in the ledger while the holder is inside (stale holder after a pause).
    Ledger,
    /// The intruder's validity window overlaps the holder's (the lock granted both).
    Believed,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn serial_histories_are_valid(spec in spec()) {
        let b = build(&spec);
        let r = run(&b, spec.fenced);
        prop_assert_eq!(r.verdict, Verdict::Valid, "{:#?}", r.anomalies);
        prop_assert!(r.anomalies.is_empty(), "{:#?}", r.anomalies);
        prop_assert_eq!(r.stats.unavailable_ms, 0);
        prop_assert_eq!(r.stats.max_concurrent_holders, 1);
        prop_assert!(r.incidents.is_empty(), "{:#?}", r.incidents);
        let sections: usize = spec.resources.iter().map(Vec::len).sum();
        prop_assert_eq!(r.stats.acquire_ok as usize, sections);
    }

    #[test]
    fn injected_overlap_is_invalid_and_named(
        spec in spec(),
        pick in any::<prop::sample::Index>(),
        frac in 1u64..99,
        ledger_side in any::<bool>(),
    ) {
        let mut b = build(&spec);
        let ri = pick.index(b.placed.len());
        let sections = &b.placed[ri];
        let p = sections[pick.index(sections.len())];
        let r = format!("r{ri}");
        let intruder = 10 * ri as u32 + 7;
        let how = if ledger_side { Inject::Ledger } else { Inject::Believed };
        match how {
            Inject::Ledger => {
                // Begins strictly inside the holder's section, ends after it; with the holder's
                // own token in fenced mode (a duplicate token, so fencing cannot reject it).
                let at = p.begin + 1 + (p.end - p.begin - 2) * frac / 100;
                b.ledger.push(lev(at, 9_999_999, intruder, &r, p.token, Step::Begin, None));
                b.ledger.push(lev(p.end, 9_999_999, intruder, &r, p.token, Step::End, None));
                // Same commit time as the holder's end: order the intruder's end after it.
                b.ledger.sort_by_key(|e| (e.time_us, e.section_id == 9_999_999));
            }
            Inject::Believed => {
                let len = p.window_end - p.ok;
                let ok = p.ok + 1 + (len - 3) * frac / 100;
                b.history.push(op(ok - 1, intruder, OpKind::Invoke, OpFn::Acquire, &r));
                let o = Op::new(intruder, OpKind::Ok, OpFn::Acquire, &r).at(0, ok).with_deadline_us(ok + 1_000_000);
                b.history.push((ok, HistoryEvent::Op(o)));
                b.history.push(op(ok + 1, intruder, OpKind::Invoke, OpFn::Release, &r));
                b.history.push(op(ok + 2, intruder, OpKind::Ok, OpFn::Release, &r));
            }
        }
        let rep = run(&b, spec.fenced);
        prop_assert_eq!(rep.verdict, Verdict::Invalid);
        let kind = match how {
            Inject::Ledger => AnomalyKind::MutexViolation,
            Inject::Believed => AnomalyKind::BelievedOverlap,
        };
        let found: Vec<_> = rep.of_kind(kind).collect();
        prop_assert_eq!(found.len(), 1, "{:#?}", rep.anomalies);
        prop_assert_eq!(&found[0].resource, &r);
        prop_assert_eq!(found[0].clients.clone(), {
            let mut v = vec![p.client, intruder];
            v.sort();
            v
        });
        prop_assert_eq!(found[0].holders, Some(2));
        // Nothing else is invented.
        prop_assert!(rep.anomalies.iter().all(|a| a.kind == kind), "{:#?}", rep.anomalies);
        // One incident, naming both clients, with a cause and a witness that proves it.
        prop_assert_eq!(rep.incidents.len(), 1, "{:#?}", rep.incidents);
        let inc = &rep.incidents[0];
        prop_assert!(inc.safety && !inc.cause.is_empty());
        prop_assert_eq!(inc.clients.clone(), found[0].clients.clone());
        prop_assert_eq!(inc.pairs, 1);
        match how {
            Inject::Ledger => {
                prop_assert!(
                    inc.witness.ledger.iter().any(|e| e.section_id == 9_999_999 && e.step == Step::Begin),
                    "{:#?}", inc.witness.ledger
                );
                let mut l = b.ledger.clone();
                l.sort_by_key(|e| e.time_us);
                for (i, e) in l.iter_mut().enumerate() {
                    e.seq = i as i64 + 1;
                }
                for w in &inc.witness.ledger {
                    prop_assert!(l.contains(w), "witness row {:?} is not a ledger row", w);
                }
            }
            Inject::Believed => {
                prop_assert!(
                    inc.witness.ops.iter().any(|o| o.client == intruder && o.kind == OpKind::Ok && o.f == OpFn::Acquire),
                    "{:#?}", inc.witness.ops
                );
                prop_assert!(inc.holders.iter().any(|h| h.client == intruder));
            }
        }
    }
}
