//! Client quotas in a real PostgreSQL (the embedded one): AlterClientQuotas'
//! storage sets, replaces and removes values per entity in one
//! transaction, every agent hears of a change (`rutomq_quotas`), and the
//! loaded set resolves a connection's quota as Kafka does; the table
//! itself refuses an IP combined with a user.

mod common;

use common::{wait_heard, with_meta, Kind};
use rutomq::quota::{Kind as QuotaKind, QuotaSet, PRODUCER_BYTE_RATE};
use rutomq_meta::quota::{EntityPart, QuotaAlteration, QuotaEntity};

fn user(name: &str) -> QuotaEntity {
    QuotaEntity {
        user: EntityPart::Named(name.into()),
        ..QuotaEntity::default()
    }
}

fn set(entity: QuotaEntity, key: &str, value: Option<f64>) -> QuotaAlteration {
    QuotaAlteration {
        entity,
        ops: vec![(key.into(), value)],
    }
}

#[test]
fn quotas_are_stored_announced_loaded_and_removed() {
    with_meta("quotas", |pg| async move {
        let meta = &pg.meta;
        let default_user = QuotaEntity {
            user: EntityPart::Default,
            ..QuotaEntity::default()
        };
        meta.quota_alter(vec![
            set(user("alice"), PRODUCER_BYTE_RATE, Some(1024.0)),
            set(default_user.clone(), PRODUCER_BYTE_RATE, Some(4096.0)),
        ])
        .await
        .unwrap();
        wait_heard(&pg.heard, "the quota notice", |h| h.0 == Kind::Quotas).await;
        // Replaced, not added.
        meta.quota_alter(vec![set(user("alice"), PRODUCER_BYTE_RATE, Some(2048.0))])
            .await
            .unwrap();
        let (loaded, cut) = meta.quota_load().await.unwrap();
        assert!(!cut);
        assert_eq!(loaded.len(), 2, "{loaded:?}");
        let q = QuotaSet::new(loaded);
        let bound = |u: &str| q.resolve(QuotaKind::Produce, u, "c").map(|a| a.bound);
        assert_eq!(bound("alice"), Some(2048.0));
        assert_eq!(bound("bob"), Some(4096.0));
        assert_eq!(q.resolve(QuotaKind::Fetch, "alice", "c"), None);
        // Removing a value that is there and one that is not.
        meta.quota_alter(vec![
            set(user("alice"), PRODUCER_BYTE_RATE, None),
            set(user("nobody"), PRODUCER_BYTE_RATE, None),
        ])
        .await
        .unwrap();
        let q = QuotaSet::new(meta.quota_load().await.unwrap().0);
        assert_eq!(
            q.resolve(QuotaKind::Produce, "alice", "c").map(|a| a.bound),
            Some(4096.0)
        );
        // An IP with a user: refused by the table, and nothing of the
        // transaction stays.
        let bad = QuotaEntity {
            user: EntityPart::Named("x".into()),
            ip: EntityPart::Named("10.0.0.1".into()),
            ..QuotaEntity::default()
        };
        assert!(meta
            .quota_alter(vec![
                set(user("carol"), PRODUCER_BYTE_RATE, Some(1.0)),
                set(bad, "connection_creation_rate", Some(1.0)),
            ])
            .await
            .is_err());
        let q = QuotaSet::new(meta.quota_load().await.unwrap().0);
        assert_eq!(
            q.resolve(QuotaKind::Produce, "carol", "c").map(|a| a.bound),
            Some(4096.0)
        );
    });
}
