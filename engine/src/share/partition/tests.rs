use super::*;

fn data(first: i64, last: i64) -> Span {
    Span {
        first,
        last,
        data: true,
    }
}

fn rules() -> Rules {
    Rules {
        delivery_limit: 3,
        lock_ms: 1000,
        max_locks: 100,
    }
}

#[test]
fn two_members_get_distinct_records_of_one_partition() {
    let r = rules();
    let mut p = SharePartition::new(0);
    let a = p.acquire("a", 0, &[data(0, 4), data(5, 9)], 5, 0, &r);
    assert_eq!(a, vec![(0, 4, 1)]);
    assert_eq!(p.next_fetch(&r), Some(5));
    let b = p.acquire("b", 0, &[data(0, 4), data(5, 9)], 5, 0, &r);
    assert_eq!(b, vec![(5, 9, 1)]);
    assert_eq!(p.acquired(), 10);
    // Each acknowledges only its own.
    let err = p.acknowledge("b", &[(0, 4, vec![1])], &r).unwrap_err();
    assert_eq!(err.0, ErrorCode::InvalidRecordState);
    assert_eq!(
        p.acknowledge("a", &[(0, 10, vec![1])], &r).unwrap_err().0,
        ErrorCode::InvalidRequest
    );
    p.acknowledge("a", &[(0, 4, vec![1])], &r).unwrap();
    assert_eq!(p.start(), 5);
    // Done already: skipped.
    p.acknowledge("a", &[(0, 4, vec![1])], &r).unwrap();
    p.acknowledge("b", &[(5, 9, vec![1])], &r).unwrap();
    assert_eq!((p.start(), p.end()), (10, 10));
}

#[test]
fn an_expired_lock_makes_records_available_again_with_their_count() {
    let r = rules();
    let mut p = SharePartition::new(0);
    assert_eq!(p.acquire("a", 0, &[data(0, 2)], 10, 0, &r), vec![(0, 2, 1)]);
    assert_eq!(p.expire(999, &r), 0);
    assert_eq!(p.expire(1000, &r), 3);
    // Too late to acknowledge.
    assert!(p.acknowledge("a", &[(0, 2, vec![1])], &r).is_err());
    assert_eq!(p.next_fetch(&r), Some(0));
    assert_eq!(
        p.acquire("b", 0, &[data(0, 2)], 10, 1000, &r),
        vec![(0, 2, 2)]
    );
}

#[test]
fn records_delivered_the_limit_are_archived() {
    let r = rules();
    let mut p = SharePartition::new(0);
    for n in 1..=3 {
        assert_eq!(p.acquire("a", 0, &[data(0, 0)], 10, 0, &r), vec![(0, 0, n)]);
        p.acknowledge("a", &[(0, 0, vec![2])], &r).unwrap();
    }
    // Released the third time: archived, the start moves past it.
    assert_eq!((p.start(), p.end()), (1, 1));
}

#[test]
fn per_offset_types_and_gaps() {
    let r = rules();
    let mut p = SharePartition::new(10);
    p.acquire("a", 10, &[data(10, 13)], 10, 0, &r);
    p.acknowledge("a", &[(10, 13, vec![1, 2, 3, 0])], &r)
        .unwrap();
    // 10 accepted: start moves to 11, which is available again.
    assert_eq!(p.start(), 11);
    assert_eq!(p.next_fetch(&r), Some(11));
    assert_eq!(
        p.acquire("a", 10, &[data(10, 13)], 10, 0, &r),
        vec![(11, 11, 2)]
    );
    p.acknowledge("a", &[(11, 11, vec![1])], &r).unwrap();
    assert_eq!((p.start(), p.end()), (14, 14));
}

