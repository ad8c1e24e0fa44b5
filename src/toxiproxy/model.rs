//! The JSON shapes of the Toxiproxy HTTP API, shared by the embedded server and the client.
//!
//! Shapes follow Shopify Toxiproxy 2.x (`api.go`, `toxic_collection.go`):
//! - proxy: `{"name","listen","upstream","enabled","toxics":[toxic…]}`
//! - toxic: `{"name","type","stream","toxicity","attributes":{…}}`
//! - error: `{"error": "proxy not found", "status": 404}`
//!
//! Attribute units are Toxiproxy's: milliseconds everywhere except the slicer's `delay`,
//! which is in microseconds, and the bandwidth `rate`, which is in KB/s (1 KB = 1000 bytes).
//!
//! **Extension:** the latency toxic's `latency` and `jitter` also accept a fractional JSON
//! number of milliseconds (`0.5` = 500 µs, resolution 1 µs), see [`LatencyMs`]. Whole values
//! are still written as JSON integers, so integer-only clients (Toxiproxy's Go client, the
//! CLI) keep working; Shopify's Toxiproxy itself rejects a fractional value with HTTP 400.

use std::fmt;

use super::ToxiproxyError;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Which direction of a proxied connection a toxic acts on.
///
/// `upstream` is client → server (requests), `downstream` is server → client (replies).
/// Toxiproxy's default is `downstream`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Default,
    Serialize,
    Deserialize,
    strum::Display,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Stream {
    /// Client → upstream server.
    Upstream,
    /// Upstream server → client (the default).
    #[default]
    Downstream,
}

impl Stream {
    /// The lowercase wire name: `upstream` or `downstream`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Parses the wire name; `None` for anything else.
    pub fn parse(s: &str) -> Option<Stream> {
        s.parse().ok()
    }
}

/// A toxic's type and its attributes, serialized as `"type": …, "attributes": {…}`.
///
/// Missing attributes default to 0, as in Toxiproxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "attributes", rename_all = "snake_case")]
pub enum ToxicKind {
    /// Delays every chunk by `latency` ms ± a uniform random `jitter` ms (drawn in µs).
    Latency {
        /// Added delay in ms (µs resolution; fractional on the wire, see [`LatencyMs`]).
        #[serde(default)]
        latency: LatencyMs,
        /// Maximum random deviation from `latency`, in ms (µs resolution).
        #[serde(default)]
        jitter: LatencyMs,
    },
    /// Limits throughput to `rate` KB/s (1 KB = 1000 bytes); 0 means unlimited.
    Bandwidth {
        /// Rate in KB/s.
        #[serde(default)]
        rate: u64,
    },
    /// Delays the close (FIN) of the connection by `delay` ms after the source closed.
    SlowClose {
        /// Delay in ms.
        #[serde(default)]
        delay: u64,
    },
    /// Drops all data; closes the connection after `timeout` ms, or never when 0 (black hole).
    Timeout {
        /// Time in ms before the connection is closed; 0 = hold it open forever.
        #[serde(default)]
        timeout: u64,
    },
    /// Drops all data and resets the connection (TCP RST, `SO_LINGER` 0) after `timeout` ms.
    ResetPeer {
        /// Time in ms before the reset; 0 = at once.
        #[serde(default)]
        timeout: u64,
    },
    /// Cuts each chunk into slices of `average_size` ± `size_variation` bytes, `delay` µs apart.
    Slicer {
        /// Mean slice size in bytes (must be ≥ 1).
        #[serde(default)]
        average_size: u64,
        /// Maximum deviation from `average_size`, in bytes.
        #[serde(default)]
        size_variation: u64,
        /// Pause between slices in µs.
        #[serde(default)]
        delay: u64,
    },
    /// Closes the connection once `bytes` bytes have passed in this toxic's direction.
    LimitData {
        /// Byte budget per connection and direction.
        #[serde(default)]
        bytes: u64,
    },
}

impl ToxicKind {
    /// Every type name the embedded server accepts.
    pub const TYPE_NAMES: [&'static str; 7] = [
        "latency",
        "bandwidth",
        "slow_close",
        "timeout",
        "reset_peer",
        "slicer",
        "limit_data",
    ];

    /// The error for a type name that is not in [`ToxicKind::TYPE_NAMES`]: Toxiproxy's
    /// `invalid toxic type`, then the name given and the valid ones.
    pub fn unknown_type_message(type_name: &str) -> String {
        let valid = Self::TYPE_NAMES.join(", ");
        if type_name.is_empty() {
            format!("invalid toxic type: `type` is missing (valid types: {valid})")
        } else {
            format!("invalid toxic type {type_name:?} (valid types: {valid})")
        }
    }

