//! Reports: what people read to choose a lock strategy.
//!
//! | file | what |
//! |---|---|
//! | [`input`] | [`ReportInput`]: the run summary plus verdicts, anomalies and fault windows; [`anomaly_kind`]: how the checker's kinds are classed |
//! | [`percentiles`] | spectra from a live histogram or a `.hgrm` file |
//! | [`load`] | reading and validating run directories (`summary.json`, `<strategy>/checker.json`, `.hgrm`) |
//! | [`figure`] | drawing a plot to SVG + PNG with the embedded font |
//! | [`spectrum`] / [`timeline`] / [`bars`] | the plots |
//! | [`lanes`] / `lanes_svg` | the client timeline: one lane per client from `history.jsonl`, as inline SVG with zoom |
//! | `incidents_html` | each strategy's incidents with their cause, holders and witness |
//! | [`run_report`] | the per-run `report.html` and its files |
//! | [`export`] | JSON, CSV and Markdown of one run |
//! | [`baseline`] | comparing a run with a saved one, flagging regressions |
//! | [`compare`] | the comparison across runs and its decision table |
//! | [`matrix_export`] / [`matrix_html`] | the strategy × fault matrix's `matrix.json`, `.csv`, `.md` and `matrix.html` |
//! | [`comparison_html`] | `comparison.html` and its files; `comparison_export`: its JSON / CSV / Markdown |

mod bars;
pub mod baseline;
pub mod compare;
mod comparison_export;
pub mod comparison_html;
mod error;
pub mod export;
pub mod figure;
mod html;
mod incidents_html;
pub mod input;
pub mod lanes;
mod lanes_svg;
pub mod load;
pub mod matrix_export;
pub mod matrix_html;
pub mod percentiles;
pub mod run_report;
mod spectrum;
mod timeline;
mod write;

pub use baseline::{baseline, BaselineComparison, BaselineRow};
pub use compare::{compare, ComparisonReport, ComparisonRow, HeatCell, Need, Recommendation};
pub use comparison_html::{render_comparison_html, write_comparison, ComparisonFiles};
pub use error::ReportError;
pub use figure::{register_embedded_font, RenderedPlot, FONT_BYTES};
pub use input::{
    anomaly_kind, AnomalyKind, AnomalyMark, FaultMark, ReportInput, StrategyPercentiles,
    StrategyVerdict, Verdict,
};
pub use load::{load_run_dir, load_run_dirs, validate_run_dirs};
pub use percentiles::{parse_hgrm, spectrum_from_histogram};
pub use run_report::{render_run_html, write_run_report, RunReportFiles};
