//! AlterUserScramCredentials (key 51): set or remove users' SCRAM
//! credentials. The client sends the salt and the salted password; the
//! agent stores the salt, the stored key and the server key, never the
//! salted password. Each user's changes are checked as Kafka checks them;
//! the users whose changes pass are written in one PostgreSQL transaction
//! and every agent reloads its copy (this one before answering, so a login
//! right after the answer works here).

use std::collections::{BTreeMap, HashSet};

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey,
};
use rutomq_meta::security::{ScramChange, ScramRow};

use super::access::cluster_allowed;
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::op;
use crate::security::scram::{Credential, Mechanism, ITERATIONS_MAX, ITERATIONS_MIN};
use crate::shard::Shard;

/// AlterUserScramCredentials, version 0.
pub const API: Api<AlterUserScramCredentialsRequest> =
    Api::new(ApiKey::AlterUserScramCredentials, 0, 0);

type Refusal = (ErrorCode, String);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    // Per user, in first-seen order: its changes, or why they are refused.
    let mut users: BTreeMap<String, Result<Vec<ScramChange>, Refusal>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut seen: HashSet<(String, i8)> = HashSet::new();
    let mut add = |user: String, mechanism: i8, change: Result<ScramChange, Refusal>| {
        if !users.contains_key(&user) {
            order.push(user.clone());
        }
        let entry = users.entry(user.clone()).or_insert_with(|| Ok(Vec::new()));
        let Ok(list) = entry else { return };
        let change = if !seen.insert((user, mechanism)) {
            Err((
                ErrorCode::DuplicateResource,
                "A user credential cannot be altered twice in the same request".into(),
            ))
        } else {
            change
        };
        match change {
            Ok(c) => list.push(c),
            Err(r) => *entry = Err(r),
        }
    };
    for d in &body.deletions {
        let user = d.name.to_string();
        let change = check_user(&user)
            .and_then(|()| mechanism(d.mechanism))
            .map(|m| ScramChange::Delete {
                user: user.clone(),
                mechanism: m.code() as i16,
            });
        add(user, d.mechanism, change);
    }
    for u in &body.upsertions {
        let user = u.name.to_string();
        let change = check_user(&user)
            .and_then(|()| mechanism(u.mechanism))
            .and_then(|m| {
                if u.iterations < ITERATIONS_MIN {
                    return Err((
                        ErrorCode::UnacceptableCredential,
                        format!("Too few iterations: at least {ITERATIONS_MIN}"),
                    ));
                }
                if u.iterations > ITERATIONS_MAX {
                    return Err((
                        ErrorCode::UnacceptableCredential,
                        format!("Too many iterations: at most {ITERATIONS_MAX}"),
                    ));
                }
                if u.salt.is_empty() || u.salted_password.is_empty() {
                    return Err((
                        ErrorCode::UnacceptableCredential,
                        "Salt and salted password must not be empty".into(),
                    ));
                }
                let c =
                    Credential::from_salted(m, u.salt.to_vec(), &u.salted_password, u.iterations);
                Ok(ScramChange::Upsert(ScramRow {
                    user: user.clone(),
                    mechanism: m.code() as i16,
                    salt: c.salt,
                    stored_key: c.stored_key,
                    server_key: c.server_key,
                    iterations: c.iterations,
                }))
            });
        add(user, u.mechanism, change);
    }
    // Kafka: ALTER on the cluster, checked before anything else is said.
    if !cluster_allowed(shard, req, op::ALTER) {
        return AlterUserScramCredentialsResponse::default().with_results(
            order
                .iter()
                .map(|user| {
                    AlterUserScramCredentialsResult::default()
                        .with_user(str_bytes(user))
                        .with_error_code(ErrorCode::ClusterAuthorizationFailed.code())
                        .with_error_message(Some(str_bytes("Cluster authorization failed.")))
                })
                .collect(),
        );
    }
    // Deleting what is not there is refused for that user, as in Kafka.
    let deleting: Vec<String> = users
        .iter()
        .filter(|(_, c)| {
            c.as_ref()
                .is_ok_and(|l| l.iter().any(|c| matches!(c, ScramChange::Delete { .. })))
        })
        .map(|(u, _)| u.clone())
        .collect();
    let meta = &shard.agent.meta;
    let failed = |e: &rutomq_meta::MetaError| (ErrorCode::from(e), e.to_string());
    let mut shared_error: Option<Refusal> = None;
    if !deleting.is_empty() {
        match meta.scram_describe(Some(deleting)).await {
            Ok(existing) => {
                let have: HashSet<(String, i16)> =
                    existing.into_iter().map(|(u, m, _)| (u, m)).collect();
                for (user, changes) in users.iter_mut() {
                    let missing = changes.as_ref().is_ok_and(|l| {
                        l.iter().any(|c| matches!(c, ScramChange::Delete { mechanism, .. } if !have.contains(&(user.clone(), *mechanism))))
                    });
                    if missing {
                        *changes = Err((
                            ErrorCode::ResourceNotFound,
                            "Attempt to delete a user credential that does not exist".into(),
                        ));
                    }
                }
            }
            Err(e) => shared_error = Some(failed(&e)),
        }
    }
    let writes: Vec<ScramChange> = users
        .values()
        .filter_map(|c| c.as_ref().ok())
        .flatten()
        .cloned()
        .collect();
    if shared_error.is_none() && !writes.is_empty() {
        match meta.scram_alter(writes).await {
            Ok(_) => {
                if let Ok((rows, _)) = meta.scram_load().await {
                    shard.agent.credentials.replace(rows);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "AlterUserScramCredentials: cannot write credentials");
                shared_error = Some(failed(&e));
            }
        }
    }
    let results = order
        .iter()
        .map(|user| {
            let r = AlterUserScramCredentialsResult::default()
                .with_user(str_bytes(user))
                .with_error_message(None);
            match (&users[user], &shared_error) {
                (Err((code, msg)), _) | (Ok(_), Some((code, msg))) => r
                    .with_error_code(code.code())
                    .with_error_message(Some(str_bytes(msg))),
                (Ok(_), None) => r,
            }
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}

fn check_user(user: &str) -> Result<(), Refusal> {
    if user.is_empty() {
        return Err((
            ErrorCode::UnacceptableCredential,
            "Username must not be empty".into(),
        ));
    }
    Ok(())
}

fn mechanism(code: i8) -> Result<Mechanism, Refusal> {
    Mechanism::from_code(code).ok_or((
        ErrorCode::UnsupportedSaslMechanism,
        "Unknown SCRAM mechanism".into(),
    ))
}
