//! Episodes judged on hand-built histories (TTL 1 s, times in ms below unless said).

use std::time::Duration;

use super::*;
use crate::history::{ErrorKind, OpFn, OpKind};
use crate::matrix::stats::IntervalMethod;

const TTL: Duration = Duration::from_secs(1);

fn at_ms(ms: u64) -> u64 {
    ms * 1000
}

/// A history under construction; ops are sorted by time when taken.
#[derive(Default)]
struct History(Vec<Op>);

impl History {
    fn op(&mut self, op: Op, t_ms: u64) {
        let i = self.0.len() as u64;
        self.0.push(op.at(i, at_ms(t_ms)));
    }

    /// `client` acquires `resource` (invoke 5 ms before `from`, TTL 1 s from the invoke), and
    /// releases it at `to` (`None`: never).
    fn lease(mut self, client: u32, resource: &str, from: u64, to: Option<u64>) -> Self {
        let inv = Op::new(client, OpKind::Invoke, OpFn::Acquire, resource).with_ttl_ms(1000);
        self.op(inv, from - 5);
        let ok = Op::new(client, OpKind::Ok, OpFn::Acquire, resource)
            .with_owner(format!("c{client}"))
            .with_deadline_us(at_ms(from - 5 + 1000))
            .with_ttl_ms(1000);
        self.op(ok, from);
        if let Some(to) = to {
            self.op(Op::new(client, OpKind::Invoke, OpFn::Release, resource), to);
            self.op(Op::new(client, OpKind::Ok, OpFn::Release, resource), to + 1);
        }
        self
    }

    /// `client` tries `resource` from `from` and is told busy at `to`.
    fn busy(mut self, client: u32, resource: &str, from: u64, to: u64) -> Self {
        self.op(
            Op::new(client, OpKind::Invoke, OpFn::Acquire, resource).with_ttl_ms(1000),
            from,
        );
        self.op(
            Op::new(client, OpKind::Fail, OpFn::Acquire, resource)
                .with_error(ErrorKind::Busy, "held"),
            to,
        );
        self
    }

    /// `client` tries `resource` from `from` and times out at `to` (unknown outcome).
    fn unknown(mut self, client: u32, resource: &str, from: u64, to: u64) -> Self {
        self.op(
            Op::new(client, OpKind::Invoke, OpFn::Acquire, resource).with_ttl_ms(1000),
            from,
        );
        self.op(
            Op::new(client, OpKind::Info, OpFn::Acquire, resource)
                .with_error(ErrorKind::Timeout, "no answer"),
            to,
        );
        self
    }

    /// `client` keeps trying `resource` from `from` to `to`, 100 ms per attempt.
    fn waiting(mut self, client: u32, resource: &str, from: u64, to: u64) -> Self {
        let mut t = from;
        while t + 100 <= to {
            self = self.busy(client, resource, t, t + 100);
            t += 100;
        }
        self
    }

    fn ops(mut self) -> Vec<Op> {
        self.0.sort_by_key(|o| o.time_us);
        self.0
    }
}

fn spec(index: u32, start: u64, heal: u64, end: u64, exposure: Exposure) -> EpisodeSpec {
    EpisodeSpec {
        index,
        start: Duration::from_millis(start),
        heal: Duration::from_millis(heal),
        end: Duration::from_millis(end),
        exposure,
    }
}

fn window(id: u64, kind: &str, target: &str, from: u64, to: u64) -> FaultWindow {
    FaultWindow {
        id,
        kind: kind.into(),
        targets: vec![target.into()],
        start_us: at_ms(from),
        end_us: Some(at_ms(to)),
        detail: String::new(),
    }
}

fn anomaly(kind: AnomalyKind, t: u64, end: Option<u64>, clients: &[u32]) -> Anomaly {
    Anomaly {
        kind,
        resource: "r0".into(),
        time_us: at_ms(t),
        end_us: end.map(at_ms),
        clients: clients.to_vec(),
        tokens: Vec::new(),
        holders: None,
        ledger_seqs: Vec::new(),
        fault_ids: Vec::new(),
        detail: String::new(),
    }
}

