use super::*;
use crate::groups::{JoinArgs, SyncArgs};

fn cfg() -> GroupsConfig {
    GroupsConfig {
        initial_rebalance_delay: Duration::from_millis(100),
        ..GroupsConfig::default()
    }
}

fn join_args(member_id: &str, instance: Option<&str>) -> JoinArgs {
    JoinArgs {
        group_id: "g".into(),
        member_id: member_id.into(),
        instance_id: instance.map(str::to_owned),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout: Duration::from_secs(10),
        rebalance_timeout: Duration::from_secs(30),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"m"))],
        require_known_member_id: true,
    }
}

fn join(
    g: &mut ClassicGroup,
    a: JoinArgs,
    now: Instant,
    fx: &mut Effects,
) -> oneshot::Receiver<JoinResult> {
    let (tx, rx) = oneshot::channel();
    g.join(a, tx, now, fx);
    rx
}

/// Joins a new dynamic member the KIP-394 way; returns its id and the
/// pending answer of the second join.
fn join_new(
    g: &mut ClassicGroup,
    now: Instant,
    fx: &mut Effects,
) -> (String, oneshot::Receiver<JoinResult>) {
    let mut first = join(g, join_args("", None), now, fx);
    let r = first.try_recv().unwrap().unwrap();
    assert_eq!(r.error, ErrorCode::MemberIdRequired);
    let id = r.member_id;
    let rx = join(g, join_args(&id, None), now, fx);
    (id, rx)
}

#[test]
fn two_members_rebalance_sync_and_one_expires() {
    let mut g = ClassicGroup::new("g".into(), cfg());
    let mut fx = Effects::default();
    let t0 = Instant::now();
    let (a, mut ja) = join_new(&mut g, t0, &mut fx);
    let (b, mut jb) = join_new(&mut g, t0, &mut fx);
    assert_eq!(g.state, State::PreparingRebalance);
    assert!(
        ja.try_recv().unwrap().is_none(),
        "initial delay holds the join"
    );
    g.on_timer(t0 + Duration::from_millis(100), &mut fx);
    // New members came during the delay: it is extended once.
    assert_eq!(g.state, State::PreparingRebalance);
    g.on_timer(t0 + Duration::from_millis(200), &mut fx);
    assert_eq!(g.state, State::CompletingRebalance);
    let ra = ja.try_recv().unwrap().unwrap();
    let rb = jb.try_recv().unwrap().unwrap();
    assert_eq!(ra.generation, 1);
    assert_eq!(ra.leader, a);
    assert_eq!(ra.members.len(), 2, "the leader gets the members");
    assert!(rb.members.is_empty());
    // Follower syncs first, then the leader.
    let (tx, mut sb) = oneshot::channel();
    let sync = |m: &str, asg: Vec<(String, Bytes)>| SyncArgs {
        group_id: "g".into(),
        member_id: m.into(),
        instance_id: None,
        generation: 1,
        protocol_type: None,
        protocol_name: None,
        assignments: asg,
    };
    g.sync(sync(&b, vec![]), tx, t0, &mut fx);
    let (tx, mut sa) = oneshot::channel();
    let asg = vec![
        (a.clone(), Bytes::from_static(b"A")),
        (b.clone(), Bytes::from_static(b"B")),
    ];
    g.sync(sync(&a, asg), tx, t0, &mut fx);
    let (_, after) = fx.stores.pop().expect("assignments stored");
    let AfterStore::Assignments {
        generation,
        assignments,
    } = after
    else {
        panic!("wrong continuation")
    };
    g.assignments_stored(generation, assignments);
    assert_eq!(g.state, State::Stable);
    assert_eq!(&sa.try_recv().unwrap().unwrap().assignment[..], b"A");
    assert_eq!(&sb.try_recv().unwrap().unwrap().assignment[..], b"B");
    // Heartbeats: a stale generation is refused.
    assert_eq!(g.heartbeat(&a, None, 0, t0), ErrorCode::IllegalGeneration);
    assert_eq!(
        g.heartbeat("nobody", None, 1, t0),
        ErrorCode::UnknownMemberId
    );
    // a keeps heartbeating, b dies: b expires and a rebalance starts.
    let t1 = t0 + Duration::from_secs(8);
    assert_eq!(g.heartbeat(&a, None, 1, t1), ErrorCode::None);
    g.on_timer(t0 + Duration::from_secs(11), &mut fx);
    assert!(!g.members.contains_key(&b));
    assert_eq!(g.state, State::PreparingRebalance);
    assert_eq!(
        g.heartbeat(&a, None, 1, t0 + Duration::from_secs(11)),
        ErrorCode::RebalanceInProgress
    );
    // a rejoins: alone, the join completes at once (no initial delay).
    let mut ja = join(&mut g, join_args(&a, None), t1, &mut fx);
    let r = ja.try_recv().unwrap().unwrap();
    assert_eq!(r.generation, 2);
    assert_eq!(g.state, State::CompletingRebalance);
}

