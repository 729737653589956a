# What this proves: Apache Kafka's own command-line tools (the kafka-tools
# 4.2.0 artifact, run unchanged as a user runs them) work against rutomq for
# the APIs of issue 18's first part, each with correct output or the honest
# error the compatibility result documents:
#  - kafka-topics --describe goes through DescribeTopicPartitions (its
#    ELR columns show it), paged by the cursor with
#    --partition-size-limit-per-response;
#  - kafka-configs alters a topic's configs (IncrementalAlterConfigs: add,
#    delete, list values), refuses a bad value with Kafka's exception and
#    the broker's reason, and the change takes effect (max.message.bytes
#    lowered: a larger record is refused);
#  - kafka-get-offsets and kafka-delete-records move and read the offsets;
#  - kafka-leader-election: the preferred replica leads already;
#  - kafka-reassign-partitions --list shows none; --execute is refused with
#    why (no replicas to move);
#  - kafka-log-dirs shows the one virtual directory (the object store)
#    with each partition's bytes there;
#  - kafka-features describes group.version, share.version and streams.version 1 and refuses a level change;
#    kafka-metadata-quorum exits 1 at once with why there is no quorum;
#  - kafka-configs sets dynamic broker configs: the cluster default
#    (--entity-default) of a topic config is in force on every topic that
#    sets none (message.max.bytes lowered: a larger record is refused), one
#    agent's (entity-name) is stored and described, read-only and per-agent
#    topic defaults are refused with why; group configs and client-metrics
#    subscriptions are set, described, checked as Kafka checks them, and
#    kafka-client-metrics lists and describes them;
#  - kafka-configs --entity-type broker-loggers changes the agent's log
#    level of a module at runtime (its DEBUG lines appear);
#  - kafka-consumer-groups lists a group, describes its members and its
#    offsets with their lag (committed, log end, lag per partition),
#    resets its offsets to the earliest (refused while a member is in, as
#    Kafka refuses it), deletes a topic's offsets and deletes the group;
#  - Debian's kcat (librdkafka 2.0.2) sends compressed batches, which it
#    does only against a broker that lists Produce v0-2 (checked: without
#    the listing this test fails).
# How: one agent, the tools through tests/clients/run.sh, confluent-kafka
# to produce.

import json
import os
import subprocess
import time

import pytest
from confluent_kafka import Producer

from kafkautil import kafka_tool, unique_topic, wait_for_topic
from test_java_go import roundtrip_clients  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(600)


