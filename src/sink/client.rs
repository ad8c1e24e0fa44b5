//! What a critical section of `external` work calls: one HTTP request per section.

use std::time::Duration;

use serde::Deserialize;

use super::server::IDEMPOTENCY_HEADER;
use super::{Charge, Outcome, SinkError};

/// How long a call waits for the sink's answer (loopback, so only a stalled machine takes
/// more than milliseconds).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A cheap `Clone` handle that calls one sink (connections pooled, no HTTP proxy).
#[derive(Clone)]
pub struct SinkClient {
    http: reqwest::Client,
    url: String,
}

/// The sink's answer to a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChargeAnswer {
    /// What the sink did.
    pub outcome: Outcome,
    /// The charge applied or replayed (`None` on conflict).
    pub charge_id: Option<i64>,
}

#[derive(Deserialize)]
struct Body {
    charge_id: i64,
    replayed: bool,
}

impl SinkClient {
    /// A client of the sink at `base_url` (`http://127.0.0.1:<port>`, [`super::SinkServer::url`]).
    ///
    /// # Errors
    /// [`SinkError::Call`] when the HTTP client cannot be built.
    pub fn new(base_url: &str) -> Result<SinkClient, SinkError> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(CALL_TIMEOUT)
            .build()
            .map_err(|e| SinkError::Call {
                job: String::new(),
                detail: format!("cannot build the HTTP client: {e}"),
            })?;
        Ok(SinkClient {
            http,
            url: format!("{base_url}/v1/charges"),
        })
    }

    /// Asks the sink to charge once for `charge.job`, with `key` as the `Idempotency-Key`.
    ///
    /// # Errors
    /// [`SinkError::Call`] when no answer came within [`CALL_TIMEOUT`] or the answer was
    /// neither a charge nor a `409`.
    pub async fn charge(
        &self,
        charge: &Charge,
        key: Option<&str>,
    ) -> Result<ChargeAnswer, SinkError> {
        let err = |detail: String| SinkError::Call {
            job: charge.job.clone(),
            detail,
        };
        let mut req = self.http.post(&self.url).json(charge);
        if let Some(k) = key {
            req = req.header(IDEMPOTENCY_HEADER, k);
        }
        let resp = req.send().await.map_err(|e| err(e.to_string()))?;
        match resp.status() {
            reqwest::StatusCode::CONFLICT => Ok(ChargeAnswer {
                outcome: Outcome::Conflict,
                charge_id: None,
            }),
            s if s.is_success() => {
                let body: Body = resp.json().await.map_err(|e| err(e.to_string()))?;
                Ok(ChargeAnswer {
                    outcome: if body.replayed {
                        Outcome::Replayed
                    } else {
                        Outcome::Applied
                    },
                    charge_id: Some(body.charge_id),
                })
            }
            s => {
                let text = resp.text().await.unwrap_or_default();
                Err(err(format!("the sink answered {s}: {text}")))
            }
        }
    }
}
