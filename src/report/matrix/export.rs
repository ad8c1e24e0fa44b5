//! The matrix's files: `matrix.json` (the [`MatrixReport`] itself), `matrix.csv` (one row per
//! cell), `matrix.md` (the table strategies × faults, every cell's episodes, the uncontended
//! probes, the claims agreement, the decision table, the fault definitions) and `matrix.html`
//! ([`super::html`]), each written atomically by [`super::write_matrix_files`]. The text pieces
//! here are also what `lockbench matrix` prints when it ends.

use std::fmt::Write as _;

use crate::matrix::decision::Recommendation;
use crate::matrix::run::wall_text;
use crate::matrix::setup::{label_setup, PgSetup, RedisSetup};
use crate::matrix::{CellRecord, ClaimAgreement, MatrixReport, TrialRecord, TrialStatus};
use crate::report::common::html::latency;

/// The anomaly kinds the CSV gives a column each (count and rate per 1,000 sections).
pub const CSV_KINDS: [&str; 6] = [
    "mutex-violation",
    "believed-overlap",
    "stale-write-accepted",
    "stale-write-rejected",
    "lost-update",
    "token-regression",
];

fn opt(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| format!("{v:.3}"))
}

fn opt_u(v: Option<u64>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

/// A duration in ms for people (`140 ms`, `1.25 s`), or `-`.
pub fn ms_text(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v < 1000.0 => format!("{v:.0} ms"),
        Some(v) => format!("{:.2} s", v / 1000.0),
    }
}

/// The damage rate a heat map colours a cell by: k/n when k > 0, the upper bound of the 95 %
/// interval when k = 0 (few exposed episodes then read warm: they rule little out); `None`
/// without exposed episodes.
pub fn heat_value(c: &CellRecord) -> Option<f64> {
    c.episodes
        .damage_rate
        .map(|i| if i.k == 0 { i.high } else { i.point })
}

/// `k/n` exposed episodes with damage and the 95 % interval: `0/31 < 9.2 %`,
/// `3/30 10.0 % (3.5–25.6 %)`; `no exposed episode (12 run)`, `no episode`, `not run`.
pub fn damage_text(c: &CellRecord) -> String {
    let e = &c.episodes;
    match e.damage_rate {
        Some(i) => format!("{}/{} {}", e.damaging, e.exposed, i.text(false)),
        None if c.trials.is_empty() => "not run".into(),
        None if c.trials_checked == 0 && c.failed + c.interrupted > 0 => c.share_text(),
        None if e.total == 0 => "no episode".into(),
        None => format!("no exposed episode ({} run)", e.total),
    }
}

/// The short text of a cell in the grid: `0/31 < 9.2 % · rec 140 ms`, with `· stuck k` when
/// k exposed episodes left the resource stuck.
pub fn cell_text(c: &CellRecord) -> String {
    if c.trials.is_empty() {
        return "not run".into();
    }
    let mut s = damage_text(c);
    if c.episodes.stuck > 0 {
        let _ = write!(s, " · stuck {}", c.episodes.stuck);
    }
    if c.episodes.exposed > 0 {
        let _ = write!(s, " · rec {}", ms_text(c.episodes.recovery_p50_ms));
    }
    s
}

/// Contended acquire p99 of a cell beside its strategy's uncontended probe p50/p99:
/// `contended p99 1.203 s · uncontended p50/p99 310 µs/1.20 ms`.
pub fn latency_text(r: &MatrixReport, c: &CellRecord) -> String {
    let contended = if c.trials_checked == 0 {
        "-".to_string()
    } else {
        latency(c.acquire_p99_us)
    };
    format!(
        "contended p99 {contended} · uncontended p50/p99 {}",
        probe_text(r, &c.strategy)
    )
}

/// A strategy's uncontended probe as `p50/p99` (`310 µs/1.20 ms`), or why there is none.
pub fn probe_text(r: &MatrixReport, strategy: &str) -> String {
    match r.probes.iter().find(|p| p.strategy == strategy) {
        None => "not run".into(),
        Some(p) => match &p.error {
            Some(e) => format!("not measured ({e})"),
            None => format!("{}/{}", latency(p.p50_us), latency(p.p99_us)),
        },
    }
}

