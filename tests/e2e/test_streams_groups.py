# What this proves: Kafka Streams 4.2.0 (and 4.4.0, the newest, which speaks
# version 0 of the heartbeat to an agent that lists no newer) runs against rutomq with
# group.protocol=streams (KIP-1071 streams groups: StreamsGroupHeartbeat and
# StreamsGroupDescribe), and Kafka's kafka-streams-groups tool works on such a
# group.
#  - Two instances (two processes, one application.id) of the stateful
#    topology of tests/streams/.../StreamsStateful.java (a KTable join, a
#    groupBy + count, a windowed count; at_least_once, and exactly_once_v2
#    with Streams 4.2.0, whose counts must then be updated exactly once
#    across the handover below: 1, 2, ..., n for read_committed readers) share its 8 tasks (2
#    subtopologies x 4 partitions). Under this protocol the client never
#    creates internal topics: rutomq must create the repartition topic and the
#    two changelog topics itself (the agent runs with --auto-create-topics
#    false, so no Metadata or Produce request can create them either), with
#    the partition counts it derived (4, those of the source topics) and the
#    configs the client asked for (repartition: cleanup.policy=delete,
#    retention.ms=-1; counts: compact; windowed counts: compact,delete and
#    retention.ms = window + grace + 1 day). No other topic named after the
#    application appears.
#  - The group's own config streams.num.standby.replicas=1 (kafka-configs)
#    gives every task a standby on the other process.
#  - While both run, kafka-streams-groups --list shows the group (and, with
#    --state, Stable); --describe --members shows 2 members of 2 processes,
#    each with active tasks, together every task once; --describe --state
#    --verbose shows Stable, the coordinator, a group epoch equal to the
#    target assignment epoch and 2 members; --describe --offsets shows every
#    partition of the source and repartition topics with its lag; --delete is
#    refused (the group is not Empty).
#  - One instance is stopped cleanly mid-stream (its members leave with epoch
#    -1); the other one takes all 8 tasks over (their stores start from the
#    checkpoints its standbys kept) and finishes the input: every count reaches its number of
#    events, and --describe --offsets --verbose ends with lag 0 on every source
#    partition (OffsetCommit / OffsetFetch of a streams group member).
#  - Once both are stopped the group is Empty (--list --state; --describe
#    --state still describes it); --reset-offsets --to-earliest sets its
#    committed offsets of an input topic to 0 and --delete-offsets removes
#    them (the other input's stay); and --delete --delete-all-internal-topics
#    deletes it and its three internal topics (found through the topology that
#    StreamsGroupDescribe returns); --list no longer shows it and --describe
#    finds no group.
#  - An application whose source topic does not exist fails with
#    MissingSourceTopicException (the heartbeat's MISSING_SOURCE_TOPICS
#    status), naming the topic; the topic is not created.
# How: tests/streams/build.sh builds StreamsEos.java / StreamsStateful.java
# (test_streams.streams_jar); the instances run as subprocesses
# (test_streams.StreamsApp, their logs in <tmp>/<name>.log);
# kafka-streams-groups is org.apache.kafka.tools.streams.StreamsGroupCommand
# from the kafka-tools 4.2.0 jars (tests/clients/run.sh tools). The agent gets
# shorter group timings (AGENT_ARGS: 300 ms initial delays, 1 s streams
# heartbeats).

import re
import subprocess
import threading
import time

import pytest

from kafkautil import (Rec, cluster_metadata, committed_confluent, create_topic, kafka_tool, produce_confluent, unique_topic,
                       wait_for_topic, wait_topic_absent, wait_until)
from test_java_go import roundtrip_clients  # noqa: F401 (fixture)
from test_streams import (PARTITIONS, STREAMS_NEWEST, STREAMS_VERSION, _process_id, streams,  # noqa: F401 (fixtures)
                          streams_jar)
from test_streams_stateful import USERS, WINDOW_MS, _expected, _region, _topic_configs, _updates

TOOL = "org.apache.kafka.tools.streams.StreamsGroupCommand"  # kafka-streams-groups.sh
EVENTS = 12000
BATCH = 1000  # events produced at a time, then a 0.25 s pause: ~10 s of input
DELAY_US = 200  # per event: one instance alone keeps up with the input
STOP_AFTER = 3000  # events processed by both instances before one is stopped
DONE_TIMEOUT_S = 90
# StreamsStateful's windows: 10 s, 1 h grace; Streams adds
# windowstore.changelog.additional.retention.ms (1 day) for the changelog.
WINDOWED_RETENTION_MS = 10_000 + 3_600_000 + 86_400_000
# Streams-group flags the agent gets when its binary has them: a 1 s heartbeat
# (Kafka's default 5 s makes each join and handover step take 5 s; the
# client gives up on missing source topics after 2 heartbeat intervals).
AGENT_ARGS = ["--group-initial-rebalance-delay-ms", "300",
              "--group-streams-heartbeat-interval-ms", "1000",
              "--group-streams-initial-rebalance-delay-ms", "300"]


