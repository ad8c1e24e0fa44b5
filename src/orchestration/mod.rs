//! Orchestration: what a test is made of and how it runs, in the order a run uses them. The
//! strategy × fault matrix is a client of this module and lives beside it ([`crate::matrix`]).
//!
//! | module | concept |
//! |---|---|
//! | [`test`] | one test as one value (topology, client, workload, nemesis, checker, expectations) and the one source of defaults; written to `config.json` and read back by `run --config` |
//! | [`expectation`] | what a claim predicts for a strategy, held against the checker's report |
//! | [`ledger_choice`] | `--ledger`: the SQLite file, a PostgreSQL database by URL, or a `postgres` server started for the run |
//! | [`experiment`] | one audited strategy run: driver + history + ledger + nemesis + checker in one directory |
//! | [`runner`] | the one runner: a [`test::Test`]'s topology (local or docker, proxied or direct) + each strategy + the nemesis schedule + the checker vs the expectations |
//! | [`scenario`] | `chaos/*.toml` scenario files, parsed, validated and resolved into a [`test::Test`] |
//! | [`trials`] | a test run N times (own seed, nodes and directory per trial): "as claimed in k/N" per expectation |
//! | [`conformance`] | `lockbench adapter check`: a fixed script that checks an adapter keeps the adapter protocol |
//! | [`workers`] | multi-process runs: `lockbench worker`, the coordinator's control API, launchers, merged history and latency with clock bounds |

pub mod conformance;
pub mod expectation;
pub mod experiment;
pub mod ledger_choice;
pub mod runner;
pub mod scenario;
pub mod test;
pub mod trials;
pub mod workers;