/// `matrix.csv`: one row per cell. Rates and shares are fractions, anomaly rates per 1,000
/// critical sections, recovery in ms, latencies µs (contended: the cell's worst trial p99;
/// uncontended: the strategy's probe), throughput ops/s, availability %.
pub fn matrix_csv(r: &MatrixReport) -> String {
    let mut out = String::from(
        "strategy,fault,topology,episodes_total,episodes_exposed,episodes_wanted,damaging,\
         damage_rate,damage_rate_low,damage_rate_high,damage_interval_method,unsafe_belief,stuck,\
         recovery_p50_ms,recovery_p99_ms,first_incident,shortfall,\
         trials_planned,trials_run,trials_checked,invalid,valid,unknown,failed,interrupted,verdict,sections",
    );
    for k in CSV_KINDS {
        let _ = write!(out, ",{k},{k}_per_1000,{k}_per_1000_low,{k}_per_1000_high");
    }
    out.push_str(
        ",stuck_resources,contended_acquire_p50_us,contended_acquire_p99_us,\
         uncontended_acquire_p50_us,uncontended_acquire_p99_us,throughput_ops_s,availability_pct,availability_min_pct\n",
    );
    for c in &r.cells {
        let e = &c.episodes;
        let rate = e.damage_rate;
        let incident = e
            .first_incident
            .as_ref()
            .map_or(String::new(), |i| format!("{}/report.html", i.dir));
        let short = r
            .shortfall(&c.strategy, &c.fault)
            .map_or(String::new(), |s| csv_field(&s.reason));
        let _ = write!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            c.strategy,
            c.fault,
            c.topology,
            e.total,
            e.exposed,
            r.episodes_wanted,
            e.damaging,
            opt(rate.map(|i| i.point)),
            opt(rate.map(|i| i.low)),
            opt(rate.map(|i| i.high)),
            rate.map_or(String::new(), |i| i.method.to_string()),
            e.unsafe_belief,
            e.stuck,
            opt(e.recovery_p50_ms),
            opt(e.recovery_p99_ms),
            incident,
            short,
            c.trials_planned,
            c.trials.len(),
            c.trials_checked,
            c.invalid,
            c.valid,
            c.unknown,
            c.failed,
            c.interrupted,
            c.verdict,
            c.sections
        );
        for k in CSV_KINDS {
            let rate = c.anomalies.get(k).and_then(|a| a.per_section);
            let _ = write!(
                out,
                ",{},{},{},{}",
                c.count(k),
                opt(rate.map(|i| i.point * 1000.0)),
                opt(rate.map(|i| i.low * 1000.0)),
                opt(rate.map(|i| i.high * 1000.0))
            );
        }
        let probe = r.probe(&c.strategy);
        let _ = writeln!(
            out,
            ",{},{},{},{},{},{:.1},{},{}",
            c.stuck_resources,
            c.acquire_p50_us,
            c.acquire_p99_us,
            opt_u(probe.map(|p| p.p50_us)),
            opt_u(probe.map(|p| p.p99_us)),
            c.throughput_ops_s,
            opt(c.availability_pct),
            opt(c.availability_min_pct)
        );
    }
    out
}

/// A CSV field quoted when it holds a comma or a quote.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn md_cell(s: &str) -> String {
    s.replace('|', "/").replace('\n', " ")
}

/// The strategies × faults grid in Markdown: per cell, damaging of exposed episodes with the
/// 95 % interval and recovery p50 (`!` marks a cell contradicting a claim, `*` one short of
/// the exposed episodes wanted).
pub fn matrix_table_md(r: &MatrixReport) -> String {
    let mut out = String::from("| strategy |");
    for f in &r.faults {
        let _ = write!(out, " {} |", f.name);
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(r.faults.len()));
    out.push('\n');
    for s in &r.strategies {
        let _ = write!(out, "| {s} |");
        for f in &r.faults {
            let mut text = r.cell(s, &f.name).map(cell_text).unwrap_or_default();
            if r.shortfall(s, &f.name).is_some() {
                text.push_str(" *");
            }
            if contradicted(r, s, &f.name) {
                text.push_str(" !");
            }
            let _ = write!(out, " {} |", md_cell(&text));
        }
        out.push('\n');
    }
    out
}

