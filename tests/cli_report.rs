//! `lockbench run` → `check` → `report` end to end: the real binary on a real redis-server, and
//! the files each step leaves in the run directory.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use common::cli::{json, latest, printed_path, run as lockbench, run_ok as ok, text};
use common::report::latency_text;

/// Every file and directory under `root` with its modification time.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Option<SystemTime>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path.clone());
            }
            out.insert(path, meta.modified().ok());
        }
    }
    out
}

#[test]
fn run_then_check_then_report_with_baseline() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let stdout = ok(&[
        "run",
        "--topology",
        "single",
        "-s",
        "single,naive-del",
        "-c",
        "4",
        "-r",
        "2",
        "--ops",
        "200",
        "--no-progress",
        "--results",
        results.to_str().unwrap(),
    ]);
    let run = latest(&results);
    assert!(run.join("nodes/n1").is_dir());
    common::process::assert_none_running_under(&run.join("nodes"));

    // `run` ends with the per-run report and prints its path.
    let report_html = printed_path(&stdout, "report");
    assert_eq!(report_html, run.join("report.html"));
    for f in [
        "report.html",
        "report.json",
        "report.csv",
        "report.md",
        "report.junit.xml",
        "percentiles.svg",
        "percentiles.png",
        "timeline-single.svg",
        "timeline-naive-del.png",
    ] {
        assert!(run.join(f).is_file(), "run did not write {f}");
    }

    // Both strategies are valid here: two passing test cases.
    let junit = fs::read_to_string(run.join("report.junit.xml")).unwrap();
    assert!(
        junit.contains("tests=\"2\" failures=\"0\" errors=\"0\""),
        "{junit}"
    );
    assert!(junit.contains("name=\"naive-del\""), "{junit}");

    // check: remove what the checker wrote, and get it all back.
    let mut summary = json(&run.join("summary.json"));
    for s in summary["strategies"].as_array_mut().unwrap() {
        s.as_object_mut().unwrap().remove("check");
    }
    fs::write(
        run.join("summary.json"),
        serde_json::to_vec(&summary).unwrap(),
    )
    .unwrap();
    fs::remove_file(run.join("checker.json")).unwrap();
    fs::remove_file(run.join("single/checker.json")).unwrap();
    let out = lockbench(["check", run.to_str().unwrap()]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("strategy") && lines[0].contains("verdict  liveness"),
        "{stdout}"
    );
    let row = |name: &str| {
        lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(name))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("no {name} row in\n{stdout}"))
    };
    // No faults, no hold time: both strategies are valid and live, with no anomaly.
    assert_eq!(
        row("single"),
        ["single", "valid", "live", "100.00%", "none"]
    );
    assert_eq!(
        row("naive-del"),
        ["naive-del", "valid", "live", "100.00%", "none"]
    );
    let summary = json(&run.join("summary.json"));
    let run_checks = json(&run.join("checker.json"));
    for s in summary["strategies"].as_array().unwrap() {
        let name = s["strategy"].as_str().unwrap();
        assert_eq!(s["check"]["verdict"], "valid", "{s}");
        let per_strategy = json(&run.join(name).join("checker.json"));
        assert_eq!(per_strategy["verdict"], "valid");
        assert_eq!(
            per_strategy["stats"]["acquire_ok"], s["acquired"],
            "checker and driver count the same acquisitions for {name}"
        );
        assert_eq!(run_checks[name], per_strategy);
    }

    // A strategy directory whose history was cut short: unknown, exit 3.
    let cut = tmp.path().join("cut/single");
    fs::create_dir_all(&cut).unwrap();
    for f in ["history.jsonl", "ledger.sqlite"] {
        fs::copy(run.join("single").join(f), cut.join(f)).unwrap();
    }
    let mut history = fs::read(cut.join("history.jsonl")).unwrap();
    history.extend_from_slice(br#"{"type":"op","client":1,"#);
    fs::write(cut.join("history.jsonl"), history).unwrap();
    let out = lockbench(["check", cut.to_str().unwrap()]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(stdout.contains("single: unknown because the history ends with an incomplete line"));
    assert_eq!(json(&cut.join("checker.json"))["verdict"], "unknown");

    // report, twice, against the run itself as baseline: default output dir, then --out.
    let args = [
        "report",
        run.to_str().unwrap(),
        "--baseline",
        run.to_str().unwrap(),
    ];
    let stdout = ok(&args);
    assert_eq!(printed_path(&stdout, "report"), run.join("report.html"));
    let first = printed_path(&stdout, "comparison");
    assert_eq!(
        fs::canonicalize(first.parent().unwrap().parent().unwrap()).unwrap(),
        fs::canonicalize(&results).unwrap(),
        "the comparison goes beside the runs by default"
    );
    assert_eq!(
        fs::canonicalize(results.join("latest-comparison/comparison.html")).unwrap(),
        fs::canonicalize(&first).unwrap()
    );
    let out_dir = tmp.path().join("cmp");
    let mut args = args.to_vec();
    args.extend(["--out", out_dir.to_str().unwrap()]);
    let stdout = ok(&args);
    let second = printed_path(&stdout, "comparison");
    assert_eq!(second, out_dir.join("comparison.html"));
    assert_eq!(
        fs::canonicalize(results.join("latest-comparison/comparison.html")).unwrap(),
        fs::canonicalize(&first).unwrap(),
        "--out leaves latest-comparison alone"
    );

    let html = fs::read_to_string(run.join("report.html")).unwrap();
    let summary = json(&run.join("summary.json"));
    for s in summary["strategies"].as_array().unwrap() {
        let name = s["strategy"].as_str().unwrap();
        let p50 = s["acquire_ok"]["p50_us"].as_u64().unwrap();
        let p99 = s["acquire_ok"]["p99_us"].as_u64().unwrap();
        assert!(p50 > 0 && p99 >= p50, "{s}");
        let row_start = html
            .find(&format!("<tr data-strategy=\"{name}\""))
            .unwrap_or_else(|| panic!("no summary row for {name}"));
        let row = &html[row_start..row_start + html[row_start..].find("</tr>").unwrap()];
        assert!(row.contains("data-verdict=\"valid\""), "{row}");
        assert!(
            row.contains(&format!("data-acquire-p50-us=\"{p50}\"")),
            "{row}"
        );
        assert!(
            row.contains(&format!("data-acquire-p99-us=\"{p99}\"")),
            "{row}"
        );
        assert!(
            row.contains(&latency_text(p50)) && row.contains(&latency_text(p99)),
            "{row}"
        );
        // Compared with itself: present in the baseline table, no regression.
        assert!(
            html.contains(&format!(
                "<tr data-baseline-strategy=\"{name}\" data-p99-regressed=\"false\" data-throughput-regressed=\"false\">"
            )),
            "baseline row for {name}"
        );
    }
    for cmp in [&first, &second] {
        let page = fs::read_to_string(cmp).unwrap();
        assert!(
            page.contains("<section id=\"decision\">"),
            "{}",
            cmp.display()
        );
        for need in ["efficiency-lock", "correctness-lock"] {
            assert!(
                page.contains(&format!("<tr data-need=\"{need}\"")),
                "{need}"
            );
        }
        // No fenced strategy was measured: the correctness pick must say so.
        assert!(page.contains("no fenced strategy was measured"));
        assert!(page.contains("class=\"baseline\""), "baseline section");
        let dir = cmp.parent().unwrap();
        for f in [
            "comparison.json",
            "comparison.csv",
            "comparison.md",
            "comparison-latency.svg",
            "comparison-throughput.png",
        ] {
            assert!(dir.join(f).is_file(), "{f} missing in {}", dir.display());
        }
        let cmp_json = json(&dir.join("comparison.json"));
        assert_eq!(
            cmp_json["baselines"][0]["rows"].as_array().unwrap().len(),
            2
        );
    }

    // Bad paths: a clear error, and nothing written anywhere (not even the good run's report).
    let before = snapshot(tmp.path());
    let missing = tmp.path().join("no-such-run");
    for args in [
        vec!["report", run.to_str().unwrap(), missing.to_str().unwrap()],
        vec![
            "report",
            run.to_str().unwrap(),
            "--baseline",
            missing.to_str().unwrap(),
        ],
        vec![
            "report",
            run.to_str().unwrap(),
            "--out",
            run.join("summary.json").to_str().unwrap(),
        ],
        vec!["check", missing.to_str().unwrap()],
    ] {
        let out = lockbench(&args);
        let (stdout, stderr) = text(&out);
        assert!(!out.status.success(), "{args:?} succeeded: {stdout}");
        assert!(
            stderr.contains("no-such-run") || stderr.contains("is not a directory"),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains("does not exist") || stderr.contains("not a directory"),
            "{args:?}: {stderr}"
        );
        if args[0] == "check" {
            assert_eq!(out.status.code(), Some(2), "{stderr}");
        }
    }
    assert_eq!(snapshot(tmp.path()), before, "a failed command wrote files");
}
