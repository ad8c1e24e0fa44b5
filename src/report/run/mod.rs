//! One run's report: `report.html` and its files.
//!
//! | file | what |
//! |---|---|
//! | [`input`] | [`ReportInput`](input::ReportInput): the run summary plus verdicts, anomalies and fault windows; how the checker's kinds are classed |
//! | [`percentiles`] | spectra from a live histogram or a `.hgrm` file |
//! | [`load`] | reading and validating run directories (`summary.json`, `<strategy>/checker.json`, `.hgrm`) |
//! | `spectrum` / `timeline` | the plots |
//! | [`lanes`] / `lanes_svg` | the client timeline: one lane per client from `history.jsonl`, as inline SVG with zoom |
//! | `incidents` | each strategy's incidents with their cause, holders and witness |
//! | [`html`] | the per-run `report.html` and its files |
//! | [`export`] | JSON, CSV and Markdown of one run, and the list of the run's files |
//! | [`junit`] | JUnit XML of one run (a test case per strategy), for CI |
//! | [`baseline`] | comparing a run with a saved one, flagging regressions |

pub mod baseline;
pub mod export;
pub mod html;
mod incidents;
pub mod input;
pub mod junit;
pub mod lanes;
mod lanes_svg;
pub mod load;
pub mod percentiles;
mod spectrum;
mod timeline;
