//! [`RunSummary`]: the single serde struct written as `summary.json` and read by every exporter.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Where a run stands. A file that still says `running` after the process is gone means the
/// run was killed hard (SIGKILL, power loss); its numbers cover what was measured until then.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunStatus {
    /// Still measuring; the file is rewritten about once a second.
    Running,
    /// Every strategy ran to its stop condition.
    Completed,
    /// Stopped early by Ctrl-C / SIGTERM; numbers cover the time measured.
    Interrupted,
    /// Stopped by an error; `error` says which.
    Failed,
}

/// Latency percentiles of one histogram, all in microseconds (µs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Number of samples.
    pub count: u64,
    /// Mean, µs.
    pub mean_us: f64,
    /// 50th percentile, µs.
    pub p50_us: u64,
    /// 90th percentile, µs.
    pub p90_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// 99.9th percentile, µs.
    pub p999_us: u64,
    /// Largest sample, µs.
    pub max_us: u64,
}

impl LatencySummary {
    /// Summarizes a histogram whose values are µs. An empty histogram gives all zeros.
    pub fn from_histogram(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        Self {
            count: h.len(),
            mean_us: h.mean(),
            p50_us: h.value_at_quantile(0.50),
            p90_us: h.value_at_quantile(0.90),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        }
    }
}

/// Counts for one second of a strategy's run (second 0 starts when its clients start).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimelinePoint {
    /// Seconds since the strategy's start.
    pub second: u64,
    /// Acquisitions that succeeded in this second.
    pub acquired: u64,
    /// Acquisitions refused because another owner held the lock (contention).
    pub contended: u64,
    /// Acquisitions that ended in an error or timeout.
    pub errors: u64,
    /// 99th percentile of successful acquire latency in this second, µs (0 when none).
    pub acquire_p99_us: u64,
    /// Largest lag of the harness's own scheduling in this second, µs (see [`HarnessHealth`]).
    #[serde(default)]
    pub harness_lag_max_us: u64,
}

/// How well the harness itself kept up during one strategy's run. lockbench runs its clients,
/// history and ledger in one process; when that process cannot keep up (too many clients for
/// the cores), its own delays stretch critical sections and can push them past their leases:
/// an anomaly then says more about the harness than about the lock. This records how late the
/// harness was, so a report can tell the two apart.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HarnessHealth {
    /// How late a probe task on the clients' runtime woke up versus its 10 ms schedule, µs:
    /// the delay any client step suffers before it runs.
    #[serde(default)]
    pub scheduler_lag: LatencySummary,
    /// `adapter:*` strategies: the harness's own cost per answered adapter request, µs —
    /// lockbench's round trip minus the adapter's `finished_ns − started_ns` around the library
    /// call (pipe, JSON on both sides, both processes' scheduling). Absent for built-in
    /// strategies and in summaries written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter_overhead: Option<LatencySummary>,
    /// Where [`adapter_overhead`](Self::adapter_overhead) goes, for adapters that report
    /// `received_ns` on the machine's monotonic clock (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter_overhead_legs: Option<AdapterOverheadLegs>,
    /// Most ledger requests waiting for the ledger thread at once (0 without audit).
    #[serde(default)]
    pub ledger_queue_max: u64,
    /// The lease TTL the lag is judged against, ms (0 = no expiry).
    #[serde(default)]
    pub ttl_ms: u64,
    /// True when the largest lag reached a tenth of the TTL: sections can then overrun their
    /// leases because of the harness, not the lock.
    pub overloaded: bool,
    /// One sentence for people: what the harness did and what it means (absent when healthy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The legs of the harness's overhead per adapter request, µs (each over the replies whose
/// timestamps allow the split; see `docs/adapter-protocol.md`, §3 "Timestamps").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AdapterOverheadLegs {
    /// lockbench's own part: waiting to write the request, and from reading the reply to the
    /// waiting client's wake-up.
    pub lockbench: LatencySummary,
    /// From lockbench's write to the adapter's read of the request (pipe, the adapter's wake-up).
    pub to_adapter: LatencySummary,
    /// Inside the adapter before the library call (parsing, the hand-over to the thread that
    /// runs it).
    pub in_adapter: LatencySummary,
    /// From the end of the library call to lockbench's read of the reply (encoding, pipe,
    /// lockbench's reader waking).
    pub from_adapter: LatencySummary,
}

impl HarnessHealth {
    /// The harness lag (µs) from which a run with lease TTL `ttl_ms` counts as overloaded: a
    /// tenth of the TTL (1 s without a TTL).
    pub fn lag_limit_us(ttl_ms: u64) -> u64 {
        if ttl_ms > 0 {
            ttl_ms * 100
        } else {
            1_000_000
        }
    }

