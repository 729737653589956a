# What this proves: a second, independent client implementation (kafka-python 2.x,
# pure Python, its own protocol codec and version negotiation) works against rutomq:
#  - idempotent (enable_idempotence=True, acks='all') keyed produce of 5000 records
#    with headers into an 8-partition topic, for every compression codec, reads back
#    every record exactly once at the acknowledged offset, offsets contiguous from 0
#    per partition, per-key order preserved, keys/values/headers intact;
#  - ListOffsets via beginning_offsets / end_offsets / offsets_for_times;
#  - auto-creation on produce to an unknown topic; CreateTopics / DeleteTopics
#    through KafkaAdminClient and the partition count seen in Metadata.
# How: the consumer has group_id=None and uses assign() + seek() with explicit
# offsets (consumer groups are not implemented yet), auto_offset_reset='none' so
# an out-of-range answer fails loudly instead of silently resetting.

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError

from kafkautil import (Rec, check_roundtrip, cluster_metadata, create_topic, idx_of_value, make_records,
                       make_value, unique_topic, wait_for_topic, wait_topic_absent)

N_RECORDS = 5000
N_PARTITIONS = 8


def kp_producer(bootstrap, **kw):
    conf = dict(bootstrap_servers=[bootstrap], acks="all", enable_idempotence=True, linger_ms=5,
                request_timeout_ms=30000, max_block_ms=30000, client_id="e2e-kafka-python")
    conf.update(kw)
    return KafkaProducer(**conf)


def kp_consumer(bootstrap, **kw):
    conf = dict(bootstrap_servers=[bootstrap], group_id=None, enable_auto_commit=False,
                auto_offset_reset="none", fetch_max_wait_ms=100, request_timeout_ms=30000,
                client_id="e2e-kafka-python")
    conf.update(kw)
    return KafkaConsumer(**conf)


def kp_produce(bootstrap, topic, records, timeout=120.0, **kw):
    p = kp_producer(bootstrap, **kw)
    try:
        futures = []
        for r in records:
            futures.append((r, p.send(topic, key=r.key, value=r.value, headers=r.headers or None,
                                      partition=r.partition, timestamp_ms=r.timestamp)))
        p.flush(timeout=timeout)
        errors = []
        for r, f in futures:
            try:
                md = f.get(timeout=1)
                r.partition, r.offset = md.partition, md.offset
            except Exception as e:
                errors.append((r.idx, repr(e)))
        assert not errors, f"{len(errors)} of {len(records)} sends failed, first: {errors[:5]}"
        return records
    finally:
        p.close(timeout=10)


def kp_consume(bootstrap, topic, ends, timeout=60.0):
    """Read {partition: end_offset} from offset 0 with assign()+seek()."""
    c = kp_consumer(bootstrap)
    out = {p: [] for p in ends}
    nxt = {p: 0 for p in ends}
    try:
        tps = [TopicPartition(topic, p) for p in ends]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)
        deadline = time.monotonic() + timeout
        while any(nxt[p] < ends[p] for p in ends):
            assert time.monotonic() < deadline, (
                f"timed out after {timeout}s reading {topic}: next offsets {nxt}, wanted {ends}")
            for tp, msgs in c.poll(timeout_ms=500, max_records=2000).items():
                for m in msgs:
                    out[tp.partition].append(Rec(idx_of_value(m.value), m.key, m.value,
                                                 [(k, v) for k, v in (m.headers or [])],
                                                 tp.partition, m.offset, m.timestamp))
                    nxt[tp.partition] = max(nxt[tp.partition], m.offset + 1)
        return out
    finally:
        c.close()


@pytest.mark.parametrize("compression", [None, "gzip", "snappy", "lz4", "zstd"])
def test_idempotent_keyed_roundtrip(agent, compression):
    topic = unique_topic("kp")
    create_topic(agent.bootstrap, topic, N_PARTITIONS)
    sent = kp_produce(agent.bootstrap, topic, make_records(N_RECORDS, null_headers=False),
                      compression_type=compression)
    ends = {p: sum(1 for r in sent if r.partition == p) for p in range(N_PARTITIONS)}
    assert sum(1 for n in ends.values() if n) > 1, f"all records in one partition: {ends}"
    for p, n in ends.items():
        offs = sorted(r.offset for r in sent if r.partition == p)
        assert offs == list(range(n)), f"partition {p}: acknowledged offsets not 0..{n - 1}: {offs[:20]}..."
    consumed = kp_consume(agent.bootstrap, topic, ends)
    check_roundtrip(sent, consumed)


