//! `lockbench toxiproxy`: the embedded Toxiproxy-compatible server on its own.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use lockbench::topology::reaper;
use lockbench::toxiproxy::{ProxySpec, ToxiproxyClient, ToxiproxyServer};

/// Options of `lockbench toxiproxy`.
#[derive(Debug, Args)]
pub struct ToxiproxyArgs {
    /// HTTP API address (Toxiproxy's default is 127.0.0.1:8474).
    #[arg(long, conflicts_with_all = ["host", "port"])]
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
                .with_context(|| format!("--host {host:?} is not an IP address"))?
        }
    };
    let proxies: Vec<ProxySpec> = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("{}: not a JSON array of proxies", path.display()))?
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