fn contradicted(r: &MatrixReport, strategy: &str, fault: &str) -> bool {
    r.claims
        .iter()
        .any(|c| c.strategy == strategy && c.fault == fault && c.agrees == Some(false))
}

/// Every cell on a line: exposed / total episodes, damage with its interval, unsafe belief,
/// stuck, recovery p50/p99, contended p99 beside the uncontended probe, trials, what fell short.
pub fn cells_md(r: &MatrixReport) -> String {
    let mut out = String::from(
        "| cell | exposed / total | damaging (95 % interval) | unsafe belief | stuck | recovery p50 / p99 | \
         acquire: contended p99 · uncontended p50/p99 | trials | first damage | note |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for c in &r.cells {
        let e = &c.episodes;
        let incident = e.first_incident.as_ref().map_or("-".to_string(), |i| {
            format!(
                "[{} t{} ep {}]({}/report.html)",
                i.kind, i.trial, i.episode, i.dir
            )
        });
        let note = r
            .shortfall(&c.strategy, &c.fault)
            .map_or(String::new(), |s| s.reason.clone());
        let _ = writeln!(
            out,
            "| {} × {} | {}/{} | {} | {} | {} | {} / {} | {} | {} of ≤ {} | {} | {} |",
            c.strategy,
            c.fault,
            e.exposed,
            e.total,
            md_cell(&damage_text(c)),
            e.unsafe_belief,
            e.stuck,
            ms_text(e.recovery_p50_ms),
            ms_text(e.recovery_p99_ms),
            md_cell(&latency_text(r, c)),
            c.trials.len(),
            c.trials_planned,
            incident,
            md_cell(&note)
        );
    }
    out
}

/// The uncontended probe per strategy beside the worst contended acquire p99 of its cells.
pub fn probes_md(r: &MatrixReport) -> String {
    let mut out = String::from(
        "| strategy | topology | servers | uncontended acquire p50 | uncontended acquire p99 | \
         contended acquire p99 (worst cell) |\n|---|---|---|---|---|---|\n",
    );
    for s in &r.strategies {
        let contended = r
            .cells
            .iter()
            .filter(|c| &c.strategy == s && c.trials_checked > 0)
            .map(|c| c.acquire_p99_us)
            .max()
            .map_or("-".into(), latency);
        match r.probes.iter().find(|p| &p.strategy == s) {
            Some(p) if p.error.is_none() => {
                let _ = writeln!(
                    out,
                    "| {s} | {} | {} | {} | {} | {contended} |",
                    p.topology,
                    p.servers,
                    latency(p.p50_us),
                    latency(p.p99_us)
                );
            }
            Some(p) => {
                let _ = writeln!(
                    out,
                    "| {s} | {} | {} | not measured: {} | - | {contended} |",
                    p.topology,
                    p.servers,
                    md_cell(p.error.as_deref().unwrap_or_default())
                );
            }
            None => {
                let _ = writeln!(out, "| {s} | - | - | not run | - | {contended} |");
            }
        }
    }
    out
}

/// `agrees`, `CONTRADICTS`, `not judged`.
pub fn agreement_word(c: &ClaimAgreement) -> &'static str {
    match c.agrees {
        Some(true) => "agrees",
        Some(false) => "CONTRADICTS",
        None => "not judged",
    }
}

/// One sentence over the claims-agreement table: `23 of 23 mapped claims agree` (and how many
/// contradict or could not be judged); `None` when no claim maps to a cell.
pub fn claims_count(r: &MatrixReport) -> Option<String> {
    if r.claims.is_empty() {
        return None;
    }
    let n = r.claims.len();
    let agree = r.claims.iter().filter(|c| c.agrees == Some(true)).count();
    let contradict = r.claims.iter().filter(|c| c.agrees == Some(false)).count();
    let mut s = format!("{agree} of {n} mapped claims agree");
    if contradict > 0 {
        let _ = write!(s, ", {contradict} CONTRADICT");
    }
    let unjudged = n - agree - contradict;
    if unjudged > 0 {
        let _ = write!(s, ", {unjudged} not judged (no evidence in the cell)");
    }
    Some(s)
}

