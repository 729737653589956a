use super::topology::{Subtopology, TopicInfo};
use super::*;

fn info(name: &str) -> TopicInfo {
    TopicInfo {
        name: name.into(),
        partitions: 0,
        replication_factor: -1,
        configs: vec![("cleanup.policy".into(), "compact".into())],
    }
}

/// Subtopology 0 reads `in` and writes `app-rep`; 1 reads `app-rep` and
/// keeps a changelog.
fn topology() -> Topology {
    Topology {
        epoch: 0,
        subtopologies: vec![
            Subtopology {
                id: "0".into(),
                source_topics: vec!["in".into()],
                repartition_sink_topics: vec!["app-rep".into()],
                ..Default::default()
            },
            Subtopology {
                id: "1".into(),
                repartition_source_topics: vec![info("app-rep")],
                state_changelog_topics: vec![info("app-log")],
                ..Default::default()
            },
        ],
    }
}

fn view(topics: &[(&str, i32)]) -> TopicsView {
    topics
        .iter()
        .map(|(n, p)| (n.to_string(), (uuid::Uuid::new_v4(), *p)))
        .collect()
}

#[test]
fn a_missing_source_topic_keeps_the_group_waiting() {
    let c = topology().configure(&view(&[])).unwrap();
    assert_eq!(c.problem.as_ref().unwrap().0, status::MISSING_SOURCE_TOPICS);
    assert_eq!(
        c.problem.unwrap().1,
        "Source topics in are missing.".to_owned()
    );
    assert!(c.tasks.is_empty());
}

#[test]
fn internal_topics_take_the_partitions_of_their_inputs() {
    let c = topology().configure(&view(&[("in", 3)])).unwrap();
    assert_eq!(
        c.problem.as_ref().unwrap().0,
        status::MISSING_INTERNAL_TOPICS
    );
    assert_eq!(c.tasks, [("0".into(), 3), ("1".into(), 3)].into());
    let made: Vec<(&str, i32, i16)> = c
        .create
        .iter()
        .map(|t| (t.name.as_str(), t.partitions, t.replication_factor))
        .collect();
    assert_eq!(made, [("app-rep", 3, -1), ("app-log", 3, -1)]);
    assert_eq!(c.stateful, ["1".to_owned()].into());
    // Once they exist the topology is ready; a wrong count is a problem.
    let ready = topology()
        .configure(&view(&[("in", 3), ("app-rep", 3), ("app-log", 3)]))
        .unwrap();
    assert!(ready.is_ready() && ready.create.is_empty());
    let wrong = topology()
        .configure(&view(&[("in", 3), ("app-rep", 3), ("app-log", 5)]))
        .unwrap();
    assert_eq!(
        wrong.problem.unwrap().0,
        status::INCORRECTLY_PARTITIONED_TOPICS
    );
}

#[test]
fn a_repartition_topic_nobody_writes_is_an_invalid_topology() {
    let mut t = topology();
    t.subtopologies[0].repartition_sink_topics.clear();
    let (code, message) = t.configure(&view(&[("in", 3)])).unwrap_err();
    assert_eq!(code, ErrorCode::StreamsInvalidTopology);
    assert!(message.contains("never used as a sink topic"), "{message}");
}

#[test]
fn copartitioned_sources_must_agree() {
    let mut t = topology();
    t.subtopologies[0].source_topics = vec!["a".into(), "b".into()];
    t.subtopologies[0]
        .copartition_groups
        .push(topology::CopartitionGroup {
            source_topics: vec![0, 1],
            repartition_source_topics: vec![],
        });
    let c = t.configure(&view(&[("a", 2), ("b", 3)])).unwrap();
    let (code, message) = c.problem.unwrap();
    assert_eq!(code, status::INCORRECTLY_PARTITIONED_TOPICS);
    assert!(message.starts_with("Following topics do not have the same number of partitions"));
}

