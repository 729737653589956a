//! DescribeUserScramCredentials (key 50): the SCRAM mechanisms and
//! iteration counts of users (never a salt or key), what
//! `kafka-configs.sh --describe --entity-type users` shows.

use std::collections::{BTreeMap, HashSet};

use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    ApiKey, DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};

use super::access::cluster_allowed;
use super::{str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::security::acl::op;
use crate::shard::Shard;

/// DescribeUserScramCredentials, version 0.
pub const API: Api<DescribeUserScramCredentialsRequest> =
    Api::new(ApiKey::DescribeUserScramCredentials, 0, 0);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    // Kafka: DESCRIBE on the cluster.
    if !cluster_allowed(shard, req, op::DESCRIBE) {
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(ErrorCode::ClusterAuthorizationFailed.code())
            .with_error_message(Some(str_bytes("Cluster authorization failed.")));
    }
    // Null or empty: every user.
    let asked: Option<Vec<String>> = body
        .users
        .filter(|u| !u.is_empty())
        .map(|u| u.iter().map(|n| n.name.to_string()).collect());
    let found = match shard.agent.meta.scram_describe(asked.clone()).await {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(error = %e, "DescribeUserScramCredentials: cannot read credentials");
            return DescribeUserScramCredentialsResponse::default()
                .with_error_code(ErrorCode::from(&e).code())
                .with_error_message(Some(str_bytes(&e.to_string())));
        }
    };
    let mut by_user: BTreeMap<String, Vec<CredentialInfo>> = BTreeMap::new();
    for (user, mechanism, iterations) in found {
        by_user.entry(user).or_default().push(
            CredentialInfo::default()
                .with_mechanism(mechanism as i8)
                .with_iterations(iterations),
        );
    }
    let result = |user: &str, infos: Vec<CredentialInfo>| {
        DescribeUserScramCredentialsResult::default()
            .with_user(str_bytes(user))
            .with_error_message(None)
            .with_credential_infos(infos)
    };
    let results = match asked {
        None => by_user.into_iter().map(|(u, i)| result(&u, i)).collect(),
        Some(users) => {
            let mut seen = HashSet::new();
            let duplicated: HashSet<&String> = users.iter().filter(|u| !seen.insert(*u)).collect();
            let mut done = HashSet::new();
            users
                .iter()
                .filter(|u| done.insert(u.as_str()))
                .map(|u| {
                    if duplicated.contains(u) {
                        result(u, Vec::new())
                            .with_error_code(ErrorCode::DuplicateResource.code())
                            .with_error_message(Some(str_bytes("Cannot describe SCRAM credentials for the same user twice in a single request")))
                    } else if let Some(infos) = by_user.remove(u) {
                        result(u, infos)
                    } else {
                        result(u, Vec::new())
                            .with_error_code(ErrorCode::ResourceNotFound.code())
                            .with_error_message(Some(str_bytes("Attempt to describe a user credential that does not exist")))
                    }
                })
                .collect()
        }
    };
    DescribeUserScramCredentialsResponse::default()
        .with_error_message(None)
        .with_results(results)
}
