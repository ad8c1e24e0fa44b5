//! Serde adapter: a [`std::time::Duration`] stored as whole milliseconds (u64).

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serializer};

/// Serializes a duration as integer milliseconds.
pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

/// Deserializes integer milliseconds into a duration.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    Ok(Duration::from_millis(u64::deserialize(d)?))
}
