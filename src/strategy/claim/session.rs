//! One worker's session on the jobs table: one statement at a time, bounded by the per-node
//! timeout, opened lazily (creating and stocking the table when it is missing) and closed
//! after a timeout or an I/O error.

/// What one statement returns: its rows, or how many rows it changed.
pub(super) enum Answer {
    Rows(Vec<tokio_postgres::Row>),
    Affected(u64),
    /// A simple query's (several statements, one round trip): rows of the last statement
    /// that returned any, and the first statement's affected count that changed rows.
    Simple {
        rows: usize,
        affected: u64,
    },
}

/// Which [`Answer`] a statement is run for.
#[derive(Clone, Copy)]
pub(super) enum Want {
    Rows,
    Affected,
    /// A simple query (no parameters): [`Answer::Simple`].
    Simple,
}

use std::time::Duration;

use tokio_postgres::types::{ToSql, Type};

use super::{ClaimQueue, Open};
use crate::lease::{NodeFailure, NodeFailureKind};
use crate::strategy::postgres::{describe_error, open_connection};

impl ClaimQueue {
    /// One statement on job `id` with `owner` (and the TTL in ms when given), run for `want`.
    pub(super) async fn run(
        &self,
        timeout: Duration,
        sql: &str,
        id: i64,
        owner: &str,
        ttl_ms: Option<i64>,
        want: Want,
    ) -> Result<Answer, NodeFailure> {
        let ttl = ttl_ms.unwrap_or(0);
        let mut params: Vec<(&(dyn ToSql + Sync), Type)> =
            vec![(&id, Type::INT8), (&owner, Type::TEXT)];
        if ttl_ms.is_some() {
            params.push((&ttl, Type::INT8));
        }
        let mut session = self.session.lock().await;
        self.statement(&mut session, timeout, sql, &params, want)
            .await
    }

    /// Runs `sql` on the open session (opening one first), bounded by `timeout`, unnamed
    /// (one round trip, as in `postgres`): its rows, or its affected-row count from the
    /// command's completion.
    pub(super) async fn statement(
        &self,
        session: &mut Option<Open>,
        timeout: Duration,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
        want: Want,
    ) -> Result<Answer, NodeFailure> {
        if session.is_none() {
            let t = self.connect.connect_timeout + self.connect.response_timeout;
            self.open(session, t).await?;
        }
        let Some(open) = session.as_ref() else {
            return Err(self.failure(NodeFailureKind::Unreachable, "no session".into()));
        };
        let client = &open.client;
        let work = async {
            match want {
                Want::Rows => client.query_typed(sql, params).await.map(Answer::Rows),
                Want::Affected => {
                    let stream = client.query_typed_raw(sql, params.iter().cloned()).await?;
                    futures::pin_mut!(stream);
                    while futures::StreamExt::next(&mut stream)
                        .await
                        .transpose()?
                        .is_some()
                    {}
                    Ok(Answer::Affected(stream.rows_affected().unwrap_or(0)))
                }
                Want::Simple => client.simple_query(sql).await.map(|messages| {
                    let mut rows = 0;
                    let mut affected = 0;
                    for m in messages {
                        match m {
                            tokio_postgres::SimpleQueryMessage::Row(_) => rows += 1,
                            tokio_postgres::SimpleQueryMessage::CommandComplete(n) => {
                                affected = affected.max(n)
                            }
                            _ => {}
                        }
                    }
                    Answer::Simple { rows, affected }
                }),
            }
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) if e.as_db_error().is_some() && !e.is_closed() => {
                Err(self.failure(NodeFailureKind::Command, describe_error(&e)))
            }
            Ok(Err(e)) => {
                close(session);
                Err(self.failure(NodeFailureKind::Unreachable, describe_error(&e)))
            }
            Err(_) => {
                close(session);
                Err(self.failure(
                    NodeFailureKind::Timeout,
                    format!("no answer within {} ms", timeout.as_millis()),
                ))
            }
        }
    }

    /// Connects, and creates the table (and stocks it) when it does not exist yet.
    pub(super) async fn open(
        &self,
        session: &mut Option<Open>,
        timeout: Duration,
    ) -> Result<(), NodeFailure> {
        let opened = tokio::time::timeout(timeout, async {
            let (client, connection) = open_connection(&self.endpoint.url, &self.connect).await?;
            let open = Open {
                client,
                connection,
                job: None,
            };
            // A reconnect finds the table and takes no lock: a session the server has not yet
            // seen die may still hold the creation's lock (or an unfinished stocking).
            let set_up = async {
                let row = open.client.query_one(&self.sql.exists, &[]).await?;
                if !row.try_get::<_, bool>(0)? {
                    open.client.batch_execute(&self.sql.setup).await?;
                    open.client.execute(&self.sql.stock, &[]).await?;
                }
                Ok::<_, tokio_postgres::Error>(())
            };
            match set_up.await {
                Ok(_) => Ok(open),
                Err(e) => {
                    open.connection.abort();
                    Err(e)
                }
            }
        })
        .await;
        match opened {
            Ok(Ok(open)) => {
                *session = Some(open);
                Ok(())
            }
            Ok(Err(e)) => Err(self.failure(NodeFailureKind::Unreachable, describe_error(&e))),
            Err(_) => Err(self.failure(
                NodeFailureKind::Timeout,
                format!("could not connect within {} ms", timeout.as_millis()),
            )),
        }
    }

    pub(super) fn failure(&self, kind: NodeFailureKind, message: String) -> NodeFailure {
        NodeFailure {
            node: self.endpoint.name.clone(),
            kind,
            message,
        }
    }
}

/// Ends the session from this side (the socket closes at once, see `postgres`).
pub(super) fn close(session: &mut Option<Open>) {
    if let Some(open) = session.take() {
        open.connection.abort();
    }
}
