# What this proves: topic configs as Kafka defines them (issue 16, first part).
# CreateTopics takes every public topic config of Apache Kafka 4.2.0's
# LogConfig (the table engine/src/topics/kafka_configs.rs is generated from),
# checks values as Kafka's validators do (the accepted/refused cases below
# were run through LogConfig's own validators, scripts/gen-topic-configs),
# refuses unknown names, null values and crossed compaction lags with
# INVALID_CONFIG; DescribeConfigs lists all of them with their source
# (topic-set or default); the changelog and repartition configs Kafka Streams
# sends are accepted; and a compacted topic refuses records without a key
# per record, with their indexes in Produce's record_errors (librdkafka sees
# INVALID_RECORD), while keyed records are stored.
# How: confluent-kafka's AdminClient and Producer against one agent, and a
# hand-built Produce v8 request over a raw socket for record_errors.
# Timestamps: message.timestamp.type=LogAppendTime stamps records with the
# broker's clock (consumers see TIMESTAMP_LOG_APPEND_TIME); on CreateTime
# topics records past message.timestamp.after.max.ms (Kafka 4.x default: 1 h)
# or before.max.ms are refused with INVALID_TIMESTAMP per record.

import struct
import time

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, NewTopic

import kwire
from kafkautil import admin, unique_topic

TIMEOUT_S = 30

# Apache Kafka 4.2.0's public topic configs (LogConfig.nonInternalConfigNames()).
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
    "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.type", "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "remote.log.copy.disable",
    "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes", "retention.ms",
    "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
}

# Values Kafka 4.2.0's validators refuse (checked through LogConfig itself).
REFUSED = [
    ("cleanup.policy", "Compact"),
    ("cleanup.policy", "compact,compact"),
    ("retention.ms", "-2"),
    ("max.message.bytes", "0x10"),
    ("segment.bytes", "1048575"),
    ("preallocate", "yes"),
    ("min.cleanable.dirty.ratio", "1.5"),
    ("compression.gzip.level", "0"),
    ("message.timestamp.type", "createtime"),
    ("leader.replication.throttled.replicas", "0:x"),
    ("log.retention.ms", "1000"),  # a broker config, not a topic config
    ("no.such.config", "1"),
]


def _create(adm, topic, config):
    fs = adm.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1, config=config)],
                           request_timeout=TIMEOUT_S)
    return fs[topic]


def _describe(adm, topic):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return adm.describe_configs([res], request_timeout=TIMEOUT_S)[res].result(TIMEOUT_S)


