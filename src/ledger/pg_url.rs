//! `--ledger postgres://…`: the URL of a PostgreSQL ledger, checked before anything starts, and
//! the connection to it.

use std::time::Duration;

use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::{Client, NoTls};

use super::LedgerError;
use crate::node::redact_url;

/// How long connecting to the ledger's server may take.
pub const PG_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A validated `--ledger postgres://user@host:port/db` URL.
#[derive(Clone)]
pub struct PgLedgerUrl {
    config: Box<tokio_postgres::Config>,
    redacted: String,
    /// The URL as given (password included).
    secret: String,
}

/// Two URLs are equal when they are written the same (what the config was parsed from).
impl PartialEq for PgLedgerUrl {
    fn eq(&self, other: &Self) -> bool {
        self.secret == other.secret
    }
}

impl Eq for PgLedgerUrl {}

impl std::fmt::Debug for PgLedgerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted)
    }
}

impl PgLedgerUrl {
    /// Parses and checks `url`: scheme `postgres://` or `postgresql://`, exactly one TCP host,
    /// a user, and no TLS demanded (lockbench's PostgreSQL client has none).
    ///
    /// # Errors
    /// [`LedgerError::BadUrl`] naming the URL (password redacted) and what is wrong.
    pub fn parse(url: &str) -> Result<Self, LedgerError> {
        let url = url.trim();
        let bad = |reason: &str| LedgerError::BadUrl {
            url: redact_url(url),
            reason: reason.to_string(),
        };
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(bad(
                "a PostgreSQL ledger needs a postgres:// URL, e.g. postgres://user@host:5432/db \
                 (or `postgres` to start one, or `sqlite`)",
            ));
        }
        let mut config = url.parse::<tokio_postgres::Config>().map_err(|e| {
            // The driver's message may quote the URL; never its password.
            let text = e.to_string();
            let reason = match config_password(url) {
                Some(p) if !p.is_empty() => text.replace(&p, "***"),
                _ => text,
            };
            LedgerError::BadUrl {
                url: redact_url(url),
                reason,
            }
        })?;
        match config.get_hosts() {
            [Host::Tcp(h)] if !h.is_empty() => {}
            [] => return Err(bad("no host (e.g. postgres://user@127.0.0.1:5432/db)")),
            [Host::Tcp(_)] => return Err(bad("empty host")),
            [_] => return Err(bad("a Unix socket host is not supported; give a TCP host")),
            _ => return Err(bad("give exactly one host")),
        }
        if config.get_ports().len() > 1 {
            return Err(bad("give exactly one port"));
        }
        if config.get_user().is_none_or(str::is_empty) {
            return Err(bad("no user (e.g. postgres://user@host:5432/db)"));
        }
        if config.get_ssl_mode() == SslMode::Require {
            return Err(bad(
                "sslmode=require is not supported (lockbench's PostgreSQL client has no TLS)",
            ));
        }
        config.connect_timeout(PG_CONNECT_TIMEOUT);
        config.application_name("lockbench-ledger");
        Ok(Self {
            config: Box::new(config),
            redacted: redact_url(url),
            secret: url.to_string(),
        })
    }

    /// The URL as given, password included: for handing the ledger to another lockbench
    /// process (a worker of a multi-worker run), never for a message or a file.
    pub fn secret_url(&self) -> &str {
        &self.secret
    }

    /// The server's host, as given (a name or an address).
    pub fn host(&self) -> &str {
        match self.config.get_hosts() {
            [Host::Tcp(h)] => h,
            _ => "",
        }
    }

    /// The URL with its password replaced by `***`, for messages and result files.
    pub fn redacted(&self) -> &str {
        &self.redacted
    }

    /// Connects (bounded by [`PG_CONNECT_TIMEOUT`]) and runs `SELECT 1`: is the ledger's server
    /// there? Call it before any client starts.
    ///
    /// # Errors
    /// [`LedgerError::Unreachable`] naming the URL.
    pub async fn probe(&self) -> Result<(), LedgerError> {
        let client = self.connect().await?;
        client
            .simple_query("SELECT 1")
            .await
            .map_err(|e| self.unreachable(&e))?;
        Ok(())
    }

    pub(super) async fn connect(&self) -> Result<Client, LedgerError> {
        let connecting = self.config.connect(NoTls);
        let (client, connection) =
            match tokio::time::timeout(PG_CONNECT_TIMEOUT + Duration::from_secs(1), connecting)
                .await
            {
                Ok(r) => r.map_err(|e| self.unreachable(&e))?,
                Err(_) => {
                    return Err(LedgerError::Unreachable {
                        url: self.redacted.clone(),
                        detail: format!("no answer within {PG_CONNECT_TIMEOUT:?}"),
                    })
                }
            };
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!("ledger database connection ended: {e}");
            }
        });
        Ok(client)
    }

    fn unreachable(&self, e: &tokio_postgres::Error) -> LedgerError {
        LedgerError::Unreachable {
            url: self.redacted.clone(),
            detail: error_text(e),
        }
    }
}

/// The password of `scheme://user:password@…`, if any (to keep it out of messages).
fn config_password(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    parsed.password().map(str::to_string)
}

/// A PostgreSQL error with its server message (`Display` of the driver's error alone often
/// says only "db error").
pub(super) fn error_text(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(s) = source {
                text.push_str(&format!(": {s}"));
                source = s.source();
            }
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(url: &str) -> String {
        match PgLedgerUrl::parse(url) {
            Err(LedgerError::BadUrl { url, reason }) => format!("{url}: {reason}"),
            Ok(u) => panic!("{url} was accepted as {u:?}"),
            Err(e) => panic!("{url}: unexpected error {e}"),
        }
    }

    #[test]
    fn a_good_url_is_accepted_and_shown_without_its_password() {
        let u = PgLedgerUrl::parse("postgres://bench:s3cret@db.example:6543/ledgers").unwrap();
        assert_eq!(u.redacted(), "postgres://bench:***@db.example:6543/ledgers");
        assert_eq!(
            format!("{u:?}"),
            "postgres://bench:***@db.example:6543/ledgers"
        );
        assert_eq!(u.config.get_ports(), &[6543]);
        assert_eq!(u.config.get_dbname(), Some("ledgers"));
        assert_eq!(u.config.get_connect_timeout(), Some(&PG_CONNECT_TIMEOUT));
        assert!(PgLedgerUrl::parse("postgresql://u@127.0.0.1/db").is_ok());
    }

    #[test]
    fn bad_urls_are_refused_naming_the_url_and_the_fault() {
        assert!(reason("mysql://u@h/db").starts_with("mysql://u@h/db: a PostgreSQL ledger needs"));
        assert_eq!(
            reason("postgres://127.0.0.1:5432/db"),
            "postgres://127.0.0.1:5432/db: no user (e.g. postgres://user@host:5432/db)"
        );
        assert!(reason("postgres://u@a,b/db").ends_with("give exactly one host"));
        assert!(reason("postgres://u@h/db?sslmode=require").contains("sslmode=require"));
        let r = reason("postgres://u:hunter2@h:notaport/db");
        assert!(r.starts_with("postgres://u:***@h:notaport/db: "), "{r}");
        assert!(!r.contains("hunter2"), "{r}");
    }
}
