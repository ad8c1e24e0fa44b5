//! One history from the workers' histories: every event on the run's common timeline (each
//! worker's run clock started at the coordinator's time zero, converted with its clock
//! estimate), with each worker's real-time windows widened by its clock bound so that clock
//! error never makes a false overlap, and a lost worker's unfinished operations closed as
//! `info`.
//!
//! **Widening.** With a worker's bound `u`, every instant it recorded is known to within `± u`
//! on the common timeline. What the checker reads as *definitely held* (acquire `ok` until the
//! release invoke, the validity deadline or a crash) is narrowed: `ok` and completions move
//! `u` later, invokes, crashes, deadlines and the run-end mark `u` earlier. A possible window
//! (an `info` acquire, from its invoke until its TTL after its completion) is so widened. Each
//! client's events keep their order (an event never moves before the same client's previous
//! one), so a section shorter than `2u` becomes an empty window, never a reversed one. The
//! bound is applied to all pairs of clients, also to two clients of one worker, which share a
//! clock: an overlap shorter than `2u` may be missed, never invented.
//!
//! **A lost worker** (its process died, or it stopped answering): its history ends with the
//! last batch it sent, at its last known instant (the latest event in it; the batches are a
//! prefix of its history, so nothing it recorded before then is missing). Each operation it had
//! invoked and not completed gets an `info` completion at the moment it was found lost (it may
//! have taken effect any time until then). Each of its clients that held a lease with nothing
//! in flight gets a `crash` at the last known instant: it was seen holding until then, and what
//! it did afterwards (a release, perhaps) is unknown, so it is not counted as holding beyond.

use std::collections::HashMap;

use crate::history::{ClientCrash, ErrorKind, HistoryEvent, Op, OpFn, OpKind};

/// One worker's history as received, and what is known about its clock and its end.
#[derive(Debug, Clone)]
pub struct WorkerHistory {
    /// Worker index (ties between equal times are broken by it, then by the event's order).
    pub worker: u32,
    /// Its events in the order it recorded them, times on its run clock (µs).
    pub events: Vec<HistoryEvent>,
    /// Its clock bound, µs ([`super::clock::clock_bound_us`]).
    pub bound_us: u64,
    /// When it was found lost, µs on the common timeline; `None` if it finished.
    pub lost_at_us: Option<u64>,
}

/// Merges `workers` into one history (see the module docs): events sorted by time (ties by
/// worker, then by their order in it), re-indexed `0..`, with one `run-end` mark, the earliest
/// (widened) of the workers'.
pub fn merge_histories(workers: &[WorkerHistory]) -> Vec<HistoryEvent> {
    let mut all: Vec<(u64, u32, usize, HistoryEvent)> = Vec::new();
    let mut run_end: Option<HistoryEvent> = None;
    for w in workers {
        let mut events = w.events.clone();
        if let Some(at) = w.lost_at_us {
            close_lost(&mut events, at);
        }
        let mut last: HashMap<u32, u64> = HashMap::new();
        for ev in &mut events {
            widen(ev, w.bound_us);
            if let Some(client) = client_of(ev) {
                let floor = last.entry(client).or_insert(0);
                let t = ev.time_us().max(*floor);
                set_time(ev, t);
                *floor = t;
            }
        }
        mark_emptied_windows(&mut events);
        for (i, ev) in events.into_iter().enumerate() {
            if let HistoryEvent::RunEnd(_) = ev {
                if run_end.as_ref().is_none_or(|r| ev.time_us() < r.time_us()) {
                    run_end = Some(ev);
                }
                continue;
            }
            all.push((ev.time_us(), w.worker, i, ev));
        }
    }
    if let Some(end) = run_end {
        all.push((end.time_us(), u32::MAX, usize::MAX, end));
    }
    all.sort_by_key(|(t, w, i, _)| (*t, *w, *i));
    all.into_iter()
        .enumerate()
        .map(|(index, (_, _, _, mut ev))| {
            set_index(&mut ev, index as u64);
            ev
        })
        .collect()
}

/// A held window the narrowing emptied (its end, the release invoke or crash, is not after its
/// acquire `ok`) holds nothing: its `ok` gets a validity deadline at the `ok` itself, which the
/// checker reads as "the reply came after the lease was already invalid". Without this, the
/// empty window would still open, for an instant, inside another client's window (a worker
/// with a large bound moves its `ok`s later, into the next holder's time).
fn mark_emptied_windows(events: &mut [HistoryEvent]) {
    let mut next_end: HashMap<u32, u64> = HashMap::new();
    for ev in events.iter_mut().rev() {
        match ev {
            HistoryEvent::Op(op) if op.f == OpFn::Release && op.kind == OpKind::Invoke => {
                next_end.insert(op.client, op.time_us);
            }
            HistoryEvent::Crash(c) => {
                next_end.insert(c.client, c.time_us);
            }
            HistoryEvent::Op(op) if op.f == OpFn::Acquire && op.kind == OpKind::Ok => {
                if next_end
                    .get(&op.client)
                    .is_some_and(|&end| end <= op.time_us)
                {
                    op.validity_deadline_us = Some(op.time_us);
                }
                next_end.remove(&op.client);
            }
            _ => {}
        }
    }
}

