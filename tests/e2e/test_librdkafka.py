# What this proves: a real librdkafka client (confluent-kafka 2.x) can use rutomq
# as a Kafka broker for the basic data path and topic administration:
#  - idempotent (enable.idempotence=true, acks=all) keyed produce of 5000 records
#    with headers into an 8-partition topic, for every compression codec
#    (none/gzip/snappy/lz4/zstd), reads back every record exactly once, at the
#    offset its delivery report gave, with offsets contiguous from 0 per partition,
#    per-key order preserved and keys/values/headers (incl. null and duplicate
#    header keys) byte-identical;
#  - ListOffsets: earliest = 0 and latest (high watermark) = records produced, per
#    partition; timestamp lookup (offsets_for_times) finds the first offset at or
#    after a timestamp;
#  - Metadata / CreateTopics / DeleteTopics: partition counts, TOPIC_ALREADY_EXISTS,
#    deletion, and auto-creation on produce to an unknown topic.
# The round trip also runs with the promised librdkafka 2.15.0 (a subprocess;
# the venv has the newest).
# How: consumers never join a group (consumer groups are not implemented yet):
# they assign() explicit TopicPartitions at explicit offsets and read up to the
# end offsets that the producer's delivery reports imply.

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from kafkautil import (Rec, admin, check_roundtrip, cluster_metadata, consume_confluent,
                       consumer_config, create_topic, delete_topic, make_records, make_value,
                       partition_counts, produce_confluent, run_with_promised_librdkafka, unique_topic,
                       wait_for_topic, wait_topic_absent, watermarks)

N_RECORDS = 5000
N_PARTITIONS = 8


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_idempotent_keyed_roundtrip(agent, compression):
    idempotent_keyed_roundtrip(agent.bootstrap, compression)


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_idempotent_keyed_roundtrip_promised_librdkafka(agent, compression):
    run_with_promised_librdkafka("test_librdkafka", "idempotent_keyed_roundtrip", agent.bootstrap, compression)


def idempotent_keyed_roundtrip(bootstrap, compression):
    """The round trip with whichever confluent-kafka is imported."""
    topic = unique_topic("rdk")
    create_topic(bootstrap, topic, N_PARTITIONS)
    sent = produce_confluent(bootstrap, topic, make_records(N_RECORDS),
                             **{"compression.type": compression})
    counts = partition_counts(sent)
    assert len(counts) > 1, f"all records landed in partitions {sorted(counts)}; keys should spread"
    ends = {p: counts.get(p, 0) for p in range(N_PARTITIONS)}
    for p, n in ends.items():
        offs = sorted(r.offset for r in sent if r.partition == p)
        assert offs == list(range(n)), (
            f"partition {p}: acknowledged offsets are not 0..{n - 1}: first anomalies "
            f"{[(i, o) for i, o in enumerate(offs) if o != i][:10]}")
    wm = watermarks(bootstrap, topic, range(N_PARTITIONS))
    assert wm == {p: (0, ends[p]) for p in range(N_PARTITIONS)}, (
        f"watermarks {wm} != (0, records produced) per partition {ends}")
    consumed = consume_confluent(bootstrap, topic, ends)
    check_roundtrip(sent, consumed)


def test_list_offsets_watermarks_and_times(agent):
    topic = unique_topic("rdk-lo")
    create_topic(agent.bootstrap, topic, 4)
    per_partition = {0: 0, 1: 1, 2: 17, 3: 250}
    base_ts = int(time.time() * 1000) - 3_600_000  # an hour ago, 1 s apart: unambiguous
    recs = []
    for p, n in per_partition.items():
        for i in range(n):
            idx = len(recs)
            recs.append(Rec(idx, b"k%d" % i, make_value(idx, 20), [], partition=p, timestamp=base_ts + i * 1000))
    produce_confluent(agent.bootstrap, topic, recs, **{"linger.ms": 0})
    wm = watermarks(agent.bootstrap, topic, per_partition)
    assert wm == {p: (0, n) for p, n in per_partition.items()}, (
        f"(earliest, latest) offsets {wm} != (0, produced) {per_partition}")

    from confluent_kafka import Consumer
    c = Consumer(consumer_config(agent.bootstrap))
    try:
        # first offset whose timestamp >= target
        q = [TopicPartition(topic, 2, base_ts + 5 * 1000),        # exact hit -> 5
             TopicPartition(topic, 3, base_ts + 100 * 1000 - 1),  # just before #100 -> 100
             TopicPartition(topic, 3, base_ts - 10_000),          # before all -> 0
             TopicPartition(topic, 2, base_ts + 10_000_000)]      # after all -> -1 (none)
        res = [c.offsets_for_times([tp], timeout=10)[0] for tp in q]
        got = [(r.partition, r.offset, r.error) for r in res]
        assert got == [(2, 5, None), (3, 100, None), (3, 0, None), (2, -1, None)], (
            f"offsets_for_times results {got}")
    finally:
        c.close()


