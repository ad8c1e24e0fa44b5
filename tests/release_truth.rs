//! History truth of releases: a release that finds its lease already lost is written as
//! `fail` ("not owner"), on real Redis through the chaos runner, and the checker reads such a
//! history without inventing anomalies.

mod common;

use common::ledger::row;
use lockbench::checker::{check_in_memory, CheckOptions, LedgerInput, Liveness, Verdict};
use lockbench::history::{read_history, ErrorKind, HistoryEvent, Op, OpFn, OpKind};
use lockbench::ledger::{FenceMode, LedgerEvent, Step};
use lockbench::orchestration::scenario::Scenario;
use lockbench::results::RunDir;

/// One `single` client on one resource whose hold outlives its TTL: every release comes after
/// the key expired.
fn scenario(hold: &str, ttl: &str) -> String {
    format!(
        r#"
name = "release-truth"
claim = "a release after the lease was lost is recorded as fail"
topology = "single"
strategies = ["single"]

[workload]
clients = 1
resources = 1
hold = "{hold}"
ttl = "{ttl}"
duration = "1s"
retry_attempts = 1
node_timeout = "100ms"
"#
    )
}

/// Runs `text` through the chaos runner; returns the release completions and the verdict.
async fn releases(text: &str) -> (Vec<Op>, Verdict) {
    let tmp = tempfile::tempdir().unwrap();
    let s = Scenario::parse(text, &tmp.path().join("s.toml")).expect("scenario parses");
    let dir = RunDir::create(&tmp.path().join("results"), "truth").unwrap();
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let outcome = lockbench::orchestration::runner::Runner::local(shutdown)
        .run(&s.to_test(), &dir, |_| {})
        .await
        .expect("scenario runs");
    let verdict = outcome.strategies[0]
        .check
        .as_ref()
        .expect("audited")
        .verdict;
    let done: Vec<Op> = read_history(dir.file("single").join("history.jsonl"))
        .expect("history written")
        .filter_map(|e| match e.expect("history line") {
            HistoryEvent::Op(op) if op.f == OpFn::Release && op.kind != OpKind::Invoke => Some(op),
            _ => None,
        })
        .collect();
    (done, verdict)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_after_the_key_expired_is_recorded_as_fail() {
    // Hold 150 ms on a 60 ms TTL: the key is gone before every release.
    let (done, verdict) = releases(&scenario("150ms", "60ms")).await;
    // A loaded machine may time a release out now and then (`info`); none may be `ok`.
    let (lost, timed_out): (Vec<Op>, Vec<Op>) =
        done.into_iter().partition(|op| op.kind == OpKind::Fail);
    for op in &timed_out {
        assert_eq!(op.kind, OpKind::Info, "{op:?}");
        assert_eq!(op.error_kind, Some(ErrorKind::Timeout), "{op:?}");
    }
    assert!(lost.len() >= 3, "only {} lost-lease releases", lost.len());
    for op in &lost {
        assert_eq!(op.error_kind, Some(ErrorKind::Other), "{op:?}");
        let msg = op.error.as_deref().unwrap_or_default();
        assert!(
            msg.contains("not owner") && msg.contains("lease lost before release"),
            "{msg}"
        );
    }
    // One client, no overlap: losing the lease to expiry is not an anomaly by itself.
    assert_eq!(verdict, Verdict::Valid);

    // Control: a hold well inside the TTL releases a lease that is still held.
    let (held, verdict) = releases(&scenario("5ms", "1s")).await;
    assert!(held.len() >= 3, "only {} releases", held.len());
    assert!(
        held.iter()
            .all(|op| op.kind == OpKind::Ok && op.error.is_none()),
        "{held:?}"
    );
    assert_eq!(verdict, Verdict::Valid);
}

fn at(op: Op, t: u64) -> HistoryEvent {
    HistoryEvent::Op(op.at(0, t))
}

fn ledger_section(section: u64, client: u32, t: u64, v: i64) -> Vec<LedgerEvent> {
    [
        (Step::Begin, None),
        (Step::Read, Some(v)),
        (Step::Write, Some(v + 1)),
        (Step::End, None),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, (step, value))| {
        let seq = (section * 4 + i as u64 + 1) as i64;
        row(seq, t + i as u64, section, client, None, step, value, true)
    })
    .collect()
}

/// Client 1 finishes its section inside its validity but releases late (after its deadline
/// at 1 000 µs); client 2 acquired after that deadline. The late release finds the key gone.
fn late_release_history(release: OpKind) -> Vec<HistoryEvent> {
    let acquire = |c: u32, inv: u64, ok: u64, deadline: u64| {
        let mut o = Op::new(c, OpKind::Ok, OpFn::Acquire, "r").with_ttl_ms(1);
        o.validity_deadline_us = Some(deadline);
        [
            at(
                Op::new(c, OpKind::Invoke, OpFn::Acquire, "r").with_ttl_ms(1),
                inv,
            ),
            at(o, ok),
        ]
    };
    let mut h = Vec::new();
    h.extend(acquire(1, 0, 10, 1_000));
    h.extend(acquire(2, 1_100, 1_110, 2_100));
    let mut done = Op::new(1, release, OpFn::Release, "r");
    if release == OpKind::Fail {
        done = done.with_error(ErrorKind::Other, "not owner: lease lost before release");
    }
    h.push(at(Op::new(1, OpKind::Invoke, OpFn::Release, "r"), 1_500));
    h.push(at(done, 1_510));
    h.push(at(Op::new(2, OpKind::Invoke, OpFn::Release, "r"), 1_800));
    h.push(at(Op::new(2, OpKind::Ok, OpFn::Release, "r"), 1_810));
    h.sort_by_key(|e| match e {
        HistoryEvent::Op(o) => o.time_us,
        _ => 0,
    });
    for (i, e) in h.iter_mut().enumerate() {
        if let HistoryEvent::Op(o) = e {
            o.index = i as u64;
        }
    }
    h
}

#[test]
fn a_failed_release_ends_the_holders_belief_like_an_ok_one() {
    let mut events = ledger_section(0, 1, 100, 0);
    events.extend(ledger_section(1, 2, 1_200, 1));
    let ledger = LedgerInput {
        mode: FenceMode::Unfenced,
        events,
        final_counters: None,
    };
    let opts = CheckOptions::default();
    let with_fail = check_in_memory(late_release_history(OpKind::Fail), Some(&ledger), &opts);
    assert_eq!(with_fail.verdict, Verdict::Valid, "{with_fail:#?}");
    assert!(with_fail.anomalies.is_empty(), "{:?}", with_fail.anomalies);
    assert_eq!(with_fail.liveness, Liveness::Live);
    assert_eq!(with_fail.stats.believed_overlaps, 0);
    assert_eq!(with_fail.stats.max_believed_holders, 1);
    // The same history with the release written as `ok` (the old recording) checks the same.
    let with_ok = check_in_memory(late_release_history(OpKind::Ok), Some(&ledger), &opts);
    assert_eq!(with_ok.verdict, with_fail.verdict);
    assert_eq!(
        with_ok.stats.availability_pct,
        with_fail.stats.availability_pct
    );
    assert_eq!(
        with_ok.stats.max_believed_holders,
        with_fail.stats.max_believed_holders
    );
}
