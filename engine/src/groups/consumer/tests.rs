use super::assign::{range_assign, uniform_assign};
use super::*;

fn args(member: &str, epoch: i32, owned: Option<Partitions>) -> HeartbeatArgs {
    HeartbeatArgs {
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: epoch,
        instance_id: None,
        rack_id: None,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: (epoch == 0).then(|| vec!["t".to_owned()]),
        subscribed_topic_regex: None,
        server_assignor: None,
        owned: if epoch == 0 {
            Some(Partitions::new())
        } else {
            owned
        },
        client_id: "c".into(),
        client_host: "/h".into(),
        principal: ("User:alice".into(), "10.0.0.1".into()),
        version: 1,
        session_timeout: None,
        heartbeat_interval: None,
    }
}

/// A member joining with a regex subscription only.
fn regex_join(member: &str, pattern: &str) -> HeartbeatArgs {
    let mut a = args(member, 0, None);
    a.subscribed_topic_names = None;
    a.subscribed_topic_regex = Some(pattern.into());
    a
}

#[test]
fn two_members_never_own_a_partition_at_once() {
    let t = Uuid::new_v4();
    let topics: TopicsView = [("t".to_owned(), (t, 6))].into_iter().collect();
    let mut g = ConsumerGroup::new("g".into(), GroupsConfig::default());
    let now = Instant::now();
    let mut ch = false;
    let a = g.heartbeat(args("a", 0, None), &topics, now, &mut ch);
    assert_eq!(a.error, ErrorCode::None);
    assert_eq!(count(a.assignment.as_ref().unwrap()), 6);
    let b = g.heartbeat(args("b", 0, None), &topics, now, &mut ch);
    assert_eq!(b.member_epoch, g.assignment_epoch);
    assert_eq!(
        count(b.assignment.as_ref().unwrap()),
        0,
        "a still owns them all"
    );
    // a is told to give three up.
    let a2 = g.heartbeat(
        args("a", a.member_epoch, a.assignment.clone()),
        &topics,
        now,
        &mut ch,
    );
    assert_eq!(count(a2.assignment.as_ref().unwrap()), 3);
    assert_eq!(
        a2.member_epoch, a.member_epoch,
        "epoch moves after revoking"
    );
    // Until a acknowledges, b still gets nothing.
    let b2 = g.heartbeat(
        args("b", b.member_epoch, Some(Partitions::new())),
        &topics,
        now,
        &mut ch,
    );
    assert_eq!(count(b2.assignment.as_ref().unwrap()), 0);
    // a acknowledges; b then takes the three.
    let a3 = g.heartbeat(
        args("a", a2.member_epoch, a2.assignment.clone()),
        &topics,
        now,
        &mut ch,
    );
    assert_eq!(a3.member_epoch, g.assignment_epoch);
    let b3 = g.heartbeat(
        args("b", b2.member_epoch, Some(Partitions::new())),
        &topics,
        now,
        &mut ch,
    );
    assert_eq!(count(b3.assignment.as_ref().unwrap()), 3);
    assert!(!intersects(
        a3.assignment.as_ref().unwrap(),
        b3.assignment.as_ref().unwrap()
    ));
    assert_eq!(g.state(), "Stable");
    // A stale epoch is fenced.
    let f = g.heartbeat(args("b", 1, Some(Partitions::new())), &topics, now, &mut ch);
    assert_eq!(f.error, ErrorCode::FencedMemberEpoch);
    // Commits carry the member epoch.
    assert_eq!(g.validate_commit("a", a3.member_epoch), Ok(()));
    assert_eq!(g.validate_commit("a", 1), Err(ErrorCode::StaleMemberEpoch));
    assert_eq!(g.validate_commit("z", 1), Err(ErrorCode::UnknownMemberId));
    // Round trip through storage.
    let back = ConsumerGroup::load(g.snapshot(), GroupsConfig::default(), now);
    assert_eq!(back.members["a"].assigned, g.members["a"].assigned);
    assert_eq!(back.members["b"].epoch, g.members["b"].epoch);
    assert_eq!(back.target, g.target);
    // b's session ends: a gets everything back.
    let later = now + GroupsConfig::default().consumer_session_timeout;
    g.heartbeat(
        args("a", a3.member_epoch, a3.assignment.clone()),
        &topics,
        later,
        &mut ch,
    );
    assert_eq!(g.on_timer(later + Duration::from_millis(1), &topics), 1);
    let a4 = g.heartbeat(
        args("a", a3.member_epoch, a3.assignment.clone()),
        &topics,
        later,
        &mut ch,
    );
    assert_eq!(count(a4.assignment.as_ref().unwrap()), 6);
}

