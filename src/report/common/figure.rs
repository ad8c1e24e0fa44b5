//! Drawing a plot once per backend: an SVG string (inlined in the HTML and saved as
//! `<stem>.svg`) and a PNG file (`<stem>.png`), with the embedded font registered first.

use std::error::Error;
use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::write::write_atomic;
use crate::report::error::ReportError;

/// The font family every plot uses; registered from the embedded DejaVu Sans.
pub(crate) const FONT: &str = "sans-serif";

/// DejaVu Sans (Bitstream Vera licence, see `assets/DejaVuSans-LICENSE.txt`), embedded so
/// plots render on machines without system fonts.
/// DejaVu Sans (Debian `fonts-dejavu-core`, licence in `assets/DejaVuSans-LICENSE.txt`), the
/// one font every plot of the suite (reports and criterion's bench plots) is drawn with.
pub static FONT_BYTES: &[u8] = include_bytes!("../../../assets/DejaVuSans.ttf");

/// Registers the embedded font with plotters (once per process). Every plot function calls
/// it; call it yourself before drawing other plotters charts (e.g. criterion's) in-process.
///
/// # Errors
/// [`ReportError::Font`] if the embedded bytes are not a font (a broken checkout).
pub fn register_embedded_font() -> Result<(), ReportError> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES)
                .map_err(|_| "ab_glyph could not parse it".to_string())
        })
        .clone()
        .map_err(ReportError::Font)
}

/// Result type of figure drawing code.
pub(crate) type DrawResult = Result<(), Box<dyn Error>>;

/// A plot that can be drawn on any plotters backend.
pub(crate) trait Figure {
    /// Pixel size `(width, height)`.
    fn size(&self) -> (u32, u32);
    /// Draws the whole figure on `root`.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult
    where
        DB::ErrorType: 'static;
}

/// A drawn plot: its file stem and SVG text.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedPlot {
    /// File stem, e.g. `percentiles` or `timeline-single`.
    pub stem: String,
    /// Human title, used as the figure caption.
    pub title: String,
    /// The SVG document (starts with `<svg`), ready to inline.
    pub svg: String,
}

/// Draws `fig` to an SVG string and, when `dir` is given, writes `<stem>.svg` and
/// `<stem>.png` there.
pub(crate) fn render<F: Figure>(
    fig: &F,
    stem: &str,
    title: &str,
    dir: Option<&Path>,
) -> Result<RenderedPlot, ReportError> {
    register_embedded_font()?;
    let plot_err = |e: Box<dyn Error>| ReportError::Plot {
        plot: stem.to_string(),
        message: e.to_string(),
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, fig.size()).into_drawing_area();
        fig.draw(&root).map_err(plot_err)?;
        root.present().map_err(|e| plot_err(Box::new(e)))?;
    }
    if let Some(dir) = dir {
        write_atomic(&dir.join(format!("{stem}.svg")), svg.as_bytes())?;
        let png = dir.join(format!("{stem}.png"));
        let tmp = dir.join(format!(".{stem}.tmp.png"));
        {
            let root = BitMapBackend::new(&tmp, fig.size()).into_drawing_area();
            fig.draw(&root).map_err(plot_err)?;
            root.present().map_err(|e| plot_err(Box::new(e)))?;
        }
        std::fs::rename(&tmp, &png).map_err(|source| ReportError::Write { path: png, source })?;
    }
    Ok(RenderedPlot {
        stem: stem.to_string(),
        title: title.to_string(),
        svg,
    })
}

/// Distinct colors for strategies (and scenarios), by index; wraps after ten.
pub(crate) fn series_color(i: usize) -> RGBColor {
    const COLORS: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    COLORS[i % COLORS.len()]
}

/// Shade used for fault windows.
pub(crate) const FAULT_SHADE: RGBColor = RGBColor(255, 170, 60);

/// Keeps `[A-Za-z0-9._-]` of a name for use in a file stem (other characters become `-`);
/// an empty name becomes `unnamed`, so a stem never has an empty part.
pub(crate) fn file_safe(name: &str) -> String {
    let s = crate::results::run_dir::sanitize(name.trim());
    if s.is_empty() {
        "unnamed".to_string()
    } else {
        s
    }
}

/// A log axis label at 1, 2 and 5 × 10ⁿ ms only (plotters offers every integer multiple).
pub(crate) fn ms_label_sparse(v: f64) -> String {
    if v <= 0.0 {
        return String::new();
    }
    let mantissa = v / 10f64.powf(v.log10().floor());
    if [1.0, 2.0, 5.0, 10.0]
        .iter()
        .any(|m| (mantissa - m).abs() < 0.02)
    {
        ms_label(v)
    } else {
        String::new()
    }
}

/// A latency in ms for a log axis label: `0.05`, `0.5`, `5`, `500`, `5000`.
pub(crate) fn ms_label(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}").trim_end_matches(".0").to_string()
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}