/// The claims-agreement table: every claim mapped to a cell, what it says, what the cell
/// shows, and whether they agree (contradictions in capitals), under its count
/// ([`claims_count`]).
pub fn claims_md(r: &MatrixReport) -> String {
    let Some(count) = claims_count(r) else {
        return "No claim scenario maps to a cell of this matrix.\n".into();
    };
    let mut out = format!("{count}.\n\n");
    out.push_str(
        "| claim | cell | the claim says | the cell shows | agreement |\n|---|---|---|---|---|\n",
    );
    for c in &r.claims {
        let _ = writeln!(
            out,
            "| {} ({}) | {} × {} | {} | {} | {} |",
            c.claim,
            c.file,
            c.strategy,
            c.fault,
            c.says,
            md_cell(&c.observed),
            agreement_word(c)
        );
    }
    out
}

/// One line: wall time, exposed episodes and their rate, trials at once (and a back-off).
pub fn run_line(r: &MatrixReport) -> String {
    let mut s = run_facts(r);
    if let Some(b) = &r.jobs.backoff {
        let _ = write!(s, "; {b}");
    }
    s
}

/// [`run_line`] without the harness back-off history (`matrix.html` folds that into a
/// `<details>` element of its own).
pub fn run_facts(r: &MatrixReport) -> String {
    let exposed: u64 = r.cells.iter().map(|c| u64::from(c.episodes.exposed)).sum();
    let total: u64 = r.cells.iter().map(|c| u64::from(c.episodes.total)).sum();
    let set_aside: u64 = r
        .cells
        .iter()
        .map(|c| u64::from(c.episodes.set_aside))
        .sum();
    let trials: usize = r.cells.iter().map(|c| c.trials.len()).sum();
    let rate = r
        .exposed_per_minute
        .map_or("-".into(), |v| format!("{v:.1}"));
    let mut s = format!(
        "Wall time {}; {trials} trials; {exposed} exposed of {total} episodes ({rate} exposed episodes per minute); \
         {} exposed wanted per cell; up to {} trial(s) at once",
        wall_text(r.wall_ms),
        r.episodes_wanted,
        r.jobs.asked.max(1)
    );
    if set_aside > 0 {
        let _ = write!(
            s,
            "; {set_aside} exposed episode(s) set aside because the harness lagged in their span"
        );
    }
    let failed: Vec<&TrialRecord> = r
        .cells
        .iter()
        .flat_map(|c| &c.trials)
        .filter(|t| t.status == TrialStatus::Failed)
        .collect();
    if let Some(first) = failed.first() {
        let _ = write!(
            s,
            "; {} trial(s) failed and count for nothing (first: {}: {})",
            failed.len(),
            first.dir,
            first.error.as_deref().unwrap_or("no error recorded")
        );
    }
    s
}

pub(crate) fn recommendation_md(out: &mut String, r: &Recommendation) {
    let _ = writeln!(out, "**{} lock** — {}\n", r.need, r.rule);
    let _ = writeln!(out, "Answer: **{}**\n", r.answer);
    if let Some(b) = &r.bound {
        let _ = writeln!(out, "Bound: {b}\n");
    }
    if let Some(t) = &r.thin {
        let _ = writeln!(out, "Evidence is thin: {t}\n");
    }
    let _ = writeln!(out, "| strategy | eligible | why |\n|---|---|---|");
    for row in &r.rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            row.strategy,
            if row.eligible { "yes" } else { "no" },
            md_cell(&row.reason)
        );
    }
    out.push('\n');
}

/// The decision table in Markdown (efficiency, then correctness).
pub fn decision_md(r: &MatrixReport) -> String {
    let mut out = String::new();
    recommendation_md(&mut out, &r.decision.efficiency);
    recommendation_md(&mut out, &r.decision.correctness);
    for setup in setups_measured(r) {
        let _ = writeln!(
            out,
            "{setup}
"
        );
    }
    out
}

/// The setups the decision holds for, one paragraph each: PostgreSQL's
/// ([`postgres_setup`]) and the Redis Cluster's ([`cluster_setup`]), when a cell ran there.
pub fn setups_measured(r: &MatrixReport) -> Vec<String> {
    [postgres_setup(r), cluster_setup(r)]
        .into_iter()
        .flatten()
        .collect()
}

