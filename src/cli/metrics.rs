//! `--metrics ADDR` and `--metrics-linger` of `run`, `chaos` and `matrix`: the live
//! OpenMetrics endpoint ([`lockbench::results::MetricsEndpoint`]), bound before anything
//! starts and kept up for the linger after the run.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use lockbench::results::{LiveMetrics, MetricsEndpoint};

use super::exit;

/// The live-metrics flags, shared by the commands that run tests.
#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// Serve live metrics in the OpenMetrics text format at http://ADDR/metrics while the run
    /// goes (e.g. 127.0.0.1:9464): ops by strategy/op/outcome, acquire latency histograms,
    /// holders per resource, active faults, harness lag, checker anomalies (after each check),
    /// proxy bytes (Toxiproxy's metric names). Off by default; a port in use is refused
    /// before anything starts.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// How long --metrics keeps serving after the run, for a last scrape (0 to 10m).
    #[arg(long, value_name = "DURATION", requires = "metrics", default_value = "5s", value_parser = super::args::any_duration)]
    pub metrics_linger: Duration,
}

impl MetricsArgs {
    /// Binds the endpoint when `--metrics` is given (exit 2 when the address cannot be bound
    /// or the linger is too long) and says where it serves.
    pub fn start(&self) -> Result<Option<MetricsEndpoint>> {
        let Some(addr) = self.metrics else {
            return Ok(None);
        };
        let ep = MetricsEndpoint::start(addr, LiveMetrics::new(), self.metrics_linger)
            .map_err(exit::bad_input)?;
        eprintln!(
            "metrics: http://{}/metrics (kept up {} after the run)",
            ep.addr(),
            humantime::format_duration(self.metrics_linger)
        );
        Ok(Some(ep))
    }
}

/// Keeps `endpoint` up for its linger after the run (none after an interrupted run), ended
/// early by Ctrl-C or SIGTERM, then stops it.
pub async fn finish(endpoint: Option<MetricsEndpoint>, interrupted: bool) {
    let Some(ep) = endpoint else { return };
    if interrupted {
        drop(ep);
        return;
    }
    ep.finish(async {
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
        match term {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    })
    .await;
}
