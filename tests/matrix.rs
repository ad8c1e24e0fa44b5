//! `lockbench matrix` end to end on real servers started by lockbench:
//!
//! - a small matrix (a negative control and `redlock-fenced` × `none`, `client-pause`,
//!   `clock-jump`, 4 exposed episodes wanted, at most 2 trials per cell, 2 trials at once)
//!   fills every cell with its trials' episodes and the trials' own `summary.json` figures,
//!   stops each cell by the rule (enough exposed episodes, or the bound, said so), and shows
//!   the same figures in matrix.json, .csv, .md and .html;
//! - the claim cells (`single`, `single-fenced` × `failover`; `pg-advisory` × `session-loss`;
//!   `redlock`, `redlock-fenced` × `client-pause`; `setnx-expire` × `client-crash`) as quick
//!   matrices agree with every claim mapped to them, within 10 minutes (about 3 on a quiet
//!   2-core machine: the two failover cells need 10 one-episode trials each);
//! - PostgreSQL rows behind PgBouncer (`--pg-setups direct,pgbouncer-transaction`) are
//!   labelled with their setup, run through a real PgBouncer, and show claim 15: `pg-advisory`
//!   damaged behind the transaction pooler, `pg-advisory-xact` not;
//! - a cluster row (`--redis-setups cluster`) runs its cells on a real six-node Redis
//!   Cluster, failing the lock's shard over episode after episode, and shows claims 20a and
//!   20b: `single` damaged by a shard failover under lag, not by `CLUSTER FAILOVER`;
//! - a matrix over two kinds of work (`--work external,job`) runs a matrix per kind under
//!   `<kind>/` (the claim row in the job one only) and answers per kind on the run's own
//!   `matrix.html`: a fenced lock charges the sink twice under a client pause;
//! - a Ctrl-C keeps the finished cells and leaves no process behind;
//! - bad input exits 2 before anything starts.
//!
//! The matrices run one at a time (each sizes its trials at once to the machine).

mod common;

use std::path::Path;
use std::process::Stdio;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::cli::{assert_refused, expect_code, expect_success, json as read, latest, lockbench};
use common::process::{assert_none_running_under, signal, wait_exit};
use common::wait::wait_for;
use serde_json::Value;

