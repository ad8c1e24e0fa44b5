//! Orchestration: what a test is made of and how it runs, in the order a run uses them.
//!
//! | module | concept |
//! |---|---|
//! | [`config`] | validated run options built from the CLI or a scenario file |
//! | [`experiment`] | one audited strategy run: driver + history + ledger + nemesis + checker in one directory |
//! | [`scenario`] | `chaos/*.toml` scenario files: workload + nemesis schedule + expected verdicts |
//! | [`chaos`] | a scenario file run end to end: proxied topology + strategies + nemesis schedule + checker vs expected verdicts |
//! | [`matrix`] | every strategy × every fault class on one workload, several trials per cell, and the decision table |
//! | [`trials`] | a scenario run N times (own seed, nodes and directory per trial): "as claimed in k/N" per expectation |

pub mod chaos;
pub mod config;
pub mod experiment;
pub mod matrix;
pub mod scenario;
pub mod trials;
