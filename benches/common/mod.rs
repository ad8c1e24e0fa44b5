//! Set-up shared by the bench binaries: the plot font and the criterion defaults.
//!
//! Criterion draws its HTML-report plots with `plotters`. When `plotters` is built with its
//! `ab_glyph` feature (the report module's dependency turns it on, and feature unification applies
//! it to criterion’s copy too), text is laid out with fonts registered through
//! [`plotters::style::register_font`], never with system fonts, which this machine does not
//! have. Without a registered `sans-serif` font, criterion's plotting fails. The font is
//! DejaVu Sans, embedded from `assets/` (licence in `assets/DejaVuSans-LICENSE.txt`).

use plotters::style::{register_font, FontStyle};

/// The report module's embedded DejaVu Sans, so the benches need no system font.
use lockbench::report::FONT_BYTES as DEJAVU_SANS;

/// Registers DejaVu Sans as the `sans-serif` family (criterion's plot font) in every style
/// criterion asks for. Call once at the start of a bench binary, before any plot is drawn.
///
/// # Panics
/// If the embedded bytes are not a font (the asset file is corrupt).
pub fn register_plot_font() {
    for family in ["sans-serif", "serif", "monospace"] {
        for style in [FontStyle::Normal, FontStyle::Bold, FontStyle::Italic] {
            if register_font(family, style, DEJAVU_SANS).is_err() {
                panic!("assets/DejaVuSans.ttf is not a valid font file");
            }
        }
    }
}
