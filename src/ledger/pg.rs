//! The ledger on PostgreSQL (`--ledger postgres://…`): the same tables as the SQLite file, in
//! a schema of the run's own, with the same fencing check in SQL.
//!
//! **Where.** Each ledger creates a new schema `lockbench_ledger_<ms>_<pid>_<n>` (a plain
//! `CREATE SCHEMA`, which fails rather than reuse an existing one) holding `meta`, `resources`,
//! `idempotency`, `events` (the columns of the SQLite schema, PostgreSQL types) and the
//! function `apply` below. Nothing outside that schema is created, changed, dropped or
//! truncated, and the schema is kept after the run (its name is in the copy's `meta`).
//!
//! **Steps.** One batch of the ledger thread is one call of `apply`, one statement and one
//! round trip: it loops over the batch's steps in queue order (a scan of `unnest` of the
//! arrays, so each step is reached in constant time), running per step the same
//! statements as the SQLite ledger (`UPDATE resources SET fence = t WHERE resource = r AND
//! (fence IS NULL OR fence <= t)` for a fenced begin, …), then inserts all the batch's `events`
//! rows at once. A write whose section's read is in the same batch writes that read + 1
//! (`read_at`, the read's position); otherwise the thread passes the value read + 1 itself.
//! The thread is the schema's only writer, so it numbers `seq` as the SQLite ledger does, and
//! the commit order is the queue order.
//!
//! **After the run.** [`BatchBackend::finish`] copies the schema's `meta`, `resources` and
//! `events` (in `seq` order) into `ledger.sqlite` in the strategy's directory, so the checker,
//! `lockbench check` and the reports read the same rows in the same order as from an SQLite
//! ledger, also after the server is gone.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use futures::TryStreamExt;
use tokio_postgres::{Client, Statement};

use super::batch::{BatchBackend, Request};
use super::pg_url::{error_text, PgLedgerUrl};
use super::store::SCHEMA;
use super::{FenceMode, LedgerError, Step, StepOutcome};

