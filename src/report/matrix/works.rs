//! The files of a matrix over several kinds of work, every one read off the one
//! [`WorksReport`] and written by [`write_works_files`]: `works.json`, `matrix.md` and
//! `matrix.html` (the answer per kind of work, each kind linking its own matrix's files
//! under `<kind>/`).

use std::fmt::Write as _;
use std::path::Path;

use maud::{html, Markup, PreEscaped};

use super::export::recommendation_md;
use super::html::recommendation;
use crate::matrix::{WorkSection, WorksReport};
use crate::report::common::export::{write_all, Exporter, Text};
use crate::report::common::html::page;
use crate::report::error::ReportError;

/// The files of a run over several kinds of work, in the order written.
pub const WORKS_EXPORTERS: [Text<WorksReport>; 3] = [
    Text {
        file_name: "works.json",
        render: |r| {
            serde_json::to_string_pretty(r)
                .map(|mut s| {
                    s.push('\n');
                    s
                })
                .map_err(|e| ReportError::Serialize {
                    what: "works.json".into(),
                    message: e.to_string(),
                })
        },
    },
    Text {
        file_name: "matrix.md",
        render: |r| Ok(works_md(r)),
    },
    Text {
        file_name: "matrix.html",
        render: |r| Ok(works_html(r)),
    },
];

/// Writes every file of [`WORKS_EXPORTERS`] into `dir` (the run's directory).
///
/// # Errors
/// [`ReportError::Write`] naming the file.
pub fn write_works_files(dir: &Path, r: &WorksReport) -> Result<(), ReportError> {
    let list: Vec<&dyn Exporter<WorksReport>> = WORKS_EXPORTERS
        .iter()
        .map(|e| e as &dyn Exporter<WorksReport>)
        .collect();
    write_all(dir, r, &list).map(|_| ())
}

/// Where a kind stands, in words: `waiting`, `running: 412 exposed episodes`, `completed …`.
fn standing(s: &WorkSection) -> String {
    if !s.started {
        return "waiting for the kinds before it".to_string();
    }
    let rows = match s.rows.len() {
        1 => "1 row".to_string(),
        n => format!("{n} rows"),
    };
    format!(
        "{}: {rows}, {} cells, {} exposed episodes, {:.1} min",
        s.status,
        s.cells,
        s.exposed,
        s.wall_ms as f64 / 60_000.0
    )
}

/// `matrix.md`: the decision per kind of work, each linking its own matrix.md.
pub fn works_md(r: &WorksReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Strategy × fault matrix per kind of work\n\n{} · status **{}** · workload: {}\n",
        r.run_id, r.status, r.workload
    );
    if let Some(link) = &r.linked_report {
        let _ = writeln!(out, "Claim scenarios: [{link}]({link})\n");
    }
    for s in &r.works {
        let _ = writeln!(
            out,
            "## {}\n\n{} · [the whole matrix]({}/matrix.md)\n",
            s.title(),
            standing(s),
            s.dir
        );
        if !s.contradictions.is_empty() {
            let _ = writeln!(
                out,
                "The matrix contradicts {} claim(s): {}\n",
                s.contradictions.len(),
                s.contradictions.join(", ")
            );
        }
        if s.started {
            recommendation_md(&mut out, &s.decision.efficiency);
            recommendation_md(&mut out, &s.decision.correctness);
        }
    }
    out
}

/// One kind's section of `matrix.html`.
fn section(s: &WorkSection) -> Markup {
    html! {
        section.work #(format!("work-{}", s.dir)) data-work=(s.work) data-started=(s.started)
            data-status=(s.status) data-cells=(s.cells) data-exposed=(s.exposed)
            data-efficiency=(s.decision.efficiency.recommended.join(","))
            data-correctness=(s.decision.correctness.recommended.join(",")) {
            h2 { (s.title()) }
            p.meta {
                (standing(s)) " · "
                a href=(format!("{}/matrix.html", s.dir)) { "its heat map, claims and trials" }
            }
            @if !s.contradictions.is_empty() {
                p.regressed {
                    "The matrix contradicts " (s.contradictions.len()) " claim(s): "
                    (s.contradictions.join(", "))
                }
            }
            @if s.started {
                (PreEscaped(recommendation(&s.decision.efficiency, s.thin[0].clone())))
                (PreEscaped(recommendation(&s.decision.correctness, s.thin[1].clone())))
            }
        }
    }
}

/// `matrix.html`: the answer per kind of work, each kind's section with its decision table
/// and a link to its own matrix.
pub fn works_html(r: &WorksReport) -> String {
    let kinds: Vec<String> = r.works.iter().map(WorkSection::title).collect();
    let body = html! {
        h1 { "Strategy × fault matrix per kind of work" }
        p.meta #matrix-meta data-status=(r.status) data-works=(r.works.len()) {
            (r.run_id) " · status " b { (r.status) } " · workload: " (r.workload)
        }
        p {
            "Which lock depends on what a duplicate execution damages. Each kind of work ran as "
            "a matrix of its own (" (kinds.join(", ")) "); each answers for its kind only."
        }
        @if let Some(link) = &r.linked_report {
            p {
                "Claim scenarios (each seed article's claim as an experiment): "
                a #claims-link href=(link) { (link) }
            }
        }
        @for s in &r.works {
            (section(s))
        }
    };
    page("lockbench matrix per kind of work", &body.into_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::WorkKind;
    use crate::matrix::{FaultClass, MatrixPlan, MatrixReport, MatrixWorkload};
    use crate::strategy::StrategyKind;

    #[test]
    fn each_kind_gets_its_section_its_link_and_its_answer_once_started() {
        let plan = |work| {
            MatrixPlan::new(
                vec![StrategyKind::Single],
                vec![FaultClass::None],
                1,
                MatrixWorkload {
                    work,
                    ..MatrixWorkload::quick()
                },
            )
        };
        let a = MatrixReport::new(&plan(WorkKind::External), "t");
        let b = MatrixReport::new(&plan(WorkKind::Job), "t");
        let mut w = WorksReport::new("t", &[("external".into(), &a), ("job".into(), &b)]);
        w.update(0, &a);
        let page = works_html(&w);
        assert!(page.contains("id=\"work-external\""), "{page}");
        assert!(page.contains("href=\"external/matrix.html\""));
        assert!(page.contains("href=\"job/matrix.html\""));
        assert!(page.contains("data-started=\"true\""));
        assert!(page.contains("waiting for the kinds before it"));
        assert_eq!(
            page.matches("<h3>").count(),
            2,
            "only the started kind answers"
        );
        let md = works_md(&w);
        assert!(md.contains("## external work"), "{md}");
        assert!(md.contains("## job work"));
        assert!(md.contains("(job/matrix.md)"));
    }
}
