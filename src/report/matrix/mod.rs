//! The strategy × fault matrix's files, every one read off the one [`MatrixReport`] and
//! written by [`write_matrix_files`] from the list [`EXPORTERS`].
//!
//! | file | what |
//! |---|---|
//! | [`export`] | `matrix.json`, `matrix.csv`, `matrix.md` and the text pieces `lockbench matrix` prints |
//! | [`html`] | `matrix.html` |
//! | [`works`] | a run over several kinds of work: `works.json`, and `matrix.md`/`matrix.html` answering per kind |

pub mod export;
pub mod html;
pub mod works;

pub use works::write_works_files;

use std::path::Path;

use crate::matrix::MatrixReport;
use crate::report::common::export::{write_all, Exporter, Text};
use crate::report::error::ReportError;

/// The matrix's files, in the order written.
pub const EXPORTERS: [Text<MatrixReport>; 4] = [
    Text {
        file_name: "matrix.json",
        render: |r| {
            serde_json::to_string_pretty(r)
                .map(|mut s| {
                    s.push('\n');
                    s
                })
                .map_err(|e| ReportError::Serialize {
                    what: "matrix.json".into(),
                    message: e.to_string(),
                })
        },
    },
    Text {
        file_name: "matrix.csv",
        render: |r| Ok(export::matrix_csv(r)),
    },
    Text {
        file_name: "matrix.md",
        render: |r| Ok(export::matrix_md(r)),
    },
    Text {
        file_name: "matrix.html",
        render: |r| Ok(html::render_matrix_html(r)),
    },
];

/// Writes every file of [`EXPORTERS`] into `dir`.
///
/// # Errors
/// [`ReportError::Write`] naming the file.
pub fn write_matrix_files(dir: &Path, r: &MatrixReport) -> Result<(), ReportError> {
    let list: Vec<&dyn Exporter<MatrixReport>> = EXPORTERS
        .iter()
        .map(|e| e as &dyn Exporter<MatrixReport>)
        .collect();
    write_all(dir, r, &list).map(|_| ())
}
