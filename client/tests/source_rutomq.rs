//! KafkaSource (native consumer) against a real rutomq agent over TCP:
//! a group consumes everything produced; two members split the partitions;
//! a member that dies mid-stream leaves commits only below its first
//! unacknowledged record (checked with a raw OffsetFetch), and its
//! successor replays from there, so no record is lost.

mod common;

use common::scenarios;

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
    scenarios::group_consumes_everything(&agent.bootstrap, "src", "g1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_stay_below_unacked_work_and_a_successor_replays_it() {
    let agent = start();
    scenarios::commits_behind_acks_and_replay(&agent.bootstrap, "work", "g2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_split_the_partitions() {
    let agent = start();
    scenarios::two_members_split(&agent.bootstrap, "split", "g3").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seek_replays_and_pause_holds_a_partition() {
    let agent = start();
    scenarios::seek_and_pause(&agent.bootstrap, "seek", "g4").await;
}
