//! A Redis node as the rest of the suite sees it: a name, a URL, and how to connect to it.
//!
//! Every strategy, nemesis and driver connects through [`NodeEndpoint::connect`], so the
//! connect and response timeouts are the same everywhere. The redis crate's own defaults
//! (1 s connect, 500 ms response) make a latency toxic above 500 ms look like an error, so
//! they are always set explicitly here.

use std::fmt;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;

/// Connection timeouts used for every connection the suite opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ConnectOptions {
    /// Time allowed to open a TCP connection and finish the handshake (ms in configs).
    #[serde(with = "crate::duration_ms")]
    pub connect_timeout: Duration,
    /// Time allowed for one command's reply (ms in configs).
    #[serde(with = "crate::duration_ms")]
    pub response_timeout: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_millis(1000),
            response_timeout: Duration::from_millis(500),
        }
    }
}

/// One Redis node: a display name (`n1`, `primary`, …) and its `redis://` or `rediss://` URL.
///
/// The URL may carry an ACL user and password; [`fmt::Display`] and [`NodeEndpoint::redacted_url`]
/// never show the password, so an endpoint can be logged or written to a result file as is.
#[derive(Clone, PartialEq, Eq)]
pub struct NodeEndpoint {
    /// Short name used in logs, histories and fault targets.
    pub name: String,
    /// Full connection URL, possibly with credentials. Never log this field directly.
    pub url: String,
}

impl NodeEndpoint {
    /// Builds an endpoint from a name and URL.
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            url: url.into(),
        }
    }

    /// The URL with any password replaced by `***`.
    pub fn redacted_url(&self) -> String {
        redact_url(&self.url)
    }

    /// Opens one multiplexed connection with the given timeouts.
    ///
    /// # Errors
    /// Any [`redis::RedisError`]: bad URL, refused or timed-out connect, failed AUTH.
    pub async fn connect(
        &self,
        opts: &ConnectOptions,
    ) -> Result<MultiplexedConnection, redis::RedisError> {
        let client = redis::Client::open(self.url.as_str())?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(opts.connect_timeout))
            .set_response_timeout(Some(opts.response_timeout));
        client
            .get_multiplexed_async_connection_with_config(&config)
            .await
    }
}

impl fmt::Debug for NodeEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeEndpoint")
            .field("name", &self.name)
            .field("url", &self.redacted_url())
            .finish()
    }
}

impl fmt::Display for NodeEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.redacted_url())
    }
}

/// Replaces the password part of `scheme://user:password@host…` with `***`.
///
/// URLs without credentials, or with a user only, are returned unchanged.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return url.to_string();
    };
    let userinfo = &authority[..at];
    let redacted_userinfo = match userinfo.find(':') {
        Some(colon) => format!("{}:***", &userinfo[..colon]),
        None if !userinfo.is_empty() && url[..scheme_end].starts_with("redis") => {
            // `redis://:password@host` has an empty user; `redis://password@host` is
            // read by some clients as a password, so hide it too.
            "***".to_string()
        }
        None => userinfo.to_string(),
    };
    format!(
        "{}://{}{}",
        &url[..scheme_end],
        redacted_userinfo,
        &rest[at..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_password_and_keeps_user() {
        assert_eq!(
            redact_url("redis://alice:s3cret@10.0.0.1:6380/0"),
            "redis://alice:***@10.0.0.1:6380/0"
        );
        assert_eq!(
            redact_url("rediss://:s3cret@host:6379"),
            "rediss://:***@host:6379"
        );
        assert_eq!(
            redact_url("redis://127.0.0.1:7000"),
            "redis://127.0.0.1:7000"
        );
        assert_eq!(redact_url("redis://s3cret@host"), "redis://***@host");
    }

    #[test]
    fn display_and_debug_never_show_password() {
        let e = NodeEndpoint::new("n1", "redis://bob:hunter2@h:1");
        assert!(!format!("{e}").contains("hunter2"));
        assert!(!format!("{e:?}").contains("hunter2"));
    }
}
