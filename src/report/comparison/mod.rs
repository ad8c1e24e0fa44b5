//! The comparison across runs: `comparison.html` and its files.
//!
//! | file | what |
//! |---|---|
//! | [`compare`] | the comparison rows, the heat map and the decision table per need |
//! | `bars` | the bar plots (latency, throughput, availability) |
//! | [`html`] | `comparison.html` and its files |
//! | `export` | its JSON / CSV / Markdown |

mod bars;
pub mod compare;
mod export;
pub mod html;