def test_kafka_topic_configs_are_accepted_checked_and_described(agent):
    adm = admin(agent.bootstrap)
    # What Kafka Streams 4.x sends for a windowed store's changelog (plus
    # the repartition topic's segment size), and a spread of the others.
    topic = unique_topic("configs")
    given = {
        "cleanup.policy": "compact,delete",
        "min.compaction.lag.ms": "100",
        "delete.retention.ms": "1000",
        "retention.ms": "-1",
        "segment.bytes": "52428800",
        "message.timestamp.type": "CreateTime",
        "min.cleanable.dirty.ratio": "0.1",
        "remote.storage.enable": "false",
        "leader.replication.throttled.replicas": "*",
    }
    _create(adm, topic, given).result(TIMEOUT_S)
    described = _describe(adm, topic)
    assert set(described) == KAFKA_TOPIC_CONFIGS
    for name, entry in described.items():
        if name in given:
            assert entry.value == given[name], name
            assert entry.source == 1, f"{name}: source {entry.source}"  # DYNAMIC_TOPIC_CONFIG
        else:
            assert entry.source == 5, f"{name}: source {entry.source}"  # DEFAULT_CONFIG
    assert described["retention.bytes"].value == "-1"
    assert described["max.message.bytes"].value == "1048588"

    for name, value in REFUSED:
        f = _create(adm, unique_topic("badconfig"), {name: value})
        with pytest.raises(Exception) as e:
            f.result(TIMEOUT_S)
        err = e.value.args[0]
        assert err.code() == KafkaError.INVALID_CONFIG, f"{name}={value}: {err}"
    f = _create(adm, unique_topic("badlags"),
                {"min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "1000"})
    with pytest.raises(Exception) as e:
        f.result(TIMEOUT_S)
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "max.compaction.lag.ms" in str(e.value.args[0])


def _record(i, key, value):
    body = b"\x00" + kwire.varint(0) + kwire.varint(i)
    body += kwire.varint(-1) if key is None else kwire.varint(len(key)) + key
    body += kwire.varint(len(value)) + value + kwire.varint(0)
    return kwire.varint(len(body)) + body


def _batch(keys, timestamp=0):
    records = b"".join(_record(i, k, b"v%d" % i) for i, k in enumerate(keys))
    n = len(keys)
    after_crc = (struct.pack(">hiqqqhii", 0, n - 1, timestamp, timestamp, -1, -1, -1, n)) + records
    crc = kwire.crc32c(after_crc)
    head = struct.pack(">qiib", 0, 4 + 1 + 4 + len(after_crc), -1, 2) + struct.pack(">I", crc)
    return head + after_crc


def _produce_v8(conn, topic, batch):
    cid = conn.next_cid()
    body = (kwire.string(None) + kwire.i16(-1) + kwire.i32(10000)
            + kwire.i32(1) + kwire.string(topic)
            + kwire.i32(1) + kwire.i32(0) + kwire.bytes_(batch))
    conn.send(kwire.frame(kwire.request_header(0, 8, cid) + body))
    r = kwire.Reader(conn.recv_frame())
    assert r.i32() == cid
    assert r.i32() == 1
    assert r.string() == topic
    assert r.i32() == 1
    assert r.i32() == 0
    error = r.i16()
    base_offset = r.i64()
    r.i64()  # log_append_time
    r.i64()  # log_start_offset
    record_errors = r.array(lambda rr: (rr.i32(), rr.string()))
    message = r.string()
    return error, base_offset, [i for i, _ in record_errors], message


def test_a_compacted_topic_refuses_records_without_a_key(agent):
    adm = admin(agent.bootstrap)
    topic = unique_topic("compacted")
    _create(adm, topic, {"cleanup.policy": "compact"}).result(TIMEOUT_S)

    conn = kwire.KafkaConn.to(agent.bootstrap)
    error, _, indexes, message = _produce_v8(conn, topic, _batch([b"a", None, b"", None, b"b"]))
    assert error == 87, message  # INVALID_RECORD
    assert indexes == [1, 3]  # an empty key is a key
    assert "key" in message
    error, base, indexes, _ = _produce_v8(conn, topic, _batch([b"a", b"b"]))
    assert error == 0 and base == 0 and indexes == []

    # librdkafka reports the refusal per message; keyed ones are stored.
    reports = []
    p = Producer({"bootstrap.servers": agent.bootstrap, "linger.ms": 0})
    p.produce(topic, value=b"no key", on_delivery=lambda err, msg: reports.append(err))
    p.flush(TIMEOUT_S)
    p.produce(topic, key=b"k", value=b"keyed", on_delivery=lambda err, msg: reports.append(err))
    p.flush(TIMEOUT_S)
    assert reports[0] is not None and reports[0].code() == KafkaError.INVALID_RECORD, reports
    assert reports[1] is None, reports
    del p  # no reconnect attempts after the agent stops

    # A delete-policy topic takes keyless records as before.
    plain = unique_topic("plain")
    _create(adm, plain, {"cleanup.policy": "delete"}).result(TIMEOUT_S)
    error, _, indexes, _ = _produce_v8(conn, plain, _batch([None, None]))
    assert (error, indexes) == (0, [])


def test_timestamps_follow_the_topics_timestamp_configs(agent):
    adm = admin(agent.bootstrap)
    conn = kwire.KafkaConn.to(agent.bootstrap)
    now = int(time.time() * 1000)
    hour = 3_600_000

    # CreateTime with Kafka 4.x's default after.max.ms (1 h): the future is refused.
    plain = unique_topic("createtime")
    _create(adm, plain, {}).result(TIMEOUT_S)
    error, _, indexes, message = _produce_v8(conn, plain, _batch([b"a", b"b"], now + 2 * hour))
    assert (error, indexes) == (32, [0, 1]), message  # INVALID_TIMESTAMP
    error, base, _, message = _produce_v8(conn, plain, _batch([b"a"], now - 30 * 24 * hour))
    assert (error, base) == (0, 0), message  # before.max.ms defaults to unlimited
    strict = unique_topic("strict")
    _create(adm, strict, {"message.timestamp.before.max.ms": "60000"}).result(TIMEOUT_S)
    error, _, indexes, message = _produce_v8(conn, strict, _batch([b"a"], now - hour))
    assert (error, indexes) == (32, [0]), message

    # LogAppendTime: the broker's clock, whatever the producer set.
    stamped = unique_topic("appendtime")
    _create(adm, stamped, {"message.timestamp.type": "LogAppendTime"}).result(TIMEOUT_S)
    before = int(time.time() * 1000)
    error, base, _, message = _produce_v8(conn, stamped, _batch([b"a", b"b"], 1000))
    assert (error, base) == (0, 0), message
    after = int(time.time() * 1000)
    c = Consumer({"bootstrap.servers": agent.bootstrap, "group.id": unique_topic("g"),
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(stamped, 0, 0)])
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 2 and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.append(m.timestamp())
        assert len(got) == 2, got
        for kind, ts in got:
            assert kind == TIMESTAMP_LOG_APPEND_TIME
            assert before <= ts <= after, (before, ts, after)
    finally:
        c.close()