def agent_args():
    return list(AGENT_ARGS)


# --------------------------------------------------------------------------
# kafka-streams-groups and its output


class Tool:
    """kafka-streams-groups against one agent."""

    def __init__(self, run_sh, bootstrap):
        self.run_sh = run_sh
        self.bootstrap = bootstrap
        self.last = {}  # the last output of each kind of call, for failure reports

    def __call__(self, *args, ok=True):
        """The finished process; exit status 0 (`ok=True`), non-zero
        (`ok=False`) or anything (`ok=None`)."""
        res = kafka_tool(self.run_sh, TOOL, "--bootstrap-server", self.bootstrap, "--timeout", "20000", *args,
                         ok=ok, timeout=90)
        self.last[" ".join(a for a in args if a.startswith("--"))] = (
            f"$ kafka-streams-groups {' '.join(args)}   (exit {res.returncode})\n{res.stdout}{res.stderr[-2000:]}")
        return res

    def report(self):
        return "\n".join(self.last.values())


def _rows(stdout, group):
    """The table rows of `group` (lines whose first column is the group id), split on blanks."""
    return [ln.split() for ln in stdout.splitlines() if ln.split()[:1] == [group]]


def _tasks(text):
    """An ASSIGNMENTS column ("ACTIVE: 0:[0,2]; 1:[1,3]; TARGET-ACTIVE: ...")
    as {"ACTIVE": {(subtopology, partition)}, "TARGET-ACTIVE": ..., ...}."""
    out, kind = {}, None
    for tok in text.split():
        m = re.fullmatch(r"([^:\[\]]+):\[([\d,]*)\];", tok)
        if m and kind is not None:
            out[kind] |= {(m.group(1), int(p)) for p in m.group(2).split(",") if p}
        elif tok.endswith(":") and "[" not in tok:
            kind = tok[:-1]
            out.setdefault(kind, set())
        else:
            raise AssertionError(f"unexpected token {tok!r} in the ASSIGNMENTS column {text!r}")
    return out


def members(stdout, group, verbose=False):
    """--describe --members [--verbose]: one dict per member row.
    Columns: GROUP MEMBER PROCESS CLIENT-ID ASSIGNMENTS; with --verbose
    GROUP TARGET-ASSIGNMENT-EPOCH TOPOLOGY-EPOCH MEMBER MEMBER-PROTOCOL
    MEMBER-EPOCH PROCESS CLIENT-ID ASSIGNMENTS (with TARGET-* tasks)."""
    out = []
    for ln in stdout.splitlines():
        if ln.split()[:1] != [group]:
            continue
        if verbose:
            f = ln.split(None, 8)
            m = dict(target_epoch=int(f[1]), topology_epoch=int(f[2]), member=f[3], protocol=f[4],
                     member_epoch=int(f[5]), process=f[6], client_id=f[7])
            rest = f[8] if len(f) > 8 else ""
        else:
            f = ln.split(None, 4)
            m = dict(member=f[1], process=f[2], client_id=f[3])
            rest = f[4] if len(f) > 4 else ""
        tasks = _tasks(rest)
        m["active"] = tasks.get("ACTIVE", set())
        m["target_active"] = tasks.get("TARGET-ACTIVE", set())
        m["standby"] = tasks.get("STANDBY", set())
        out.append(m)
    return out


def state(stdout, group, verbose=True):
    """--describe --state [--verbose]: GROUP COORDINATOR (ID) STATE
    [GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH] #MEMBERS."""
    rows = _rows(stdout, group)
    assert len(rows) == 1, f"one state row for {group} expected:\n{stdout}"
    r = rows[0]
    s = dict(coordinator=r[1], coordinator_id=r[2], state=r[3], members=int(r[-1]))
    if verbose:
        s.update(group_epoch=int(r[4]), assignment_epoch=int(r[5]))
    return s


