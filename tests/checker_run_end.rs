//! Hand-built histories for two liveness rules of the checker: the `run-end` mark (a resource
//! nobody can take while acquires still wait when the run ends is stuck) and a crashed holder's
//! etcd lease, which a leader change restarts (waiting it out is not unavailability).

use lockbench::checker::{check_in_memory, AnomalyKind, CheckOptions, CheckReport, Liveness};
use lockbench::history::{
    ClientCrash, ErrorKind, FaultWindow, HistoryEvent, Op, OpFn, OpKind, RunEnd,
};

/// Events pushed in any order, sorted by time (stable) and indexed at the end.
#[derive(Default)]
struct H {
    events: Vec<HistoryEvent>,
}

impl H {
    fn op(&mut self, op: Op) -> &mut Self {
        self.events.push(HistoryEvent::Op(op));
        self
    }
    fn invoke(
        &mut self,
        c: u32,
        f: OpFn,
        t: u64,
        strategy: &str,
        ttl_ms: Option<u64>,
    ) -> &mut Self {
        let mut op = Op::new(c, OpKind::Invoke, f, "r")
            .at(0, t)
            .with_strategy(strategy);
        op.ttl_ms = ttl_ms;
        self.op(op)
    }
    fn acquire(
        &mut self,
        c: u32,
        inv: u64,
        ok: u64,
        strategy: &str,
        ttl_ms: Option<u64>,
    ) -> &mut Self {
        self.invoke(c, OpFn::Acquire, inv, strategy, ttl_ms);
        let mut op = Op::new(c, OpKind::Ok, OpFn::Acquire, "r").at(0, ok);
        op.ttl_ms = ttl_ms;
        self.op(op)
    }
    fn done(&mut self, c: u32, f: OpFn, kind: OpKind, t: u64) -> &mut Self {
        let mut op = Op::new(c, kind, f, "r").at(0, t);
        if kind != OpKind::Ok {
            op = op.with_error(ErrorKind::Busy, "busy");
        }
        self.op(op)
    }
    fn crash(&mut self, c: u32, t: u64) -> &mut Self {
        self.events.push(HistoryEvent::Crash(ClientCrash {
            index: 0,
            time_us: t,
            client: c,
        }));
        self
    }
    fn fault(&mut self, id: u64, kind: &str, target: &str, start: u64, end: u64) -> &mut Self {
        let w = FaultWindow {
            id,
            kind: kind.into(),
            targets: vec![target.into()],
            start_us: start,
            end_us: None,
            detail: String::new(),
        };
        self.events.push(HistoryEvent::Fault(w.clone()));
        self.events.push(HistoryEvent::Fault(FaultWindow {
            end_us: Some(end),
            ..w
        }));
        self
    }
    fn run_end(&mut self, t: u64) -> &mut Self {
        self.events.push(HistoryEvent::RunEnd(RunEnd {
            index: 0,
            time_us: t,
        }));
        self
    }
    fn check(&self) -> CheckReport {
        let mut ev = self.events.clone();
        // A heal record is written at its end time, not its start.
        ev.sort_by_key(|e| match e {
            HistoryEvent::Fault(f) => f.end_us.unwrap_or(f.start_us),
            e => e.time_us(),
        });
        check_in_memory(ev, None, &CheckOptions::default())
    }
}

fn stuck(r: &CheckReport) -> Vec<(u64, Option<u64>, Vec<u32>)> {
    r.anomalies
        .iter()
        .filter(|a| a.kind == AnomalyKind::StuckResource)
        .map(|a| (a.time_us, a.end_us, a.clients.clone()))
        .collect()
}

/// A PostgreSQL session lock whose holder's release timed out (its connection cut): client 2
/// and 3 wait inside one acquire each from 0.5 s and 2.5 s until the run ends at 6 s, failing
/// nothing. Without the mark nothing tells the wait; with it the resource is stuck from the
/// release's end (2 s) to the mark.
fn waits_until_the_end(mark: Option<u64>) -> H {
    let mut h = H::default();
    h.acquire(1, 0, 100, "pg-advisory", None);
    h.invoke(1, OpFn::Release, 1_000_000, "pg-advisory", None);
    h.done(1, OpFn::Release, OpKind::Info, 2_000_000);
    h.invoke(2, OpFn::Acquire, 500_000, "pg-advisory", None);
    h.invoke(3, OpFn::Acquire, 2_500_000, "pg-advisory", None);
    if let Some(t) = mark {
        h.run_end(t);
    }
    h
}

