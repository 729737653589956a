# What this proves: retention and DeleteRecords behave as in Apache Kafka,
# seen through real clients over TCP:
#  - retention.bytes moves the log start past the oldest data so that what is
#    left stays at or just over the limit; ListOffsets(earliest) reports it,
#    records from there on read back intact, a fetch below it gets
#    OFFSET_OUT_OF_RANGE (auto.offset.reset=earliest lands on the new start),
#    and the retired objects disappear from the object directory;
#  - retention.ms retires records whose timestamps are older than the limit
#    and keeps newer ones;
#  - two agents on one database split the topics' retention between them,
#    and every topic is retained;
#  - DeleteRecords through librdkafka's AdminClient (v1+) and kafka-python's
#    KafkaAdminClient (v0): low watermarks answered, OFFSET_OUT_OF_RANGE past
#    the high watermark, -1 deletes up to the high watermark, and the
#    collector then drops the spans (metrics).
# How: confluent-kafka producers/consumers/admin and kafka-python's admin
# against one agent whose collector runs every 300 ms and deletes retired
# objects 500 ms after retiring them.

import time

from kafkautil import (Rec, cluster_metadata, consume_confluent, create_topic, make_value,
                       object_files, produce_confluent, unique_topic, watermarks)

COLLECTOR_ARGS = ["--retention-check-interval-ms", "300", "--file-delete-delay-ms", "500"]


def _records(start, n, size, timestamp=None):
    return [Rec(i, b"k%d" % i, make_value(i, size), [], timestamp=timestamp)
            for i in range(start, start + n)]


def _wait(what, cond, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.1)


def _stable(read, still, timeout=30.0):
    """The value `read` gives once it has not changed for `still` seconds."""
    deadline = time.monotonic() + timeout
    v, since = read(), time.monotonic()
    while time.monotonic() - since < still:
        assert time.monotonic() < deadline, f"still changing after {timeout}s: {v}"
        time.sleep(0.1)
        w = read()
        if w != v:
            v, since = w, time.monotonic()
    return v


