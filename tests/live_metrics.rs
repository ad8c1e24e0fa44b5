//! `--metrics`: the real binary serving `/metrics` while a real run goes (embedded single-node
//! topology behind the embedded Toxiproxy), its text checked against the OpenMetrics
//! grammar's essentials, its final counters against `summary.json`, and the endpoint gone
//! after the linger; a port in use refused before anything starts.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Stdio;
use std::time::Duration;

use common::cli::{assert_refused, spawn_in, summary_so_far};
use common::process::wait_exit;
use common::wait::wait_for;

/// One sample line: metric name, labels, value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A free loopback port (bound, read, released).
fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// `GET /metrics` over a plain TCP connection: `Some((content type, body))`, `None` when
/// nothing answers.
fn scrape(addr: SocketAddr) -> Option<(String, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: lockbench\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).ok()?;
    let (head, body) = reply.split_once("\r\n\r\n")?;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let content_type = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    Some((content_type, body.to_string()))
}

fn valid_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Parses `name{a="x",b="y"} value` (label values here never hold `"` or `,`).
fn parse_sample(line: &str) -> Sample {
    let (series, value) = line
        .rsplit_once(' ')
        .unwrap_or_else(|| panic!("no value: {line:?}"));
    let value: f64 = match value {
        "+Inf" => f64::INFINITY,
        v => v.parse().unwrap_or_else(|_| panic!("bad value: {line:?}")),
    };
    let (name, labels) = match series.split_once('{') {
        None => (series, BTreeMap::new()),
        Some((name, rest)) => {
            let inner = rest
                .strip_suffix('}')
                .unwrap_or_else(|| panic!("unclosed labels: {line:?}"));
            let labels = inner
                .split(',')
                .map(|kv| {
                    let (k, v) = kv
                        .split_once('=')
                        .unwrap_or_else(|| panic!("bad label {kv:?} in {line:?}"));
                    assert!(valid_name(k), "bad label name {k:?} in {line:?}");
                    let v = v
                        .strip_prefix('"')
                        .and_then(|v| v.strip_suffix('"'))
                        .unwrap_or_else(|| panic!("unquoted label value in {line:?}"));
                    (k.to_string(), v.to_string())
                })
                .collect();
            (name, labels)
        }
    };
    assert!(valid_name(name), "bad metric name in {line:?}");
    Sample {
        name: name.to_string(),
        labels,
        value,
    }
}

/// Checks the OpenMetrics text format's essentials and returns the samples: the exposition
/// ends with `# EOF`; every sample belongs to a family declared by `# TYPE` before it (a
/// counter's samples end `_total`, a histogram's are `_bucket` with `le`, `_sum`, `_count`);
/// a `# UNIT` is a suffix of its family's name; histogram buckets are cumulative and `+Inf`
/// equals `_count`.
fn parse_openmetrics(text: &str) -> Vec<Sample> {
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.last(),
        Some(&"# EOF"),
        "no `# EOF` at the end:\n{text}"
    );
    assert!(text.ends_with("# EOF\n"), "text after # EOF");
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = Vec::new();
    for line in &lines[..lines.len() - 1] {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kind, family) = (parts.next().unwrap(), parts.next().unwrap_or(""));
            assert!(valid_name(family), "bad family in {line:?}");
            match kind {
                "TYPE" => {
                    let t = parts.next().unwrap_or("");
                    assert!(
                        [
                            "counter",
                            "gauge",
                            "histogram",
                            "summary",
                            "info",
                            "stateset",
                            "unknown",
                            "gaugehistogram"
                        ]
                        .contains(&t),
                        "unknown type in {line:?}"
                    );
                    assert!(
                        types.insert(family.to_string(), t.to_string()).is_none(),
                        "family declared twice: {line:?}"
                    );
                }
                "UNIT" => {
                    let unit = parts.next().unwrap_or("");
                    assert!(family.ends_with(&format!("_{unit}")), "{line:?}");
                }
                "HELP" => {}
                other => panic!("unknown descriptor {other:?}: {line:?}"),
            }
            continue;
        }
        assert!(!line.is_empty(), "empty line in the exposition");
        let s = parse_sample(line);
        let family = types
            .iter()
            .filter(|(f, _)| s.name.starts_with(f.as_str()))
            .max_by_key(|(f, _)| f.len())
            .unwrap_or_else(|| panic!("sample of an undeclared family: {line:?}"));
        let suffix = &s.name[family.0.len()..];
        match family.1.as_str() {
            "counter" => assert_eq!(suffix, "_total", "counter sample {line:?}"),
            "gauge" => assert_eq!(suffix, "", "gauge sample {line:?}"),
            "histogram" => {
                assert!(
                    ["_bucket", "_sum", "_count"].contains(&suffix),
                    "histogram sample {line:?}"
                );
                if suffix == "_bucket" {
                    assert!(s.labels.contains_key("le"), "bucket without le: {line:?}");
                }
            }
            t => panic!("type {t} not expected here: {line:?}"),
        }
        samples.push(s);
    }
    // Buckets cumulative, +Inf = _count, per series.
    for (family, t) in &types {
        if t != "histogram" {
            continue;
        }
        let bucket = format!("{family}_bucket");
        let count = format!("{family}_count");
        let series: BTreeSet<BTreeMap<String, String>> = samples
            .iter()
            .filter(|s| s.name == bucket)
            .map(|s| {
                let mut l = s.labels.clone();
                l.remove("le");
                l
            })
            .collect();
        for labels in series {
            let mut last = 0.0;
            let mut inf = None;
            for s in samples.iter().filter(|s| s.name == bucket) {
                let mut l = s.labels.clone();
                let le = l.remove("le").unwrap();
                if l != labels {
                    continue;
                }
                assert!(s.value >= last, "{family} buckets not cumulative");
                last = s.value;
                if le == "+Inf" {
                    inf = Some(s.value);
                }
            }
            let n = samples
                .iter()
                .find(|s| s.name == count && s.labels == labels)
                .map(|s| s.value);
            assert_eq!(inf, n, "{family}{labels:?}: +Inf bucket vs _count");
        }
    }
    samples
}