    /// Judges a run's lag histogram (µs) against `ttl_ms` (0 = no TTL: never overloaded for
    /// lease purposes, but a lag above 1 s is still reported).
    pub fn judge(scheduler_lag: LatencySummary, ledger_queue_max: u64, ttl_ms: u64) -> Self {
        let max_ms = scheduler_lag.max_us as f64 / 1000.0;
        let p99_ms = scheduler_lag.p99_us as f64 / 1000.0;
        let overloaded =
            scheduler_lag.count > 0 && scheduler_lag.max_us >= Self::lag_limit_us(ttl_ms);
        let note = overloaded.then(|| {
            let against = if ttl_ms > 0 {
                format!("TTL {ttl_ms} ms")
            } else {
                "no TTL".to_string()
            };
            format!(
                "harness overloaded: its own scheduling lagged up to {max_ms:.0} ms (p99 {p99_ms:.0} ms) \
                 vs {against}; a critical section can overrun its lease because of the harness, not the \
                 lock (fewer clients, or more cores, give a truthful run)"
            )
        });
        Self {
            scheduler_lag,
            adapter_overhead: None,
            adapter_overhead_legs: None,
            ledger_queue_max,
            ttl_ms,
            overloaded,
            note,
        }
    }
}

/// The checker's conclusion for one strategy, as kept in the summary (the full report with
/// every anomaly is `<strategy>/checker.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckSummary {
    /// `valid`, `invalid` or `unknown`.
    pub verdict: crate::checker::Verdict,
    /// `live`, `degraded` or `stuck`.
    pub liveness: crate::checker::Liveness,
    /// Why the verdict is unknown (empty otherwise).
    pub unknown_reasons: Vec<String>,
    /// Anomaly counts per kind (kebab-case names, e.g. `mutex-violation`), listed or not.
    pub anomaly_counts: std::collections::BTreeMap<String, u64>,
    /// The checker's counters.
    pub stats: crate::checker::Stats,
}

impl CheckSummary {
    /// Condenses a full report.
    pub fn from_report(r: &crate::checker::CheckReport) -> Self {
        use crate::checker::AnomalyKind as K;
        let st = &r.stats;
        let mut counts = std::collections::BTreeMap::new();
        let mut put = |k: K, n: u64| {
            if n > 0 {
                counts.insert(k.to_string(), n);
            }
        };
        let effects = st.effects.clone().unwrap_or_default();
        // Every kind, by an exhaustive match: a new kind cannot be left out of the counts.
        for &k in <K as strum::VariantArray>::VARIANTS {
            let n = match k {
                K::MutexViolation => st.mutex_violations,
                K::StaleWriteAccepted => st.stale_writes_accepted,
                K::StaleWriteRejected => st.stale_writes_rejected,
                K::LostUpdate => st.lost_updates,
                K::TokenRegression => st.token_regressions,
                K::TokenDuplicate => st.token_duplicates,
                K::StuckResource => st.stuck_resources,
                K::Unavailable => st.unavailability_windows,
                K::BelievedOverlap => st.believed_overlaps,
                K::PossibleOverlap => st.possible_overlaps,
                K::DuplicateEffect => effects.duplicate_effects,
                K::UnexpectedEffect => effects.unexpected_effects,
                K::EffectDeduplicated => effects.replayed + effects.conflicts,
                K::DuplicateExecution => effects.duplicate_executions,
                K::ZombieCompletion => st.zombie_completions,
                K::StaleCompletionRefused => st.stale_completions_refused,
            };
            put(k, n);
        }
        Self {
            verdict: r.verdict,
            liveness: r.liveness,
            unknown_reasons: r.unknown_reasons.clone(),
            anomaly_counts: counts,
            stats: st.clone(),
        }
    }
}

/// Everything measured for one strategy in one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StrategySummary {
    /// Strategy name as given on the CLI (`single`, `redlock-fenced`, …).
    pub strategy: String,
    /// Wall time the clients ran, seconds.
    pub elapsed_s: f64,
    /// Acquire attempts that finished (acquired + contended + errors).
    pub attempts: u64,
    /// Successful acquisitions.
    pub acquired: u64,
    /// Acquisitions refused because the lock was held (includes quorum not reached for lack of free nodes).
    pub contended: u64,
    /// Acquisitions that ended in a node error, a timeout or exhausted validity.
    pub errors: u64,
    /// Releases that failed or timed out.
    pub release_errors: u64,
    /// Complete lock cycles (acquire → critical section → release) per second, ops/s.
    pub throughput_ops_s: f64,
    /// Successful acquire latency (µs), measured from the intended start in open-loop mode.
    pub acquire_ok: LatencySummary,
    /// Failed acquire latency (µs): how long a client waited to hear "no".
    pub acquire_fail: LatencySummary,
    /// Release latency (µs).
    pub release: LatencySummary,
    /// Whole critical section, acquire-ok → release done (µs).
    pub critical_section: LatencySummary,
    /// Per-second counts.
    pub timeline: Vec<TimelinePoint>,
    /// Most frequent error messages with their counts, so a dying node is visible.
    pub error_samples: Vec<(String, u64)>,
    /// Whether the harness kept up (absent in summaries written before it was measured).
    #[serde(default)]
    pub harness: HarnessHealth,
    /// The checker's verdict (absent while running, or when auditing was off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckSummary>,
    /// Critical sections still inside when the run's drain grace ran out: stopped before their
    /// write and `end` (see [`crate::driver::drain_grace`]).
    #[serde(default)]
    pub cut_sections: u64,
}

