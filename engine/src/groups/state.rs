//! A loaded group, of either kind.

use std::time::Instant;

use super::classic::ClassicGroup;
use super::consumer::ConsumerGroup;
use crate::coordinator::KeyState;

/// The state of one loaded group.
pub(super) struct Group {
    pub group: ClassicGroup,
    /// Set when the group is a KIP-848 consumer group (`group` is then an
    /// unused empty classic group).
    pub consumer: Option<ConsumerGroup>,
}

impl KeyState for Group {
    fn is_idle(&self) -> bool {
        self.empty()
    }

    fn next_wake(&self) -> Option<Instant> {
        match &self.consumer {
            Some(c) => c.next_wake(),
            None => self.group.next_wake(),
        }
    }
}

impl Group {
    /// No member (of either kind) and nobody waiting.
    pub fn empty(&self) -> bool {
        match &self.consumer {
            Some(c) => c.is_empty(),
            None => self.group.idle(),
        }
    }

    pub fn state_name(&self) -> &'static str {
        match &self.consumer {
            Some(c) => c.state(),
            None => self.group.state.name(),
        }
    }

    pub fn protocol_type(&self) -> String {
        match &self.consumer {
            Some(_) => "consumer".into(),
            None => self.group.protocol_type.clone().unwrap_or_default(),
        }
    }

    pub fn kind(&self) -> &'static str {
        if self.consumer.is_some() {
            "consumer"
        } else {
            "classic"
        }
    }
}
