# What this proves: rutomq coordinates classic Kafka consumer groups
# (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
# OffsetFetch, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete) the way
# Apache Kafka does, for unmodified clients:
#  - churn under continuous produce (librdkafka, then kafka-python): members
#    join one by one, one is SIGKILLed (no LeaveGroup: its session expires),
#    one closes cleanly (LeaveGroup: no waiting for a session timeout); the
#    assignment converges to the survivors, every produced record is
#    processed, a partition's next owner starts exactly at its last committed
#    offset, and a record is only ever processed twice when its first
#    processing was not committed;
#  - a new member of a group resumes at the committed offsets (and their
#    metadata), also as seen by Consumer.committed(), librdkafka's and
#    kafka-python's admin clients;
#  - static membership (group.instance.id): a member killed and restarted
#    within its session timeout gets its partitions back and the other member
#    sees no rebalance;
#  - with two agents on one database, the group survives the loss (graceful
#    stop or kill -9) of the agent that coordinates it: another agent takes it
#    over, the consumers go on and consume every record; the agent that does
#    not coordinate a group answers NOT_COORDINATOR;
#  - admin: ListGroups with a states filter, DescribeGroups (members,
#    assignments, assignor, state, coordinator), DeleteGroups (NON_EMPTY_GROUP,
#    GROUP_ID_NOT_FOUND), AlterConsumerGroupOffsets, OffsetDelete
#    (GROUP_SUBSCRIBED_TO_TOPIC while subscribed);
#  - error codes at the wire level: MEMBER_ID_REQUIRED, INVALID_SESSION_TIMEOUT
#    (bounds 6000..1800000 ms), REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION,
#    UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, UNKNOWN_TOPIC_OR_PARTITION, and
#    simple (generation -1) commits accepted only by a group without members.
# How: group members run as subprocesses (tools/group_consumer.py) that log
# every rebalance callback, every processed (partition, offset, record index)
# and every commit the broker accepted, as JSON lines with CLOCK_MONOTONIC
# times; the tests replay those logs against what the producer's delivery
# reports say was written. Agents run with --group-initial-rebalance-delay-ms
# 300. Raw requests use a hand-written codec on kwire's primitives, at the
# non-flexible versions librdkafka uses (FindCoordinator v2, JoinGroup v5,
# SyncGroup v3, Heartbeat v3, LeaveGroup v3, OffsetCommit v7, OffsetFetch v5,
# OffsetDelete v0). Run with -s to see the rebalance times. Every test but the
# two-agent failover also passes against Apache Kafka 4.1.1
# (RUTOMQ_BIN=tests/e2e/tools/kafka-as-rutomq), which checks the expectations.

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict

import pytest
from confluent_kafka import (Consumer, ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError,
                             KafkaException, TopicPartition)

import kwire
from kafkautil import (Rec, StreamProducer, admin, cluster_metadata, committed_confluent, create_topic,
                       finish_producing, high_watermarks, make_value, produce_confluent, producing,
                       unique_topic, wait_until)

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "tools", "group_consumer.py")
GROUP_ARGS = ["--group-initial-rebalance-delay-ms", "300"]
SESSION_S = 6.0  # the workers' default session.timeout.ms (Kafka's minimum)

# Kafka error codes
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
GROUP_SUBSCRIBED_TO_TOPIC = 86



# --------------------------------------------------------------------------
# raw group protocol (request/response layouts from https://kafka.apache.org/protocol)

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
OFFSET_COMMIT, OFFSET_FETCH, OFFSET_DELETE = 8, 9, 47


def _bytes(r):
    n = r.i32()
    return None if n < 0 else r.take(n)


def consumer_subscription(topics):
    """ConsumerProtocolSubscription v0: version, topics, user_data."""
    return kwire.i16(0) + kwire.array(topics, kwire.string) + kwire.bytes_(None)


def consumer_assignment(parts):
    """ConsumerProtocolAssignment v0: version, [topic, [partition]], user_data."""
    return (kwire.i16(0)
            + kwire.array(sorted(parts.items()),
                          lambda t: kwire.string(t[0]) + kwire.array(sorted(t[1]), kwire.i32))
            + kwire.bytes_(None))


class GroupWire:
    """One blocking connection speaking the group APIs at fixed versions."""

    def __init__(self, bootstrap, timeout=30.0):
        self.conn = kwire.KafkaConn.to(bootstrap, timeout)

    def close(self):
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, key, version, body):
        cid = self.conn.next_cid()
        self.conn.send(kwire.frame(kwire.request_header(key, version, cid) + body))
        r = kwire.Reader(self.conn.recv_frame())
        got = r.i32()
        if got != cid:
            raise kwire.ProtocolError(f"api {key} v{version}: correlation id {got}, sent {cid}")
        return r

    def find_coordinator(self, group):
        """v2 -> (error, node_id, host, port)"""
        r = self._call(FIND_COORDINATOR, 2, kwire.string(group) + kwire.i8(0))
        r.i32()  # throttle
        err = r.i16()
        r.string()  # error message
        node, host, port = r.i32(), r.string(), r.i32()
        r.expect_end("FindCoordinator v2 response")
        return err, node, host, port

    def wait_coordinator(self, group, timeout=30.0):
        """FindCoordinator until it answers without error (COORDINATOR_NOT_AVAILABLE
        and COORDINATOR_LOAD_IN_PROGRESS are retriable, as for clients)."""
        deadline = time.monotonic() + timeout
        while True:
            res = self.find_coordinator(group)
            if res[0] not in (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) \
                    or time.monotonic() > deadline:
                return res
            time.sleep(0.2)

    def join(self, group, member_id="", instance_id=None, session_ms=10000, rebalance_ms=10000,
             topics=("t",), protocols=("range",)):
        """v5 -> dict(error, generation, protocol, leader, member_id, members=[(id, instance, metadata)])"""
        meta = consumer_subscription(list(topics))
        body = (kwire.string(group) + kwire.i32(session_ms) + kwire.i32(rebalance_ms)
                + kwire.string(member_id) + kwire.string(instance_id) + kwire.string("consumer")
                + kwire.array(protocols, lambda p: kwire.string(p) + kwire.bytes_(meta)))
        r = self._call(JOIN_GROUP, 5, body)
        r.i32()  # throttle
        out = dict(error=r.i16(), generation=r.i32(), protocol=r.string(), leader=r.string(),
                   member_id=r.string())
        out["members"] = r.array(lambda x: (x.string(), x.string(), _bytes(x)))
        r.expect_end("JoinGroup v5 response")
        out["metadata_sent"] = meta
        return out

    def sync(self, group, generation, member_id, assignments, instance_id=None):
        """v3; assignments [(member_id, bytes)] -> (error, assignment bytes)"""
        body = (kwire.string(group) + kwire.i32(generation) + kwire.string(member_id)
                + kwire.string(instance_id)
                + kwire.array(assignments, lambda a: kwire.string(a[0]) + kwire.bytes_(a[1])))
        r = self._call(SYNC_GROUP, 3, body)
        r.i32()
        err, assignment = r.i16(), _bytes(r)
        r.expect_end("SyncGroup v3 response")
        return err, assignment

    def heartbeat(self, group, generation, member_id, instance_id=None):
        """v3 -> error"""
        r = self._call(HEARTBEAT, 3, kwire.string(group) + kwire.i32(generation) + kwire.string(member_id)
                       + kwire.string(instance_id))
        r.i32()
        err = r.i16()
        r.expect_end("Heartbeat v3 response")
        return err

    def leave(self, group, members):
        """v3; members [(member_id, instance_id)] -> (error, [(member_id, instance_id, error)])"""
        r = self._call(LEAVE_GROUP, 3, kwire.string(group) + kwire.array(
            members, lambda m: kwire.string(m[0]) + kwire.string(m[1])))
        r.i32()
        err = r.i16()
        res = r.array(lambda x: (x.string(), x.string(), x.i16()))
        r.expect_end("LeaveGroup v3 response")
        return err, res

    def commit(self, group, generation, member_id, offsets, instance_id=None):
        """v7; offsets {topic: {partition: offset | (offset, metadata)}} -> {topic: {partition: error}}"""
        def part(item):
            p, v = item
            off, meta = v if isinstance(v, tuple) else (v, None)
            return kwire.i32(p) + kwire.i64(off) + kwire.i32(-1) + kwire.string(meta)

        body = (kwire.string(group) + kwire.i32(generation) + kwire.string(member_id)
                + kwire.string(instance_id)
                + kwire.array(offsets.items(),
                              lambda t: kwire.string(t[0]) + kwire.array(sorted(t[1].items()), part)))
        r = self._call(OFFSET_COMMIT, 7, body)
        r.i32()
        topics = r.array(lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i16()))))
        r.expect_end("OffsetCommit v7 response")
        return {t: dict(ps) for t, ps in topics}

    def fetch(self, group, topics):
        """v5; topics {topic: [partition]} or None (all) ->
        (error, {topic: {partition: (offset, leader_epoch, metadata, error)}})"""
        body = kwire.string(group) + kwire.array(
            None if topics is None else topics.items(),
            lambda t: kwire.string(t[0]) + kwire.array(t[1], kwire.i32))
        r = self._call(OFFSET_FETCH, 5, body)
        r.i32()
        res = r.array(lambda x: (x.string(), x.array(
            lambda y: (y.i32(), (y.i64(), y.i32(), y.string(), y.i16())))))
        err = r.i16()
        r.expect_end("OffsetFetch v5 response")
        return err, {t: dict(ps) for t, ps in res}

    def offset_delete(self, group, topics):
        """v0; topics {topic: [partition]} -> (error, {topic: {partition: error}})"""
        body = kwire.string(group) + kwire.array(
            topics.items(), lambda t: kwire.string(t[0]) + kwire.array(t[1], kwire.i32))
        r = self._call(OFFSET_DELETE, 0, body)
        err = r.i16()
        r.i32()
        res = r.array(lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i16()))))
        r.expect_end("OffsetDelete v0 response")
        return err, {t: dict(ps) for t, ps in res}


