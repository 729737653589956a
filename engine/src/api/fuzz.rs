//! Hostile input: every frame a fuzzer or a test makes goes through what a
//! shard does with untrusted bytes before touching state.

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;

use super::{decode_body, parse_request, Parsed};

/// Feeds one arbitrary frame through everything a shard does with untrusted
/// bytes before touching state: header and body decode, then produce batch
/// validation. For fuzzers; it must never panic or abort.
pub fn fuzz_frame(data: &[u8]) {
    let Ok(Parsed::Request(req, body)) = parse_request(Bytes::copy_from_slice(data)) else {
        return;
    };
    if req.key != ApiKey::Produce || req.version < super::produce::API.spec.min {
        let _ = decode_body(&req, body);
        return;
    }
    if let Ok(p) = super::produce::API.decode(&mut body.clone(), req.version) {
        for t in p.topic_data {
            for d in t.partition_data {
                if let Some(r) = d.records {
                    let _ = crate::records::validate_produce_records(
                        &r,
                        1 << 20,
                        crate::records::RecordRules::default(),
                    );
                    let _ = crate::records::validate_produce_records(
                        &r,
                        1 << 20,
                        crate::records::RecordRules {
                            keys_required: true,
                            timestamps: Some((0, i64::MAX)),
                        },
                    );
                }
            }
        }
    }
}

/// Hostile-input tests: every served API and version, then mutated,
/// truncated and random frames. None may panic a decoder; each either
/// parses or closes the connection.
#[cfg(test)]
mod hostile_input {
    use super::*;
    use crate::api::codec::DECODER_PANICS;
    use crate::api::{encode_default_request, encode_request, str_bytes, APIS};
    use std::sync::atomic::Ordering;

    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    fn seeds() -> Vec<Bytes> {
        let mut out = Vec::new();
        for a in APIS {
            for v in a.min..=a.max {
                let frame = encode_default_request(a.key, v).expect("default request encodes");
                let Ok(Parsed::Request(req, body)) = parse_request(frame.clone()) else {
                    panic!("{:?} v{v} default request header parses", a.key);
                };
                assert!(
                    decode_body(&req, body).is_ok(),
                    "{:?} v{v} default request body decodes",
                    a.key
                );
                out.push(frame);
            }
        }
        // Produce v0–2, listed and answered by `retired`: one topic, one
        // partition with three bytes of records.
        for a in APIS {
            for v in a.advertised_min..a.min {
                let mut f = Vec::new();
                f.extend_from_slice(&a.key.0.to_be_bytes());
                f.extend_from_slice(&v.to_be_bytes());
                f.extend_from_slice(&7i32.to_be_bytes());
                f.extend_from_slice(&(-1i16).to_be_bytes());
                f.extend_from_slice(&[0xff, 0xff, 0, 0, 3, 0xe8, 0, 0, 0, 1, 0, 1, b't']);
                f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3]);
                let frame = Bytes::from(f);
                let Ok(Parsed::Request(req, body)) = parse_request(frame.clone()) else {
                    panic!("{:?} v{v} header parses", a.key);
                };
                assert!(
                    decode_body(&req, body).is_ok(),
                    "{:?} v{v} body parses",
                    a.key
                );
                out.push(frame);
            }
        }
        // A produce request with a real batch, for the records path too.
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        let batch = Bytes::from(crate::records::tests::batch(3, 3));
        for v in [3i16, 9, 13] {
            let req = kafka_protocol::messages::ProduceRequest::default()
                .with_acks(-1)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(kafka_protocol::messages::TopicName(str_bytes("t")))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch.clone()))])]);
            out.push(encode_request(v, &req).expect("produce encodes"));
        }
        out
    }

    fn exercise(frame: Bytes) {
        fuzz_frame(&frame);
    }

    #[test]
    fn mutated_truncated_and_random_frames_never_panic() {
        let before = DECODER_PANICS.load(Ordering::Relaxed);
        let seeds = seeds();
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        for round in 0..60_000u32 {
            let seed = &seeds[(rng.next() as usize) % seeds.len()];
            let mut f = seed.to_vec();
            match round % 4 {
                0 => {
                    for _ in 0..1 + rng.next() % 4 {
                        let i = (rng.next() as usize) % f.len();
                        f[i] = rng.next() as u8;
                    }
                }
                1 => f.truncate((rng.next() as usize) % (f.len() + 1)),
                2 => {
                    // Lengths and counts set to extremes.
                    let i = (rng.next() as usize) % f.len();
                    for (k, b) in [0xffu8, 0xff, 0xff, 0xf0].iter().enumerate() {
                        if i + k < f.len() {
                            f[i + k] = *b;
                        }
                    }
                }
                _ => {
                    let n = (rng.next() % 64) as usize;
                    f = (0..n).map(|_| rng.next() as u8).collect();
                    if n >= 4 && rng.next().is_multiple_of(2) {
                        // Keep a valid api key and version to get past the header.
                        let a = &APIS[(rng.next() as usize) % APIS.len()];
                        f[..2].copy_from_slice(&a.key.0.to_be_bytes());
                        f[2..4].copy_from_slice(&a.max.to_be_bytes());
                    }
                }
            }
            exercise(Bytes::from(f));
        }
        assert_eq!(
            DECODER_PANICS.load(Ordering::Relaxed),
            before,
            "a decoder panicked (see stderr)"
        );
    }
}
