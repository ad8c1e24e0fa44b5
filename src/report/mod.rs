//! Reports: what people read to choose a lock strategy.
//!
//! Three report kinds, each in its own folder, over a few shared pieces; the folders import
//! only downward (`common` ← `run` ← `comparison`; `common` ← `matrix`), checked by
//! `tests/layers.rs`.
//!
//! | folder | what |
//! |---|---|
//! | [`common`] | HTML pieces and the page frame ([`common::html`]), drawing a plot to SVG + PNG with the embedded font ([`common::figure`]), atomic writes |
//! | [`run`] | one run: [`ReportInput`] and its loading, spectra, plots, the client timeline, incidents, `report.html` and its JSON / CSV / Markdown, the baseline comparison |
//! | [`comparison`] | across runs: [`compare`], its decision table, `comparison.html` and its JSON / CSV / Markdown |
//! | [`matrix`] | the strategy × fault matrix's `matrix.json`, `.csv`, `.md` and `matrix.html` |

pub mod common;
pub mod comparison;
mod error;
pub mod matrix;
pub mod run;

pub use common::figure::{register_embedded_font, RenderedPlot, FONT_BYTES};
pub use comparison::compare::{
    compare, ComparisonReport, ComparisonRow, HeatCell, Need, Recommendation,
};
pub use comparison::html::{render_comparison_html, write_comparison, ComparisonFiles};
pub use error::ReportError;
pub use run::baseline::{baseline, BaselineComparison, BaselineRow};
pub use run::html::{render_run_html, write_run_report, RunReportFiles};
pub use run::input::{
    anomaly_kind, AnomalyKind, AnomalyMark, FaultMark, ReportInput, StrategyPercentiles,
    StrategyVerdict, Verdict,
};
pub use run::load::{load_run_dir, load_run_dirs, validate_run_dirs};
pub use run::percentiles::{parse_hgrm, spectrum_from_histogram};
