//! The client timeline's data: one lane per (resource, client), read from a strategy's
//! `history.jsonl` (Porcupine / Jepsen-timeline style).
//!
//! * every acquire attempt is a mark at its completion, `ok` / `fail` / `info`;
//! * every hold is a bar from acquire `ok` to release invoke (or crash, or the end of the
//!   history), with its fencing token and its lease's validity end (moved by extends);
//! * holds that belong to an incident carry the incident's id.
//!
//! Long histories are bounded: past [`FULL_LIMIT`] ops only the items within
//! [`WINDOW_MARGIN_S`] of an incident or a fault window are kept, and never more than
//! [`MAX_ITEMS`] items or [`MAX_LANES`] lanes; [`Lanes::note`] says what was left out.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::checker::Incident;
use crate::history::{read_history, HistoryError, HistoryEvent, OpFn, OpKind};

use super::input::FaultMark;

/// Histories with more ops than this show only the windows around incidents and faults.
pub const FULL_LIMIT: u64 = 5_000;
/// Seconds kept before and after each incident and fault window when bounded.
pub const WINDOW_MARGIN_S: f64 = 1.0;
/// Most holds + attempts drawn.
pub const MAX_ITEMS: usize = 12_000;
/// Most lanes drawn (lanes with incidents or paused clients first).
pub const MAX_LANES: usize = 48;

/// How an acquire attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Acquired.
    Ok,
    /// Certainly not acquired (busy, error).
    Fail,
    /// Unknown outcome (timeout).
    Info,
}

impl Outcome {
    /// `ok`, `fail` or `info`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Fail => "fail",
            Outcome::Info => "info",
        }
    }
}

/// One acquire attempt (seconds since the strategy's start).
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// Index into [`Lanes::lanes`].
    pub lane: usize,
    /// Invoke, s.
    pub invoke_s: f64,
    /// Completion, s.
    pub done_s: f64,
    /// How it ended.
    pub outcome: Outcome,
    /// Error message of a `fail` / `info`.
    pub error: Option<String>,
    /// Fencing token of an `ok`.
    pub token: Option<u64>,
}

/// How a hold ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldEnd {
    /// The client invoked its release.
    Released,
    /// The client crashed while holding.
    Crashed,
    /// The history ended first.
    Open,
}

/// One hold: acquire `ok` → release invoke / crash / end (seconds since the strategy's start).
#[derive(Debug, Clone, PartialEq)]
pub struct Hold {
    /// Index into [`Lanes::lanes`].
    pub lane: usize,
    /// Acquire invoke, s.
    pub invoke_s: f64,
    /// Acquire `ok`, s.
    pub start_s: f64,
    /// Release invoke / crash / end of history, s.
    pub end_s: f64,
    /// How it ended.
    pub ended: HoldEnd,
    /// Validity end of the lease (last acquire/extend deadline), s; `None` = no expiry.
    pub valid_until_s: Option<f64>,
    /// Fencing token.
    pub token: Option<u64>,
    /// Renewals (extend `ok`) during the hold.
    pub extends: u32,
    /// Outcome of the release (`ok`, `fail`, `info`), when it completed.
    pub release: Option<Outcome>,
    /// Release completion, s.
    pub release_done_s: Option<f64>,
    /// The incident this hold is part of.
    pub incident: Option<u32>,
}

/// One lane: a client on a resource.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Lane {
    /// Resource name.
    pub resource: String,
    /// Client id.
    pub client: u32,
}

/// A strategy's client timeline.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Lanes {
    /// Lanes, grouped by resource, clients ascending.
    pub lanes: Vec<Lane>,
    /// Holds.
    pub holds: Vec<Hold>,
    /// Acquire attempts.
    pub attempts: Vec<Attempt>,
    /// Last event time, s.
    pub end_s: f64,
    /// Ops in the history.
    pub ops: u64,
    /// When bounded: the time windows shown, s.
    pub windows: Option<Vec<(f64, f64)>>,
    /// What was left out, for a line under the plot (empty = everything is drawn).
    pub note: String,
}

