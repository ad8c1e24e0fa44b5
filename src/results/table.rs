//! The console table printed at the end of `lockbench run`: one row per strategy.

use std::fmt::Write as _;

use super::summary::StrategySummary;

/// Formats µs as a short human value: `850µs`, `1.25ms`, `2.10s`.
pub fn fmt_us(us: u64) -> String {
    if us < 1_000 {
        format!("{us}µs")
    } else if us < 1_000_000 {
        format!("{:.2}ms", us as f64 / 1_000.0)
    } else {
        format!("{:.2}s", us as f64 / 1_000_000.0)
    }
}

/// `valid`, `invalid (mutex-violation 3, …)`, `unknown`, or `-` when not audited.
fn verdict_cell(s: &StrategySummary) -> String {
    let Some(c) = &s.check else {
        return "-".into();
    };
    let verdict = c.verdict;
    let notable: Vec<String> = c
        .anomaly_counts
        .iter()
        .filter(|(k, _)| k.as_str() != "unavailable")
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let liveness = match c.liveness {
        crate::checker::Liveness::Live => "",
        crate::checker::Liveness::Degraded => ", degraded",
        crate::checker::Liveness::Stuck => ", STUCK",
    };
    if notable.is_empty() {
        format!("{verdict}{liveness}")
    } else {
        format!("{verdict} ({}){liveness}", notable.join(", "))
    }
}

/// Renders one row per strategy: ops/s, acquired, contended, errors, and acquire-ok
/// latency p50/p90/p99/p99.9/max.
pub fn render(strategies: &[StrategySummary]) -> String {
    let header = [
        "strategy",
        "ops/s",
        "acquired",
        "contended",
        "errors",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "max",
        "verdict",
    ];
    let rows: Vec<[String; 11]> = strategies
        .iter()
        .map(|s| {
            let l = &s.acquire_ok;
            [
                s.strategy.clone(),
                format!("{:.0}", s.throughput_ops_s),
                s.acquired.to_string(),
                s.contended.to_string(),
                s.errors.to_string(),
                fmt_us(l.p50_us),
                fmt_us(l.p90_us),
                fmt_us(l.p99_us),
                fmt_us(l.p999_us),
                fmt_us(l.max_us),
                verdict_cell(s),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &[String]| {
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            let pad = w - cell.chars().count();
            if i == 0 {
                let _ = write!(out, "{cell}{}", " ".repeat(pad));
            } else {
                let _ = write!(out, "  {}{cell}", " ".repeat(pad));
            }
        }
        out.push('\n');
    };
    line(&mut out, &header.map(String::from));
    line(&mut out, &widths.map(|w| "-".repeat(w)));
    for row in &rows {
        line(&mut out, row);
    }
    out.push_str(
        "latency = successful acquire (p50 … max); verdict = checker on history + ledger\n",
    );
    for s in strategies {
        if let Some(o) = &s.harness.adapter_overhead {
            let _ = writeln!(
                out,
                "{}: harness overhead per adapter request (round trip minus the adapter's own \
                 time) p50 {} p99 {} max {} over {} requests",
                s.strategy,
                fmt_us(o.p50_us),
                fmt_us(o.p99_us),
                fmt_us(o.max_us),
                o.count
            );
            if let Some(l) = &s.harness.adapter_overhead_legs {
                let _ = writeln!(
                    out,
                    "{}: its legs, p50: lockbench {}, to the adapter {}, inside it before the \
                     library call {}, back {}",
                    s.strategy,
                    fmt_us(l.lockbench.p50_us),
                    fmt_us(l.to_adapter.p50_us),
                    fmt_us(l.in_adapter.p50_us),
                    fmt_us(l.from_adapter.p50_us)
                );
            }
        }
        if s.cut_sections > 0 {
            let _ = writeln!(
                out,
                "{}: {} critical section(s) cut at the end of the run (still inside after the \
                 drain grace: begun, never ended in the ledger)",
                s.strategy, s.cut_sections
            );
        }
        for reason in s.check.iter().flat_map(|c| &c.unknown_reasons) {
            let _ = writeln!(out, "{}: unknown because {reason}", s.strategy);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::summary::LatencySummary;

    #[test]
    fn formats_units() {
        assert_eq!(fmt_us(850), "850µs");
        assert_eq!(fmt_us(1_250), "1.25ms");
        assert_eq!(fmt_us(2_100_000), "2.10s");
    }

    #[test]
    fn one_row_per_strategy_with_numbers() {
        let s = StrategySummary {
            strategy: "redlock".into(),
            throughput_ops_s: 1234.4,
            acquired: 10,
            contended: 3,
            errors: 1,
            acquire_ok: LatencySummary {
                count: 10,
                p50_us: 500,
                p99_us: 2_000,
                ..Default::default()
            },
            ..Default::default()
        };
        let t = render(std::slice::from_ref(&s));
        let row = t.lines().nth(2).unwrap();
        assert!(row.starts_with("redlock"), "{t}");
        assert!(
            row.contains("1234") && row.contains("500µs") && row.contains("2.00ms"),
            "{t}"
        );
        assert!(!t.contains("cut"), "{t}");
        let cut = StrategySummary {
            cut_sections: 4,
            ..s
        };
        let t = render(&[cut]);
        assert!(
            t.contains("redlock: 4 critical section(s) cut at the end"),
            "{t}"
        );
    }
}
