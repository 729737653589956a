//! Share sessions (KIP-932): the partitions a member fetches from one
//! agent, named once (epoch 0) and then changed incrementally, each
//! request naming the next epoch. Kept per connection (a consumer keeps
//! one connection per broker; a new connection starts a new session, as
//! after SHARE_SESSION_NOT_FOUND). When a session closes (epoch -1) or its
//! connection goes, the records its member still holds in its partitions
//! are given back at once instead of at their locks' timeout.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rutomq_meta::Meta;
use uuid::Uuid;

use super::partition::Rules;
use super::store::{change, Changed};
use crate::error::ErrorCode;
use crate::limits::{SHARE_SESSIONS_PER_CONNECTION_MAX, SHARE_SESSION_PARTITIONS_MAX};

/// A partition by topic id.
pub type Key = (Uuid, i32);

struct Session {
    /// The epoch the next request must name.
    epoch: i32,
    partitions: BTreeSet<Key>,
    /// Its number in the agent's registry.
    token: u64,
}

/// A member: (group, member id).
pub type Member = (String, String);

/// The agent's current share session of each member (a member that
/// reconnects opens a new one; the old connection's session must not give
/// back what the new one holds). One entry per open session.
#[derive(Default)]
pub struct Registry {
    current: Mutex<HashMap<Member, u64>>,
    next: AtomicU64,
}

impl Registry {
    /// A new session of `id`, current from now on.
    fn open(&self, id: &Member) -> u64 {
        let token = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.current
            .lock()
            .expect("share session registry")
            .insert(id.clone(), token);
        token
    }

    /// Ends session `token` of `id`; whether it was the current one.
    fn close(&self, id: &Member, token: u64) -> bool {
        let mut current = self.current.lock().expect("share session registry");
        if current.get(id) == Some(&token) {
            current.remove(id);
            true
        } else {
            false
        }
    }
}

/// What giving records back needs: the metadata handle, the group's
/// rules, and the agent's registry.
pub struct Release<'a> {
    pub meta: &'a Meta,
    pub rules: Rules,
    pub registry: &'a Arc<Registry>,
}

/// What a ShareFetch's session step decided.
pub enum Step {
    /// Fetch these partitions.
    Fetch(Vec<Key>),
    /// The session closed (epoch -1): acknowledge, fetch nothing, give
    /// back what the member holds in these partitions.
    Close(Vec<Key>),
}

/// A connection's share sessions, by (group, member).
#[derive(Default)]
pub struct Sessions {
    map: HashMap<(String, String), Session>,
    /// What giving records back needs, once a session was opened.
    release: Option<(Meta, Rules, Arc<Registry>)>,
}

fn next_epoch(e: i32) -> i32 {
    if e == i32::MAX {
        1
    } else {
        e + 1
    }
}

impl Sessions {
    /// ShareFetch: opens (0), closes (-1) or moves on a session, with the
    /// partitions `added` and `forgotten`.
    pub fn fetch_step(
        &mut self,
        id: (String, String),
        epoch: i32,
        added: &[Key],
        forgotten: &[Key],
        has_acks: bool,
        release: Release<'_>,
    ) -> Result<Step, (ErrorCode, String)> {
        match epoch {
            0 => {
                if has_acks {
                    return Err((
                        ErrorCode::InvalidRequest,
                        "acknowledgements cannot open a share session (epoch 0)".into(),
                    ));
                }
                if !self.map.contains_key(&id)
                    && self.map.len() >= SHARE_SESSIONS_PER_CONNECTION_MAX
                {
                    return Err((
                        ErrorCode::ShareSessionLimitReached,
                        format!("a connection holds at most {SHARE_SESSIONS_PER_CONNECTION_MAX} share sessions"),
                    ));
                }
                let partitions: BTreeSet<Key> = added.iter().copied().collect();
                if partitions.len() > SHARE_SESSION_PARTITIONS_MAX {
                    return Err((
                        ErrorCode::InvalidRequest,
                        format!("a share session holds at most {SHARE_SESSION_PARTITIONS_MAX} partitions"),
                    ));
                }
                let keys = partitions.iter().copied().collect();
                let token = release.registry.open(&id);
                if let Some(old) = self.map.insert(
                    id.clone(),
                    Session {
                        epoch: 1,
                        partitions,
                        token,
                    },
                ) {
                    // Replaced on this connection: its records wait for
                    // their locks (Kafka's way).
                    release.registry.close(&id, old.token);
                }
                self.release = Some((
                    release.meta.clone(),
                    release.rules,
                    release.registry.clone(),
                ));
                Ok(Step::Fetch(keys))
            }
            -1 => match self.map.remove(&id) {
                None => Err(not_found()),
                Some(s) => Ok(Step::Close(self.closed(&id, s))),
            },
            _ => {
                let s = self.map.get_mut(&id).ok_or_else(not_found)?;
                if s.epoch != epoch {
                    return Err(bad_epoch(epoch, s.epoch));
                }
                for k in forgotten {
                    s.partitions.remove(k);
                }
                s.partitions.extend(added.iter().copied());
                if s.partitions.len() > SHARE_SESSION_PARTITIONS_MAX {
                    return Err((
                        ErrorCode::InvalidRequest,
                        format!("a share session holds at most {SHARE_SESSION_PARTITIONS_MAX} partitions"),
                    ));
                }
                s.epoch = next_epoch(epoch);
                Ok(Step::Fetch(s.partitions.iter().copied().collect()))
            }
        }
    }