#[test]
fn an_episode_that_met_no_lease_is_not_exposed() {
    let ops = History::default()
        .lease(0, "r0", 500, Some(600))
        .lease(1, "r0", 3000, Some(3100))
        .waiting(2, "r0", 3200, 7000)
        .ops();
    let specs = [
        spec(1, 2000, 2500, 4000, Exposure::LiveLease),
        spec(2, 4000, 4500, 6000, Exposure::LiveLease),
    ];
    // The kill of episode 1 meets no lease; episode 2's never happened.
    let windows = [window(1, "kill", "n1", 2000, 2500)];
    let out = assess(1, &specs, &ops, &windows, &[], TTL);
    assert_eq!(out.len(), 2);
    assert!(!out[0].exposed);
    assert_eq!(
        out[0].exposure,
        "no lease was live when kill opened at 2000.0 ms"
    );
    assert_eq!(
        (out[0].start_us, out[0].heal_us),
        (at_ms(2000), Some(at_ms(2500)))
    );
    assert_eq!(out[0].targets, vec!["n1".to_string()]);
    assert!(!out[1].exposed);
    assert!(
        out[1].exposure.contains("never injected"),
        "{}",
        out[1].exposure
    );
    assert_eq!(out[1].heal_us, None);
    assert_eq!(out[1].recovery_us, None);
    // Damage in its span counts whatever the aim said: it is never left out.
    let lost = [anomaly(AnomalyKind::LostUpdate, 3050, None, &[1])];
    let out = assess(1, &specs, &ops, &windows, &lost, TTL);
    assert!(out[0].exposed);
    assert_eq!(
        out[0].exposure,
        "no lease was live when kill opened at 2000.0 ms; but damage followed in its span, so it counts"
    );
}

#[test]
fn a_lease_live_when_the_window_opened_exposes_it() {
    let ops = History::default().lease(0, "r0", 1900, Some(2100)).ops();
    let specs = [spec(1, 2000, 2500, 4000, Exposure::LiveLease)];
    let out = assess(
        1,
        &specs,
        &ops,
        &[window(1, "kill", "n1", 2050, 2500)],
        &[],
        TTL,
    );
    assert!(out[0].exposed);
    assert_eq!(
        out[0].exposure,
        "client:0 held r0 (acquired at 1900.0 ms, until 2100.0 ms) when kill opened at 2050.0 ms"
    );
    // Released at 2100 ms, before the window: a later window would not be exposed.
    let out = assess(
        1,
        &specs,
        &ops,
        &[window(1, "kill", "n1", 2100, 2500)],
        &[],
        TTL,
    );
    assert!(!out[0].exposed);
}

#[test]
fn a_holder_pause_of_a_client_that_held_a_lease_is_exposed() {
    let ops = History::default()
        .lease(3, "r0", 1900, Some(3600))
        .lease(4, "r1", 1000, Some(1100))
        .ops();
    let specs = [spec(1, 2000, 3500, 6000, Exposure::Holder)];
    // The nemesis found the holder 40 ms after the planned start.
    let pause = window(1, "client-pause", "client:3", 2040, 3500);
    let out = assess(1, &specs, &ops, &[pause], &[], TTL);
    assert!(out[0].exposed, "{}", out[0].exposure);
    assert_eq!(
        out[0].exposure,
        "client:3 held r0 (acquired at 1900.0 ms, until 2895.0 ms) when client-pause hit it at 2040.0 ms"
    );
    assert_eq!(out[0].targets, vec!["client:3".to_string()]);
    // The same pause on client 4, whose lease was released at 1.1 s, is not exposed.
    let other = window(1, "client-pause", "client:4", 2040, 3500);
    let out = assess(1, &specs, &ops, std::slice::from_ref(&other), &[], TTL);
    assert!(!out[0].exposed);
    assert_eq!(
        out[0].exposure,
        "the clients hit held no lease (client:4 from 2040.0 ms to 3500.0 ms)"
    );
    // A client that takes a lease while the pause is on it stalls holding it: exposed.
    let ops_later = History::default()
        .lease(4, "r1", 1000, Some(1100))
        .lease(4, "r1", 2500, Some(3700))
        .ops();
    let out = assess(1, &specs, &ops_later, &[other], &[], TTL);
    assert!(out[0].exposed);
    assert_eq!(
        out[0].exposure,
        "client:4 held r1 (acquired at 2500.0 ms, until 3495.0 ms) while client-pause was on it (2040.0 ms to 3500.0 ms)"
    );
    // A lease whose validity ran out before the window is not held.
    let late = window(1, "client-pause", "client:3", 2900, 3500);
    assert!(!assess(1, &specs, &ops, &[late], &[], TTL)[0].exposed);
    // A node window cannot expose a `holder` episode.
    let node = window(1, "pause-node", "n1", 2040, 3500);
    let out = assess(1, &specs, &ops, &[node], &[], TTL);
    assert!(!out[0].exposed);
    assert_eq!(out[0].exposure, "no window hit a client (targets: n1)");
}