def test_kafka_admin_tools(agent, request, tmp_path):
    run_sh = request.getfixturevalue("roundtrip_clients")
    boot = agent.bootstrap
    topic = unique_topic("tools")

    def tool(cls, *args, ok=True):
        res = kafka_tool(run_sh, cls, "--bootstrap-server", boot, *args, ok=ok)
        return res.stdout + res.stderr

    topics_cmd = "org.apache.kafka.tools.TopicCommand"
    tool(topics_cmd, "--create", "--topic", topic, "--partitions", "5", "--replication-factor", "1")
    wait_for_topic(boot, topic, partitions=5)

    # DescribeTopicPartitions, two partitions a page: every partition once.
    out = tool(topics_cmd, "--describe", "--topic", topic, "--partition-size-limit-per-response", "2")
    rows = [ln for ln in out.splitlines() if "\tPartition: " in ln or ln.strip().startswith("Topic: " + topic + "\tPartition")]
    parts = sorted(int(ln.split("Partition: ")[1].split()[0]) for ln in rows)
    assert parts == [0, 1, 2, 3, 4], out
    assert all("Elr: " in ln and "LastKnownElr: " in ln for ln in rows), out
    assert f"PartitionCount: 5" in out and "ReplicationFactor: 1" in out, out

    # kafka-configs: IncrementalAlterConfigs on the topic.
    configs_cmd = "kafka.admin.ConfigCommand"
    entity = ["--entity-type", "topics", "--entity-name", topic]
    tool(configs_cmd, "--alter", *entity, "--add-config",
         "retention.ms=3600000,max.message.bytes=2000,cleanup.policy=[delete,compact]")
    out = tool(configs_cmd, "--describe", *entity)
    for kv in ["retention.ms=3600000", "max.message.bytes=2000", "cleanup.policy=delete,compact"]:
        assert kv in out, out
    tool(configs_cmd, "--alter", *entity, "--delete-config", "cleanup.policy")
    out = tool(configs_cmd, "--describe", *entity)
    assert "cleanup.policy" not in out and "max.message.bytes=2000" in out, out
    out = tool(configs_cmd, "--alter", *entity, "--add-config", "retention.ms=-5", ok=False)
    assert "InvalidConfigurationException" in out and "must be at least -1" in out, out

    # The agent's own settings under Kafka's broker config names.
    me = agent_id(tool(topics_cmd, "--describe", "--topic", topic))
    out = tool(configs_cmd, "--describe", "--entity-type", "brokers", "--entity-name", str(me), "--all")
    assert f"All configs for broker {me} are:" in out, out
    assert "num.partitions=1 " in out and "auto.create.topics.enable=true " in out, out
    assert "STATIC_BROKER_CONFIG" in out, out

    # The lowered max.message.bytes is in force.
    p = Producer({"bootstrap.servers": boot, "linger.ms": 0})
    errors = []
    p.produce(topic, value=b"x" * 5000, partition=0, on_delivery=lambda e, m: errors.append(e))
    p.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == 10, errors  # MSG_SIZE_TOO_LARGE
    tool(configs_cmd, "--alter", *entity, "--delete-config", "max.message.bytes")
    errors.clear()
    for i in range(10):
        p.produce(topic, value=b"y" * 100, partition=i % 2, on_delivery=lambda e, m: errors.append(e))
    p.flush(30)
    assert errors == [None] * 10, errors

    # kafka-get-offsets and kafka-delete-records.
    offsets_cmd = "org.apache.kafka.tools.GetOffsetShell"
    out = tool(offsets_cmd, "--topic", topic)
    assert sorted(ln.strip() for ln in out.splitlines() if ln.startswith(topic + ":")) == sorted(
        f"{topic}:{p}:{5 if p < 2 else 0}" for p in range(5)), out
    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 3}]}))
    out = tool("org.apache.kafka.tools.DeleteRecordsCommand", "--offset-json-file", str(spec))
    assert "low_watermark: 3" in out, out
    out = tool(offsets_cmd, "--topic", topic, "--partitions", "0", "--time", "-2")
    assert f"{topic}:0:3" in out, out

    # Leader election: the preferred replica leads already.
    out = tool("org.apache.kafka.tools.LeaderElectionCommand", "--election-type", "preferred",
               "--topic", topic, "--partition", "1")
    assert "Valid replica already elected for partitions" in out and f"{topic}-1" in out, out
    tool("org.apache.kafka.tools.LeaderElectionCommand", "--election-type", "preferred",
         "--all-topic-partitions")

    # Reassignments: none listed; a new assignment refused with why.
    reassign = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    out = tool(reassign, "--list")
    assert "No partition reassignments found." in out, out
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [agent_id(out=tool(topics_cmd, "--describe", "--topic", topic))]}]}))
    out = tool(reassign, "--execute", "--reassignment-json-file", str(plan), ok=False)
    assert "no replicas to move" in out, out

    # Log dirs: one virtual directory, the object store; the produced
    # partitions hold bytes there, the others none.
    out = tool("org.apache.kafka.tools.LogDirsCommand", "--describe", "--topic-list", topic)
    doc = json.loads(next(ln for ln in out.splitlines() if ln.startswith("{")))
    dirs = [d for b in doc["brokers"] for d in b["logDirs"]]
    assert len(dirs) == 1 and dirs[0]["logDir"].startswith("file://") and dirs[0]["error"] is None, doc
    sizes = {p["partition"]: p["size"] for p in dirs[0]["partitions"]}
    assert set(sizes) == {f"{topic}-{i}" for i in range(5)}, sizes
    assert sizes[f"{topic}-0"] > 0 and sizes[f"{topic}-1"] > 0, sizes
    assert all(sizes[f"{topic}-{i}"] == 0 for i in (2, 3, 4)), sizes