    /// The wire type name, e.g. `latency`, `reset_peer`.
    pub fn type_name(&self) -> &'static str {
        match self {
            ToxicKind::Latency { .. } => "latency",
            ToxicKind::Bandwidth { .. } => "bandwidth",
            ToxicKind::SlowClose { .. } => "slow_close",
            ToxicKind::Timeout { .. } => "timeout",
            ToxicKind::ResetPeer { .. } => "reset_peer",
            ToxicKind::Slicer { .. } => "slicer",
            ToxicKind::LimitData { .. } => "limit_data",
        }
    }

    /// Builds a kind from a type name and an `attributes` JSON object (missing fields are 0).
    ///
    /// # Errors
    /// [`ToxiproxyError::UnknownToxicType`], [`ToxiproxyError::ToxicNotAnObject`] or [`ToxiproxyError::BadToxicAttributes`], naming the bad type or attribute (the server answers it with HTTP 400).
    pub fn from_parts(
        type_name: &str,
        attributes: serde_json::Value,
    ) -> Result<ToxicKind, ToxiproxyError> {
        if !Self::TYPE_NAMES.contains(&type_name) {
            return Err(ToxiproxyError::UnknownToxicType(
                Self::unknown_type_message(type_name),
            ));
        }
        let attributes = match attributes {
            serde_json::Value::Null => serde_json::Value::Object(Default::default()),
            obj @ serde_json::Value::Object(_) => obj,
            other => return Err(ToxiproxyError::ToxicNotAnObject(other.to_string())),
        };
        let kind: ToxicKind = serde_json::from_value(serde_json::json!({
            "type": type_name,
            "attributes": attributes,
        }))
        .map_err(|source| ToxiproxyError::BadToxicAttributes {
            type_name: type_name.to_string(),
            source,
        })?;
        kind.validate()?;
        Ok(kind)
    }

    /// The `attributes` object of this kind.
    pub fn attributes(&self) -> serde_json::Value {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(mut map)) => map
                .remove("attributes")
                .unwrap_or(serde_json::Value::Object(Default::default())),
            _ => serde_json::Value::Object(Default::default()),
        }
    }

    /// Checks values that would make the toxic meaningless.
    ///
    /// # Errors
    /// [`ToxiproxyError::SlicerSize`] for a slicer with `average_size` 0.
    pub fn validate(&self) -> Result<(), ToxiproxyError> {
        if let ToxicKind::Slicer { average_size, .. } = self {
            if *average_size == 0 {
                return Err(ToxiproxyError::SlicerSize);
            }
        }
        Ok(())
    }
}

/// A latency-toxic duration: milliseconds on the wire, kept as whole microseconds.
///
/// Serialized as a JSON integer when it is a whole number of milliseconds (as Toxiproxy
/// writes it) and as a fractional number otherwise (`0.5` for 500 µs, an extension of the
/// embedded server). Deserializes from any non-negative JSON number of milliseconds, rounded
/// to the nearest µs; negative, non-finite or non-numeric values are rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct LatencyMs {
    micros: u64,
}

impl LatencyMs {
    /// Zero.
    pub const ZERO: LatencyMs = LatencyMs { micros: 0 };

    /// `ms` whole milliseconds (saturating).
    pub const fn from_millis(ms: u64) -> LatencyMs {
        LatencyMs {
            micros: ms.saturating_mul(1000),
        }
    }

    /// `us` microseconds.
    pub const fn from_micros(us: u64) -> LatencyMs {
        LatencyMs { micros: us }
    }

    /// A duration, truncated to whole µs (saturating at `u64::MAX` µs).
    pub fn from_duration(d: Duration) -> LatencyMs {
        LatencyMs {
            micros: u64::try_from(d.as_micros()).unwrap_or(u64::MAX),
        }
    }

    /// The value in µs.
    pub const fn as_micros(self) -> u64 {
        self.micros
    }

    /// The value as a duration.
    pub const fn as_duration(self) -> Duration {
        Duration::from_micros(self.micros)
    }

    /// The value in ms, possibly fractional.
    pub fn as_millis_f64(self) -> f64 {
        self.micros as f64 / 1000.0
    }

    /// True when the value is zero.
    pub const fn is_zero(self) -> bool {
        self.micros == 0
    }
}

impl From<u64> for LatencyMs {
    /// Whole milliseconds, as in Toxiproxy.
    fn from(ms: u64) -> LatencyMs {
        LatencyMs::from_millis(ms)
    }
}

impl From<Duration> for LatencyMs {
    fn from(d: Duration) -> LatencyMs {
        LatencyMs::from_duration(d)
    }
}

impl fmt::Display for LatencyMs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.micros.is_multiple_of(1000) {
            write!(f, "{}ms", self.micros / 1000)
        } else {
            write!(f, "{}ms", self.as_millis_f64())
        }
    }
}

