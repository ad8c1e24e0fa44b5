//! Unit tests of incidents: grouping and the cause sentence.

use super::*;
use crate::history::FaultWindow;

fn anomaly(kind: AnomalyKind, t: u64, end: Option<u64>, clients: &[u32]) -> Anomaly {
    Anomaly {
        kind,
        resource: "r".into(),
        time_us: t,
        end_us: end,
        clients: clients.to_vec(),
        tokens: vec![],
        holders: Some(clients.len() as u32),
        ledger_seqs: vec![],
        fault_ids: vec![],
        detail: format!("{kind:?}"),
    }
}

#[test]
fn overlapping_intervals_and_points_inside_merge() {
    let a = vec![
        anomaly(AnomalyKind::MutexViolation, 100, Some(300), &[1, 2]),
        anomaly(AnomalyKind::BelievedOverlap, 250, Some(400), &[2, 3]),
        anomaly(AnomalyKind::LostUpdate, 350, None, &[1]),
        anomaly(AnomalyKind::MutexViolation, 500, Some(600), &[1, 2]),
        anomaly(AnomalyKind::StaleWriteRejected, 450, None, &[4]),
        anomaly(AnomalyKind::Unavailable, 100, Some(900), &[5]),
    ];
    let inc = group(&a);
    assert_eq!(inc.len(), 3, "{inc:#?}");
    assert_eq!((inc[0].start_us, inc[0].end_us), (100, 400));
    assert_eq!(inc[0].anomalies, vec![0, 1, 2]);
    assert_eq!(inc[0].clients, vec![1, 2, 3]);
    assert_eq!(inc[0].pairs, 2);
    assert_eq!(inc[0].kind, AnomalyKind::MutexViolation);
    assert!(inc[0].safety);
    assert_eq!(inc[1].kind, AnomalyKind::StaleWriteRejected);
    assert!(!inc[1].safety);
    assert_eq!((inc[1].start_us, inc[1].end_us), (450, 450));
    assert_eq!(inc[2].anomalies, vec![3]);
    assert_eq!(inc.iter().map(|i| i.id).collect::<Vec<_>>(), vec![1, 2, 3]);
}

#[test]
fn cause_names_the_late_holder_and_the_fault_or_its_absence() {
    let a = vec![anomaly(
        AnomalyKind::MutexViolation,
        1_000_000,
        Some(2_000_000),
        &[0, 1],
    )];
    let mut inc = group(&a);
    inc[0].holders = vec![
        Holder {
            client: 0,
            acquire_invoke_us: Some(900_000),
            acquired_us: Some(900_500),
            validity_end_us: Some(1_200_000),
            section_begin_us: Some(1_000_000),
            section_end_us: Some(2_030_000),
            ..Holder::default()
        },
        Holder {
            client: 1,
            acquired_us: Some(1_300_000),
            validity_end_us: Some(1_600_000),
            section_begin_us: Some(1_300_100),
            section_end_us: Some(1_320_000),
            ..Holder::default()
        },
    ];
    let mut no_fault = inc.clone();
    explain(&mut no_fault, &a, &[]);
    let c = &no_fault[0].cause;
    assert!(
        c.starts_with("c0's section ended 830 ms after its lease's validity; no fault active"),
        "{c}"
    );
    assert!(c.contains("the section lasted 1030 ms"), "{c}");
    assert_eq!(no_fault[0].holders[0].overstay_ms, Some(830));
    assert_eq!(no_fault[0].holders[1].overstay_ms, Some(-280));

    inc[0].fault_ids = vec![7];
    let pause = FaultWindow {
        id: 7,
        kind: "client-pause".into(),
        targets: vec!["client-0".into(), "client-2".into()],
        start_us: 950_000,
        end_us: Some(2_000_000),
        detail: String::new(),
    };
    explain(&mut inc, &a, &[pause]);
    let c = &inc[0].cause;
    assert!(
        c.ends_with("; client-pause on client-0, client-2 (0.950 s–2.000 s) held it up"),
        "{c}"
    );
    assert!(!c.contains("no fault") && !c.contains("during"), "{c}");
}

#[test]
fn cause_for_a_lease_granted_twice() {
    let a = vec![anomaly(
        AnomalyKind::BelievedOverlap,
        1_000_000,
        Some(1_100_000),
        &[1, 2],
    )];
    let mut inc = group(&a);
    inc[0].holders = vec![
        Holder {
            client: 1,
            acquired_us: Some(900_000),
            validity_end_us: Some(1_500_000),
            released_us: Some(1_100_000),
            ..Holder::default()
        },
        Holder {
            client: 2,
            token: Some(9),
            acquired_us: Some(1_000_000),
            validity_end_us: Some(1_600_000),
            released_us: Some(1_050_000),
            ..Holder::default()
        },
    ];
    explain(&mut inc, &a, &[]);
    assert_eq!(
        inc[0].cause,
        "c2 (token 9) acquired at 1.000 s while c1's lease was still valid for 500 ms; no fault active"
    );
}