#[test]
fn regex_subscriptions_follow_topics() {
    let (t1, t2, x) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
    let mut topics: TopicsView = [
        ("orders-1".to_owned(), (t1, 2)),
        ("other".to_owned(), (x, 2)),
    ]
    .into_iter()
    .collect();
    let mut g = ConsumerGroup::new("g".into(), GroupsConfig::default());
    let now = Instant::now();
    let mut ch = false;
    let r = g.heartbeat(regex_join("a", "orders-.*"), &topics, now, &mut ch);
    assert_eq!(r.error, ErrorCode::None);
    assert_eq!(
        r.assignment
            .clone()
            .unwrap()
            .keys()
            .copied()
            .collect::<Vec<_>>(),
        vec![t1]
    );
    // A new matching topic joins the assignment with a new epoch.
    topics.insert("orders-2".into(), (t2, 1));
    g.maybe_assign(&topics);
    let r2 = g.heartbeat(
        args("a", r.member_epoch, r.assignment.clone()),
        &topics,
        now,
        &mut ch,
    );
    assert!(r2.member_epoch > r.member_epoch);
    assert_eq!(count(r2.assignment.as_ref().unwrap()), 3);
    // Regexes are whole-name matches, and bad ones are refused.
    assert!(!compile_regex("orders")
        .unwrap()
        .unwrap()
        .1
        .is_match("orders-1"));
    let mut bad = args("b", 0, None);
    bad.subscribed_topic_regex = Some("(".into());
    assert_eq!(
        g.heartbeat(bad, &topics, now, &mut ch).error,
        ErrorCode::InvalidRegularExpression
    );
    // Stored and loaded again, the regex stays.
    let back = ConsumerGroup::load(g.snapshot(), GroupsConfig::default(), now);
    assert_eq!(back.members["a"].regex.as_ref().unwrap().0, "orders-.*");
}

#[test]
fn regex_subscriptions_match_only_topics_the_member_may_describe() {
    use crate::groups::TopicAccess;
    use crate::security::acl::{self, op, pattern, permission, resource, AclBinding, AclSet};
    use crate::security::authorizer::Authorizer;
    let (t1, t2) = (Uuid::from_u128(1), Uuid::from_u128(2));
    let topics: TopicsView = [
        ("orders-1".to_owned(), (t1, 2)),
        ("orders-2".to_owned(), (t2, 2)),
    ]
    .into_iter()
    .collect();
    let read = AclBinding {
        resource_type: resource::TOPIC,
        resource_name: "orders-1".into(),
        pattern_type: pattern::LITERAL,
        principal: "User:alice".into(),
        host: "*".into(),
        operation: op::READ,
        permission: permission::ALLOW,
    };
    let authorizer =
        Authorizer::with_acls(acl::AuthorizerConfig::default(), AclSet::new(vec![read]));
    let cfg = GroupsConfig {
        topic_access: TopicAccess(Some(std::sync::Arc::new(authorizer))),
        ..GroupsConfig::default()
    };
    let mut g = ConsumerGroup::new("g".into(), cfg.clone());
    let now = Instant::now();
    let mut ch = false;
    let r = g.heartbeat(regex_join("a", "orders-.*"), &topics, now, &mut ch);
    let assigned = |r: &HeartbeatResult| {
        r.assignment
            .clone()
            .unwrap()
            .keys()
            .copied()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        assigned(&r),
        vec![t1],
        "orders-2 is not alice's to describe"
    );
    // Another principal on the same member: nothing it may describe.
    let mut b = args("a", r.member_epoch, r.assignment.clone());
    b.principal = ("User:bob".into(), "10.0.0.1".into());
    let r2 = g.heartbeat(b, &topics, now, &mut ch);
    assert_eq!(r2.error, ErrorCode::None);
    assert!(g.target["a"].is_empty(), "{:?}", g.target);
    assert_eq!(
        count(r2.assignment.as_ref().unwrap()),
        0,
        "told to give orders-1 up"
    );
    // The principal is stored with the member.
    let back = ConsumerGroup::load(g.snapshot(), cfg.clone(), now);
    assert_eq!(back.members["a"].principal.as_ref().unwrap().0, "User:bob");
    // A member stored without one matches nothing until it heartbeats.
    let mut old = back.members["a"].clone();
    old.principal = None;
    assert!(back.member_topics(&old, &topics).is_empty());
}

