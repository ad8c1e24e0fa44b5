//! The claim strategies' SQL, with the jobs table's quoted name filled in (see the
//! parent module for what each statement does).

use super::{ClaimMode, CANDIDATES, STOCK};

/// The statements, with the table's quoted name filled in.
pub(super) struct Statements {
    pub(super) exists: String,
    pub(super) setup: String,
    pub(super) stock: String,
    pub(super) pick: String,
    pub(super) claim: String,
    pub(super) renew: String,
    pub(super) complete: String,
}

impl Statements {
    pub(super) fn new(prefix: &str, mode: ClaimMode) -> Self {
        let quoted = |suffix: &str| format!("\"{}{suffix}\"", prefix.replace('"', "\"\""));
        let (t, index) = (quoted("jobs"), quoted("jobs_open"));
        let open = "state <> 'done' AND (state = 'pending' OR lease_until < clock_timestamp())";
        let literal = t.replace('\'', "''");
        let claimable =
            "(state = 'pending' OR (state = 'running' AND lease_until < clock_timestamp()))";
        let set_claim = "state = 'running', owner = $2, claims = claims + 1, \
             lease_until = clock_timestamp() + $3::bigint * interval '1 millisecond'";
        Self {
            exists: format!("SELECT to_regclass('{literal}') IS NOT NULL"),
            setup: format!(
                "BEGIN; SELECT pg_advisory_xact_lock(hashtextextended('{literal}', 0)); \
                 CREATE TABLE IF NOT EXISTS {t} (id bigint PRIMARY KEY, \
                 state text NOT NULL DEFAULT 'pending', owner text, \
                 claims integer NOT NULL DEFAULT 0, lease_until timestamptz, \
                 done_at timestamptz); \
                 CREATE INDEX IF NOT EXISTS {index} ON {t} (id) WHERE state <> 'done'; COMMIT"
            ),
            stock: format!(
                "INSERT INTO {t} (id) SELECT m + g FROM (SELECT coalesce(max(id), 0) AS m \
                 FROM {t}) s, generate_series(1, {STOCK}::bigint) g ON CONFLICT DO NOTHING"
            ),
            pick: format!(
                "SELECT id, state = 'running' FROM {t} WHERE {open} ORDER BY id LIMIT {CANDIDATES}"
            ),
            claim: match mode {
                ClaimMode::Update { .. } => format!(
                    "UPDATE {t} SET {set_claim} WHERE id = $1 AND {claimable} RETURNING claims"
                ),
                ClaimMode::SkipLockedLease => format!(
                    "UPDATE {t} SET {set_claim} WHERE id = (SELECT id FROM {t} WHERE id = $1 \
                     AND {claimable} FOR UPDATE SKIP LOCKED) RETURNING claims"
                ),
                // The job's id is filled in (an integer) by `held_claim`: one simple query.
                ClaimMode::SkipLocked => format!(
                    "BEGIN; SELECT id FROM {t} WHERE id = {{id}} AND state = 'pending' \
                     FOR UPDATE SKIP LOCKED"
                ),
            },
            renew: format!(
                "UPDATE {t} SET lease_until = clock_timestamp() + $3::bigint * interval \
                 '1 millisecond' WHERE id = $1 AND owner = $2 AND state = 'running'"
            ),
            complete: if mode == ClaimMode::SkipLocked {
                format!(
                    "UPDATE {t} SET state = 'done', done_at = clock_timestamp() \
                     WHERE id = {{id}} AND state = 'pending'; COMMIT"
                )
            } else if mode.guarded() {
                format!(
                    "UPDATE {t} SET state = 'done', done_at = clock_timestamp() \
                     WHERE id = $1 AND owner = $2 AND state = 'running'"
                )
            } else {
                format!(
                    "UPDATE {t} SET state = 'done', done_at = clock_timestamp() \
                     WHERE id = $1 AND $2::text IS NOT NULL"
                )
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_quote_the_prefix_and_guard_the_completion() {
        let s = Statements::new("lb:\"x\":", ClaimMode::Update { guarded: true });
        assert!(
            s.claim.contains("UPDATE \"lb:\"\"x\"\":jobs\""),
            "{}",
            s.claim
        );
        assert!(s.complete.contains("owner = $2"), "{}", s.complete);
        assert!(s.setup.contains("'\"lb:\"\"x\"\":jobs\"'"), "{}", s.setup);
        let u = Statements::new("lb:", ClaimMode::Update { guarded: false });
        assert!(!u.complete.contains("owner ="), "{}", u.complete);
        assert!(u.pick.ends_with(&format!("LIMIT {CANDIDATES}")));
        let held = Statements::new("lb:", ClaimMode::SkipLocked);
        assert!(held
            .claim
            .starts_with("BEGIN; SELECT id FROM \"lb:jobs\" WHERE id = {id}"));
        assert!(
            held.claim.ends_with("FOR UPDATE SKIP LOCKED"),
            "{}",
            held.claim
        );
        assert!(held.complete.ends_with("; COMMIT"), "{}", held.complete);
        assert_eq!(held.pick, u.pick, "a plain read: it takes no row lock");
        let lease = Statements::new("lb:", ClaimMode::SkipLockedLease);
        assert!(lease
            .claim
            .contains("FOR UPDATE SKIP LOCKED) RETURNING claims"));
        assert!(lease.complete.contains("owner = $2"), "{}", lease.complete);
        assert_eq!(lease.pick, u.pick);
    }
}
