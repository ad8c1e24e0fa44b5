//! [`Exporter`]: one file a report writes from the one struct its exporters read, and
//! [`write_all`], the one writer of a report's files.
//!
//! Each report keeps its list of exporters in one place (`run::export::exporters`,
//! `comparison::export::EXPORTERS`, `matrix::EXPORTERS`); adding a format is one
//! exporter and one entry there.

use std::path::{Path, PathBuf};

use super::write::write_atomic;
use crate::report::error::ReportError;

/// One file of a report, rendered from `R` (the report's one input: [`RunReport`] for a run,
/// `ComparisonReport`, `MatrixReport`).
///
/// [`RunReport`]: crate::report::run::export::RunReport
pub trait Exporter<R: ?Sized> {
    /// The file's name in the report directory (`report.json`).
    fn file_name(&self) -> &'static str;

    /// The file's contents.
    ///
    /// # Errors
    /// [`ReportError`] when the report cannot be rendered (e.g. JSON serialization).
    fn render(&self, report: &R) -> Result<String, ReportError>;
}

/// A text exporter that is a function of the report alone.
pub struct Text<R: ?Sized> {
    /// The file's name.
    pub file_name: &'static str,
    /// Renders it.
    pub render: fn(&R) -> Result<String, ReportError>,
}

impl<R: ?Sized> Exporter<R> for Text<R> {
    fn file_name(&self) -> &'static str {
        self.file_name
    }

    fn render(&self, report: &R) -> Result<String, ReportError> {
        (self.render)(report)
    }
}

/// Renders every exporter and writes its file into `dir` (atomically, in list order).
/// Returns the paths written, in that order.
///
/// # Errors
/// The first exporter's [`ReportError`], or [`ReportError::Write`] naming the file that could
/// not be written; the files before it are on disk.
pub fn write_all<R: ?Sized>(
    dir: &Path,
    report: &R,
    exporters: &[&dyn Exporter<R>],
) -> Result<Vec<PathBuf>, ReportError> {
    let mut written = Vec::with_capacity(exporters.len());
    for exporter in exporters {
        let path = dir.join(exporter.file_name());
        write_atomic(&path, exporter.render(report)?.as_bytes())?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_each_file_in_order_and_stops_at_the_first_error() {
        let dir = tempfile::tempdir().unwrap();
        let upper = Text::<str> {
            file_name: "upper.txt",
            render: |s| Ok(s.to_uppercase()),
        };
        let len = Text::<str> {
            file_name: "len.txt",
            render: |s| Ok(s.len().to_string()),
        };
        let paths = write_all(dir.path(), "abc", &[&upper, &len]).unwrap();
        assert_eq!(
            paths,
            [dir.path().join("upper.txt"), dir.path().join("len.txt")]
        );
        assert_eq!(std::fs::read_to_string(&paths[0]).unwrap(), "ABC");
        assert_eq!(std::fs::read_to_string(&paths[1]).unwrap(), "3");
        let gone = dir.path().join("missing");
        let err = write_all(&gone, "abc", &[&upper]).unwrap_err();
        assert!(
            matches!(err, ReportError::Write { ref path, .. } if path.starts_with(&gone)),
            "{err}"
        );
    }
}