#[test]
fn assignors_balance() {
    let t1 = Uuid::from_u128(1);
    let t2 = Uuid::from_u128(2);
    let subs = vec![
        ("m1", vec![(t1, 5), (t2, 2)]),
        ("m2", vec![(t1, 5), (t2, 2)]),
        ("m3", vec![(t1, 5)]),
    ];
    let r = range_assign(&subs);
    assert_eq!(r["m1"][&t1].len(), 2);
    assert_eq!(r["m3"][&t1].len(), 1);
    assert_eq!(r["m1"][&t2].len() + r["m2"][&t2].len(), 2);
    let u = uniform_assign(&subs, &HashMap::new());
    let sizes: Vec<usize> = ["m1", "m2", "m3"].iter().map(|m| count(&u[*m])).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 7);
    assert!(
        sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1,
        "{sizes:?}"
    );
    // Sticky: recomputing keeps everything in place.
    assert_eq!(uniform_assign(&subs, &u), u);
    // Also with a member that can take nothing and unequal topics.
    let (a, b) = (Uuid::from_u128(3), Uuid::from_u128(4));
    let subs = vec![
        ("m0", vec![(a, 1), (b, 3)]),
        ("m1", vec![(a, 1)]),
        ("m2", vec![]),
        ("m3", vec![(a, 1), (b, 3)]),
    ];
    let u = uniform_assign(&subs, &HashMap::new());
    assert_eq!(
        ["m0", "m1", "m2", "m3"]
            .iter()
            .map(|m| count(&u[*m]))
            .sum::<usize>(),
        4
    );
    assert_eq!(uniform_assign(&subs, &u), u, "re-running moves nothing");
}

#[test]
fn a_group_config_sets_the_members_session_and_heartbeat_interval() {
    let t = Uuid::from_u128(1);
    let topics: TopicsView = [("t".to_owned(), (t, 2))].into_iter().collect();
    let mut g = ConsumerGroup::new("g".into(), GroupsConfig::default());
    let now = Instant::now();
    let mut ch = false;
    let own = |m: &str, epoch| HeartbeatArgs {
        session_timeout: Some(Duration::from_millis(50_000)),
        heartbeat_interval: Some(Duration::from_millis(7_000)),
        ..args(m, epoch, None)
    };
    let a = g.heartbeat(own("a", 0), &topics, now, &mut ch);
    assert_eq!(a.heartbeat_interval_ms, 7_000);
    // Past the coordinator's 45 s but within the group's 50 s: still in.
    assert_eq!(g.on_timer(now + Duration::from_millis(46_000), &topics), 0);
    assert_eq!(g.on_timer(now + Duration::from_millis(50_001), &topics), 1);
    let b = g.heartbeat(args("b", 0, None), &topics, now, &mut ch);
    assert_eq!(
        b.heartbeat_interval_ms, 5_000,
        "without group configs, the coordinator's"
    );
}
