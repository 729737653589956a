# What this proves: share groups (KIP-932, "Kafka queues") work with Java's
# KafkaShareConsumer (kafka-clients 4.2.0), unchanged. Three consumers of
# one share group on a topic of ONE partition each get records, and no
# record goes to two of them; every record is delivered; a record a
# consumer releases comes again with delivery count 2; records a consumer
# holds without acknowledging go to another consumer once their
# acquisition lock runs out (share.record.lock.duration.ms, a group
# config set with kafka-configs, 3 s: within the bounds of an agent with
# --group-share-min-record-lock-duration-ms 1000), with delivery count 2; /metrics counts
# the records handed out and handed out again; a read_committed share
# group never gets an aborted transaction's records. Kafka's
# kafka-share-groups lists the group and describes its members.
# How: one agent; tests/share/ShareConsume.java compiled against the
# kafka-tools 4.2.0 jars (tests/clients/run.sh tools), run as separate
# processes; records produced with confluent-kafka.

import os
import subprocess
import threading
import time

import pytest
from confluent_kafka import Producer

from kafkautil import create_topic, kafka_tool, unique_topic, wait_until
from test_java_go import roundtrip_clients  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(300)

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SOURCE = os.path.join(REPO_ROOT, "tests", "share", "ShareConsume.java")


@pytest.fixture(scope="session")
def share_consumer(request):
    """The compiled ShareConsume program: the classpath to run it with."""
    request.getfixturevalue("roundtrip_clients")  # builds the kafka-tools jars
    lib = os.path.join(REPO_ROOT, "tests", ".cache", "kafka-tools-4.2.0")
    out = os.path.join(REPO_ROOT, "tests", ".cache", "share-consume")
    os.makedirs(out, exist_ok=True)
    subprocess.run(["javac", "-d", out, "-cp", os.path.join(lib, "*"), SOURCE], check=True, timeout=120)
    return f"{out}:{os.path.join(lib, '*')}"


