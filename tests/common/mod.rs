//! Shared rigs of the integration tests (each test crate uses what it needs):
//! - [`cli`]: the real `lockbench` binary, its output, exit codes and result files;
//! - [`docker`]: whether a Docker engine answers, and how a docker test skips;
//! - [`toxiproxy`]: an embedded Toxiproxy server, alone or in front of a private redis-server;
//! - [`nemesis`]: a proxied local topology with its Nemesis, torn down leaving no process;
//! - [`node`]: local redis-server nodes a test owns, and looking at their keys;
//! - [`strategy`]: lock clients on those nodes;
//! - [`ledger`]: hand-built ledger rows for checker tests;
//! - [`report`]: how the reports print figures;
//! - [`process`], [`wait`]: process probes and bounded waits.
#![allow(dead_code)]

pub mod cli;
pub mod docker;
pub mod ledger;
pub mod nemesis;
pub mod node;
pub mod process;
pub mod redis;
pub mod report;
pub mod strategy;
pub mod toxiproxy;
pub mod wait;