/// The value of `name` with exactly these labels.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let want: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    samples
        .iter()
        .find(|s| s.name == name && s.labels == want)
        .map(|s| s.value)
}

fn ops(samples: &[Sample], op: &str, outcome: &str) -> f64 {
    value(
        samples,
        "lockbench_ops_total",
        &[("strategy", "single"), ("op", op), ("outcome", outcome)],
    )
    .unwrap_or_else(|| panic!("no lockbench_ops_total for {op}/{outcome}"))
}

/// The final ops counters and latency count of strategy `single` equal its summary `s`.
fn assert_final_counters(last: &[Sample], s: &serde_json::Value) {
    let n = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k} in {s}")) as f64;
    assert_eq!(ops(last, "acquire", "ok"), n("acquired"));
    assert_eq!(ops(last, "acquire", "busy"), n("contended"));
    assert_eq!(ops(last, "acquire", "error"), n("errors"));
    assert_eq!(ops(last, "release", "error"), n("release_errors"));
    assert_eq!(
        ops(last, "release", "ok"),
        s["release"]["count"].as_u64().unwrap() as f64 - n("release_errors")
    );
    assert_eq!(
        value(
            last,
            "lockbench_acquire_latency_seconds_count",
            &[("strategy", "single")]
        ),
        Some(n("acquired"))
    );
}