#[test]
fn sticky_assignment_balances_keeps_and_places_standbys_elsewhere() {
    let tasks: BTreeMap<String, i32> = [("0".into(), 4), ("1".into(), 4)].into();
    let stateful: BTreeSet<String> = ["1".to_owned()].into();
    let members = [("a", "p1"), ("b", "p2")];
    let first = assign::sticky(&members, &tasks, &stateful, 1, &HashMap::new());
    for m in ["a", "b"] {
        assert_eq!(count(&first[m].active), 4, "{first:?}");
        // One standby per stateful task, never where it is active.
        for (s, ps) in &first[m].standby {
            for p in ps {
                assert!(!set_contains(&first[m].active, s, *p));
            }
        }
    }
    let standbys: usize = first.values().map(|t| count(&t.standby)).sum();
    assert_eq!(standbys, 4);
    // A third member takes a share; the others keep their share of what
    // they had (a task beyond it may go to its previous standby).
    let members = [("a", "p1"), ("b", "p2"), ("c", "p3")];
    let next = assign::sticky(&members, &tasks, &stateful, 0, &first);
    let kept = |m: &str| {
        next[m]
            .active
            .iter()
            .flat_map(|(s, ps)| ps.iter().map(move |p| (s, *p)))
            .filter(|(s, p)| set_contains(&first[m].active, s, *p))
            .count()
    };
    assert!(kept("a") + kept("b") >= 5, "{next:?}");
    for m in ["a", "b", "c"] {
        assert!((2..=3).contains(&count(&next[m].active)), "{next:?}");
    }
    let all: usize = next.values().map(|t| count(&t.active)).sum();
    assert_eq!(all, 8);
}

fn hb(member: &str, epoch: i32, owned: Option<Tasks>) -> StreamsHeartbeatArgs {
    StreamsHeartbeatArgs {
        group_id: "app".into(),
        member_id: member.into(),
        member_epoch: epoch,
        endpoint_information_epoch: -1,
        rack_id: None,
        rebalance_timeout_ms: if epoch == 0 { 30_000 } else { -1 },
        topology: (epoch == 0).then(topology),
        owned,
        process_id: (epoch == 0).then(|| format!("process-{member}")),
        user_endpoint: None,
        client_tags: None,
        shutdown_application: false,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout: None,
        heartbeat_interval: None,
        initial_rebalance_delay: None,
        standby_replicas: None,
    }
}

fn no_delay() -> StreamsConfig {
    StreamsConfig {
        initial_rebalance_delay: Duration::ZERO,
        ..Default::default()
    }
}

#[test]
fn a_task_moves_only_after_its_owner_revoked_it() {
    let topics = view(&[("in", 2), ("app-rep", 2), ("app-log", 2)]);
    let mut g = StreamsGroup::new("app".into(), no_delay());
    let now = Instant::now();
    let mut changed = false;
    let a = g.heartbeat(hb("a", 0, None), &topics, now, &mut changed);
    assert_eq!(a.error, ErrorCode::None);
    assert!(changed);
    let a_tasks = a.assignment.clone().unwrap();
    assert_eq!(count(&a_tasks.active), 4);
    // Kafka's first group epoch is 2.
    assert_eq!(a.member_epoch, 2);
    assert!(a.statuses.is_empty(), "{:?}", a.statuses);
    // b joins: a's target shrinks, but b gets nothing a still owns.
    let b = g.heartbeat(hb("b", 0, None), &topics, now, &mut changed);
    assert!(b.member_epoch > a.member_epoch);
    assert_eq!(count(&b.assignment.clone().unwrap().active), 0);
    assert_eq!(g.state(), "Reconciling");
    // a is asked to revoke two tasks, at its old epoch...
    let a2 = g.heartbeat(
        hb("a", a.member_epoch, Some(a_tasks.clone())),
        &topics,
        now,
        &mut changed,
    );
    assert_eq!(a2.member_epoch, a.member_epoch);
    let kept = a2.assignment.unwrap();
    assert_eq!(count(&kept.active), 2);
    // ...and its commits for the tasks it gives up still count.
    assert!(g.validate_commit("a", a.member_epoch, &[("in", 0)]).is_ok());
    // Once it reports them gone it moves on; then b takes them.
    let a3 = g.heartbeat(
        hb("a", a.member_epoch, Some(kept.clone())),
        &topics,
        now,
        &mut changed,
    );
    assert_eq!(a3.member_epoch, b.member_epoch);
    let b2 = g.heartbeat(
        hb("b", b.member_epoch, Some(Tasks::default())),
        &topics,
        now,
        &mut changed,
    );
    assert_eq!(count(&b2.assignment.unwrap().active), 2);
    assert_eq!(g.state(), "Stable");
    // An older epoch than a task's assignment is stale; an unknown member
    // or a fenced epoch is refused.
    let (code, _) = g
        .validate_commit("b", b.member_epoch - 1, &[("in", 1)])
        .unwrap_err();
    assert_eq!(code, ErrorCode::StaleMemberEpoch);
    assert_eq!(
        g.validate_commit("x", 1, &[]).unwrap_err().0,
        ErrorCode::UnknownMemberId
    );
    let stale = g.heartbeat(
        hb("b", 1, Some(Tasks::default())),
        &topics,
        now,
        &mut changed,
    );
    assert_eq!(stale.error, ErrorCode::FencedMemberEpoch);
    // Leaving gives the tasks back.
    let left = g.heartbeat(hb("b", -1, None), &topics, now, &mut changed);
    assert_eq!(left.member_epoch, -1);
    let a4 = g.heartbeat(
        hb("a", a3.member_epoch, Some(kept)),
        &topics,
        now,
        &mut changed,
    );
    assert_eq!(count(&a4.assignment.unwrap().active), 4);
}