/// Appends `info` completions at `at_us` for the open operations of a lost worker and `crash`
/// events at its last known instant for its clients that held a lease with nothing in flight
/// (see the module docs).
fn close_lost(events: &mut Vec<HistoryEvent>, at_us: u64) {
    // (client, f) → its open invoke; client → holds a lease (acquire ok, no release invoke).
    let mut open: HashMap<(u32, OpFn), Op> = HashMap::new();
    let mut holding: HashMap<u32, bool> = HashMap::new();
    let mut crashed: HashMap<u32, bool> = HashMap::new();
    for ev in events.iter() {
        match ev {
            HistoryEvent::Op(op) => match op.kind {
                OpKind::Invoke => {
                    if op.f == OpFn::Release {
                        holding.insert(op.client, false);
                    }
                    open.insert((op.client, op.f), op.clone());
                }
                _ => {
                    open.remove(&(op.client, op.f));
                    if op.f == OpFn::Acquire && op.kind == OpKind::Ok {
                        holding.insert(op.client, true);
                    }
                }
            },
            HistoryEvent::Crash(c) => {
                crashed.insert(c.client, true);
                holding.insert(c.client, false);
                open.retain(|(client, _), _| *client != c.client);
            }
            HistoryEvent::Fault(_) | HistoryEvent::RunEnd(_) => {}
        }
    }
    let last_known = events.iter().map(HistoryEvent::time_us).max().unwrap_or(0);
    let at_us = at_us.max(last_known);
    let mut pending: Vec<Op> = open.into_values().collect();
    pending.sort_by_key(|op| (op.client, op.index));
    let mut to_crash: Vec<u32> = holding
        .into_iter()
        .filter(|&(c, held)| held && !crashed.contains_key(&c))
        .map(|(c, _)| c)
        .filter(|c| pending.iter().all(|op| op.client != *c))
        .collect();
    to_crash.sort_unstable();
    for client in to_crash {
        events.push(HistoryEvent::Crash(ClientCrash {
            index: 0,
            time_us: last_known,
            client,
        }));
    }
    for invoke in pending {
        let mut done = invoke.clone();
        done.kind = OpKind::Info;
        done.time_us = at_us;
        done.validity_deadline_us = None;
        events.push(HistoryEvent::Op(done.with_error(
            ErrorKind::Connection,
            "the worker running this client was lost before the operation completed",
        )));
    }
}

fn client_of(ev: &HistoryEvent) -> Option<u32> {
    match ev {
        HistoryEvent::Op(op) => Some(op.client),
        HistoryEvent::Crash(c) => Some(c.client),
        HistoryEvent::Fault(_) | HistoryEvent::RunEnd(_) => None,
    }
}

/// Moves an event by the clock bound `u` in the direction that narrows what is definitely
/// held (see the module docs).
fn widen(ev: &mut HistoryEvent, u: u64) {
    match ev {
        HistoryEvent::Op(op) => {
            op.time_us = match op.kind {
                OpKind::Invoke => op.time_us.saturating_sub(u),
                OpKind::Ok | OpKind::Fail | OpKind::Info => op.time_us + u,
            };
            if let Some(d) = &mut op.validity_deadline_us {
                *d = d.saturating_sub(u);
            }
        }
        HistoryEvent::Crash(c) => c.time_us = c.time_us.saturating_sub(u),
        HistoryEvent::RunEnd(e) => e.time_us = e.time_us.saturating_sub(u),
        HistoryEvent::Fault(f) => {
            f.start_us = f.start_us.saturating_sub(u);
            if let Some(end) = &mut f.end_us {
                *end += u;
            }
        }
    }
}

fn set_time(ev: &mut HistoryEvent, t: u64) {
    match ev {
        HistoryEvent::Op(op) => op.time_us = t,
        HistoryEvent::Crash(c) => c.time_us = t,
        HistoryEvent::RunEnd(e) => e.time_us = t,
        HistoryEvent::Fault(f) => f.start_us = t,
    }
}