impl Serialize for LatencyMs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.micros.is_multiple_of(1000) {
            s.serialize_u64(self.micros / 1000)
        } else {
            s.serialize_f64(self.as_millis_f64())
        }
    }
}

impl<'de> Deserialize<'de> for LatencyMs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<LatencyMs, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = LatencyMs;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-negative number of milliseconds (e.g. 5 or 0.5)")
            }

            fn visit_u64<E: serde::de::Error>(self, ms: u64) -> Result<LatencyMs, E> {
                ms.checked_mul(1000)
                    .map(LatencyMs::from_micros)
                    .ok_or_else(|| E::custom(format!("{ms} ms is too large")))
            }

            fn visit_i64<E: serde::de::Error>(self, ms: i64) -> Result<LatencyMs, E> {
                match u64::try_from(ms) {
                    Ok(ms) => self.visit_u64(ms),
                    Err(_) => Err(E::invalid_value(serde::de::Unexpected::Signed(ms), &self)),
                }
            }

            fn visit_f64<E: serde::de::Error>(self, ms: f64) -> Result<LatencyMs, E> {
                let us = (ms * 1000.0).round();
                if !us.is_finite() || us < 0.0 || us >= u64::MAX as f64 {
                    return Err(E::invalid_value(serde::de::Unexpected::Float(ms), &self));
                }
                Ok(LatencyMs::from_micros(us as u64))
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// A toxic as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToxicInfo {
    /// Unique within its proxy; Toxiproxy defaults it to `<type>_<stream>`.
    pub name: String,
    /// Type and attributes.
    #[serde(flatten)]
    pub kind: ToxicKind,
    /// Direction the toxic acts on.
    pub stream: Stream,
    /// Probability in 0..=1 that a connection is affected (drawn per connection).
    pub toxicity: f32,
}

/// What to send to create (or update) a toxic. Build with [`ToxicSpec::new`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToxicSpec {
    /// Name; the server defaults it to `<type>_<stream>` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Type and attributes.
    #[serde(flatten)]
    pub kind: ToxicKind,
    /// Direction (default downstream).
    #[serde(default)]
    pub stream: Stream,
    /// Probability in 0..=1 (default 1).
    #[serde(default = "full_toxicity")]
    pub toxicity: f32,
}

fn full_toxicity() -> f32 {
    1.0
}

impl ToxicSpec {
    /// A downstream toxic with toxicity 1 and the server's default name.
    pub fn new(kind: ToxicKind) -> ToxicSpec {
        ToxicSpec {
            name: None,
            kind,
            stream: Stream::Downstream,
            toxicity: 1.0,
        }
    }

    /// Sets the name.
    pub fn named(mut self, name: impl Into<String>) -> ToxicSpec {
        self.name = Some(name.into());
        self
    }

    /// Sets the direction.
    pub fn stream(mut self, stream: Stream) -> ToxicSpec {
        self.stream = stream;
        self
    }

    /// Sets the toxicity (0..=1).
    pub fn toxicity(mut self, toxicity: f32) -> ToxicSpec {
        self.toxicity = toxicity;
        self
    }

    /// The name the server will give this toxic: the explicit one or `<type>_<stream>`.
    pub fn effective_name(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("{}_{}", self.kind.type_name(), self.stream.as_str()))
    }
}

/// A proxy as the API shows it, with its active toxics (both streams).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProxyInfo {
    /// Unique proxy name.
    pub name: String,
    /// Listen address `host:port` (the bound port once started).
    pub listen: String,
    /// Upstream address `host:port`.
    pub upstream: String,
    /// Whether the proxy accepts connections.
    pub enabled: bool,
    /// Active toxics; absent in some older servers' replies.
    #[serde(default)]
    pub toxics: Vec<ToxicInfo>,
}

/// What to send to create a proxy (`POST /proxies`) or one entry of `POST /populate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxySpec {
    /// Unique proxy name.
    pub name: String,
    /// Listen address `host:port`; port 0 picks a free port.
    pub listen: String,
    /// Upstream address `host:port`.
    pub upstream: String,
    /// Start enabled (default true).
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
}

fn enabled_by_default() -> bool {
    true
}

impl ProxySpec {
    /// An enabled proxy spec.
    pub fn new(
        name: impl Into<String>,
        listen: impl Into<String>,
        upstream: impl Into<String>,
    ) -> ProxySpec {
        ProxySpec {
            name: name.into(),
            listen: listen.into(),
            upstream: upstream.into(),
            enabled: true,
        }
    }
}

/// Fields of `POST /proxies/{name}`; `None` keeps the current value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyUpdate {
    /// New listen address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// New upstream address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// Enable or disable (disable closes every connection and refuses new ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// The body of an API error: `{"error": "...", "status": 404}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiErrorBody {
    /// Human-readable message, e.g. `proxy not found`.
    pub error: String,
    /// The HTTP status repeated.
    pub status: u16,
}

