//! Share groups' records (KIP-932, "Kafka queues"): which records of each
//! partition a share group has handed out, to whom and how often
//! ([`partition`]), stored in PostgreSQL and changed by compare-and-set
//! ([`store`]), and the share sessions consumers fetch in ([`sessions`]).
//! The groups' membership and assignment are the group coordinator's
//! ([`crate::groups::share`]).

pub mod partition;
pub mod sessions;
pub mod store;
