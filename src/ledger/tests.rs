//! Unit tests of the ledger: fencing, idempotency, queued sections, batch failures.

use super::*;
use crate::variant_names::assert_names_match_serde;

#[test]
fn step_and_mode_names_match_serde() {
    assert_names_match_serde::<FenceMode>();
    assert_names_match_serde::<Step>();
    assert_names_match_serde::<RejectReason>();
    assert_eq!(
        "strict".parse::<FenceMode>().unwrap_err(),
        "unknown fence mode \"strict\" (expected fenced or unfenced)"
    );
    assert_eq!(
        "commit".parse::<Step>().unwrap_err(),
        "unknown step \"commit\""
    );
}

fn sec(id: u64, client: u32, token: Option<u64>) -> SectionRef {
    SectionRef {
        section_id: id,
        client,
        resource: "r".into(),
        fencing_token: token,
        idempotency_key: None,
    }
}

#[test]
fn fenced_rejects_lower_tokens_and_lets_holder_write_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut l = LedgerStore::create(dir.path().join("l.sqlite"), FenceMode::Fenced).unwrap();
    let a = sec(1, 1, Some(5));
    let b = sec(2, 2, Some(6));
    assert!(l.begin(&a, 1).unwrap().accepted);
    assert_eq!(l.read(&a, 2).unwrap(), 0);
    assert!(l.begin(&b, 3).unwrap().accepted);
    assert_eq!(l.read(&b, 4).unwrap(), 0);
    assert!(l.write(&b, 1, 5).unwrap().accepted);
    assert!(l.write(&b, 2, 6).unwrap().accepted, "same token passes");
    let stale = l.write(&a, 1, 7).unwrap();
    assert!(!stale.accepted);
    assert!(!l.begin(&sec(3, 3, Some(4)), 8).unwrap().accepted);
    assert!(matches!(
        l.write(&sec(4, 1, None), 1, 9),
        Err(LedgerError::MissingToken { section_id: 4 })
    ));
    drop(l);
    let f = LedgerFile::open(dir.path().join("l.sqlite")).unwrap();
    assert_eq!(f.mode(), FenceMode::Fenced);
    assert_eq!(f.counters().unwrap(), vec![("r".to_string(), 2)]);
    let mut evs = Vec::new();
    f.for_each_event(|e| evs.push(e)).unwrap();
    assert_eq!(evs.len(), 8);
    assert_eq!(evs[6].reason, Some(RejectReason::Stale));
    assert_eq!(
        (evs[6].step, evs[6].accepted, evs[6].client),
        (Step::Write, false, 1)
    );
    assert_eq!(
        evs.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=8).collect::<Vec<_>>()
    );
}

#[test]
fn unfenced_accepts_all_and_idempotency_key_dedupes() {
    let dir = tempfile::tempdir().unwrap();
    let mut l = LedgerStore::create(dir.path().join("l.sqlite"), FenceMode::Unfenced).unwrap();
    let mut a = sec(1, 1, Some(9));
    a.idempotency_key = Some("k1".into());
    assert!(l.write(&a, 1, 1).unwrap().accepted);
    let dup = l.write(&a, 2, 2).unwrap();
    assert!(!dup.accepted);
    assert!(l.write(&sec(2, 2, Some(1)), 5, 3).unwrap().accepted);
    drop(l);
    let f = LedgerFile::open(dir.path().join("l.sqlite")).unwrap();
    assert_eq!(f.counters().unwrap(), vec![("r".to_string(), 5)]);
    let mut reasons = Vec::new();
    f.for_each_event(|e| reasons.push(e.reason)).unwrap();
    assert_eq!(reasons, vec![None, Some(RejectReason::Duplicate), None]);
    // A used file cannot be reused for another run.
    assert!(matches!(
        LedgerStore::create(dir.path().join("l.sqlite"), FenceMode::Unfenced),
        Err(LedgerError::NotEmpty { .. })
    ));
}