/// A schema name no other ledger (of this or any run) has: `lockbench_ledger_<ms>_<pid>_<n>`.
pub(super) fn unique_schema_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!(
        "lockbench_ledger_{ms}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The tables and the `apply` function in schema `s` (a name from [`unique_schema_name`]).
fn schema_sql(s: &str) -> String {
    format!(
        r#"
CREATE SCHEMA {s};
CREATE TABLE {s}.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE {s}.resources (resource TEXT PRIMARY KEY, counter BIGINT NOT NULL DEFAULT 0, fence BIGINT);
CREATE TABLE {s}.idempotency (key TEXT PRIMARY KEY, seq BIGINT NOT NULL);
CREATE TABLE {s}.events (
    seq BIGINT PRIMARY KEY, time_us BIGINT NOT NULL, section_id BIGINT NOT NULL,
    client BIGINT NOT NULL, resource TEXT NOT NULL, fencing_token BIGINT, step TEXT NOT NULL,
    value BIGINT, accepted BOOLEAN NOT NULL, reason TEXT, idempotency_key TEXT);
CREATE FUNCTION {s}.apply(
    p_first_seq BIGINT, p_fenced BOOLEAN, p_times BIGINT[], p_sections BIGINT[], p_clients BIGINT[],
    p_resources TEXT[], p_tokens BIGINT[], p_steps TEXT[], p_vals BIGINT[], p_read_at INT[], p_keys TEXT[],
    OUT o_accepted BOOLEAN[], OUT o_seen BIGINT[], OUT o_first_seq BIGINT)
LANGUAGE plpgsql AS $fn$
DECLARE
    l_first BIGINT;
    l_step TEXT;
    l_res TEXT;
    l_tok BIGINT;
    l_val BIGINT;
    l_ra INT;
    l_key TEXT;
    l_i BIGINT;
    v BIGINT;
    ok BOOLEAN;
    why TEXT;
    reasons TEXT[] := '{{}}';
BEGIN
    -- A shared ledger (several writers, `p_first_seq` NULL): one batch at a time, numbered
    -- after the last committed one, so the commit order is still the `seq` order.
    IF p_first_seq IS NULL THEN
        LOCK TABLE {s}.events IN EXCLUSIVE MODE;
        SELECT coalesce(max(seq), 0) + 1 INTO l_first FROM {s}.events;
    ELSE
        l_first := p_first_seq;
    END IF;
    o_first_seq := l_first;
    o_accepted := '{{}}';
    o_seen := '{{}}';
    INSERT INTO {s}.resources(resource)
        SELECT DISTINCT r FROM unnest(p_resources, p_steps) AS u(r, st)
        WHERE st NOT IN ('end', 'crash')
        ON CONFLICT DO NOTHING;
    FOR l_step, l_res, l_tok, l_val, l_ra, l_key, l_i IN
        SELECT * FROM unnest(p_steps, p_resources, p_tokens, p_vals, p_read_at, p_keys)
                      WITH ORDINALITY
    LOOP
        v := l_val;
        ok := TRUE;
        why := NULL;
        IF l_step = 'begin' THEN
            IF p_fenced THEN
                UPDATE {s}.resources SET fence = l_tok
                    WHERE resource = l_res AND (fence IS NULL OR fence <= l_tok);
                ok := FOUND;
            END IF;
        ELSIF l_step = 'read' THEN
            SELECT counter INTO v FROM {s}.resources WHERE resource = l_res;
        ELSIF l_step = 'write' THEN
            IF l_ra IS NOT NULL THEN
                v := o_seen[l_ra] + 1;
            END IF;
            IF l_key IS NOT NULL AND EXISTS (SELECT 1 FROM {s}.idempotency WHERE key = l_key) THEN
                ok := FALSE;
                why := 'duplicate';
            ELSE
                IF p_fenced THEN
                    UPDATE {s}.resources SET counter = v, fence = l_tok
                        WHERE resource = l_res AND (fence IS NULL OR fence <= l_tok);
                ELSE
                    UPDATE {s}.resources SET counter = v WHERE resource = l_res;
                END IF;
                ok := FOUND;
                IF ok AND l_key IS NOT NULL THEN
                    INSERT INTO {s}.idempotency(key, seq) VALUES (l_key, l_first + l_i - 1);
                END IF;
            END IF;
        END IF;
        IF NOT ok AND why IS NULL THEN
            why := 'stale';
        END IF;
        o_accepted := array_append(o_accepted, ok);
        o_seen := array_append(o_seen, v);
        reasons := array_append(reasons, why);
    END LOOP;
    INSERT INTO {s}.events(seq, time_us, section_id, client, resource, fencing_token, step,
                           value, accepted, reason, idempotency_key)
        SELECT l_first + o - 1, t, sec, c, r, tok, st, sv, a, rs, k
        FROM unnest(p_times, p_sections, p_clients, p_resources, p_tokens, p_steps, o_seen, o_accepted, reasons, p_keys)
             WITH ORDINALITY AS u(t, sec, c, r, tok, st, sv, a, rs, k, o);
END
$fn$;
"#
    )
}

/// The PostgreSQL backend of the ledger thread (see the module docs). It owns a
/// current-thread runtime: the ledger thread is a plain thread, as for SQLite.
pub(super) struct PgBatches {
    rt: tokio::runtime::Runtime,
    client: Client,
    apply: Statement,
    schema: String,
    url: PgLedgerUrl,
    mode: FenceMode,
    /// The next `seq` this writer gives; `None` for a shared schema (several writers: `apply`
    /// numbers each batch after the last committed one, under a table lock).
    next_seq: Option<i64>,
    /// Section id → the counter its read saw, until its end (for writes in a later batch).
    reads: HashMap<u64, i64>,
    /// Where [`finish`](BatchBackend::finish) copies the ledger (`None`: a shared schema,
    /// copied by whoever created it once every writer is done).
    copy_to: Option<PathBuf>,
}

/// A current-thread runtime for blocking use on the ledger thread.
fn runtime() -> Result<tokio::runtime::Runtime, LedgerError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LedgerError::Postgres {
            what: "starting the ledger's runtime".into(),
            detail: e.to_string(),
        })
}