struct OpenAcquire {
    invoke_s: f64,
}

/// Reads `history` into lanes; `incidents` mark holds red, `faults` (and incidents) give the
/// windows kept when the history is long.
///
/// # Errors
/// The history file's [`HistoryError`] (missing, unreadable, corrupt line); an incomplete last
/// line is not an error (the events before it are drawn).
pub fn load(
    history: &Path,
    incidents: &[Incident],
    faults: &[&FaultMark],
) -> Result<Lanes, HistoryError> {
    let windows = windows_of(incidents, faults);
    let mut b = Builder::default();
    for item in read_history(history)? {
        let ev = match item {
            Ok(ev) => ev,
            Err(HistoryError::Truncated { .. }) => break,
            Err(e) => return Err(e),
        };
        b.feed(ev, &windows);
    }
    Ok(b.finish(incidents, windows))
}

fn windows_of(incidents: &[Incident], faults: &[&FaultMark]) -> Vec<(f64, f64)> {
    let mut w: Vec<(f64, f64)> = incidents
        .iter()
        .map(|i| (i.start_us as f64 / 1e6, i.end_us as f64 / 1e6))
        .chain(faults.iter().map(|f| (f.start_s(), f.end_s())))
        .map(|(a, b)| ((a - WINDOW_MARGIN_S).max(0.0), b + WINDOW_MARGIN_S))
        .collect();
    w.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut merged: Vec<(f64, f64)> = Vec::new();
    for (a, b) in w {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    merged
}

#[derive(Default)]
struct Builder {
    lane_of: HashMap<(String, u32), usize>,
    lanes: Vec<Lane>,
    acquiring: HashMap<usize, OpenAcquire>,
    holding: HashMap<usize, Hold>,
    /// A completed hold waiting for its release's outcome.
    releasing: HashMap<usize, Hold>,
    holds: Vec<Hold>,
    attempts: Vec<Attempt>,
    ops: u64,
    end_s: f64,
    bounded: bool,
    dropped: u64,
}

fn in_windows(windows: &[(f64, f64)], a: f64, b: f64) -> bool {
    windows.iter().any(|&(s, e)| a <= e && b >= s)
}

impl Builder {
    fn lane(&mut self, resource: &str, client: u32) -> usize {
        if let Some(&i) = self.lane_of.get(&(resource.to_string(), client)) {
            return i;
        }
        let i = self.lanes.len();
        self.lanes.push(Lane {
            resource: resource.to_string(),
            client,
        });
        self.lane_of.insert((resource.to_string(), client), i);
        i
    }

    fn items(&self) -> usize {
        self.holds.len() + self.attempts.len()
    }

    fn keep_attempt(&mut self, a: Attempt, windows: &[(f64, f64)]) {
        if self.bounded && !in_windows(windows, a.invoke_s, a.done_s) {
            return;
        }
        if self.items() >= MAX_ITEMS {
            self.dropped += 1;
            return;
        }
        self.attempts.push(a);
        self.check_bound(windows);
    }

    fn keep_hold(&mut self, h: Hold, windows: &[(f64, f64)]) {
        if self.bounded && !in_windows(windows, h.start_s, h.end_s) {
            return;
        }
        if self.items() >= MAX_ITEMS {
            self.dropped += 1;
            return;
        }
        self.holds.push(h);
        self.check_bound(windows);
    }

    /// Past [`FULL_LIMIT`] ops: drop what lies outside the windows, from now on too.
    fn check_bound(&mut self, windows: &[(f64, f64)]) {
        if self.bounded || self.ops <= FULL_LIMIT {
            return;
        }
        self.bounded = true;
        self.holds
            .retain(|h| in_windows(windows, h.start_s, h.end_s));
        self.attempts
            .retain(|a| in_windows(windows, a.invoke_s, a.done_s));
    }

    fn feed(&mut self, ev: HistoryEvent, windows: &[(f64, f64)]) {
        match ev {
            HistoryEvent::Op(op) => {
                self.ops += 1;
                let t = op.time_us as f64 / 1e6;
                self.end_s = self.end_s.max(t);
                let lane = self.lane(&op.resource, op.client);
                match (op.f, op.kind) {
                    (OpFn::Acquire, OpKind::Invoke) => {
                        self.acquiring.insert(lane, OpenAcquire { invoke_s: t });
                    }
                    (OpFn::Acquire, kind) => {
                        let invoke_s = self.acquiring.remove(&lane).map_or(t, |a| a.invoke_s);
                        let outcome = match kind {
                            OpKind::Ok => Outcome::Ok,
                            OpKind::Fail => Outcome::Fail,
                            _ => Outcome::Info,
                        };
                        self.keep_attempt(
                            Attempt {
                                lane,
                                invoke_s,
                                done_s: t,
                                outcome,
                                error: op.error.clone(),
                                token: op.fencing_token,
                            },
                            windows,
                        );
                        if outcome == Outcome::Ok {
                            if let Some(prev) = self.holding.remove(&lane) {
                                // A new lease without a release: the old one ended here.
                                let mut prev = prev;
                                prev.end_s = t;
                                prev.ended = HoldEnd::Open;
                                self.keep_hold(prev, windows);
                            }
                            self.holding.insert(
                                lane,
                                Hold {
                                    lane,
                                    invoke_s,
                                    start_s: t,
                                    end_s: t,
                                    ended: HoldEnd::Open,
                                    valid_until_s: op.validity_deadline_us.map(|d| d as f64 / 1e6),
                                    token: op.fencing_token,
                                    extends: 0,
                                    release: None,
                                    release_done_s: None,
                                    incident: None,
                                },
                            );
                        }
                    }
                    (OpFn::Extend, OpKind::Ok) => {
                        if let Some(h) = self.holding.get_mut(&lane) {
                            h.extends += 1;
                            h.valid_until_s = op.validity_deadline_us.map(|d| d as f64 / 1e6);
                        }
                    }
                    (OpFn::Extend, _) => {}
                    (OpFn::Release, OpKind::Invoke) => {
                        if let Some(mut h) = self.holding.remove(&lane) {
                            h.end_s = t;
                            h.ended = HoldEnd::Released;
                            if let Some(old) = self.releasing.insert(lane, h) {
                                self.keep_hold(old, windows);
                            }
                        }
                    }
                    (OpFn::Release, kind) => {
                        if let Some(mut h) = self.releasing.remove(&lane) {
                            h.release = Some(match kind {
                                OpKind::Ok => Outcome::Ok,
                                OpKind::Fail => Outcome::Fail,
                                _ => Outcome::Info,
                            });
                            h.release_done_s = Some(t);
                            self.keep_hold(h, windows);
                        }
                    }
                }
            }
            HistoryEvent::Crash(c) => {
                let t = c.time_us as f64 / 1e6;
                self.end_s = self.end_s.max(t);
                let lanes: Vec<usize> = self
                    .holding
                    .keys()
                    .copied()
                    .filter(|&l| self.lanes[l].client == c.client)
                    .collect();
                for l in lanes {
                    let mut h = self.holding.remove(&l).expect("present");
                    h.end_s = t;
                    h.ended = HoldEnd::Crashed;
                    self.keep_hold(h, windows);
                }
            }
            HistoryEvent::Fault(f) => {
                let t = f.end_us.unwrap_or(f.start_us) as f64 / 1e6;
                self.end_s = self.end_s.max(t);
            }
            HistoryEvent::RunEnd(e) => {
                self.end_s = self.end_s.max(e.time_us as f64 / 1e6);
            }
        }
    }

    fn finish(mut self, incidents: &[Incident], windows: Vec<(f64, f64)>) -> Lanes {
        let end = self.end_s;
        let mut rest: Vec<Hold> = self
            .releasing
            .drain()
            .chain(self.holding.drain())
            .map(|(_, mut h)| {
                if h.ended == HoldEnd::Open {
                    h.end_s = end;
                }
                h
            })
            .collect();
        rest.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
        for h in rest {
            self.keep_hold(h, &windows);
        }
        // Incidents: a hold is part of one when its client is a holder of it with the same
        // acquire time, or (no holder data) when it overlaps the incident on its resource.
        for h in &mut self.holds {
            let lane = &self.lanes[h.lane];
            let start_us = (h.start_s * 1e6).round() as u64;
            h.incident = incidents
                .iter()
                .filter(|i| i.resource == lane.resource && i.clients.contains(&lane.client))
                .find(|i| {
                    if i.holders.is_empty() {
                        let (s, e) = (i.start_us as f64 / 1e6, i.end_us as f64 / 1e6);
                        h.start_s <= e && h.end_s >= s
                    } else {
                        i.holders.iter().any(|x| {
                            x.client == lane.client
                                && x.acquired_us.is_some_and(|a| a.abs_diff(start_us) <= 1)
                        })
                    }
                })
                .map(|i| i.id);
        }
        let mut notes = Vec::new();
        let windows = if self.bounded {
            notes.push(format!(
                "{} ops in this history (more than {FULL_LIMIT}): only the windows around \
                 incidents and fault windows (±{WINDOW_MARGIN_S} s) are drawn",
                self.ops
            ));
            Some(windows)
        } else {
            None
        };
        if self.dropped > 0 {
            notes.push(format!(
                "{} more holds and attempts left out (at most {MAX_ITEMS} are drawn)",
                self.dropped
            ));
        }
        let (lanes, remap) = self.pick_lanes(incidents);
        if lanes.len() < self.lanes.len() {
            notes.push(format!(
                "{} of {} lanes drawn (those with incidents first)",
                lanes.len(),
                self.lanes.len()
            ));
        }
        let holds = self
            .holds
            .into_iter()
            .filter_map(|mut h| {
                h.lane = remap.get(&h.lane).copied()?;
                Some(h)
            })
            .collect();
        let attempts = self
            .attempts
            .into_iter()
            .filter_map(|mut a| {
                a.lane = remap.get(&a.lane).copied()?;
                Some(a)
            })
            .collect();
        Lanes {
            lanes,
            holds,
            attempts,
            end_s: end,
            ops: self.ops,
            windows,
            note: notes.join("; "),
        }
    }

    /// Sorted lanes (resource, client), at most [`MAX_LANES`], incident lanes first; returns
    /// the old index → new index map.
    fn pick_lanes(&self, incidents: &[Incident]) -> (Vec<Lane>, HashMap<usize, usize>) {
        let in_incident = |l: &Lane| {
            incidents
                .iter()
                .any(|i| i.resource == l.resource && i.clients.contains(&l.client))
        };
        let mut order: Vec<usize> = (0..self.lanes.len()).collect();
        order.sort_by_key(|&i| (!in_incident(&self.lanes[i]), i));
        order.truncate(MAX_LANES);
        let mut chosen: BTreeMap<Lane, usize> = BTreeMap::new();
        for i in order {
            chosen.insert(self.lanes[i].clone(), i);
        }
        let mut remap = HashMap::new();
        let mut lanes = Vec::new();
        for (new, (lane, old)) in chosen.into_iter().enumerate() {
            remap.insert(old, new);
            lanes.push(lane);
        }
        (lanes, remap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{write_events, ClientCrash, HistoryEvent, Op};

    fn write(events: &[HistoryEvent]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        write_events(&mut f, events).unwrap();
        f
    }

    fn op(t: u64, c: u32, kind: OpKind, f: OpFn) -> HistoryEvent {
        HistoryEvent::Op(Op::new(c, kind, f, "r0").at(t, t))
    }

    #[test]
    fn holds_attempts_and_crashes_become_lane_items() {
        let mut ok = Op::new(1, OpKind::Ok, OpFn::Acquire, "r0").at(2, 1_000);
        ok.fencing_token = Some(7);
        ok.validity_deadline_us = Some(300_000);
        let events = vec![
            op(0, 1, OpKind::Invoke, OpFn::Acquire),
            HistoryEvent::Op(ok),
            op(5, 2, OpKind::Invoke, OpFn::Acquire),
            HistoryEvent::Op(
                Op::new(2, OpKind::Fail, OpFn::Acquire, "r0")
                    .at(6, 20_000)
                    .with_error(crate::history::ErrorKind::Busy, "held"),
            ),
            op(400_000, 1, OpKind::Invoke, OpFn::Release),
            op(401_000, 1, OpKind::Ok, OpFn::Release),
            op(500_000, 2, OpKind::Invoke, OpFn::Acquire),
            op(501_000, 2, OpKind::Ok, OpFn::Acquire),
            HistoryEvent::Crash(ClientCrash {
                index: 9,
                time_us: 600_000,
                client: 2,
            }),
        ];
        let f = write(&events);
        let lanes = load(f.path(), &[], &[]).unwrap();
        assert_eq!(lanes.lanes.len(), 2);
        assert_eq!(lanes.attempts.len(), 3);
        assert_eq!(lanes.holds.len(), 2);
        let h1 = lanes.holds.iter().find(|h| h.token == Some(7)).unwrap();
        assert_eq!((h1.start_s, h1.end_s), (0.001, 0.4));
        assert_eq!(h1.valid_until_s, Some(0.3));
        assert_eq!(h1.ended, HoldEnd::Released);
        assert_eq!(h1.release, Some(Outcome::Ok));
        let h2 = lanes.holds.iter().find(|h| h.token.is_none()).unwrap();
        assert_eq!(h2.ended, HoldEnd::Crashed);
        assert_eq!(h2.end_s, 0.6);
        let fail = lanes
            .attempts
            .iter()
            .find(|a| a.outcome == Outcome::Fail)
            .unwrap();
        assert_eq!(fail.error.as_deref(), Some("held"));
        assert!(lanes.note.is_empty());
        assert!(lanes.windows.is_none());
    }

    #[test]
    fn long_histories_keep_only_windows_around_faults() {
        let mut events = Vec::new();
        // 3,000 lock cycles over 30 s = 9,000 ops; one fault from 10 s to 11 s.
        for k in 0..3_000u64 {
            let t = k * 10_000;
            events.push(op(t, 1, OpKind::Invoke, OpFn::Acquire));
            events.push(op(t + 100, 1, OpKind::Ok, OpFn::Acquire));
            events.push(op(t + 5_000, 1, OpKind::Invoke, OpFn::Release));
        }
        let f = write(&events);
        let fault = FaultMark {
            strategy: None,
            window: crate::history::FaultWindow {
                kind: "kill".into(),
                targets: vec!["n1".into()],
                start_us: 10_000_000,
                end_us: Some(11_000_000),
                ..Default::default()
            },
        };
        let lanes = load(f.path(), &[], &[&fault]).unwrap();
        assert_eq!(lanes.ops, 9_000);
        assert_eq!(lanes.windows, Some(vec![(9.0, 12.0)]));
        assert!(lanes.note.contains("9000 ops"), "{}", lanes.note);
        assert!(lanes
            .holds
            .iter()
            .all(|h| h.end_s >= 9.0 && h.start_s <= 12.0));
        // 3 s of 10 ms cycles (edges included).
        assert!(
            (299..=302).contains(&lanes.holds.len()),
            "{}",
            lanes.holds.len()
        );
    }
}