# --------------------------------------------------------------------------
# group members as subprocesses


class Worker:
    """One tools/group_consumer.py process and the events it logged."""

    def __init__(self, name, argv, events_path, log_path):
        self.name = name
        self.argv = argv
        self.events_path = events_path
        self.log_path = log_path
        self.proc = None
        self._pos = 0
        self._buf = b""
        self._events = []
        self._inc = -1

    def start(self):
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """SIGKILL: no LeaveGroup, no last commit."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def close(self, timeout=30.0):
        """SIGTERM: the worker calls consumer.close() (LeaveGroup) and exits 0."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
            raise AssertionError(f"{self.name}: did not exit within {timeout:.0f}s of SIGTERM\n{self.diag()}")
        assert rc == 0, f"{self.name}: exit code {rc} after SIGTERM\n{self.diag()}"
        assert self.first("closed"), f"{self.name}: exited without logging 'closed'\n{self.diag()}"

    def cleanup(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait(timeout=30)

    def events(self):
        """Every event so far (each with "inc": the incarnation = how many
        'start' events came before, counting from 0)."""
        try:
            with open(self.events_path, "rb") as f:
                f.seek(self._pos)
                data = f.read()
        except FileNotFoundError:
            return self._events
        self._pos += len(data)
        self._buf += data
        *lines, self._buf = self._buf.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            e = json.loads(line)
            if e["ev"] == "start":
                self._inc += 1
            e["inc"] = self._inc
            self._events.append(e)
        return self._events

    def of(self, *kinds):
        return [e for e in self.events() if e["ev"] in kinds]

    def first(self, kind):
        evs = self.of(kind)
        return evs[0] if evs else None

    def current(self, until=None):
        """The assignment as this process's rebalance callbacks left it (at `until`)."""
        cur = set()
        for e in self.events():
            if until is not None and e["t"] > until:
                break
            if e["ev"] == "start":
                cur = set()
            elif e["ev"] == "assign":
                cur |= set(e["parts"])
            elif e["ev"] in ("revoke", "lost"):
                cur -= set(e["parts"])
        return cur

    def rebalance_events(self):
        return self.of("assign", "revoke", "lost")

    def last_assign_t(self):
        a = self.of("assign")
        return a[-1]["t"] if a else None

    def recs(self):
        """[(t, partition, offset, idx, inc)] in processing order."""
        return [(e["t"], p, o, idx, e["inc"]) for e in self.of("recs") for p, o, idx in e["r"]]

    def commits(self):
        """[(t, {partition: next offset})] the broker accepted."""
        return [(e["t"], {int(p): o for p, o in e["offsets"].items()}) for e in self.of("commit")]

    def attempts(self):
        return [(e["t"], {int(p): o for p, o in e["offsets"].items()}) for e in self.of("committing")]

    def assign_time(self, inc, partition, before):
        """Start of the assignment session in which `partition` was processed at `before`."""
        best = None
        for e in self.of("assign"):
            if e["inc"] == inc and e["t"] <= before and partition in e["parts"]:
                best = e["t"]
        return best

    def diag(self, n_log=15):
        evs = self.events()
        state = "running" if self.alive() else f"exited rc={self.proc.returncode if self.proc else None}"
        n_recs = sum(len(e["r"]) for e in evs if e["ev"] == "recs")
        notable = [e for e in evs if e["ev"] not in ("recs", "commit", "committing")][-12:]
        last_commit = next((e for e in reversed(evs) if e["ev"] == "commit"), None)
        t0 = evs[0]["t"] if evs else 0.0

        def fmt(e):
            rest = {k: v for k, v in e.items() if k not in ("ev", "t", "wall", "name", "inc", "tb")}
            return f"    +{e['t'] - t0:7.2f}s {e['ev']} {json.dumps(rest)[:300]}"

        return (f"--- worker {self.name} ({state}, pid {self.proc.pid if self.proc else None}): "
                f"assignment {sorted(self.current())}, {n_recs} records processed, last commit "
                f"{last_commit['offsets'] if last_commit else None}\n"
                + "\n".join(fmt(e) for e in notable)
                + f"\n  log tail ({self.log_path}):\n"
                + "\n".join("    " + line for line in _tail(self.log_path, n_log).splitlines()))


def _tail(path, n):
    try:
        with open(path, "rb") as f:
            return "\n".join(f.read().decode("utf-8", "replace").splitlines()[-n:])
    except OSError as e:
        return f"<cannot read {path}: {e}>"


class Workers:
    def __init__(self, root):
        self.root = root
        os.makedirs(root, exist_ok=True)
        self.all = []

    def start(self, name, bootstrap, topic, group, *, client="confluent", conf=None, commit_interval_ms=0,
              debug=True):
        conf = dict(conf or {})
        if client == "confluent" and debug:
            conf.setdefault("debug", "cgrp")
        argv = [sys.executable, TOOL, "--bootstrap", bootstrap, "--topic", topic, "--group", group,
                "--events", os.path.join(self.root, f"{name}.events.jsonl"), "--name", name,
                "--client", client, "--commit-interval-ms", str(commit_interval_ms)]
        for k, v in conf.items():
            argv += ["--conf", f"{k}={v}"]
        w = Worker(name, argv, os.path.join(self.root, f"{name}.events.jsonl"),
                   os.path.join(self.root, f"{name}.log"))
        self.all.append(w)
        w.start()
        wait_until(f"{name} to subscribe", lambda: w.first("subscribed") or not w.alive(), 30, self.diag)
        assert w.alive(), f"{name} exited during start-up\n{self.diag()}"
        return w

    def diag(self, n_log=15):
        return "\n".join(w.diag(n_log) for w in self.all)


@pytest.fixture
def workers(request, tmp_path):
    ws = Workers(str(tmp_path / "workers"))
    failed_before = request.session.testsfailed
    yield ws
    for w in ws.all:
        w.cleanup()
    if request.session.testsfailed > failed_before and ws.all:
        print("\n===== group members =====\n" + ws.diag(n_log=40), file=sys.stderr)


def _covers(assignments, n_parts):
    """Disjoint, covering all partitions, nobody idle who could have work."""
    seen = []
    for parts in assignments.values():
        seen.extend(parts)
    if sorted(seen) != list(range(n_parts)):
        return False
    return len(assignments) > n_parts or all(assignments.values())


def wait_converged(members, n_parts, timeout, what, ws, still=1.5):
    """Wait until the running `members` hold disjoint, non-empty assignments
    covering all partitions, unchanged (no rebalance callback at all) for
    `still` seconds. Returns (assignments, time the last of them got its
    assignment)."""
    deadline = time.monotonic() + timeout
    last_sig, since = None, None
    while True:
        dead = [w.name for w in members if not w.alive()]
        assert not dead, f"{what}: member(s) {dead} exited\n{ws.diag()}"
        cur = {w.name: w.current() for w in members}
        now = time.monotonic()
        if _covers(cur, n_parts):
            sig = tuple(len(w.rebalance_events()) for w in members)
            if sig != last_sig:
                last_sig, since = sig, now
            elif now - since >= still:
                return cur, max(w.last_assign_t() for w in members)
        else:
            last_sig = None
        if now > deadline:
            raise AssertionError(f"{what}: no stable assignment of {n_parts} partitions after {timeout:.0f}s: "
                                 f"{ {k: sorted(v) for k, v in cur.items()} }\n{ws.diag()}")
        time.sleep(0.1)


def max_committed(members):
    out = {}
    for w in members:
        for _, offs in w.commits():
            for p, o in offs.items():
                out[p] = max(out.get(p, -1), o)
    return out


def wait_committed_to(members, hw, timeout, ws):
    """Wait until the members' accepted commits reach each partition's high watermark."""
    def done():
        mc = max_committed(members)
        over = {p: (o, hw[p]) for p, o in mc.items() if o > hw[p]}
        assert not over, f"commits above the high watermark (committed, hw): {over}"
        return all(mc.get(p, 0) == hw[p] for p in hw if hw[p] > 0)
    wait_until(f"commits to reach the high watermarks {hw} (so far {max_committed(members)})",
               done, timeout, ws.diag)


def check_all_processed(members, acked):
    """Every acknowledged record was processed, at its acknowledged position,
    and nothing else was."""
    proc = {}
    for w in members:
        for _, p, o, idx, _ in w.recs():
            prev = proc.setdefault((p, o), idx)
            assert prev == idx, f"({p}, {o}) read as record {prev} and as record {idx}"
    want = {pos: idx for idx, pos in acked.items()}
    missing = sorted(pos for pos in want if pos not in proc)
    wrong = [(pos, want[pos], proc[pos]) for pos in want if pos in proc and proc[pos] != want[pos]]
    extra = sorted(pos for pos in proc if pos not in want)
    assert not missing, (f"{len(missing)} of {len(want)} acknowledged records never processed by any member, "
                         f"e.g. (partition, offset) {missing[:15]}")
    assert not wrong, f"records processed at the wrong position (pos, acked idx, read idx): {wrong[:10]}"
    assert not extra, f"{len(extra)} records processed that no delivery report named: {extra[:10]}"


def unexplained_duplicates(members):
    """A record processed again is explained only by uncommitted progress: the
    re-processing member got the partition after the previous processing, and
    no commit past the record had been accepted before that assignment began
    (its OffsetFetch came after the assignment callback). Returns (number of
    re-processings, list of unexplained ones)."""
    by_pos = defaultdict(list)
    for w in members:
        for t, p, o, _, inc in w.recs():
            by_pos[(p, o)].append((t, w, inc))
    commits = defaultdict(list)
    for w in members:
        for t, offs in w.commits():
            for p, o in offs.items():
                commits[p].append((t, o, w.name))
    n, bad = 0, []
    for (p, o), lst in sorted(by_pos.items()):
        if len(lst) < 2:
            continue
        n += len(lst) - 1
        lst.sort(key=lambda x: x[0])
        for (t0, w0, inc0), (t1, w1, inc1) in zip(lst, lst[1:]):
            ta = w1.assign_time(inc1, p, t1)
            if ta is None:
                bad.append(f"({p}, {o}) processed by {w1.name} without an assignment of partition {p}")
            elif w1 is w0 and inc1 == inc0 and ta <= t0:
                bad.append(f"({p}, {o}) processed twice by {w1.name} within one assignment")
            else:
                early = [(round(t - ta, 3), c, who) for t, c, who in commits[p] if c > o and t < ta]
                if early:
                    bad.append(f"({p}, {o}) processed by {w0.name} and again by {w1.name} although offset "
                               f"{early[-1][1]} had been committed (by {early[-1][2]}) "
                               f"{-early[-1][0]:.3f}s before that assignment")
    return n, bad


def check_handover(members, departed, t_departed, parts):
    """After `departed` stopped at `t_departed` holding `parts`, the first
    record of each such partition that another member processed must be at the
    partition's committed offset: the highest commit accepted before, or the
    departed member's own last commit attempt when it died with one in flight."""
    problems = []
    for p in sorted(parts):
        committed = [o for w in members for t, offs in w.commits() if t < t_departed for q, o in offs.items() if q == p]
        base = max(committed) if committed else 0  # auto.offset.reset=earliest
        allowed = {base}
        tries = [offs[p] for t, offs in departed.attempts() if t < t_departed and p in offs]
        if tries and tries[-1] > base:
            allowed.add(tries[-1])
        after = [(t, o, w.name) for w in members if w is not departed
                 for t, q, o, _, _ in w.recs() if q == p and t > t_departed]
        if not after:
            problems.append(f"partition {p}: nobody processed it after {departed.name} left")
            continue
        t, o, who = min(after)
        if o not in allowed:
            problems.append(f"partition {p}: {who} started at offset {o} after {departed.name} left; "
                            f"the committed offset was {sorted(allowed)}")
    return problems


# --------------------------------------------------------------------------
# producing, admin



def group_offsets(bootstrap, group, timeout=15):
    """{(topic, partition): (offset, metadata)} via AdminClient.list_consumer_group_offsets."""
    adm = admin(bootstrap)
    res = adm.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                          request_timeout=timeout)[group].result(timeout + 5)
    errs = [(tp.topic, tp.partition, str(tp.error)) for tp in res.topic_partitions if tp.error is not None]
    assert not errs, f"list_consumer_group_offsets({group}) partition errors: {errs}"
    return {(tp.topic, tp.partition): (tp.offset, tp.metadata) for tp in res.topic_partitions if tp.offset >= 0}


