//! Client quotas in PostgreSQL (`client_quotas`, migration 9): loaded whole
//! by every agent for its throttling, changed by AlterClientQuotas. A
//! change is announced on `rutomq_quotas` by a trigger.

use crate::limits::QUOTAS_MAX;
use crate::{sql, Meta, MetaError};

/// One component of a quota entity: a user, a client id or an IP.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum EntityPart {
    /// The entity does not name this component.
    #[default]
    Absent,
    /// Kafka's `<default>` (a null name on the wire).
    Default,
    Named(String),
}

impl EntityPart {
    fn kind(&self) -> i16 {
        match self {
            EntityPart::Absent => 0,
            EntityPart::Default => 1,
            EntityPart::Named(_) => 2,
        }
    }

    fn name(&self) -> &str {
        match self {
            EntityPart::Named(n) => n,
            _ => "",
        }
    }

    fn from_row(kind: i16, name: String) -> EntityPart {
        match kind {
            1 => EntityPart::Default,
            2 => EntityPart::Named(name),
            _ => EntityPart::Absent,
        }
    }

    pub fn is_absent(&self) -> bool {
        matches!(self, EntityPart::Absent)
    }
}

/// A client quota entity, as Kafka's `ClientQuotaEntity`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct QuotaEntity {
    pub user: EntityPart,
    pub client_id: EntityPart,
    pub ip: EntityPart,
}

/// One stored value of one entity.
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaValue {
    pub entity: QuotaEntity,
    pub key: String,
    pub value: f64,
}

/// A change to one entity: each key set to a value, or removed (`None`).
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaAlteration {
    pub entity: QuotaEntity,
    pub ops: Vec<(String, Option<f64>)>,
}

/// Why AlterClientQuotas could not store its changes.
#[derive(Debug, thiserror::Error)]
pub enum QuotaAlterError {
    #[error("at most {QUOTAS_MAX} client quota values are stored")]
    TooMany,
    #[error(transparent)]
    Meta(#[from] MetaError),
}

impl Meta {
    /// Every stored quota value, up to `QUOTAS_MAX` (the second value says
    /// whether some were left out).
    pub async fn quota_load(&self) -> Result<(Vec<QuotaValue>, bool), MetaError> {
        self.run(|c| async move {
            let rows = c.query(sql::QUOTA_LOAD, &[&(QUOTAS_MAX + 1)]).await?;
            let cut = rows.len() as i64 > QUOTAS_MAX;
            Ok((
                rows.into_iter()
                    .take(QUOTAS_MAX as usize)
                    .map(|r| QuotaValue {
                        entity: QuotaEntity {
                            user: EntityPart::from_row(r.get(0), r.get(1)),
                            client_id: EntityPart::from_row(r.get(2), r.get(3)),
                            ip: EntityPart::from_row(r.get(4), r.get(5)),
                        },
                        key: r.get(6),
                        value: r.get(7),
                    })
                    .collect(),
                cut,
            ))
        })
        .await
    }

    /// Applies `alterations` in one PostgreSQL transaction: all or none.
    pub async fn quota_alter(
        &self,
        alterations: Vec<QuotaAlteration>,
    ) -> Result<(), QuotaAlterError> {
        let too_many = self
            .run_ctx(move |ctx| async move {
                let mut c = ctx.ddl.lock().await;
                let tx = c.transaction().await?;
                for a in &alterations {
                    let e = &a.entity;
                    let (uk, ck, ik) = (e.user.kind(), e.client_id.kind(), e.ip.kind());
                    let (un, cn, iname) = (e.user.name(), e.client_id.name(), e.ip.name());
                    for (key, value) in &a.ops {
                        match value {
                            Some(v) => {
                                tx.execute(
                                    sql::QUOTA_UPSERT,
                                    &[&uk, &un, &ck, &cn, &ik, &iname, key, v],
                                )
                                .await?
                            }
                            None => {
                                tx.execute(
                                    sql::QUOTA_DELETE,
                                    &[&uk, &un, &ck, &cn, &ik, &iname, key],
                                )
                                .await?
                            }
                        };
                    }
                }
                let n: i64 = tx
                    .query_one("SELECT count(*) FROM client_quotas", &[])
                    .await?
                    .get(0);
                if n > QUOTAS_MAX {
                    return Ok(true); // dropped: rolled back
                }
                tx.commit().await?;
                Ok(false)
            })
            .await?;
        if too_many {
            return Err(QuotaAlterError::TooMany);
        }
        Ok(())
    }
}
