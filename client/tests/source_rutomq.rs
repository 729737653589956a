//! KafkaSource (native over the consumer protocol, KIP-848, and the classic
//! one; rdkafka) against a real rutomq agent over TCP:
//! a group consumes everything produced; two members split the partitions;
//! a member that dies mid-stream leaves commits only below its first
//! unacknowledged record (checked with a raw OffsetFetch), and its
//! successor replays from there, so no record is lost.

mod common;

use common::scenarios::{self, consumer_kinds};

fn start() -> common::Agent {
    common::Agent::start(&[
        "--default-partitions",
        "8",
        "--group-initial-rebalance-delay-ms",
        "200",
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_consumes_everything_and_commits_behind_acks() {
    let agent = start();
    for c in consumer_kinds() {
        scenarios::group_consumes_everything(&agent.bootstrap, c, "src").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_stay_below_unacked_work_and_a_successor_replays_it() {
    let agent = start();
    for c in consumer_kinds() {
        scenarios::commits_behind_acks_and_replay(&agent.bootstrap, c, "work").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_split_the_partitions() {
    let agent = start();
    for c in consumer_kinds() {
        scenarios::two_members_split(&agent.bootstrap, c, "split").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seek_replays_and_pause_holds_a_partition() {
    let agent = start();
    for c in consumer_kinds() {
        scenarios::seek_and_pause(&agent.bootstrap, c, "seek").await;
    }
}