/// Maps a failed statement to [`LedgerError::Postgres`] saying what was done where.
fn sql_err(
    url: &PgLedgerUrl,
    schema: &str,
    what: &str,
) -> impl FnOnce(tokio_postgres::Error) -> LedgerError {
    let what = format!("{what} in {} (schema {schema})", url.redacted());
    move |e| LedgerError::Postgres {
        what,
        detail: error_text(&e),
    }
}

/// Connects and creates schema `schema` with the ledger's tables, recording `mode`.
async fn create_schema(
    url: &PgLedgerUrl,
    schema: &str,
    mode: FenceMode,
) -> Result<Client, LedgerError> {
    let client = url.connect().await?;
    client
        .batch_execute(&schema_sql(schema))
        .await
        .map_err(sql_err(url, schema, "creating the ledger's tables"))?;
    client
        .execute(
            &format!(
                "INSERT INTO {schema}.meta(key, value) VALUES ('fence_mode', $1), \
                 ('schema_version', '1')"
            ),
            &[&mode.as_str()],
        )
        .await
        .map_err(sql_err(url, schema, "writing meta"))?;
    Ok(client)
}

/// Makes `client` a writer of `schema`: commits as the SQLite ledger's `synchronous = NORMAL`
/// (ordered, surviving a crash of lockbench; a power loss may drop the last ones; this session
/// only) and prepares the step function.
async fn writer_session(
    client: &Client,
    url: &PgLedgerUrl,
    schema: &str,
) -> Result<Statement, LedgerError> {
    client
        .batch_execute("SET synchronous_commit = off")
        .await
        .map_err(sql_err(url, schema, "setting synchronous_commit"))?;
    client
        .prepare(&format!(
            "SELECT o_accepted, o_seen, o_first_seq FROM {schema}.apply($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
        ))
        .await
        .map_err(sql_err(url, schema, "preparing the step function"))
}

/// Creates a fresh schema (a name from [`unique_schema_name`]) for a ledger that several
/// processes write to ([`PgBatches::attach`]), and returns its name.
///
/// # Errors
/// [`LedgerError::Unreachable`], [`LedgerError::Postgres`] when the schema cannot be created.
pub(super) async fn create_shared(
    url: &PgLedgerUrl,
    mode: FenceMode,
) -> Result<String, LedgerError> {
    let schema = unique_schema_name();
    create_schema(url, &schema, mode).await?;
    tracing::info!(
        "shared ledger on PostgreSQL: {} schema {schema}",
        url.redacted()
    );
    Ok(schema)
}

impl PgBatches {
    /// Connects, creates a fresh schema with the ledger's tables and records `mode`. Blocking:
    /// call on the ledger thread.
    ///
    /// # Errors
    /// [`LedgerError::Unreachable`] when the server cannot be reached, [`LedgerError::Postgres`]
    /// when the schema cannot be created (e.g. no `CREATE` right on the database).
    pub(super) fn create(
        url: &PgLedgerUrl,
        mode: FenceMode,
        copy_to: &Path,
    ) -> Result<Self, LedgerError> {
        let rt = runtime()?;
        let schema = unique_schema_name();
        let (client, apply) = rt.block_on(async {
            let client = create_schema(url, &schema, mode).await?;
            let apply = writer_session(&client, url, &schema).await?;
            Ok::<_, LedgerError>((client, apply))
        })?;
        tracing::info!("ledger on PostgreSQL: {} schema {schema}", url.redacted());
        Ok(Self {
            rt,
            client,
            apply,
            schema,
            url: url.clone(),
            mode,
            next_seq: Some(1),
            reads: HashMap::new(),
            copy_to: Some(copy_to.to_path_buf()),
        })
    }