#[test]
fn a_different_topology_is_refused_and_missing_topics_are_reported() {
    let topics = view(&[("in", 2)]);
    let mut g = StreamsGroup::new("app".into(), StreamsConfig::default());
    let now = Instant::now();
    let mut changed = false;
    let a = g.heartbeat(hb("a", 0, None), &topics, now, &mut changed);
    let codes: Vec<i8> = a.statuses.iter().map(|s| s.0).collect();
    assert_eq!(
        codes,
        [status::ASSIGNMENT_DELAYED, status::MISSING_INTERNAL_TOPICS]
    );
    assert_eq!(a.create.len(), 2);
    assert_eq!(a.member_epoch, 1);
    assert_eq!(g.state(), "NotReady");
    let mut other = hb("b", 0, None);
    other.topology.as_mut().unwrap().subtopologies.pop();
    let refused = g.heartbeat(other, &topics, now, &mut changed);
    assert_eq!(refused.error, ErrorCode::InvalidRequest);
    assert_eq!(
        refused.error_message.as_deref(),
        Some("Topology updates are not supported yet.")
    );
    assert!(!g.members.contains_key("b"));
}

#[test]
fn a_stored_group_loads_as_it_was() {
    let topics = view(&[("in", 2), ("app-rep", 2), ("app-log", 2)]);
    let mut g = StreamsGroup::new("app".into(), no_delay());
    let now = Instant::now();
    let mut changed = false;
    let mut args = hb("a", 0, None);
    args.user_endpoint = Some(("host".into(), 9090));
    args.client_tags = Some(vec![("zone".into(), "z1".into())]);
    g.heartbeat(args, &topics, now, &mut changed);
    let loaded = StreamsGroup::load(g.snapshot(), no_delay(), now);
    assert_eq!(loaded.topology, g.topology);
    assert_eq!(loaded.group_epoch, g.group_epoch);
    assert_eq!(loaded.validated_topology_epoch, 0);
    let (m, n) = (&loaded.members["a"], &g.members["a"]);
    assert_eq!(m.assigned, n.assigned);
    assert_eq!(m.epoch, n.epoch);
    assert_eq!(m.process_id, "process-a");
    assert_eq!(m.user_endpoint, Some(("host".into(), 9090)));
    assert_eq!(m.client_tags, n.client_tags);
    assert_eq!(loaded.target, g.target);
}

