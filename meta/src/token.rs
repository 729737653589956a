//! Delegation tokens in PostgreSQL (`delegation_tokens`, migration 11):
//! created, renewed and expired by the token APIs, loaded whole (those in
//! force) by every agent for logins and DescribeDelegationToken. A change
//! is announced on `rutomq_tokens` by a trigger.

use crate::limits::TOKENS_MAX;
use crate::{sql, Meta, MetaError};

/// The SCRAM credential of a token's password for one mechanism.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenScram {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

/// One token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRow {
    pub token_id: String,
    /// SHA-256 of the token's HMAC (the HMAC is its password: not kept).
    pub hmac_hash: Vec<u8>,
    /// Principals, `User:alice`.
    pub owner: String,
    pub requester: String,
    pub renewers: Vec<String>,
    pub issue_ms: i64,
    pub expiry_ms: i64,
    pub max_ms: i64,
    pub iterations: i32,
    pub sha256: TokenScram,
    pub sha512: TokenScram,
}

/// What a renewal or expiry finds of a token, locked.
#[derive(Clone, Debug)]
pub struct TokenLocked {
    pub token_id: String,
    pub owner: String,
    pub renewers: Vec<String>,
    pub expiry_ms: i64,
    pub max_ms: i64,
}

/// Why a token could not be created.
#[derive(Debug, thiserror::Error)]
pub enum TokenCreateError {
    #[error("at most {TOKENS_MAX} delegation tokens are in force")]
    TooMany,
    #[error(transparent)]
    Meta(#[from] MetaError),
}

impl Meta {
    /// Every token in force at `now_ms`, up to `TOKENS_MAX` (the second
    /// value says whether some were left out).
    pub async fn token_load(&self, now_ms: i64) -> Result<(Vec<TokenRow>, bool), MetaError> {
        self.run(move |c| async move {
            let rows = c
                .query(sql::TOKEN_LOAD, &[&now_ms, &(TOKENS_MAX + 1)])
                .await?;
            let cut = rows.len() as i64 > TOKENS_MAX;
            Ok((
                rows.into_iter()
                    .take(TOKENS_MAX as usize)
                    .map(|r| TokenRow {
                        token_id: r.get(0),
                        hmac_hash: r.get(1),
                        owner: r.get(2),
                        requester: r.get(3),
                        renewers: r.get(4),
                        issue_ms: r.get(5),
                        expiry_ms: r.get(6),
                        max_ms: r.get(7),
                        iterations: r.get(8),
                        sha256: TokenScram {
                            salt: r.get(9),
                            stored_key: r.get(10),
                            server_key: r.get(11),
                        },
                        sha512: TokenScram {
                            salt: r.get(12),
                            stored_key: r.get(13),
                            server_key: r.get(14),
                        },
                    })
                    .collect(),
                cut,
            ))
        })
        .await
    }

    /// Stores a new token; tokens expired before `t.issue_ms` are deleted
    /// in the same transaction, and the count is taken under a lock that
    /// every agent's creations share (none passes the limit).
    pub async fn token_create(&self, t: TokenRow) -> Result<(), TokenCreateError> {
        let too_many = self
            .run_ctx(move |ctx| async move {
                let mut c = ctx.ddl.lock().await;
                let tx = c.transaction().await?;
                tx.execute(
                    "DELETE FROM delegation_tokens WHERE expiry_ms < $1",
                    &[&t.issue_ms],
                )
                .await?;
                let n: i64 = tx
                    .query_one("SELECT count(*) FROM delegation_tokens", &[])
                    .await?
                    .get(0);
                if n >= TOKENS_MAX {
                    return Ok(true); // dropped: rolled back
                }
                tx.execute(
                    sql::TOKEN_INSERT,
                    &[
                        &t.token_id,
                        &t.hmac_hash,
                        &t.owner,
                        &t.requester,
                        &t.renewers,
                        &t.issue_ms,
                        &t.expiry_ms,
                        &t.max_ms,
                        &t.iterations,
                        &t.sha256.salt,
                        &t.sha256.stored_key,
                        &t.sha256.server_key,
                        &t.sha512.salt,
                        &t.sha512.stored_key,
                        &t.sha512.server_key,
                    ],
                )
                .await?;
                tx.commit().await?;
                Ok(false)
            })
            .await?;
        if too_many {
            return Err(TokenCreateError::TooMany);
        }
        Ok(())
    }

    /// Renews or expires the token whose HMAC has SHA-256 `hmac_hash` as
    /// `decide` says from what it
    /// finds locked: `Ok(Some(ms))` sets its expiry, `Ok(None)` deletes it,
    /// `Err` changes nothing and is passed on. `Ok(None)` when no token
    /// has that HMAC.
    pub async fn token_update<E, F>(
        &self,
        hmac_hash: Vec<u8>,
        decide: F,
    ) -> Result<Option<Result<i64, E>>, MetaError>
    where
        E: Send + 'static,
        F: FnOnce(TokenLocked) -> Result<Option<i64>, E> + Send + 'static,
    {
        self.run_ctx(move |ctx| async move {
            let mut c = ctx.ddl.lock().await;
            let tx = c.transaction().await?;
            let Some(r) = tx.query_opt(sql::TOKEN_LOCK, &[&hmac_hash]).await? else {
                return Ok(None);
            };
            let found = TokenLocked {
                token_id: r.get(0),
                owner: r.get(1),
                renewers: r.get(2),
                expiry_ms: r.get(3),
                max_ms: r.get(4),
            };
            let id = found.token_id.clone();
            let expiry = match decide(found) {
                Err(e) => return Ok(Some(Err(e))),
                Ok(e) => e,
            };
            let answer = match expiry {
                Some(ms) => {
                    tx.execute(
                        "UPDATE delegation_tokens SET expiry_ms = $2 WHERE token_id = $1",
                        &[&id, &ms],
                    )
                    .await?;
                    ms
                }
                None => {
                    tx.execute("DELETE FROM delegation_tokens WHERE token_id = $1", &[&id])
                        .await?;
                    -1
                }
            };
            tx.commit().await?;
            Ok(Some(Ok(answer)))
        })
        .await
    }
}
