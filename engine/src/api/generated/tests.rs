//! The generated codecs against Apache Kafka's own: each vector
//! (`vectors.txt`, written by scripts/gen-kafka-messages/run.sh: a sample
//! message encoded by Kafka's generated classes) decodes whole, encodes
//! back to the same bytes with the size computed beforehand, and every
//! shorter prefix is refused without a panic.

use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

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

#[test]
fn kafkas_encodings_round_trip() {
    let mut seen = 0;
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
            other => panic!("no codec for {other}"),
        }
        seen += 1;
    }
    assert_eq!(seen, 4);
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