#[test]
fn a_lease_without_expiry_is_held_until_its_release() {
    let mut h = History::default();
    h.op(Op::new(2, OpKind::Invoke, OpFn::Acquire, "r0"), 100);
    h.op(Op::new(2, OpKind::Ok, OpFn::Acquire, "r0"), 110);
    h.op(Op::new(2, OpKind::Invoke, OpFn::Release, "r0"), 5000);
    h.op(Op::new(2, OpKind::Ok, OpFn::Release, "r0"), 5001);
    let ops = h.ops();
    let specs = [spec(1, 4000, 4000, 6000, Exposure::Holder)];
    let loss = window(1, "session-loss", "client:2", 4000, 4000);
    let out = assess(1, &specs, &ops, &[loss], &[], TTL);
    assert!(out[0].exposed);
    assert!(
        out[0]
            .exposure
            .contains("(acquired at 110.0 ms, no expiry)"),
        "{}",
        out[0].exposure
    );
}

#[test]
fn latency_counts_when_an_acquire_is_in_flight_and_baseline_when_a_lease_is_live() {
    let ops = History::default()
        .busy(1, "r0", 1900, 2100)
        .lease(2, "r1", 5000, Some(5050))
        .ops();
    let specs = [
        spec(1, 2000, 2500, 3000, Exposure::AcquireInFlight),
        spec(2, 3000, 3500, 4000, Exposure::AcquireInFlight),
    ];
    let windows = [
        window(1, "latency", "n1", 2000, 2500),
        window(2, "latency", "n1", 3000, 3500),
    ];
    let out = assess(1, &specs, &ops, &windows, &[], TTL);
    assert!(out[0].exposed);
    assert!(!out[1].exposed);
    assert_eq!(
        out[1].exposure,
        "no acquire was in flight during latency (3000.0 ms to 3500.0 ms)"
    );
    let base = [
        spec(1, 5010, 5010, 5500, Exposure::Baseline),
        spec(2, 5500, 5500, 6000, Exposure::Baseline),
    ];
    let out = assess(1, &base, &ops, &[], &[], TTL);
    assert!(out[0].exposed, "{}", out[0].exposure);
    assert_eq!(out[0].heal_us, Some(at_ms(5010)));
    assert!(!out[1].exposed);
}