#[test]
fn a_reloaded_group_keeps_its_assignment_until_its_topics_are_in_view() {
    let topics = view(&[("in", 2), ("app-rep", 2), ("app-log", 2)]);
    let mut g = StreamsGroup::new("app".into(), no_delay());
    let now = Instant::now();
    let mut changed = false;
    let a = g.heartbeat(hb("a", 0, None), &topics, now, &mut changed);
    let owned = a.assignment.unwrap();
    let mut loaded = StreamsGroup::load(g.snapshot(), no_delay(), now);
    // The coordinator's view is empty right after a takeover.
    let empty = TopicsView::new();
    let next = loaded.heartbeat(
        hb("a", a.member_epoch, Some(owned.clone())),
        &empty,
        now,
        &mut changed,
    );
    assert_eq!(next.error, ErrorCode::None);
    assert_eq!(next.member_epoch, a.member_epoch);
    assert!(next.statuses.is_empty(), "{:?}", next.statuses);
    assert_eq!(loaded.members["a"].assigned, owned);
    // Once refreshed with the same topics nothing moves; with more
    // partitions the group assigns again.
    loaded.view_refreshed(&loaded.required_topics());
    loaded.maybe_assign(&topics);
    assert_eq!(loaded.group_epoch, g.group_epoch);
    let wider = view(&[("in", 3), ("app-rep", 3), ("app-log", 3)]);
    loaded.maybe_assign(&wider);
    assert!(loaded.group_epoch > g.group_epoch);
}

#[test]
fn owned_tasks_outside_the_topology_are_refused() {
    let topics = view(&[("in", 2), ("app-rep", 2), ("app-log", 2)]);
    let mut g = StreamsGroup::new("app".into(), no_delay());
    let now = Instant::now();
    let mut changed = false;
    let a = g.heartbeat(hb("a", 0, None), &topics, now, &mut changed);
    let mut bad = Tasks::default();
    set_insert(&mut bad.active, "0", 7);
    let r = g.heartbeat(
        hb("a", a.member_epoch, Some(bad)),
        &topics,
        now,
        &mut changed,
    );
    assert_eq!(r.error, ErrorCode::InvalidRequest);
    assert_eq!(
        r.error_message.as_deref(),
        Some("Task 7 for subtopology 0 is invalid. Number of tasks for this subtopology: 2")
    );
    let mut unknown = Tasks::default();
    set_insert(&mut unknown.standby, "9", 0);
    let r = g.heartbeat(
        hb("a", a.member_epoch, Some(unknown)),
        &topics,
        now,
        &mut changed,
    );
    assert_eq!(
        r.error_message.as_deref(),
        Some("Subtopology 9 does not exist in the topology.")
    );
    // An empty group takes offsets from anyone (an admin's reset).
    g.heartbeat(hb("a", -1, None), &topics, now, &mut changed);
    assert!(g.validate_commit("tool", -1, &[("in", 0)]).is_ok());
}

#[test]
fn a_members_shutdown_request_reaches_every_member() {
    let topics = view(&[("in", 2), ("app-rep", 2), ("app-log", 2)]);
    let mut g = StreamsGroup::new("app".into(), no_delay());
    let now = Instant::now();
    let mut changed = false;
    let a = g.heartbeat(hb("a", 0, None), &topics, now, &mut changed);
    let b = g.heartbeat(hb("b", 0, None), &topics, now, &mut changed);
    let mut asks = hb("a", a.member_epoch, None);
    asks.shutdown_application = true;
    g.heartbeat(asks, &topics, now, &mut changed);
    let told = g.heartbeat(hb("b", b.member_epoch, None), &topics, now, &mut changed);
    let shutdown: Vec<&String> = told
        .statuses
        .iter()
        .filter(|s| s.0 == status::SHUTDOWN_APPLICATION)
        .map(|s| &s.1)
        .collect();
    assert_eq!(
        shutdown,
        [&"Streams group member a encountered a fatal error and requested a shutdown for the entire application.".to_owned()]
    );
    // It is stored: a reloaded group still asks.
    let loaded = StreamsGroup::load(g.snapshot(), no_delay(), now);
    assert_eq!(loaded.shutdown_requested_by.as_deref(), Some("a"));
}