/// The matrices of this file run one at a time: each sizes its trials at once to the machine
/// (and backs off when its harness lags), which two matrices side by side on 2 cores defeat.
fn one_matrix_at_a_time() -> MutexGuard<'static, ()> {
    static MATRIX: Mutex<()> = Mutex::new(());
    MATRIX.lock().unwrap_or_else(|e| e.into_inner())
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// The run line names the failed trials, if any.
fn assert_failed_trials_said(m: &Value, stdout: &str) {
    let failed: u64 = m["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| u(&c["failed"]))
        .sum();
    if failed > 0 {
        let said = format!("{failed} trial(s) failed and count for nothing");
        assert!(stdout.contains(&said), "{said} not in {stdout}");
    }
}

/// An episode that counts as evidence: exposed, and no harness lag in its span (a lagged one
/// carries `harness_lag_us` and is set aside).
fn is_evidence(e: &Value) -> bool {
    e["exposed"] == true && e.get("harness_lag_us").is_none_or(Value::is_null)
}

/// Checks one cell of `matrix.json` against its trials' own files and the stop rule; returns
/// the exposed episodes counted from the trials.
fn check_cell(dir: &Path, m: &Value, c: &Value) -> u64 {
    let name = format!("{} × {}", c["strategy"], c["fault"]);
    let wanted = u(&m["episodes_wanted"]);
    let trials = c["trials"].as_array().unwrap();
    assert!(!trials.is_empty(), "{name}: no trial ran");
    // Trials whose every exposed episode the harness's lag set aside do not count toward the
    // bound, up to as many again.
    let lost_to_lag = trials
        .iter()
        .filter(|t| {
            let e = t["episodes"].as_array().map_or(&[][..], Vec::as_slice);
            e.iter().any(|e| e["exposed"] == true) && !e.iter().any(is_evidence)
        })
        .count() as u64;
    let bound = u(&c["trials_planned"]);
    let counted = trials.len() as u64 - lost_to_lag;
    assert!(counted <= bound, "{name}: more trials than its bound");
    assert!(
        trials.len() as u64 <= 2 * bound,
        "{name}: more than twice its bound"
    );
    let (mut total, mut exposed, mut set_aside, mut damaging) = (0u64, 0u64, 0u64, 0u64);
    let mut failed = 0u64;
    for t in trials {
        if t["status"] == "failed" {
            // A trial whose topology or fault failed counts for nothing, says why, and the
            // cell runs another (the matrix's run line names it).
            let error = t["error"].as_str().unwrap_or_default();
            assert!(
                !error.is_empty(),
                "{name}: a failed trial without its error: {t}"
            );
            eprintln!("{name}: trial {} failed: {error}", t["dir"]);
            assert!(
                t["episodes"].as_array().is_none_or(Vec::is_empty),
                "{name}: {t}"
            );
            failed += 1;
            continue;
        }
        assert_eq!(t["status"], "completed", "{name}: {t}");
        let tdir = dir.join(t["dir"].as_str().unwrap());
        let summary = read(&tdir.join("summary.json"));
        assert_eq!(summary["status"], "completed", "{name}");
        let s = &summary["strategies"][0];
        // A row behind PgBouncer is `strategy · setup`; its trials run the strategy.
        let strategy = c["strategy"].as_str().unwrap().split(" · ").next().unwrap();
        assert_eq!(s["strategy"], strategy);
        let checker = &read(&tdir.join("checker.json"))[strategy];
        // Every figure of the trial record is the trial's own.
        assert_eq!(t["verdict"], checker["verdict"], "{name}");
        assert_eq!(t["sections"], checker["stats"]["sections"], "{name}");
        assert_eq!(t["acquired"], s["acquired"], "{name}");
        assert_eq!(t["acquire_p99_us"], s["acquire_ok"]["p99_us"], "{name}");
        assert_eq!(t["anomaly_counts"], s["check"]["anomaly_counts"], "{name}");
        assert!(u(&t["sections"]) > 0, "{name}: no critical section ran");
        let episodes = t["episodes"].as_array().unwrap();
        assert!(!episodes.is_empty(), "{name}: a trial without episodes");
        for e in episodes {
            total += 1;
            if is_evidence(e) {
                exposed += 1;
                damaging += u64::from(!e["damage"].as_array().unwrap().is_empty());
            } else if e["exposed"] == true {
                // The harness lagged in its span: set aside, with the lag that did it.
                assert!(u(&e["harness_lag_us"]) > 0, "{name}: {e}");
                set_aside += 1;
            }
        }
    }
    // A failed trial is an exception, never the rule (a topology that does not start fails
    // every trial).
    assert_eq!(u(&c["failed"]), failed, "{name}");
    assert!(
        failed * 4 <= trials.len() as u64,
        "{name}: {failed} of {} trials failed",
        trials.len()
    );
    // The cell adds its trials' episodes up.
    let tally = &c["episodes"];
    assert_eq!(u(&tally["total"]), total, "{name}");
    assert_eq!(u(&tally["exposed"]), exposed, "{name}");
    assert_eq!(u(&tally["set_aside"]), set_aside, "{name}");
    assert_eq!(u(&tally["damaging"]), damaging, "{name}");
    if exposed > 0 {
        assert_eq!(u(&tally["damage_rate"]["k"]), damaging, "{name}");
        assert_eq!(u(&tally["damage_rate"]["n"]), exposed, "{name}");
    }
    // It stopped by the rule: enough exposed episodes, or its bound, and then it says so.
    let short = m["shortfalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["strategy"] == c["strategy"] && s["fault"] == c["fault"]);
    if exposed >= wanted {
        assert!(short.is_none(), "{name}: enough, yet short: {short:?}");
        // The last trial was the one that reached it.
        let before: u64 = trials[..trials.len() - 1]
            .iter()
            .flat_map(|t| t["episodes"].as_array().unwrap())
            .filter(|e| is_evidence(e))
            .count() as u64;
        assert!(before < wanted, "{name}: ran a trial it did not need");
    } else {
        assert!(
            counted == bound || trials.len() as u64 == 2 * bound,
            "{name}: short before its bound"
        );
        let short = short.unwrap_or_else(|| panic!("{name}: short without saying so"));
        assert_eq!(u(&short["exposed"]), exposed, "{name}");
    }
    exposed
}

#[test]
fn a_small_matrix_fills_every_cell_with_its_episodes_and_the_trials_own_figures() {
    let _alone = one_matrix_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    // A page to link (as the quick start links the claims' comparison report).
    let claims = tmp.path().join("claims/comparison/comparison.html");
    std::fs::create_dir_all(claims.parent().unwrap()).unwrap();
    std::fs::write(&claims, "<html></html>").unwrap();
    let started = Instant::now();
    let out = lockbench()
        .args([
            "matrix",
            "--quick",
            "--strategies",
            "naive-del,redlock-fenced",
            "--faults",
            "none,client-pause,clock-jump",
            "--episodes",
            "4",
            "--max-trials",
            "2",
            "--jobs",
            "2",
            "--no-progress",
            "--results",
        ])
        .arg(&results)
        .arg("--link-report")
        .arg(&claims)
        .output()
        .unwrap();
    let (stdout, _) = expect_success(&out, "the small matrix");
    eprintln!("small matrix took {:?}\n{stdout}", started.elapsed());
    let dir = latest(&results);
    assert!(dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .ends_with("-matrix"));
    for f in ["matrix.json", "matrix.csv", "matrix.md", "matrix.html"] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let m = read(&dir.join("matrix.json"));
    assert_eq!(m["status"], "completed");
    assert_eq!(m["episodes_wanted"], 4);
    assert_eq!(m["jobs"]["asked"], 2);
    assert_eq!(
        m["linked_report"],
        "../../claims/comparison/comparison.html"
    );
    // The uncontended probe ran for each strategy, before the cells.
    let probes = m["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 2);
    for p in probes {
        assert!(p.get("error").is_none(), "{p}");
        assert!(u(&p["acquires"]) > 0 && u(&p["p50_us"]) > 0, "{p}");
        assert!(u(&p["p99_us"]) >= u(&p["p50_us"]), "{p}");
    }
    let cells = m["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 6);
    assert_failed_trials_said(&m, &stdout);
    let mut exposed_total = 0;
    for c in cells {
        exposed_total += check_cell(&dir, &m, c);
    }
    assert!(exposed_total > 0, "no episode exposed anywhere");
    let cell = |s: &str, f: &str| {
        cells
            .iter()
            .find(|c| c["strategy"] == s && c["fault"] == f)
            .unwrap()
    };
    // The control is damaged when its holder is paused past its lease; the incident is linked
    // and its trial report written.
    let control = &cell("naive-del", "client-pause")["episodes"];
    assert!(u(&control["damaging"]) >= 1, "{control}");
    let incident = control["first_incident"]["dir"].as_str().unwrap();
    assert!(
        dir.join(incident).join("report.html").is_file(),
        "{incident}/report.html not written"
    );
    let html = std::fs::read_to_string(dir.join("matrix.html")).unwrap();
    assert!(html.contains(&format!("href=\"{incident}/report.html\"")));
    assert!(html.contains("href=\"../../claims/comparison/comparison.html\""));
    // Fencing: no damaging episode, ever.
    for f in ["none", "client-pause", "clock-jump"] {
        let c = cell("redlock-fenced", f);
        assert_eq!(c["episodes"]["damaging"], 0, "redlock-fenced × {f}");
        assert_eq!(c["stale_writes_accepted"], 0, "redlock-fenced × {f}");
    }
    // Every heat-map cell carries the JSON's figures.
    for c in cells {
        let anchor = format!(
            "data-strategy=\"{}\" data-fault=\"{}\"",
            c["strategy"].as_str().unwrap(),
            c["fault"].as_str().unwrap()
        );
        let at = html.find(&anchor).unwrap_or_else(|| panic!("{anchor}"));
        let attrs = &html[at..at + html[at..].find('>').unwrap()];
        for (attr, v) in [
            ("data-exposed", &c["episodes"]["exposed"]),
            ("data-episodes", &c["episodes"]["total"]),
            ("data-damaging", &c["episodes"]["damaging"]),
            ("data-p99-us", &c["acquire_p99_us"]),
        ] {
            assert!(
                attrs.contains(&format!("{attr}=\"{v}\"")),
                "{anchor}: {attr} {v} in {attrs}"
            );
        }
    }
    // The correctness answer never names the control.
    let correctness = &m["decision"]["correctness"];
    assert!(!correctness["recommended"]
        .as_array()
        .unwrap()
        .contains(&Value::from("naive-del")));
    let csv = std::fs::read_to_string(dir.join("matrix.csv")).unwrap();
    assert_eq!(csv.lines().count(), 7, "{csv}");
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let row: Vec<&str> = csv
        .lines()
        .find(|l| l.starts_with("naive-del,client-pause,"))
        .unwrap()
        .split(',')
        .collect();
    assert_eq!(row[col("episodes_exposed")], control["exposed"].to_string());
    assert_eq!(row[col("damaging")], control["damaging"].to_string());
    assert_eq!(
        row[col("uncontended_acquire_p99_us")],
        probes[0]["p99_us"].to_string()
    );
    let md = std::fs::read_to_string(dir.join("matrix.md")).unwrap();
    for needle in [
        "| naive-del |",
        "## Agreement with the claims",
        "## Decision table",
        "uncontended acquire p50",
    ] {
        assert!(md.contains(needle), "{needle} not in matrix.md:\n{md}");
    }
    assert!(stdout.contains("exposed episodes per minute"), "{stdout}");
    assert!(stdout.contains("matrix report (open this):"), "{stdout}");
    assert_none_running_under(&dir);
}

/// One quick matrix of `strategies` × `faults`: it must end 0, every claim mapped to its cells
/// must agree, each cell must reach 10 exposed episodes, and `expected` (strategy, claim id)
/// must be among the claims. Returns its wall time.
fn claim_cells(strategies: &str, faults: &str, expected: &[(&str, &str)]) -> Duration {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let started = Instant::now();
    let out = lockbench()
        .args([
            "matrix",
            "--quick",
            "--strategies",
            strategies,
            "--faults",
            faults,
            "--no-progress",
            "--results",
        ])
        .arg(&results)
        .output()
        .unwrap();
    let took = started.elapsed();
    let what = format!("{strategies} × {faults}");
    let (stdout, _) = expect_code(&out, 0, &what);
    eprintln!("{what} took {took:?}\n{stdout}");
    let dir = latest(&results);
    let m = read(&dir.join("matrix.json"));
    assert_failed_trials_said(&m, &stdout);
    for c in m["cells"].as_array().unwrap() {
        let exposed = check_cell(&dir, &m, c);
        assert!(
            exposed >= 10,
            "{what}: {} has {exposed} exposed",
            c["strategy"]
        );
    }
    let claims = m["claims"].as_array().unwrap();
    for (strategy, claim) in expected {
        assert!(
            claims
                .iter()
                .any(|c| c["strategy"] == *strategy && c["claim"] == *claim),
            "{what}: claim {claim} not mapped to {strategy}: {claims:?}"
        );
    }
    for c in claims {
        assert_eq!(c["agrees"], true, "{what}: {c}");
    }
    assert_none_running_under(&dir);
    took
}

#[test]
fn the_claim_cells_agree_with_every_mapped_claim() {
    let _alone = one_matrix_at_a_time();
    let limit = Duration::from_secs(10 * 60);
    let started = Instant::now();
    let runs = [
        claim_cells(
            "single,single-fenced",
            "failover",
            &[("single", "05a"), ("single-fenced", "05b")],
        ),
        claim_cells("pg-advisory", "session-loss", &[("pg-advisory", "11a")]),
        claim_cells(
            "redlock,redlock-fenced",
            "client-pause",
            &[("redlock", "09"), ("redlock-fenced", "09")],
        ),
        claim_cells("setnx-expire", "client-crash", &[("setnx-expire", "13")]),
    ];
    let took = started.elapsed();
    eprintln!("claim cells: {runs:?}, {took:?} in all");
    assert!(
        took < limit,
        "the claim cells took {took:?} (limit {limit:?})"
    );
}

/// `lockbench matrix --quick --no-progress` with `args` in a fresh results directory, which
/// must end 0: its directory (kept while the returned guard lives), `matrix.json`, stdout.
fn quick_matrix(
    what: &str,
    args: &[&str],
) -> (tempfile::TempDir, std::path::PathBuf, Value, String) {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let started = Instant::now();
    let out = lockbench()
        .args(["matrix", "--quick", "--no-progress"])
        .args(args)
        .arg("--results")
        .arg(&results)
        .output()
        .unwrap();
    let (stdout, _) = expect_code(&out, 0, what);
    eprintln!("{what} took {:?}\n{stdout}", started.elapsed());
    let dir = latest(&results);
    let m = read(&dir.join("matrix.json"));
    (tmp, dir, m, stdout)
}

#[test]
fn a_matrix_over_two_kinds_of_work_runs_one_per_kind_and_answers_per_kind() {
    let _alone = one_matrix_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let out = lockbench()
        .args([
            "matrix",
            "--quick",
            "--no-progress",
            "--work",
            "external,job",
        ])
        .args(["--strategies", "single-fenced,claim-update"])
        .args(["--faults", "none,client-pause", "--episodes", "3"])
        .args(["--max-trials", "2"])
        .arg("--results")
        .arg(&results)
        .output()
        .unwrap();
    let (stdout, _) = expect_code(&out, 0, "the matrix over two kinds of work");
    assert!(stdout.contains("== external work =="), "{stdout}");
    assert!(stdout.contains("== job work =="), "{stdout}");
    let dir = latest(&results);
    let works = read(&dir.join("works.json"));
    assert_eq!(works["status"], "completed");
    let sections = works["works"].as_array().unwrap();
    let rows: Vec<(&str, Value)> = sections
        .iter()
        .map(|s| (s["work"].as_str().unwrap(), s["rows"].clone()))
        .collect();
    assert_eq!(
        rows,
        [
            ("external", serde_json::json!(["single-fenced"])),
            ("job", serde_json::json!(["single-fenced", "claim-update"]))
        ]
    );
    let page = std::fs::read_to_string(dir.join("matrix.html")).unwrap();
    for kind in ["external", "job"] {
        let s = sections.iter().find(|s| s["work"] == kind).unwrap();
        assert_eq!(s["status"], "completed", "{kind}");
        assert_eq!(s["started"], true, "{kind}");
        assert!(page.contains(&format!("id=\"work-{kind}\"")), "{kind}");
        assert!(
            page.contains(&format!("href=\"{kind}/matrix.html\"")),
            "{kind}"
        );
        let m = read(&dir.join(kind).join("matrix.json"));
        assert_eq!(m["workload"]["work"], kind);
        // Each kind's figures are its own matrix's.
        assert_eq!(s["decision"], m["decision"], "{kind}");
        for c in m["cells"].as_array().unwrap() {
            check_cell(&dir.join(kind), &m, c);
            if c["fault"] == "none" {
                assert_eq!(u(&c["episodes"]["damaging"]), 0, "{kind}: {c}");
            }
        }
        // A fenced lock protects the row, not the charge: a paused holder charges again.
        let paused = m["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["strategy"] == "single-fenced" && c["fault"] == "client-pause")
            .unwrap();
        assert!(u(&paused["episodes"]["damaging"]) >= 1, "{kind}: {paused}");
        assert_eq!(
            paused["episodes"]["first_incident"]["kind"], "duplicate-effect",
            "{kind}"
        );
        let correct = &m["decision"]["correctness"]["recommended"];
        assert!(
            !correct
                .as_array()
                .unwrap()
                .contains(&"single-fenced".into()),
            "{kind}: {correct}"
        );
    }
}

#[test]
fn postgres_rows_behind_a_transaction_pooler_are_labelled_and_show_claim_15() {
    let _alone = one_matrix_at_a_time();
    let (_tmp, dir, m, stdout) = quick_matrix(
        "the PgBouncer matrix",
        &[
            "--strategies",
            "pg-advisory,pg-advisory-xact",
            "--faults",
            "none",
            "--pg-setups",
            "direct,pgbouncer-transaction",
        ],
    );
    let pooled = "pg-advisory · pgbouncer-transaction";
    let xact_pooled = "pg-advisory-xact · pgbouncer-transaction";
    let rows = ["pg-advisory", pooled, "pg-advisory-xact", xact_pooled];
    assert_eq!(m["strategies"], serde_json::json!(rows));
    assert_failed_trials_said(&m, &stdout);
    let cells = m["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for c in cells {
        check_cell(&dir, &m, c);
    }
    let cell = |s: &str| cells.iter().find(|c| c["strategy"] == s).unwrap();
    // Behind the pooler the trials ran through a real PgBouncer in transaction mode.
    for row in [pooled, xact_pooled] {
        let t = &cell(row)["trials"][0];
        let tdir = dir.join(t["dir"].as_str().unwrap());
        assert!(tdir
            .to_string_lossy()
            .contains("@pgbouncer-transaction/none/t"));
        let ini = std::fs::read_to_string(tdir.join("nodes/pooler/pgbouncer.ini")).unwrap();
        assert!(ini.contains("pool_mode = transaction"), "{row}: {ini}");
    }
    for row in ["pg-advisory", "pg-advisory-xact"] {
        let t = &cell(row)["trials"][0];
        let tdir = dir.join(t["dir"].as_str().unwrap());
        assert!(
            !tdir.join("nodes/pooler").exists(),
            "{row}: direct has no pooler"
        );
    }
    // Claim 15: session locks through the transaction pooler get second holders; the
    // transaction-scoped lock and the direct rows do not.
    let e = &cell(pooled)["episodes"];
    assert!(u(&e["damaging"]) >= 1, "{e}");
    assert!(u(&cell(pooled)["anomalies"]["mutex-violation"]["count"]) >= 1);
    for row in ["pg-advisory", "pg-advisory-xact", xact_pooled] {
        let c = cell(row);
        assert_eq!(c["episodes"]["damaging"], 0, "{row}: {c}");
        assert!(u(&c["episodes"]["exposed"]) >= 10, "{row}");
    }
    let claims = m["claims"].as_array().unwrap();
    for (row, says) in [(pooled, "damage"), (xact_pooled, "no-damage")] {
        let c = claims
            .iter()
            .find(|c| c["claim"] == "15" && c["strategy"] == row)
            .unwrap_or_else(|| panic!("claim 15 not mapped to {row}: {claims:?}"));
        assert_eq!(
            (&c["says"], &c["agrees"]),
            (&Value::from(says), &Value::from(true))
        );
    }
    // The probe of a pooled row runs through PgBouncer: one server more to run.
    let probes = m["probes"].as_array().unwrap();
    let servers: Vec<(&str, u64)> = probes
        .iter()
        .map(|p| (p["strategy"].as_str().unwrap(), u(&p["servers"])))
        .collect();
    assert_eq!(
        servers,
        [(rows[0], 1), (rows[1], 2), (rows[2], 1), (rows[3], 2)]
    );
    let correctness = m["decision"]["correctness"]["recommended"]
        .as_array()
        .unwrap();
    assert!(
        !correctness.contains(&Value::from(pooled)),
        "{correctness:?}"
    );
    assert!(
        correctness.contains(&Value::from(xact_pooled)),
        "{correctness:?}"
    );
    // Every file names the rows, and the decision text the setups it measured.
    let setup = format!(
        "PostgreSQL setup measured ({pooled}, {xact_pooled}): one PostgreSQL server reached behind \
         PgBouncer in transaction mode (2 server connection(s))"
    );
    let direct = "PostgreSQL setup measured (pg-advisory, pg-advisory-xact): one PostgreSQL \
                  server, each client its own session straight to it";
    let md = std::fs::read_to_string(dir.join("matrix.md")).unwrap();
    let html = std::fs::read_to_string(dir.join("matrix.html")).unwrap();
    for text in [&stdout, &md, &html] {
        assert!(text.contains(&setup) && text.contains(direct), "{text}");
    }
    assert!(md.contains(&format!("| {pooled} |")), "{md}");
    assert!(html.contains(&format!("data-strategy=\"{pooled}\"")));
    let csv = std::fs::read_to_string(dir.join("matrix.csv")).unwrap();
    assert!(
        csv.lines()
            .any(|l| l.starts_with(&format!("{pooled},none,postgres,"))),
        "{csv}"
    );
    assert_none_running_under(&dir);
}

#[test]
fn cluster_rows_lose_the_lock_to_a_shard_failover_and_not_to_a_manual_one() {
    let _alone = one_matrix_at_a_time();
    let (_tmp, dir, m, stdout) = quick_matrix(
        "the cluster matrix",
        &[
            "--strategies",
            "single",
            "--redis-setups",
            "cluster",
            "--faults",
            "failover,cluster-failover",
            "--jobs",
            "2",
        ],
    );
    let row = "single · cluster";
    assert_eq!(m["strategies"], serde_json::json!([row]));
    assert_failed_trials_said(&m, &stdout);
    let cells = m["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for c in cells {
        assert_eq!(c["topology"], "cluster", "{c}");
        check_cell(&dir, &m, c);
    }
    let cell = |f: &str| cells.iter().find(|c| c["fault"] == f).unwrap();
    // Each trial ran on a six-node cluster, failing the lock's shard over episode after
    // episode (the two nodes of the shard swapping roles).
    for (fault, method) in [
        ("failover", "kill-primary"),
        ("cluster-failover", "cluster-failover"),
    ] {
        for t in cell(fault)["trials"].as_array().unwrap() {
            if t["status"] != "completed" {
                continue;
            }
            let tdir = dir.join(t["dir"].as_str().unwrap());
            assert!(
                tdir.to_string_lossy()
                    .contains(&format!("single@cluster/{fault}/t")),
                "{}",
                tdir.display()
            );
            for n in 1..=6 {
                assert!(tdir.join(format!("nodes/n{n}")).is_dir(), "{fault}: n{n}");
            }
            let history = std::fs::read_to_string(tdir.join("single/history.jsonl")).unwrap();
            let failovers = history
                .lines()
                .filter(|l| l.contains(&format!("\"detail\":\"method = {method}; {method}: n")))
                .count();
            let episodes = t["episodes"].as_array().unwrap().len();
            assert!(
                failovers >= episodes,
                "{fault}: {failovers} failovers, {episodes} episodes"
            );
        }
    }
    // Claim 20a: the shard failover under lag gives a second holder; claim 20b: the manual
    // failover catches up first and gives none.
    let kill = cell("failover");
    assert!(u(&kill["episodes"]["damaging"]) >= 1, "{kill}");
    assert!(
        u(&kill["anomalies"]["mutex-violation"]["count"]) >= 1,
        "{kill}"
    );
    let manual = cell("cluster-failover");
    assert_eq!(manual["episodes"]["damaging"], 0, "{manual}");
    assert!(u(&manual["episodes"]["exposed"]) >= 10, "{manual}");
    let claims = m["claims"].as_array().unwrap();
    let judged: Vec<(&str, &str, &str, bool)> = claims
        .iter()
        .map(|c| {
            (
                c["claim"].as_str().unwrap(),
                c["strategy"].as_str().unwrap(),
                c["says"].as_str().unwrap(),
                c["agrees"] == true,
            )
        })
        .collect();
    assert_eq!(
        judged,
        [
            ("20a", row, "damage", true),
            ("20b", row, "no-damage", true)
        ],
        "{claims:?}"
    );
    // The probe ran on the cluster too: six servers to run.
    assert_eq!(u(&m["probes"][0]["servers"]), 6);
    // Every file names the row, and the decision text the cluster it measured.
    let setup = format!(
        "Redis Cluster measured ({row}): 3 shards, a primary and one replica each (6 \
         redis-server processes), cluster-node-timeout 1000 ms"
    );
    let md = std::fs::read_to_string(dir.join("matrix.md")).unwrap();
    let html = std::fs::read_to_string(dir.join("matrix.html")).unwrap();
    for text in [&stdout, &md, &html] {
        assert!(text.contains(&setup), "{text}");
    }
    assert!(md.contains(&format!("| {row} |")), "{md}");
    assert!(html.contains(&format!("data-strategy=\"{row}\"")));
    let csv = std::fs::read_to_string(dir.join("matrix.csv")).unwrap();
    assert!(
        csv.lines()
            .any(|l| l.starts_with(&format!("{row},cluster-failover,cluster,"))),
        "{csv}"
    );
    assert_none_running_under(&dir);
}

#[test]
fn ctrl_c_keeps_finished_cells_and_leaves_no_process() {
    let _alone = one_matrix_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let mut child = common::cli::spawn_in(
        [
            "matrix",
            "--quick",
            "--strategies",
            "single",
            "--faults",
            "none,latency,client-pause",
            "--episodes",
            "1",
            "--max-trials",
            "1",
            "--jobs",
            "1",
            "--no-progress",
        ],
        &results,
        Stdio::piped(),
        Stdio::piped(),
    );
    // Wait (bounded) until the first cell is written, then interrupt the second trial.
    let dir = wait_for(Duration::from_secs(90), "a finished cell", || {
        let dir = std::fs::canonicalize(results.join("latest")).ok()?;
        let text = std::fs::read_to_string(dir.join("matrix.json")).ok()?;
        let m = serde_json::from_str::<Value>(&text).ok()?;
        (m["cells"][0]["trials_checked"] == 1).then_some(dir)
    });
    // The second trial's topology starts right after the first cell is written: give it a
    // moment to have processes to clean up, bounded by the trial's own length (and going on
    // without it: the interrupt is what is tested).
    let second = dir.join("trials/single/latency/t1/nodes");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !second.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(&child, libc::SIGINT);
    let status = wait_exit(&mut child, Duration::from_secs(30), "matrix after SIGINT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = read(&dir.join("matrix.json"));
    assert_eq!(m["status"], "interrupted");
    let cells = m["cells"].as_array().unwrap();
    assert_eq!(cells[0]["fault"], "none");
    assert_eq!(cells[0]["trials_checked"], 1, "the finished cell is kept");
    assert_ne!(cells[0]["verdict"], "not-run");
    assert_eq!(cells[2]["verdict"], "not-run", "{}", cells[2]);
    assert!(dir.join("matrix.html").is_file());
    assert_none_running_under(&dir);
}

#[test]
fn bad_input_exits_2_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let config = tmp.path().join("matrix.toml");
    std::fs::write(&config, "trials = 2\nclientz = 4\n").unwrap();
    let zero_episodes = tmp.path().join("zero.toml");
    std::fs::write(&zero_episodes, "episodes = 0\n").unwrap();
    let cases: [(&[&str], &str); 11] = [
        (
            &["--pg-setups", "direct,bouncer"],
            "unknown PostgreSQL setup `bouncer`: valid PostgreSQL setups are direct, pgbouncer-session",
        ),
        (
            &["--faults", "none,meteor"],
            "unknown fault class \"meteor\"",
        ),
        (
            &["--strategies", "single,paxos"],
            "unknown strategy `paxos`",
        ),
        (&["--ttl", "5 parsecs"], "--ttl"),
        (&["--clients", "1"], "--clients"),
        (
            &["--hold", "200ms"],
            "--hold 200ms is too long for --ttl 500ms",
        ),
        (&["--config", config.to_str().unwrap()], "clientz"),
        (&["--episodes", "0"], "--episodes"),
        (&["--jobs", "0"], "--jobs"),
        (&["--max-trials", "0"], "--max-trials"),
        (&["--config", zero_episodes.to_str().unwrap()], "episodes"),
    ];
    for (args, needle) in cases {
        let out = assert_refused(&[&["matrix"], args].concat(), &results, needle);
        expect_code(&out, 2, &format!("{args:?}"));
    }
}