#[test]
fn bad_acknowledgements_change_nothing() {
    let r = rules();
    let mut p = SharePartition::new(0);
    p.acquire("a", 0, &[data(0, 3)], 10, 0, &r);
    let before = p.clone();
    for bad in [
        vec![(0, 1, vec![1]), (2, 3, vec![9])],
        vec![(2, 3, vec![1]), (0, 1, vec![1])],
        vec![(0, 1, vec![1, 1, 1])],
        vec![(3, 2, vec![1])],
        vec![(0, 4, vec![1])],
        vec![(0, 1, vec![])],
        vec![(0, 0, vec![4])],
        vec![(i64::MIN, i64::MAX, vec![1, 1])],
        vec![(i64::MIN, i64::MAX, vec![1])],
    ] {
        assert!(p.acknowledge("a", &bad, &r).is_err(), "{bad:?}");
        assert_eq!(p, before);
    }
}

#[test]
fn control_batches_and_holes_are_archived_not_delivered() {
    let r = rules();
    let mut p = SharePartition::new(0);
    let spans = [
        data(0, 1),
        Span {
            first: 2,
            last: 2,
            data: false,
        },
        data(5, 6),
    ];
    assert_eq!(
        p.acquire("a", 0, &spans, 10, 0, &r),
        vec![(0, 1, 1), (5, 6, 1)]
    );
    p.acknowledge("a", &[(0, 1, vec![1])], &r).unwrap();
    // 2 (control), 3 and 4 (holes) are done: the start is at 5.
    assert_eq!(p.start(), 5);
}

#[test]
fn the_window_is_bounded_and_a_batch_is_not_split() {
    let r = Rules {
        max_locks: 4,
        ..rules()
    };
    let mut p = SharePartition::new(0);
    assert_eq!(
        p.acquire("a", 0, &[data(0, 2), data(3, 9)], 2, 0, &r),
        vec![(0, 2, 1)]
    );
    assert_eq!(
        p.acquire("a", 3, &[data(3, 9)], 100, 0, &r),
        vec![(3, 3, 1)]
    );
    assert_eq!(p.next_fetch(&r), None);
    p.acknowledge("a", &[(0, 1, vec![1])], &r).unwrap();
    assert_eq!(p.next_fetch(&r), Some(4));
}

#[test]
fn a_member_leaving_gives_its_records_back() {
    let r = rules();
    let mut p = SharePartition::new(0);
    p.acquire("a", 0, &[data(0, 1)], 10, 0, &r);
    p.acquire("b", 2, &[data(2, 3)], 10, 0, &r);
    assert_eq!(p.release_member("a", &r), 2);
    assert_eq!(p.next_fetch(&r), Some(0));
    assert_eq!(p.acquired(), 2);
}

#[test]
fn reset_moves_the_start() {
    let r = rules();
    let mut p = SharePartition::new(0);
    p.acquire("a", 0, &[data(0, 5)], 10, 0, &r);
    p.reset(3);
    assert_eq!((p.start(), p.end()), (3, 6));
    p.reset(100);
    assert_eq!((p.start(), p.end()), (100, 100));
}

#[test]
fn the_stored_form_round_trips_and_refuses_garbage() {
    let r = rules();
    let mut p = SharePartition::new(7);
    p.acquire("member-a", 7, &[data(7, 20)], 5, 42, &r);
    p.acquire("member-b", 7, &[data(7, 20)], 5, 43, &r);
    p.acknowledge("member-a", &[(7, 8, vec![1, 3])], &r)
        .unwrap();
    let bytes = p.encode();
    assert_eq!(SharePartition::decode(&bytes), Some(p.clone()));
    for cut in 0..bytes.len() {
        assert_eq!(SharePartition::decode(&bytes[..cut]), None, "cut at {cut}");
    }
    let mut extra = bytes.to_vec();
    extra.push(0);
    assert_eq!(SharePartition::decode(&extra), None);
    // A run longer than any window is refused, not allocated.
    let mut huge = BytesMut::new();
    huge.put_u8(1);
    huge.put_i64(0);
    huge.put_u16(0);
    huge.put_u32(1);
    huge.put_u32(u32::MAX);
    huge.put_u8(0);
    huge.put_u16(0);
    huge.put_u16(0);
    huge.put_i64(0);
    assert_eq!(SharePartition::decode(&huge), None);
}

