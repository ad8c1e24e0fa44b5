//! [`HistoryReader`]: streams `history.jsonl` back, with line numbers in its errors.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::{HistoryError, HistoryEvent};

/// Streaming reader of `history.jsonl`; yields events in file order with 1-based line numbers in errors.
pub struct HistoryReader<R = BufReader<File>> {
    path: PathBuf,
    input: R,
    line_no: u64,
    buf: String,
    done: bool,
}

/// Opens a history file for streaming.
///
/// Errors: [`HistoryError::Io`] if it cannot be opened. Each item is an event or an error:
/// [`HistoryError::Truncated`] for an incomplete last line (the events before it are intact),
/// [`HistoryError::Parse`] for a bad line elsewhere. Blank lines are skipped.
pub fn read_history(path: impl AsRef<Path>) -> Result<HistoryReader, HistoryError> {
    let path = path.as_ref().to_path_buf();
    let file = File::open(&path).map_err(|source| HistoryError::Io {
        path: path.clone(),
        source,
    })?;
    Ok(HistoryReader::new(
        path,
        BufReader::with_capacity(1 << 16, file),
    ))
}

impl<R: BufRead> HistoryReader<R> {
    /// Reads from any buffered input; `path` is only used in error messages.
    pub fn new(path: impl Into<PathBuf>, input: R) -> Self {
        Self {
            path: path.into(),
            input,
            line_no: 0,
            buf: String::with_capacity(512),
            done: false,
        }
    }
}

impl<R: BufRead> Iterator for HistoryReader<R> {
    type Item = Result<HistoryEvent, HistoryError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            self.buf.clear();
            let n = match self.input.read_line(&mut self.buf) {
                Ok(n) => n,
                Err(source) => {
                    self.done = true;
                    return Some(Err(HistoryError::Io {
                        path: self.path.clone(),
                        source,
                    }));
                }
            };
            if n == 0 {
                self.done = true;
                return None;
            }
            self.line_no += 1;
            let complete = self.buf.ends_with('\n');
            let text = self.buf.trim();
            if text.is_empty() {
                continue;
            }
            return Some(match serde_json::from_str::<HistoryEvent>(text) {
                Ok(e) => Ok(e),
                Err(_) if !complete => {
                    self.done = true;
                    Err(HistoryError::Truncated {
                        path: self.path.clone(),
                        line: self.line_no,
                    })
                }
                Err(source) => Err(HistoryError::Parse {
                    path: self.path.clone(),
                    line: self.line_no,
                    source,
                }),
            });
        }
        None
    }
}