#[test]
fn an_anomaly_in_an_episodes_recovery_gap_is_its_own_not_the_next_ones() {
    let ops = History::default()
        .lease(3, "r0", 1900, None)
        .lease(5, "r0", 3100, Some(3200))
        .lease(6, "r0", 6300, Some(6350))
        .ops();
    let specs = [
        spec(1, 2000, 3500, 6000, Exposure::Holder),
        spec(2, 6000, 7500, 10000, Exposure::Holder),
    ];
    // Episode 2's holder window opened late, at 6.4 s.
    let windows = [
        window(1, "client-pause", "client:3", 2000, 3500),
        window(2, "client-pause", "client:6", 6400, 7500),
    ];
    let anomalies = [
        // Dated by the checker from client 3's entry (1.9 s, before the pause); it happened
        // when client 5 took the lease at 3.1 s.
        anomaly(AnomalyKind::MutexViolation, 1900, Some(3200), &[3, 5]),
        anomaly(AnomalyKind::LostUpdate, 3600, None, &[3]),
        // In the recovery gap: after episode 2's planned start, before its window opened.
        anomaly(AnomalyKind::StaleWriteRejected, 6100, None, &[3]),
        // In episode 2's window.
        anomaly(AnomalyKind::BelievedOverlap, 6400, Some(6900), &[6]),
        // Not read by episodes.
        anomaly(AnomalyKind::Unavailable, 6500, Some(6800), &[]),
    ];
    let out = assess(7, &specs, &ops, &windows, &anomalies, TTL);
    assert_eq!((out[0].trial, out[0].index, out[1].index), (7, 1, 2));
    assert_eq!(out[0].end_us, at_ms(6400));
    assert_eq!(
        out[0].damage,
        vec![AnomalyKind::MutexViolation, AnomalyKind::LostUpdate]
    );
    assert_eq!(out[0].first_damage_us, Some(at_ms(3100)));
    assert!(!out[0].unsafe_belief, "damage wins over unsafe belief");
    assert!(out[1].damage.is_empty());
    assert_eq!(out[1].first_damage_us, None);
    assert!(out[1].unsafe_belief);
    assert_eq!(out[1].start_us, at_ms(6400));
}

/// Client 3 crashes at 2 s holding r0 (acquired at 1.96 s, expires at 2.955 s); client 5
/// wants r0 from then on and takes it at `taken` (ms), if ever. The history runs to 10 s.
fn crash_history(taken: Option<u64>) -> Vec<Op> {
    let mut h = History::default()
        .lease(3, "r0", 1960, None)
        .lease(4, "r1", 9900, Some(9950));
    match taken {
        Some(t) => {
            h = h
                .waiting(5, "r0", 2000, t - 5)
                .lease(5, "r0", t, Some(t + 50))
        }
        None => h = h.waiting(5, "r0", 2000, 10000),
    }
    h.ops()
}

#[test]
fn a_lease_expiring_one_ttl_after_a_crash_is_not_stuck_but_a_resource_nobody_takes_is() {
    let specs = [spec(1, 2000, 2000, 10000, Exposure::Holder)];
    let crash = [window(1, "client-crash", "client:3", 2000, 2000)];
    // Taken 1.5 s after the crash (more than one TTL after the heal) but 0.55 s after the
    // lease expired: not stuck.
    let out = assess(1, &specs, &crash_history(Some(3500)), &crash, &[], TTL);
    assert!(out[0].exposed);
    assert!(!out[0].stuck);
    assert_eq!(out[0].recovery_us, Some(at_ms(1500)));
    // Taken 1.1 s after the expiry: slow (reconnecting clients take up to a TTL), not stuck.
    let out = assess(1, &specs, &crash_history(Some(4060)), &crash, &[], TTL);
    assert!(!out[0].stuck);
    // Taken 2.1 s (more than two TTLs) after the expiry: stuck.
    let out = assess(1, &specs, &crash_history(Some(5060)), &crash, &[], TTL);
    assert!(out[0].stuck);
    // Unless an acquire that timed out may have held it meanwhile (invoked at 3 s: until 4 s).
    let mut ops = crash_history(Some(5060));
    ops.extend(History::default().unknown(6, "r0", 3000, 3200).ops());
    ops.sort_by_key(|o| o.time_us);
    let out = assess(1, &specs, &ops, &crash, &[], TTL);
    assert!(!out[0].stuck);
    // Never taken: stuck; the recovery is r1's acquire at 9.9 s (any resource counts).
    let out = assess(1, &specs, &crash_history(None), &crash, &[], TTL);
    assert!(out[0].stuck);
    assert_eq!(out[0].recovery_us, Some(at_ms(7900)));
    // The checker's stuck resource inside the span is stuck too.
    let stuck = [anomaly(AnomalyKind::StuckResource, 2955, Some(10000), &[5])];
    let out = assess(1, &specs, &crash_history(Some(3500)), &crash, &stuck, TTL);
    assert!(out[0].stuck);
}

