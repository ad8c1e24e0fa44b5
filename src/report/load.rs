//! Reading run directories into [`ReportInput`]s, with every path checked before any work.
//!
//! A run directory holds `summary.json` (required) and optionally:
//! - `report.json`: a full [`ReportInput`] written by a previous report (its spectra,
//!   verdicts, faults, scenario and seed are reused; the summary always comes from `summary.json`);
//! - `verdicts.json`: `[StrategyVerdict]` from the checker;
//! - `faults.json`: `[FaultMark]` from the nemesis;
//! - `<strategy>.hgrm`: the acquire-latency spectrum of each strategy.
//!
//! Sidecar files override what `report.json` says.

use std::fs;
use std::path::Path;

use serde::de::DeserializeOwned;

use super::error::ReportError;
use super::input::{FaultMark, ReportInput, StrategyPercentiles, StrategyVerdict};
use super::percentiles::parse_hgrm;
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
/// Everything [`validate_run_dirs`] reports, plus [`ReportError::Parse`] for a JSON file that
/// does not parse and [`ReportError::Hgrm`] for a bad `.hgrm` file.
pub fn load_run_dir(dir: &Path) -> Result<ReportInput, ReportError> {
    validate_run_dirs(&[dir])?;
    let summary: RunSummary = read_json(&dir.join("summary.json"))?;
    let mut input = match read_optional::<ReportInput>(&dir.join("report.json"))? {
        Some(mut saved) => {
            saved.summary = summary;
            saved
        }
        None => ReportInput::from_summary(summary),
    };
    if let Some(verdicts) = read_optional::<Vec<StrategyVerdict>>(&dir.join("verdicts.json"))? {
        input.verdicts = verdicts;
    }
    if let Some(faults) = read_optional::<Vec<FaultMark>>(&dir.join("faults.json"))? {
        input.fault_windows = faults;
    }
    for s in &input.summary.strategies {
        let path = dir.join(format!("{}.hgrm", s.strategy));
        if !path.is_file() {
            continue;
        }
        let text = fs::read_to_string(&path).map_err(|source| ReportError::Read {
            path: path.clone(),
            source,
        })?;
        let points = parse_hgrm(&text)?;
        input.percentiles.retain(|p| p.strategy != s.strategy);
        input.percentiles.push(StrategyPercentiles {
            strategy: s.strategy.clone(),
            points,
        });
    }
    Ok(input)
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

fn read_optional<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, ReportError> {
    if path.is_file() {
        read_json(path).map(Some)
    } else {
        Ok(None)
    }
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

    #[test]
    fn loads_summary_sidecars_and_hgrm() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        fs::write(
            dir.join("summary.json"),
            serde_json::to_vec(&summary("r1")).unwrap(),
        )
        .unwrap();
        fs::write(
            dir.join("verdicts.json"),
            br#"[{"strategy":"single","verdict":"invalid","counts":{"mutual-exclusion":2}}]"#,
        )
        .unwrap();
        fs::write(
            dir.join("faults.json"),
            br#"[{"kind":"pause","targets":["c3"],"start_s":2.0,"end_s":4.5}]"#,
        )
        .unwrap();
        fs::write(
            dir.join("single.hgrm"),
            "Value Percentile TotalCount 1/(1-Percentile)\n\n 0.250 0.5 10 2.00\n 1.500 1.0 20\n#[Mean = 1]\n",
        )
        .unwrap();
        let input = load_run_dir(dir).unwrap();
        assert_eq!(input.run_id(), "r1");
        assert_eq!(input.anomaly_total_of("single"), 2);
        assert_eq!(input.fault_windows[0].label(), "pause c3");
        assert_eq!(
            input.percentiles_for("single").unwrap().points,
            vec![(0.5, 250), (1.0, 1500)]
        );

        fs::write(dir.join("verdicts.json"), b"{").unwrap();
        assert!(matches!(
            load_run_dir(dir).unwrap_err(),
            ReportError::Parse { .. }
        ));
    }
}