#[test]
fn a_resource_untaken_while_acquires_wait_until_the_run_end_is_stuck() {
    let r = waits_until_the_end(Some(6_000_000)).check();
    assert_eq!(r.liveness, Liveness::Stuck, "{:?}", r.anomalies);
    assert_eq!(r.stats.stuck_resources, 1);
    assert_eq!(stuck(&r), vec![(2_000_000, Some(6_000_000), vec![2, 3])]);
    assert_eq!(r.stats.unavailable_ms, 4_000);
    // A history without the mark (written before it existed) is judged as before: no failed
    // attempt, no finding.
    let old = waits_until_the_end(None).check();
    assert_eq!(old.liveness, Liveness::Live);
    assert_eq!(old.stats.stuck_resources, 0);
}

#[test]
fn a_short_wait_at_the_run_end_is_not_stuck() {
    // Client 1 releases at 5.6 s; client 2 has waited since 5.5 s when the run ends at 6 s:
    // 0.4 s free and waited for, under the 1 s stuck threshold.
    let mut h = H::default();
    h.acquire(1, 0, 100, "pg-advisory", None);
    h.invoke(1, OpFn::Release, 5_590_000, "pg-advisory", None);
    h.done(1, OpFn::Release, OpKind::Ok, 5_600_000);
    h.invoke(2, OpFn::Acquire, 5_500_000, "pg-advisory", None);
    h.run_end(6_000_000);
    let r = h.check();
    assert_eq!(r.stats.stuck_resources, 0);
    assert_eq!(r.liveness, Liveness::Live, "{:?}", r.anomalies);
    assert!(stuck(&r).is_empty());
}

#[test]
fn a_wait_that_ends_with_an_acquire_in_the_drain_is_not_stuck() {
    // The same long wait, but client 3's acquire succeeds during the drain (after the mark):
    // the resource could be taken.
    let mut h = waits_until_the_end(Some(6_000_000));
    h.done(3, OpFn::Acquire, OpKind::Ok, 6_200_000);
    let r = h.check();
    assert_eq!(r.stats.stuck_resources, 0, "{:?}", r.anomalies);
    assert_ne!(r.liveness, Liveness::Stuck);
}

#[test]
fn a_held_resource_at_the_run_end_is_not_stuck() {
    // A live holder without a TTL keeps it until the run end; the waiter is explained.
    let mut h = H::default();
    h.acquire(1, 0, 100, "pg-advisory", None);
    h.invoke(2, OpFn::Acquire, 200, "pg-advisory", None);
    h.run_end(6_000_000);
    h.invoke(1, OpFn::Release, 6_100_000, "pg-advisory", None);
    h.done(1, OpFn::Release, OpKind::Ok, 6_100_100);
    let r = h.check();
    assert_eq!(r.liveness, Liveness::Live, "{:?}", r.anomalies);
}

#[test]
fn a_stuck_wait_joins_the_failed_attempts_right_before_the_run_end() {
    // A no-ttl key left by a crashed client at 1 s: client 2 fails twice (1.1–1.3 s, 1.4–1.6 s),
    // then waits inside one acquire from 1.6 s until the run ends at 2.5 s. The failures alone
    // span 0.5 s (under the 1 s threshold); with the wait it is 1.4 s: stuck from 1.1 s.
    let mut h = H::default();
    h.acquire(1, 0, 100, "no-ttl", None);
    h.crash(1, 1_000_000);
    h.invoke(2, OpFn::Acquire, 1_100_000, "no-ttl", None);
    h.done(2, OpFn::Acquire, OpKind::Fail, 1_300_000);
    h.invoke(2, OpFn::Acquire, 1_400_000, "no-ttl", None);
    h.done(2, OpFn::Acquire, OpKind::Fail, 1_600_000);
    h.invoke(2, OpFn::Acquire, 1_600_000, "no-ttl", None);
    h.run_end(2_500_000);
    let r = h.check();
    assert_eq!(stuck(&r), vec![(1_100_000, Some(2_500_000), vec![2])]);
    assert_eq!(r.of_kind(AnomalyKind::Unavailable).count(), 0);
}