#[test]
fn a_resource_stuck_before_an_episode_is_not_blamed_on_it() {
    let ops = crash_history(None);
    let specs = [
        spec(1, 2000, 2000, 5000, Exposure::Holder),
        spec(2, 5000, 5500, 8000, Exposure::LiveLease),
    ];
    let windows = [
        window(1, "client-crash", "client:3", 2000, 2000),
        window(2, "kill", "n1", 5000, 5500),
    ];
    let out = assess(1, &specs, &ops, &windows, &[], TTL);
    assert!(out[0].stuck);
    assert!(!out[1].stuck);
}

#[test]
fn recovery_runs_from_the_heal_to_the_first_acquire_after_it() {
    let ops = History::default()
        .lease(1, "r0", 1500, Some(1550))
        .busy(2, "r0", 2100, 2900)
        .lease(2, "r0", 3250, Some(3300))
        .lease(4, "r1", 3400, Some(3450))
        .ops();
    let specs = [
        spec(1, 2000, 3000, 5000, Exposure::AcquireInFlight),
        spec(2, 5000, 6000, 8000, Exposure::AcquireInFlight),
    ];
    let windows = [
        window(1, "partition", "n1", 2000, 3000),
        window(2, "partition", "n1", 5000, 6000),
    ];
    let out = assess(1, &specs, &ops, &windows, &[], TTL);
    assert_eq!(out[0].recovery_us, Some(at_ms(250)));
    assert_eq!(out[1].recovery_us, None);
    // A window still open when the history ended: no heal, no recovery.
    let open = [FaultWindow {
        end_us: None,
        ..window(1, "partition", "n1", 2000, 3000)
    }];
    let out = assess(1, &specs[..1], &ops, &open, &[], TTL);
    assert_eq!((out[0].heal_us, out[0].recovery_us), (None, None));
    // Its start and heal records count once: the heal wins.
    let both = [open[0].clone(), windows[0].clone()];
    let out = assess(1, &specs[..1], &ops, &both, &[], TTL);
    assert_eq!(out[0].heal_us, Some(at_ms(3000)));
}

#[test]
fn a_holder_that_keeps_its_lock_past_the_heal_and_releases_it_is_not_a_slow_recovery() {
    // Client 1 holds r0 through the partition (its session outlived it) and releases it at
    // 3.75 s as its stretched section planned; client 2 takes it 9 ms after that release.
    let ops = History::default()
        .lease(1, "r0", 1900, Some(3750))
        .waiting(2, "r0", 2000, 3700)
        .lease(2, "r0", 3760, Some(3800))
        .ops();
    let specs = [spec(1, 2000, 3000, 5000, Exposure::Holder)];
    let windows = [window(1, "partition", "n1", 2000, 3000)];
    let out = assess(1, &specs, &ops, &windows, &[], TTL);
    assert_eq!(out[0].recovery_us, Some(at_ms(3760) - at_ms(3751)));
    assert!(!out[0].stuck);
    // A holder that crashed (no release) is waited out: its lease's expiry is unavailability,
    // so recovery still runs from the heal (see the crash test: 1.5 s).
    let ops = History::default()
        .lease(1, "r0", 1900, None)
        .waiting(2, "r0", 2000, 3700)
        .lease(2, "r0", 3760, Some(3800))
        .ops();
    let out = assess(1, &specs, &ops, &windows, &[], TTL);
    assert_eq!(out[0].recovery_us, Some(at_ms(760)));
}

fn outcome(trial: u32, index: u32, exposed: bool) -> EpisodeOutcome {
    EpisodeOutcome {
        trial,
        index,
        start_us: at_ms(u64::from(index) * 1000),
        heal_us: Some(at_ms(u64::from(index) * 1000 + 500)),
        end_us: at_ms(u64::from(index + 1) * 1000),
        targets: vec!["n1".into()],
        exposed,
        exposure: String::new(),
        damage: Vec::new(),
        first_damage_us: None,
        unsafe_belief: false,
        stuck: false,
        recovery_us: None,
        harness_lag_us: None,
    }
}