#[tokio::test]
async fn queued_sections_write_what_they_read_plus_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    let ledger = Ledger::open(&path, FenceMode::Unfenced, RunClock::start()).unwrap();
    let s = |id: u64, client: u32, resource: &str| SectionRef {
        section_id: id,
        client,
        resource: resource.into(),
        fencing_token: None,
        idempotency_key: None,
    };
    // One after the other on r: 1, 2, 3.
    for id in 0..3 {
        ledger.enter(&s(id, 0, "r"));
        ledger.leave(&s(id, 0, "r"));
    }
    // Two sections inside q at once: both read 0 and write 1 (one increment lost).
    ledger.enter(&s(10, 1, "q"));
    ledger.enter(&s(11, 2, "q"));
    ledger.leave(&s(10, 1, "q"));
    ledger.leave(&s(11, 2, "q"));
    let l2 = ledger.clone();
    tokio::task::spawn_blocking(move || l2.close())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ledger.failed_steps(), 0);
    let f = LedgerFile::open(&path).unwrap();
    assert_eq!(
        f.counters().unwrap(),
        vec![("q".to_string(), 1), ("r".to_string(), 3)]
    );
    let mut writes = Vec::new();
    f.for_each_event(|e| {
        if e.step == Step::Write {
            writes.push((e.section_id, e.value));
        }
    })
    .unwrap();
    assert_eq!(
        writes,
        vec![
            (0, Some(1)),
            (1, Some(2)),
            (2, Some(3)),
            (10, Some(1)),
            (11, Some(1))
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_step_is_undone_alone_and_the_rest_of_its_batch_commits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    let ledger = Ledger::open(&path, FenceMode::Fenced, RunClock::start()).unwrap();
    let s = |id: u64, token: Option<u64>| SectionRef {
        section_id: id,
        client: id as u32,
        resource: "r".into(),
        fencing_token: token,
        idempotency_key: None,
    };
    // Queued without waiting, so they land in one batch: the fast path fails on the
    // tokenless section, rolls back, and the careful path commits the two good sections.
    ledger.enter(&s(1, Some(1)));
    ledger.leave(&s(1, Some(1)));
    ledger.enter(&s(2, None));
    ledger.leave(&s(2, None));
    ledger.enter(&s(3, Some(3)));
    ledger.leave(&s(3, Some(3)));
    let l2 = ledger.clone();
    tokio::task::spawn_blocking(move || l2.close())
        .await
        .unwrap()
        .unwrap();
    // begin, read and write of section 2 fail (no token; its read then finds no value).
    assert!(ledger.failed_steps() >= 2, "{}", ledger.failed_steps());
    let f = LedgerFile::open(&path).unwrap();
    assert_eq!(f.counters().unwrap(), vec![("r".to_string(), 2)]);
    let mut sections = Vec::new();
    f.for_each_event(|e| {
        if e.step == Step::Write {
            sections.push((e.section_id, e.value, e.accepted));
        }
    })
    .unwrap();
    assert_eq!(sections, vec![(1, Some(1), true), (3, Some(2), true)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_ledger_serializes_concurrent_clients() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    let ledger = Ledger::open(&path, FenceMode::Fenced, RunClock::start()).unwrap();
    // 16 clients, each with increasing tokens from a shared counter, under a tokio mutex
    // (a perfect lock): the counter must end at exactly the number of sections.
    let lock = Arc::new(tokio::sync::Mutex::new(0u64));
    let mut tasks = Vec::new();
    for c in 0..16u32 {
        let ledger = ledger.clone();
        let lock = lock.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..20u64 {
                let mut g = lock.lock().await;
                *g += 1;
                let s = SectionRef {
                    section_id: c as u64 * 1000 + i,
                    client: c,
                    resource: "r".into(),
                    fencing_token: Some(*g),
                    idempotency_key: None,
                };
                assert!(ledger.begin(&s).await.unwrap().accepted);
                let v = ledger.read(&s).await.unwrap();
                assert!(ledger.write(&s, v + 1).await.unwrap().accepted);
                ledger.end(&s, false).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let l2 = ledger.clone();
    tokio::task::spawn_blocking(move || l2.close())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(
        ledger.read(&sec(1, 1, Some(1))).await,
        Err(LedgerError::Closed)
    ));
    let f = LedgerFile::open(&path).unwrap();
    assert_eq!(f.counters().unwrap(), vec![("r".to_string(), 320)]);
    let mut n = 0;
    f.for_each_event(|_| n += 1).unwrap();
    assert_eq!(n, 320 * 4);
}
