//! SCRAM credentials in PostgreSQL (`scram_credentials`, migration 7):
//! loaded whole by every agent for logins, changed by
//! AlterUserScramCredentials and the offline `rutomq user` command. A change
//! is announced on `rutomq_credentials` by a trigger.

use crate::limits::SCRAM_CREDENTIALS_MAX;
use crate::{sql, Meta, MetaError};

/// One stored credential: user, Kafka's mechanism code (1 SCRAM-SHA-256,
/// 2 SCRAM-SHA-512), salt, stored key, server key, iterations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramRow {
    pub user: String,
    pub mechanism: i16,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

/// A change of AlterUserScramCredentials.
#[derive(Clone, Debug)]
pub enum ScramChange {
    Upsert(ScramRow),
    Delete { user: String, mechanism: i16 },
}

/// What a change found: done, or (deletion) there was nothing to delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScramChangeResult {
    Done,
    NotFound,
}

fn row_from(r: &tokio_postgres::Row) -> ScramRow {
    ScramRow {
        user: r.get(0),
        mechanism: r.get(1),
        salt: r.get(2),
        stored_key: r.get(3),
        server_key: r.get(4),
        iterations: r.get(5),
    }
}

impl Meta {
    /// Every credential, up to `SCRAM_CREDENTIALS_MAX` (the second value
    /// says whether some were left out).
    pub async fn scram_load(&self) -> Result<(Vec<ScramRow>, bool), MetaError> {
        self.run(|c| async move {
            let rows = c
                .query(sql::SCRAM_LOAD, &[&(SCRAM_CREDENTIALS_MAX + 1)])
                .await?;
            let cut = rows.len() as i64 > SCRAM_CREDENTIALS_MAX;
            Ok((
                rows.iter()
                    .take(SCRAM_CREDENTIALS_MAX as usize)
                    .map(row_from)
                    .collect(),
                cut,
            ))
        })
        .await
    }

    /// (user, mechanism code, iterations) of `users` (all: `None`).
    pub async fn scram_describe(
        &self,
        users: Option<Vec<String>>,
    ) -> Result<Vec<(String, i16, i32)>, MetaError> {
        self.run(move |c| async move {
            Ok(c.query(sql::SCRAM_DESCRIBE, &[&users])
                .await?
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect())
        })
        .await
    }

    /// Applies `changes` in one PostgreSQL transaction (all or nothing),
    /// each with its result in order.
    pub async fn scram_alter(
        &self,
        changes: Vec<ScramChange>,
    ) -> Result<Vec<ScramChangeResult>, MetaError> {
        self.run_ctx(move |ctx| async move {
            let mut c = ctx.ddl.lock().await;
            let tx = c.transaction().await?;
            let mut out = Vec::with_capacity(changes.len());
            for ch in &changes {
                out.push(match ch {
                    ScramChange::Upsert(r) => {
                        tx.execute(
                            sql::SCRAM_UPSERT,
                            &[
                                &r.user,
                                &r.mechanism,
                                &r.salt,
                                &r.stored_key,
                                &r.server_key,
                                &r.iterations,
                            ],
                        )
                        .await?;
                        ScramChangeResult::Done
                    }
                    ScramChange::Delete { user, mechanism } => {
                        if tx.execute(sql::SCRAM_DELETE, &[user, mechanism]).await? == 1 {
                            ScramChangeResult::Done
                        } else {
                            ScramChangeResult::NotFound
                        }
                    }
                });
            }
            tx.commit().await?;
            Ok(out)
        })
        .await
    }
}