def test_dynamic_config_tools(agent, request):
    run_sh = request.getfixturevalue("roundtrip_clients")
    boot = agent.bootstrap
    topic = unique_topic("dyn")
    configs_cmd = "kafka.admin.ConfigCommand"

    def tool(cls, *args, ok=True):
        res = kafka_tool(run_sh, cls, "--bootstrap-server", boot, *args, ok=ok)
        return res.stdout + res.stderr

    tool("org.apache.kafka.tools.TopicCommand", "--create", "--topic", topic, "--partitions", "1")
    wait_for_topic(boot, topic, partitions=1)
    me = agent_id(tool("org.apache.kafka.tools.TopicCommand", "--describe", "--topic", topic))

    # The cluster default of a topic config, in force at once.
    default = ["--entity-type", "brokers", "--entity-default"]
    p = Producer({"bootstrap.servers": boot, "linger.ms": 0})

    def produced(size):
        errors = []
        p.produce(topic, value=b"x" * size, partition=0, on_delivery=lambda e, m: errors.append(e))
        p.flush(30)
        return errors[0].code() if errors and errors[0] is not None else 0

    loggers = ["--entity-type", "broker-loggers", "--entity-name", str(me)]
    out = tool(configs_cmd, "--describe", *loggers)
    assert "root=INFO" in out and "rutomq.api=INFO" in out, out
    try:
        # The agent's log level, changed at runtime: its refusals of
        # records are logged at DEBUG.
        tool(configs_cmd, "--alter", *loggers, "--add-config", "rutomq.api=DEBUG")
        assert "rutomq.api=DEBUG" in tool(configs_cmd, "--describe", *loggers)
        logged = os.path.getsize(agent.log_path)
        out = tool(configs_cmd, "--alter", *default, "--add-config", "message.max.bytes=3000")
        assert "Completed updating default config for brokers in the cluster." in out, out
        out = tool(configs_cmd, "--describe", *default)
        assert "message.max.bytes=3000" in out and "DYNAMIC_DEFAULT_BROKER_CONFIG" in out, out
        out = tool(configs_cmd, "--describe", "--entity-type", "topics", "--entity-name", topic, "--all")
        assert "max.message.bytes=3000" in out, out
        assert produced(5000) == 10  # MSG_SIZE_TOO_LARGE
        assert produced(100) == 0
        with open(agent.log_path, "rb") as f:
            f.seek(logged)
            assert b"produce refused records" in f.read()
    finally:
        tool(configs_cmd, "--alter", *default, "--delete-config", "message.max.bytes")
        tool(configs_cmd, "--alter", *loggers, "--delete-config", "rutomq.api")
    assert produced(5000) == 0

    # One agent's: a Kafka dynamic config is stored (no effect here, as
    # the documentation says); read-only ones and per-agent topic defaults
    # are refused with why.
    broker = ["--entity-type", "brokers", "--entity-name", str(me)]
    tool(configs_cmd, "--alter", *broker, "--add-config", "sasl.kerberos.min.time.before.relogin=58000")
    out = tool(configs_cmd, "--describe", *broker)
    assert "sasl.kerberos.min.time.before.relogin=58000" in out and "DYNAMIC_BROKER_CONFIG" in out, out
    out = tool(configs_cmd, "--alter", *broker, "--add-config", "num.partitions=3", ok=False)
    assert "Cannot update these configs dynamically: Set(num.partitions)" in out, out
    out = tool(configs_cmd, "--alter", *broker, "--add-config", "log.retention.ms=1000", ok=False)
    assert "--entity-default" in out, out
    tool(configs_cmd, "--alter", *broker, "--delete-config", "sasl.kerberos.min.time.before.relogin")
    assert "sasl.kerberos" not in tool(configs_cmd, "--describe", *broker)

    # Group configs.
    group = ["--entity-type", "groups", "--entity-name", unique_topic("grp")]
    tool(configs_cmd, "--alter", *group, "--add-config", "consumer.session.timeout.ms=50000")
    out = tool(configs_cmd, "--describe", *group)
    assert "consumer.session.timeout.ms=50000" in out and "DYNAMIC_GROUP_CONFIG" in out, out
    out = tool(configs_cmd, "--alter", *group, "--add-config", "consumer.session.timeout.ms=5000", ok=False)
    assert "must be greater than or equal to group.consumer.min.session.timeout.ms" in out, out

    # Client-metrics subscriptions.
    name = unique_topic("cm")
    metrics = ["--entity-type", "client-metrics", "--entity-name", name]
    tool(configs_cmd, "--alter", *metrics, "--add-config",
         "metrics=org.apache.kafka.producer.,interval.ms=1000,match=[client_id=a.*]")
    out = tool(configs_cmd, "--alter", *metrics, "--add-config", "interval.ms=10", ok=False)
    assert "interval must be between 100 and 3600000" in out, out
    cm_cmd = "org.apache.kafka.tools.ClientMetricsCommand"
    assert name in tool(cm_cmd, "--list").split()
    out = tool(cm_cmd, "--describe", "--name", name)
    for kv in ["interval.ms=1000", "match=client_id=a.*", "metrics=org.apache.kafka.producer."]:
        assert kv in out, out
    tool(configs_cmd, "--alter", *metrics, "--delete-config", "metrics,interval.ms,match")
    assert name not in tool(cm_cmd, "--list").split()