def describe(bootstrap, group, timeout=15):
    adm = admin(bootstrap)
    return adm.describe_consumer_groups([group], request_timeout=timeout)[group].result(timeout + 5)


def fmt_description(d):
    members = [(m.member_id, m.client_id, m.host, m.group_instance_id,
                sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)) for m in d.members]
    co = d.coordinator
    return (f"group {d.group_id}: state {d.state}, assignor {d.partition_assignor!r}, simple "
            f"{d.is_simple_consumer_group}, coordinator {co.id}@{co.host}:{co.port}, members {members}")


def listing(bootstrap, states=None, timeout=15):
    """{group_id: ConsumerGroupListing} via ListGroups (with a states filter if given)."""
    adm = admin(bootstrap)
    kw = {"request_timeout": timeout}
    if states is not None:
        kw["states"] = states
    res = adm.list_consumer_groups(**kw).result(timeout + 5)
    assert not res.errors, f"list_consumer_groups errors: {res.errors}"
    return {g.group_id: g for g in res.valid}


def kafka_error_code(exc):
    err = exc.args[0] if exc.args else None
    return err.code() if isinstance(err, KafkaError) else None


def first_offsets_of_new_member(bootstrap, group, topic, parts, timeout=30, produce_to=None, **conf):
    """Join `group` with a fresh librdkafka consumer, return {partition: [offsets
    processed]} once every partition in `parts` delivered a record. If
    `produce_to` ({partition: n}) is given, those records are produced once
    the member holds its assignment (so that it can only start at the
    committed offset). Closes (LeaveGroup) without committing."""
    assigned = []
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 500, "fetch.wait.max.ms": 100, **conf})
    got = defaultdict(list)
    try:
        c.subscribe([topic], on_assign=lambda cons, tps: assigned.append(sorted(tp.partition for tp in tps)))
        deadline = time.monotonic() + timeout
        produced = produce_to is None
        while not all(got.get(p) for p in parts):
            if not produced and assigned:
                # Whether these land before or after the member fetched its committed
                # offsets, it must start at the committed offsets.
                todo = [p for p, cnt in sorted(produce_to.items()) for _ in range(cnt)]
                recs = [Rec(9_000_000 + i, b"late", make_value(9_000_000 + i, 20), [], partition=p)
                        for i, p in enumerate(todo)]
                produce_confluent(bootstrap, topic, recs)
                produced = True
            assert time.monotonic() < deadline, (
                f"new member of {group}: after {timeout}s records only from {sorted(got)} "
                f"(wanted {sorted(parts)}), assignments {assigned}")
            for m in c.consume(num_messages=500, timeout=0.2):
                if m.error() is not None:
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        raise AssertionError(f"consumer error: {m.error()}")
                    continue
                got[m.partition()].append(m.offset())
        return dict(got)
    finally:
        c.close()