fn damaged(mut e: EpisodeOutcome, kind: AnomalyKind, t_ms: u64) -> EpisodeOutcome {
    e.damage = vec![kind];
    e.first_damage_us = Some(at_ms(t_ms));
    e
}

fn tally(k: u32, n: u32, unexposed: u32) -> EpisodeTally {
    let mut v: Vec<(String, EpisodeOutcome)> = (1..=n)
        .map(|i| {
            let e = outcome(1, i, true);
            let e = if i <= k {
                damaged(e, AnomalyKind::MutexViolation, u64::from(i) * 1000 + 100)
            } else {
                e
            };
            ("t1".to_string(), e)
        })
        .collect();
    v.extend((0..unexposed).map(|i| ("t1".to_string(), outcome(2, i + 1, false))));
    EpisodeTally::of(&v)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-4
}

#[test]
fn a_tally_gives_the_damage_rate_of_exposed_episodes_with_its_interval() {
    let t = tally(0, 30, 12);
    assert_eq!((t.total, t.exposed, t.damaging), (42, 30, 0));
    let r = t.damage_rate.unwrap();
    // 0 of 30: exact one-sided, 1 − 0.05^(1/30) = 9.50 %.
    assert_eq!(r.method, IntervalMethod::ExactOneSided);
    assert!(close(r.high, 0.0950), "{}", r.high);
    assert!(t.first_incident.is_none());
    let r = tally(3, 30, 0).damage_rate.unwrap();
    // 3 of 30: Wilson 3.46 % to 25.62 %.
    assert_eq!(r.method, IntervalMethod::Wilson);
    assert!(close(r.low, 0.0346) && close(r.high, 0.2562), "{r:?}");
    let r = tally(30, 30, 0).damage_rate.unwrap();
    assert!(close(r.low, 0.9050) && r.high == 1.0, "{r:?}");
    // 0 of 300: below 1 %.
    let r = tally(0, 300, 0).damage_rate.unwrap();
    assert!(close(r.high, 0.009_937) && r.high < 0.01, "{}", r.high);
    // No exposed episode: no rate, whatever ran.
    let none = tally(0, 0, 5);
    assert_eq!((none.total, none.exposed), (5, 0));
    assert!(none.damage_rate.is_none());
    assert_eq!(EpisodeTally::of(&[]), EpisodeTally::default());
}

#[test]
fn only_exposed_episodes_count_and_the_first_incident_is_the_earliest_in_trial_order() {
    let mut stuck = outcome(1, 4, true);
    stuck.stuck = true;
    stuck.unsafe_belief = true;
    let mut unexposed_damage = damaged(outcome(1, 1, false), AnomalyKind::LostUpdate, 100);
    unexposed_damage.stuck = true;
    let v: Vec<(String, EpisodeOutcome)> = vec![
        ("t1".into(), unexposed_damage),
        ("t1".into(), stuck),
        (
            "t2".into(),
            damaged(outcome(2, 3, true), AnomalyKind::StaleWriteAccepted, 3200),
        ),
        (
            "t2".into(),
            damaged(outcome(2, 2, true), AnomalyKind::TokenDuplicate, 2100),
        ),
        (
            "t3".into(),
            damaged(outcome(3, 1, true), AnomalyKind::MutexViolation, 50),
        ),
    ];
    let t = EpisodeTally::of(&v);
    assert_eq!(
        (t.total, t.exposed, t.damaging, t.unsafe_belief, t.stuck),
        (5, 4, 3, 1, 1)
    );
    let i = t.first_incident.unwrap();
    assert_eq!(
        (i.dir.as_str(), i.trial, i.episode, i.time_us, i.kind),
        ("t2", 2, 2, at_ms(2100), AnomalyKind::TokenDuplicate)
    );
}

