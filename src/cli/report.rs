//! `lockbench report`: (re)writes each run's `report.html` and builds the comparison across runs;
//! [`write_for_run`] is the per-run report `lockbench run` writes when it ends.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use lockbench::report::{self, BaselineComparison, ReportError, ReportInput};

use super::exit;

/// Examples and exit codes under `lockbench report --help`.
const REPORT_EXAMPLES: &str = "\
Examples:
  lockbench report results/latest
  lockbench report results/<run-a> results/<run-b> --out /tmp/cmp
  lockbench report results/latest --baseline results/<older-run>

--baseline compares runs of the same setup only (topology, proxied or --direct, pacing and
rate, clients, resources, hold, TTL) and needs a strategy in common; --allow-mismatch
compares anyway, with a warning.

Exit codes: 0 written, no regression; 1 written, some regression against --baseline;
2 bad input (nothing written); 4 failed while writing.";

/// Options of `lockbench report`.
#[derive(Debug, Args)]
#[command(after_help = REPORT_EXAMPLES)]
pub struct ReportArgs {
    /// Run directories written by `lockbench run` / `chaos` (e.g. results/latest).
    #[arg(required = true, value_name = "RUN_DIR")]
    pub runs: Vec<PathBuf>,
    /// A saved run to compare each run with; p99 more than 10% worse or throughput more than
    /// 10% lower is flagged as a regression.
    #[arg(long, value_name = "RUN_DIR")]
    pub baseline: Option<PathBuf>,
    /// Compare with --baseline even when the setups differ (topology, pacing, clients, …);
    /// the differences are printed as a warning.
    #[arg(long, requires = "baseline")]
    pub allow_mismatch: bool,
    /// Where to write comparison.html and its files (default: <results root of the first run>/comparison-<UTC time>/,
    /// with <results root>/latest-comparison pointing at it).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Writes `dir`'s report (`report.html`, exports, plots) from the files the run wrote, and
/// returns the path of `report.html`.
///
/// # Errors
/// [`ReportError`] when the run directory cannot be read or the report cannot be written.
pub fn write_for_run(dir: &Path) -> Result<PathBuf, ReportError> {
    let input = report::load_run_dir(dir)?;
    Ok(report::write_run_report(dir, &input, None)?.html)
}

/// Runs `lockbench report`. Every path (and a baseline's setup) is checked before anything is
/// written. Exit code 1 when a run regressed against `--baseline`.
pub fn run(args: ReportArgs) -> Result<ExitCode> {
    if let Some(hint) = args
        .runs
        .iter()
        .filter(|d| !d.join("summary.json").exists())
        .find_map(|d| super::check::runs_below(d, "report"))
    {
        return Err(exit::bad_input(anyhow::anyhow!(hint)));
    }
    report::validate_run_dirs(&args.runs).map_err(exit::bad_input)?;
    if let Some(b) = &args.baseline {
        report::validate_run_dirs(&[b])
            .context("--baseline")
            .map_err(exit::bad_input)?;
    }
    if let Some(out) = &args.out {
        if out.exists() && !out.is_dir() {
            return Err(exit::bad_input(anyhow::anyhow!(
                "--out {} exists and is not a directory: pass a directory (it is created if missing)",
                out.display()
            )));
        }
    }
    let inputs = report::load_run_dirs(&args.runs).map_err(exit::bad_input)?;
    let saved = args
        .baseline
        .as_deref()
        .map(report::load_run_dir)
        .transpose()
        .context("--baseline")
        .map_err(exit::bad_input)?;
    if let Some(saved) = &saved {
        for (dir, input) in args.runs.iter().zip(&inputs) {
            let problems = mismatches(input, saved);
            if problems.is_empty() {
                continue;
            }
            let text = format!(
                "{} and --baseline {} are not the same setup: {}",
                dir.display(),
                args.baseline.as_deref().unwrap_or(Path::new("")).display(),
                problems.join("; ")
            );
            if args.allow_mismatch {
                eprintln!("warning: {text} (compared anyway: --allow-mismatch)");
            } else {
                return Err(exit::bad_input(anyhow::anyhow!(
                    "{text}: compare runs of one setup, or pass --allow-mismatch"
                )));
            }
        }
    }

    let mut baselines = Vec::new();
    let mut regressed = false;
    for (dir, input) in args.runs.iter().zip(&inputs) {
        let cmp = saved.as_ref().map(|s| report::baseline(input, s));
        let files = report::write_run_report(dir, input, cmp.as_ref())?;
        println!("report: {}", files.html.display());
        if let Some(cmp) = cmp {
            print_regressions(&cmp);
            regressed |= cmp.has_regressions();
            baselines.push(cmp);
        }
    }

    let mut comparison = report::compare(&inputs)?;
    comparison.baselines = baselines;
    let out = match &args.out {
        Some(out) => out.clone(),
        None => new_comparison_dir(&results_root(&args.runs[0]))?,
    };
    let files = report::write_comparison(&out, &comparison)?;
    if args.out.is_none() {
        point_latest_comparison(&out)?;
    }
    println!("comparison: {}", files.html.display());
    Ok(exit::code(if regressed { exit::FINDING } else { exit::OK }))
}

/// The parts of a run's setup a baseline comparison needs equal, as `name → value` text:
/// topology, proxied or direct, pacing (closed / open + rate), clients, resources, hold, TTL,
/// faults. Read from `summary.json`'s `config`: a test (this version), or the `run` config or
/// chaos `scenario` of older versions.
fn setup(input: &ReportInput) -> Vec<(&'static str, String)> {
    let c = &input.summary.config;
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::Null => "-".to_string(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let open = |rate: &serde_json::Value| format!("open {} ops/s", text(rate));
    if let Some(sc) = c.get("scenario") {
        let w = &sc["workload"];
        let pacing = match w.get("rate").filter(|r| !r.is_null()) {
            Some(r) => open(r),
            None => "closed".into(),
        };
        return vec![
            ("topology", text(&sc["topology"])),
            ("nodes", "proxied".into()),
            ("pacing", pacing),
            ("clients", text(&w["clients"])),
            ("resources", text(&w["resources"])),
            ("hold", text(&w["hold"])),
            ("ttl", text(&w["ttl"])),
            ("faults", text(&sc["nemesis"])),
        ];
    }
    let w = &c["workload"];
    // A test has `client.ttl` and `topology.direct`; an older run config `ttl` and `direct`.
    let direct = c
        .pointer("/topology/direct")
        .or_else(|| c.get("direct"))
        .and_then(serde_json::Value::as_bool)
        == Some(true);
    let ttl = c.pointer("/client/ttl").unwrap_or(&c["ttl"]);
    let pacing = match w.pointer("/pacing/open/rate_per_s") {
        Some(r) => open(r),
        None => text(&w["pacing"]),
    };
    let faults = c.get("nemesis").map_or_else(|| "[]".to_string(), text);
    vec![
        ("topology", text(&c["topology"]["kind"])),
        ("nodes", if direct { "direct" } else { "proxied" }.into()),
        ("pacing", pacing),
        ("clients", text(&w["clients"])),
        ("resources", text(&w["resources"])),
        ("hold", text(&w["hold"])),
        ("ttl", text(ttl)),
        ("faults", faults),
    ]
}

/// Why `current` cannot be judged against `saved`: setup differences, or no strategy in common.
fn mismatches(current: &ReportInput, saved: &ReportInput) -> Vec<String> {
    let mut out: Vec<String> = setup(current)
        .into_iter()
        .zip(setup(saved))
        .filter(|((_, now), (_, before))| now != before)
        .map(|((name, now), (_, before))| format!("{name} {now} vs {before}"))
        .collect();
    let common = current.summary.strategies.iter().any(|s| {
        saved
            .summary
            .strategies
            .iter()
            .any(|b| b.strategy == s.strategy)
    });
    if !common {
        out.push("no strategy in common".into());
    }
    out
}

fn print_regressions(cmp: &BaselineComparison) {
    for r in cmp
        .rows
        .iter()
        .filter(|r| r.p99_regressed || r.throughput_regressed)
    {
        let pct =
            |c: Option<f64>| c.map_or_else(|| "n/a".to_string(), |c| format!("{:+.1}%", c * 100.0));
        eprintln!(
            "regression: {} {} vs baseline {}: p99 {} → {} µs ({}), throughput {:.1} → {:.1} ops/s ({})",
            cmp.current_run,
            r.strategy,
            cmp.baseline_run,
            r.p99_before_us,
            r.p99_after_us,
            pct(r.p99_change),
            r.throughput_before,
            r.throughput_after,
            pct(r.throughput_change),
        );
    }
}

/// Loads `runs`, compares them and writes the comparison into `out`; returns `comparison.html`.
/// Used at the end of a `lockbench chaos` batch (one run directory per scenario).
pub(super) fn write_comparison_for(runs: &[PathBuf], out: &Path) -> Result<PathBuf> {
    let inputs = report::load_run_dirs(runs)?;
    let comparison = report::compare(&inputs)?;
    Ok(report::write_comparison(out, &comparison)?.html)
}

/// The directory holding `run` (normally `results/`), resolving `results/latest`-style links.
fn results_root(run: &Path) -> PathBuf {
    let run = fs::canonicalize(run).unwrap_or_else(|_| run.to_path_buf());
    run.parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Creates `root/comparison-<UTC time>/` (adding `-2`, `-3`, … if taken).
pub(super) fn new_comparison_dir(root: &Path) -> Result<PathBuf> {
    let base = format!("comparison-{}", chrono::Utc::now().format("%Y%m%dT%H%M%SZ"));
    let mut name = base.clone();
    for n in 2.. {
        let candidate = root.join(&name);
        match fs::create_dir(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => name = format!("{base}-{n}"),
            Err(e) => {
                return Err(e).with_context(|| format!("cannot create {}", candidate.display()))
            }
        }
    }
    unreachable!("the loop returns")
}

/// Points `<parent>/latest-comparison` at `dir` (relative link, replaced atomically).
pub(super) fn point_latest_comparison(dir: &Path) -> Result<()> {
    let (Some(root), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Ok(());
    };
    let link = root.join("latest-comparison");
    let tmp = root.join(format!(".latest-comparison.{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    std::os::unix::fs::symlink(name, &tmp)
        .and_then(|()| fs::rename(&tmp, &link))
        .with_context(|| format!("cannot point {} at {}", link.display(), dir.display()))
}

/// The report `lockbench run` writes at its end: prints its path, or a warning when it fails
/// (the run's results are already on disk, so the run's exit code stands).
pub fn after_run(dir: &Path) {
    match write_for_run(dir) {
        Ok(html) => println!("report: {}", html.display()),
        Err(e) => eprintln!(
            "warning: the report could not be written: {e}\n\
             (the run's files are in {}; retry with `lockbench report {}`)",
            dir.display(),
            dir.display()
        ),
    }
}
