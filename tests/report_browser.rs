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

mod common;

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

use common::cli::{copy_shipped_scenarios, expect_success, latest, run_in};
use common::report::latency_text;

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
        strategy: None,
        window: FaultWindow {
            kind: "client-pause".into(),
            targets: vec!["c3".into()],
            start_us: 10_000_000,
            end_us: Some(14_000_000),
            ..FaultWindow::default()
        },
    }
}

fn partition_window() -> FaultMark {
    FaultMark {
        strategy: None,
        window: FaultWindow {
            kind: "partition".into(),
            targets: vec!["n2".into(), "n3".into()],
            start_us: 20_000_000,
            end_us: Some(23_500_000),
            detail: "duration = 3500ms, mode = refuse; refuse: proxy disabled".into(),
            ..FaultWindow::default()
        },
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
            let faulted = faults.iter().any(|f| f.start_s() <= t && t < f.end_s());
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
        pid: None,
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
            ..f.window.clone()
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
        incidents: vec![],
        incidents_partial: false,
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
    assert_eq!(
        html.matches("<script").count(),
        1,
        "one inline script (the client timeline's zoom)"
    );
    assert!(!html.contains("<script src"), "no external script");
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
            chaos.verdict_of(&s.strategy).to_string()
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

// ---- real chaos runs: client timeline, incidents, readability -----------------------------

/// Measures the rendered page from inside it and appends the result as JSON in
/// `<pre id="probe">`: elements wider than the viewport (outside scroll containers), the client
/// timeline's holds and their colours, tooltips, incident links, zoom, and p50 bar widths.
const PROBE: &str = r##"<script>
(function () {
  var out = {}, W = window.innerWidth;
  out.viewport = W;
  out.scrollWidth = document.documentElement.scrollWidth;
  out.wide = [];
  document.querySelectorAll("body *").forEach(function (e) {
    var p = e.parentElement;
    if (p && (p.closest(".scroll") || p.closest("svg"))) { return; }
    var r = e.getBoundingClientRect();
    if (r.width > 0 && r.right > W + 0.5) {
      out.wide.push(e.tagName + "." + e.getAttribute("class") + " right=" + Math.round(r.right));
    }
  });
  var holds = Array.from(document.querySelectorAll("svg.lanes rect.hold"));
  var red = holds.filter(function (e) { return e.classList.contains("overlap"); });
  out.holds = holds.length;
  out.red = red.length;
  out.redFill = red.length ? getComputedStyle(red[0]).fill : "";
  out.blueFill = holds.length > red.length ? getComputedStyle(holds.filter(function (e) { return !e.classList.contains("overlap"); })[0]).fill : "";
  out.redWidthMin = red.reduce(function (m, e) { return Math.min(m, e.getBoundingClientRect().width); }, 1e9);
  var ht = document.querySelector("svg.lanes rect.hold title");
  out.holdTitle = ht ? ht.textContent : "";
  var at = document.querySelector("svg.lanes circle.attempt title");
  out.attemptTitle = at ? at.textContent : "";
  out.incidentLinks = 0;
  out.brokenLinks = 0;
  document.querySelectorAll("a[href^='#incident-']").forEach(function (a) {
    out.incidentLinks++;
    if (!document.getElementById(a.getAttribute("href").slice(1))) { out.brokenLinks++; }
  });
  out.zoomed = null;
  if (holds.length) {
    var h = holds[Math.floor(holds.length / 2)], before = h.getAttribute("width");
    var box = h.closest("div.lanes-box");
    box.querySelector("button[data-zoom=in]").click();
    out.zoomed = +h.getAttribute("width") > +before;
  }
  var bars = document.querySelector("figure[data-plot=comparison-latency] svg");
  out.p50 = [];
  if (bars) {
    bars.querySelectorAll("rect").forEach(function (r) {
      var fill = (r.getAttribute("fill") || "").toUpperCase();
      if ((r.getAttribute("opacity") || "1") === "1" && /^#/.test(fill) && fill !== "#FFFFFF"
          && fill !== "#5A5A5A" && +r.getAttribute("height") >= 8) {
        out.p50.push(r.getBoundingClientRect().width);
      }
    });
  }
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"##;

/// Loads `html_file` with [`PROBE`] appended in a `width`-pixel window; returns the probe's
/// JSON, the DOM and the console lines.
fn probe(
    bin: &Path,
    profile: &Path,
    html_file: &Path,
    width: u32,
) -> (serde_json::Value, String, Vec<String>) {
    let page = fs::read_to_string(html_file).unwrap();
    let probed = html_file.with_file_name(format!(
        "probe-{}",
        html_file.file_name().unwrap().to_string_lossy()
    ));
    fs::write(
        &probed,
        page.replace("</body>", &format!("{PROBE}\n</body>")),
    )
    .unwrap();
    let url = format!("file://{}", probed.display());
    let window = format!("--window-size={width},1200");
    let out = run_chromium(bin, profile, &["--dump-dom", &window], &url);
    assert!(
        out.status.success(),
        "chromium --dump-dom failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8(out.stdout).unwrap();
    let start = dom.find("<pre id=\"probe\">").expect("probe ran") + "<pre id=\"probe\">".len();
    let end = start + dom[start..].find("</pre>").unwrap();
    let json = dom[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    (value, dom, console_lines(&out.stderr))
}

/// `(seq, client, step, token, accepted)` of every witness ledger row listed for `strategy`.
fn witness_rows(dom: &str, strategy: &str) -> Vec<(i64, u32, String, String, bool)> {
    let anchor = format!("<div class=\"incidents\" data-strategy=\"{strategy}\"");
    let Some(start) = dom.find(&anchor) else {
        return Vec::new();
    };
    let section = &dom[start..];
    let section = &section[..section
        .find("<div class=\"strategy-time\"")
        .unwrap_or(section.len())];
    section
        .match_indices("<tr data-seq=\"")
        .map(|(i, _)| {
            let tag = &section[i..=i + section[i..].find('>').unwrap()];
            let attr = |a: &str| attr_after(tag, "<tr", a);
            (
                attr("data-seq").parse().unwrap(),
                attr("data-client").parse().unwrap(),
                attr("data-step"),
                attr("data-token"),
                attr("data-accepted") == "true",
            )
        })
        .collect()
}

fn assert_readable(name: &str, p: &serde_json::Value, console: &[String]) {
    assert!(console.is_empty(), "{name}: console output {console:?}");
    assert_eq!(
        p["wide"],
        serde_json::json!([]),
        "{name}: wider than the viewport"
    );
    assert!(
        p["scrollWidth"].as_f64().unwrap() <= p["viewport"].as_f64().unwrap(),
        "{name}: page scrolls sideways: {p}"
    );
    assert_eq!(p["brokenLinks"], 0, "{name}: incident links without target");
}

#[test]
fn real_02_and_06_runs_show_the_client_timeline_and_incidents_in_chromium() {
    let Some(bin) = chromium() else {
        eprintln!("\n\n!!!!!!!! SKIPPED: chromium is not installed and scripts/install-chromium.sh could not install it !!!!!!!!\n\n");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let scenarios = copy_shipped_scenarios(
        tmp.path(),
        &["02-naive-del-pause.toml", "06-redlock-minority-loss.toml"],
    );
    let results = tmp.path().join("results");
    let out = run_in(["chaos", scenarios.to_str().unwrap()], &results);
    expect_success(&out, "chaos 02 and 06");
    let batch = latest(&results);
    let profile = tmp.path().join("chromium-profile");
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-browser");
    fs::create_dir_all(&keep).unwrap();

    // 02: naive-del overlaps; every red bar belongs to an incident whose witness is the ledger.
    let run02 = batch.join("02-naive-del-pause");
    let (p, dom, console) = probe(&bin, &profile, &run02.join("report.html"), 1200);
    eprintln!("02 probe: {p}");
    assert_readable("02 report.html", &p, &console);
    assert!(p["red"].as_u64().unwrap() > 0, "no red overlap bars: {p}");
    assert_eq!(p["redFill"], "rgb(211, 47, 47)");
    assert_eq!(p["blueFill"], "rgb(74, 127, 193)");
    assert!(p["redWidthMin"].as_f64().unwrap() >= 1.0, "{p}");
    assert!(p["incidentLinks"].as_u64().unwrap() >= p["red"].as_u64().unwrap());
    assert_eq!(p["zoomed"], true, "zoom script ran");
    let hold = p["holdTitle"].as_str().unwrap();
    assert!(
        hold.contains("acquire invoked ") && hold.contains(" s, ok ") && hold.contains(" ms)"),
        "hold tooltip: {hold}"
    );
    let attempt = p["attemptTitle"].as_str().unwrap();
    assert!(
        attempt.contains("acquire r0: ") && attempt.contains("invoke ") && attempt.contains(" → "),
        "attempt tooltip: {attempt}"
    );
    let checker: serde_json::Value =
        serde_json::from_slice(&fs::read(run02.join("naive-del/checker.json")).unwrap()).unwrap();
    let incidents = checker["incidents"].as_array().unwrap();
    assert!(!incidents.is_empty(), "checker.json has incidents");
    assert!(incidents
        .iter()
        .all(|i| !i["cause"].as_str().unwrap().is_empty()));
    assert!(
        dom.contains("class=\"incident safety\" id=\"incident-naive-del-1\""),
        "incident list"
    );
    for strategy in ["naive-del", "single"] {
        let rows = witness_rows(&dom, strategy);
        let mut ledger = std::collections::HashMap::new();
        lockbench::ledger::LedgerFile::open(run02.join(strategy).join("ledger.sqlite"))
            .unwrap()
            .for_each_event(|e| {
                ledger.insert(e.seq, e);
            })
            .unwrap();
        if strategy == "naive-del" {
            assert!(
                !rows.is_empty(),
                "naive-del incidents list their ledger rows"
            );
        }
        for (seq, client, step, token, accepted) in rows {
            let e = ledger
                .get(&seq)
                .unwrap_or_else(|| panic!("{strategy}: witness row {seq} not in the ledger"));
            assert_eq!(
                (e.client, e.step.as_str(), e.accepted),
                (client, step.as_str(), accepted),
                "{strategy}: row {seq}"
            );
            assert_eq!(
                e.fencing_token.map_or_else(String::new, |t| t.to_string()),
                token
            );
        }
    }
    let (colors, ink) = screenshot(
        &bin,
        &profile,
        &run02.join("report.html"),
        &keep.join("report-02.png"),
        (1200, 3000),
    );
    assert!(colors > 100 && ink > 0.05, "02 screenshot blank");

    // 06: redlock survives; lanes drawn, nothing red, no safety incident.
    let run06 = batch.join("06-redlock-minority-loss");
    let (p, dom, console) = probe(&bin, &profile, &run06.join("report.html"), 1200);
    eprintln!("06 probe: {p}");
    assert_readable("06 report.html", &p, &console);
    assert!(p["holds"].as_u64().unwrap() > 10, "{p}");
    assert_eq!(p["red"], 0, "{p}");
    assert!(!dom.contains("data-safety=\"true\""));
    assert!(dom.contains("kill n"), "kill window labelled: {p}");

    // The comparison of both: p50 bars visible on the log axis, nothing cut off at 1200 px.
    let cmp = batch.join("comparison/comparison.html");
    let (p, _, console) = probe(&bin, &profile, &cmp, 1200);
    eprintln!("comparison probe: {p}");
    assert_readable("comparison.html", &p, &console);
    let p50: Vec<f64> = p["p50"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(p50.len(), 3, "one p50 bar per strategy row: {p}");
    assert!(
        p50.iter().all(|w| *w >= 3.0),
        "p50 bars too thin to see: {p50:?}"
    );
}

/// A matrix report from hand-built trials: 3 strategies × 3 faults × 3 trials of 4 exposed
/// episodes each (a broken trial's episodes damaging), one cell with no evidence at all.
fn synthetic_matrix() -> lockbench::matrix::MatrixReport {
    use lockbench::checker::{AnomalyKind, Verdict as V};
    use lockbench::matrix::{
        EpisodeOutcome, FaultClass, MatrixPlan, MatrixReport, MatrixWorkload, TrialRecord,
        TrialStatus,
    };
    use lockbench::strategy::StrategyKind;
    let plan = MatrixPlan::new(
        vec![
            StrategyKind::Single,
            StrategyKind::RedlockFenced,
            StrategyKind::NaiveDel,
        ],
        vec![
            FaultClass::None,
            FaultClass::ClientPause,
            FaultClass::Failover,
        ],
        3,
        MatrixWorkload::standard(),
    );
    let mut report = MatrixReport::new(&plan, "20261201T000000Z-matrix");
    let mut rng = StdRng::seed_from_u64(11);
    for (si, s) in ["single", "redlock-fenced", "naive-del"].iter().enumerate() {
        for (fi, f) in ["none", "client-pause", "failover"].iter().enumerate() {
            if (*s, *f) == ("naive-del", "failover") {
                let failed = (1..=3)
                    .map(|t| {
                        TrialRecord::not_run(
                            t,
                            t as u64,
                            format!("trials/{s}/{f}/t{t}"),
                            TrialStatus::Failed,
                            Some("node did not start".into()),
                        )
                    })
                    .collect();
                report.set_trials(s, f, failed);
                continue;
            }
            let trials = (1..=3u32)
                .map(|t| {
                    let mut r = TrialRecord::not_run(
                        t,
                        t as u64,
                        format!("trials/{s}/{f}/t{t}"),
                        TrialStatus::Completed,
                        None,
                    );
                    let broken = *f == "client-pause" && *s != "redlock-fenced" && t != 2;
                    r.verdict = Some(if broken { V::Invalid } else { V::Valid });
                    r.liveness = Some(Liveness::Live);
                    r.sections = rng.random_range(200..400);
                    r.acquired = r.sections;
                    if broken {
                        r.anomaly_counts.insert("mutex-violation".into(), t as u64);
                    }
                    if *s == "redlock-fenced" && *f == "client-pause" {
                        r.anomaly_counts.insert("stale-write-rejected".into(), 2);
                    }
                    r.acquire_p50_us = 2_000 * (si as u64 + 1);
                    r.acquire_p99_us = rng.random_range(20_000..900_000) * (fi as u64 + 1);
                    r.throughput_ops_s = 40.0 - 8.0 * si as f64 - rng.random_range(0.0..5.0);
                    r.availability_pct = Some(rng.random_range(85.0..99.0));
                    r.episodes = (1..=4u32)
                        .map(|e| {
                            let start_us = u64::from(e) * 1_000_000;
                            EpisodeOutcome {
                                trial: t,
                                index: e,
                                start_us,
                                heal_us: Some(start_us + 600_000),
                                end_us: start_us + 1_000_000,
                                targets: vec!["client:0".into()],
                                exposed: true,
                                exposure: "client:0 held resource 0".into(),
                                damage: if broken {
                                    vec![AnomalyKind::MutexViolation]
                                } else {
                                    vec![]
                                },
                                first_damage_us: broken.then_some(start_us + 500_000),
                                unsafe_belief: false,
                                stuck: false,
                                recovery_us: Some(rng.random_range(5_000..60_000)),
                                harness_lag_us: None,
                            }
                        })
                        .collect();
                    r
                })
                .collect();
            report.set_trials(s, f, trials);
        }
    }
    report.status = lockbench::matrix::MatrixStatus::Completed;
    report
}

#[test]
fn matrix_page_renders_in_headless_chromium_with_the_matrix_json_figures() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("20261201T000000Z-matrix");
    fs::create_dir_all(&dir).unwrap();
    let report = synthetic_matrix();
    lockbench::report::matrix::write_matrix_files(&dir, &report).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("matrix.json")).unwrap()).unwrap();
    let keep = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-browser");
    fs::create_dir_all(&keep).unwrap();
    fs::copy(dir.join("matrix.html"), keep.join("matrix.html")).unwrap();
    let Some(bin) = chromium() else {
        eprintln!("\n\n!!!!!!!! SKIPPED: chromium is not installed and scripts/install-chromium.sh could not install it !!!!!!!!\n\n");
        return;
    };
    let profile = tmp.path().join("profile");
    let html = dir.join("matrix.html");
    let (dom, console) = dump_dom(&bin, &profile, &html);
    assert!(console.is_empty(), "console output: {console:?}");
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 9);
    assert_eq!(
        dom.matches("<td class=\"cell").count(),
        9,
        "one heat-map cell per record"
    );
    for c in cells {
        let anchor = format!(
            "data-strategy=\"{}\" data-fault=\"{}\"",
            c["strategy"].as_str().unwrap(),
            c["fault"].as_str().unwrap()
        );
        let attr = |a: &str| attr_after(&dom, &anchor, a);
        let name = &anchor;
        assert_eq!(
            attr("data-verdict"),
            c["verdict"].as_str().unwrap(),
            "{name}"
        );
        assert_eq!(
            attr("data-trials"),
            c["trials_checked"].to_string(),
            "{name}"
        );
        assert_eq!(attr("data-invalid"), c["invalid"].to_string(), "{name}");
        assert_eq!(attr("data-sections"), c["sections"].to_string(), "{name}");
        assert_eq!(
            attr("data-p99-us"),
            c["acquire_p99_us"].to_string(),
            "{name}"
        );
        assert_eq!(
            attr("data-p50-us"),
            c["acquire_p50_us"].to_string(),
            "{name}"
        );
        assert_eq!(
            attr("data-stale-writes-accepted"),
            c["stale_writes_accepted"].to_string(),
            "{name}"
        );
        assert_eq!(
            attr("data-exposed"),
            c["episodes"]["exposed"].to_string(),
            "{name}"
        );
        assert_eq!(
            attr("data-damaging"),
            c["episodes"]["damaging"].to_string(),
            "{name}"
        );
        let shown: f64 = attr("data-throughput").parse().unwrap();
        assert!(
            (shown - c["throughput_ops_s"].as_f64().unwrap()).abs() < 1e-3,
            "{name}"
        );
    }
    // The hand-built counts, read back from the page.
    let single_pause = "data-strategy=\"single\" data-fault=\"client-pause\"";
    assert_eq!(attr_after(&dom, single_pause, "data-invalid"), "2");
    let failed = "data-strategy=\"naive-del\" data-fault=\"failover\"";
    assert_eq!(attr_after(&dom, failed, "data-verdict"), "unknown");
    assert_eq!(attr_after(&dom, failed, "data-trials"), "0");
    // Decision table and both charts are there.
    let correctness = attr_after(&dom, "data-need=\"correctness\"", "data-recommended");
    assert_eq!(
        correctness,
        json["decision"]["correctness"]["recommended"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect::<Vec<_>>()
            .join(",")
    );
    assert_eq!(correctness, "redlock-fenced");
    assert!(dom.contains("id=\"latency-p99\"") && dom.contains("id=\"throughput\""));
    let (colors, ink) = screenshot(
        &bin,
        &profile,
        &html,
        &keep.join("matrix.png"),
        (1100, 1800),
    );
    eprintln!("matrix.png: {colors} colors, {:.1}% non-white", ink * 100.0);
    assert!(
        colors > 50 && ink > 0.05,
        "matrix screenshot looks blank: {colors} colors, {ink}"
    );
}