#[test]
fn metrics_are_served_during_the_run_and_match_the_final_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let addr = free_addr();
    let mut child = spawn_in(
        [
            "run",
            "-c",
            "4",
            "-r",
            "2",
            "--duration",
            "4s",
            "--metrics",
            &addr.to_string(),
            "--metrics-linger",
            "3s",
            "--no-progress",
        ],
        &results,
        Stdio::null(),
        Stdio::null(),
    );

    // During the run: the summary still says running and the counters already moved.
    let during = wait_for(Duration::from_secs(60), "a scrape with acquires", || {
        let (content_type, text) = scrape(addr)?;
        let running = summary_so_far(&results)?["status"] == "running";
        let samples = parse_openmetrics(&text);
        (running
            && value(
                &samples,
                "lockbench_ops_total",
                &[("strategy", "single"), ("op", "acquire"), ("outcome", "ok")],
            )
            .is_some_and(|n| n > 0.0))
        .then_some((content_type, samples))
    });
    assert_eq!(
        during.0,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let samples = &during.1;
    assert!(
        value(
            samples,
            "lockbench_acquire_latency_seconds_count",
            &[("strategy", "single")]
        )
        .is_some_and(|n| n > 0.0),
        "latency histogram"
    );
    assert!(
        samples.iter().any(|s| s.name == "lockbench_holders"
            && s.labels
                .get("resource")
                .is_some_and(|r| r == "r0" || r == "r1")),
        "holders per resource"
    );
    assert!(
        value(
            samples,
            "lockbench_harness_lag_max_seconds",
            &[("strategy", "single")]
        )
        .is_some(),
        "harness lag"
    );
    let upstream_bytes = samples
        .iter()
        .find(|s| {
            s.name == "toxiproxy_proxy_received_bytes_total"
                && s.labels.get("direction").map(String::as_str) == Some("upstream")
                && s.labels.get("proxy").map(String::as_str) == Some("n1")
        })
        .unwrap_or_else(|| panic!("no proxy bytes for n1"));
    assert!(upstream_bytes.value > 0.0);
    for label in ["listener", "upstream"] {
        assert!(upstream_bytes.labels.contains_key(label), "{label} label");
    }

    // After the run: the summary is final and the endpoint still serves (the linger).
    let summary = wait_for(Duration::from_secs(60), "the final summary", || {
        summary_so_far(&results).filter(|s| s["status"] != "running")
    });
    assert_eq!(summary["status"], "completed", "{summary}");
    let (_, text) = scrape(addr).expect("the endpoint lingers after the run");
    let last = parse_openmetrics(&text);
    let s = &summary["strategies"][0];
    let n = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k} in {s}")) as f64;
    assert!(n("acquired") > 0.0);
    assert_final_counters(&last, s);
    // Every client released: nobody believes it holds anything any more.
    for h in last.iter().filter(|s| s.name == "lockbench_holders") {
        assert_eq!(h.value, 0.0, "{h:?}");
    }

    // Then it goes away and the process ends.
    wait_for(Duration::from_secs(30), "the endpoint to close", || {
        TcpStream::connect_timeout(&addr, Duration::from_millis(500))
            .is_err()
            .then_some(())
    });
    let status = wait_exit(&mut child, Duration::from_secs(30), "lockbench run");
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_metrics_port_in_use_is_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = assert_refused(
        &["run", "--duration", "1s", "--metrics", &addr],
        &results,
        &format!("--metrics {addr}: cannot listen there"),
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_grammar_check_rejects_what_openmetrics_forbids() {
    let ok = "# TYPE a counter\na_total 1\n# EOF\n";
    assert_eq!(parse_openmetrics(ok).len(), 1);
    for bad in [
        "# TYPE a counter\na_total 1\n",  // no # EOF
        "# TYPE a counter\na 1\n# EOF\n", // counter sample without _total
        "b 1\n# EOF\n",                   // undeclared family
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n# EOF\n", // not cumulative
    ] {
        let caught = std::panic::catch_unwind(|| parse_openmetrics(bad)).is_err();
        assert!(caught, "accepted: {bad:?}");
    }
}

#[test]
fn chaos_shows_the_fault_and_the_ledgers_anomalies_while_active_and_the_checkers_after() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    // A holder stalled past its TTL: `naive-del` then frees the next holder's lock (claim 2).
    let scenario = tmp.path().join("pause.toml");
    std::fs::write(
        &scenario,
        r#"claim = "a stalled naive-del holder frees another holder's lock"
topology = "single"
strategies = ["naive-del"]
seed = 2

[workload]
clients = 6
resources = 1
hold = "200ms"
ttl = "1s"
duration = "7s"
retry_attempts = 1000
retry_delay = "5ms"
retry_jitter = "2500us"
node_timeout = "250ms"

[[nemesis]]
at = "1s"
duration = "4s"
fault = "client-pause"
target = "holder"

[expect.naive-del]
verdict = "invalid"
"#,
    )
    .unwrap();
    let addr = free_addr();
    let mut child = common::cli::lockbench_in(
        [
            "chaos",
            scenario.to_str().unwrap(),
            "--metrics",
            &addr.to_string(),
            "--metrics-linger",
            "3s",
            "--no-progress",
        ],
        &results,
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let active = |samples: &[Sample]| {
        value(
            samples,
            "lockbench_faults_active",
            &[("kind", "client-pause")],
        )
    };
    let ledger = |samples: &[Sample], kind: &str| {
        value(
            samples,
            "lockbench_ledger_anomalies_total",
            &[("strategy", "naive-del"), ("kind", kind)],
        )
    };
    wait_for(
        Duration::from_secs(60),
        "the pause to show as active",
        || {
            let (_, text) = scrape(addr)?;
            (active(&parse_openmetrics(&text)) == Some(1.0)).then_some(())
        },
    );
    // The stalled holder is still inside (begun, no end) when its lease expires, ~1 s into the
    // 4 s pause: the next holder's begin is a mutual-exclusion violation in the ledger's commit
    // order, counted by the streaming check while the pause lasts and the checker has not run.
    let during = wait_for(
        Duration::from_secs(60),
        "the ledger's mutex violation while the pause is active",
        || {
            let (_, text) = scrape(addr)?;
            let samples = parse_openmetrics(&text);
            assert_eq!(
                active(&samples),
                Some(1.0),
                "the pause healed before the ledger's violation was counted"
            );
            (ledger(&samples, "mutex-violation").is_some_and(|n| n >= 1.0)).then_some(samples)
        },
    );
    assert!(
        !during
            .iter()
            .any(|s| s.name == "lockbench_checker_anomalies"),
        "the checker had already run"
    );
    let last = wait_for(Duration::from_secs(90), "the checker's anomalies", || {
        let (_, text) = scrape(addr)?;
        let samples = parse_openmetrics(&text);
        samples
            .iter()
            .any(|s| s.name == "lockbench_checker_anomalies")
            .then_some(samples)
    });
    assert_eq!(active(&last), Some(0.0), "healed before the check");
    let violations = value(
        &last,
        "lockbench_checker_anomalies",
        &[("strategy", "naive-del"), ("kind", "mutex-violation")],
    );
    assert!(violations.is_some_and(|n| n > 0.0), "{violations:?}");
    // At the end the streaming count is the checker's.
    assert_eq!(ledger(&last, "mutex-violation"), violations);
    assert_eq!(ledger(&last, "stale-write-accepted"), Some(0.0));
    let status = wait_exit(&mut child, Duration::from_secs(60), "lockbench chaos");
    assert!(status.success(), "as claimed: {status:?}");
}

/// `--metrics` with `--workers 3`: while the workers run, `/metrics` serves the coordinator's
/// merge of what they stream (acquire counts and latency), in OpenMetrics; after the run its
/// counters and histogram count equal the merged summary's.
#[test]
fn metrics_of_a_three_worker_run_are_merged_during_the_run_and_match_the_final_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let addr = free_addr();
    let mut child = spawn_in(
        [
            "run",
            "-c",
            "6",
            "-r",
            "2",
            "--duration",
            "5s",
            "--workers",
            "3",
            "--metrics",
            &addr.to_string(),
            "--metrics-linger",
            "3s",
            "--no-progress",
        ],
        &results,
        Stdio::null(),
        Stdio::null(),
    );
    let acquired = |samples: &[Sample]| {
        value(
            samples,
            "lockbench_ops_total",
            &[("strategy", "single"), ("op", "acquire"), ("outcome", "ok")],
        )
    };
    let (content_type, during) =
        wait_for(Duration::from_secs(90), "a scrape with acquires", || {
            let (content_type, text) = scrape(addr)?;
            let running = summary_so_far(&results)?["status"] == "running";
            let samples = parse_openmetrics(&text);
            (running && acquired(&samples).is_some_and(|n| n > 0.0))
                .then_some((content_type, samples))
        });
    assert_eq!(
        content_type,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let count_during = value(
        &during,
        "lockbench_acquire_latency_seconds_count",
        &[("strategy", "single")],
    )
    .unwrap();
    assert_eq!(
        Some(count_during),
        acquired(&during),
        "one sample per acquire"
    );

    let summary = wait_for(Duration::from_secs(90), "the final summary", || {
        summary_so_far(&results).filter(|s| s["status"] != "running")
    });
    assert_eq!(summary["status"], "completed", "{summary}");
    assert_eq!(summary["config"]["workers"]["workers"], 3);
    let (_, text) = scrape(addr).expect("the endpoint lingers after the run");
    let last = parse_openmetrics(&text);
    let s = &summary["strategies"][0];
    let n = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("{k} in {s}")) as f64;
    assert!(
        n("acquired") > acquired(&during).unwrap(),
        "the run went on after the scrape"
    );
    assert_final_counters(&last, s);
    let status = wait_exit(&mut child, Duration::from_secs(60), "lockbench run");
    assert!(status.success(), "{status:?}");
}
