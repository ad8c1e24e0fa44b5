//! `file:line:col` for errors found after parsing (a node that does not exist, a fault past
//! the end): a second, lenient pass over the text keeps the span of every key validation may
//! complain about.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

/// A key validation can point at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A top-level key (`topology`, `strategies`).
    Top(&'static str),
    /// The `i`-th name in `strategies`.
    Strategy(usize),
    /// A key of `[workload]`.
    Workload(&'static str),
    /// A key of the `i`-th `[[nemesis]]` step (`None` = the step itself).
    Nemesis(usize, Option<String>),
    /// The `[expect.<strategy>]` table, or one of its keys.
    Expect(String, Option<&'static str>),
}

type Table = BTreeMap<String, Spanned<toml::Value>>;

#[derive(Debug, Default, Deserialize)]
struct Doc {
    #[serde(default)]
    topology: Option<Spanned<toml::Value>>,
    #[serde(default)]
    strategies: Option<Spanned<Vec<Spanned<toml::Value>>>>,
    #[serde(default)]
    workers: Option<Spanned<toml::Value>>,
    #[serde(default)]
    launcher: Option<Spanned<toml::Value>>,
    #[serde(default)]
    workload: Option<Spanned<Table>>,
    #[serde(default)]
    nemesis: Vec<Spanned<Table>>,
    #[serde(default)]
    expect: BTreeMap<String, Spanned<Table>>,
}

/// Spans of a scenario file's keys.
#[derive(Debug, Default)]
pub struct Locator {
    text: String,
    doc: Doc,
}

impl Locator {
    /// Reads the spans of `text` (a text that does not parse gives no spans).
    pub fn new(text: &str) -> Self {
        Self {
            text: text.to_string(),
            doc: toml::from_str(text).unwrap_or_default(),
        }
    }

    /// 1-based (line, column) of `place`, falling back to its enclosing table; `None` when
    /// neither is in the file.
    pub fn find(&self, place: &Place) -> Option<(usize, usize)> {
        let d = &self.doc;
        let span = match place {
            Place::Top("topology") => d.topology.as_ref().map(Spanned::span),
            Place::Top("workers") if d.workers.is_some() => d.workers.as_ref().map(Spanned::span),
            Place::Top("launcher") if d.launcher.is_some() => {
                d.launcher.as_ref().map(Spanned::span)
            }
            Place::Top(_) => d.strategies.as_ref().map(Spanned::span),
            Place::Strategy(i) => d
                .strategies
                .as_ref()
                .map(|s| s.get_ref().get(*i).map_or_else(|| s.span(), Spanned::span)),
            Place::Workload(key) => d.workload.as_ref().map(|w| {
                w.get_ref()
                    .get(*key)
                    .map_or_else(|| w.span(), Spanned::span)
            }),
            Place::Nemesis(i, key) => d.nemesis.get(*i).map(|step| {
                key.as_ref()
                    .and_then(|k| step.get_ref().get(k))
                    .map_or_else(|| step.span(), Spanned::span)
            }),
            Place::Expect(name, key) => d.expect.get(name).map(|e| {
                key.and_then(|k| e.get_ref().get(k))
                    .map_or_else(|| e.span(), Spanned::span)
            }),
        }?;
        Some(super::line_col(&self.text, span.start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "topology = \"five\"\nstrategies = [\"single\", \"redlock\"]\n\n[workload]\nclients = 4\n\n[[nemesis]]\nat = \"1s\"\nfault = \"kill\"\ntarget = \"n7\"\n\n[expect.redlock]\nverdict = \"valid\"\n";

    #[test]
    fn finds_keys_and_falls_back_to_their_table() {
        let l = Locator::new(TEXT);
        assert_eq!(l.find(&Place::Strategy(1)), Some((2, 25)));
        assert_eq!(l.find(&Place::Workload("clients")), Some((5, 11)));
        assert_eq!(
            l.find(&Place::Nemesis(0, Some("target".into()))),
            Some((10, 10))
        );
        let step = l.find(&Place::Nemesis(0, Some("duration".into()))).unwrap();
        assert!(step.0 >= 7 && step.0 <= 10, "{step:?}");
        assert_eq!(
            l.find(&Place::Expect("redlock".into(), Some("verdict"))),
            Some((13, 11))
        );
        assert_eq!(l.find(&Place::Nemesis(3, None)), None);
    }
}
