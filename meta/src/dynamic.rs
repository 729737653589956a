//! Dynamic configs in PostgreSQL (`dynamic_configs`, migration 10): broker
//! configs set at runtime (per agent, or the cluster default), group
//! configs and client-metrics subscriptions. Loaded whole by every agent;
//! a change is announced on `rutomq_configs` by a trigger.

use crate::limits::DYNAMIC_CONFIGS_MAX;
use crate::{sql, Meta, MetaError};

/// One stored config of one resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DynamicConfig {
    /// Kafka's `ConfigResource.Type` code.
    pub resource_type: i8,
    /// An agent id, '' (the broker default), a group id or a subscription.
    pub resource: String,
    pub name: String,
    pub value: String,
}

/// Why a resource's configs could not be stored.
#[derive(Debug, thiserror::Error)]
pub enum DynamicAlterError {
    #[error("at most {DYNAMIC_CONFIGS_MAX} dynamic configs are stored")]
    TooMany,
    #[error(transparent)]
    Meta(#[from] MetaError),
}

impl Meta {
    /// Every stored dynamic config, up to `DYNAMIC_CONFIGS_MAX` (the second
    /// value says whether some were left out).
    pub async fn dynamic_load(&self) -> Result<(Vec<DynamicConfig>, bool), MetaError> {
        self.run(|c| async move {
            let rows = c
                .query(sql::DYNAMIC_LOAD, &[&(DYNAMIC_CONFIGS_MAX + 1)])
                .await?;
            let cut = rows.len() as i64 > DYNAMIC_CONFIGS_MAX;
            Ok((
                rows.into_iter()
                    .take(DYNAMIC_CONFIGS_MAX as usize)
                    .map(|r| DynamicConfig {
                        resource_type: r.get::<_, i16>(0) as i8,
                        resource: r.get(1),
                        name: r.get(2),
                        value: r.get(3),
                    })
                    .collect(),
                cut,
            ))
        })
        .await
    }

    /// Replaces one resource's configs with what `edit` makes of the stored
    /// ones (sorted by name), in one transaction that holds the resource's
    /// writers off; `edit`'s refusal is passed on and nothing is written,
    /// as with `validate_only`.
    pub async fn dynamic_alter<E, F>(
        &self,
        resource_type: i8,
        resource: String,
        validate_only: bool,
        edit: F,
    ) -> Result<Result<(), E>, DynamicAlterError>
    where
        E: Send + 'static,
        F: FnOnce(Vec<(String, String)>) -> Result<Vec<(String, String)>, E> + Send + 'static,
    {
        let kind = i16::from(resource_type);
        let outcome = self
            .run_ctx(move |ctx| async move {
                let mut c = ctx.ddl.lock().await;
                let tx = c.transaction().await?;
                tx.execute(sql::DYNAMIC_LOCK, &[&kind, &resource]).await?;
                let current = tx
                    .query(sql::DYNAMIC_RESOURCE, &[&kind, &resource])
                    .await?
                    .into_iter()
                    .map(|r| (r.get(0), r.get(1)))
                    .collect();
                let next = match edit(current) {
                    Ok(next) => next,
                    Err(e) => return Ok(Ok(Err(e))),
                };
                if validate_only {
                    return Ok(Ok(Ok(())));
                }
                let (names, values): (Vec<String>, Vec<String>) = next.into_iter().unzip();
                // The count is taken under a lock every agent's writers
                // share: no two pass the limit together.
                tx.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended('rutomq_configs', 18))",
                    &[],
                )
                .await?;
                tx.execute(sql::DYNAMIC_CLEAR, &[&kind, &resource]).await?;
                let n: i64 = tx
                    .query_one(sql::DYNAMIC_REPLACE, &[&kind, &resource, &names, &values])
                    .await?
                    .get(0);
                if n + names.len() as i64 > DYNAMIC_CONFIGS_MAX {
                    return Ok(Err(())); // dropped: rolled back
                }
                tx.commit().await?;
                Ok(Ok(Ok(())))
            })
            .await?;
        outcome.map_err(|()| DynamicAlterError::TooMany)
    }
}
