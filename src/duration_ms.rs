//! Durations as people write them and as result files store them.
//!
//! - [`parse`]: a human duration (`"250ms"`, `"2s"`, `"1m30s"`, `"500us"`, `"0"`), as the CLI
//!   flags and scenario files take it.
//! - The serde adapter (`#[serde(with = "crate::duration_ms")]`, and [`option`] for
//!   `Option<Duration>`): a duration is written as whole milliseconds (an integer) when it is
//!   one, else as a human string that keeps every digit (`"500us"`, `"1ms 500us"`); it is read
//!   from either form, so a value round-trips exactly and files written before sub-millisecond
//!   durations were kept (integers only) still read.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serializer};

/// Errors reading a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// A string that humantime cannot read (`250ms`, `2s`, `1m` are fine).
    #[error("bad duration {input:?}: {reason} (examples: 250ms, 2s, 1m30s)")]
    Unreadable {
        /// What was given.
        input: String,
        /// Why it was rejected.
        reason: String,
    },
}

/// The longest duration any input takes (24 h): run time, hold, lease TTL, retry delays and
/// timeouts, fault offsets and lengths. Every later sum of a few of them (a run's end plus its
/// drain grace, an offset plus a fault's length, TTL multiples) stays far inside what
/// `Instant`, `Duration`, Redis `PX` (ms in an i64), etcd lease TTLs (s in an i64) and
/// PostgreSQL take.
pub const LONGEST: Duration = Duration::from_secs(24 * 3600);

/// `t + d` without the panic of `Instant + Duration` on overflow: a `d` the clock cannot
/// reach is cut to [`LONGEST`] (inputs never exceed it; this keeps a bad value in a file read
/// back from crashing a run).
pub fn instant_after(t: std::time::Instant, d: Duration) -> std::time::Instant {
    t.checked_add(d)
        .or_else(|| t.checked_add(LONGEST))
        .unwrap_or(t)
}

/// Parses a human duration (`250ms`, `2s`, `1m30s`, `500us`, `0`).
///
/// # Errors
/// [`DurationError::Unreadable`] quoting the input.
pub fn parse(input: &str) -> Result<Duration, DurationError> {
    let s = input.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(s).map_err(|e| DurationError::Unreadable {
        input: input.to_string(),
        reason: e.to_string(),
    })
}

/// `d` as [`parse`] reads it back exactly: `"300ms"`, `"2s"`, `"1ms 500us"`, `"0s"`.
pub fn format(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// Serializes `d` as integer milliseconds when it is a whole number of them, else as a
/// [`format`] string (`"500us"`).
pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    if d.subsec_nanos().is_multiple_of(1_000_000) {
        if let Ok(ms) = u64::try_from(d.as_millis()) {
            return s.serialize_u64(ms);
        }
    }
    s.serialize_str(&format(*d))
}

/// Deserializes integer milliseconds or a human duration string ([`parse`]); an unreadable
/// string is an error that quotes it.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    d.deserialize_any(MillisOrHuman)
}

struct MillisOrHuman;

impl Visitor<'_> for MillisOrHuman {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration: whole milliseconds, or a string such as \"300ms\" or \"2s\"")
    }

    fn visit_u64<E: de::Error>(self, ms: u64) -> Result<Duration, E> {
        Ok(Duration::from_millis(ms))
    }

    fn visit_i64<E: de::Error>(self, ms: i64) -> Result<Duration, E> {
        u64::try_from(ms)
            .map(Duration::from_millis)
            .map_err(|_| E::custom(format_args!("a duration cannot be negative ({ms} ms)")))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Duration, E> {
        parse(s).map_err(E::custom)
    }
}

/// A [`Duration`] read and written through this adapter (for `Option`s and collections).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Human(Duration);

impl<'de> Deserialize<'de> for Human {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize(d).map(Human)
    }
}

/// The same adapter for `Option<Duration>` (`None` ↔ `null`; with `#[serde(default)]` a
/// missing key is `None`).
pub mod option {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    use super::Human;

    /// `None` as `null`, `Some(d)` as [`super::serialize`] writes `d`.
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => super::serialize(d, s),
            None => s.serialize_none(),
        }
    }

    /// `null` as `None`, else as [`super::deserialize`] reads it.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<Human>::deserialize(d)?.map(|h| h.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Holder {
        #[serde(with = "crate::duration_ms")]
        d: Duration,
        #[serde(default, with = "crate::duration_ms::option")]
        o: Option<Duration>,
    }

    #[test]
    fn whole_milliseconds_are_integers_and_the_rest_strings() {
        let h = Holder {
            d: Duration::from_millis(300),
            o: Some(Duration::from_micros(500)),
        };
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(json, r#"{"d":300,"o":"500us"}"#);
        assert_eq!(serde_json::from_str::<Holder>(&json).unwrap(), h);
        let odd = Holder {
            d: Duration::from_micros(1_500),
            o: None,
        };
        let json = serde_json::to_string(&odd).unwrap();
        assert_eq!(json, r#"{"d":"1ms 500us","o":null}"#);
        assert_eq!(serde_json::from_str::<Holder>(&json).unwrap(), odd);
    }

    #[test]
    fn reads_integers_and_human_strings_and_names_a_bad_string() {
        let h: Holder = serde_json::from_str(r#"{"d":"1s"}"#).unwrap();
        assert_eq!(h.d, Duration::from_secs(1));
        assert_eq!(h.o, None);
        let h: Holder = toml::from_str("d = 250\no = \"0\"").unwrap();
        assert_eq!(h.d, Duration::from_millis(250));
        assert_eq!(h.o, Some(Duration::ZERO));
        let err = serde_json::from_str::<Holder>(r#"{"d":"3 parsecs"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("3 parsecs"), "{err}");
        assert!(toml::from_str::<Holder>("d = -5").is_err());
    }

    #[test]
    fn parse_takes_zero_and_units() {
        assert_eq!(parse("0").unwrap(), Duration::ZERO);
        assert_eq!(parse(" 250ms ").unwrap(), Duration::from_millis(250));
        assert_eq!(parse("1m30s").unwrap(), Duration::from_secs(90));
        assert!(parse("soon").unwrap_err().to_string().contains("\"soon\""));
    }
}