def test_list_offsets(agent):
    topic = unique_topic("kp-lo")
    create_topic(agent.bootstrap, topic, 3)
    per_partition = {0: 0, 1: 7, 2: 40}
    base_ts = int(time.time() * 1000) - 3_600_000
    recs = []
    for p, n in per_partition.items():
        for i in range(n):
            recs.append(Rec(len(recs), b"k", make_value(len(recs), 10), [], partition=p,
                            timestamp=base_ts + i * 1000))
    kp_produce(agent.bootstrap, topic, recs, linger_ms=0)
    c = kp_consumer(agent.bootstrap)
    try:
        tps = {p: TopicPartition(topic, p) for p in per_partition}
        begin = c.beginning_offsets(list(tps.values()))
        end = c.end_offsets(list(tps.values()))
        assert {tp.partition: o for tp, o in begin.items()} == {p: 0 for p in per_partition}, f"earliest {begin}"
        assert {tp.partition: o for tp, o in end.items()} == per_partition, f"latest {end} != produced {per_partition}"
        found = c.offsets_for_times({tps[2]: base_ts + 12 * 1000, tps[1]: base_ts + 60_000_000})
        assert found[tps[2]] is not None and found[tps[2]].offset == 12, f"offsets_for_times: {found}"
        assert found[tps[1]] is None, f"a timestamp after all records must give None, got {found[tps[1]]}"
    finally:
        c.close()


def test_produce_to_unknown_topic_auto_creates(start_agent):
    a = start_agent(default_partitions=3)
    topic = unique_topic("kp-auto")
    recs = kp_produce(a.bootstrap, topic, [Rec(i, b"k%d" % i, make_value(i, 30)) for i in range(20)])
    t = wait_for_topic(a.bootstrap, topic)
    assert len(t.partitions) == 3
    c = kp_consumer(a.bootstrap)
    try:
        assert c.partitions_for_topic(topic) == {0, 1, 2}
    finally:
        c.close()
    ends = {p: sum(1 for r in recs if r.partition == p) for p in range(3)}
    check_roundtrip(recs, kp_consume(a.bootstrap, topic, ends))


def kp_admin_call(what, fn, *args):
    try:
        return fn(*args)
    except ValueError as e:
        raise AssertionError(
            f"kafka-python could not decode the broker's answer to {what}: {e!r}. KafkaAdminClient sends "
            f"Metadata v8+ with include_cluster_authorized_operations / include_topic_authorized_operations "
            f"= true and decodes the authorized_operations bitfields; a value with bit 31 set (e.g. the "
            f"INT32_MIN 'not requested' sentinel) is not a valid ACL operation. Apache Kafka answers "
            f"the bits of the allowed operations when asked.") from e


def test_admin_create_describe_delete(agent):
    topic = unique_topic("kp-adm")
    adm = KafkaAdminClient(bootstrap_servers=[agent.bootstrap], client_id="e2e-kafka-python",
                           request_timeout_ms=30000)
    try:
        adm.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
        wait_for_topic(agent.bootstrap, topic, 3)
        assert topic in kp_admin_call("list_topics()", adm.list_topics)
        described = kp_admin_call("describe_topics()", adm.describe_topics, [topic])
        assert len(described) == 1 and len(described[0]["partitions"]) == 3, f"describe_topics: {described}"
        with pytest.raises(TopicAlreadyExistsError):
            adm.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
        adm.delete_topics([topic])
        wait_topic_absent(agent.bootstrap, topic)
        assert topic not in kp_admin_call("list_topics()", adm.list_topics)
        with pytest.raises(UnknownTopicOrPartitionError):
            adm.delete_topics([topic])
        assert topic not in cluster_metadata(agent.bootstrap).topics
    finally:
        adm.close()