def offsets(stdout, group, verbose=False):
    """--describe [--offsets] [--verbose]: {(topic, partition): row}; a row is
    {"lag": n} or, with --verbose, also current, leader_epoch, log_end
    (GROUP TOPIC PARTITION [CURRENT-OFFSET LEADER-EPOCH LOG-END-OFFSET] OFFSET-LAG)."""
    out = {}
    for r in _rows(stdout, group):
        row = {"lag": int(r[-1])}
        if verbose:
            row.update(current=r[3], leader_epoch=r[4], log_end=int(r[5]))
        out[(r[1], int(r[2]))] = row
    return out


def _checkpointed_after(app, hhmmss):
    """The stores `app`'s log says were opened from a checkpoint with an
    offset (state a standby kept) from time `hhmmss` on ("State store S
    initialized from checkpoint with offset N")."""
    out = set()
    for ln in app.log_text().splitlines():
        m = re.search(r"State store (\S+) initialized from checkpoint with offset (\d+)", ln)
        if ln[:8] >= hhmmss and m:
            out.add(m.group(1))
    return out


def agent_topics(bootstrap):
    return set(cluster_metadata(bootstrap).topics)


def listed_states(stdout):
    """--list --state: {group: state} (GROUP STATE)."""
    return {r[0]: r[1] for r in (ln.split() for ln in stdout.splitlines()[1:]) if len(r) == 2}


def every_task(tasks):
    """Whether `tasks` is 2 subtopologies x PARTITIONS partitions."""
    by_sub = {}
    for sub, p in tasks:
        by_sub.setdefault(sub, set()).add(p)
    return len(by_sub) == 2 and all(ps == set(range(PARTITIONS)) for ps in by_sub.values())


# --------------------------------------------------------------------------
# tests


@pytest.mark.timeout(300)
@pytest.mark.parametrize("version,guarantee", [(STREAMS_VERSION, "at_least_once"),
                                               (STREAMS_VERSION, "exactly_once_v2"),
                                               (STREAMS_NEWEST, "at_least_once")])