def test_produce_to_unknown_topic_auto_creates(start_agent):
    a = start_agent(default_partitions=3)
    topic = unique_topic("rdk-auto")
    assert topic not in cluster_metadata(a.bootstrap).topics
    recs = produce_confluent(a.bootstrap, topic, [Rec(i, b"k%d" % i, make_value(i, 30)) for i in range(20)])
    t = wait_for_topic(a.bootstrap, topic)
    assert len(t.partitions) == 3, f"auto-created topic has {len(t.partitions)} partitions, want --default-partitions 3"
    counts = partition_counts(recs)
    consumed = consume_confluent(a.bootstrap, topic, {p: counts.get(p, 0) for p in range(3)})
    check_roundtrip(recs, consumed)


def test_create_topic_metadata_and_already_exists(agent):
    topic = unique_topic("rdk-ct")
    t = create_topic(agent.bootstrap, topic, 3)
    assert sorted(t.partitions) == [0, 1, 2], f"partitions {sorted(t.partitions)}"
    md = cluster_metadata(agent.bootstrap)
    assert md.brokers, "Metadata lists no brokers"
    for p in t.partitions.values():
        assert p.leader in md.brokers, f"partition {p.id} leader {p.leader} not among brokers {list(md.brokers)}"
    assert any(b.port == agent.port for b in md.brokers.values()), (
        f"advertised brokers {[(b.host, b.port) for b in md.brokers.values()]} do not include port {agent.port}")
    adm = admin(agent.bootstrap)  # keep a reference until the future resolves
    fs = adm.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)],
                           operation_timeout=30, request_timeout=30)
    with pytest.raises(KafkaException) as ei:
        fs[topic].result(timeout=30)
    assert ei.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS, f"got {ei.value!r}"



def test_new_partitions_are_seen_at_once_by_every_agent(start_agent):
    """CreatePartitions through one agent: within a second every shard of
    every agent serves the new partitions (the topic row's change is
    announced to all of them), though each had cached the topic with its old
    partition count; a producer that trusted the CreatePartitions answer
    used to be told "Unknown partition" for up to the cache's 5 s."""
    from confluent_kafka.admin import NewPartitions
    agents = [start_agent(), start_agent()]
    topic = unique_topic("rdk-cp")
    create_topic(agents[0].bootstrap, topic, 2)
    for a in agents:  # fresh connections: their shards cache the 2-partition row
        for _ in range(4):
            assert len(admin(a.bootstrap).list_topics(topic, timeout=10).topics[topic].partitions) == 2
    adm = admin(agents[0].bootstrap)
    adm.create_partitions([NewPartitions(topic, 4)], operation_timeout=30, request_timeout=30)[topic].result(30)
    time.sleep(0.5)
    for a in agents:
        for i in range(4):
            recs = produce_confluent(a.bootstrap, topic, [Rec(i, b"k", b"new", partition=2 + i % 2)], timeout=10)
            assert recs[0].partition == 2 + i % 2

def test_delete_topic(agent):
    topic = unique_topic("rdk-del")
    keep = unique_topic("rdk-keep")
    create_topic(agent.bootstrap, topic, 2)
    create_topic(agent.bootstrap, keep, 1)
    produce_confluent(agent.bootstrap, topic, [Rec(i, b"k", make_value(i, 10)) for i in range(10)])
    delete_topic(agent.bootstrap, topic)
    wait_topic_absent(agent.bootstrap, topic)
    assert keep in cluster_metadata(agent.bootstrap).topics, "deleting one topic removed another"
    # deleting again -> UNKNOWN_TOPIC_OR_PARTITION
    adm = admin(agent.bootstrap)
    fs = adm.delete_topics([topic], operation_timeout=30, request_timeout=30)
    with pytest.raises(KafkaException) as ei:
        fs[topic].result(timeout=30)
    assert ei.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART, f"got {ei.value!r}"


def test_produce_to_unknown_topic_without_auto_create_fails(start_agent):
    a = start_agent(auto_create_topics=False)
    topic = unique_topic("rdk-noauto")
    errors = []
    p = Producer({"bootstrap.servers": a.bootstrap, "message.timeout.ms": 5000, "acks": "all"})
    p.produce(topic, b"x", on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(20) == 0, "delivery report not received"
    assert errors and errors[0] is not None, "produce to an unknown topic succeeded with auto-create off"
    assert topic not in cluster_metadata(a.bootstrap).topics, "topic was created although auto-create is off"