    /// Becomes one of several writers of `schema` (made by [`create_shared`]): each batch is
    /// numbered by the database, and nothing is copied at the end. Blocking.
    ///
    /// # Errors
    /// [`LedgerError::Unreachable`]; [`LedgerError::Postgres`] when the schema has no step
    /// function (not a ledger schema).
    pub(super) fn attach(
        url: &PgLedgerUrl,
        schema: &str,
        mode: FenceMode,
    ) -> Result<Self, LedgerError> {
        let rt = runtime()?;
        let (client, apply) = rt.block_on(async {
            let client = url.connect().await?;
            let apply = writer_session(&client, url, schema).await?;
            Ok::<_, LedgerError>((client, apply))
        })?;
        Ok(Self {
            rt,
            client,
            apply,
            schema: schema.to_string(),
            url: url.clone(),
            mode,
            next_seq: None,
            reads: HashMap::new(),
            copy_to: None,
        })
    }
}

/// Copies `schema` into a new SQLite ledger at `path` (see the module docs): `meta` plus the
/// URL and schema, `resources`, and `events` in `seq` order. Blocking (runs `rt`).
///
/// # Errors
/// [`LedgerError::NotEmpty`] when `path` already holds events, [`LedgerError::Open`] /
/// [`LedgerError::Sql`] for the file, [`LedgerError::Postgres`] for the reads.
fn copy_schema(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    url: &PgLedgerUrl,
    schema: &str,
    path: &Path,
) -> Result<(), LedgerError> {
    let path = path.to_path_buf();
    let open_err = |source| LedgerError::Open {
        path: path.clone(),
        source,
    };
    let mut conn = rusqlite::Connection::open(&path).map_err(open_err)?;
    conn.execute_batch(SCHEMA).map_err(open_err)?;
    let used: i64 = conn
        .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
        .map_err(open_err)?;
    if used > 0 {
        return Err(LedgerError::NotEmpty { path });
    }
    let tx = conn.transaction()?;
    let schema = schema.to_string();
    let pg_err = |what: &'static str| {
        let schema = schema.clone();
        move |e: tokio_postgres::Error| LedgerError::Postgres {
            what: format!("copying {what} of schema {schema}"),
            detail: error_text(&e),
        }
    };
    rt.block_on(async {
        for row in client
            .query(&format!("SELECT key, value FROM {schema}.meta"), &[])
            .await
            .map_err(pg_err("meta"))?
        {
            tx.execute(
                "INSERT INTO meta(key, value) VALUES (?1, ?2)",
                [row.get::<_, String>(0), row.get::<_, String>(1)],
            )?;
        }
        tx.execute(
            "INSERT INTO meta(key, value) VALUES ('postgres_url', ?1), ('postgres_schema', ?2)",
            [url.redacted(), schema.as_str()],
        )?;
        let mut insert = tx.prepare("INSERT INTO resources(resource, counter, fence) VALUES (?1, ?2, ?3)")?;
        for row in client
            .query(
                &format!("SELECT resource, counter, fence FROM {schema}.resources ORDER BY resource"),
                &[],
            )
            .await
            .map_err(pg_err("resources"))?
        {
            insert.execute(rusqlite::params![
                row.get::<_, String>(0),
                row.get::<_, i64>(1),
                row.get::<_, Option<i64>>(2)
            ])?;
        }
        let mut insert = tx.prepare(
            "INSERT INTO events(seq, time_us, section_id, client, resource, fencing_token, step, \
             value, accepted, reason, idempotency_key) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )?;
        let rows = client
            .query_raw(
                &format!(
                    "SELECT seq, time_us, section_id, client, resource, fencing_token, step, \
                     value, accepted, reason, idempotency_key FROM {schema}.events ORDER BY seq"
                ),
                std::iter::empty::<i64>(),
            )
            .await
            .map_err(pg_err("events"))?;
        futures::pin_mut!(rows);
        while let Some(row) = rows.try_next().await.map_err(pg_err("events"))? {
            insert.execute(rusqlite::params![
                row.get::<_, i64>(0),
                row.get::<_, i64>(1),
                row.get::<_, i64>(2),
                row.get::<_, i64>(3),
                row.get::<_, String>(4),
                row.get::<_, Option<i64>>(5),
                row.get::<_, String>(6),
                row.get::<_, Option<i64>>(7),
                row.get::<_, bool>(8),
                row.get::<_, Option<String>>(9),
                row.get::<_, Option<String>>(10),
            ])?;
        }
        Ok::<_, LedgerError>(())
    })?;
    tx.commit()?;
    Ok(())
}

