//! `lockbench check`: re-checks saved results and rewrites what the checker wrote.
//!
//! Given a run directory, every `<strategy>/` subdirectory with a `history.jsonl` or a
//! `ledger.sqlite` is checked again (a missing, empty or mismatched history or ledger gives
//! `unknown` with the reason); given one strategy directory, just that one. Each
//! `<strategy>/checker.json` is rewritten, and so are the run-level `checker.json` and the
//! `check` field of each strategy in `summary.json` (the parent's, for a strategy directory).
//!
//! Exit codes (the policy of [`super::exit`]): 0 = every strategy valid, 1 = some strategy
//! invalid, 3 = none invalid but some unknown, 2 = nothing could be checked (bad path,
//! unreadable files), 4 = checked (the table is printed) but a file could not be written (full
//! disk): every file is written atomically, so the previous one stays whole.
//!
//! A run whose `summary.json` still says `running` while the process that wrote it (its `pid`)
//! is gone died without finishing: `check` says so and marks it `failed`
//! ([`RunSummary::mark_if_died`]); `results/latest` keeps naming it (it is the newest run),
//! and every reader now sees it failed.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;

use lockbench::checker::{CheckReport, Verdict};
use lockbench::orchestration::experiment;
use lockbench::results::{CheckSummary, RunDir, RunStatus, RunSummary};

use super::exit;

/// Examples and exit codes under `lockbench check --help`.
const CHECK_EXAMPLES: &str = "\
Examples:
  lockbench check results/latest
  lockbench check results/<run>/single-fenced

A missing, empty or mismatched history.jsonl / ledger.sqlite gives `unknown` with the reason.
A run that still says `running` although its process is gone is marked `failed`.
Exit codes: 0 every verdict valid, 1 some invalid, 2 nothing could be checked (bad path,
unreadable files), 3 some unknown and none invalid, 4 checked but a file could not be written.";

/// Options of `lockbench check`.
#[derive(Debug, Args)]
#[command(after_help = CHECK_EXAMPLES)]
pub struct CheckArgs {
    /// A run directory (results/<run>) or one strategy's directory (results/<run>/<strategy>).
    #[arg(value_name = "RUN_DIR | STRATEGY_DIR")]
    pub path: PathBuf,
}

/// Runs `lockbench check`; errors are printed here and exit with 2 (see the module docs).
pub async fn run(args: CheckArgs) -> Result<ExitCode> {
    let outcome = tokio::task::spawn_blocking(move || check(&args.path))
        .await
        .context("the checker task panicked")?;
    match outcome {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("{}", exit::render(&e));
            Ok(exit::code(exit::BAD_INPUT))
        }
    }
}

/// What to check: the run directory (if any) and its strategies' directories, by name.
struct Target {
    run_dir: Option<PathBuf>,
    strategies: Vec<(String, PathBuf)>,
}

fn target(path: &Path) -> Result<Target> {
    let meta = std::fs::metadata(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            anyhow::anyhow!(
                "{} does not exist: pass a run directory written by `lockbench run` (e.g. results/latest) \
                 or one of its strategy directories",
                path.display()
            )
        } else {
            anyhow::anyhow!("cannot read {}: {e}", path.display())
        }
    })?;
    if !meta.is_dir() {
        bail!(
            "{} is not a directory: pass results/<run> or results/<run>/<strategy>",
            path.display()
        );
    }
    let name_of = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let evidence =
        |p: &Path| p.join("history.jsonl").is_file() || p.join("ledger.sqlite").is_file();
    if evidence(path) {
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let run_dir = canonical
            .parent()
            .filter(|p| p.join("summary.json").is_file())
            .map(Path::to_path_buf);
        return Ok(Target {
            run_dir,
            strategies: vec![(name_of(&canonical), path.to_path_buf())],
        });
    }
    let mut strategies: Vec<(String, PathBuf)> = std::fs::read_dir(path)
        .with_context(|| format!("cannot list {}", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| evidence(p))
        .map(|p| (name_of(&p), p))
        .collect();
    if strategies.is_empty() {
        if let Some(hint) = runs_below(path, "check") {
            bail!("{hint}");
        }
        bail!(
            "no history.jsonl or ledger.sqlite in {} or its subdirectories: pass a run directory \
             written by an audited `lockbench run` (not --no-audit), or one of its strategy directories",
            path.display()
        );
    }
    // Summary order (the order the strategies ran), then by name.
    let order: Vec<String> = read_summary(path)
        .map(|s| s.strategies.into_iter().map(|s| s.strategy).collect())
        .unwrap_or_default();
    strategies.sort_by_key(|(name, _)| {
        (
            order.iter().position(|o| o == name).unwrap_or(usize::MAX),
            name.clone(),
        )
    });
    Ok(Target {
        run_dir: Some(path.to_path_buf()),
        strategies,
    })
}

/// For a directory that is not a run but holds runs further down (a chaos batch, a matrix
/// and its trials four levels down): how many, where, and a command that takes one.
pub(super) fn runs_below(path: &Path, command: &str) -> Option<String> {
    let runs = lockbench::results::run_dirs_below(path, 5);
    let first = runs.first()?;
    let matrix = if path.join("matrix.json").is_file() || path.join("matrix.html").is_file() {
        format!(
            " (a matrix: its own report is {}; each trial is a run)",
            path.join("matrix.html").display()
        )
    } else {
        String::new()
    };
    let which = if command == "check" {
        "one of them (one at a time)"
    } else {
        "one or more of them"
    };
    Some(format!(
        "{} is not a run directory but holds {} run director{} below it{matrix}: pass \
         {which}, e.g. `lockbench {command} {}`",
        path.display(),
        runs.len(),
        if runs.len() == 1 { "y" } else { "ies" },
        first.display()
    ))
}

