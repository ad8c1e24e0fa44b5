//! How an enum's variants are named in text: one mechanism for the whole crate.
//!
//! An enum whose variants have a name in result files, scenario files or on the console derives
//! serde with `#[serde(rename_all = "<rule>")]` and strum's `Display`, `EnumString` and
//! `IntoStaticStr` with `#[strum(serialize_all = "<rule>")]`, the same rule. Then
//! `v.to_string()`, `<&'static str>::from(v)` and `"name".parse()` agree with the JSON name
//! (e.g. `mutex-violation`), without a round trip through `serde_json::Value` and without a
//! hand-written `match` that can drift from the serde name. Each such enum also derives
//! `strum::VariantArray` and has a unit test calling `assert_names_match_serde` (test builds
//! only), which checks every variant both ways.
//!
//! Example (`checker::AnomalyKind`):
//! ```
//! use lockbench::checker::AnomalyKind;
//! assert_eq!(AnomalyKind::MutexViolation.to_string(), "mutex-violation");
//! assert_eq!("stale-write-rejected".parse(), Ok(AnomalyKind::StaleWriteRejected));
//! ```

/// The variant of `T` whose name ([`Into<&'static str>`], strum's `IntoStaticStr`) is `s`
/// (trimmed), for a `FromStr` whose error lists every valid name: "unknown `<what>` `<s>`:
/// valid `<plural>` are a, b, c" — the names come from the variants, so the list cannot drift.
///
/// # Errors
/// That message, when `s` names no variant.
pub fn parse_named<T>(s: &str, what: &str, plural: &str) -> Result<T, String>
where
    T: strum::VariantArray + Copy + Into<&'static str>,
{
    let s = s.trim();
    T::VARIANTS
        .iter()
        .copied()
        .find(|&v| Into::<&'static str>::into(v) == s)
        .ok_or_else(|| {
            let names: Vec<&'static str> = T::VARIANTS.iter().map(|&v| v.into()).collect();
            format!(
                "unknown {what} `{s}`: valid {plural} are {}",
                names.join(", ")
            )
        })
}

/// Asserts that every variant of `T` has the same name in `Display`, `FromStr`,
/// `IntoStaticStr` and serde (both directions).
///
/// # Panics
/// On the first variant whose names disagree, naming it.
#[cfg(test)]
pub(crate) fn assert_names_match_serde<T>()
where
    T: strum::VariantArray
        + std::fmt::Display
        + std::str::FromStr
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + PartialEq
        + Copy
        + Into<&'static str>,
{
    assert!(!T::VARIANTS.is_empty());
    for &v in T::VARIANTS {
        let serde_name = match serde_json::to_value(v) {
            Ok(serde_json::Value::String(s)) => s,
            other => panic!("{v:?} does not serialize to a string: {other:?}"),
        };
        assert_eq!(v.to_string(), serde_name, "Display of {v:?}");
        assert_eq!(Into::<&'static str>::into(v), serde_name, "&str of {v:?}");
        assert!(
            serde_name.parse::<T>().ok() == Some(v),
            "{serde_name:?} does not parse back to {v:?}"
        );
        let back: T = serde_json::from_value(serde_json::Value::String(v.to_string())).unwrap();
        assert_eq!(back, v, "serde reads the Display name of {v:?}");
    }
}