def test_dynamic_configs_reach_every_agent(start_agent, request):
    """A cluster default set through one agent is in force on another at
    once (its copy reloads on PostgreSQL's notice), without a restart."""
    run_sh = request.getfixturevalue("roundtrip_clients")
    a, b = start_agent(), start_agent()
    topic = unique_topic("spread")
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})

    def produced(size):
        errors = []
        p.produce(topic, value=b"x" * size, partition=0, on_delivery=lambda e, m: errors.append(e))
        p.flush(30)
        return errors[0].code() if errors and errors[0] is not None else 0

    assert produced(5000) == 0
    kafka_tool(run_sh, "kafka.admin.ConfigCommand", "--bootstrap-server", a.bootstrap, "--alter",
               "--entity-type", "brokers", "--entity-default", "--add-config", "message.max.bytes=3000")
    deadline = time.monotonic() + 10
    while produced(5000) != 10:  # MSG_SIZE_TOO_LARGE, on the other agent
        assert time.monotonic() < deadline, "agent b never took the cluster default"
        time.sleep(0.2)
    out = kafka_tool(run_sh, "kafka.admin.ConfigCommand", "--bootstrap-server", b.bootstrap, "--describe",
                     "--entity-type", "brokers", "--entity-default").stdout
    assert "message.max.bytes=3000" in out, out