/// Copies the shared ledger `schema` (every writer done) into a new SQLite ledger at `path`.
/// Blocking: call from a plain thread or `spawn_blocking`.
///
/// # Errors
/// As [`copy_schema`], and [`LedgerError::Unreachable`].
pub(super) fn copy_shared(url: &PgLedgerUrl, schema: &str, path: &Path) -> Result<(), LedgerError> {
    let rt = runtime()?;
    let client = rt.block_on(url.connect())?;
    copy_schema(&rt, &client, url, schema, path)
}

/// The arrays of one `apply` call, in step order, and where each request's steps are.
#[derive(Default)]
struct ApplyArgs {
    times: Vec<i64>,
    sections: Vec<i64>,
    clients: Vec<i64>,
    resources: Vec<String>,
    tokens: Vec<Option<i64>>,
    steps: Vec<&'static str>,
    vals: Vec<Option<i64>>,
    read_at: Vec<Option<i32>>,
    keys: Vec<Option<String>>,
    /// Per request: `(position, step)` of each step sent, or `Err` for a step refused before.
    placed: Vec<Vec<Result<(usize, Step), LedgerError>>>,
}

/// What one `apply` call answered: per step whether it was accepted and the counter it saw,
/// and the batch's first `seq`; or why the batch did not commit.
type Applied = Result<(Vec<bool>, Vec<Option<i64>>, i64), String>;

impl PgBatches {
    /// Lays out a batch's steps as `apply`'s arrays, refusing (before SQL) a begin or write
    /// without a token in fenced mode; a write takes the value its section read plus one.
    fn place(&self, batch: &[Request], fenced: bool) -> ApplyArgs {
        let mut a = ApplyArgs::default();
        // Section id → position (1-based, as in SQL) of its read in this batch.
        let mut read_pos: HashMap<u64, i32> = HashMap::new();
        for r in batch.iter() {
            let s = &r.section;
            let mut placed = Vec::with_capacity(r.steps.as_slice().len());
            for &(step, value) in r.steps.as_slice() {
                if fenced && s.fencing_token.is_none() && matches!(step, Step::Begin | Step::Write)
                {
                    placed.push(Err(LedgerError::MissingToken {
                        section_id: s.section_id,
                    }));
                    continue;
                }
                let (value, read_at) = match (step, value) {
                    (Step::Write, None) => match read_pos.get(&s.section_id) {
                        Some(&at) => (None, Some(at)),
                        None => (
                            Some(self.reads.get(&s.section_id).copied().unwrap_or(0) + 1),
                            None,
                        ),
                    },
                    _ => (value, None),
                };
                let at = a.steps.len();
                match step {
                    Step::Read => {
                        read_pos.insert(s.section_id, at as i32 + 1);
                    }
                    Step::End | Step::Crash => {
                        read_pos.remove(&s.section_id);
                    }
                    Step::Begin | Step::Write => {}
                }
                a.times.push(r.time_us as i64);
                a.sections.push(s.section_id as i64);
                a.clients.push(i64::from(s.client));
                a.resources.push(s.resource.clone());
                a.tokens.push(s.fencing_token.map(|t| t as i64));
                a.steps.push(step.as_str());
                a.vals.push(value);
                a.read_at.push(read_at);
                a.keys.push(s.idempotency_key.clone());
                placed.push(Ok((at, step)));
            }
            a.placed.push(placed);
        }
        a
    }

