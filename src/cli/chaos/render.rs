//! What `lockbench chaos` prints: each scenario's verdicts against its claim, the per-trial
//! lines and k/N tallies, the overview, and the progress line on a terminal.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use lockbench::orchestration::runner::{Progress as RunProgress, TestOutcome};
use lockbench::orchestration::trials::ExpectationTally;
use lockbench::results::table::fmt_us;

use super::trials::ScenarioTrials;

/// Renders one scenario's result: claim, then one row per strategy with its verdict and
/// whether the expectation held.
pub fn render(o: &TestOutcome) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n{} — {}", o.name, o.claim);
    let _ = writeln!(
        out,
        "  {:<15} {:>8} {:>9} {:>7} {:>9}  {:<9} {:<9} result",
        "strategy", "ops/s", "acquired", "errors", "p99", "verdict", "expected"
    );
    for s in &o.strategies {
        let exp = o.expectations.iter().find(|e| e.strategy == s.strategy);
        let verdict = s
            .check
            .as_ref()
            .map_or_else(|| "-".to_string(), |c| c.verdict.to_string());
        let interrupted = exp.is_some_and(|e| e.interrupted);
        let expected = exp
            .and_then(|e| e.expected.as_ref())
            .map_or("-", |e| e.verdict.as_str());
        let result = match exp.and_then(|e| e.met) {
            _ if interrupted => "interrupted: not judged".to_string(),
            Some(true) => "as claimed".to_string(),
            Some(false) => format!(
                "NOT AS CLAIMED: {}",
                exp.map(|e| e.mismatches.join("; ")).unwrap_or_default()
            ),
            None => "-".to_string(),
        };
        let _ = writeln!(
            out,
            "  {:<15} {:>8.0} {:>9} {:>7} {:>9}  {:<9} {:<9} {result}",
            s.strategy,
            s.throughput_ops_s,
            s.acquired,
            s.errors,
            fmt_us(s.acquire_ok.p99_us),
            verdict,
            expected
        );
        if let Some(c) = &s.check {
            let counts: Vec<String> = c
                .anomaly_counts
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            if !counts.is_empty() {
                let _ = writeln!(out, "  {:<15} anomalies: {}", "", counts.join(", "));
            }
        }
    }
    if o.interrupted {
        let _ = writeln!(
            out,
            "  (interrupted: partial results kept, not judged against the claim)"
        );
    }
    out
}

/// The progress line on a terminal: scenario, strategy, elapsed / duration, active faults.
pub(super) struct Progress {
    bar: Option<ProgressBar>,
    scenario: String,
}

impl Progress {
    pub(super) fn new(scenario: &str, disabled: bool) -> Self {
        let bar = (!disabled && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(250));
            bar
        });
        Self {
            bar,
            scenario: scenario.to_string(),
        }
    }

    pub(super) fn show(&self, event: RunProgress<'_>) {
        let line = progress_line(&self.scenario, event);
        match (&self.bar, event) {
            (Some(bar), _) => bar.set_message(line),
            // Without a terminal, only the steps (no line per second).
            (None, RunProgress::Tick { .. }) => {}
            (None, _) => eprintln!("  {line}"),
        }
    }

    pub(super) fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// One progress line, e.g. `06-redlock-minority-loss / redlock  2s / 5s  acquired 812,
/// errors 3  faults: kill n1,n2`.
pub(super) fn progress_line(scenario: &str, event: RunProgress<'_>) -> String {
    match event {
        RunProgress::Containers(tag) => format!("docker: network and containers {tag}*"),
        RunProgress::Strategy(name) => format!("running {name} …"),
        RunProgress::Tick {
            strategy,
            elapsed,
            duration,
            summary,
            active_faults,
        } => format!(
            "{scenario} / {strategy}  {}s / {}s  acquired {}, errors {}  faults: {}",
            elapsed.as_secs(),
            duration.unwrap_or_default().as_secs(),
            summary.acquired,
            summary.errors,
            if active_faults.is_empty() {
                "none".to_string()
            } else {
                active_faults.join("; ")
            }
        ),
    }
}

/// One line per expectation that did not hold in some trial, with why.
pub(super) fn unmet_lines(scenario_runs: &[ScenarioTrials<'_>], n: u32) -> Vec<String> {
    scenario_runs
        .iter()
        .flat_map(|r| r.tallies.iter().map(move |t| (r.scenario, t)))
        .filter(|(_, t)| t.not_as_claimed > 0)
        .map(|(s, t)| {
            let why: Vec<String> = t
                .misses
                .iter()
                .map(|m| {
                    let text = m.mismatches.join("; ");
                    if n > 1 {
                        format!("trial {}: {text}", m.trial)
                    } else {
                        text
                    }
                })
                .collect();
            if n > 1 {
                format!(
                    "{} / {}: as claimed in {}/{n} ({})",
                    s.name,
                    t.strategy,
                    t.as_claimed,
                    why.join(" | ")
                )
            } else {
                format!("{} / {}: {}", s.name, t.strategy, why.join(" | "))
            }
        })
        .collect()
}

/// One line per trial when a scenario runs several times: each strategy's verdict and whether
/// its expectation held.
pub fn render_trial(trial: u32, n: u32, seed: u64, o: &TestOutcome) -> String {
    let parts: Vec<String> = o
        .expectations
        .iter()
        .map(|e| {
            let result = match e.met {
                _ if e.interrupted => "interrupted: not judged".to_string(),
                Some(true) => "as claimed".to_string(),
                Some(false) => format!("NOT AS CLAIMED: {}", e.mismatches.join("; ")),
                None => "-".to_string(),
            };
            format!("{} {} {result}", e.strategy, e.observed)
        })
        .collect();
    let mut out = String::new();
    if trial == 1 {
        let _ = writeln!(out, "\n{} — {}", o.name, o.claim);
    }
    let _ = writeln!(
        out,
        "  trial {trial}/{n} (seed {seed}): {}",
        parts.join(" · ")
    );
    out
}

/// The k/N lines of one scenario after its trials.
pub fn render_tallies(scenario: &str, tallies: &[ExpectationTally]) -> String {
    let mut out = String::new();
    for t in tallies {
        let _ = writeln!(
            out,
            "  {scenario} / {}: expected {} — {}",
            t.strategy,
            expected_text(&t.expected),
            t.label()
        );
    }
    out
}

/// `invalid + mutex-violation, no stale-write-accepted`.
fn expected_text(e: &lockbench::orchestration::expectation::Expectation) -> String {
    let mut out = e.verdict.clone();
    for a in &e.anomalies {
        let _ = write!(out, " + {a}");
    }
    for a in &e.absent {
        let _ = write!(out, ", no {a}");
    }
    out
}

/// The table of every expectation after all scenarios: `as claimed in k/N`.
pub(super) fn render_overview(runs: &[ScenarioTrials<'_>], n: u32) -> String {
    let mut out = format!("\nas claimed per expectation over {n} trials:\n");
    for r in runs {
        for t in &r.tallies {
            let _ = writeln!(
                out,
                "  {:<36} {:<15} {:>5}  {}",
                r.scenario.name,
                t.strategy,
                format!("{}/{}", t.as_claimed, t.trials),
                if t.met() { String::new() } else { t.label() }
            );
        }
    }
    out
}