/// Which Redis Cluster the matrix measured, when a cell ran on one (`--redis-setups
/// cluster`): its shape and node timeout, naming the rows, and that their other rows ran
/// standalone.
pub fn cluster_setup(r: &MatrixReport) -> Option<String> {
    let mut rows: Vec<&str> = Vec::new();
    for c in r.cells.iter().filter(|c| c.topology == "cluster") {
        if !rows.contains(&c.strategy.as_str()) {
            rows.push(&c.strategy);
        }
    }
    if rows.is_empty() {
        return None;
    }
    let cluster = crate::topology::ClusterSettings {
        node_timeout: r.workload.cluster_node_timeout,
        ..Default::default()
    };
    Some(format!(
        "{}. Rows without `· cluster` ran standalone (one node, Sentinel for failover and \
         single-wait). Claim 20f (the acknowledging replica restarted empty before a takeover) \
         is a scenario only.",
        RedisSetup::cluster_sentence(&rows, &cluster)
    ))
}

/// Which PostgreSQL setup the matrix measured, when a cell ran on PostgreSQL: one sentence
/// per setup of its rows (`--pg-setups`, read off the row labels), naming the rows, so each
/// PostgreSQL answer says what it holds for — directly (each client its own session, no
/// PgBouncer, no application-side pool), or behind PgBouncer in session or transaction mode.
pub fn postgres_setup(r: &MatrixReport) -> Option<String> {
    let mut by_setup: Vec<(PgSetup, Vec<&str>)> = Vec::new();
    for c in r.cells.iter().filter(|c| c.topology == "postgres") {
        let setup = label_setup(&c.strategy).unwrap_or_default();
        match by_setup.iter_mut().find(|(s, _)| *s == setup) {
            Some((_, rows)) if rows.contains(&c.strategy.as_str()) => {}
            Some((_, rows)) => rows.push(&c.strategy),
            None => by_setup.push((setup, vec![&c.strategy])),
        }
    }
    if by_setup.is_empty() {
        return None;
    }
    let mut out: Vec<String> = by_setup
        .iter()
        .map(|(setup, rows)| {
            let what = match setup {
                PgSetup::Direct => "one PostgreSQL server, each client its own session straight \
                                    to it — no PgBouncer, no application-side pool"
                    .to_string(),
                s => format!(
                    "one PostgreSQL server reached {} — clients keep their connection to \
                     PgBouncer, no application-side pool",
                    s.describe()
                ),
            };
            format!("PostgreSQL setup measured ({}): {what}.", rows.join(", "))
        })
        .collect();
    let pooled = by_setup.iter().any(|(s, _)| *s != PgSetup::Direct);
    out.push(if pooled {
        "The setups the matrix does not run are claims 16 (a server timeout) and 19 (an \
         application-side pool) in `chaos/`."
            .to_string()
    } else {
        "Pooled setups are claims 15–19 in `chaos/` (a transaction pooler, a server timeout, \
         a pooled connection returned while it holds a session lock, a late grant), and \
         `--pg-setups` runs these rows behind PgBouncer."
            .to_string()
    });
    Some(out.join(" "))
}