def test_consumer_groups_tool(agent, request):
    from confluent_kafka import Consumer

    run_sh = request.getfixturevalue("roundtrip_clients")
    boot = agent.bootstrap
    topic, group = unique_topic("cg"), unique_topic("cgroup")
    cg = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"

    def tool(*args, ok=True):
        res = kafka_tool(run_sh, cg, "--bootstrap-server", boot, *args, ok=ok)
        return res.stdout + res.stderr

    def offsets(out):
        """{partition: (current, log end, lag)} of the --describe table."""
        rows = {}
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 6 and f[0] == group and f[1] == topic:
                rows[int(f[2])] = tuple(None if x == "-" else int(x) for x in f[3:6])
        return rows

    tools_cmd = "org.apache.kafka.tools.TopicCommand"
    kafka_tool(run_sh, tools_cmd, "--bootstrap-server", boot, "--create", "--topic", topic,
               "--partitions", "3", "--replication-factor", "1")
    wait_for_topic(boot, topic, partitions=3)
    p = Producer({"bootstrap.servers": boot})
    for i in range(30):
        p.produce(topic, b"v%d" % i, partition=i % 3)
    p.flush(30)
    c = Consumer({"bootstrap.servers": boot, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "client.id": "cg-member"})
    c.subscribe([topic])
    got = 0
    deadline = time.time() + 60
    while got < 30 and time.time() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            got += 1
    assert got == 30, f"consumed {got} of 30"
    c.commit(asynchronous=False)
    try:
        assert group in tool("--list").split()
        members = tool("--describe", "--group", group, "--members")
        assert "cg-member" in members, members
        # Offsets may not be reset while a member is in.
        busy = tool("--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                    "--execute", ok=None)
        assert "Assignments can only be reset if the group" in busy and "is inactive" in busy, busy
    finally:
        c.close()
    p.produce(topic, b"late", partition=0)
    p.flush(30)
    out = tool("--describe", "--group", group)
    assert offsets(out) == {0: (10, 11, 1), 1: (10, 10, 0), 2: (10, 10, 0)}, out
    assert "has no active members" in out, out
    out = tool("--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert offsets(tool("--describe", "--group", group)) == {
        0: (0, 11, 11), 1: (0, 10, 10), 2: (0, 10, 10)}
    tool("--delete-offsets", "--group", group, "--topic", topic)
    assert offsets(tool("--describe", "--group", group)) == {}
    out = tool("--delete", "--group", group)
    assert "successful" in out.lower(), out
    assert group not in tool("--list").split()


def test_features_and_quorum_tools(agent, request):
    """kafka-features describes the features rutomq lists (group.version
    1, KIP-848; share.version 1, KIP-932; streams.version 1, KIP-1071) and refuses a change of level with why; kafka-metadata-quorum
    exits 1 at once with why there is no quorum to describe."""
    run_sh = request.getfixturevalue("roundtrip_clients")
    boot = agent.bootstrap
    features = "org.apache.kafka.tools.FeatureCommand"
    res = kafka_tool(run_sh, features, "--bootstrap-server", boot, "describe")
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("Feature: ")]
    assert lines == [f"Feature: {name}\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\t"
                     "FinalizedVersionLevel: 1\tEpoch: 0"
                     for name in ("group.version", "share.version", "streams.version")], res.stdout
    res = kafka_tool(run_sh, features, "--bootstrap-server", boot, "upgrade", "--feature",
                     "transaction.version=2", ok=False)
    assert "serves it at level 0 only" in res.stdout + res.stderr, res.stdout + res.stderr
    res = kafka_tool(run_sh, "org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server", boot,
                     "describe", "--status", ok=False, timeout=60)
    assert "no KRaft metadata quorum" in res.stdout + res.stderr, res.stdout + res.stderr


KCAT_SH = os.path.join(os.path.dirname(__file__), "..", "clients", "kcat.sh")


def test_debian_kcat_produces_compressed_batches(agent, tmp_path):
    """Debian's kcat (librdkafka 2.0.2, older than 2.11) compresses only
    against a broker that lists Produce v0-2 (KAFKA-18659): with each codec
    its batches reach the object store compressed (the plain values are not
    in it), and kcat reads them back; uncompressed, the values are there."""
    kcat_dir = subprocess.run(["bash", KCAT_SH], capture_output=True, text=True, timeout=300,
                              check=True).stdout.strip().splitlines()[-1]
    kcat = os.path.join(kcat_dir, "kcat")
    assert agent.object_store.startswith("file://"), agent.object_store
    objects = agent.object_store[len("file://"):]

    def stored():
        blob = b""
        for root, _, files in os.walk(objects):
            for f in files:
                with open(os.path.join(root, f), "rb") as fh:
                    blob += fh.read()
        return blob

    for codec in ["gzip", "snappy", "lz4", "zstd", "none"]:
        topic = unique_topic(f"kcat-{codec}")
        marker = f"kcat-{codec}-value-"
        values = [marker + "x" * 200 + str(i) for i in range(50)]
        subprocess.run([kcat, "-P", "-b", agent.bootstrap, "-t", topic, "-p", "0",
                        "-X", f"compression.codec={codec}", "-X", "topic.metadata.refresh.interval.ms=1000"],
                       input="\n".join(values) + "\n", text=True, timeout=60, check=True)
        got = subprocess.run([kcat, "-C", "-b", agent.bootstrap, "-t", topic, "-o", "beginning", "-e", "-q"],
                             capture_output=True, text=True, timeout=60, check=True).stdout.split()
        assert got == values, (codec, got[:3])
        plain = marker.encode() + b"x" * 200
        if codec == "none":
            assert plain in stored(), "uncompressed values are stored as they are"
        else:
            assert plain not in stored(), f"{codec}: kcat sent uncompressed batches"


def agent_id(out):
    """The leader kafka-topics --describe names for partition 0."""
    for ln in out.splitlines():
        if "Partition: 0\t" in ln:
            return int(ln.split("Leader: ")[1].split()[0])
    raise AssertionError(out)