class Consumer:
    """One ShareConsume process; its output lines gathered as they come."""

    def __init__(self, classpath, boot, group, topic, mode, idle_ms=4000, deadline_ms=90000):
        self.proc = subprocess.Popen(
            ["java", "-XX:+UseSerialGC", "-cp", classpath, "ShareConsume", boot, group, topic, mode,
             str(idle_ms), str(deadline_ms)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def ready(self):
        return "READY" in self.lines

    def records(self):
        """(offset, delivery count, value) of each record it got."""
        out = []
        for ln in list(self.lines):
            if ln.startswith("REC "):
                _, _, offset, count, value = ln.split(" ", 4)
                out.append((int(offset), int(count), value))
        return out

    def finish(self, timeout=120):
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self.reader.join(5)
        err = self.proc.stderr.read()
        assert self.proc.returncode == 0, f"ShareConsume exited {self.proc.returncode}:\n{err[-3000:]}"
        return self.records()


def produce(boot, topic, n, prefix):
    """n records in batches of 5: a share fetch acquires whole batches (as
    Kafka's does), so small batches let several consumers share them."""
    p = Producer({"bootstrap.servers": boot, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, f"{prefix}-{i}".encode(), partition=0)
        if i % 5 == 4:
            assert p.flush(30) == 0
    assert p.flush(30) == 0


def test_share_consumers_split_one_partition(agent, share_consumer, request):
    run_sh = request.getfixturevalue("roundtrip_clients")
    boot = agent.bootstrap
    topic, group = unique_topic("share"), unique_topic("queue")
    create_topic(boot, topic, partitions=1)
    # share.auto.offset.reset is latest: the consumers join first.
    consumers = [Consumer(share_consumer, boot, group, topic, "accept") for _ in range(3)]
    wait_until("three consumers polling", lambda: all(c.ready() for c in consumers), 60,
               diag=lambda: [c.lines[-3:] for c in consumers])
    members = kafka_tool(run_sh, "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
                         "--bootstrap-server", boot, "--describe", "--group", group, "--members").stdout
    assert members.count(topic) >= 3, members
    listed = kafka_tool(run_sh, "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
                        "--bootstrap-server", boot, "--list").stdout
    assert group in listed.split(), listed
    produce(boot, topic, 300, "r")
    got = [c.finish() for c in consumers]
    offsets = [o for recs in got for (o, _, _) in recs]
    assert sorted(offsets) == list(range(300)), "every record once across the consumers"
    assert all(len(recs) > 0 for recs in got), [len(r) for r in got]
    assert all(count == 1 for recs in got for (_, count, _) in recs)

    # The group is empty now: Kafka's tool shows, resets and deletes its
    # start offsets (DescribeShareGroupOffsets, AlterShareGroupOffsets,
    # DeleteShareGroupOffsets), then deletes the group (DeleteGroups).
    def tool(*args, ok=True):
        res = kafka_tool(run_sh, "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
                         "--bootstrap-server", boot, *args, ok=ok)
        return res.stdout + res.stderr

    def start_offset():
        for ln in tool("--describe", "--group", group).splitlines():
            cols = ln.split()
            if topic in cols:
                return cols[cols.index(topic) + 2]
        return None

    wait_until("the group empty", lambda: "Empty" in tool("--describe", "--group", group, "--state"), 30)
    assert start_offset() == "300"
    out = tool("--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert topic in out, out
    assert start_offset() == "0"
    tool("--delete-offsets", "--group", group, "--topic", topic)
    assert start_offset() in (None, "-"), tool("--describe", "--group", group)
    tool("--delete", "--group", group)
    assert group not in tool("--list").split()


def test_released_and_expired_records_come_again(start_agent, share_consumer, request):
    run_sh = request.getfixturevalue("roundtrip_clients")
    # Kafka's read-only group.share.min.record.lock.duration.ms (15 s by
    # default) lowered, as librdkafka's test cluster lowers it: a group may
    # then ask for a 3 s lock.
    agent = start_agent(extra_args=["--group-share-min-record-lock-duration-ms", "1000"])
    boot = agent.bootstrap
    topic, group = unique_topic("share"), unique_topic("queue")
    create_topic(boot, topic, partitions=1)
    kafka_tool(run_sh, "kafka.admin.ConfigCommand", "--bootstrap-server", boot, "--alter",
               "--entity-type", "groups", "--entity-name", group,
               "--add-config", "share.auto.offset.reset=earliest,share.record.lock.duration.ms=3000")
    produce(boot, topic, 20, "a")
    # Released the first time: each comes again with delivery count 2.
    c = Consumer(share_consumer, boot, group, topic, "release")
    recs = c.finish()
    first = sorted(o for (o, n, _) in recs if n == 1)
    again = sorted(o for (o, n, _) in recs if n == 2)
    assert first == list(range(20)) and again == list(range(20)), recs
    # Held without acknowledging: another consumer gets them after the lock.
    produce(boot, topic, 10, "b")
    holder = Consumer(share_consumer, boot, group, topic, "hold", deadline_ms=40000)
    wait_until("the holder got records", lambda: holder.records(), 60, diag=lambda: holder.lines[-5:])
    held = sorted(o for (o, _, _) in holder.records())
    started = time.time()
    other = Consumer(share_consumer, boot, group, topic, "accept", idle_ms=20000, deadline_ms=60000)
    recs = other.finish()
    took = time.time() - started
    # Count 2, or more when the holder, still polling, took them again as
    # their lock ran out before this consumer asked (a race the test does
    # not decide: seen once on a loaded machine).
    redelivered = sorted(o for (o, n, _) in recs if n >= 2)
    assert set(held) <= set(redelivered), (held, recs)
    assert took >= 2, f"the held records came back after {took:.1f}s, before their lock ran out"
    assert sorted(o for (o, _, _) in recs) == list(range(20, 30))
    holder.proc.kill()
    # The agent counts what it handed out again.
    m = agent.metrics()
    assert m.get("rutomq_share_records_redelivered_total", 0) >= 20 + len(held), m
    assert m.get("rutomq_share_records_acquired_total", 0) >= 40 + len(held), m


def test_read_committed_share_group_skips_aborted_records(agent, share_consumer, request):
    """share.isolation.level=read_committed: records of an aborted
    transaction are never delivered; those of a committed one are."""
    from confluent_kafka import Producer as TxnProducer
    run_sh = request.getfixturevalue("roundtrip_clients")
    boot = agent.bootstrap
    topic, group = unique_topic("share"), unique_topic("queue")
    create_topic(boot, topic, partitions=1)
    kafka_tool(run_sh, "kafka.admin.ConfigCommand", "--bootstrap-server", boot, "--alter",
               "--entity-type", "groups", "--entity-name", group,
               "--add-config", "share.auto.offset.reset=earliest,share.isolation.level=read_committed")
    p = TxnProducer({"bootstrap.servers": boot, "transactional.id": unique_topic("txn")})
    p.init_transactions(30)
    for outcome in ("abort", "commit"):
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, f"{outcome}-{i}".encode(), partition=0)
        p.flush(30)
        if outcome == "abort":
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    recs = Consumer(share_consumer, boot, group, topic, "accept").finish()
    values = sorted(v for (_, _, v) in recs)
    assert values == [f"commit-{i}" for i in range(5)], recs