#[test]
fn kafkas_persisted_form_round_trips() {
    let r = rules();
    let mut p = SharePartition::new(5);
    p.acquire("a", 5, &[data(5, 12)], 100, 0, &r);
    p.acknowledge("a", &[(5, 12, vec![2, 1, 1, 3, 2, 2, 1, 1])], &r)
        .unwrap();
    let batches = p.state_batches();
    assert_eq!(batches[0], (5, 5, 0, 1));
    let back = SharePartition::from_state_batches(p.start(), &batches).unwrap();
    assert_eq!(back.state_batches(), batches);
    assert!(SharePartition::from_state_batches(0, &[(3, 2, 0, 0)]).is_err());
    assert!(SharePartition::from_state_batches(0, &[(0, 2, 9, 0)]).is_err());
    assert!(SharePartition::from_state_batches(0, &[(0, 1 << 40, 0, 0)]).is_err());
    // Between batches: available.
    let gap = SharePartition::from_state_batches(0, &[(2, 3, 2, 1)]).unwrap();
    assert_eq!(gap.next_fetch(&r), Some(0));
}

#[test]
fn members_holding_nothing_are_forgotten() {
    let r = rules();
    let mut p = SharePartition::new(0);
    p.acquire("a", 0, &[data(0, 0)], 1, 0, &r);
    // Others asking for what is taken leave no trace.
    for m in 0..100 {
        assert!(p
            .acquire(&format!("m{m}"), 0, &[data(0, 0)], 1, 0, &r)
            .is_empty());
    }
    assert_eq!(p.owners, vec!["a".to_owned()]);
    p.acquire("b", 1, &[data(1, 1)], 1, 0, &r);
    p.acknowledge("a", &[(0, 0, vec![1])], &r).unwrap();
    assert_eq!(p.owners, vec!["b".to_owned()]);
}

#[test]
fn a_read_past_the_end_takes_nothing_new() {
    let r = rules();
    let mut p = SharePartition::new(0);
    // The read was planned from 10 (before a reset moved the start back to 0).
    assert_eq!(p.acquire("a", 10, &[data(10, 12)], 10, 0, &r), vec![]);
    assert_eq!((p.start(), p.end()), (0, 0));
}

/// A batch header (the rest is not read): attributes, last offset delta,
/// producer id.
fn head(attributes: i16, delta: i32, producer: i64) -> Bytes {
    let mut b = vec![0u8; crate::records::BATCH_HEADER_BYTES];
    b[21..23].copy_from_slice(&attributes.to_be_bytes());
    b[23..27].copy_from_slice(&delta.to_be_bytes());
    b[43..51].copy_from_slice(&producer.to_be_bytes());
    Bytes::from(b)
}

#[test]
fn aborted_transactions_and_markers_are_not_deliverable() {
    const TXN: i16 = 0x10;
    const CONTROL: i16 = 0x20;
    let batches = vec![
        (0, head(0, 1, -1)),            // plain: 0..1
        (2, head(TXN, 0, 7)),           // aborted below
        (3, head(TXN, 0, 8)),           // committed
        (4, head(TXN | CONTROL, 0, 7)), // ABORT marker of 7
        (5, head(TXN | CONTROL, 0, 8)), // COMMIT marker of 8
        (6, head(TXN, 0, 7)),           // 7's next transaction: not aborted
    ];
    let spans = spans_of(&batches, Some(&[(7, 2)]));
    let data: Vec<(i64, bool)> = spans.iter().map(|s| (s.first, s.data)).collect();
    assert_eq!(
        data,
        vec![
            (0, true),
            (2, false),
            (3, true),
            (4, false),
            (5, false),
            (6, true)
        ]
    );
    // read_uncommitted: only markers are skipped.
    let all = spans_of(&batches, None);
    assert_eq!(all.iter().filter(|s| s.data).count(), 4);
    assert_eq!(spans[0].last, 1);
}
