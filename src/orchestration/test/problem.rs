//! [`Problem`]: one broken rule of a test, about one setting ([`Field`]), in words that name no
//! vocabulary. The `run` command names the setting by its flag ([`Problem::with_flag`]), a
//! scenario file by its key and points at it as `file:line:col` ([`Problem::with_key`]), so a
//! rule is written once ([`Test::check_settings`](super::Test::check_settings)) for both.

/// A setting of a test, as a rule names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// The strategy list as a whole.
    Strategies,
    /// The `i`-th strategy of the list.
    Strategy(usize),
    /// Concurrent clients.
    Clients,
    /// Distinct resources.
    Resources,
    /// The run time.
    Duration,
    /// The operation count (`run --ops`; a scenario has a duration).
    Ops,
    /// Open-loop rate, ops/s.
    Rate,
    /// Lease TTL.
    Ttl,
    /// Attempts per acquire.
    RetryAttempts,
    /// Per-node operation timeout.
    NodeTimeout,
    /// The `adapter:command` command line.
    Adapter,
    /// Adapter processes shared by the clients.
    AdapterProcesses,
    /// One connection shared by every client (`run --shared-connection`).
    SharedConnection,
    /// PgBouncer in front of PostgreSQL.
    Pooler,
    /// PgBouncer's server connections.
    PoolSize,
    /// PostgreSQL server settings.
    PgSettings,
    /// An application-side pool of PostgreSQL connections.
    PgPool,
    /// Worker processes.
    Workers,
    /// What each critical section protects (`row`, `external`).
    Work,
    /// An idempotency key on every call of `external` work.
    IdempotencyKey,
}

impl Field {
    /// The `run` flag that sets it (`--clients`).
    pub fn flag(self) -> &'static str {
        match self {
            Field::Strategies | Field::Strategy(_) => "--strategy",
            Field::Clients => "--clients",
            Field::Resources => "--resources",
            Field::Duration => "--duration",
            Field::Ops => "--ops",
            Field::Rate => "--rate",
            Field::Ttl => "--ttl",
            Field::RetryAttempts => "--retry-attempts",
            Field::NodeTimeout => "--node-timeout",
            Field::Adapter => "--adapter",
            Field::AdapterProcesses => "--adapter-processes",
            Field::SharedConnection => "--shared-connection",
            Field::Pooler => "--pooler",
            Field::PoolSize => "--pool-size",
            Field::PgSettings => "--pg-setting",
            Field::PgPool => "--pg-pool",
            Field::Workers => "--workers",
            Field::Work => "--work",
            Field::IdempotencyKey => "--idempotency-key",
        }
    }

    /// The scenario key that sets it, as a message quotes it (`` `clients` ``, `` `[pooler]` ``).
    pub fn key(self) -> &'static str {
        match self {
            Field::Strategies | Field::Strategy(_) => "`strategies`",
            Field::Clients => "`clients`",
            Field::Resources => "`resources`",
            Field::Duration | Field::Ops => "`duration`",
            Field::Rate => "`rate`",
            Field::Ttl => "`ttl`",
            Field::RetryAttempts => "`retry_attempts`",
            Field::NodeTimeout => "`node_timeout`",
            Field::Adapter => "`adapter`",
            Field::AdapterProcesses => "`adapter_processes`",
            Field::SharedConnection => "`shared_connection`",
            Field::Pooler => "`[pooler]`",
            Field::PoolSize => "`pool_size`",
            Field::PgSettings => "`pg_settings`",
            Field::PgPool => "`pg_pool`",
            Field::Workers => "`workers`",
            Field::Work => "`work`",
            Field::IdempotencyKey => "`idempotency_key`",
        }
    }

    /// The field of a `--<flag>` stem as the driver's workload rules name it (`clients`,
    /// `adapter-processes`); `None` for a name no field has.
    pub fn of_flag_stem(stem: &str) -> Option<Field> {
        Some(match stem {
            "clients" => Field::Clients,
            "resources" => Field::Resources,
            "duration" => Field::Duration,
            "ops" => Field::Ops,
            "rate" => Field::Rate,
            "adapter-processes" => Field::AdapterProcesses,
            "shared-connection" => Field::SharedConnection,
            "work" => Field::Work,
            "idempotency-key" => Field::IdempotencyKey,
            _ => return None,
        })
    }
}

/// One broken rule: the setting, the value given when the rule is about it, and what is
/// wrong in the words that follow (`" must be at least 1"`, `" needs about 3000256
/// descriptors …"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The setting to change.
    pub field: Field,
    /// The value given, as the message quotes it (`1000000`), when the rule is about it.
    pub value: Option<String>,
    /// What follows the setting's name (and value).
    pub message: String,
    /// Words only `run` can act on, appended to its message (`", or --direct"`).
    pub flag_hint: Option<&'static str>,
}

impl Problem {
    /// A problem with `field`; `message` follows its name.
    pub fn new(field: Field, message: impl Into<String>) -> Self {
        Self {
            field,
            value: None,
            message: message.into(),
            flag_hint: None,
        }
    }

    /// A problem with the value `value` of `field`; `message` follows it.
    pub fn of_value(field: Field, value: impl ToString, message: impl Into<String>) -> Self {
        Self {
            value: Some(value.to_string()),
            ..Self::new(field, message)
        }
    }

    /// The same, with `hint` appended in `run`'s words only.
    pub fn with_flag_hint(self, hint: &'static str) -> Self {
        Self {
            flag_hint: Some(hint),
            ..self
        }
    }

    /// In `run`'s words: `--clients must be at least 1`, `--clients 1000000 needs …`.
    pub fn with_flag(&self) -> String {
        let value = self
            .value
            .as_ref()
            .map_or_else(String::new, |v| format!(" {v}"));
        format!(
            "{}{value}{}{}",
            self.field.flag(),
            self.message,
            self.flag_hint.unwrap_or("")
        )
    }

    /// In a scenario file's words: `` `clients` must be at least 1 ``, `` `clients` = 1000000
    /// needs … ``.
    pub fn with_key(&self) -> String {
        let value = self
            .value
            .as_ref()
            .map_or_else(String::new, |v| format!(" = {v}"));
        format!("{}{value}{}", self.field.key(), self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_problem_reads_in_both_vocabularies() {
        let p = Problem::new(Field::Clients, " must be at least 1");
        assert_eq!(p.with_flag(), "--clients must be at least 1");
        assert_eq!(p.with_key(), "`clients` must be at least 1");
        let p = Problem::new(Field::PoolSize, ": pool size must be at least 1");
        assert_eq!(p.with_key(), "`pool_size`: pool size must be at least 1");
        assert_eq!(
            Field::of_flag_stem("adapter-processes"),
            Some(Field::AdapterProcesses)
        );
        assert_eq!(Field::of_flag_stem("hold"), None);
    }
}
