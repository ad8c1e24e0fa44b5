//! The per-run and comparison reports, opened in a real headless Chromium (Debian's package).
//!
//! A synthetic run (real HdrHistograms filled from a seeded generator, checker reports with fault
//! windows and anomalies) is written as a run directory the way `lockbench run` lays it out,
//! loaded back with `load_run_dir`, and reported.
//! Chromium then takes a screenshot (must not be blank), dumps the DOM (must hold the SVG plots
//! and the summary's numbers) and logs its console (must be silent; a page with a deliberate
//! `console.error` proves the detector sees errors).
//!
//! Chromium is installed by `scripts/install-chromium.sh` when missing; the test skips, loudly,
//! only when that fails. Screenshots are kept in `$CARGO_TARGET_TMPDIR/report-browser/`.

use std::fs;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use lockbench::checker::{
    Anomaly, AnomalyKind, CheckReport, Liveness, Stats, Verdict as CheckVerdict,
};
use lockbench::history::FaultWindow;
use lockbench::report::{
    baseline, compare, load_run_dir, spectrum_from_histogram, write_comparison, write_run_report,
    FaultMark, Need, ReportInput,
};
use lockbench::results::hgrm::percentile_distribution;
use lockbench::results::{LatencySummary, RunStatus, RunSummary, StrategySummary, TimelinePoint};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const SECONDS: u64 = 30;
const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(90);

/// One strategy's synthetic workload: ops per second and latency scale (µs).
struct Shape {
    name: &'static str,
    ops_per_s: u64,
    base_us: f64,
    tail_us: f64,
}

const SHAPES: [Shape; 3] = [
    Shape {
        name: "single",
        ops_per_s: 400,
        base_us: 180.0,
        tail_us: 60.0,
    },
    Shape {
        name: "single-fenced",
        ops_per_s: 340,
        base_us: 230.0,
        tail_us: 80.0,
    },
    Shape {
        name: "redlock",
        ops_per_s: 150,
        base_us: 700.0,
        tail_us: 250.0,
    },
];

fn pause_window() -> FaultMark {
    FaultMark {
        kind: "client-pause".into(),
        targets: vec!["c3".into()],
        start_s: 10.0,
        end_s: 14.0,
        strategy: None,
    }
}

fn partition_window() -> FaultMark {
    FaultMark {
        kind: "partition".into(),
        targets: vec!["n2".into(), "n3".into()],
        start_s: 20.0,
        end_s: 23.5,
        strategy: None,
    }
}

/// A run: per strategy a histogram per second and in total, faults slowing things down.
fn synthetic_run(
    run_id: &str,
    seed: u64,
    faults: &[FaultMark],
) -> (RunSummary, Vec<Histogram<u64>>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut strategies = Vec::new();
    let mut totals = Vec::new();
    for shape in &SHAPES {
        let mut total = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        let mut timeline = Vec::new();
        let (mut acquired_sum, mut errors_sum) = (0, 0);
        for second in 0..SECONDS {
            let t = second as f64 + 0.5;
            let faulted = faults.iter().any(|f| f.start_s <= t && t < f.end_s);
            let (ops, slow, errors) = if faulted {
                (shape.ops_per_s / 4, 6.0, shape.ops_per_s / 10)
            } else {
                (shape.ops_per_s, 1.0, rng.random_range(0..3))
            };
            let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
            for _ in 0..ops {
                let u: f64 = rng.random_range(1e-9..1.0);
                let us = (shape.base_us + -u.ln() * shape.tail_us * slow) as u64;
                h.record(us).unwrap();
                total.record(us).unwrap();
            }
            acquired_sum += ops;
            errors_sum += errors;
            timeline.push(TimelinePoint {
                second,
                acquired: ops,
                contended: ops / 3,
                errors,
                acquire_p99_us: h.value_at_quantile(0.99),
                harness_lag_max_us: 0,
            });
        }
        strategies.push(StrategySummary {
            strategy: shape.name.into(),
            elapsed_s: SECONDS as f64,
            attempts: acquired_sum + acquired_sum / 3 + errors_sum,
            acquired: acquired_sum,
            contended: acquired_sum / 3,
            errors: errors_sum,
            release_errors: 0,
            throughput_ops_s: acquired_sum as f64 / SECONDS as f64,
            acquire_ok: LatencySummary::from_histogram(&total),
            timeline,
            ..Default::default()
        });
        totals.push(total);
    }
    let summary = RunSummary {
        run_id: run_id.into(),
        lockbench_version: env!("CARGO_PKG_VERSION").into(),
        started_at: "2026-11-29T08:00:00Z".into(),
        finished_at: Some("2026-11-29T08:00:30Z".into()),
        status: RunStatus::Completed,
        error: None,
        config: serde_json::json!({"workload": {"clients": 8, "seed": seed}}),
        strategies,
    };
    (summary, totals)
}

