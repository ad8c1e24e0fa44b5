//! # lockbench
//!
//! Benchmarks and chaos-tests distributed locks built on Redis, next to PostgreSQL advisory
//! locks and etcd leases, and audits every run for mutual-exclusion violations. The vocabulary follows Jepsen: a run is a **topology** (the
//! Redis nodes) + a **strategy** (how a lock is taken) + a **workload** (the clients) + a
//! **nemesis** (the faults) + a **checker** (the verdict).
//!
//! ## Module map
//! | module | concept |
//! |---|---|
//! | [`atomic_file`] | the one result-file writer: temporary file + rename, so no reader sees half a file |
//! | [`variant_names`] | how enum variants are named in text: strum derives with the serde rule, checked per enum |
//! | [`work`] | what a critical section protects (`--work`): row, compute, external, job |
//! | [`node`] | a server endpoint (name + URL, password-redacted) and connection timeouts |
//! | [`topology`] | starting, reaching and tearing down servers: Redis `single`, `five`, `sentinel`; `postgres`; `etcd`; `external`; any of them behind Toxiproxy (`ProxiedTopology`); the cluster bus cut per pair of nodes with nft ([`topology::bus_cut`]); which strategy runs on which ([`topology::pairing`]) |
//! | [`lease`] | the acquire/release contract of every lock backend: the lease, what a release found, why an acquire failed |
//! | [`strategy`] | the lock strategies (`single`, `redlock`, fenced variants, negative controls, `pg-advisory`, `etcd-lease`, and `adapter:*`: a lock library driven through an adapter process, `docs/adapter-protocol.md`), one backend file per lock service, retry and watchdog |
//! | [`nemesis`] | faults on a schedule: its vocabulary (fault kinds, targets, steps and their checks), inject and undo per fault family (`network`, `process`, `clock`, `client`, `failover`, `cluster`; `faults` dispatches and heals), fault windows, the per-client hooks of client faults |
//! | [`toxiproxy`] | an embedded Toxiproxy-compatible server and an async client for its HTTP API |
//! | [`history`] | the invoke/ok/fail/info operation record (events, the recorder, the `history.jsonl` writer and reader) |
//! | [`ledger`] | the protected resource: an SQLite file, or a schema in PostgreSQL (`--ledger`), that applies the fencing check itself |
//! | [`sink`] | the side-effect sink of `external` work: an HTTP "payment API" on loopback that cannot check a fencing token, with idempotency keys, and its table `sink.sqlite` |
//! | [`recording`] | how the history writer and the ledger thread yield the CPU to what they record (idle priority while their backlog is small) |
//! | [`checker`] | reads history + ledger and returns a verdict with anomalies |
//! | [`driver`] | the workload driver: tokio clients, pacing, latency histograms |
//! | [`orchestration`] | what a test is made of and how it runs: [`orchestration::test`] (one test as one value, the one source of defaults), [`orchestration::runner`] (the one runner), [`orchestration::experiment`] (one audited strategy run), [`orchestration::scenario`] (`chaos/*.toml` files into tests), [`orchestration::trials`] (k/N over trials) |
//! | [`matrix`] | every strategy × fault class on one workload, several trials per cell, and the decision table: a client of the runner, as `chaos` is; the matrix reports read its records |
//! | [`report`] | per-run (`report::run`), comparison (`report::comparison`) and matrix (`report::matrix`) reports over shared page and figure parts (`report::common`): HTML with inline SVG plots, PNG/SVG files, JSON/CSV/Markdown, baseline regressions |
//! | [`results`] | the run summary struct and its exporters (JSON, `.hgrm`, table), and the live OpenMetrics endpoint (`--metrics`) |
//!
//! ## Layers
//! Lowest first; a module imports only from its own layer and the layers before it, and files
//! of different modules never form an import cycle (`tests/layers.rs` checks both as part of
//! `cargo test`, with the same list):
//!
//! `atomic_file`, `duration_ms`, `node`, `variant_names`, `work` → `history`, `ledger`, `recording`,
//! `lease`, `sink` → `checker` → `strategy` → `toxiproxy` → `topology` → `nemesis` → `driver` →
//! `results` → `orchestration` → `matrix` → `report` → `cli` (the binary's module)

pub mod atomic_file;
pub mod checker;
pub mod driver;
pub mod duration_ms;
pub mod history;
pub mod lease;
pub mod ledger;
pub mod matrix;
pub mod nemesis;
pub mod node;
pub mod orchestration;
pub mod recording;
pub mod report;
pub mod results;
pub mod sink;
pub mod strategy;
pub mod topology;
pub mod toxiproxy;
pub mod variant_names;
pub mod work;
