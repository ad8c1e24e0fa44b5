//! Thin evidence, cell by cell: what makes an answer's evidence thin (the recommended
//! strategies' cells with fewer than [`THIN_EXPOSED`] exposed episodes, claims the matrix
//! contradicts, cells without evidence, strategies without a probe), the note the decision
//! table carries ([`ThinEvidence::note`]), and the same in brief for a terminal
//! ([`ThinEvidence::brief`]): counts by strategy and fault and the worst few cells, the full
//! list being in `matrix.md`.

use std::collections::BTreeMap;

use super::{
    cells_of, cite, contradictions, joined, measured, probe_of, ClaimAgreement, ProbeRecord,
    THIN_EXPOSED,
};
use crate::matrix::record::CellRecord;

/// Cells listed in full in a terminal note; more are summed up ([`ThinEvidence::brief`]).
pub const BRIEF_CELLS: usize = 6;

/// The worst cells (fewest exposed episodes) a summary names.
pub const WORST_CELLS: usize = 3;

/// The answer a note belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Duplicate work is tolerable.
    Efficiency,
    /// A second writer corrupts data.
    Correctness,
}

/// One cell named in a note: its row, its column and its exposed episodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThinCell {
    /// Row label.
    pub strategy: String,
    /// Fault class.
    pub fault: String,
    /// Exposed episodes (of those that count).
    pub exposed: u32,
}

impl ThinCell {
    fn of(c: &CellRecord) -> Self {
        Self {
            strategy: c.strategy.clone(),
            fault: c.fault.clone(),
            exposed: c.episodes.exposed,
        }
    }

    /// `strategy × fault`.
    pub fn cite(&self) -> String {
        format!("{} × {}", self.strategy, self.fault)
    }
}

/// What makes one answer's evidence thin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThinEvidence {
    /// Which answer.
    pub need: Need,
    /// Strategies without a usable uncontended probe, row order (efficiency only).
    pub unprobed: Vec<String>,
    /// Each recommended strategy (in its order) with its cells that have some but fewer than
    /// [`THIN_EXPOSED`] exposed episodes, column order; strategies without one left out.
    pub few: Vec<(String, Vec<ThinCell>)>,
    /// One sentence per claim the matrix contradicts.
    pub contradicted: Vec<String>,
    /// Cells (any strategy) without checked evidence, `strategy × fault`, in cell order.
    pub no_evidence: Vec<String>,
}

impl ThinEvidence {
    /// The thin evidence of the answer `need` that recommends `recommended`: `strategies`
    /// are the rows, `probes` matter for efficiency only.
    pub fn of(
        need: Need,
        recommended: &[String],
        strategies: &[String],
        cells: &[CellRecord],
        probes: &[ProbeRecord],
        claims: &[ClaimAgreement],
    ) -> Self {
        let unprobed = match need {
            Need::Efficiency => strategies
                .iter()
                .filter(|s| !probe_of(probes, s).is_some_and(measured))
                .cloned()
                .collect(),
            Need::Correctness => Vec::new(),
        };
        let few = recommended
            .iter()
            .map(|s| {
                let thin: Vec<ThinCell> = cells_of(cells, s)
                    .into_iter()
                    .filter(|c| c.episodes.exposed > 0 && c.episodes.exposed < THIN_EXPOSED)
                    .map(ThinCell::of)
                    .collect();
                (s.clone(), thin)
            })
            .filter(|(_, thin)| !thin.is_empty())
            .collect();
        let no_evidence = cells
            .iter()
            .filter(|c| c.trials_checked == 0)
            .map(cite)
            .collect();
        Self {
            need,
            unprobed,
            few,
            contradicted: contradictions(claims),
            no_evidence,
        }
    }

    /// Every cell with too few exposed episodes, strategy by strategy.
    pub fn few_cells(&self) -> impl Iterator<Item = &ThinCell> {
        self.few.iter().flat_map(|(_, cells)| cells)
    }

