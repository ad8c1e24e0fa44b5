//! What the reports print, written out independently of the report code (an oracle).

/// A latency as the reports print it: `850 µs` below a millisecond, `1.25 ms` above.
pub fn latency_text(us: u64) -> String {
    if us < 1000 {
        format!("{us} µs")
    } else {
        format!("{:.2} ms", us as f64 / 1000.0)
    }
}