def test_streams_protocol_two_instances_and_streams_groups_tool(version, guarantee, start_agent, streams, tmp_path,
                                                                request):
    run_sh = request.getfixturevalue("roundtrip_clients")
    request.getfixturevalue("streams_jar")  # built before the clock starts
    agent = start_agent(extra_args=agent_args(), auto_create_topics=False)
    boot = agent.bootstrap
    tool = Tool(run_sh, boot)
    base = unique_topic("ssg")
    app_id = base + "-app"
    users, events, out_regions, out_windows = (base + s for s in ("-users", "-events", "-regions", "-windows"))
    repartition = app_id + "-by-region-repartition"
    counts_changelog = app_id + "-region-counts-changelog"
    windows_changelog = app_id + "-user-windows-changelog"
    internal = {repartition, counts_changelog, windows_changelog}
    create_topic(boot, users, PARTITIONS, config={"cleanup.policy": "compact"})
    for t in (events, out_regions, out_windows):
        create_topic(boot, t, PARTITIONS)
    now = int(time.time() * 1000)
    base_ts = now - now % WINDOW_MS - 60_000
    table = [Rec(j, b"u%03d" % j, b"old", partition=j % PARTITIONS, timestamp=base_ts - 120_000 + j)
             for j in range(USERS)]
    table += [Rec(j, b"u%03d" % j, _region(j), partition=j % PARTITIONS, timestamp=base_ts - 60_000 + j)
              for j in range(USERS)]
    produce_confluent(boot, users, table)
    evs = [Rec(i, b"u%03d" % (i % USERS), b"e%d" % i, partition=(i % USERS) % PARTITIONS,
               timestamp=base_ts + 2 * i) for i in range(EVENTS)]
    want_regions, want_windows = _expected(evs)

    def app_args(name):
        return ["stateful", "--bootstrap", boot, "--application-id", app_id,
                "--state-dir", str(tmp_path / name), "--guarantee", guarantee,
                "--users", users, "--events", events, "--out-regions", out_regions,
                "--out-windows", out_windows, "--delay-us", str(DELAY_US), "--group-protocol", "streams"]

    # One standby per stateful task, set as the group's own config (Kafka's
    # clients ignore num.standby.replicas under this protocol).
    kafka_tool(run_sh, "kafka.admin.ConfigCommand", "--bootstrap-server", boot, "--alter", "--entity-type",
               "groups", "--entity-name", app_id, "--add-config", "streams.num.standby.replicas=1")

    t0 = time.monotonic()
    a = streams("a", app_args("a"), version)
    b = streams("b", app_args("b"), version)
    apps = [a, b]

    def diag():
        return (f"{tool.report()}\n"
                + "\n".join(f"--- {x.name} (last 40 lines of {x.log_path}) ---\n{x.tail(40)}" for x in apps))

    def alive():
        for x in apps:
            x.assert_alive()

    def reconciled(n):
        """The --describe --members --verbose rows once the group has `n`
        members that together own every task, each member its target."""
        alive()
        ms = members(tool("--describe", "--group", app_id, "--members", "--verbose", ok=None).stdout,
                     app_id, verbose=True)
        if len(ms) != n:
            return None
        owned = [t for m in ms for t in m["active"]]
        if len(owned) != len(set(owned)) or not every_task(owned):
            return None
        if any(m["active"] != m["target_active"] or m["member_epoch"] != m["target_epoch"] for m in ms):
            return None
        return ms

    # 1. Both instances join; the group's 8 tasks are split between them.
    a.wait_running(90)
    b.wait_running(90)
    verbose = wait_until("2 members owning every task, each its target assignment", lambda: reconciled(2), 90,
                         diag=diag, interval=0.5)
    t_joined = time.monotonic() - t0
    assert all(m["protocol"] == "streams" and m["topology_epoch"] == 0 for m in verbose), diag()

    # The internal topics exist now, created by rutomq, as the client asked.
    for t in internal:
        wait_for_topic(boot, t, PARTITIONS, timeout=10)
    ours = {t for t in agent_topics(boot) if t.startswith(app_id)}
    assert ours == internal, f"topics named after the application: {sorted(ours)}, expected {sorted(internal)}"
    made = agent.metrics()
    assert (made.get("rutomq_streams_internal_topics_created_total"),
            made.get("rutomq_streams_internal_topics_refused_total")) == (3, 0), made
    rep_cfg = _topic_configs(boot, repartition)
    assert (rep_cfg.get("cleanup.policy"), rep_cfg.get("retention.ms")) == ("delete", "-1"), rep_cfg
    counts_cfg = _topic_configs(boot, counts_changelog)
    assert counts_cfg.get("cleanup.policy") == "compact", counts_cfg
    win_cfg = _topic_configs(boot, windows_changelog)
    assert set(win_cfg.get("cleanup.policy", "").split(",")) == {"compact", "delete"}, win_cfg
    assert win_cfg.get("retention.ms") == str(WINDOWED_RETENTION_MS), win_cfg

    # 2. kafka-streams-groups on the running group.
    listed = tool("--list").stdout
    assert app_id in listed.split(), f"--list does not show {app_id}:\n{listed}"
    with_state = listed_states(tool("--list", "--state").stdout)
    assert with_state.get(app_id) == "Stable", f"--list --state: {with_state}\n{tool.report()}"

    out = tool("--describe", "--group", app_id, "--members").stdout
    ms = members(out, app_id)
    assert len(ms) == 2, f"2 members expected:\n{out}"
    # The process ids Streams keeps in the state directories (the topology has persistent stores).
    a_pid, b_pid = (_process_id(str(tmp_path / x), app_id) for x in ("a", "b"))
    assert sorted(m["process"] for m in ms) == sorted([a_pid, b_pid]), (
        f"the members' processes are not a's ({a_pid}) and b's ({b_pid}):\n{out}")
    for m in ms:
        assert m["active"], f"member {m['member']} has no active task:\n{out}"
        # Streams names its consumers "<application.id>-<process id>-StreamThread-<n>-consumer".
        assert m["client_id"].startswith(f"{app_id}-{m['process']}-StreamThread-"), f"client id:\n{out}"
    owned = [t for m in ms for t in m["active"]]
    assert len(owned) == len(set(owned)) == 2 * PARTITIONS and every_task(owned), (
        f"the members' active tasks are not every task once:\n{out}")
    # Both subtopologies keep state: each task has its standby on the other process.
    standbys = [t for m in ms for t in m["standby"]]
    assert len(standbys) == len(set(standbys)) and every_task(standbys), (
        f"the members' standby tasks are not every task once:\n{out}")
    assert all(not (m["active"] & m["standby"]) for m in ms), f"a member is active and standby of one task:\n{out}"

    out = tool("--describe", "--group", app_id, "--state", "--verbose").stdout
    st = state(out, app_id)
    assert st["state"] == "Stable" and st["members"] == 2, out
    assert st["coordinator"] == boot, f"coordinator {st['coordinator']}, the agent is {boot}:\n{out}"
    assert st["group_epoch"] >= 1 and st["assignment_epoch"] == st["group_epoch"], out
    epoch_two_members = st["group_epoch"]

    out = tool("--describe", "--group", app_id, "--offsets").stdout
    rows = offsets(out, app_id)
    want_tps = {(t, p) for t in (events, users, repartition) for p in range(PARTITIONS)}
    assert set(rows) == want_tps, f"--offsets rows {sorted(rows)}, expected {sorted(want_tps)}:\n{out}"
    assert all(r["lag"] >= 0 for r in rows.values()), out

    res = tool("--delete", "--group", app_id, ok=None)
    assert "is not EMPTY" in res.stdout, f"--delete of a running group:\n{res.stdout}{res.stderr}"
    assert app_id in tool("--list").stdout.split(), "the group is still there after a refused --delete"
    t_tool = time.monotonic() - t0

    # 3. The events arrive; one instance stops cleanly mid-stream, the other
    # takes its tasks over and finishes.
    failed = []

    def produce_events():
        try:
            for i in range(0, EVENTS, BATCH):
                produce_confluent(boot, events, evs[i:i + BATCH], **{"linger.ms": 5})
                time.sleep(0.25)
        except BaseException as e:  # reported below
            failed.append(e)
    producer = threading.Thread(target=produce_events, daemon=True)
    producer.start()
    wait_until(f"{STOP_AFTER} events processed", lambda: alive() or a.last_processed() + b.last_processed()
               >= STOP_AFTER, 60, diag=diag, interval=0.2)
    stopped_at = time.strftime("%H:%M:%S")  # before the stop: b may take over while a closes
    a.stop()
    apps = [b]
    b_at_stop = b.last_processed()
    assert a.last_processed() + b_at_stop < EVENTS, "all the input was processed before the stop"
    [alone] = wait_until("b alone, owning every task", lambda: reconciled(1), 60, diag=diag, interval=0.5)
    assert alone["process"] == b_pid, f"the remaining member is of process {alone['process']}, b is {b_pid}"
    t_takeover = time.monotonic() - t0

    eos = guarantee == "exactly_once_v2"
    isolation = "read_committed" if eos else "read_uncommitted"

    def complete():
        b.assert_alive()
        got_r = _updates(boot, out_regions, isolation)
        got_w = _updates(boot, out_windows, isolation)
        return all(got_r.get(k, [0])[-1] >= n for k, n in want_regions.items()) and \
            all(got_w.get(k, [0])[-1] >= n for k, n in want_windows.items())
    producer.join(timeout=60)
    assert not failed and not producer.is_alive(), f"producing the events: {failed}"
    wait_until("every count reached its number of events", complete, DONE_TIMEOUT_S, diag=diag, interval=1.0)
    t_counts = time.monotonic() - t0
    got_r = _updates(boot, out_regions, isolation)
    got_w = _updates(boot, out_windows, isolation)
    assert set(got_r) == set(want_regions), "a count per region, and no other key"
    assert set(got_w) == set(want_windows), "a count per user and window, and no other key"
    if eos:
        # Exactly once across the handover (transactional offset commits
        # of streams group members): every count's updates are 1, 2, ..., n.
        for got, want in ((got_r, want_regions), (got_w, want_windows)):
            wrong = {k: (v[:3], v[-3:], want[k]) for k, v in got.items() if v != list(range(1, want[k] + 1))}
            assert not wrong, f"counts not updated exactly once ({len(wrong)} keys): {dict(list(wrong.items())[:5])}"
    assert b.last_processed() > b_at_stop, f"b processed nothing after a stopped ({b_at_stop})\n{b.tail()}"
    # The tasks b took over start from the state its standbys kept (a
    # checkpoint with an offset), not from empty stores.
    kept = _checkpointed_after(b, stopped_at)
    assert kept & {"region-counts", "user-windows"}, (
        f"b's stores of a's former tasks did not start from its standbys' checkpoints: {kept}\n{b.tail()}")

    # b commits the input's end offsets: no lag left on the source topics.
    def caught_up():
        b.assert_alive()
        rows = offsets(tool("--describe", "--group", app_id, "--offsets", "--verbose").stdout, app_id,
                       verbose=True)
        src = {tp: r for tp, r in rows.items() if tp[0] in (events, users)}
        return len(src) == 2 * PARTITIONS and all(r["lag"] == 0 and r["current"] == str(r["log_end"])
                                                  for r in src.values())
    wait_until("lag 0 on every source partition", caught_up, 30, diag=diag, interval=0.5)
    t_lag0 = time.monotonic() - t0
    out = tool("--describe", "--group", app_id, "--state", "--verbose").stdout
    st = state(out, app_id)
    assert st["state"] == "Stable" and st["members"] == 1, out
    assert st["group_epoch"] > epoch_two_members, f"the group epoch did not move when a left:\n{out}"

    # 4. Both stopped: the group is Empty, then deleted with its internal topics.
    b.stop()
    t_stopped = time.monotonic() - t0

    def empty():
        return listed_states(tool("--list", "--state").stdout).get(app_id) == "Empty"
    wait_until("the group Empty in --list --state", empty, 30, diag=tool.report, interval=0.5)
    res = tool("--describe", "--group", app_id, "--state")
    assert f"Streams group '{app_id}' has no active members." in res.stdout, res.stdout
    st = state(res.stdout, app_id, verbose=False)
    assert (st["state"], st["members"]) == ("Empty", 0), res.stdout

    # Offsets of the empty group: reset to the earliest (OffsetCommit with
    # no member, epoch -1), then deleted (OffsetDelete).
    ends = committed_confluent(boot, app_id, events, range(PARTITIONS))
    assert all(o > 0 for o in ends.values()), f"committed offsets before the reset: {ends}"
    res = tool("--reset-offsets", "--group", app_id, "--input-topic", events, "--to-earliest", "--execute")
    assert committed_confluent(boot, app_id, events, range(PARTITIONS)) == {p: 0 for p in range(PARTITIONS)}, (
        f"--reset-offsets --to-earliest:\n{res.stdout}{res.stderr}")
    res = tool("--delete-offsets", "--group", app_id, "--input-topic", events)
    left = committed_confluent(boot, app_id, events, range(PARTITIONS))
    assert all(o < 0 for o in left.values()), f"--delete-offsets left {left}:\n{res.stdout}{res.stderr}"
    kept_users = committed_confluent(boot, app_id, users, range(PARTITIONS))
    assert all(o >= 0 for o in kept_users.values()), f"the other input's offsets went too: {kept_users}"

    res = tool("--delete", "--group", app_id, "--delete-all-internal-topics")
    out = res.stdout + res.stderr
    assert f"Deletion of requested streams groups ('{app_id}') was successful." in out, out
    assert f"Deletion of associated internal topics of the streams groups ('{app_id}') was successful." in out, out
    for t in internal:
        wait_topic_absent(boot, t, timeout=30)
    wait_for_topic(boot, users, PARTITIONS, timeout=10)  # a source topic: not the group's to delete
    listed = tool("--list").stdout
    assert app_id not in listed.split(), f"--list still shows the deleted group:\n{listed}"
    res = tool("--describe", "--group", app_id, "--state", ok=False)
    assert "GroupIdNotFoundException" in res.stdout + res.stderr, res.stdout + res.stderr
    print(f"timings (s from the start of the instances): both owning tasks {t_joined:.1f}, "
          f"tool checks {t_tool:.1f}, takeover {t_takeover:.1f}, counts complete {t_counts:.1f}, "
          f"lag 0 {t_lag0:.1f}, both stopped {t_stopped:.1f}, end {time.monotonic() - t0:.1f}")


@pytest.mark.timeout(180)
def test_streams_protocol_missing_source_topic(start_agent, streams, tmp_path):
    agent = start_agent(extra_args=agent_args(), auto_create_topics=False)
    base = unique_topic("ssg-missing")
    missing = base + "-in"
    app = streams("missing", ["--bootstrap", agent.bootstrap, "--application-id", base + "-app",
                              "--state-dir", str(tmp_path / "missing"), "--input", missing,
                              "--out-fizz", base + "-fizz", "--out-rest", base + "-rest",
                              "--group-protocol", "streams"])
    try:
        rc = app.proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the application still runs 90 s after its start without its source topic "
                             f"{missing}:\n{app.tail()}")
    log = app.log_text()
    lines = [ln for ln in log.splitlines() if "MissingSourceTopicException" in ln]
    assert rc != 0 and lines, (f"exit code {rc}; no MissingSourceTopicException in the log of an application "
                               f"without its source topic:\n{app.tail()}")
    named = [ln for ln in log.splitlines() if "Missing source topics" in ln and missing in ln]
    assert named, f"the missing topic {missing} is not named in the error:\n{app.tail()}"
    assert missing not in agent_topics(agent.bootstrap), "the missing source topic was created"