    /// The note in full, as the decision table carries it ([`super::Recommendation::thin`]);
    /// `None` when nothing is thin.
    pub fn note(&self) -> Option<String> {
        let mut notes = Vec::new();
        if !self.unprobed.is_empty() {
            notes.push(self.unprobed_note());
        }
        for (_, cells) in &self.few {
            notes.push(match self.need {
                Need::Efficiency => {
                    let thin: Vec<String> = cells.iter().map(ThinCell::cite).collect();
                    format!(
                        "fewer than {THIN_EXPOSED} exposed episodes in {}",
                        thin.join(", ")
                    )
                }
                Need::Correctness => {
                    let thin: Vec<String> = cells
                        .iter()
                        .map(|c| format!("{} ({} exposed)", c.cite(), c.exposed))
                        .collect();
                    format!(
                        "fewer than {THIN_EXPOSED} exposed episodes in {}: the bound is weaker than < 10 % per episode",
                        thin.join(", ")
                    )
                }
            });
        }
        notes.extend(self.contradicted.iter().cloned());
        notes.extend(not_run_note(&self.no_evidence));
        joined(notes)
    }

    /// The note for a terminal: in full ([`ThinEvidence::note`]) when it names at most
    /// [`BRIEF_CELLS`] cells, else the cells in brief (how many, by strategy and by fault, the
    /// [`WORST_CELLS`] with the fewest exposed episodes), the contradicted claims counted, and
    /// where the full list is.
    pub fn brief(&self) -> Option<String> {
        let few: Vec<ThinCell> = self.few_cells().cloned().collect();
        if few.len() + self.no_evidence.len() <= BRIEF_CELLS {
            return self.note();
        }
        let mut notes = Vec::new();
        if !self.unprobed.is_empty() {
            notes.push(self.unprobed_note());
        }
        if !few.is_empty() {
            let mut s = format!(
                "{} cell(s) of the recommended strategies with fewer than {THIN_EXPOSED} exposed episodes ({})",
                few.len(),
                cells_in_brief(&few, WORST_CELLS)
            );
            if self.need == Need::Correctness {
                s.push_str(": the bound is weaker than < 10 % per episode");
            }
            notes.push(s);
        }
        if !self.contradicted.is_empty() {
            notes.push(format!(
                "{} claim(s) contradicted (see the CONTRADICTION lines)",
                self.contradicted.len()
            ));
        }
        if !self.no_evidence.is_empty() {
            let first: Vec<&str> = self
                .no_evidence
                .iter()
                .take(WORST_CELLS)
                .map(String::as_str)
                .collect();
            let more = if self.no_evidence.len() > first.len() {
                ", …"
            } else {
                ""
            };
            notes.push(format!(
                "no evidence in {} cell(s) ({}{more})",
                self.no_evidence.len(),
                first.join(", ")
            ));
        }
        notes.push("every cell in matrix.md, \"Thin evidence\"".into());
        joined(notes)
    }

    fn unprobed_note(&self) -> String {
        format!(
            "no uncontended probe for {} (not ranked)",
            self.unprobed.join(", ")
        )
    }
}

/// Cells without checked evidence as one note.
fn not_run_note(no_evidence: &[String]) -> Option<String> {
    (!no_evidence.is_empty()).then(|| format!("no evidence in {}", no_evidence.join(", ")))
}