/// `matrix.md`: status, the grid, every cell, probes, claims agreement, decision table, set
/// aside trials, fault definitions.
pub fn matrix_md(r: &MatrixReport) -> String {
    let mut out = format!(
        "# lockbench matrix {}\n\nStatus: {}. {}.\n\nWorkload: {}.\n\n",
        r.run_id,
        r.status,
        run_line(r),
        r.workload.describe()
    );
    let contradictions = r.contradictions();
    if !contradictions.is_empty() {
        out.push_str("**The matrix contradicts these claims:** ");
        let list: Vec<String> = contradictions
            .iter()
            .map(|c| format!("{} ({} × {}: {})", c.claim, c.strategy, c.fault, c.observed))
            .collect();
        out.push_str(&md_cell(&list.join("; ")));
        out.push_str("\n\n");
    }
    out.push_str(
        "## Damaging of exposed episodes (95 % interval) and recovery p50 per cell\n\n\
         An episode is one cycle of the cell's fault (fault, heal, recovery gap); it is exposed \
         when it met what it aimed at (a holder inside, a live lease, an acquire in flight). \
         `*` fewer exposed episodes than wanted (see the note below), `!` contradicts a claim.\n\n",
    );
    out.push_str(&matrix_table_md(r));
    out.push_str("\n## Every cell\n\n");
    out.push_str(&cells_md(r));
    out.push_str("\n## Acquire latency: uncontended probe beside contended p99\n\n");
    out.push_str(
        "Uncontended: one client, no hold, no fault, the strategy's home topology (what the lock \
         itself costs). Contended: the matrix workload, where clients queue for few resources.\n\n",
    );
    out.push_str(&probes_md(r));
    out.push_str("\n## Agreement with the claims\n\n");
    out.push_str(&claims_md(r));
    out.push_str("\n## Decision table\n\n");
    out.push_str(&decision_md(r));
    out.push_str(&thin_evidence_md(r));
    if !r.set_aside.is_empty() {
        out.push_str("## Trials set aside (the harness lagged while they ran beside others)\n\n");
        for t in &r.set_aside {
            let _ = writeln!(
                out,
                "- {} × {}: {} — {}",
                t.strategy,
                t.fault,
                t.dir,
                md_cell(&t.note)
            );
        }
        out.push('\n');
    }
    out.push_str("## Fault classes (what was done, per topology)\n\n| fault | topology | what |\n|---|---|---|\n");
    for f in &r.faults {
        for (topology, what) in &f.what {
            let _ = writeln!(out, "| {} | {topology} | {} |", f.name, md_cell(what));
        }
    }
    out
}

