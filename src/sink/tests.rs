//! The sink over real HTTP on loopback: charges, replays, conflicts, and the table read back.

use std::time::Duration;

use super::*;
use crate::history::RunClock;

fn charge(job: &str, client: u32, section_id: u64) -> Charge {
    Charge {
        job: job.to_string(),
        client,
        section_id,
    }
}

#[tokio::test]
async fn a_call_without_a_key_is_charged_every_time_and_a_key_is_charged_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(SINK_FILE);
    let server = SinkServer::start(&path, RunClock::start(), Duration::ZERO)
        .await
        .unwrap();
    let client = SinkClient::new(&server.url()).unwrap();
    let a = client.charge(&charge("r0:5", 0, 1), None).await.unwrap();
    let b = client.charge(&charge("r0:5", 1, 2), None).await.unwrap();
    assert_eq!((a.outcome, b.outcome), (Outcome::Applied, Outcome::Applied));
    assert_ne!(a.charge_id, b.charge_id);
    let k1 = client
        .charge(&charge("r0:6", 0, 3), Some("r0:6"))
        .await
        .unwrap();
    let k2 = client
        .charge(&charge("r0:6", 2, 4), Some("r0:6"))
        .await
        .unwrap();
    assert_eq!(k1.outcome, Outcome::Applied);
    assert_eq!(k2.outcome, Outcome::Replayed);
    assert_eq!(
        k1.charge_id, k2.charge_id,
        "a repeat is answered with the first charge"
    );
    server.stop(Duration::from_secs(5)).await;

    let rows = read_requests(&path).unwrap();
    let got: Vec<(&str, u32, Outcome, Option<i64>)> = rows
        .iter()
        .map(|r| {
            (
                r.charge.job.as_str(),
                r.charge.client,
                r.outcome,
                r.charge_id,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("r0:5", 0, Outcome::Applied, Some(1)),
            ("r0:5", 1, Outcome::Applied, Some(2)),
            ("r0:6", 0, Outcome::Applied, Some(3)),
            ("r0:6", 2, Outcome::Replayed, Some(3)),
        ]
    );
    assert_eq!(rows[3].idempotency_key.as_deref(), Some("r0:6"));
    assert_eq!(rows[1].idempotency_key, None);
}

#[tokio::test]
async fn a_repeat_while_the_first_is_in_flight_gets_409_and_applies_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(SINK_FILE);
    let server = SinkServer::start(&path, RunClock::start(), Duration::from_millis(400))
        .await
        .unwrap();
    let client = SinkClient::new(&server.url()).unwrap();
    let first = {
        let c = client.clone();
        tokio::spawn(async move { c.charge(&charge("r1:0", 0, 1), Some("k")).await })
    };
    // The repeat is sent once the first one's claim is committed (its row is in flight).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let n: i64 = conn
            .query_row("SELECT count(*) FROM idempotency", [], |r| r.get(0))
            .unwrap();
        if n == 1 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first claim never committed"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let repeat = client
        .charge(&charge("r1:0", 1, 2), Some("k"))
        .await
        .unwrap();
    assert_eq!(repeat.outcome, Outcome::Conflict);
    assert_eq!(repeat.charge_id, None);
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.outcome, Outcome::Applied);
    server.stop(Duration::from_secs(5)).await;
    let outcomes: Vec<Outcome> = read_requests(&path)
        .unwrap()
        .iter()
        .map(|r| r.outcome)
        .collect();
    assert_eq!(outcomes, vec![Outcome::Conflict, Outcome::Applied]);
}

#[tokio::test]
async fn a_body_it_cannot_read_is_400_and_leaves_no_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(SINK_FILE);
    let server = SinkServer::start(&path, RunClock::start(), Duration::ZERO)
        .await
        .unwrap();
    let resp = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{}/v1/charges", server.url()))
        .header("content-type", "application/json")
        .body("{\"job\": 5}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::BAD_REQUEST);
    server.stop(Duration::from_secs(5)).await;
    assert!(read_requests(&path).unwrap().is_empty());
}

#[test]
fn a_used_table_is_refused_and_outcome_names_match_serde() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(SINK_FILE);
    let mut store = SinkStore::create(&path).unwrap();
    store.apply(1, &charge("r0:0", 0, 0), None).unwrap();
    drop(store);
    assert!(matches!(
        SinkStore::create(&path),
        Err(SinkError::NotEmpty { .. })
    ));
    crate::variant_names::assert_names_match_serde::<Outcome>();
}