#[test]
fn static_member_restart_keeps_its_assignment() {
    let mut g = ClassicGroup::new("g".into(), cfg());
    let mut fx = Effects::default();
    let t0 = Instant::now();
    let mut j = join(&mut g, join_args("", Some("i1")), t0, &mut fx);
    g.on_timer(t0 + Duration::from_millis(100), &mut fx);
    g.on_timer(t0 + Duration::from_millis(200), &mut fx);
    let r = j.try_recv().unwrap().unwrap();
    assert_eq!(
        r.error,
        ErrorCode::None,
        "static members need no member id round"
    );
    let (tx, _s) = oneshot::channel();
    g.sync(
        SyncArgs {
            group_id: "g".into(),
            member_id: r.member_id.clone(),
            instance_id: Some("i1".into()),
            generation: r.generation,
            protocol_type: None,
            protocol_name: None,
            assignments: vec![(r.member_id.clone(), Bytes::from_static(b"A"))],
        },
        tx,
        t0,
        &mut fx,
    );
    let (
        _,
        AfterStore::Assignments {
            generation,
            assignments,
        },
    ) = fx.stores.pop().unwrap()
    else {
        panic!()
    };
    g.assignments_stored(generation, assignments);
    // Restart: new join with no member id, same instance id.
    let before = fx.rebalances;
    let mut j2 = join(&mut g, join_args("", Some("i1")), t0, &mut fx);
    assert_eq!(fx.rebalances, before, "no rebalance");
    assert_eq!(g.state, State::Stable);
    let (_, AfterStore::StaticRejoin { reply, result }) = fx.stores.pop().unwrap() else {
        panic!()
    };
    let _ = reply.send(result);
    let r2 = j2.try_recv().unwrap().unwrap();
    assert_ne!(r2.member_id, r.member_id);
    assert_eq!(r2.generation, r.generation);
    assert_eq!(&g.members[&r2.member_id].assignment[..], b"A");
    // The old member id is fenced.
    assert_eq!(
        g.heartbeat(&r.member_id, Some("i1"), r.generation, t0),
        ErrorCode::FencedInstanceId
    );
}

#[test]
fn commit_rules() {
    let mut g = ClassicGroup::new("g".into(), cfg());
    let t0 = Instant::now();
    assert_eq!(g.validate_commit("", None, -1, false, t0), Ok(()));
    assert_eq!(
        g.validate_commit("m", None, 3, false, t0),
        Err(ErrorCode::UnknownMemberId)
    );
    let mut fx = Effects::default();
    let (a, _ja) = join_new(&mut g, t0, &mut fx);
    assert_eq!(
        g.validate_commit("", None, -1, false, t0),
        Err(ErrorCode::UnknownMemberId),
        "a simple commit needs an empty group"
    );
    assert_eq!(
        g.validate_commit(&a, None, 7, false, t0),
        Err(ErrorCode::IllegalGeneration)
    );
}