    /// ShareAcknowledge: moves on (or closes, -1) a session; the partitions
    /// to give back when it closed.
    pub fn ack_step(
        &mut self,
        id: (String, String),
        epoch: i32,
    ) -> Result<Option<Vec<Key>>, (ErrorCode, String)> {
        match epoch {
            0 => Err((
                ErrorCode::InvalidShareSessionEpoch,
                "ShareAcknowledge cannot open a share session (epoch 0)".into(),
            )),
            -1 => match self.map.remove(&id) {
                None => Err(not_found()),
                Some(s) => Ok(Some(self.closed(&id, s))),
            },
            _ => {
                let s = self.map.get_mut(&id).ok_or_else(not_found)?;
                if s.epoch != epoch {
                    return Err(bad_epoch(epoch, s.epoch));
                }
                s.epoch = next_epoch(epoch);
                Ok(None)
            }
        }
    }
}

impl Sessions {
    /// The partitions whose records a closed session gives back: none
    /// when the member has a newer session on the agent.
    fn closed(&self, id: &Member, s: Session) -> Vec<Key> {
        let current = self
            .release
            .as_ref()
            .is_none_or(|(_, _, registry)| registry.close(id, s.token));
        if current {
            s.partitions.into_iter().collect()
        } else {
            Vec::new()
        }
    }
}

fn not_found() -> (ErrorCode, String) {
    (
        ErrorCode::ShareSessionNotFound,
        "no share session of this member on this connection".into(),
    )
}

fn bad_epoch(asked: i32, expected: i32) -> (ErrorCode, String) {
    (
        ErrorCode::InvalidShareSessionEpoch,
        format!("share session epoch {asked}, expected {expected}"),
    )
}

impl Drop for Sessions {
    /// The connection went: its members' records are given back.
    fn drop(&mut self) {
        let Some((meta, rules, registry)) = self.release.take() else {
            return;
        };
        for ((group, member), s) in self.map.drain() {
            let current = registry.close(&(group.clone(), member.clone()), s.token);
            if s.partitions.is_empty() || !current {
                continue;
            }
            let meta = meta.clone();
            let keys: Vec<Key> = s.partitions.into_iter().collect();
            rutomq_shards::spawn(async move {
                release(&meta, &group, &member, &keys, &rules).await;
            });
        }
    }
}

/// Gives back the records `member` holds in `keys` (its session closed).
pub async fn release(meta: &Meta, group: &str, member: &str, keys: &[Key], rules: &Rules) {
    let mut given = 0usize;
    for &key in keys {
        match change(meta, group, key, None, |p, _| {
            let n = p.release_member(member, rules);
            (n, n > 0)
        })
        .await
        {
            Ok(Changed::Done(n)) => given += n,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(group, member, error = ?e, "cannot give back a closed share session's records; their locks will run out");
            }
        }
    }
    if given > 0 {
        tracing::debug!(
            group,
            member,
            records = given,
            "share session closed; its records are available again"
        );
    }
}
