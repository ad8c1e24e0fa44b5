//! An embedded Toxiproxy-compatible server and an async client for the Toxiproxy HTTP API.
//!
//! Every node of a topology is reached through a proxy, and every network fault is driven
//! through this HTTP API, so the same nemesis code runs against Shopify's Toxiproxy and
//! against [`ToxiproxyServer`] (no Toxiproxy binary can be installed on the test machines).
//!
//! ## Server
//! [`ToxiproxyServer::start`] serves Toxiproxy 2.x's routes and JSON shapes (source:
//! Shopify/toxiproxy `api.go`, `toxic_collection.go`, README):
//!
//! | route | reply |
//! |---|---|
//! | `GET /version` | 200 `{"version": "lockbench-…"}` |
//! | `GET /proxies` | 200 `{name: proxy}` |
//! | `POST /proxies` | 201 proxy; 409 duplicate; 400 bad body / missing `name` or `upstream` |
//! | `POST /populate` | 201 `{"proxies": [...]}`; create-or-replace |
//! | `GET`/`POST`(`PATCH`)/`DELETE /proxies/{name}` | 200 / 200 / 204; 404 unknown |
//! | `GET`/`POST /proxies/{name}/toxics` | 200 list / 200 toxic; 409 duplicate; 400 bad stream, type, attributes or toxicity |
//! | `GET`/`POST`(`PATCH`)/`DELETE /proxies/{name}/toxics/{toxic}` | 200 / 200 / 204; 404 unknown |
//! | `POST /reset` | 204: every proxy enabled, every toxic removed in **both** streams |
//!
//! Errors are `{"error": "proxy not found", "status": 404}`. `enabled: false` closes the
//! listener and every open connection before the reply is sent; re-enabling listens on the
//! same port again. A listen address that cannot be bound is a 500 naming the address.
//!
//! Toxics (units as in Toxiproxy): `latency` (`latency`, `jitter` ms), `timeout` (`timeout`
//! ms; 0 = black hole that holds the connection open and drops data), `bandwidth` (`rate`
//! KB/s), `slow_close` (`delay` ms), `slicer` (`average_size`, `size_variation` bytes,
//! `delay` µs), `limit_data` (`bytes`), `reset_peer` (`timeout` ms, then TCP RST via
//! `SO_LINGER` 0). Each has `stream` (default `downstream`), `toxicity` (0..=1, default 1,
//! drawn once per connection) and `name` (default `<type>_<stream>`).
//!
//! **Extension:** `latency` and `jitter` accept fractional milliseconds (`{"latency": 0.5}`
//! = 500 µs, 1 µs resolution; see [`LatencyMs`]). Whole values are still written back as JSON
//! integers, so Toxiproxy's integer clients keep working. A latency toxic of L adds L per
//! direction it is on, within ~0.1 ms: waits shorter than tokio's 1 ms timer tick end on a
//! precise timer thread (`timer.rs`), and jitter is drawn in µs.
//!
//! ## Engine: our own, not `noxious`
//! The `noxious` 1.0.4 crate (a Rust port of Toxiproxy's core) was evaluated and not used:
//! it has no `reset_peer` toxic, its remove-all clears only upstream toxics (so `/reset` would
//! leave downstream faults in place), and its REST layer is not published, so the HTTP API
//! would have to be written anyway. The engine here is small: one listener per proxy (accept
//! queue of 4096, bounded back-off on accept errors such as EMFILE), two pumps per connection
//! (`link.rs`). A pump with no toxic on its direction forwards each readable chunk straight to
//! the other socket (the fast path: no allocation, channel or toxic work per chunk); while a
//! toxic affects its direction it runs the toxic pipeline (`pipeline.rs`), which reads chunks
//! with their arrival time and writes them through the toxic chain. The toxic set lives in a
//! `tokio::sync::watch` channel, so toxics added, updated or removed apply to live
//! connections at once, and a direction returns to the fast path once its last toxic is gone.
//!
//! Each proxy counts the bytes it receives and sends per direction, as Toxiproxy's
//! `-proxy-metrics` do (`traffic.rs`, read through [`TrafficProbe`]; `lockbench --metrics`
//! serves them under Toxiproxy's metric names).
//!
//! ## Client: our own, not `toxiproxy_rust` or `noxious-client`
//! `toxiproxy_rust` 0.1.6 is blocking (panics when dropped inside tokio), panics on
//! connection errors, has no `reset_peer` and allows one toxic per type and stream;
//! `noxious-client` targets noxious's own server. [`ToxiproxyClient`] is a small async client
//! on `reqwest` with typed models ([`ToxicKind`], [`ProxyInfo`]) and typed errors
//! ([`ToxiproxyClientError`]) carrying status and body; it never panics.

mod api;
mod client;
mod error;
mod link;
mod model;
mod pipeline;
mod proxy;
mod server;
mod timer;
mod toxics;
mod traffic;

pub use api::SERVER_VERSION;
pub use client::{ToxiproxyClient, ToxiproxyClientError, DEFAULT_REQUEST_TIMEOUT};
pub use error::ToxiproxyError;
pub use model::{
    ApiErrorBody, LatencyMs, PopulateReply, ProxyInfo, ProxySpec, ProxyUpdate, Stream, ToxicInfo,
    ToxicKind, ToxicSpec,
};
pub use server::ToxiproxyServer;
pub use traffic::{LinkTraffic, TrafficProbe};