#[test]
fn recovery_percentiles_are_over_exposed_episodes_that_recovered() {
    let mut v: Vec<(String, EpisodeOutcome)> = (1..=100)
        .map(|i| {
            let mut e = outcome(1, i, true);
            e.recovery_us = Some(u64::from(i) * 1000);
            ("t1".to_string(), e)
        })
        .collect();
    let mut slow = outcome(1, 101, false);
    slow.recovery_us = Some(at_ms(60_000));
    v.push(("t1".into(), slow));
    v.push(("t1".into(), outcome(1, 102, true)));
    let t = EpisodeTally::of(&v);
    assert_eq!(t.recovery_p50_ms, Some(50.0));
    assert_eq!(t.recovery_p99_ms, Some(99.0));
}

#[test]
fn an_episode_whose_span_a_harness_stall_overlapped_is_set_aside() {
    // Episodes k span [k s, k+1 s); second 3 of the run lagged 120 ms, second 6 lagged 40 ms.
    let mut episodes: Vec<EpisodeOutcome> = (1..=6).map(|i| outcome(1, i, true)).collect();
    let lag = [1_000, 2_000, 900, 120_000, 3_000, 1_000, 40_000];
    // Limit 100 ms (TTL 1 s), looking back 500 ms before each start.
    mark_harness_lag(&mut episodes, &lag, 100_000, 500_000);
    let lagged: Vec<(u32, Option<u64>)> = episodes
        .iter()
        .map(|e| (e.index, e.harness_lag_us))
        .collect();
    assert_eq!(
        lagged,
        vec![
            (1, None),
            // [1.5 s, 3 s): second 2 only.
            (2, None),
            // [2.5 s, 4 s): seconds 2 and 3.
            (3, Some(120_000)),
            // [3.5 s, 5 s): seconds 3 and 4.
            (4, Some(120_000)),
            (5, None),
            // 40 ms is under the limit.
            (6, None),
        ]
    );
    // Set-aside episodes are not evidence, damaged or not; they are counted apart.
    episodes[2] = damaged(episodes[2].clone(), AnomalyKind::MutexViolation, 3500);
    let v: Vec<(String, EpisodeOutcome)> = episodes
        .into_iter()
        .map(|e| ("t1".to_string(), e))
        .collect();
    let t = EpisodeTally::of(&v);
    assert_eq!((t.total, t.exposed, t.set_aside, t.damaging), (6, 4, 2, 0));
    assert!(t.first_incident.is_none());
}

#[test]
fn a_stuck_episode_is_settled_two_ttls_after_its_heal() {
    // Healed at 1.5 s, stuck until the trial's end at 9 s; second 5 lagged 150 ms.
    let mut lag = vec![1_000; 10];
    lag[5] = 150_000;
    let stuck = |end_ms: u64| {
        let mut e = outcome(1, 1, true);
        e.stuck = true;
        e.end_us = at_ms(end_ms);
        e
    };
    // TTL 500 ms: settled at 2.5 s, before the lag.
    let mut episodes = vec![stuck(9_000)];
    mark_harness_lag(&mut episodes, &lag, 100_000, 500_000);
    assert_eq!(episodes[0].harness_lag_us, None);
    // TTL 2 s: settled at 5.5 s, so second 5's lag counts.
    let mut episodes = vec![stuck(9_000)];
    mark_harness_lag(&mut episodes, &lag, 100_000, 2_000_000);
    assert_eq!(episodes[0].harness_lag_us, Some(150_000));
    // Not stuck, or stuck with damage: its whole span counts.
    let mut episodes = vec![
        outcome(1, 1, true),
        damaged(stuck(9_000), AnomalyKind::LostUpdate, 1200),
    ];
    episodes[0].end_us = at_ms(9_000);
    mark_harness_lag(&mut episodes, &lag, 100_000, 500_000);
    assert_eq!(episodes[0].harness_lag_us, Some(150_000));
    assert_eq!(episodes[1].harness_lag_us, Some(150_000));
}

#[test]
fn seconds_past_the_recorded_timeline_are_no_evidence_of_lag() {
    let mut episodes = vec![outcome(1, 9, true)];
    mark_harness_lag(&mut episodes, &[500_000; 3], 100_000, 1_000_000);
    assert_eq!(
        episodes[0].harness_lag_us, None,
        "seconds 8–9 were not recorded"
    );
}