/// The checker's report for each strategy, as `<strategy>/checker.json` holds it: the fault
/// windows (µs on the strategy's clock) and, when faulted, overlaps and stale writes.
fn check_reports(faults: &[FaultMark]) -> Vec<(&'static str, CheckReport)> {
    let anomaly = |kind, time_s: f64, clients: Vec<u32>, detail: &str| Anomaly {
        kind,
        resource: "r0".into(),
        time_us: (time_s * 1e6) as u64,
        end_us: None,
        clients,
        tokens: vec![],
        holders: None,
        ledger_seqs: vec![],
        fault_ids: vec![],
        detail: detail.into(),
    };
    let windows: Vec<FaultWindow> = faults
        .iter()
        .enumerate()
        .map(|(i, f)| FaultWindow {
            id: i as u64 + 1,
            kind: f.kind.clone(),
            targets: f.targets.clone(),
            start_us: (f.start_s * 1e6) as u64,
            end_us: Some((f.end_s * 1e6) as u64),
        })
        .collect();
    let valid = CheckReport {
        verdict: CheckVerdict::Valid,
        liveness: Liveness::Live,
        unknown_reasons: vec![],
        stats: Stats {
            availability_pct: 100.0,
            ..Stats::default()
        },
        anomalies: vec![],
        anomalies_omitted: 0,
        fence_mode: None,
        fault_windows: windows,
        history_truncated: false,
    };
    let mut single = valid.clone();
    let mut fenced = valid.clone();
    let mut redlock = valid;
    if !faults.is_empty() {
        single.verdict = CheckVerdict::Invalid;
        single.anomalies = vec![
            anomaly(
                AnomalyKind::MutexViolation,
                12.4,
                vec![3, 5],
                "r0: c5 began while c3 (paused) was inside",
            ),
            anomaly(
                AnomalyKind::MutexViolation,
                13.1,
                vec![3, 6],
                "r0: c6 began while c3 was inside",
            ),
            anomaly(
                AnomalyKind::StaleWriteAccepted,
                14.05,
                vec![3],
                "r0: token 812 written after 815",
            ),
        ];
        single.stats.mutex_violations = 2;
        single.stats.stale_writes_accepted = 1;
        fenced.verdict = CheckVerdict::Invalid;
        fenced.anomalies = vec![
            anomaly(
                AnomalyKind::MutexViolation,
                12.6,
                vec![3, 4],
                "r0: c4 began while c3 (paused) was inside",
            ),
            anomaly(
                AnomalyKind::StaleWriteRejected,
                14.02,
                vec![3],
                "r0: token 640 refused after 641",
            ),
        ];
        fenced.stats.mutex_violations = 1;
        fenced.stats.stale_writes_rejected = 1;
        redlock.stats.availability_pct = 93.0;
    }
    vec![
        ("single", single),
        ("single-fenced", fenced),
        ("redlock", redlock),
    ]
}

