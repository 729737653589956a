//! ACLs in a real PostgreSQL (the embedded one): CreateAcls' storage keeps
//! bindings once each, every agent hears of a change (`rutomq_acls`), the
//! loaded set decides as Kafka's authorizer does, DeleteAcls removes exact
//! bindings and says which were there, and codes outside Kafka's are
//! refused by the table itself.

mod common;

use common::{wait_heard, with_meta, Kind};
use rutomq::security::acl::{self, op, pattern, permission, resource, AclBinding, AclSet};

fn binding(name: &str, who: &str, operation: i8, perm: i8) -> AclBinding {
    AclBinding {
        resource_type: resource::TOPIC,
        resource_name: name.into(),
        pattern_type: pattern::LITERAL,
        principal: who.into(),
        host: "*".into(),
        operation,
        permission: perm,
    }
}

#[test]
fn acls_are_stored_announced_loaded_and_deleted() {
    with_meta("acls", |pg| async move {
        let meta = &pg.meta;
        let read = binding("orders", "User:alice", op::READ, permission::ALLOW);
        let deny = binding("orders", "User:*", op::WRITE, permission::DENY);
        meta.acl_create(vec![read.clone(), deny.clone(), read.clone()])
            .await
            .unwrap();
        wait_heard(&pg.heard, "the ACL notice", |h| h.0 == Kind::Acls).await;
        let (loaded, cut) = meta.acl_load().await.unwrap();
        assert!(!cut);
        assert_eq!(loaded.len(), 2, "{loaded:?}");
        let set = AclSet::new(loaded);
        let cfg = acl::AuthorizerConfig::default();
        assert!(set.authorize(
            &cfg,
            "User:alice",
            "10.0.0.1",
            op::READ,
            resource::TOPIC,
            "orders"
        ));
        assert!(set.authorize(
            &cfg,
            "User:alice",
            "10.0.0.1",
            op::DESCRIBE,
            resource::TOPIC,
            "orders"
        ));
        assert!(!set.authorize(
            &cfg,
            "User:alice",
            "10.0.0.1",
            op::WRITE,
            resource::TOPIC,
            "orders"
        ));
        assert!(!set.authorize(
            &cfg,
            "User:bob",
            "10.0.0.1",
            op::READ,
            resource::TOPIC,
            "orders"
        ));

        // Creating what exists again changes nothing; deleting says what was there.
        meta.acl_create(vec![read.clone()]).await.unwrap();
        assert_eq!(meta.acl_load().await.unwrap().0.len(), 2);
        let gone = meta
            .acl_delete(vec![
                read.clone(),
                binding("other", "User:x", op::READ, permission::ALLOW),
            ])
            .await
            .unwrap();
        assert_eq!(gone, vec![true, false]);
        assert_eq!(meta.acl_load().await.unwrap().0, vec![deny.clone()]);
        assert_eq!(meta.acl_delete(vec![read]).await.unwrap(), vec![false]);

        // Codes Kafka does not define never reach the table.
        let bad = AclBinding {
            operation: op::ANY,
            ..deny.clone()
        };
        assert!(acl::invalid(&bad).is_some());
        assert!(meta.acl_create(vec![bad]).await.is_err());
        assert_eq!(meta.acl_load().await.unwrap().0, vec![deny]);
    });
}