def _first_offset_from(bootstrap, topic, offset, reset):
    """The first record (or error) a consumer gets when it starts at `offset`."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    import uuid
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-ret-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "auto.offset.reset": reset,
                  "fetch.wait.max.ms": 100})
    try:
        c.assign([TopicPartition(topic, 0, offset)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                return ("error", m.error().code())
            return ("record", m.offset())
        raise AssertionError(f"no record or error from {topic} at offset {offset}")
    finally:
        c.close()


def test_retention_bytes_retires_oldest_data_and_deletes_its_objects(start_agent, tmp_path):
    d = tmp_path / "objects-ret"
    d.mkdir()
    a = start_agent(object_store=f"file://{d}", extra_args=COLLECTOR_ARGS)
    topic = unique_topic("ret-bytes")
    limit = 100_000
    create_topic(a.bootstrap, topic, 1, config={"retention.bytes": str(limit)})
    # Twenty produce calls of ~100 KB: separate flush windows, so spans stay
    # around 100 KB and retention has something to choose from.
    sent = []
    for i in range(20):
        sent += produce_confluent(a.bootstrap, topic, _records(i * 100, 100, 1000), partition=0)
    high = len(sent)
    written = len(object_files(d))
    assert written > 0

    low = _wait("retention to move the log start",
                lambda: watermarks(a.bootstrap, topic, [0])[0][0])
    # Rounds go on until what is left fits: wait until four rounds in a
    # row leave the log start where it is.
    lo, hi = _stable(lambda: watermarks(a.bootstrap, topic, [0])[0], still=1.2)
    assert hi == high, f"high watermark {hi}, sent {high}"
    kept = sent[lo:]
    kept_bytes = sum(len(r.value) for r in kept)
    # At least the limit is kept (record bytes are below batch bytes), and
    # not much more than one produce call's worth over it.
    assert kept_bytes <= limit + 2 * 100 * 1000, f"kept {kept_bytes} bytes for retention.bytes={limit}"
    assert lo >= high - 2 * limit // 1000, f"log start {lo} of {high}: too little retired"

    # What is kept reads back intact, from the log start.
    got = consume_confluent(a.bootstrap, topic, {0: hi}, starts={0: lo})[0]
    assert [r.offset for r in got] == list(range(lo, hi))
    assert [r.value for r in got] == [r.value for r in kept]

    # Below the log start: OFFSET_OUT_OF_RANGE, and 'earliest' lands on it.
    from confluent_kafka import KafkaError
    kind, what = _first_offset_from(a.bootstrap, topic, 0, "error")
    assert (kind, what) == ("error", KafkaError._AUTO_OFFSET_RESET), (kind, what)
    assert _first_offset_from(a.bootstrap, topic, 0, "earliest") == ("record", lo)

    # The retired objects go from the directory (after the 500 ms delay).
    _wait("retired objects to be deleted", lambda: len(object_files(d)) < written)
    m = a.metrics()
    assert m["rutomq_retention_log_starts_moved_total"] >= 1
    assert m["rutomq_retention_spans_dropped_total"] >= 1
    assert m["rutomq_object_deletes_total"] >= 1
    assert low > 0


def test_retention_ms_retires_old_records_and_keeps_new_ones(start_agent):
    a = start_agent(extra_args=COLLECTOR_ARGS)
    topic = unique_topic("ret-ms")
    create_topic(a.bootstrap, topic, 1, config={"retention.ms": "60000"})
    now_ms = int(time.time() * 1000)
    old = produce_confluent(a.bootstrap, topic, _records(0, 300, 200, timestamp=now_ms - 600_000),
                            partition=0)
    _wait("the old records to be retired",
          lambda: watermarks(a.bootstrap, topic, [0])[0] == (len(old), len(old)))
    new = produce_confluent(a.bootstrap, topic, _records(300, 200, 200), partition=0)
    # Several collector rounds later the new records are still there.
    time.sleep(1.5)
    assert watermarks(a.bootstrap, topic, [0])[0] == (len(old), len(old) + len(new))
    got = consume_confluent(a.bootstrap, topic, {0: len(old) + len(new)}, starts={0: len(old)})[0]
    assert [r.value for r in got] == [r.value for r in new]


def test_delete_records_with_librdkafka_and_kafka_python(start_agent):
    from confluent_kafka import KafkaError, KafkaException, TopicPartition
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KpTopicPartition
    from kafka.errors import OffsetOutOfRangeError
    from kafkautil import admin

    a = start_agent(extra_args=COLLECTOR_ARGS)
    topic = unique_topic("del-rec")
    create_topic(a.bootstrap, topic, 3, config={"retention.ms": "-1"})
    sent = {p: produce_confluent(a.bootstrap, topic, _records(p * 1000, 100, 300), partition=p)
            for p in range(3)}

    adm = admin(a.bootstrap)
    fs = adm.delete_records([TopicPartition(topic, 0, 30), TopicPartition(topic, 2, -1)])
    by_partition = {tp.partition: f.result(timeout=30) for tp, f in fs.items()}
    assert by_partition[0].low_watermark == 30
    assert by_partition[2].low_watermark == 100
    # Past the high watermark: OFFSET_OUT_OF_RANGE, and nothing moves.
    fs = adm.delete_records([TopicPartition(topic, 1, 101)])
    try:
        list(fs.values())[0].result(timeout=30)
        raise AssertionError("DeleteRecords past the high watermark succeeded")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE, e

    kp = KafkaAdminClient(bootstrap_servers=[a.bootstrap], client_id="e2e-del-rec",
                          request_timeout_ms=30000)
    try:
        out = kp.delete_records({KpTopicPartition(topic, 1): 10})
        assert out[KpTopicPartition(topic, 1)]["low_watermark"] == 10, out
        # Below the log start: nothing changes, the low watermark is answered.
        out = kp.delete_records({KpTopicPartition(topic, 1): 5})
        assert out[KpTopicPartition(topic, 1)]["low_watermark"] == 10, out
        try:
            kp.delete_records({KpTopicPartition(topic, 1): 500})
            raise AssertionError("kafka-python: DeleteRecords past the high watermark succeeded")
        except OffsetOutOfRangeError:
            pass
    finally:
        kp.close()

    wm = watermarks(a.bootstrap, topic, range(3))
    assert wm == {0: (30, 100), 1: (10, 100), 2: (100, 100)}, wm
    got = consume_confluent(a.bootstrap, topic, {0: 100, 1: 100}, starts={0: 30, 1: 10})
    assert [r.value for r in got[0]] == [r.value for r in sent[0][30:]]
    assert [r.value for r in got[1]] == [r.value for r in sent[1][10:]]
    # The collector drops the spans wholly before the new log starts.
    _wait("the collector to drop retired spans",
          lambda: a.metrics()["rutomq_retention_spans_dropped_total"] >= 1)
    # New records continue the offsets of a partition emptied by -1.
    more = produce_confluent(a.bootstrap, topic, _records(5000, 10, 300), partition=2)
    assert [r.offset for r in more] == list(range(100, 110))


def test_two_agents_split_retention_and_every_topic_is_retained(start_agent):
    """Two agents on one database and object store: each topic's retention
    is worked out by one of them (hashed), and every topic gets it."""
    a = start_agent(extra_args=COLLECTOR_ARGS)
    b = start_agent(db_url=a.db_url, object_store=a.object_store, extra_args=COLLECTOR_ARGS)
    # 16 topics hashed over 2 agents: all on one agent 1 time in 32768.
    topics = [unique_topic(f"ret-two-{i}") for i in range(16)]
    for t in topics:
        create_topic(a.bootstrap, t, 1, config={"retention.bytes": "20000"})
    # Wait until both agents list both (retention is split over live agents).
    _wait("both agents in the cluster",
          lambda: all(len(cluster_metadata(x.bootstrap).brokers) == 2 for x in (a, b)))
    for i, t in enumerate(topics):
        produce_confluent((a if i % 2 else b).bootstrap, t, _records(0, 30, 1000), partition=0)
        produce_confluent((b if i % 2 else a).bootstrap, t, _records(30, 30, 1000), partition=0)
    for t in topics:
        _wait(f"retention of {t}", lambda t=t: watermarks(a.bootstrap, t, [0])[0][0] > 0)
    moved = {x.name: x.metrics()["rutomq_retention_log_starts_moved_total"] for x in (a, b)}
    assert all(v >= 1 for v in moved.values()), f"one agent did all the retention: {moved}"
