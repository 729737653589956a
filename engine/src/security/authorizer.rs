//! The authorizer (`--authorizer acl`): the agent's copy of every ACL and
//! the shards' view of it.
//!
//! The copy is loaded whole from PostgreSQL before the listeners open,
//! replaced when `rutomq_acls` announces a change (a trigger on `acls`
//! fires it in the changing transaction, so every agent sees a committed
//! change within its LISTEN latency) and every
//! [`crate::limits::ACLS_REFRESH`] in case a notice was lost while LISTEN
//! reconnected: that is the bound on how stale an agent's ACLs can be. An
//! agent that changes ACLs itself (CreateAcls, DeleteAcls) reloads before
//! it answers, so its client reads its own change.
//!
//! Each shard holds the current set ([`crate::control::ShardCopy`]) and
//! checks one atomic version per decision: a decision is a few hash lookups in shard memory,
//! never a lock or a PostgreSQL round trip.

use std::sync::Arc;

use super::acl::{AclSet, AuthorizerConfig};
use crate::control::{AgentCopy, ShardCopy};

/// The agent-wide authorizer: its settings and the current ACL set.
pub struct Authorizer {
    pub cfg: AuthorizerConfig,
    copy: AgentCopy<AclSet>,
}

impl Authorizer {
    pub fn new(cfg: AuthorizerConfig) -> Authorizer {
        Authorizer {
            cfg,
            copy: AgentCopy::new(AclSet::default()),
        }
    }

    /// An authorizer holding `set` (tests of its users).
    #[cfg(test)]
    pub fn with_acls(cfg: AuthorizerConfig, set: AclSet) -> Authorizer {
        Authorizer {
            cfg,
            copy: AgentCopy::new(set),
        }
    }

    /// The current set.
    pub fn acls(&self) -> Arc<AclSet> {
        self.copy.get()
    }

    /// Loads every ACL from PostgreSQL into the copy; the set now in
    /// force. A load cut at `ACLS_MAX` is not installed (DENYs past the cut
    /// would be lost: the old set stays, empty at start, which denies all).
    pub async fn reload(
        &self,
        meta: &rutomq_meta::Meta,
    ) -> Result<Arc<AclSet>, rutomq_meta::MetaError> {
        self.copy.reload("ACLs", meta.acl_load(), AclSet::new).await
    }
}

/// One shard's view of the authorizer.
pub struct ShardAcls {
    authorizer: Arc<Authorizer>,
    view: ShardCopy<AclSet>,
}

impl ShardAcls {
    pub fn new(authorizer: Arc<Authorizer>) -> ShardAcls {
        let view = ShardCopy::new(&authorizer.copy);
        ShardAcls { authorizer, view }
    }

    pub fn cfg(&self) -> &AuthorizerConfig {
        &self.authorizer.cfg
    }

    /// Runs `f` on the current set (taken from the agent when its version
    /// moved).
    pub fn with<T>(&self, f: impl FnOnce(&AclSet, &AuthorizerConfig) -> T) -> T {
        self.view
            .with(&self.authorizer.copy, |set| f(set, &self.authorizer.cfg))
    }
}