/// The summary of one run, written to `results/<run-id>/summary.json` and rewritten as it goes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Directory name under `results/`.
    pub run_id: String,
    /// `lockbench` version that wrote it.
    pub lockbench_version: String,
    /// RFC 3339 start time (UTC).
    pub started_at: String,
    /// RFC 3339 end time (UTC), once finished.
    pub finished_at: Option<String>,
    /// Where the run stands.
    pub status: RunStatus,
    /// Why the run failed, when `status` is `failed`.
    pub error: Option<String>,
    /// The resolved configuration (also written to `config.json`), passwords redacted.
    pub config: serde_json::Value,
    /// One entry per strategy, in the order they ran.
    pub strategies: Vec<StrategySummary>,
    /// Process id of the `lockbench` process that writes this run (on this machine), so a
    /// file that still says `running` after that process is gone is recognised as a run that
    /// died ([`RunSummary::mark_if_died`]). Absent in files written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

impl RunSummary {
    /// A summary for a run that starts now: status `running`, no strategies yet.
    pub fn start(run_id: &str, config: serde_json::Value) -> Self {
        Self {
            run_id: run_id.to_string(),
            lockbench_version: env!("CARGO_PKG_VERSION").to_string(),
            started_at: chrono::Utc::now().to_rfc3339(),
            finished_at: None,
            status: RunStatus::Running,
            error: None,
            config,
            strategies: Vec::new(),
            pid: Some(std::process::id()),
        }
    }

    /// A run whose file says `running` while the process that wrote it ([`RunSummary::pid`])
    /// no longer exists died without finishing (SIGKILL, OOM killer, power loss): marks it
    /// `failed` with that reason (the error names the pid) and returns the reason; `None`
    /// (nothing changed) when the run finished, its process is alive, or no pid was recorded.
    /// The pid is looked up on this machine: a run directory copied from another machine while
    /// it ran is marked too, which is what a reader there needs to know.
    pub fn mark_if_died(&mut self) -> Option<String> {
        let pid = self.pid.filter(|_| self.status == RunStatus::Running)?;
        if process_exists(pid) {
            return None;
        }
        let reason = format!(
            "the lockbench process (pid {pid}) that wrote this run is gone but never finished \
             it (killed?): the numbers stop at its last progress write, and the history's and \
             the ledger's tails may be lost"
        );
        self.status = RunStatus::Failed;
        self.error = Some(reason.clone());
        Some(reason)
    }
}

/// Whether a live process with this pid exists here (`kill(pid, 0)`: success or "no
/// permission" both mean it exists), a zombie (killed, not yet reaped by its parent) not
/// counting as live.
fn process_exists(pid: u32) -> bool {
    let Ok(id) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let rc = unsafe { libc::kill(id, 0) };
    let exists = rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    exists && !is_zombie(pid)
}

/// Whether `/proc/<pid>/stat` shows the process dead but unreaped (state `Z` or `X`).
fn is_zombie(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the parenthesised command name, which may itself hold spaces.
    let state = stat.rsplit(')').next().unwrap_or("").trim_start();
    state.starts_with('Z') || state.starts_with('X')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(pid: Option<u32>) -> RunSummary {
        RunSummary {
            pid,
            ..RunSummary::start("r", serde_json::json!({}))
        }
    }

    #[test]
    fn a_run_is_marked_died_only_when_its_process_is_gone() {
        // This process is alive; no pid recorded: nothing can be said.
        assert_eq!(running(Some(std::process::id())).mark_if_died(), None);
        assert_eq!(running(None).mark_if_died(), None);
        // A killed child not yet reaped (a zombie) is gone, and so is one reaped.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        child.kill().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !is_zombie(pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "{pid} never became a zombie"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let mut s = running(Some(pid));
        let reason = s.mark_if_died().expect("a zombie is dead");
        assert!(reason.contains(&format!("pid {pid}")), "{reason}");
        assert_eq!(s.status, RunStatus::Failed);
        assert_eq!(s.error.as_deref(), Some(reason.as_str()));
        child.wait().unwrap();
        assert!(running(Some(pid)).mark_if_died().is_some());
        // A finished run is left alone.
        let mut done = running(Some(pid));
        done.status = RunStatus::Completed;
        assert_eq!(done.mark_if_died(), None);
    }
}
