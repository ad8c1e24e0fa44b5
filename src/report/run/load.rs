//! Reading run directories into [`ReportInput`]s, with every path checked before any work.
//!
//! A report reads only what `lockbench run` (and `chaos`) write; nothing report-specific is read
//! back, so `summary.json` and the checker's files stay the one source of truth:
//!
//! | file | gives |
//! |---|---|
//! | `summary.json` (required) | the [`RunSummary`]; scenario (`config.scenario`) and seed |
//! | `<strategy>/checker.json` | verdict, anomaly marks and totals, availability, fault windows (µs → s, on that strategy's clock) |
//! | `summary.json` `check` field | verdict and totals when `<strategy>/checker.json` is missing |
//! | `<strategy>.hgrm` | the acquire-latency spectrum |
//! | `summary.json` `strategies[].harness.note` | the run's diagnosis when the harness was overloaded, shown next to incidents |
//!
//! A strategy with neither a `checker.json` nor a `check` field (a `--no-audit` run) has no
//! verdict and shows `unknown`.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde::de::DeserializeOwned;

use super::input::{FaultMark, ReportInput, StrategyPercentiles, StrategyVerdict};
use super::percentiles::parse_hgrm;
use crate::checker::CheckReport;
use crate::report::error::ReportError;
use crate::results::RunSummary;

/// Checks that every path is a readable run directory with a `summary.json`, without
/// reading anything else. Call it before drawing anything.
///
/// # Errors
/// The first bad path as [`ReportError::NotFound`], [`ReportError::NotADirectory`],
/// [`ReportError::MissingSummary`] or [`ReportError::Read`]; [`ReportError::NoRuns`] for an
/// empty list.
pub fn validate_run_dirs<P: AsRef<Path>>(dirs: &[P]) -> Result<(), ReportError> {
    if dirs.is_empty() {
        return Err(ReportError::NoRuns);
    }
    for dir in dirs {
        let dir = dir.as_ref();
        let meta = match fs::metadata(dir) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ReportError::NotFound {
                    path: dir.to_path_buf(),
                })
            }
            Err(source) => {
                return Err(ReportError::Read {
                    path: dir.to_path_buf(),
                    source,
                })
            }
        };
        if !meta.is_dir() {
            return Err(ReportError::NotADirectory {
                path: dir.to_path_buf(),
            });
        }
        fs::read_dir(dir).map_err(|source| ReportError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let summary = dir.join("summary.json");
        if !summary.is_file() {
            return Err(ReportError::MissingSummary {
                path: dir.to_path_buf(),
            });
        }
        fs::File::open(&summary).map_err(|source| ReportError::Read {
            path: summary,
            source,
        })?;
    }
    Ok(())
}

/// Loads one run directory (see the module docs for the files read).
///
/// # Errors
/// Everything [`validate_run_dirs`] reports, plus [`ReportError::Parse`] for a `summary.json` or
/// `checker.json` that does not parse and [`ReportError::Hgrm`] for a bad `.hgrm` file.
pub fn load_run_dir(dir: &Path) -> Result<ReportInput, ReportError> {
    validate_run_dirs(&[dir])?;
    let raw: serde_json::Value = read_json(&dir.join("summary.json"))?;
    let mut summary: RunSummary =
        serde_json::from_value(raw.clone()).map_err(|source| ReportError::Parse {
            path: dir.join("summary.json"),
            source,
        })?;
    name_unnamed_strategies(&mut summary);
    let mut input = ReportInput::from_summary(summary);
    input.scenario = scenario_of(&input.summary.config);
    input.harness_notes = harness_notes(&raw, &input.summary);
    for s in &input.summary.strategies {
        let name = &s.strategy;
        let checker = dir.join(name).join("checker.json");
        if checker.is_file() {
            let report: CheckReport = read_json(&checker)?;
            input
                .verdicts
                .push(StrategyVerdict::from_check_report(name, &report));
            input.fault_windows.extend(
                report
                    .fault_windows
                    .iter()
                    .map(|w| FaultMark::from_window(name, w, s.elapsed_s)),
            );
        } else if let Some(check) = &s.check {
            input
                .verdicts
                .push(StrategyVerdict::from_check_summary(name, check));
        }
        let path = dir.join(format!("{name}.hgrm"));
        if path.is_file() {
            let text = fs::read_to_string(&path).map_err(|source| ReportError::Read {
                path: path.clone(),
                source,
            })?;
            input.percentiles.push(StrategyPercentiles {
                strategy: name.clone(),
                points: parse_hgrm(&text)?,
            });
        }
    }
    // A failed run's error belongs to the strategy that was running: the last one, when the
    // checker never judged it.
    if let (Some(err), Some(last)) = (&input.summary.error, input.summary.strategies.last()) {
        if input.verdict_for(&last.strategy).is_none() {
            input
                .strategy_errors
                .insert(last.strategy.clone(), err.clone());
        }
    }
    Ok(input)
}