/// `matrix.md`'s "Thin evidence" table: every cell the decision table's thin-evidence notes
/// name (the terminal shows them in brief), with its exposed episodes and the answers it
/// weakens, in cell order; empty when nothing is thin.
pub fn thin_evidence_md(r: &MatrixReport) -> String {
    use crate::matrix::decision::{thin::thin_rows, THIN_EXPOSED};
    let (efficiency, correctness) = r.thin_evidence();
    let rows = thin_rows(&r.cells, &[&efficiency, &correctness]);
    if rows.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "## Thin evidence\n\nThe recommended strategies' cells with fewer than {THIN_EXPOSED} exposed \
         episodes, and the cells without evidence, with the answers they weaken.\n\n\
         | cell | exposed episodes | weakens |\n|---|---|---|\n"
    );
    for row in rows {
        let exposed = if row.no_evidence {
            "no evidence".to_string()
        } else {
            row.cell.exposed.to_string()
        };
        let weakens: Vec<&str> = row.weakens.iter().map(|n| n.name()).collect();
        let _ = writeln!(
            out,
            "| {} | {exposed} | {} |",
            row.cell.cite(),
            weakens.join(", ")
        );
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::{EpisodeTally, Interval};

    fn cell_with(tally: EpisodeTally) -> CellRecord {
        let mut c = CellRecord::fold("single", "failover", "sentinel", "x", 4, Vec::new());
        c.trials.push(crate::matrix::TrialRecord::not_run(
            1,
            1,
            "t1".into(),
            crate::matrix::TrialStatus::Completed,
            None,
        ));
        c.episodes = tally;
        c
    }

    #[test]
    fn the_decision_says_which_postgresql_setup_it_measured_only_when_one_ran() {
        let plan = crate::matrix::MatrixPlan::new(
            vec![
                crate::strategy::StrategyKind::Single,
                crate::strategy::StrategyKind::PgAdvisory,
            ],
            vec![crate::matrix::FaultClass::None],
            1,
            crate::matrix::MatrixWorkload::quick(),
        );
        let r = MatrixReport::new(&plan, "m");
        let setup = postgres_setup(&r).expect("pg-advisory ran on postgres");
        assert!(
            setup.starts_with("PostgreSQL setup measured (pg-advisory): one PostgreSQL server, each client its own session"),
            "{setup}"
        );
        assert!(decision_md(&r).contains("no PgBouncer, no application-side pool"));
        // Behind PgBouncer too: one sentence per setup, naming its rows.
        let pooled = crate::matrix::MatrixPlan {
            pg_setups: vec![PgSetup::Direct, PgSetup::PgbouncerTransaction],
            ..plan.clone()
        };
        let setup = postgres_setup(&MatrixReport::new(&pooled, "m")).unwrap();
        assert!(
            setup.contains("PostgreSQL setup measured (pg-advisory): one PostgreSQL server, each client its own session")
                && setup.contains(
                    "PostgreSQL setup measured (pg-advisory · pgbouncer-transaction): one PostgreSQL server \
                     reached behind PgBouncer in transaction mode (2 server connection(s))"
                ),
            "{setup}"
        );
        let redis_only = crate::matrix::MatrixPlan {
            strategies: vec![crate::strategy::StrategyKind::Single],
            ..plan
        };
        let r = MatrixReport::new(&redis_only, "m");
        assert_eq!(postgres_setup(&r), None);
        assert!(!decision_md(&r).contains("PostgreSQL"));
    }

    #[test]
    fn the_claims_table_opens_with_how_many_agree() {
        let plan = crate::matrix::MatrixPlan::new(
            vec![crate::strategy::StrategyKind::Single],
            vec![crate::matrix::FaultClass::None],
            1,
            crate::matrix::MatrixWorkload::quick(),
        );
        let mut r = MatrixReport::new(&plan, "m");
        r.claims.clear();
        assert_eq!(claims_count(&r), None);
        let claim = |agrees| crate::matrix::claims::ClaimAgreement {
            claim: "04".into(),
            file: "chaos/04-expiry-shorter-than-work.toml".into(),
            strategy: "single".into(),
            fault: "client-pause".into(),
            says: crate::matrix::claims::ClaimSays::Damage,
            observed: "11 of 11 exposed episodes damaging".into(),
            agrees,
        };
        r.claims = vec![claim(Some(true)), claim(Some(true)), claim(None)];
        assert_eq!(
            claims_count(&r).as_deref(),
            Some("2 of 3 mapped claims agree, 1 not judged (no evidence in the cell)")
        );
        r.claims.push(claim(Some(false)));
        assert!(claims_md(&r).starts_with(
            "2 of 4 mapped claims agree, 1 CONTRADICT, 1 not judged (no evidence in the cell).\n\n| claim |"
        ));
        r.claims = vec![claim(Some(true))];
        assert_eq!(
            claims_count(&r).as_deref(),
            Some("1 of 1 mapped claims agree")
        );
    }

    #[test]
    fn a_cell_reads_as_damaging_of_exposed_with_its_interval() {
        let c = cell_with(EpisodeTally {
            total: 40,
            exposed: 30,
            damaging: 3,
            damage_rate: Interval::of(3, 30),
            recovery_p50_ms: Some(140.0),
            ..Default::default()
        });
        assert_eq!(cell_text(&c), "3/30 10.0 % (3.5–25.6 %) · rec 140 ms");
        assert!((heat_value(&c).unwrap() - 0.1).abs() < 1e-9);
        let clean = cell_with(EpisodeTally {
            total: 31,
            exposed: 30,
            damage_rate: Interval::of(0, 30),
            recovery_p50_ms: Some(1250.0),
            ..Default::default()
        });
        assert_eq!(cell_text(&clean), "0/30 < 9.5 % · rec 1.25 s");
        let stuck = cell_with(EpisodeTally {
            total: 10,
            exposed: 10,
            stuck: 10,
            damage_rate: Interval::of(0, 10),
            ..Default::default()
        });
        assert_eq!(cell_text(&stuck), "0/10 < 25.9 % · stuck 10 · rec -");
        // k = 0: coloured by the upper bound, not by 0.
        assert!((heat_value(&clean).unwrap() - 0.0950).abs() < 1e-3);
        let unexposed = cell_with(EpisodeTally {
            total: 12,
            ..Default::default()
        });
        assert_eq!(cell_text(&unexposed), "no exposed episode (12 run)");
        assert_eq!(heat_value(&unexposed), None);
        let not_run = CellRecord::fold("single", "none", "single", "x", 4, Vec::new());
        assert_eq!(cell_text(&not_run), "not run");
    }

    #[test]
    fn csv_fields_with_commas_are_quoted() {
        assert_eq!(csv_field("a, b \"c\""), "\"a, b \"\"c\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
    }
}