/// Writes a run directory the way a run does (summary.json, `<strategy>.hgrm`,
/// `<strategy>/checker.json`) and loads it back through the public loader.
fn run_dir(root: &Path, run_id: &str, seed: u64, faults: Vec<FaultMark>) -> (PathBuf, ReportInput) {
    let dir = root.join(run_id);
    fs::create_dir_all(&dir).unwrap();
    let (mut summary, totals) = synthetic_run(run_id, seed, &faults);
    let faulted = !faults.is_empty();
    summary.config["scenario"] = if faulted { "pause+partition" } else { "calm" }.into();
    fs::write(
        dir.join("summary.json"),
        serde_json::to_vec_pretty(&summary).unwrap(),
    )
    .unwrap();
    for (s, h) in summary.strategies.iter().zip(&totals) {
        fs::write(
            dir.join(format!("{}.hgrm", s.strategy)),
            percentile_distribution(h),
        )
        .unwrap();
        assert!(!spectrum_from_histogram(h).is_empty());
    }
    for (strategy, report) in check_reports(&faults) {
        fs::create_dir_all(dir.join(strategy)).unwrap();
        fs::write(
            dir.join(strategy).join("checker.json"),
            serde_json::to_vec_pretty(&report).unwrap(),
        )
        .unwrap();
    }
    let input = load_run_dir(&dir).unwrap();
    assert_eq!(
        input.scenario_name(),
        if faulted { "pause+partition" } else { "calm" }
    );
    assert_eq!(
        input.percentiles.len(),
        SHAPES.len(),
        "spectra loaded from .hgrm"
    );
    assert_eq!(
        input.fault_windows.len(),
        faults.len() * SHAPES.len(),
        "each strategy's fault windows loaded from its checker.json"
    );
    (dir, input)
}

// ---- chromium -------------------------------------------------------------------------

fn find_chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser"].iter().find_map(|name| {
        std::env::var_os("PATH")?
            .to_str()?
            .split(':')
            .map(|d| Path::new(d).join(name))
            .find(|p| p.is_file())
    })
}

/// Chromium, installed by the project's script when missing; `None` only if that fails.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = find_chromium() {
        return Some(p);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/install-chromium.sh");
    let status = Command::new("bash").arg(&script).status();
    eprintln!("ran {}: {status:?}", script.display());
    find_chromium()
}

/// Runs chromium headless on `url` with `args`, killing its process group past the deadline.
fn run_chromium(bin: &Path, profile: &Path, args: &[&str], url: &str) -> Output {
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--force-device-scale-factor=1",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("start chromium");
    let pgid = child.id() as i32;
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + CHROMIUM_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            // SAFETY: kill(2) on the process group we created for this chromium.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let _ = child.wait();
            panic!("chromium did not finish within {CHROMIUM_TIMEOUT:?} on {url}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Children of chromium (zygote, renderer) exit with it; make sure none linger.
    // SAFETY: as above; ESRCH when the group is already gone is fine.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    Output {
        status,
        stdout: out_reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}

/// Console lines chromium logged for the page (any message from a page without scripts is a
/// defect; uncaught exceptions show as console lines too).
fn console_lines(stderr: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .map(str::to_string)
        .collect()
}

/// DOM of `html_file` plus console lines.
fn dump_dom(bin: &Path, profile: &Path, html_file: &Path) -> (String, Vec<String>) {
    let url = format!("file://{}", html_file.display());
    let out = run_chromium(bin, profile, &["--dump-dom"], &url);
    assert!(
        out.status.success(),
        "chromium --dump-dom failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).unwrap(),
        console_lines(&out.stderr),
    )
}

/// Screenshot of `html_file` into `png`; returns (distinct colors, non-white fraction).
fn screenshot(
    bin: &Path,
    profile: &Path,
    html_file: &Path,
    png: &Path,
    size: (u32, u32),
) -> (usize, f64) {
    let url = format!("file://{}", html_file.display());
    let shot = format!("--screenshot={}", png.display());
    let window = format!("--window-size={},{}", size.0, size.1);
    let out = run_chromium(bin, profile, &[&shot, &window], &url);
    assert!(
        out.status.success(),
        "chromium --screenshot failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoder = png::Decoder::new(fs::File::open(png).expect("screenshot written"));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), size);
    let channels = info.color_type.samples();
    assert!(
        channels >= 3,
        "unexpected PNG color type {:?}",
        info.color_type
    );
    let mut colors = std::collections::HashSet::new();
    let mut non_white = 0usize;
    let pixels = buf[..info.buffer_size()].chunks(channels);
    let n = pixels.len();
    for px in pixels {
        colors.insert((px[0], px[1], px[2]));
        if px[0] < 240 || px[1] < 240 || px[2] < 240 {
            non_white += 1;
        }
    }
    (colors.len(), non_white as f64 / n as f64)
}

/// The value of `attr` in the first tag that contains `anchor`.
fn attr_after(dom: &str, anchor: &str, attr: &str) -> String {
    let start = dom
        .find(anchor)
        .unwrap_or_else(|| panic!("{anchor} not in DOM"));
    let tag_end = start + dom[start..].find('>').unwrap();
    let tag = &dom[start..tag_end];
    let key = format!("{attr}=\"");
    let from = tag
        .find(&key)
        .unwrap_or_else(|| panic!("{attr} not in {tag}"))
        + key.len();
    tag[from..from + tag[from..].find('"').unwrap()].to_string()
}

/// The text of the table row starting at `anchor`, tags stripped.
fn row_text(dom: &str, anchor: &str) -> String {
    let start = dom.find(anchor).unwrap();
    let end = start + dom[start..].find("</tr>").unwrap();
    let mut text = String::new();
    let mut in_tag = false;
    for c in dom[start..end].chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                text.push(' ');
            }
            _ if !in_tag => text.push(c),
            _ => {}
        }
    }
    text
}

