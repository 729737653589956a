//! ACLs in PostgreSQL (`acls`, migration 8): loaded whole by every agent
//! for its decisions, changed by CreateAcls and DeleteAcls. A change is
//! announced on `rutomq_acls` by a trigger.

use crate::limits::ACLS_MAX;
use crate::{sql, Meta, MetaError};

/// One ACL, with Kafka's codes (the engine's `security::acl` gives them
/// meaning).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

/// Why CreateAcls could not store bindings.
#[derive(Debug, thiserror::Error)]
pub enum AclCreateError {
    #[error("at most {ACLS_MAX} ACLs are stored")]
    TooMany,
    #[error(transparent)]
    Meta(#[from] MetaError),
}

impl Meta {
    /// Every ACL, up to `ACLS_MAX` (the second value says whether some were
    /// left out).
    pub async fn acl_load(&self) -> Result<(Vec<AclBinding>, bool), MetaError> {
        self.run(|c| async move {
            let rows = c.query(sql::ACL_LOAD, &[&(ACLS_MAX + 1)]).await?;
            let cut = rows.len() as i64 > ACLS_MAX;
            Ok((
                rows.iter()
                    .take(ACLS_MAX as usize)
                    .map(|r| AclBinding {
                        resource_type: r.get::<_, i16>(0) as i8,
                        resource_name: r.get(1),
                        pattern_type: r.get::<_, i16>(2) as i8,
                        principal: r.get(3),
                        host: r.get(4),
                        operation: r.get::<_, i16>(5) as i8,
                        permission: r.get::<_, i16>(6) as i8,
                    })
                    .collect(),
                cut,
            ))
        })
        .await
    }

    /// Stores `bindings` in one PostgreSQL transaction (those already
    /// stored are left as they are).
    pub async fn acl_create(&self, bindings: Vec<AclBinding>) -> Result<(), AclCreateError> {
        let too_many = self
            .run_ctx(move |ctx| async move {
                let mut c = ctx.ddl.lock().await;
                let tx = c.transaction().await?;
                for b in &bindings {
                    execute(&tx, sql::ACL_INSERT, b).await?;
                }
                let n: i64 = tx.query_one("SELECT count(*) FROM acls", &[]).await?.get(0);
                if n > ACLS_MAX {
                    return Ok(true); // dropped: rolled back
                }
                tx.commit().await?;
                Ok(false)
            })
            .await?;
        if too_many {
            return Err(AclCreateError::TooMany);
        }
        Ok(())
    }

    /// Deletes exactly `bindings` in one PostgreSQL transaction; which of
    /// them were there.
    pub async fn acl_delete(&self, bindings: Vec<AclBinding>) -> Result<Vec<bool>, MetaError> {
        self.run_ctx(move |ctx| async move {
            let mut c = ctx.ddl.lock().await;
            let tx = c.transaction().await?;
            let mut out = Vec::with_capacity(bindings.len());
            for b in &bindings {
                out.push(execute(&tx, sql::ACL_DELETE, b).await? == 1);
            }
            tx.commit().await?;
            Ok(out)
        })
        .await
    }
}

/// Runs `statement` with one binding's seven parameters (the codes,
/// Kafka's int8, stored as smallint).
async fn execute(
    tx: &tokio_postgres::Transaction<'_>,
    statement: &str,
    b: &AclBinding,
) -> Result<u64, tokio_postgres::Error> {
    let codes = [b.resource_type, b.pattern_type, b.operation, b.permission].map(i16::from);
    tx.execute(
        statement,
        &[
            &codes[0],
            &b.resource_name,
            &codes[1],
            &b.principal,
            &b.host,
            &codes[2],
            &codes[3],
        ],
    )
    .await
}
