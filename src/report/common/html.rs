//! Shared HTML pieces: escaping, the page shell with its inline stylesheet, number formats.
//! Pages carry no external fonts and no links to fetch: they read offline. The only script is
//! the client timeline's zoom/pan (inline, optional: the page reads the same without it).

use crate::checker::Verdict;

/// Escapes text for HTML element content and double-quoted attributes.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// A latency in µs for people: `850 µs`, `12.35 ms`, `2.100 s`.
pub(crate) fn latency(us: u64) -> String {
    if us < 1000 {
        format!("{us} µs")
    } else if us < 1_000_000 {
        format!("{:.2} ms", us as f64 / 1000.0)
    } else {
        format!("{:.3} s", us as f64 / 1_000_000.0)
    }
}

/// Operations per second with one decimal and thousands separators: `12,345.6`.
pub(crate) fn ops(v: f64) -> String {
    let s = format!("{v:.1}");
    let (int, frac) = s.split_once('.').unwrap_or((&s, "0"));
    let (sign, digits) = int.strip_prefix('-').map_or(("", int), |d| ("-", d));
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("{sign}{grouped}.{frac}")
}

/// A fraction as a percentage with two decimals, or `n/a`.
pub(crate) fn percent(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |v| format!("{:.2}%", v * 100.0))
}

/// A signed relative change as `+12.3%` / `-4.0%`, or `n/a`.
pub(crate) fn change(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |v| format!("{:+.1}%", v * 100.0))
}

/// `<span class="verdict v-…">…</span>`.
pub(crate) fn verdict_badge(v: Verdict) -> String {
    format!("<span class=\"verdict v-{0}\">{0}</span>", v)
}

/// How availability is measured; printed under the availability plots.
pub(crate) const AVAILABILITY_DEFINITION: &str = "Availability is the share of the run during \
    which a client that wanted the lock could get it: 100% minus the time in which at least one \
    acquire was in flight (retries included) while no client held the lock, counting only \
    stretches of at least 100 ms (shorter ones are the normal round trip and retry delay). A \
    paused, killed or partitioned node that keeps waiting clients from the lock shows up here even \
    when their acquires eventually succeed. Runs checked before this measure existed show the \
    share of time not lost to failed acquires instead.";

/// The whole page: `<head>` with the inline stylesheet, then `body`.
pub(crate) fn page(title: &str, body: &str) -> String {
    page_with_script(title, body, None)
}

/// [`page`] with an inline script at the end of `<body>`.
pub(crate) fn page_with_script(title: &str, body: &str, script: Option<&str>) -> String {
    let script = script.map_or_else(String::new, |s| format!("<script>{s}</script>\n"));
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}\n{script}</body>\n</html>\n",
        escape(title)
    )
}

const STYLE: &str = r#"
body { font-family: "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; margin: 24px auto; max-width: 1100px; color: #1d1d1f; padding: 0 16px; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: 4px; }
h2 { font-size: 1.25em; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
code { background: #f3f3f3; padding: 1px 4px; border-radius: 3px; }
p.meta { color: #555; margin-top: 0; }
table { border-collapse: collapse; margin: 12px 0; font-size: 0.92em; max-width: 100%; }
td code { word-break: break-all; font-size: 0.9em; }
th, td { border: 1px solid #d0d0d0; padding: 5px 9px; text-align: right; }
th { background: #f4f4f6; }
td.name, th.name { text-align: left; }
.verdict { display: inline-block; min-width: 58px; text-align: center; border-radius: 4px; padding: 1px 6px; font-weight: bold; color: #fff; }
.v-valid { background: #2e8b3e; }
.v-invalid { background: #c62828; }
.v-unknown { background: #8a8a8a; }
td.cell-valid { background: #d8f0dc; }
td.cell-invalid { background: #f7d0d0; }
td.cell-unknown { background: #e6e6e6; }
td.cell-none { background: #fafafa; color: #aaa; }
.regressed { color: #b00020; font-weight: bold; }
.improved { color: #2e7d32; }
.warn { color: #8a5a00; }
figure { margin: 16px 0; }
figure svg { max-width: 100%; height: auto; border: 1px solid #e4e4e4; }
figcaption { color: #555; font-size: 0.9em; }
ul.anomalies { font-size: 0.9em; }
footer { margin-top: 40px; color: #777; font-size: 0.85em; }
.scroll { overflow-x: auto; max-width: 100%; }
table.heat th { font-size: 0.85em; min-width: 4.5em; max-width: 9em; overflow-wrap: anywhere; vertical-align: bottom; }
table.heat td { font-size: 0.85em; padding: 4px 5px; text-align: center; }
table.heat td .meta, table.heat td.meta { color: #555; }
.lanes-box { margin: 8px 0 24px; }
.lanes-box svg { max-width: 100%; height: auto; border: 1px solid #e4e4e4; cursor: grab; user-select: none; }
.lanes-box svg text.lane { fill: #333; }
.lanes-box svg text.group { font-weight: bold; fill: #333; }
.lanes-box svg text.tok { fill: #fff; font-size: 9px; pointer-events: none; }
.lanes-tools { font-size: 0.85em; margin-bottom: 4px; }
.lanes-tools button { font-size: 0.9em; padding: 1px 8px; }
p.legend { font-size: 0.85em; }
p.definition { font-size: 0.88em; max-width: 960px; }
div.incidents { margin: 8px 0 24px; }
details.incident { border: 1px solid #ddd; border-left: 4px solid #1e6ec8; border-radius: 3px; padding: 4px 10px; margin: 6px 0; font-size: 0.9em; }
details.incident.safety { border-left-color: #c62828; }
details.incident summary { cursor: pointer; }
details.incident:target { background: #fff6e0; }
details.incident table { font-size: 0.92em; }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_for_people() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(latency(850), "850 µs");
        assert_eq!(latency(12_345), "12.35 ms");
        assert_eq!(latency(2_100_000), "2.100 s");
        assert_eq!(ops(1234567.89), "1,234,567.9");
        assert_eq!(ops(999.0), "999.0");
        assert_eq!(percent(Some(0.99876)), "99.88%");
        assert_eq!(change(Some(-0.04)), "-4.0%");
        assert_eq!(change(None), "n/a");
    }
}