def commit_simple(bootstrap, group, offsets, assign=True):
    """A group-less commit: assign() + commit(), generation -1, no member id.
    offsets [(topic, partition, offset)]; returns the committed TopicPartitions
    or raises KafkaException."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = [TopicPartition(t, p, o) for t, p, o in offsets]
        if assign:
            c.assign([TopicPartition(t, p) for t, p, _ in offsets])
        return c.commit(offsets=tps, asynchronous=False)
    finally:
        c.close()


def wait_brokers(agents, timeout=30):
    ports = sorted(a.port for a in agents)
    for a in agents:
        wait_until(f"Metadata from {a.name} to list all {len(agents)} agents",
                   lambda a=a: sorted(b.port for b in cluster_metadata(a.bootstrap).brokers.values()) == ports,
                   timeout, interval=0.3)


# --------------------------------------------------------------------------
# tests


# KIP-848 groups take their session timeout and heartbeat interval from the
# broker: the same 6 s session as the classic workers ask for.
CONSUMER_PROTOCOL_ARGS = ["--group-consumer-session-timeout-ms", "6000",
                          "--group-consumer-heartbeat-interval-ms", "500"]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_churn_no_loss_librdkafka(start_agent, workers, protocol):
    a = start_agent(extra_args=GROUP_ARGS + CONSUMER_PROTOCOL_ARGS)
    wconf = {"group.protocol": protocol}
    n = 12
    topic, group = unique_topic("grp-churn"), unique_topic("g-churn")
    create_topic(a.bootstrap, topic, n)
    with producing(StreamProducer(a.bootstrap, topic, partitions=n, rate_per_sec=300)) as prod:
        prod.wait_acked(100, 30, "records before the first member joins")
        # The member that will be SIGKILLed commits only once a second, so that it
        # dies holding processed but uncommitted records.
        victim = workers.start("victim", a.bootstrap, topic, group, conf=wconf, commit_interval_ms=1000)
        _, t = wait_converged([victim], n, 30, "1 member", workers)
        print(f"\nfirst member assigned {t - victim.first('subscribed')['t']:.2f} s after subscribe()")
        leaver = workers.start("leaver", a.bootstrap, topic, group, conf=wconf)
        _, t = wait_converged([victim, leaver], n, 30, "2 members", workers)
        print(f"rebalance time for 2 members: {t - leaver.first('subscribed')['t']:.2f} s")
        survivor = workers.start("survivor", a.bootstrap, topic, group, conf=wconf)
        three, t = wait_converged([victim, leaver, survivor], n, 30, "3 members", workers)
        rebalance3 = t - survivor.first("subscribed")["t"]
        print(f"rebalance time for 3 members: {rebalance3:.2f} s (third subscribe() to the last "
              f"assignment callback of a stable assignment {({k: sorted(v) for k, v in three.items()})})")
        members = [victim, leaver, survivor]
        wait_until("every member to commit under load",
                   lambda: all(w.commits() and w.commits()[-1][0] > t for w in members), 20, workers.diag)

        victim_parts = victim.current()
        t_kill = time.monotonic()
        victim.kill()
        _, t = wait_converged([leaver, survivor], n, SESSION_S + 20, "2 members after a SIGKILL", workers)
        print(f"SIGKILLed member's partitions reassigned after {t - t_kill:.2f} s "
              f"(session.timeout.ms={SESSION_S * 1000:.0f})")
        assert t - t_kill < SESSION_S + 12, f"reassignment took {t - t_kill:.1f}s after the SIGKILL"

        leaver_parts = leaver.current()
        leaver.close()
        t_close = leaver.first("closing")["t"]
        _, t = wait_converged([survivor], n, 20, "the last member after a clean close", workers)
        print(f"cleanly closed member's partitions reassigned after {t - t_close:.2f} s")
        assert t - t_close < SESSION_S, (
            f"reassignment after a clean close took {t - t_close:.1f}s: LeaveGroup should not wait "
            f"for the {SESSION_S:.0f}s session timeout\n{workers.diag()}")
        prod.wait_acked(prod.acked_count() + 300, 30, "records for the last member alone")
        acked = finish_producing(prod)

    hw = high_watermarks(a.bootstrap, topic, n, acked)
    wait_committed_to([survivor], hw, 30, workers)  # the survivor consumed everything
    assert survivor.current() == set(range(n)), f"survivor holds {sorted(survivor.current())}"
    check_all_processed(members, acked)
    dups, bad = unexplained_duplicates(members)
    assert not bad, f"{len(bad)} re-processings not explained by uncommitted progress:\n" + "\n".join(bad[:20])
    problems = (check_handover(members, victim, t_kill, victim_parts)
                + check_handover(members, leaver, t_close, leaver_parts))
    assert not problems, "next owners did not start at the committed offsets:\n" + "\n".join(problems)
    assert committed_confluent(a.bootstrap, group, topic, range(n)) == hw
    print(f"{len(acked)} records, {dups} processed twice (all after uncommitted progress)")


def test_group_churn_kafka_python(start_agent, workers):
    from kafka import KafkaAdminClient
    a = start_agent(extra_args=GROUP_ARGS)
    n = 6
    topic, group = unique_topic("grp-kp"), unique_topic("g-kp")
    create_topic(a.bootstrap, topic, n)
    with producing(StreamProducer(a.bootstrap, topic, partitions=n, rate_per_sec=200)) as prod:
        prod.wait_acked(60, 30, "records before the first member joins")
        members = []
        print()
        for i in range(3):
            members.append(workers.start(f"kp{i}", a.bootstrap, topic, group, client="kafka-python"))
            _, t = wait_converged(members, n, 40, f"{i + 1} kafka-python members", workers)
            print(f"rebalance time for {i + 1} kafka-python members: "
                  f"{t - members[-1].first('subscribed')['t']:.2f} s")
        wait_until("every member to commit", lambda: all(w.commits() and w.commits()[-1][0] > t for w in members),
                   20, workers.diag)
        leaver = members[0]
        leaver_parts = leaver.current()
        leaver.close()
        t_close = leaver.first("closing")["t"]
        _, t = wait_converged(members[1:], n, 30, "2 members after a clean close", workers)
        assert t - t_close < SESSION_S, (
            f"reassignment after a clean close took {t - t_close:.1f}s: LeaveGroup should not wait "
            f"for the session timeout\n{workers.diag()}")
        prod.wait_acked(prod.acked_count() + 200, 30, "records after the close")
        acked = finish_producing(prod)

    hw = high_watermarks(a.bootstrap, topic, n, acked)
    wait_committed_to(members[1:], hw, 30, workers)
    check_all_processed(members, acked)
    dups, bad = unexplained_duplicates(members)
    assert not bad, f"{len(bad)} re-processings not explained by uncommitted progress:\n" + "\n".join(bad[:20])
    problems = check_handover(members, leaver, t_close, leaver_parts)
    assert not problems, "next owners did not start at the committed offsets:\n" + "\n".join(problems)

    kadm = KafkaAdminClient(bootstrap_servers=[a.bootstrap], request_timeout_ms=30000)
    try:
        offs = kadm.list_consumer_group_offsets(group)
        got = {tp.partition: om.offset for tp, om in offs.items() if tp.topic == topic}
        assert got == hw, f"kafka-python list_consumer_group_offsets {got} != high watermarks {hw}"
        for w in members[1:]:
            w.close()

        def empty():
            info = kadm.describe_consumer_groups([group])[0]
            return info if info.state == "Empty" and not info.members else None
        wait_until("the group to be Empty after every member closed", empty, 20,
                   lambda: str(kadm.describe_consumer_groups([group])))
    finally:
        kadm.close()
    print(f"{len(acked)} records, {dups} processed twice (all after uncommitted progress)")


def test_resume_at_committed_offsets(agent):
    from kafka import KafkaAdminClient
    n, per = 4, 100
    topic, group = unique_topic("grp-resume"), unique_topic("g-resume")
    create_topic(agent.bootstrap, topic, n)
    produce_confluent(agent.bootstrap, topic,
                      [Rec(p * per + i, b"k", make_value(p * per + i, 30), [], partition=p)
                       for p in range(n) for i in range(per)])
    target = {0: 13, 1: 42, 2: 77, 3: per}  # partition 3: committed at the high watermark

    c = Consumer({"bootstrap.servers": agent.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                  "heartbeat.interval.ms": 500, "fetch.wait.max.ms": 100})
    try:
        c.subscribe([topic])
        seen = defaultdict(int)
        deadline = time.monotonic() + 30
        while any(seen[p] < target[p] for p in range(n)):
            assert time.monotonic() < deadline, f"first member read only {dict(seen)} records per partition"
            for m in c.consume(num_messages=500, timeout=0.2):
                if m.error() is None:
                    seen[m.partition()] = max(seen[m.partition()], m.offset() + 1)
        res = c.commit(offsets=[TopicPartition(topic, p, o, metadata=f"meta-{p}") for p, o in target.items()],
                       asynchronous=False)
        assert all(tp.error is None for tp in res), f"commit errors: {[(tp.partition, tp.error) for tp in res]}"
        mine = c.committed([TopicPartition(topic, p) for p in range(n)], timeout=10)
        assert {tp.partition: tp.offset for tp in mine} == target, (
            f"the committing member reads back {[(tp.partition, tp.offset) for tp in mine]}, committed {target}")
    finally:
        c.close()

    assert committed_confluent(agent.bootstrap, group, topic, range(n)) == target
    got = group_offsets(agent.bootstrap, group)
    assert got == {(topic, p): (o, f"meta-{p}") for p, o in target.items()}, (
        f"list_consumer_group_offsets {got}, committed {target} with metadata meta-<p>")
    kadm = KafkaAdminClient(bootstrap_servers=[agent.bootstrap], request_timeout_ms=30000)
    try:
        # confluent-kafka sends the metadata string with its C terminator (Kafka
        # stores "meta-0\0" too); librdkafka strips it when reading, kafka-python not.
        kp = {tp.partition: (om.offset, om.metadata.rstrip("\x00"))
              for tp, om in kadm.list_consumer_group_offsets(group).items()}
    finally:
        kadm.close()
    assert kp == {p: (o, f"meta-{p}") for p, o in target.items()}, f"kafka-python sees {kp}"

    # A new member of the group resumes exactly there; partition 3 (committed
    # at its high watermark) delivers only records written after it joined.
    read = first_offsets_of_new_member(agent.bootstrap, group, topic, range(n), produce_to={3: 5})
    for p in range(n):
        end = per + 5 if p == 3 else per
        assert read[p][0] == target[p], f"partition {p}: new member started at {read[p][0]}, committed {target[p]}"
        assert read[p] == list(range(target[p], target[p] + len(read[p]))), (
            f"partition {p}: offsets not contiguous from the committed one: {read[p][:20]}")
        assert read[p][-1] < end


def test_static_membership_restart_keeps_assignment(start_agent, workers):
    a = start_agent(extra_args=GROUP_ARGS)
    n = 4
    session_s = 10.0
    topic, group = unique_topic("grp-static"), unique_topic("g-static")
    create_topic(a.bootstrap, topic, n)
    conf = {nm: {"group.instance.id": f"{group}-{nm}", "session.timeout.ms": int(session_s * 1000)}
            for nm in ("a", "b")}
    with producing(StreamProducer(a.bootstrap, topic, partitions=n, rate_per_sec=100)) as prod:
        prod.wait_acked(20, 30, "first records")
        wa = workers.start("static-a", a.bootstrap, topic, group, conf=conf["a"])
        wait_converged([wa], n, 30, "1 static member", workers)
        wb = workers.start("static-b", a.bootstrap, topic, group, conf=conf["b"])
        before, _ = wait_converged([wa, wb], n, 30, "2 static members", workers)
        wait_until("both members to commit", lambda: wa.commits() and wb.commits(), 20, workers.diag)
        d1 = describe(a.bootstrap, group)
        ids1 = {m.group_instance_id: m.member_id for m in d1.members}
        assert set(ids1) == {f"{group}-a", f"{group}-b"}, f"instance ids: {fmt_description(d1)}"

        b_rebalances = len(wb.rebalance_events())
        a_parts = wa.current()
        t_kill = time.monotonic()
        wa.kill()
        wa2 = workers.start("static-a-restarted", a.bootstrap, topic, group, conf=conf["a"])
        wait_until("the restarted static member to get an assignment", lambda: wa2.of("assign"),
                   session_s + 10, workers.diag)
        t_back = wa2.of("assign")[0]["t"]
        assert wa2.current() == a_parts, (
            f"restarted static member got {sorted(wa2.current())}, held {sorted(a_parts)} before\n{workers.diag()}")
        assert t_back - t_kill < session_s / 2, (
            f"restarted static member assigned {t_back - t_kill:.1f}s after the kill: it should rejoin "
            f"in place at once, not when its old session ({session_s:.0f}s) expires\n{workers.diag()}")
        print(f"\nstatic member back with its partitions {t_back - t_kill:.2f} s after SIGKILL")
        # Watch until the old instance's session would have expired (+ margin): a
        # rebalance caused by the restart or by that expiry would show in B's callbacks.
        while time.monotonic() < t_kill + session_s + 3:
            assert wb.alive() and wa2.alive(), workers.diag()
            time.sleep(0.2)
        assert len(wb.rebalance_events()) == b_rebalances, (
            f"the other static member saw a rebalance: {wb.rebalance_events()[b_rebalances:]}\n{workers.diag()}")
        assert [e["ev"] for e in wa2.rebalance_events()] == ["assign"], (
            f"restarted member's callbacks: {wa2.rebalance_events()}")
        assert wb.current() == before["static-b"]
        t_more = time.monotonic()
        wait_until("the restarted member to process and commit",
                   lambda: any(t > t_more for t, _ in wa2.commits()), 20, workers.diag)

        d2 = describe(a.bootstrap, group)
        ids2 = {m.group_instance_id: m.member_id for m in d2.members}
        assert d2.state == ConsumerGroupState.STABLE and len(d2.members) == 2, fmt_description(d2)
        assert ids2[f"{group}-b"] == ids1[f"{group}-b"], f"B's member id changed: {ids1} -> {ids2}"
        assert ids2[f"{group}-a"] != ids1[f"{group}-a"], (
            f"the restarted static member kept its old member id {ids1[f'{group}-a']}: the old incarnation "
            f"would not be fenced")
        by_instance = {m.group_instance_id: {tp.partition for tp in m.assignment.topic_partitions}
                       for m in d2.members}
        assert by_instance == {f"{group}-a": a_parts, f"{group}-b": before["static-b"]}, fmt_description(d2)
        acked = finish_producing(prod)

    members = [wa, wb, wa2]
    problems = check_handover(members, wa, t_kill, a_parts)
    assert not problems, "the restarted member did not resume at the committed offsets:\n" + "\n".join(problems)
    hw = high_watermarks(a.bootstrap, topic, n, acked)
    wait_committed_to([wa2, wb], hw, 30, workers)
    check_all_processed(members, acked)
    _, bad = unexplained_duplicates(members)
    assert not bad, "\n".join(bad[:20])


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_coordinator_agent_failover(start_agent, workers, how):
    a = start_agent(extra_args=GROUP_ARGS)
    b = start_agent(extra_args=GROUP_ARGS)  # same database and object directory: one cluster
    agents = {a.port: a, b.port: b}
    wait_brokers([a, b])
    both = f"{a.bootstrap},{b.bootstrap}"
    n = 6
    topic, group = unique_topic("grp-failover"), unique_topic("g-failover")
    create_topic(a.bootstrap, topic, n)
    conf = {"session.timeout.ms": 10000}
    with producing(StreamProducer(both, topic, partitions=n, rate_per_sec=200)) as prod:
        prod.wait_acked(50, 30, "first records")
        w1 = workers.start("fo-1", both, topic, group, conf=conf)
        w2 = workers.start("fo-2", both, topic, group, conf=conf)
        members = [w1, w2]
        _, t = wait_converged(members, n, 30, "2 members", workers)
        wait_until("both members to commit", lambda: all(w.commits() and w.commits()[-1][0] > t for w in members),
                   20, workers.diag)

        # Both agents name the same coordinator; the other one refuses the group.
        found = {}
        for ag in (a, b):
            with GroupWire(ag.bootstrap) as k:
                err, node, host, port = k.wait_coordinator(group)
            assert err == NONE, f"FindCoordinator via {ag.name}: error {err}"
            found[ag.name] = (node, port)
        assert len(set(found.values())) == 1, f"the agents disagree on the coordinator: {found}"
        port = found[a.name][1]
        assert port in agents, f"coordinator port {port} is neither agent ({a.port}, {b.port})"
        d = describe(a.bootstrap, group)
        assert d.coordinator.port == port, fmt_description(d)
        assert d.state == ConsumerGroupState.STABLE and len(d.members) == 2, fmt_description(d)
        coord = agents[port]
        other = b if coord is a else a
        with GroupWire(other.bootstrap) as k:
            err = k.heartbeat(group, 1, "nobody")
        assert err == NOT_COORDINATOR, f"Heartbeat to the non-coordinating agent: error {err}, want 16"

        acked_before = prod.acked_count()
        t_down = time.monotonic()
        if how == "stop":
            coord.stop()
        else:
            coord.kill()
        prod.wait_acked(acked_before + 600, 60, f"producing through {other.name} after {coord.name} went down")

        def moved():
            with GroupWire(other.bootstrap) as k:
                err, _, _, p = k.find_coordinator(group)
            return err == NONE and p == other.port
        wait_until(f"{other.name} to coordinate the group", moved, 45, workers.diag, interval=0.5)
        wait_until("a commit accepted after the failover",
                   lambda: any(t > t_down for w in members for t, _ in w.commits()), 60, workers.diag)
        t_commit = min(t for w in members for t, _ in w.commits() if t > t_down)
        print(f"\ncoordinator agent {how}: first commit accepted {t_commit - t_down:.2f} s later")
        acked = finish_producing(prod)

    hw = high_watermarks(other.bootstrap, topic, n, acked)
    wait_committed_to(members, hw, 60, workers)
    check_all_processed(members, acked)
    dups, bad = unexplained_duplicates(members)
    assert not bad, f"{len(bad)} re-processings not explained by uncommitted progress:\n" + "\n".join(bad[:20])
    assert committed_confluent(other.bootstrap, group, topic, range(n)) == hw

    def settled():
        d = describe(other.bootstrap, group)
        ok = (d.coordinator.port == other.port and d.state == ConsumerGroupState.STABLE
              and len(d.members) == 2)
        return d if ok else None
    wait_until("the group to be Stable with both members on the surviving agent", settled, 30,
               lambda: fmt_description(describe(other.bootstrap, group)))
    print(f"{len(acked)} records, {dups} processed twice (all after uncommitted progress)")


def test_admin_list_describe_delete_groups(start_agent, workers):
    a = start_agent(extra_args=GROUP_ARGS)
    n, per = 4, 10
    topic, group, simple = unique_topic("grp-admin"), unique_topic("g-admin"), unique_topic("g-simple")
    create_topic(a.bootstrap, topic, n)
    produce_confluent(a.bootstrap, topic, [Rec(p * per + i, b"k", make_value(p * per + i, 20), [], partition=p)
                                           for p in range(n) for i in range(per)])
    wa = workers.start("admin-a", a.bootstrap, topic, group)
    wb = workers.start("admin-b", a.bootstrap, topic, group)
    assignment, _ = wait_converged([wa, wb], n, 30, "2 members", workers)
    wait_committed_to([wa, wb], {p: per for p in range(n)}, 30, workers)
    # a group that only stores offsets (assign + commit, never joins)
    commit_simple(a.bootstrap, simple, [(topic, 0, 4)])

    stable = listing(a.bootstrap, {ConsumerGroupState.STABLE})
    assert group in stable and simple not in stable, f"ListGroups(states=Stable): {sorted(stable)}"
    assert stable[group].state == ConsumerGroupState.STABLE
    assert not stable[group].is_simple_consumer_group
    empty = listing(a.bootstrap, {ConsumerGroupState.EMPTY})
    assert simple in empty and group not in empty, f"ListGroups(states=Empty): {sorted(empty)}"
    assert empty[simple].is_simple_consumer_group, "a group with only committed offsets is a simple group"
    every = listing(a.bootstrap)
    assert {group, simple} <= set(every), f"ListGroups: {sorted(every)}"

    d = describe(a.bootstrap, group)
    assert d.state == ConsumerGroupState.STABLE, fmt_description(d)
    assert d.partition_assignor == "range", fmt_description(d)  # librdkafka's first strategy
    assert not d.is_simple_consumer_group and d.coordinator.port == a.port, fmt_description(d)
    by_client = {m.client_id: m for m in d.members}
    assert set(by_client) == {"admin-a", "admin-b"}, fmt_description(d)
    for name, m in by_client.items():
        parts = {tp.partition for tp in m.assignment.topic_partitions if tp.topic == topic}
        assert parts == assignment[name], f"{name}: described {sorted(parts)}, holds {sorted(assignment[name])}"
        assert m.member_id and "127.0.0.1" in (m.host or ""), fmt_description(d)
        assert m.group_instance_id is None, fmt_description(d)
    ds = describe(a.bootstrap, simple)
    assert ds.state == ConsumerGroupState.EMPTY and not ds.members and ds.is_simple_consumer_group, (
        fmt_description(ds))

    adm = admin(a.bootstrap)
    with pytest.raises(KafkaException) as ei:
        adm.delete_consumer_groups([group], request_timeout=15)[group].result(20)
    assert kafka_error_code(ei.value) == KafkaError.NON_EMPTY_GROUP, f"DeleteGroups on an active group: {ei.value!r}"
    with GroupWire(a.bootstrap) as k:
        err, res = k.offset_delete(group, {topic: [0]})
    assert (err, res) == (NONE, {topic: {0: GROUP_SUBSCRIBED_TO_TOPIC}}), (
        f"OffsetDelete of a subscribed topic's partition: top-level {err}, partitions {res}")

    wa.close()
    wb.close()

    def is_empty():
        d = describe(a.bootstrap, group)
        return d if d.state == ConsumerGroupState.EMPTY and not d.members else None
    wait_until("the group to be Empty once its members closed", is_empty, 20,
               lambda: fmt_description(describe(a.bootstrap, group)))
    offs = {k: v[0] for k, v in group_offsets(a.bootstrap, group).items()}
    assert offs == {(topic, p): per for p in range(n)}, f"committed offsets once the group is Empty: {offs}"

    res = adm.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 5)])],
        request_timeout=15)[group].result(20)
    assert all(tp.error is None for tp in res.topic_partitions), (
        f"AlterConsumerGroupOffsets errors: {[(tp.partition, tp.error) for tp in res.topic_partitions]}")
    offs = {k: v[0] for k, v in group_offsets(a.bootstrap, group).items()}
    assert offs == {(topic, 0): 3, (topic, 1): 5, (topic, 2): per, (topic, 3): per}, offs
    read = first_offsets_of_new_member(a.bootstrap, group, topic, [0, 1])
    assert (read[0][0], read[1][0]) == (3, 5), f"new member started at {read[0][0]} and {read[1][0]}, not 3 and 5"
    wait_until("the group to be Empty again", is_empty, 20, lambda: fmt_description(describe(a.bootstrap, group)))

    with GroupWire(a.bootstrap) as k:
        err, res = k.offset_delete(group, {topic: [1]})
    assert (err, res) == (NONE, {topic: {1: NONE}}), f"OffsetDelete on an empty group: {err}, {res}"
    offs = {k: v[0] for k, v in group_offsets(a.bootstrap, group).items()}
    assert offs == {(topic, 0): 3, (topic, 2): per, (topic, 3): per}, f"after OffsetDelete of partition 1: {offs}"

    fs = adm.delete_consumer_groups([group, simple], request_timeout=15)
    for g, f in fs.items():
        f.result(20)  # raises on error
    every = listing(a.bootstrap)
    assert group not in every and simple not in every, f"deleted groups still listed: {sorted(every)}"
    assert group_offsets(a.bootstrap, group) == {}, "a deleted group still has committed offsets"
    with pytest.raises(KafkaException) as ei:
        adm.delete_consumer_groups([group], request_timeout=15)[group].result(20)
    assert kafka_error_code(ei.value) == KafkaError.GROUP_ID_NOT_FOUND, f"deleting twice: {ei.value!r}"
    with GroupWire(a.bootstrap) as k:
        err, _ = k.offset_delete(group, {topic: [0]})
    assert err == GROUP_ID_NOT_FOUND, f"OffsetDelete on a deleted group: error {err}"


def test_offset_commit_errors(start_agent):
    a = start_agent(extra_args=GROUP_ARGS)
    topic, group, g_static = unique_topic("grp-err"), unique_topic("g-err"), unique_topic("g-fence")
    missing = unique_topic("grp-missing")
    create_topic(a.bootstrap, topic, 3)
    produce_confluent(a.bootstrap, topic, [Rec(i, b"k", make_value(i, 20), [], partition=i % 3) for i in range(30)])

    with GroupWire(a.bootstrap) as k:
        err, node, host, port = k.wait_coordinator(group)
        assert (err, port) == (NONE, a.port), f"FindCoordinator: error {err}, {node}@{host}:{port}"

        for bad_session in (5999, 1_800_001):
            j = k.join(group, session_ms=bad_session, topics=[topic])
            assert j["error"] == INVALID_SESSION_TIMEOUT, f"session {bad_session} ms: {j}"
        # JoinGroup v4+: an unknown member without an id gets one and must come back with it
        j = k.join(group, topics=[topic])
        assert j["error"] == MEMBER_ID_REQUIRED and j["member_id"], f"first JoinGroup: {j}"
        mid = j["member_id"]
        j = k.join(group, member_id=mid, topics=[topic])
        assert j["error"] == NONE and j["generation"] >= 1 and j["leader"] == mid, f"JoinGroup: {j}"
        assert j["protocol"] == "range" and j["member_id"] == mid, j
        assert [(m[0], m[1], m[2]) for m in j["members"]] == [(mid, None, j["metadata_sent"])], j["members"]
        gen = j["generation"]

        res = k.commit(group, gen, mid, {topic: {0: 1}})
        assert res == {topic: {0: REBALANCE_IN_PROGRESS}}, f"commit between JoinGroup and SyncGroup: {res}"
        mine = consumer_assignment({topic: [0, 1, 2]})
        err, got = k.sync(group, gen, mid, [(mid, mine)])
        assert (err, got) == (NONE, mine), f"SyncGroup: {err}, {got!r}"
        assert k.heartbeat(group, gen, mid) == NONE

        res = k.commit(group, gen + 1, mid, {topic: {0: 1}})
        assert res == {topic: {0: ILLEGAL_GENERATION}}, f"commit with a wrong generation: {res}"
        res = k.commit(group, gen, "nobody", {topic: {0: 1}})
        assert res == {topic: {0: UNKNOWN_MEMBER_ID}}, f"commit with an unknown member: {res}"
        res = k.commit(group, -1, "", {topic: {0: 1}})
        assert res == {topic: {0: UNKNOWN_MEMBER_ID}}, f"simple commit to a group with members: {res}"
        assert k.heartbeat(group, gen + 1, mid) == ILLEGAL_GENERATION
        assert k.heartbeat(group, gen, "nobody") == UNKNOWN_MEMBER_ID
        err, offs = k.fetch(group, {topic: [0]})
        assert err == NONE and offs[topic][0][0] == -1, f"rejected commits left an offset: {offs}"

        res = k.commit(group, gen, mid, {topic: {0: (3, "m-0"), 1: 7}, missing: {0: 1}})
        assert res == {topic: {0: NONE, 1: NONE}, missing: {0: UNKNOWN_TOPIC_OR_PARTITION}}, (
            f"commit to a known and an unknown topic: {res}")
        err, offs = k.fetch(group, {topic: [0, 1, 2]})
        assert err == NONE, f"OffsetFetch error {err}"
        got = {p: (v[0], v[2], v[3]) for p, v in offs[topic].items()}
        assert got[0] == (3, "m-0", NONE) and got[1][0] == 7 and got[1][1] in (None, "") and got[1][2] == NONE, got
        assert got[2] == (-1, got[2][1], NONE), f"never committed partition: {got[2]}"
        err, offs = k.fetch(group, None)
        assert err == NONE and {p: v[0] for p, v in offs.get(topic, {}).items()} == {0: 3, 1: 7}, (
            f"OffsetFetch of all topics: {offs}")
        assert missing not in offs

        err, res = k.leave(group, [(mid, None)])
        assert err == NONE and [(m[0], m[2]) for m in res] == [(mid, NONE)], f"LeaveGroup: {err}, {res}"
        assert k.heartbeat(group, gen, mid) == UNKNOWN_MEMBER_ID
        res = k.commit(group, -1, "", {topic: {2: 9}})
        assert res == {topic: {2: NONE}}, f"simple commit to a group without members: {res}"
        err, offs = k.fetch(group, {topic: [0, 1, 2]})
        assert {p: v[0] for p, v in offs[topic].items()} == {0: 3, 1: 7, 2: 9}, offs

        # static membership: a second incarnation with the same instance id fences the first
        j1 = k.join(g_static, instance_id="inst-1", topics=[topic])
        assert j1["error"] == NONE, f"static JoinGroup: {j1}"
        err, _ = k.sync(g_static, j1["generation"], j1["member_id"],
                        [(j1["member_id"], consumer_assignment({topic: [0, 1, 2]}))], instance_id="inst-1")
        assert err == NONE
        j2 = k.join(g_static, instance_id="inst-1", topics=[topic])
        assert j2["error"] == NONE and j2["member_id"] != j1["member_id"], f"static rejoin: {j2}"
        assert j2["generation"] == j1["generation"], f"a static rejoin of a Stable group changed the generation: {j2}"
        assert k.heartbeat(g_static, j1["generation"], j1["member_id"], "inst-1") == FENCED_INSTANCE_ID
        res = k.commit(g_static, j1["generation"], j1["member_id"], {topic: {0: 1}}, instance_id="inst-1")
        assert res == {topic: {0: FENCED_INSTANCE_ID}}, f"commit from the fenced incarnation: {res}"
        res = k.commit(g_static, j2["generation"], j2["member_id"], {topic: {0: 1}}, instance_id="inst-1")
        assert res == {topic: {0: NONE}}, f"commit from the current incarnation: {res}"
        err, res = k.leave(g_static, [("", "inst-1")])
        assert err == NONE and [m[2] for m in res] == [NONE], f"LeaveGroup by instance id: {err}, {res}"

    # librdkafka: simple commits (assign + commit) to a group that never had members
    g_simple = unique_topic("g-simple")
    res = commit_simple(a.bootstrap, g_simple, [(topic, 0, 5), (topic, 1, 6)])
    assert all(tp.error is None for tp in res), [(tp.partition, tp.error) for tp in res]
    assert committed_confluent(a.bootstrap, g_simple, topic, [0, 1, 2]) == {0: 5, 1: 6, 2: -1001}
    try:
        res = commit_simple(a.bootstrap, g_simple, [(missing, 0, 1)], assign=False)
        codes = [tp.error.code() if tp.error else None for tp in res]
    except KafkaException as e:
        codes = [kafka_error_code(e)]
    assert codes == [KafkaError.UNKNOWN_TOPIC_OR_PART], f"commit to a missing topic: {codes}"
    assert missing not in cluster_metadata(a.bootstrap).topics, "OffsetCommit created the missing topic"


# --------------------------------------------------------------------------
# KIP-848 at the wire: epochs fence heartbeats, commits and offset fetches

CONSUMER_GROUP_HEARTBEAT = 68
FENCED_MEMBER_EPOCH, UNSUPPORTED_ASSIGNOR, STALE_MEMBER_EPOCH = 110, 112, 113


def _flex_call(conn, key, version, body):
    """A flexible-version request; returns a Reader past the response header."""
    cid = conn.next_cid()
    conn.send(kwire.frame(kwire.request_header(key, version, cid, flexible=True) + body))
    r = kwire.Reader(conn.recv_frame())
    assert r.i32() == cid, f"api {key}: correlation id mismatch"
    r.tagged_fields()
    return r


def _compact_array(items, enc):
    items = list(items)
    return kwire.uvarint(len(items) + 1) + b"".join(enc(x) for x in items)


def _cgh(conn, group, member_id, epoch, topics=None, owned=None, assignor=None):
    """ConsumerGroupHeartbeat v1 -> (error, member_epoch, {topic_id: [partitions]} or None)."""
    null_array = kwire.uvarint(0)
    body = (kwire.compact_string(group) + kwire.compact_string(member_id) + kwire.i32(epoch)
            + kwire.compact_string(None) + kwire.compact_string(None)  # instance, rack
            + kwire.i32(30000 if epoch == 0 else -1)
            + (null_array if topics is None else _compact_array(topics, kwire.compact_string))
            + kwire.compact_string(None)  # regex
            + kwire.compact_string(assignor)
            + (null_array if owned is None else _compact_array(
                owned.items(), lambda t: t[0] + _compact_array(t[1], kwire.i32) + b"\x00"))
            + b"\x00")
    r = _flex_call(conn, CONSUMER_GROUP_HEARTBEAT, 1, body)
    r.i32()  # throttle
    err = r.i16()
    r.compact_string()  # message
    r.compact_string()  # member id
    epoch_now = r.i32()
    r.i32()  # heartbeat interval
    assignment = None
    if r.i8() >= 0:
        assignment = dict(r.compact_array(lambda x: (x.take(16), _tagged_after(x, x.compact_array(lambda y: y.i32())))))
        r.tagged_fields()
    r.tagged_fields()
    r.expect_end("ConsumerGroupHeartbeat v1 response")
    return err, epoch_now, assignment


def _tagged_after(r, value):
    r.tagged_fields()
    return value


def _commit_v9(conn, group, member_id, epoch, topic, partition, offset):
    """OffsetCommit v9 of one partition -> its error."""
    body = (kwire.compact_string(group) + kwire.i32(epoch) + kwire.compact_string(member_id)
            + kwire.compact_string(None)
            + _compact_array([topic], lambda t: kwire.compact_string(t) + _compact_array(
                [partition], lambda p: kwire.i32(p) + kwire.i64(offset) + kwire.i32(-1)
                + kwire.compact_string(None) + b"\x00") + b"\x00")
            + b"\x00")
    r = _flex_call(conn, OFFSET_COMMIT, 9, body)
    r.i32()
    topics = r.compact_array(lambda x: (x.compact_string(), _tagged_after(
        x, x.compact_array(lambda y: (y.i32(), _tagged_after(y, y.i16()))))))
    r.tagged_fields()
    return topics[0][1][0][1]


def _fetch_v9(conn, group, member_id, epoch, topic, partition):
    """OffsetFetch v9 of one partition -> (group error, committed offset or None)."""
    body = (_compact_array([group], lambda g: kwire.compact_string(g) + kwire.compact_string(member_id)
                           + kwire.i32(epoch)
                           + _compact_array([topic], lambda t: kwire.compact_string(t)
                                            + _compact_array([partition], kwire.i32) + b"\x00")
                           + b"\x00")
            + kwire.i8(0) + b"\x00")  # require_stable
    r = _flex_call(conn, OFFSET_FETCH, 9, body)
    r.i32()

    def group_(x):
        x.compact_string()
        topics = x.compact_array(lambda t: (t.compact_string(), _tagged_after(t, t.compact_array(
            lambda p: (p.i32(), p.i64(), p.i32(), p.compact_string(), _tagged_after(p, p.i16()))))))
        err = x.i16()
        x.tagged_fields()
        return err, topics

    groups = r.compact_array(group_)
    r.tagged_fields()
    err, topics = groups[0]
    return err, (topics[0][1][0][1] if topics else None)


def test_consumer_protocol_epochs_at_the_wire(start_agent):
    a = start_agent(extra_args=GROUP_ARGS)
    topic, group = unique_topic("k848-wire"), unique_topic("g-k848-wire")
    create_topic(a.bootstrap, topic, 2)
    member = "m-" + group
    conn = kwire.KafkaConn.to(a.bootstrap, 30.0)
    try:
        err, _, _ = _cgh(conn, group, member, 0, topics=[topic], owned={}, assignor="nope")
        assert err == UNSUPPORTED_ASSIGNOR, err
        err, epoch, assignment = _cgh(conn, group, member, 0, topics=[topic], owned={})
        assert err == NONE and epoch >= 1, (err, epoch)
        assert sorted(p for ps in assignment.values() for p in ps) == [0, 1], assignment
        # A wrong epoch is fenced; the right one keeps the member.
        assert _cgh(conn, group, member, epoch + 5)[0] == FENCED_MEMBER_EPOCH
        assert _cgh(conn, group, member, epoch, owned=assignment)[:2] == (NONE, epoch)
        # Commits and fetches carry the member epoch.
        assert _commit_v9(conn, group, member, epoch - 1, topic, 0, 5) == STALE_MEMBER_EPOCH
        assert _commit_v9(conn, group, "nobody", epoch, topic, 0, 5) == UNKNOWN_MEMBER_ID
        assert _commit_v9(conn, group, member, epoch, topic, 0, 5) == NONE
        assert _fetch_v9(conn, group, member, epoch - 1, topic, 0)[0] == STALE_MEMBER_EPOCH
        assert _fetch_v9(conn, group, member, epoch, topic, 0) == (NONE, 5)
        # Leaving: epoch -1 answers -1 and the member is gone.
        assert _cgh(conn, group, member, -1)[:2] == (NONE, -1)
        assert _cgh(conn, group, member, epoch)[0] == UNKNOWN_MEMBER_ID
        assert _fetch_v9(conn, group, member, epoch, topic, 0)[0] == UNKNOWN_MEMBER_ID
    finally:
        conn.close()


def test_consumer_protocol_regex_subscription(start_agent):
    """A KIP-848 member subscribed by regular expression gets the matching
    topics, including one created after it joined, and not the others."""
    a = start_agent(extra_args=GROUP_ARGS + CONSUMER_PROTOCOL_ARGS)
    prefix = unique_topic("rx")
    first, later, other = f"{prefix}-a", f"{prefix}-b", unique_topic("rx-other")
    for t in (first, other):
        create_topic(a.bootstrap, t, 2)
    produce_confluent(a.bootstrap, first, [Rec(i, b"k", make_value(i, 20), []) for i in range(10)])
    produce_confluent(a.bootstrap, other, [Rec(i, b"k", make_value(i, 20), []) for i in range(10)])
    c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": unique_topic("g-rx"),
                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                  "topic.metadata.refresh.interval.ms": 1000})
    got = defaultdict(int)
    try:
        c.subscribe([f"^{prefix}-.*"])
        deadline = time.monotonic() + 30
        created = False
        while not (got[first] == 10 and got[later] == 10):
            assert time.monotonic() < deadline, f"consumed {dict(got)} (want 10 of {first} and {later})"
            if got[first] == 10 and not created:
                create_topic(a.bootstrap, later, 1)
                produce_confluent(a.bootstrap, later, [Rec(i, b"k", make_value(i, 20), []) for i in range(10)])
                created = True
            for m in c.consume(num_messages=100, timeout=0.2):
                if m.error() is None:
                    got[m.topic()] += 1
        assert got[other] == 0, f"a topic outside the regex was consumed: {dict(got)}"
    finally:
        c.close()