    /// Runs one `apply` call for the placed steps (one transaction); logs a batch that did
    /// not commit.
    fn commit(&self, a: &ApplyArgs, fenced: bool) -> Applied {
        let first_seq = self.next_seq;
        let client = &self.client;
        let apply = &self.apply;
        let result = self.rt.block_on(async {
            let row = client
                .query_one(
                    apply,
                    &[
                        &first_seq,
                        &fenced,
                        &a.times,
                        &a.sections,
                        &a.clients,
                        &a.resources,
                        &a.tokens,
                        &a.steps,
                        &a.vals,
                        &a.read_at,
                        &a.keys,
                    ],
                )
                .await?;
            Ok::<_, tokio_postgres::Error>((
                row.get::<_, Vec<bool>>(0),
                row.get::<_, Vec<Option<i64>>>(1),
                row.get::<_, i64>(2),
            ))
        });
        let committed = match result {
            Ok((accepted, seen, first)) if accepted.len() == a.steps.len() => {
                Ok((accepted, seen, first))
            }
            Ok((accepted, _, _)) => Err(format!(
                "the step function answered {} outcomes for {} steps",
                accepted.len(),
                a.steps.len()
            )),
            Err(e) => Err(error_text(&e)),
        };
        if let Err(detail) = &committed {
            tracing::error!(
                "PostgreSQL ledger {} schema {}: a batch of {} steps did not commit: {detail}",
                self.url.redacted(),
                self.schema,
                a.steps.len()
            );
        }
        committed
    }

    /// Answers each request of the batch with its outcomes (or its first error), keeps the
    /// reads for later writes, and returns how many steps were lost.
    fn answer(
        &mut self,
        batch: &mut Vec<Request>,
        placed: Vec<Vec<Result<(usize, Step), LedgerError>>>,
        committed: &Applied,
    ) -> u64 {
        let mut lost = 0;
        for (r, placed) in batch.drain(..).zip(placed) {
            let mut outcomes = Vec::new();
            let mut error = None;
            for p in placed {
                match (p, committed) {
                    (Err(e), _) => {
                        lost += 1;
                        error.get_or_insert(e);
                    }
                    (Ok(_), Err(detail)) => {
                        lost += 1;
                        error.get_or_insert(LedgerError::GroupCommit {
                            detail: detail.clone(),
                        });
                    }
                    (Ok((at, step)), Ok((accepted, seen, first_seq))) => {
                        let id = r.section.section_id;
                        match step {
                            Step::Read => {
                                self.reads.insert(id, seen[at].unwrap_or(0));
                            }
                            Step::End | Step::Crash => {
                                self.reads.remove(&id);
                            }
                            Step::Begin | Step::Write => {}
                        }
                        outcomes.push(StepOutcome {
                            seq: first_seq + at as i64,
                            accepted: accepted[at],
                            value: seen[at],
                        });
                    }
                }
            }
            if let Some(reply) = r.reply {
                let _ = reply.send(match error {
                    None => Ok(outcomes),
                    Some(e) => Err(e),
                });
            }
        }
        lost
    }
}

impl BatchBackend for PgBatches {
    fn run_batch(&mut self, batch: &mut Vec<Request>) -> u64 {
        let fenced = self.mode == FenceMode::Fenced;
        let mut a = self.place(batch, fenced);
        let committed = self.commit(&a, fenced);
        let placed = std::mem::take(&mut a.placed);
        let lost = self.answer(batch, placed, &committed);
        if let (Ok(_), Some(next)) = (&committed, &mut self.next_seq) {
            *next += a.steps.len() as i64;
        }
        lost
    }

    /// Copies the ledger into `ledger.sqlite` (the schema itself is kept); a shared schema's
    /// writer copies nothing.
    fn finish(&mut self) -> Result<(), LedgerError> {
        match &self.copy_to {
            Some(path) => copy_schema(&self.rt, &self.client, &self.url, &self.schema, path),
            None => Ok(()),
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_unique_and_plain_identifiers() {
        let (a, b) = (unique_schema_name(), unique_schema_name());
        assert_ne!(a, b);
        for n in [a, b] {
            assert!(n.len() <= 63, "{n}");
            assert!(n.starts_with("lockbench_ledger_"));
            assert!(n
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_'));
        }
    }
}
