//! What the run, comparison and matrix reports share.
//!
//! | file | what |
//! |---|---|
//! | [`html`] | escaping, number formats, the verdict badge and the page frame with its stylesheet |
//! | [`figure`] | drawing a plot to SVG + PNG with the embedded font, series colours, axis labels |
//! | [`export`] | the [`export::Exporter`] trait and [`export::write_all`], the one writer of a report's files |
//! | `write` | atomic file writes and the output-directory check |

pub mod export;
pub mod figure;
pub(crate) mod html;
pub(crate) mod write;