/// A list of cells in brief: `by strategy: a 3, b 1; by fault: failover 2, none 2; fewest:
/// a × failover (2), …` — counts in order of first appearance (by fault: most first), then
/// the `worst` cells with the fewest exposed episodes (ties in list order).
pub fn cells_in_brief(cells: &[ThinCell], worst: usize) -> String {
    let by_strategy = counts(cells.iter().map(|c| c.strategy.as_str()));
    let mut by_fault = counts(cells.iter().map(|c| c.fault.as_str()));
    by_fault.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
    let mut fewest: Vec<&ThinCell> = cells.iter().collect();
    fewest.sort_by_key(|c| c.exposed);
    let fewest: Vec<String> = fewest
        .iter()
        .take(worst)
        .map(|c| format!("{} ({})", c.cite(), c.exposed))
        .collect();
    let list = |v: &[(&str, usize)]| {
        v.iter()
            .map(|(name, n)| format!("{name} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "by strategy: {}; by fault: {}; fewest: {}",
        list(&by_strategy),
        list(&by_fault),
        fewest.join(", ")
    )
}

/// How often each name occurs, in order of first appearance.
fn counts<'a>(names: impl Iterator<Item = &'a str>) -> Vec<(&'a str, usize)> {
    let mut order: Vec<&str> = Vec::new();
    let mut n: BTreeMap<&str, usize> = BTreeMap::new();
    for name in names {
        let count = n.entry(name).or_insert(0);
        if *count == 0 {
            order.push(name);
        }
        *count += 1;
    }
    order.into_iter().map(|name| (name, n[name])).collect()
}

/// One row of `matrix.md`'s "Thin evidence" table: a cell and the answers it weakens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThinRow {
    /// The cell.
    pub cell: ThinCell,
    /// Whether it has no checked evidence at all (else some, but fewer than
    /// [`THIN_EXPOSED`], exposed episodes).
    pub no_evidence: bool,
    /// The answers whose note names it (`efficiency`, `correctness`).
    pub weakens: Vec<Need>,
}

/// Every cell either answer's note names, in the order of `cells` (the report's), each
/// once with the answers it weakens.
pub fn thin_rows(cells: &[CellRecord], answers: &[&ThinEvidence]) -> Vec<ThinRow> {
    let mut rows = Vec::new();
    for c in cells {
        let cited = cite(c);
        let mut weakens = Vec::new();
        let mut no_evidence = false;
        for e in answers {
            let few = e
                .few_cells()
                .any(|t| t.strategy == c.strategy && t.fault == c.fault);
            let empty = e.no_evidence.contains(&cited);
            no_evidence |= empty;
            if few || empty {
                weakens.push(e.need);
            }
        }
        if !weakens.is_empty() {
            rows.push(ThinRow {
                cell: ThinCell::of(c),
                no_evidence,
                weakens,
            });
        }
    }
    rows
}

