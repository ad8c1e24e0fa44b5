//! Unit tests of the history: writing, reading back, flushing, truncation.

use std::time::Duration;

use super::*;
use crate::variant_names::assert_names_match_serde;

#[test]
fn op_names_match_serde() {
    assert_names_match_serde::<OpKind>();
    assert_names_match_serde::<OpFn>();
}

#[test]
fn writer_streams_and_reader_reads_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.jsonl");
    let writer = HistoryWriter::create(&path, RunClock::start()).unwrap();
    let rec = writer.recorder();
    let threads: Vec<_> = (0..4u32)
        .map(|c| {
            let rec = rec.clone();
            std::thread::spawn(move || {
                for _ in 0..1000 {
                    rec.record(Op::new(c, OpKind::Invoke, OpFn::Acquire, "r"));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    rec.record_fault(FaultWindow {
        id: 1,
        kind: "pause".into(),
        targets: vec!["n1".into()],
        start_us: 5,
        end_us: None,
        detail: "duration = 1s; SIGSTOP".into(),
    });
    rec.record_crash(2);
    assert_eq!(writer.finish().unwrap(), 4002);
    let events: Vec<_> = read_history(&path).unwrap().map(|e| e.unwrap()).collect();
    assert_eq!(events.len(), 4002);
    let mut last = (None::<u64>, 0u64);
    for e in &events {
        if let HistoryEvent::Op(op) = e {
            assert_eq!(op.index, last.0.map_or(0, |i| i + 1));
            assert!(op.time_us >= last.1);
            last = (Some(op.index), op.time_us);
        }
    }
    assert!(matches!(events[4000], HistoryEvent::Fault(ref f) if f.id == 1));
    assert!(
        matches!(events[4000], HistoryEvent::Fault(ref f) if f.detail == "duration = 1s; SIGSTOP")
    );
    assert!(matches!(events[4001], HistoryEvent::Crash(c) if c.client == 2 && c.index == 4000));
    // After finish, leftover handles drop events and count them.
    rec.record(Op::new(0, OpKind::Invoke, OpFn::Acquire, "r"));
    assert_eq!(rec.dropped(), 1);
}

#[test]
fn a_fault_line_without_detail_still_reads() {
    let line =
        r#"{"type":"fault","id":3,"kind":"kill","targets":["n1"],"start_us":10,"end_us":20}"#;
    let e: HistoryEvent = serde_json::from_str(line).unwrap();
    let HistoryEvent::Fault(w) = e else {
        panic!("{e:?}")
    };
    assert_eq!((w.id, w.end_us, w.detail.as_str()), (3, Some(20), ""));
}

#[test]
fn the_run_end_mark_is_stamped_written_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.jsonl");
    let writer = HistoryWriter::create(&path, RunClock::start()).unwrap();
    let rec = writer.recorder();
    rec.record(Op::new(1, OpKind::Invoke, OpFn::Acquire, "r"));
    let mark = rec.record_run_end();
    writer.finish().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let line = text.lines().nth(1).unwrap();
    assert_eq!(
        line,
        format!(
            r#"{{"type":"run-end","index":1,"time_us":{}}}"#,
            mark.time_us
        )
    );
    let events: Vec<_> = read_history(&path).unwrap().map(Result::unwrap).collect();
    assert_eq!(
        events[1],
        HistoryEvent::RunEnd(RunEnd {
            index: 1,
            time_us: mark.time_us
        })
    );
    assert_eq!(events[1].time_us(), mark.time_us);
}

#[test]
fn writer_flushes_while_running() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.jsonl");
    let writer = HistoryWriter::create(&path, RunClock::start()).unwrap();
    writer
        .recorder()
        .record(Op::new(1, OpKind::Invoke, OpFn::Acquire, "r"));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let n = read_history(&path).unwrap().count();
        if n == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "history never flushed");
        std::thread::sleep(Duration::from_millis(10));
    }
    writer.finish().unwrap();
}

#[test]
fn reader_reports_truncated_last_line_and_bad_lines_with_numbers() {
    let good = serde_json::to_string(&HistoryEvent::Op(
        Op::new(1, OpKind::Ok, OpFn::Acquire, "r").with_token(3),
    ))
    .unwrap();
    let text = format!("{good}\n\n{{\"type\":\"op\"}}\n{good}\n{}", &good[..10]);
    let items: Vec<_> = HistoryReader::new("h", text.as_bytes()).collect();
    assert_eq!(items.len(), 4);
    assert!(items[0].is_ok());
    assert!(matches!(items[1], Err(HistoryError::Parse { line: 3, .. })));
    assert!(items[2].is_ok());
    assert!(matches!(
        items[3],
        Err(HistoryError::Truncated { line: 5, .. })
    ));
}

#[test]
fn disabled_recorder_stamps_without_writing() {
    let rec = HistoryRecorder::disabled(RunClock::start());
    let a = rec.record(Op::new(1, OpKind::Invoke, OpFn::Acquire, "r"));
    let b = rec.record_crash(1);
    assert_eq!((a.index, b.index), (0, 1));
    assert!(!rec.is_enabled());
    assert_eq!(rec.dropped(), 0);
}
