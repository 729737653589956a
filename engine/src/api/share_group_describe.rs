//! ShareGroupDescribe (key 77, KIP-932): share groups with their members,
//! subscriptions and assignments (DESCRIBE on the group; a group assigning
//! a topic the caller may not describe is TOPIC_AUTHORIZATION_FAILED, as
//! in Kafka).

use kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ApiKey, ShareGroupDescribeRequest, ShareGroupDescribeResponse, TopicName,
};

use super::access::visible;
use super::group_support::named_partitions;
use super::{group_coordinator, group_operations, str_bytes, Api, Req};
use crate::error::ErrorCode;
use crate::groups::consumer::Partitions;
use crate::groups::share::ASSIGNOR;
use crate::security::acl::{op, resource};
use crate::shard::Shard;

/// Kafka's message for a group answered without its members.
const UNDESCRIBABLE_TOPICS: &str =
    "The group has described topic(s) that the client is not authorized to describe.";

/// ShareGroupDescribe, version 1.
pub const API: Api<ShareGroupDescribeRequest> = Api::new(ApiKey::ShareGroupDescribe, 1, 1);

pub async fn handle(
    shard: &Shard,
    req: &Req,
    body: ShareGroupDescribeRequest,
) -> ShareGroupDescribeResponse {
    let mut out = Vec::with_capacity(body.group_ids.len());
    for group_id in body.group_ids {
        let d = match group_coordinator(shard, req, op::DESCRIBE, &group_id) {
            Err(e) => {
                out.push(
                    DescribedGroup::default()
                        .with_group_id(group_id)
                        .with_error_code(e.code()),
                );
                continue;
            }
            Ok(groups) => groups.share_describe(group_id.to_string()).await,
        };
        let ops = group_operations(
            shard,
            req,
            body.include_authorized_operations,
            &group_id,
            d.error,
        );
        let mut members = Vec::with_capacity(d.members.len());
        for m in &d.members {
            members.push(
                Member::default()
                    .with_member_id(str_bytes(&m.member_id))
                    .with_rack_id(m.rack_id.as_deref().map(str_bytes))
                    .with_member_epoch(m.epoch)
                    .with_client_id(str_bytes(&m.client_id))
                    .with_client_host(str_bytes(&m.client_host))
                    .with_subscribed_topic_names(
                        m.subscribed
                            .iter()
                            .map(|t| TopicName(str_bytes(t)))
                            .collect(),
                    )
                    .with_assignment(assignment(shard, &m.assigned).await),
            );
        }
        let hidden = members.iter().any(|m| {
            m.assignment
                .topic_partitions
                .iter()
                .any(|t| !visible(shard, req, op::DESCRIBE, resource::TOPIC, &t.topic_name.0))
        });
        if hidden {
            out.push(
                DescribedGroup::default()
                    .with_group_id(group_id)
                    .with_error_code(ErrorCode::TopicAuthorizationFailed.code())
                    .with_error_message(Some(str_bytes(UNDESCRIBABLE_TOPICS))),
            );
            continue;
        }
        out.push(
            DescribedGroup::default()
                .with_group_id(group_id)
                .with_authorized_operations(ops)
                .with_error_code(d.error.code())
                .with_error_message(d.error_message.as_deref().map(str_bytes))
                .with_group_state(str_bytes(d.state))
                .with_group_epoch(d.group_epoch)
                .with_assignment_epoch(d.assignment_epoch)
                .with_assignor_name(str_bytes(ASSIGNOR))
                .with_members(members),
        );
    }
    ShareGroupDescribeResponse::default().with_groups(out)
}

/// Partitions with their topic names.
async fn assignment(shard: &Shard, p: &Partitions) -> Assignment {
    Assignment::default().with_topic_partitions(
        named_partitions(shard, p)
            .await
            .into_iter()
            .map(|(id, name, ps)| {
                TopicPartitions::default()
                    .with_topic_id(id)
                    .with_topic_name(TopicName(str_bytes(&name)))
                    .with_partitions(ps)
            })
            .collect(),
    )
}
