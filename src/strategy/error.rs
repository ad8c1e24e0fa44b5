//! Errors of the strategy layer: bad options, and failures of connect and release.

use std::time::Duration;

use crate::lease::{join_failures, NodeFailure};

/// `factor` as a percentage without trailing zeros (0.01 → "1", 0.015 → "1.5").
fn percent(factor: f64) -> String {
    let s = format!("{:.4}", factor * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The OS error number (`errno`) of the first [`std::io::Error`] in `error`'s source chain
/// (`error` itself included), if any: how a connect failure says "out of file descriptors"
/// without matching its text. A source shared as `Arc<dyn Error + Send + Sync>` (how the
/// `redis` crate keeps its I/O errors) is looked into.
pub fn os_error_code(error: &(dyn std::error::Error + 'static)) -> Option<i32> {
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(code) = e
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
        {
            return Some(code);
        }
        if let Some(shared) = e.downcast_ref::<Shared>() {
            let inner: &(dyn std::error::Error + 'static) = shared.as_ref();
            if let Some(code) = os_error_code(inner) {
                return Some(code);
            }
        }
        current = e.source();
    }
    None
}

/// Failures of connect and release, and bad options.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StrategyError {
    /// A strategy name that does not exist.
    #[error("unknown strategy `{name}`: valid names are {valid}")]
    UnknownStrategy {
        /// What was given.
        name: String,
        /// The valid names, comma-separated.
        valid: String,
    },
    /// Options that cannot work.
    #[error("invalid strategy options: {0}")]
    InvalidOptions(String),
    /// A TTL so short that no lease can ever be valid: `ttl − (ttl × drift_factor + 2 ms)`
    /// leaves less than 1 ms even with zero latency (see `quorum::min_workable_ttl`).
    #[error(
        "TTL {ttl:?} leaves no validity (drift margin 2 ms + {} % of the TTL): use at least {min:?}",
        percent(*drift_factor)
    )]
    TtlTooShort {
        /// The TTL given.
        ttl: Duration,
        /// The smallest workable TTL for this drift factor.
        min: Duration,
        /// The clock-drift factor in force.
        drift_factor: f64,
    },
    /// No endpoint was given.
    #[error("no Redis endpoint configured: give at least one node")]
    NoEndpoints,
    /// A single-node strategy could not connect to its node.
    #[error("cannot connect to {node}: {message}")]
    Connect {
        /// Node display name and redacted URL.
        node: String,
        /// The underlying error.
        message: String,
        /// The OS error number under it (`errno`, e.g. `EMFILE` = 24 when this process is
        /// out of file descriptors), when the connect failed in a system call; `None` for
        /// refusals by the server and for backends whose client does not expose it.
        os_error: Option<i32>,
    },
    /// The single node of a single-node strategy failed during release.
    #[error("release failed: {0}")]
    Node(NodeFailure),
    /// A lock-client adapter could not start or broke the protocol.
    #[error("adapter {adapter}: {message}")]
    Adapter {
        /// The adapter's name (`redis-py`).
        adapter: String,
        /// What went wrong, naming the command or the line.
        message: String,
    },
    /// A lock-client adapter cannot run the run's settings: it refused `init` (e.g. a TTL its
    /// library cannot express), or `--watchdog` asks for a renewal it does not have. Bad input:
    /// waiting longer or fewer clients would not help.
    #[error("adapter {adapter} refused the run's settings: {message}")]
    AdapterRefused {
        /// The adapter's name (`python-redis-lock`).
        adapter: String,
        /// Its own words (`init`'s error message), or what is missing.
        message: String,
    },
    /// Release reached no node at all.
    #[error(
        "release reached no node ({}); the key will expire after its TTL",
        join_failures(failures)
    )]
    AllNodesFailed {
        /// One failure per configured node.
        failures: Vec<NodeFailure>,
    },
}

impl StrategyError {
    /// Whether this is a connect failure because this process (`EMFILE`) or the system
    /// (`ENFILE`) ran out of file descriptors.
    pub fn out_of_descriptors(&self) -> bool {
        matches!(
            self,
            StrategyError::Connect {
                os_error: Some(code),
                ..
            } if *code == libc::EMFILE || *code == libc::ENFILE
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connect(os_error: Option<i32>) -> StrategyError {
        StrategyError::Connect {
            node: "n1".into(),
            message: "x".into(),
            os_error,
        }
    }

    #[test]
    fn the_os_error_is_found_under_a_redis_error_and_names_descriptor_exhaustion() {
        let io = std::io::Error::from_raw_os_error(libc::EMFILE);
        let redis_error = redis::RedisError::from(io);
        assert_eq!(os_error_code(&redis_error), Some(libc::EMFILE));
        let refused = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(os_error_code(&refused), Some(libc::ECONNREFUSED));
        let text_only = std::fmt::Error;
        assert_eq!(os_error_code(&text_only), None);

        assert!(connect(Some(libc::EMFILE)).out_of_descriptors());
        assert!(connect(Some(libc::ENFILE)).out_of_descriptors());
        assert!(!connect(Some(libc::ECONNREFUSED)).out_of_descriptors());
        // Text alone no longer decides: "os error 24" in a message without the code is not it.
        let by_text = StrategyError::Connect {
            node: "n1".into(),
            message: "Too many open files (os error 24)".into(),
            os_error: None,
        };
        assert!(!by_text.out_of_descriptors());
    }
}