fn read_summary(run_dir: &Path) -> Option<RunSummary> {
    let bytes = std::fs::read(run_dir.join("summary.json")).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn check(path: &Path) -> Result<ExitCode> {
    let target = target(path)?;
    let mut summary = target.run_dir.as_deref().and_then(read_summary);
    // What the run measured, to catch a history that lost events or is from another run; a
    // run still running (or that died) has only its last progress write, not a total.
    let measured = summary
        .as_ref()
        .filter(|s| s.status != RunStatus::Running)
        .map(|s| s.strategies.clone())
        .unwrap_or_default();
    if let Some(reason) = summary.as_mut().and_then(RunSummary::mark_if_died) {
        eprintln!("note: this run died: {reason}; summary.json now says `failed`");
    }
    let mut reports: Vec<(String, CheckReport)> = Vec::new();
    for (name, dir) in &target.strategies {
        let acquired = measured
            .iter()
            .find(|s| s.strategy == *name)
            .map(|s| s.acquired);
        let report = experiment::judge_again(dir, acquired)
            .with_context(|| format!("cannot check {}", dir.display()))?;
        reports.push((name.clone(), report));
    }
    // Written atomically, each on its own: a full disk leaves the previous files whole, and
    // the verdicts are still shown.
    let mut unsaved: Vec<anyhow::Error> = Vec::new();
    for ((_, report), (_, dir)) in reports.iter().zip(&target.strategies) {
        if let Err(e) = experiment::write_report(dir, report) {
            unsaved.push(e.into());
        }
    }
    if let Some(run_dir) = &target.run_dir {
        if let Err(e) = update_run_files(run_dir, summary, &reports) {
            unsaved.push(e);
        }
    }
    println!("{}", verdict_table(&reports));
    let _ = std::io::stdout().flush();
    for e in &unsaved {
        eprintln!("error: the verdicts above were not all saved: {e}");
    }
    if !unsaved.is_empty() {
        return Ok(exit::code(exit::FAILED));
    }
    let verdicts = reports.iter().map(|(_, r)| r.verdict);
    Ok(exit_code(verdicts))
}

/// Rewrites the run-level `checker.json` (merging into what is there) and the `check` field of
/// every re-checked strategy in `summary` (read before, and marked `failed` when the run
/// died), written back as `summary.json`. Every file is written atomically: a full disk leaves
/// the previous file, never a partial one.
fn update_run_files(
    run_dir: &Path,
    summary: Option<RunSummary>,
    reports: &[(String, CheckReport)],
) -> Result<()> {
    let dir = RunDir::open(run_dir)?;
    let mut checks: serde_json::Map<String, serde_json::Value> =
        std::fs::read(dir.file("checker.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
    for (name, report) in reports {
        checks.insert(name.clone(), serde_json::to_value(report)?);
    }
    dir.write_json("checker.json", &checks)?;
    let Some(mut summary) = summary else {
        let path = dir.file("summary.json");
        if path.is_file() {
            bail!(
                "cannot parse {}: it is not a lockbench run summary (damaged, or written by \
                 another program); the checker's files were rewritten, summary.json was not",
                path.display()
            );
        }
        return Ok(());
    };
    for s in &mut summary.strategies {
        if let Some((_, report)) = reports.iter().find(|(name, _)| *name == s.strategy) {
            s.check = Some(CheckSummary::from_report(report));
        }
    }
    dir.write_json("summary.json", &summary)?;
    Ok(())
}

/// `0` all valid, `1` any invalid, else `3` any unknown.
fn exit_code(verdicts: impl IntoIterator<Item = Verdict>) -> ExitCode {
    exit::code(exit::for_verdicts(verdicts))
}

/// One row per strategy: strategy, verdict, liveness, availability and non-zero anomaly counts
/// (stale writes rejected included: they show fencing at work).
fn verdict_table(reports: &[(String, CheckReport)]) -> String {
    let header = [
        "strategy",
        "verdict",
        "liveness",
        "availability",
        "anomalies",
    ];
    let rows: Vec<[String; 5]> = reports
        .iter()
        .map(|(name, r)| {
            let counts = CheckSummary::from_report(r).anomaly_counts;
            let anomalies = if counts.is_empty() {
                "none".to_string()
            } else {
                counts
                    .iter()
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            [
                name.clone(),
                r.verdict.to_string(),
                r.liveness.to_string(),
                format!("{:.2}%", r.stats.availability_pct),
                anomalies,
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = vec![
        line(&header.map(str::to_string)),
        line(&widths.map(|w| "-".repeat(w))),
    ];
    out.extend(rows.iter().map(|r| line(r)));
    for (name, r) in reports {
        for reason in &r.unknown_reasons {
            out.push(format!("{name}: unknown because {reason}"));
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_code_prefers_invalid_over_unknown() {
        use Verdict::*;
        assert_eq!(exit_code([Valid, Valid]), ExitCode::SUCCESS);
        assert_eq!(exit_code([Valid, Unknown]), ExitCode::from(3));
        assert_eq!(exit_code([Unknown, Invalid, Valid]), ExitCode::from(1));
    }
}
