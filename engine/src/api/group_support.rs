//! What the group handlers share: finding the coordinator of a group id,
//! and the operations a group allows.

use crate::error::ErrorCode;
use crate::groups::Groups;
use crate::shard::Shard;

/// A group's `authorized_operations` in DescribeGroups and
/// ConsumerGroupDescribe: READ 3, DELETE 6, DESCRIBE 8 as bits when asked
/// for, Kafka's "not asked" value otherwise.
pub fn group_operations(asked: bool) -> i32 {
    if asked {
        (1 << 3) | (1 << 6) | (1 << 8)
    } else {
        i32::MIN
    }
}

/// The group coordinator, if this agent coordinates `group_id`:
/// INVALID_GROUP_ID for an empty id, NOT_COORDINATOR when another agent
/// coordinates it.
pub fn group_coordinator<'a>(shard: &'a Shard, group_id: &str) -> Result<&'a Groups, ErrorCode> {
    // PostgreSQL text cannot hold NUL: such ids are refused, not stored.
    if group_id.is_empty() || group_id.contains('\0') {
        return Err(ErrorCode::InvalidGroupId);
    }
    if !shard.agent.owns_group(group_id) {
        return Err(ErrorCode::NotCoordinator);
    }
    Ok(shard.agent.groups())
}
