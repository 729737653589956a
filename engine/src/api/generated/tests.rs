//! The generated codecs against Apache Kafka's own: each vector
//! (`vectors.txt`, written by scripts/gen-kafka-messages/run.sh: a sample
//! message encoded by Kafka's generated classes) decodes whole, encodes
//! back to the same bytes with the size computed beforehand, and every
//! shorter prefix is refused without a panic.

use std::collections::BTreeSet;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{GroupId, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, Message, StrBytes};

use super::*;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn round_trip<T: Encodable + Decodable>(name: &str, version: i16, bytes: &[u8]) -> T {
    let mut buf = Bytes::copy_from_slice(bytes);
    let m = T::decode(&mut buf, version).unwrap_or_else(|e| panic!("{name} v{version}: {e}"));
    assert!(
        buf.is_empty(),
        "{name} v{version}: {} bytes left",
        buf.len()
    );
    let mut out = BytesMut::new();
    m.encode(&mut out, version).unwrap();
    assert_eq!(
        out.to_vec(),
        bytes,
        "{name} v{version} encodes as Kafka does"
    );
    assert_eq!(
        m.compute_size(version).unwrap(),
        bytes.len(),
        "{name} v{version} size"
    );
    for cut in 0..bytes.len() {
        let mut b = Bytes::copy_from_slice(&bytes[..cut]);
        assert!(
            T::decode(&mut b, version).is_err(),
            "{name} v{version} cut at {cut}"
        );
    }
    m
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn versions<T: Message>() -> std::ops::RangeInclusive<i16> {
    T::VERSIONS.min..=T::VERSIONS.max
}

#[test]
fn kafkas_encodings_round_trip() {
    let mut seen = BTreeSet::new();
    let topic_id = uuid::Uuid::from_u128(1);
    for line in include_str!("vectors.txt").lines() {
        let mut parts = line.split(' ');
        let (name, version, hex) = (
            parts.next().unwrap(),
            parts.next().unwrap().parse::<i16>().unwrap(),
            parts.next().unwrap_or(""),
        );
        let bytes = unhex(hex);
        match name {
            "StreamsGroupHeartbeatRequest" => {
                let m: StreamsGroupHeartbeatRequest = round_trip(name, version, &bytes);
                assert_eq!(m.group_id, s("app"));
                assert_eq!(m.rack_id, None);
                let topology = m.topology.expect("a topology");
                let changelog = &topology.subtopologies[0].state_changelog_topics[0];
                assert_eq!(changelog.topic_configs[0].value, s("compact"));
                assert_eq!(m.user_endpoint.expect("an endpoint").port, 65535);
                assert_eq!(m.warmup_tasks, None);
                assert!(m.shutdown_application);
            }
            "StreamsGroupHeartbeatResponse" => {
                let m: StreamsGroupHeartbeatResponse = round_trip(name, version, &bytes);
                assert_eq!(m.status.expect("statuses")[0].status_detail, s("missing"));
                assert_eq!(m.standby_tasks, None);
            }
            "StreamsGroupDescribeRequest" => {
                let m: StreamsGroupDescribeRequest = round_trip(name, version, &bytes);
                assert_eq!(m.group_ids, vec![s("app"), s("other")]);
            }
            "StreamsGroupDescribeResponse" => {
                let m: StreamsGroupDescribeResponse = round_trip(name, version, &bytes);
                assert_eq!(m.groups[1].error_code, 69);
                assert_eq!(m.groups[0].members[0].task_end_offsets[0].offset, -1);
            }
            "ListOffsetsRequest" => {
                let m: ListOffsetsRequest = round_trip(name, version, &bytes);
                let p = &m.topics[0].partitions[0];
                assert_eq!(m.topics[0].name, TopicName(s("t")));
                assert!(p.timestamp == -2 || (p.timestamp == -6 && m.isolation_level == 1));
                if version >= 10 && p.timestamp == -6 {
                    assert_eq!(m.timeout_ms, 30000);
                }
            }
            "ListOffsetsResponse" => {
                let m: ListOffsetsResponse = round_trip(name, version, &bytes);
                assert_eq!(m.topics[0].partitions[0].offset, 42);
            }
            "OffsetCommitRequest" => {
                let m: OffsetCommitRequest = round_trip(name, version, &bytes);
                assert_eq!(m.group_id, GroupId(s("g")));
                let t = &m.topics[0];
                if version >= 10 {
                    assert_eq!((t.topic_id, t.name.0.as_str()), (topic_id, ""));
                } else {
                    assert_eq!((t.topic_id, t.name.0.as_str()), (uuid::Uuid::nil(), "t"));
                }
                assert_eq!(t.partitions[0].committed_metadata, Some(s("meta")));
            }
            "OffsetCommitResponse" => {
                let m: OffsetCommitResponse = round_trip(name, version, &bytes);
                assert_eq!(m.topics[0].partitions[0].partition_index, 1);
            }
            "OffsetFetchRequest" => {
                let m: OffsetFetchRequest = round_trip(name, version, &bytes);
                if version >= 8 {
                    let topics = m.groups[0].topics.as_ref().expect("topics");
                    assert_eq!(
                        topics[0].topic_id,
                        if version >= 10 {
                            topic_id
                        } else {
                            uuid::Uuid::nil()
                        }
                    );
                } else {
                    assert_eq!(m.group_id, GroupId(s("g")));
                }
            }
            "OffsetFetchResponse" => {
                let m: OffsetFetchResponse = round_trip(name, version, &bytes);
                if version >= 8 {
                    assert_eq!(m.groups[0].topics[0].partitions[0].committed_offset, 42);
                } else {
                    assert_eq!(m.topics[0].partitions[0].committed_offset, 42);
                }
            }
            "DescribeLogDirsRequest" => {
                let m: DescribeLogDirsRequest = round_trip(name, version, &bytes);
                assert_eq!(m.topics.expect("topics")[0].partitions, vec![0, 1]);
            }
            "DescribeLogDirsResponse" => {
                let m: DescribeLogDirsResponse = round_trip(name, version, &bytes);
                assert_eq!(m.results[0].topics[0].partitions[0].partition_size, 100);
            }
            other => panic!("no codec for {other}"),
        }
        seen.insert((name.to_owned(), version));
    }
    // Every version of every generated message has a vector.
    let mut want = BTreeSet::new();
    let mut every = |name: &str, range: std::ops::RangeInclusive<i16>| {
        for v in range {
            want.insert((name.to_owned(), v));
        }
    };
    every(
        "StreamsGroupHeartbeatRequest",
        versions::<StreamsGroupHeartbeatRequest>(),
    );
    every(
        "StreamsGroupHeartbeatResponse",
        versions::<StreamsGroupHeartbeatResponse>(),
    );
    every(
        "StreamsGroupDescribeRequest",
        versions::<StreamsGroupDescribeRequest>(),
    );
    every(
        "StreamsGroupDescribeResponse",
        versions::<StreamsGroupDescribeResponse>(),
    );
    every("ListOffsetsRequest", versions::<ListOffsetsRequest>());
    every("ListOffsetsResponse", versions::<ListOffsetsResponse>());
    every("OffsetCommitRequest", versions::<OffsetCommitRequest>());
    every("OffsetCommitResponse", versions::<OffsetCommitResponse>());
    every("OffsetFetchRequest", versions::<OffsetFetchRequest>());
    every("OffsetFetchResponse", versions::<OffsetFetchResponse>());
    every(
        "DescribeLogDirsRequest",
        versions::<DescribeLogDirsRequest>(),
    );
    every(
        "DescribeLogDirsResponse",
        versions::<DescribeLogDirsResponse>(),
    );
    assert_eq!(seen, want);
}

#[test]
fn hostile_lengths_are_refused_without_allocating() {
    // An array claiming 2^32 - 2 elements in a few bytes, a string
    // longer than what follows, a varint of six bytes.
    for hostile in [
        &[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00][..],
        &[0x02, 0x7f, b'a', 0x00][..],
        &[0x80, 0x80, 0x80, 0x80, 0x80, 0x01][..],
    ] {
        let mut b = Bytes::copy_from_slice(hostile);
        assert!(
            StreamsGroupDescribeRequest::decode(&mut b, 0).is_err(),
            "{hostile:?}"
        );
    }
}