fn set_index(ev: &mut HistoryEvent, index: u64) {
    match ev {
        HistoryEvent::Op(op) => op.index = index,
        HistoryEvent::Crash(c) => c.index = index,
        HistoryEvent::RunEnd(e) => e.index = index,
        HistoryEvent::Fault(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::RunEnd;

    fn op(client: u32, kind: OpKind, f: OpFn, t: u64) -> HistoryEvent {
        HistoryEvent::Op(Op::new(client, kind, f, "r0").at(0, t))
    }

    fn times(events: &[HistoryEvent]) -> Vec<(u64, Option<u32>)> {
        events.iter().map(|e| (e.time_us(), client_of(e))).collect()
    }

    #[test]
    fn events_of_workers_interleave_by_time_and_are_reindexed() {
        let a = WorkerHistory {
            worker: 0,
            events: vec![
                op(0, OpKind::Invoke, OpFn::Acquire, 10),
                op(0, OpKind::Ok, OpFn::Acquire, 30),
            ],
            bound_us: 0,
            lost_at_us: None,
        };
        let b = WorkerHistory {
            worker: 1,
            events: vec![
                op(5, OpKind::Invoke, OpFn::Acquire, 20),
                op(5, OpKind::Ok, OpFn::Acquire, 30),
            ],
            bound_us: 0,
            lost_at_us: None,
        };
        let merged = merge_histories(&[a, b]);
        assert_eq!(
            times(&merged),
            vec![(10, Some(0)), (20, Some(5)), (30, Some(0)), (30, Some(5))]
        );
        let indexes: Vec<u64> = merged
            .iter()
            .map(|e| match e {
                HistoryEvent::Op(o) => o.index,
                _ => u64::MAX,
            })
            .collect();
        assert_eq!(indexes, vec![0, 1, 2, 3]);
    }

    /// Worker 0's client holds 100..200 (release invoke at 200), worker 1's acquires ok at 195:
    /// on exact clocks that is an overlap of 5 µs. With a bound of 10 µs on each worker it may be
    /// clock error, and the narrowed windows no longer overlap (ok 205 > release 190).
    #[test]
    fn the_bound_narrows_held_windows_so_clock_error_makes_no_overlap() {
        let w0 = WorkerHistory {
            worker: 0,
            events: vec![
                op(0, OpKind::Invoke, OpFn::Acquire, 90),
                op(0, OpKind::Ok, OpFn::Acquire, 100),
                op(0, OpKind::Invoke, OpFn::Release, 200),
            ],
            bound_us: 10,
            lost_at_us: None,
        };
        let w1 = WorkerHistory {
            worker: 1,
            events: vec![
                op(7, OpKind::Invoke, OpFn::Acquire, 150),
                op(7, OpKind::Ok, OpFn::Acquire, 195),
            ],
            bound_us: 10,
            lost_at_us: None,
        };
        let merged = merge_histories(&[w0, w1]);
        assert_eq!(
            times(&merged),
            vec![
                (80, Some(0)),
                (110, Some(0)),
                (140, Some(7)),
                (190, Some(0)),
                (205, Some(7))
            ]
        );
    }

    #[test]
    fn a_short_section_becomes_empty_never_reversed_and_deadlines_move_earlier() {
        let ok = |client, deadline| {
            let mut o = Op::new(client, OpKind::Ok, OpFn::Acquire, "r0").at(0, 100);
            o.validity_deadline_us = Some(deadline);
            HistoryEvent::Op(o)
        };
        let w = WorkerHistory {
            worker: 0,
            events: vec![
                ok(3, 1_000),
                ok(5, 1_000),
                op(3, OpKind::Invoke, OpFn::Release, 104),
                HistoryEvent::RunEnd(RunEnd {
                    index: 0,
                    time_us: 500,
                }),
                op(5, OpKind::Invoke, OpFn::Release, 600),
            ],
            bound_us: 20,
            lost_at_us: None,
        };
        let merged = merge_histories(&[w]);
        let deadline = |e: &HistoryEvent| match e {
            HistoryEvent::Op(o) => o.validity_deadline_us,
            other => panic!("{other:?}"),
        };
        // Client 3: ok 100 → 120; release invoke 104 → 84, kept at 120 (not before the ok):
        // an empty window, so its ok holds nothing (deadline at the ok).
        assert_eq!(
            (merged[0].time_us(), deadline(&merged[0])),
            (120, Some(120))
        );
        // Client 5: ok 100 → 120, held until its release invoke 600 → 580, deadline 1000 → 980.
        assert_eq!(
            (merged[1].time_us(), deadline(&merged[1])),
            (120, Some(980))
        );
        assert_eq!(merged[2].time_us(), 120);
        assert!(matches!(
            merged[3],
            HistoryEvent::RunEnd(RunEnd { time_us: 480, .. })
        ));
        assert_eq!(merged[4].time_us(), 580);
    }

    /// Worker 1 (bound 30 µs) holds 100..101; worker 0's client (bound 1 µs) acquires at 110
    /// and holds until 200. Narrowed, worker 1's window is empty (ok 130, release invoke
    /// clamped to 130): it must not open inside worker 0's [111, 199].
    #[test]
    fn an_emptied_window_opens_nowhere_and_the_checker_finds_no_overlap() {
        let w0 = WorkerHistory {
            worker: 0,
            events: vec![
                op(0, OpKind::Invoke, OpFn::Acquire, 102),
                op(0, OpKind::Ok, OpFn::Acquire, 110),
                op(0, OpKind::Invoke, OpFn::Release, 200),
                op(0, OpKind::Ok, OpFn::Release, 202),
            ],
            bound_us: 1,
            lost_at_us: None,
        };
        let w1 = WorkerHistory {
            worker: 1,
            events: vec![
                op(4, OpKind::Invoke, OpFn::Acquire, 90),
                op(4, OpKind::Ok, OpFn::Acquire, 100),
                op(4, OpKind::Invoke, OpFn::Release, 101),
                op(4, OpKind::Ok, OpFn::Release, 103),
            ],
            bound_us: 30,
            lost_at_us: None,
        };
        let merged = merge_histories(&[w0.clone(), w1.clone()]);
        let ok4 = merged
            .iter()
            .find_map(|e| match e {
                HistoryEvent::Op(o)
                    if o.client == 4 && o.kind == OpKind::Ok && o.f == OpFn::Acquire =>
                {
                    Some(o.clone())
                }
                _ => None,
            })
            .unwrap();
        assert_eq!((ok4.time_us, ok4.validity_deadline_us), (130, Some(130)));
        let report = crate::checker::check_in_memory(merged, None, &Default::default());
        assert!(report.anomalies.is_empty(), "{:?}", report.anomalies);
        // Without the bound the same windows (100..101 and 110..200) do not overlap either,
        // and with a true overlap (worker 1 holding 100..150) the checker still finds one when
        // the bounds are small.
        let mut overlapping = w1;
        overlapping.bound_us = 2;
        if let HistoryEvent::Op(o) = &mut overlapping.events[2] {
            o.time_us = 150;
        }
        if let HistoryEvent::Op(o) = &mut overlapping.events[3] {
            o.time_us = 152;
        }
        let report = crate::checker::check_in_memory(
            merge_histories(&[w0, overlapping]),
            None,
            &Default::default(),
        );
        assert!(
            !report.anomalies.is_empty(),
            "a 38 µs overlap beyond ±3 µs is found"
        );
    }

    #[test]
    fn only_the_earliest_run_end_is_kept() {
        let end = |t| {
            HistoryEvent::RunEnd(RunEnd {
                index: 0,
                time_us: t,
            })
        };
        let w = |worker, t| WorkerHistory {
            worker,
            events: vec![end(t)],
            bound_us: 0,
            lost_at_us: None,
        };
        let merged = merge_histories(&[w(0, 900), w(1, 700), w(2, 800)]);
        assert_eq!(times(&merged), vec![(700, None)]);
    }

    #[test]
    fn a_lost_worker_has_its_open_operations_info_and_its_holders_crashed() {
        let w = WorkerHistory {
            worker: 1,
            events: vec![
                // client 10 holds r0; client 11 is acquiring; client 12 finished a cycle.
                op(10, OpKind::Invoke, OpFn::Acquire, 10),
                op(10, OpKind::Ok, OpFn::Acquire, 20),
                op(11, OpKind::Invoke, OpFn::Acquire, 25),
                op(12, OpKind::Invoke, OpFn::Acquire, 5),
                op(12, OpKind::Ok, OpFn::Acquire, 8),
                op(12, OpKind::Invoke, OpFn::Release, 9),
                op(12, OpKind::Ok, OpFn::Release, 12),
            ],
            bound_us: 0,
            lost_at_us: Some(1_000),
        };
        let merged = merge_histories(&[w]);
        let closing: Vec<String> = merged
            .iter()
            .filter_map(|e| match e {
                HistoryEvent::Op(o) if o.kind == OpKind::Info => {
                    Some(format!("{} info {:?} at {}", o.client, o.f, o.time_us))
                }
                HistoryEvent::Crash(c) => Some(format!("{} crash at {}", c.client, c.time_us)),
                _ => None,
            })
            .collect();
        // Client 10 was seen holding until the last known instant (25); client 11's acquire
        // may have taken effect any time until the loss (1,000); client 12 had finished.
        assert_eq!(closing, vec!["10 crash at 25", "11 info Acquire at 1000"]);
        assert_eq!(merged.len(), 9);
    }
}