/// Each strategy's `harness.note` in `summary.json` (the run's own diagnosis when the harness
/// could not keep up: its delays, not the lock, may have stretched sections past their leases),
/// read from the raw JSON so summaries written with or without that field both load.
fn harness_notes(raw: &serde_json::Value, summary: &RunSummary) -> BTreeMap<String, String> {
    let listed = raw.get("strategies").and_then(|v| v.as_array());
    summary
        .strategies
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let note = listed?.get(i)?.get("harness")?.get("note")?.as_str()?;
            (!note.trim().is_empty()).then(|| (s.strategy.clone(), note.to_string()))
        })
        .collect()
}

/// A strategy entry written before its run started has no name (a run that failed at once):
/// it gets the name the configuration lists at its position (`config.scenario.strategies` or
/// `config.strategies`), else `strategy-<n>`, so no row or file name is blank.
fn name_unnamed_strategies(summary: &mut RunSummary) {
    let listed: Vec<String> = ["/scenario/strategies", "/strategies"]
        .iter()
        .find_map(|p| summary.config.pointer(p).and_then(|v| v.as_array()))
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    for (i, s) in summary.strategies.iter_mut().enumerate() {
        if s.strategy.trim().is_empty() {
            s.strategy = listed
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("strategy-{}", i + 1));
        }
    }
}

/// The scenario a run tested: the `name` of a test with a `claim` (a scenario's or a matrix
/// trial's), or, in older summaries, `config.scenario` as a string or the `name` of a
/// `config.scenario` object.
fn scenario_of(config: &serde_json::Value) -> Option<String> {
    if config.get("claim").is_some_and(|c| !c.is_null()) {
        return config
            .get("name")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string);
    }
    let scenario = config.get("scenario")?;
    scenario
        .as_str()
        .or_else(|| scenario.get("name").and_then(serde_json::Value::as_str))
        .map(str::to_string)
}

/// Loads several run directories, validating all of them before reading any.
///
/// # Errors
/// As [`load_run_dir`], for the first bad directory.
pub fn load_run_dirs<P: AsRef<Path>>(dirs: &[P]) -> Result<Vec<ReportInput>, ReportError> {
    validate_run_dirs(dirs)?;
    dirs.iter().map(|d| load_run_dir(d.as_ref())).collect()
}

fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, ReportError> {
    let bytes = fs::read(path).map_err(|source| ReportError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|source| ReportError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::RunStatus;

    fn summary(run_id: &str) -> RunSummary {
        RunSummary {
            run_id: run_id.into(),
            lockbench_version: "0.1.0".into(),
            started_at: "2026-11-29T08:00:00Z".into(),
            finished_at: None,
            status: RunStatus::Completed,
            error: None,
            config: serde_json::json!({}),
            strategies: vec![crate::results::StrategySummary {
                strategy: "single".into(),
                ..Default::default()
            }],
            pid: None,
        }
    }

    #[test]
    fn bad_paths_are_typed_errors_naming_the_path() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("nope");
        let err = validate_run_dirs(&[&missing]).unwrap_err();
        assert!(matches!(err, ReportError::NotFound { .. }), "{err}");
        assert!(err.to_string().contains("nope"));

        let file = tmp.path().join("file");
        fs::write(&file, b"x").unwrap();
        assert!(matches!(
            validate_run_dirs(&[&file]).unwrap_err(),
            ReportError::NotADirectory { .. }
        ));

        let empty = tmp.path().join("empty");
        fs::create_dir(&empty).unwrap();
        assert!(matches!(
            validate_run_dirs(&[&empty]).unwrap_err(),
            ReportError::MissingSummary { .. }
        ));
        assert!(matches!(
            validate_run_dirs::<&Path>(&[]).unwrap_err(),
            ReportError::NoRuns
        ));
    }

    #[test]
    fn second_bad_dir_fails_before_first_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        let good = tmp.path().join("good");
        fs::create_dir(&good).unwrap();
        fs::write(good.join("summary.json"), b"not json").unwrap();
        let err = load_run_dirs(&[good, tmp.path().join("missing")]).unwrap_err();
        assert!(matches!(err, ReportError::NotFound { .. }), "{err}");
    }

    fn check_report() -> CheckReport {
        use crate::checker::{Anomaly, AnomalyKind, Liveness, Stats, Verdict};
        let anomaly = |kind, time_us, clients: Vec<u32>| Anomaly {
            kind,
            resource: "r0".into(),
            time_us,
            end_us: None,
            clients,
            tokens: vec![],
            holders: Some(2),
            ledger_seqs: vec![],
            fault_ids: vec![1],
            detail: "two holders".into(),
        };
        CheckReport {
            verdict: Verdict::Invalid,
            liveness: Liveness::Degraded,
            unknown_reasons: vec![],
            stats: Stats {
                mutex_violations: 3, // one more than listed: totals come from stats
                believed_overlaps: 1,
                stale_writes_rejected: 4,
                unavailability_windows: 1,
                availability_pct: 97.5,
                ..Stats::default()
            },
            anomalies: vec![
                anomaly(AnomalyKind::MutexViolation, 2_500_000, vec![1, 2]),
                anomaly(AnomalyKind::MutexViolation, 2_750_000, vec![1, 3]),
                anomaly(AnomalyKind::BelievedOverlap, 2_400_000, vec![1, 2]),
            ],
            anomalies_omitted: 1,
            fence_mode: None,
            fault_windows: vec![
                crate::history::FaultWindow {
                    id: 1,
                    kind: "client-pause".into(),
                    targets: vec!["client-1".into()],
                    start_us: 2_000_000,
                    end_us: Some(3_500_000),
                    detail: "duration = 1500ms; paused, renewal frozen".into(),
                },
                crate::history::FaultWindow {
                    id: 2,
                    kind: "partition".into(),
                    targets: vec!["n1".into()],
                    start_us: 8_000_000,
                    end_us: None,
                    detail: String::new(),
                },
            ],
            history_truncated: false,
            incidents: vec![],
            incidents_partial: false,
        }
    }

    #[test]
    fn a_test_with_a_claim_names_its_scenario_and_older_shapes_still_read() {
        let test = serde_json::json!({"name": "02-naive-del-pause", "claim": "c", "workload": {"seed": 7}});
        assert_eq!(scenario_of(&test).as_deref(), Some("02-naive-del-pause"));
        let run = serde_json::json!({"name": "single", "claim": null});
        assert_eq!(
            scenario_of(&run),
            None,
            "a plain run is named by its run id"
        );
        let old = serde_json::json!({"scenario": "pause"});
        assert_eq!(scenario_of(&old).as_deref(), Some("pause"));
    }

    #[test]
    fn loads_checker_reports_summary_checks_and_hgrm() {
        use crate::checker::AnomalyKind;
        use crate::report::Verdict;
        use crate::results::CheckSummary;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut s = summary("r1");
        s.config = serde_json::json!({"scenario": {"name": "pause"}, "workload": {"seed": 9}});
        s.strategies[0].elapsed_s = 10.0;
        let report = check_report();
        let mut redlock = s.strategies[0].clone();
        redlock.strategy = "redlock".into();
        redlock.check = Some(CheckSummary::from_report(&report));
        s.strategies.push(redlock);
        fs::write(dir.join("summary.json"), serde_json::to_vec(&s).unwrap()).unwrap();
        fs::create_dir(dir.join("single")).unwrap();
        fs::write(
            dir.join("single/checker.json"),
            serde_json::to_vec(&report).unwrap(),
        )
        .unwrap();
        fs::write(
            dir.join("single.hgrm"),
            "Value Percentile TotalCount 1/(1-Percentile)\n\n 0.250 0.5 10 2.00\n 1.500 1.0 20\n#[Mean = 1]\n",
        )
        .unwrap();
        let input = load_run_dir(dir).unwrap();
        assert_eq!(input.run_id(), "r1");
        assert_eq!(input.scenario_name(), "pause");
        assert_eq!(input.seed(), Some(9));

        let single = input.verdict_for("single").unwrap();
        assert_eq!(single.verdict, Verdict::Invalid);
        assert_eq!(single.count(AnomalyKind::MutexViolation), 3);
        assert_eq!(single.count(AnomalyKind::StaleWriteRejected), 4);
        // 3 mutex + 1 believed + 1 unavailable; rejected stale writes are not anomalies.
        assert_eq!(single.anomaly_total(), 5);
        assert_eq!(single.availability, Some(0.975));
        assert_eq!(single.anomalies.len(), 3);
        assert_eq!(single.anomalies[0].time_s, 2.5);
        assert_eq!(single.anomalies[2].kind, AnomalyKind::BelievedOverlap);

        assert_eq!(input.fault_windows.len(), 2);
        let pause = &input.fault_windows[0];
        assert_eq!((pause.start_s(), pause.end_s()), (2.0, 3.5));
        assert_eq!(pause.label(), "client-pause client-1");
        assert_eq!(
            pause.title(),
            "client-pause client-1\nduration = 1500ms; paused, renewal frozen"
        );
        assert!(pause.applies_to("single") && !pause.applies_to("redlock"));
        assert_eq!(
            input.fault_windows[1].end_s(),
            10.0,
            "open window ends with the run"
        );

        // redlock has no checker.json: verdict and totals from summary.json, no marks.
        let redlock = input.verdict_for("redlock").unwrap();
        assert_eq!(redlock.verdict, Verdict::Invalid);
        assert_eq!(redlock.count(AnomalyKind::MutexViolation), 3);
        assert!(redlock.anomalies.is_empty());

        assert_eq!(
            input.percentiles_for("single").unwrap().points,
            vec![(0.5, 250), (1.0, 1500)]
        );
        assert!(input.percentiles_for("redlock").is_none());

        fs::write(dir.join("single/checker.json"), b"{").unwrap();
        let err = load_run_dir(dir).unwrap_err();
        assert!(matches!(err, ReportError::Parse { .. }), "{err}");
        assert!(err.to_string().contains("checker.json"), "{err}");
    }
}
