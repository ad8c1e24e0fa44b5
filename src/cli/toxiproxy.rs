//! `lockbench toxiproxy`: the embedded Toxiproxy-compatible server on its own.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use lockbench::topology::reaper;
use lockbench::toxiproxy::{ProxySpec, ToxiproxyClient, ToxiproxyServer};

/// Examples under `lockbench toxiproxy --help`.
const TOXIPROXY_EXAMPLES: &str = "\
Examples:
  lockbench toxiproxy --listen 127.0.0.1:8474
  lockbench toxiproxy --port 8474 --config proxies.json
  curl -X POST 127.0.0.1:8474/proxies/n1/toxics \\
    -d '{\"type\": \"latency\", \"attributes\": {\"latency\": 50}}'

Toxic types: latency, bandwidth, slow_close, timeout, reset_peer, slicer, limit_data.
Exit codes: 0 stopped by SIGINT/SIGTERM, 2 bad input, 4 failed (e.g. the port is taken).";

/// `HOST:PORT` with a message that says which part is wrong.
fn listen_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err("expected HOST:PORT, e.g. 127.0.0.1:8474".into());
    };
    match port.parse::<u64>() {
        Ok(p) if p > u64::from(u16::MAX) => {
            return Err(format!("port {p} is out of range (0-65535)"))
        }
        Err(_) => {
            return Err(format!(
                "port {port:?} is not a number (e.g. 127.0.0.1:8474)"
            ))
        }
        Ok(_) => {}
    }
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Err(format!(
        "{host:?} is not an IP address (e.g. 127.0.0.1, ::1; for a name use --host)"
    ))
}

/// Options of `lockbench toxiproxy`.
#[derive(Debug, Args)]
#[command(after_help = TOXIPROXY_EXAMPLES)]
pub struct ToxiproxyArgs {
    /// HTTP API address HOST:PORT (Toxiproxy's default is 127.0.0.1:8474).
    #[arg(long, conflicts_with_all = ["host", "port"], value_parser = listen_addr)]
    pub listen: Option<SocketAddr>,
    /// API host, as Shopify Toxiproxy's `-host` (default 127.0.0.1; `localhost` allowed).
    #[arg(long)]
    pub host: Option<String>,
    /// API port, as Shopify Toxiproxy's `-port` (default 8474).
    #[arg(long)]
    pub port: Option<u16>,
    /// JSON file with an array of proxies to create at start, as Toxiproxy's `-config`:
    /// `[{"name": "n1", "listen": "0.0.0.0:7001", "upstream": "redis1:6379"}]`.
    #[arg(long, alias = "config-file")]
    pub config: Option<PathBuf>,
}

/// Serves until SIGINT/SIGTERM, then closes every proxy.
pub async fn run(args: ToxiproxyArgs) -> Result<ExitCode> {
    let listen = match args.listen {
        Some(addr) => addr,
        None => {
            let host = match args.host.as_deref() {
                None | Some("localhost") => "127.0.0.1",
                Some(h) => h,
            };
            let port = args.port.unwrap_or(8474);
            format!("{host}:{port}")
                .parse::<SocketAddr>()
                .with_context(|| format!("--host {host:?} is not an IP address"))
                .map_err(super::exit::bad_input)?
        }
    };
    let proxies: Vec<ProxySpec> = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))
                .map_err(super::exit::bad_input)?;
            serde_json::from_str(&text)
                .with_context(|| format!("{}: not a JSON array of proxies", path.display()))
                .map_err(super::exit::bad_input)?
        }
        None => Vec::new(),
    };
    let server = ToxiproxyServer::start(listen).await?;
    if !proxies.is_empty() {
        let client = ToxiproxyClient::new(&server.base_url())?;
        if let Err(e) = client.populate(&proxies).await {
            server.shutdown().await;
            return Err(e).context("cannot create the proxies from --config");
        }
    }
    println!("toxiproxy API listening on {}", server.base_url());
    reaper::termination_signal().await;
    server.shutdown().await;
    Ok(ExitCode::SUCCESS)
}