impl Need {
    /// `efficiency` or `correctness`, as the decision table names the answer.
    pub fn name(self) -> &'static str {
        match self {
            Need::Efficiency => "efficiency",
            Need::Correctness => "correctness",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::claims::tests::cell;

    fn thin(strategy: &str, fault: &str, exposed: u32) -> ThinCell {
        ThinCell {
            strategy: strategy.into(),
            fault: fault.into(),
            exposed,
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// `n` thin cells of `strategy`, one per fault `f1`, `f2`, … with 1, 2, … exposed.
    fn many(strategy: &str, n: u32) -> Vec<ThinCell> {
        (1..=n)
            .map(|i| thin(strategy, &format!("f{i}"), i))
            .collect()
    }

    fn evidence(need: Need, few: Vec<(&str, Vec<ThinCell>)>) -> ThinEvidence {
        ThinEvidence {
            need,
            unprobed: Vec::new(),
            few: few.into_iter().map(|(s, c)| (s.to_string(), c)).collect(),
            contradicted: Vec::new(),
            no_evidence: Vec::new(),
        }
    }

    #[test]
    fn the_note_lists_every_cell_in_the_decision_tables_words() {
        let few = vec![("single", vec![thin("single", "failover", 12)])];
        let mut e = evidence(Need::Correctness, few.clone());
        e.contradicted = vec!["claim 05b (…) is contradicted: x".into()];
        e.no_evidence = names(&["etcd-lease × none"]);
        assert_eq!(
            e.note().unwrap(),
            "fewer than 30 exposed episodes in single × failover (12 exposed): the bound is weaker than \
             < 10 % per episode; claim 05b (…) is contradicted: x; no evidence in etcd-lease × none"
        );
        let mut e = evidence(Need::Efficiency, few);
        e.unprobed = names(&["redlock"]);
        assert_eq!(
            e.note().unwrap(),
            "no uncontended probe for redlock (not ranked); fewer than 30 exposed episodes in single × failover"
        );
        assert_eq!(evidence(Need::Efficiency, Vec::new()).note(), None);
    }

    #[test]
    fn a_short_note_is_kept_whole_and_a_long_one_summed_up_with_the_worst_cells() {
        let e = evidence(Need::Correctness, vec![("single", many("single", 6))]);
        assert_eq!(e.brief(), e.note());
        let mut cells = many("single", 4);
        cells.push(thin("single", "f1", 9));
        let mut e = evidence(
            Need::Correctness,
            vec![("single", cells), ("etcd-lease", many("etcd-lease", 3))],
        );
        e.contradicted = names(&["claim 05b …", "claim 09 …"]);
        e.no_evidence = names(&["a × x", "b × y", "c × z", "d × w"]);
        let brief = e.brief().unwrap();
        assert_eq!(
            brief,
            "8 cell(s) of the recommended strategies with fewer than 30 exposed episodes (by strategy: \
             single 5, etcd-lease 3; by fault: f1 3, f2 2, f3 2, f4 1; fewest: single × f1 (1), \
             etcd-lease × f1 (1), single × f2 (2)): the bound is weaker than < 10 % per episode; \
             2 claim(s) contradicted (see the CONTRADICTION lines); no evidence in 4 cell(s) \
             (a × x, b × y, c × z, …); every cell in matrix.md, \"Thin evidence\""
        );
        assert!(brief.len() < e.note().unwrap().len());
        // Efficiency: no bound sentence; the unprobed strategies stay named.
        let mut e = evidence(Need::Efficiency, vec![("single", many("single", 7))]);
        e.unprobed = names(&["redlock"]);
        let brief = e.brief().unwrap();
        assert!(
            brief.starts_with("no uncontended probe for redlock (not ranked); 7 cell(s)"),
            "{brief}"
        );
        assert!(!brief.contains("the bound"), "{brief}");
    }

    #[test]
    fn counts_keep_the_order_of_first_appearance_and_faults_go_most_first() {
        let cells = vec![
            thin("b", "none", 20),
            thin("a", "failover", 3),
            thin("b", "failover", 5),
            thin("a", "latency", 3),
        ];
        assert_eq!(
            cells_in_brief(&cells, 2),
            "by strategy: b 2, a 2; by fault: failover 2, none 1, latency 1; fewest: a × failover (3), a × latency (3)"
        );
    }

    #[test]
    fn the_evidence_is_read_off_the_cells_of_the_recommended_strategies() {
        let mut cells = vec![
            cell("single", "none", 30, 0, 0),
            cell("single", "failover", 12, 0, 0),
            cell("single", "client-pause", 0, 0, 0),
            cell("redlock", "failover", 4, 0, 0),
            cell("etcd-lease", "none", 5, 0, 0),
        ];
        cells[4].trials_checked = 0;
        let rows = names(&["single", "redlock", "etcd-lease"]);
        let e = ThinEvidence::of(
            Need::Efficiency,
            &names(&["single"]),
            &rows,
            &cells,
            &[],
            &[],
        );
        assert_eq!(e.unprobed, rows);
        assert_eq!(
            e.few,
            vec![("single".to_string(), vec![thin("single", "failover", 12)])]
        );
        assert_eq!(e.no_evidence, names(&["etcd-lease × none"]));
        let c = ThinEvidence::of(
            Need::Correctness,
            &names(&["single", "redlock"]),
            &rows,
            &cells,
            &[],
            &[],
        );
        assert!(c.unprobed.is_empty());
        assert_eq!(c.few_cells().count(), 2);
        // matrix.md's table: each cell once, with the answers it weakens, in cell order.
        let table = thin_rows(&cells, &[&e, &c]);
        let got: Vec<(String, bool, Vec<Need>)> = table
            .iter()
            .map(|r| (r.cell.cite(), r.no_evidence, r.weakens.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "single × failover".to_string(),
                    false,
                    vec![Need::Efficiency, Need::Correctness]
                ),
                (
                    "redlock × failover".to_string(),
                    false,
                    vec![Need::Correctness]
                ),
                (
                    "etcd-lease × none".to_string(),
                    true,
                    vec![Need::Efficiency, Need::Correctness]
                ),
            ]
        );
    }
}