/// Client 1 takes an etcd-style lease (TTL 2 s) at 0.1 ms and crashes at 0.5 s; `fault`
/// strikes from 1 s to 3 s; client 2 fails every 100 ms from 0.6 s until it acquires at 6.1 s.
fn crashed_lease(strategy: &str, fault: Option<(&str, &str)>) -> CheckReport {
    let mut h = H::default();
    h.acquire(1, 0, 100, strategy, Some(2_000));
    h.crash(1, 500_000);
    if let Some((kind, target)) = fault {
        h.fault(1, kind, target, 1_000_000, 3_000_000);
    }
    for k in 0..54u64 {
        let t = 600_000 + k * 100_000;
        h.invoke(2, OpFn::Acquire, t, strategy, Some(2_000));
        h.done(2, OpFn::Acquire, OpKind::Fail, t + 50_000);
    }
    h.acquire(2, 6_000_000, 6_100_000, strategy, Some(2_000));
    h.invoke(2, OpFn::Release, 6_200_000, strategy, None);
    h.done(2, OpFn::Release, OpKind::Ok, 6_200_100);
    h.check()
}

#[test]
fn a_leader_change_restarting_a_crashed_etcd_lease_is_not_unavailability() {
    // The kill may have changed the leader at any time up to its heal (3 s): the new leader
    // renewed the lease to a full TTL, so it may run to 3 s + 2 s TTL + 1 s allowance = 6 s.
    let r = crashed_lease("etcd-lease", Some(("kill", "n1")));
    assert_eq!(r.stats.unavailable_ms, 0, "{:?}", r.anomalies);
    assert_eq!(r.of_kind(AnomalyKind::Unavailable).count(), 0);
    assert_eq!(r.liveness, Liveness::Live);
    // So does a cut between the members (a peer link).
    let r = crashed_lease("etcd-lease", Some(("partition", "n1-peer")));
    assert_eq!(r.stats.unavailable_ms, 0, "{:?}", r.anomalies);
}

#[test]
fn a_crashed_lease_without_a_leader_change_ends_at_its_ttl() {
    // Failures after the TTL (2.0001 s) up to the acquire at 6 s are unavailability when no
    // leader change can explain them: no fault, a Redis lease, or a cut of the clients' link
    // only (the members still see each other).
    for (strategy, fault) in [
        ("etcd-lease", None),
        ("single", Some(("kill", "n1"))),
        ("etcd-lease", Some(("partition", "n1"))),
        ("etcd-lease", Some(("client-pause", "client:1"))),
    ] {
        let r = crashed_lease(strategy, fault);
        let u: Vec<_> = r.of_kind(AnomalyKind::Unavailable).collect();
        assert_eq!(u.len(), 1, "{strategy} {fault:?}: {:?}", r.anomalies);
        // First failed attempt that began after 2.0001 s: 2.1 s; last one ends at 5.95 s.
        assert_eq!(
            (u[0].time_us, u[0].end_us),
            (2_100_000, Some(5_950_000)),
            "{strategy} {fault:?}"
        );
    }
}

#[test]
fn a_fault_after_the_crashed_lease_expired_does_not_restart_it() {
    let mut h = H::default();
    h.acquire(1, 0, 100, "etcd-lease", Some(2_000));
    h.crash(1, 500_000);
    // The lease ran out at 2.0001 s; a kill at 2.5 s cannot restart it.
    h.fault(1, "kill", "n1", 2_500_000, 3_000_000);
    for k in 0..30u64 {
        let t = 2_100_000 + k * 100_000;
        h.invoke(2, OpFn::Acquire, t, "etcd-lease", Some(2_000));
        h.done(2, OpFn::Acquire, OpKind::Fail, t + 50_000);
    }
    h.acquire(2, 5_100_000, 5_100_100, "etcd-lease", Some(2_000));
    let r = h.check();
    let u: Vec<_> = r.of_kind(AnomalyKind::Unavailable).collect();
    assert_eq!(u.len(), 1, "{:?}", r.anomalies);
    assert_eq!((u[0].time_us, u[0].end_us), (2_100_000, Some(5_050_000)));
}