/// Reply of `POST /populate`: `{"proxies": [...]}` (plus `error`/`status` on failure).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PopulateReply {
    /// The proxies created or kept.
    #[serde(default)]
    pub proxies: Vec<ProxyInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stream_names_match_serde() {
        crate::variant_names::assert_names_match_serde::<Stream>();
        assert_eq!(Stream::parse("sideways"), None);
    }

    #[test]
    fn toxic_info_has_toxiproxy_shape() {
        let t = ToxicInfo {
            name: "latency_downstream".into(),
            kind: ToxicKind::Latency {
                latency: 50.into(),
                jitter: 5.into(),
            },
            stream: Stream::Downstream,
            toxicity: 1.0,
        };
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(
            v,
            json!({"name":"latency_downstream","type":"latency","stream":"downstream",
                   "toxicity":1.0,"attributes":{"latency":50,"jitter":5}})
        );
        let back: ToxicInfo = serde_json::from_value(v).unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn spec_defaults_and_effective_name() {
        let s: ToxicSpec =
            serde_json::from_value(json!({"type":"timeout","attributes":{"timeout":0}})).unwrap();
        assert_eq!(s.stream, Stream::Downstream);
        assert_eq!(s.toxicity, 1.0);
        assert_eq!(s.effective_name(), "timeout_downstream");
        let up = ToxicSpec::new(ToxicKind::ResetPeer { timeout: 0 }).stream(Stream::Upstream);
        assert_eq!(up.effective_name(), "reset_peer_upstream");
        let v = serde_json::to_value(&up).unwrap();
        assert!(v.get("name").is_none());
        assert_eq!(v["type"], "reset_peer");
    }

    #[test]
    fn from_parts_defaults_missing_attributes_and_rejects_bad_ones() {
        assert_eq!(
            ToxicKind::from_parts("latency", json!({"latency": 10})).unwrap(),
            ToxicKind::Latency {
                latency: 10.into(),
                jitter: LatencyMs::ZERO
            }
        );
        assert_eq!(
            ToxicKind::from_parts("limit_data", serde_json::Value::Null).unwrap(),
            ToxicKind::LimitData { bytes: 0 }
        );
        assert!(ToxicKind::from_parts("latency", json!({"latency": -1})).is_err());
        assert!(ToxicKind::from_parts("latency", json!({"latency": "x"})).is_err());
        assert_eq!(
            ToxicKind::from_parts("latency", json!([1]))
                .unwrap_err()
                .to_string(),
            "attributes must be a JSON object, got [1]"
        );
        assert!(ToxicKind::from_parts("nope", json!({}))
            .unwrap_err()
            .to_string()
            .starts_with("invalid toxic type \"nope\" (valid types: latency, "));
        assert!(ToxicKind::from_parts("latency", json!({"latency": "x"}))
            .unwrap_err()
            .to_string()
            .starts_with("bad attributes for latency: "));
        assert_eq!(
            ToxicKind::from_parts("slicer", json!({"average_size": 0}))
                .unwrap_err()
                .to_string(),
            "slicer average_size must be at least 1 byte"
        );
    }

    #[test]
    fn latency_accepts_fractional_ms_and_writes_integers_when_whole() {
        let half =
            ToxicKind::from_parts("latency", json!({"latency": 0.5, "jitter": 0.25})).unwrap();
        assert_eq!(
            half,
            ToxicKind::Latency {
                latency: LatencyMs::from_micros(500),
                jitter: LatencyMs::from_micros(250),
            }
        );
        assert_eq!(half.attributes(), json!({"latency": 0.5, "jitter": 0.25}));
        // Whole values stay JSON integers (Toxiproxy's own clients parse them as int64).
        let whole = ToxicKind::from_parts("latency", json!({"latency": 5.0})).unwrap();
        assert_eq!(whole.attributes(), json!({"latency": 5, "jitter": 0}));
        assert_eq!(
            serde_json::to_string(&whole.attributes()).unwrap(),
            r#"{"jitter":0,"latency":5}"#
        );
        assert!(ToxicKind::from_parts("latency", json!({"latency": -0.5})).is_err());
        assert_eq!(LatencyMs::from_micros(1500).to_string(), "1.5ms");
        assert_eq!(
            LatencyMs::from_duration(Duration::from_micros(500)),
            LatencyMs::from_micros(500)
        );
    }

    #[test]
    fn proxy_info_tolerates_missing_toxics() {
        let p: ProxyInfo = serde_json::from_value(
            json!({"name":"a","listen":"127.0.0.1:1","upstream":"127.0.0.1:2","enabled":true}),
        )
        .unwrap();
        assert!(p.toxics.is_empty());
    }
}