fn latency_text(us: u64) -> String {
    if us < 1000 {
        format!("{us} µs")
    } else {
        format!("{:.2} ms", us as f64 / 1000.0)
    }
}

#[test]
fn reports_render_in_headless_chromium_with_the_summary_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("results");
    let (calm_dir, calm) = run_dir(&root, "20261129T080000Z-calm", 7, vec![]);
    let (chaos_dir, chaos) = run_dir(
        &root,
        "20261129T081000Z-chaos",
        8,
        vec![pause_window(), partition_window()],
    );

    let regression = baseline(&chaos, &calm);
    assert!(
        regression.has_regressions(),
        "faults slow every strategy down"
    );
    let files = write_run_report(&chaos_dir, &chaos, Some(&regression)).unwrap();
    write_run_report(&calm_dir, &calm, None).unwrap();
    for p in files.plots.iter().chain(&files.exports) {
        assert!(
            fs::metadata(p).unwrap().len() > 100,
            "{} is empty",
            p.display()
        );
    }
    let comparison = compare(&[calm.clone(), chaos.clone()]).unwrap();
    let cmp_files = write_comparison(&root.join("comparison"), &comparison).unwrap();
    // Keep the pages and plot files for a human look (screenshots go there too).
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-browser");
    fs::create_dir_all(&keep).unwrap();
    for p in files.plots.iter().chain(&cmp_files.plots) {
        fs::copy(p, keep.join(p.file_name().unwrap())).unwrap();
    }
    fs::copy(&files.html, keep.join("report.html")).unwrap();
    fs::copy(&cmp_files.html, keep.join("comparison.html")).unwrap();
    let html = fs::read_to_string(&files.html).unwrap();
    assert!(!html.contains("<script"), "report must not need scripts");
    assert!(
        !html.contains("https://") && !html.contains("src=\"http"),
        "report must not fetch anything"
    );

    let Some(bin) = chromium() else {
        eprintln!("\n\n!!!!!!!! SKIPPED: chromium is not installed and scripts/install-chromium.sh could not install it !!!!!!!!\n\n");
        return;
    };
    let profile = tmp.path().join("chromium-profile");

    // The console detector sees a console error on a page that makes one.
    let broken = tmp.path().join("broken.html");
    fs::write(
        &broken,
        "<html><body><script>console.error('boom'); undefinedFn();</script></body></html>",
    )
    .unwrap();
    let (_, console) = dump_dom(&bin, &profile, &broken);
    assert!(
        console.iter().any(|l| l.contains("boom")),
        "detector missed console.error: {console:?}"
    );
    assert!(
        console.iter().any(|l| l.contains("Uncaught")),
        "detector missed an exception: {console:?}"
    );

    // Per-run report: DOM, console, numbers from summary.json.
    let (dom, console) = dump_dom(&bin, &profile, &files.html);
    assert!(
        console.is_empty(),
        "console output from report.html: {console:?}"
    );
    let summary: RunSummary =
        serde_json::from_slice(&fs::read(chaos_dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        dom.matches("<svg").count(),
        1 + summary.strategies.len(),
        "one spectrum + one timeline per strategy"
    );
    assert!(
        dom.contains(">\n99.99%\n</text>"),
        "percentile axis labels drawn"
    );
    assert!(
        dom.contains("client-pause c3") && dom.contains("partition n2,n3"),
        "fault windows labelled"
    );
    for s in &summary.strategies {
        let anchor = format!("<tr data-strategy=\"{}\"", s.strategy);
        let thr: f64 = attr_after(&dom, &anchor, "data-throughput-ops-s")
            .parse()
            .unwrap();
        assert!(
            (thr - s.throughput_ops_s).abs() < 1e-3,
            "{}: {thr} vs {}",
            s.strategy,
            s.throughput_ops_s
        );
        assert_eq!(
            attr_after(&dom, &anchor, "data-acquire-p50-us"),
            s.acquire_ok.p50_us.to_string()
        );
        assert_eq!(
            attr_after(&dom, &anchor, "data-acquire-p99-us"),
            s.acquire_ok.p99_us.to_string()
        );
        assert_eq!(
            attr_after(&dom, &anchor, "data-verdict"),
            chaos.verdict_of(&s.strategy).as_str()
        );
        let text = row_text(&dom, &anchor);
        assert!(
            text.contains(&latency_text(s.acquire_ok.p50_us)),
            "p50 shown: {text}"
        );
        assert!(
            text.contains(&latency_text(s.acquire_ok.p99_us)),
            "p99 shown: {text}"
        );
    }
    assert_eq!(
        attr_after(&dom, "<tr data-strategy=\"single\"", "data-anomalies"),
        "3"
    );
    assert!(
        dom.contains("data-p99-regressed=\"true\""),
        "baseline regression shown"
    );

    let (colors, ink) = screenshot(
        &bin,
        &profile,
        &files.html,
        &keep.join("report.png"),
        (1100, 2600),
    );
    eprintln!("report.png: {colors} colors, {:.1}% non-white", ink * 100.0);
    assert!(
        colors > 100 && ink > 0.05,
        "report screenshot looks blank: {colors} colors, {ink}"
    );

    // Comparison page.
    let (dom, console) = dump_dom(&bin, &profile, &cmp_files.html);
    assert!(
        console.is_empty(),
        "console output from comparison.html: {console:?}"
    );
    assert_eq!(
        dom.matches("<svg").count(),
        3,
        "latency, throughput, availability bars"
    );
    assert_eq!(
        attr_after(
            &dom,
            "data-strategy=\"single\" data-scenario=\"pause+partition\"",
            "data-verdict"
        ),
        "invalid"
    );
    assert_eq!(
        attr_after(&dom, "<tr data-need=\"correctness-lock\"", "data-strategy"),
        "single-fenced"
    );
    let eff = comparison.recommendation(Need::EfficiencyLock).unwrap();
    assert_eq!(
        attr_after(&dom, "<tr data-need=\"efficiency-lock\"", "data-strategy"),
        eff.strategy.clone().unwrap_or_default()
    );
    let (colors, ink) = screenshot(
        &bin,
        &profile,
        &cmp_files.html,
        &keep.join("comparison.png"),
        (1100, 2200),
    );
    eprintln!(
        "comparison.png: {colors} colors, {:.1}% non-white",
        ink * 100.0
    );
    assert!(
        colors > 50 && ink > 0.05,
        "comparison screenshot looks blank: {colors} colors, {ink}"
    );
}
