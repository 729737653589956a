# What this proves: rutomq's network front end speaks the Kafka wire protocol
# correctly at the byte level and defends itself against malformed or hostile
# input, without relying on any client library's leniency:
#  - ApiVersions v0..v3 (v3 = flexible request header v2 with tagged fields; the
#    response header stays v0) answer error 0 and list Produce, Fetch, ListOffsets,
#    Metadata, ApiVersions and CreateTopics; the response frame is consumed exactly;
#  - ApiVersions with an unknown version (99) answers UNSUPPORTED_VERSION (35) in
#    the v0 layout and still lists the table, and the connection stays usable;
#  - pipelined requests are answered in order; a request dribbled byte by byte works;
#  - negative / > 100 MiB frame lengths, HTTP garbage and an unknown api key close
#    the connection, without the broker allocating the claimed size, and the
#    broker keeps serving other clients;
#  - a stalled half-frame client does not delay others; 300 idle connections are fine;
#  - Produce validates every batch: a wrong CRC32C gives CORRUPT_MESSAGE (2) for
#    that partition while another partition of the same request succeeds; a batch
#    whose record count claims more records than it holds gives CORRUPT_MESSAGE (2)
#    or INVALID_RECORD (87); nothing of a rejected batch becomes visible (high
#    watermark unchanged); an unknown topic with auto-create off gives
#    UNKNOWN_TOPIC_OR_PARTITION (3); offsets are assigned contiguously;
#  - a consumer reading a backlog of hundreds of spans from the beginning has
#    its partition's next spans read from PostgreSQL ahead of it (read-ahead
#    reaching the end of the spans its shard knows): its fetches wait for
#    PostgreSQL at the start only, not once every 64 spans (the reads counted
#    by rutomq_span_reads_waited_total and rutomq_span_reads_ahead_total);
#  - the versions Kafka 4.3 added, encoded by hand: ListOffsets v11 answers
#    KIP-1023's earliest pending upload (-6) with offset -1 (nothing is ever
#    pending upload) and refuses -6 at v10 with UNSUPPORTED_VERSION (35);
#    OffsetCommit v10 and OffsetFetch v10 name topics by id (a commit by id
#    reads back by id, and by name to librdkafka; an unknown id answers
#    UNKNOWN_TOPIC_ID, 100).
# How: plain sockets and the hand-written codec in kwire.py (itself checked
# byte-for-byte against kafka-python in test_harness.py).

import os
import socket
import struct
import threading
import time

import pytest

import kwire
from kafkautil import consume_confluent, create_topic, proc_status_kib, unique_topic, watermarks

REQUIRED_KEYS = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 18: "ApiVersions",
                 19: "CreateTopics"}


def connect(agent, timeout=10.0):
    return kwire.KafkaConn("127.0.0.1", agent.port, timeout)


def assert_serves(agent, within=2.0):
    """A fresh connection gets an ApiVersions v3 answer within `within` seconds."""
    t0 = time.monotonic()
    with connect(agent, timeout=within + 1) as c:
        res = c.api_versions(3)
    took = time.monotonic() - t0
    assert res.error_code == 0, f"ApiVersions error {res.error_code}"
    assert took < within, f"ApiVersions took {took:.2f}s (limit {within}s)"
    return res


def check_table(res, version):
    missing = {k: n for k, n in REQUIRED_KEYS.items() if k not in res.versions}
    assert not missing, f"ApiVersions v{version} table lacks {missing}; got keys {sorted(res.versions)}"
    for k, (mn, mx) in res.versions.items():
        assert 0 <= mn <= mx, f"api key {k}: bad version range {mn}..{mx}"
    assert res.versions[18][1] >= 3, f"ApiVersions max version {res.versions[18][1]} < 3"


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_api_versions(agent, version):
    with connect(agent) as c:
        cid = 0x1234_5678 + version
        c.send(kwire.api_versions_request(version, cid))
        res = kwire.parse_api_versions_response(c.recv_frame(), version)
        assert res.correlation_id == cid
        assert res.error_code == 0, f"ApiVersions v{version} returned error {res.error_code}"
        check_table(res, version)
        if version >= 1:
            assert res.throttle_time_ms == 0
        # the same connection keeps working
        res2 = c.api_versions(version)
        assert res2.versions == res.versions


def test_api_versions_unsupported_version_answers_v0_layout(agent):
    # Apache Kafka answers with error 35 in the v0 layout and lists (at least) its
    # ApiVersions range, so the client can retry with a version it supports.
    with connect(agent) as c:
        c.send(kwire.api_versions_request(99, 4242, flexible=True))
        payload = c.recv_frame()
        res = kwire.parse_api_versions_response(payload, 0)  # strict: v0 layout, exact length
        assert res.correlation_id == 4242
        assert res.error_code == kwire.ERR_UNSUPPORTED_VERSION, (
            f"ApiVersions v99 gave error {res.error_code}, want 35 UNSUPPORTED_VERSION")
        assert 18 in res.versions, f"the v0 error response must list ApiVersions (18): {res.versions}"
        mn, mx = res.versions[18]
        assert mn == 0 and mx >= 3, f"ApiVersions range {mn}..{mx} in the error response"
        # a client retries with the highest listed version on the same connection
        res3 = c.api_versions(min(mx, 3))
        assert res3.error_code == 0
        check_table(res3, min(mx, 3))
        assert res3.versions[18] == (mn, mx), "the error response and the real table disagree on ApiVersions"
        for k, rng in res.versions.items():
            assert res3.versions.get(k) == rng, f"api key {k}: {rng} in the error response, {res3.versions.get(k)} in the table"


def test_pipelined_requests_answered_in_order(agent):
    with connect(agent) as c:
        c.send(b"".join(kwire.api_versions_request(v, 100 + i) for i, v in enumerate([3, 0, 2, 3, 1])))
        for i, v in enumerate([3, 0, 2, 3, 1]):
            res = kwire.parse_api_versions_response(c.recv_frame(), v)
            assert res.correlation_id == 100 + i, f"response {i} has correlation id {res.correlation_id}"
            assert res.error_code == 0


def test_request_split_into_single_bytes(agent):
    req = kwire.api_versions_request(3, 77)
    with connect(agent) as c:
        for b in req:
            c.send(bytes([b]))
            time.sleep(0.005)
        res = kwire.parse_api_versions_response(c.recv_frame(), 3)
        assert res.correlation_id == 77 and res.error_code == 0


@pytest.mark.parametrize("claimed", [-1, -0x7FFFFFFF, 100 * 1024 * 1024 + 1, 0x7FFFFFFF],
                         ids=["minus1", "int32min+1", "100MiB+1", "2GiB"])
def test_bad_frame_length_closes_connection(agent, claimed):
    with connect(agent) as c:
        try:
            c.send(struct.pack(">i", claimed) + os.urandom(4096))
        except (BrokenPipeError, ConnectionResetError):
            pass
        kwire.wait_closed(c.sock, timeout=5)
    assert_serves(agent)


def test_huge_frame_is_not_buffered(agent):
    """Claim ~2 GiB and keep sending (up to 192 MiB, 10 s): a broker that
    allocates the claimed size and reads into it (or buffers until the frame is
    complete) shows it in its peak resident memory (VmHWM)."""
    before = proc_status_kib(agent.pid, "VmHWM")
    sent = 0
    with connect(agent) as c:
        chunk = b"\x00" * (1 << 20)
        deadline = time.monotonic() + 10
        try:
            c.send(struct.pack(">i", 0x7FFF_FFF0))
            while sent < 192 * (1 << 20) and time.monotonic() < deadline:
                c.send(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            pass
        kwire.wait_closed(c.sock, timeout=5)
    grew = proc_status_kib(agent.pid, "VmHWM") - before
    assert grew < 96 * 1024, (
        f"broker peak RSS grew by {grew // 1024} MiB while a client sent {sent >> 20} MiB of a "
        f"frame claiming 2 GiB: it must reject the length before reading the body")
    assert_serves(agent)


@pytest.mark.parametrize("payload", [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",                                     # length 0x47455420
    struct.pack(">i", 3) + b"\x00\x12\x00",                                   # frame shorter than a header
    struct.pack(">i", 10) + struct.pack(">hhih", 18, 0, 5, 100),               # client_id runs past frame
    kwire.frame(kwire.request_header(9999, 0, 7)),                            # unknown api key
    kwire.frame(kwire.request_header(-5, 0, 7)),                              # negative api key
    # ListOffsets v1 whose topic array claims 2^31-1 entries in a few bytes:
    # a decoder that pre-sizes from the count asks for ~100 GiB at once.
    kwire.frame(kwire.request_header(2, 1, 7) + struct.pack(">ii", -1, 0x7FFFFFFF) + b"\x00" * 8),
    # Metadata v0 claiming 54 million topics (a known 8-byte crash input).
    kwire.frame(kwire.request_header(3, 0, 7) + bytes.fromhex("033c0c00b6")),
], ids=["http", "short-frame", "truncated-header", "api-key-9999", "api-key-negative",
        "forged-array-count", "forged-metadata-count"])
def test_garbage_closes_connection(agent, payload):
    with connect(agent) as c:
        try:
            c.send(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass
        kwire.wait_closed(c.sock, timeout=5)
    assert_serves(agent)


def test_stalled_half_frame_is_cut_off(start_agent):
    """A client that sends half a frame and stalls holds memory admitted for
    the whole frame: it is disconnected after --frame-io-timeout-ms."""
    a = start_agent(extra_args=["--frame-io-timeout-ms", "1000"])
    s = socket.create_connection(("127.0.0.1", a.port), timeout=10)
    try:
        s.sendall(struct.pack(">i", 1 << 20) + b"\x00" * 1000)
        time.sleep(0.3)
        s.settimeout(10)
        start = time.monotonic()
        try:
            data = s.recv(1)
        except ConnectionResetError:
            data = b""
        waited = time.monotonic() - start
        assert data == b"", f"expected the broker to close the stalled connection, got {data!r}"
        assert waited < 8, f"stalled connection closed only after {waited:.1f}s (timeout 1 s)"
    finally:
        s.close()
    assert_serves(a)


def test_stalled_half_frame_does_not_block_others(agent):
    stalled = []
    try:
        # one client stalls inside the length prefix, one inside the body
        s1 = socket.create_connection(("127.0.0.1", agent.port), timeout=5)
        s1.sendall(b"\x00\x00")
        stalled.append(s1)
        s2 = socket.create_connection(("127.0.0.1", agent.port), timeout=5)
        s2.sendall(kwire.api_versions_request(3, 1)[:9])
        stalled.append(s2)
        time.sleep(0.2)
        for _ in range(5):
            assert_serves(agent, within=1.0)
        # concurrently from several threads too
        errors = []

        def worker():
            try:
                assert_serves(agent, within=1.0)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))
        ts = [threading.Thread(target=worker) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout=10)
        assert not errors, f"concurrent ApiVersions failed while two clients stall: {errors}"
        # the stalled body, once completed, is answered normally
        s2.sendall(kwire.api_versions_request(3, 1)[9:])
        conn = kwire.KafkaConn.wrap(s2, timeout=5)
        res = kwire.parse_api_versions_response(conn.recv_frame(), 3)
        assert res.correlation_id == 1 and res.error_code == 0
    finally:
        for s in stalled:
            s.close()


def test_300_idle_connections(agent):
    idle = []
    try:
        for i in range(300):
            idle.append(socket.create_connection(("127.0.0.1", agent.port), timeout=5))
        time.sleep(0.5)
        assert_serves(agent, within=2.0)
        # and idle ones still work when they finally speak
        for i in (0, 150, 299):
            conn = kwire.KafkaConn.wrap(idle[i], timeout=5)
            conn.send(kwire.api_versions_request(3, 500 + i))
            res = kwire.parse_api_versions_response(conn.recv_frame(), 3)
            assert res.correlation_id == 500 + i and res.error_code == 0
    finally:
        for s in idle:
            s.close()
    assert_serves(agent)


# --------------------------------------------------------------------------
# Produce validation


def new_topic(agent, prefix, partitions):
    """Create a topic and wait until every partition answers ListOffsets, so a
    single non-retrying raw Produce does not race the partition becoming led."""
    topic = unique_topic(prefix)
    create_topic(agent.bootstrap, topic, partitions)
    assert watermarks(agent.bootstrap, topic, range(partitions)) == {p: (0, 0) for p in range(partitions)}
    return topic


def produce_version(agent):
    with connect(agent) as c:
        res = c.api_versions(3)
    mn, mx = res.versions.get(0, (None, None))
    assert mn is not None, "broker does not list Produce"
    v = min(mx, kwire.PRODUCE_MAX_SUPPORTED_HERE)
    assert v >= max(mn, kwire.PRODUCE_MIN_SUPPORTED_HERE), (
        f"broker Produce versions {mn}..{mx} do not overlap v3..v8 that this test speaks")
    return v


def records(n, tag):
    return [(b"k%d" % i, b"%s-%d" % (tag, i), [("h", b"%d" % i)]) for i in range(n)]


def test_produce_assigns_contiguous_offsets(agent):
    topic = new_topic(agent, "raw", 1)
    v = produce_version(agent)
    with connect(agent) as c:
        r1 = c.produce(v, {topic: {0: kwire.encode_record_batch(records(3, b"a"))}})[topic][0]
        r2 = c.produce(v, {topic: {0: kwire.encode_record_batch(records(2, b"b"))}})[topic][0]
    assert (r1.error_code, r1.base_offset) == (0, 0), f"first batch: {r1}"
    assert (r2.error_code, r2.base_offset) == (0, 3), f"second batch: {r2}"
    assert watermarks(agent.bootstrap, topic, [0]) == {0: (0, 5)}


def test_a_backlog_reader_finds_its_next_spans_read_ahead(agent):
    topic = new_topic(agent, "spans", 1)
    v = produce_version(agent)
    n = 448
    # One batch per request, each acknowledged before the next is sent: a
    # span (and an object) each.
    with connect(agent) as c:
        for i in range(n):
            r = c.produce(v, {topic: {0: kwire.encode_record_batch(records(1, b"s%d" % i))}})[topic][0]
            assert (r.error_code, r.base_offset) == (0, i), f"batch {i}: {r}"
    before = agent.metrics()
    # One batch per fetch: 15-deep read-ahead reaches 15 spans past it.
    got = consume_confluent(agent.bootstrap, topic, {0: n}, **{"max.partition.fetch.bytes": 1})
    after = agent.metrics()
    assert [r.offset for r in got[0]] == list(range(n))
    assert [r.value for r in got[0]] == [b"s%d-0" % i for i in range(n)]

    def delta(name):
        return after.get(name, 0) - before.get(name, 0)
    waited, ahead = delta("rutomq_span_reads_waited_total"), delta("rutomq_span_reads_ahead_total")
    # PostgreSQL answers 64 spans a read: the first fetch's read, then reads
    # ahead (without them, a fetch waited for one every 64 spans: 7 here).
    assert waited <= 3, f"fetches waited for {waited:.0f} span reads ({ahead:.0f} read ahead)"
    assert ahead >= 4, f"{ahead:.0f} span reads ahead of the consumer ({waited:.0f} waited for)"


def test_a_fetch_does_not_wait_for_one_partition_when_another_has_records(start_agent):
    """A partition whose spans are still on their way from the object store
    is answered without records when the response has enough from another;
    its GET goes on into the read cache for the next fetch."""
    latency_ms = 1500
    a = start_agent(shards=1, extra_args=[
        "--inject-object-latency-ms", str(latency_ms), "--tail-cache-bytes", "0"])
    topic = new_topic(a, "unwaited", 2)
    v = produce_version(a)
    with connect(a) as c:
        # Apart: one object each.
        for p in (0, 1):
            r = c.produce(v, {topic: {p: kwire.encode_record_batch(records(3, b"p%d" % p))}})[topic][p]
            assert (r.error_code, r.base_offset) == (0, 0), f"partition {p}: {r}"
        # Partition 0 read once: its object is in the read cache now.
        err, hw, got = kwire.fetch_v4(c, topic, 0, 0)
        assert (err, hw) == (0, 3) and got, f"partition 0 alone: error {err}, high watermark {hw}"
        before = a.metrics()
        first = kwire.fetch_v4_partitions(c, topic, {0: 0, 1: 0})
        middle = a.metrics()
        # The GET of partition 1 takes the injected latency; then its
        # object is in the read cache.
        deadline = time.monotonic() + 30
        while True:
            time.sleep(latency_ms / 1000)
            second = kwire.fetch_v4_partitions(c, topic, {1: 0})
            if second[1][2] or time.monotonic() > deadline:
                break
        after = a.metrics()

    def delta(m0, m1, name):
        return m1.get(name, 0) - m0.get(name, 0)
    assert first[0][:2] == (0, 3) and first[0][2], f"partition 0 came without records: {first[0]}"
    assert first[1][:2] == (0, 3) and first[1][2] == b"", (
        f"partition 1 waited for its GET ({len(first[1][2])} record bytes; high watermark {first[1][1]})")
    assert delta(before, middle, "rutomq_fetch_reads_unwaited_total") == 1
    assert second[1][:2] == (0, 3) and second[1][2], f"partition 1's records never came: {second[1]}"
    # One GET of partition 1's object, counted when done.
    assert delta(before, after, "rutomq_object_gets_total") == 1, (
        "partition 1 was read again: the first fetch's GET did not go on into the read cache")


def test_produce_bad_crc_is_rejected_per_partition(agent):
    topic = new_topic(agent, "raw-crc", 2)
    v = produce_version(agent)
    good = kwire.encode_record_batch(records(4, b"good"))
    bad = bytearray(kwire.encode_record_batch(records(4, b"bad")))
    crc_pos = 8 + 4 + 4 + 1
    bad[crc_pos:crc_pos + 4] = struct.pack(">I", struct.unpack(">I", bad[crc_pos:crc_pos + 4])[0] ^ 0x1)
    with connect(agent) as c:
        res = c.produce(v, {topic: {0: bytes(bad), 1: good}})
    assert set(res) == {topic} and set(res[topic]) == {0, 1}, f"response covers {res}"
    assert res[topic][0].error_code == kwire.ERR_CORRUPT_MESSAGE, (
        f"bad-CRC batch: {res[topic][0]} (want error 2 CORRUPT_MESSAGE)")
    assert res[topic][1].error_code == 0 and res[topic][1].base_offset == 0, (
        f"good batch in the same request: {res[topic][1]}")
    assert watermarks(agent.bootstrap, topic, [0, 1]) == {0: (0, 0), 1: (0, 4)}, (
        "the corrupt batch must not be appended and the good one must be")
    m = agent.metrics()
    assert m.get("rutomq_produce_batches_rejected_total", 0) >= 1, "rejected batch not counted in /metrics"
    assert m.get("rutomq_produce_batches_total", 0) >= 1, "appended batch not counted in /metrics"
    assert m.get("rutomq_produce_latency_seconds_count", 0) >= 1, "produce latency histogram is empty"


@pytest.mark.parametrize("claimed", [3, 1_000_000, -1], ids=["one-more", "million", "negative"])
def test_produce_record_count_mismatch_is_rejected(agent, claimed):
    topic = new_topic(agent, "raw-cnt", 2)
    v = produce_version(agent)
    lying = kwire.encode_record_batch(records(2, b"liar"), claimed_count=claimed)  # CRC is valid
    good = kwire.encode_record_batch(records(2, b"ok"))
    with connect(agent) as c:
        res = c.produce(v, {topic: {0: lying, 1: good}})
    assert res[topic][0].error_code in (kwire.ERR_CORRUPT_MESSAGE, kwire.ERR_INVALID_RECORD), (
        f"batch claiming {claimed} records but holding 2: {res[topic][0]} (want error 2 or 87)")
    assert res[topic][1].error_code == 0, f"good batch in the same request: {res[topic][1]}"
    assert watermarks(agent.bootstrap, topic, [0, 1]) == {0: (0, 0), 1: (0, 2)}
    assert_serves(agent)


def test_produce_truncated_batch_is_rejected(agent):
    topic = new_topic(agent, "raw-trunc", 1)
    v = produce_version(agent)
    batch = kwire.encode_record_batch(records(3, b"t"))
    with connect(agent) as c:
        res = c.produce(v, {topic: {0: batch[:-5]}})  # batchLength now overstates the bytes present
    assert res[topic][0].error_code in (kwire.ERR_CORRUPT_MESSAGE, kwire.ERR_INVALID_RECORD), (
        f"truncated batch: {res[topic][0]}")
    assert watermarks(agent.bootstrap, topic, [0]) == {0: (0, 0)}


def test_request_larger_than_the_shard_budget_is_admitted_alone(start_agent):
    """--shard-memory-bytes may be below the largest request: such a request
    waits until nothing else is admitted and then takes the whole budget,
    so two of them from two connections at once are both appended."""
    a = start_agent(shards=1, extra_args=["--shard-memory-bytes", str(1 << 20)])
    topic = new_topic(a, "raw-big", 3)
    v = produce_version(a)
    value = b"v" * (900 << 10)  # three partitions: a 2.7 MiB request
    results = {}

    def send(name):
        with connect(a, timeout=30) as c:
            batches = {p: kwire.encode_record_batch([(None, value + name, [])]) for p in range(3)}
            results[name] = c.produce(v, {topic: batches})[topic]
    ts = [threading.Thread(target=send, args=(n,)) for n in (b"a", b"b")]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert set(results) == {b"a", b"b"}, f"a request over the budget was not answered: {results}"
    for name, res in results.items():
        assert all(res[p].error_code == 0 for p in range(3)), f"request {name!r}: {res}"
    assert watermarks(a.bootstrap, topic, range(3)) == {p: (0, 2) for p in range(3)}
    assert_serves(a)


def test_failing_log_writes_do_not_stop_the_agent(start_agent):
    """stdout and stderr on a full disk (/dev/full fails every write with
    ENOSPC): the agent's log lines are lost, nothing else. (tracing-subscriber
    reports a failed write with eprintln!, which panics when stderr fails
    too: a full disk under the log killed the thread that logged, and the
    agent with it, exit code 101.)"""
    a = start_agent(log_path="/dev/full")
    topic = new_topic(a, "raw-devfull", 2)  # logs "created topic" on a shard
    v = produce_version(a)
    with connect(a) as c:
        res = c.produce(v, {topic: {p: kwire.encode_record_batch(records(3, b"full")) for p in range(2)}})
    assert all(res[topic][p].error_code == 0 for p in range(2)), f"produce: {res}"
    assert watermarks(a.bootstrap, topic, range(2)) == {0: (0, 3), 1: (0, 3)}
    assert_serves(a)
    a.stop()  # asserts exit code 0


def test_produce_unknown_topic_without_auto_create(start_agent):
    a = start_agent(auto_create_topics=False)
    topic = unique_topic("raw-nope")
    v = produce_version(a)
    with connect(a) as c:
        res = c.produce(v, {topic: {0: kwire.encode_record_batch(records(1, b"x"))}})
    assert res[topic][0].error_code == kwire.ERR_UNKNOWN_TOPIC_OR_PARTITION, (
        f"produce to a missing topic with auto-create off: {res[topic][0]} (want 3)")


def test_http_endpoints(agent):
    status, body = agent.http("/health/ready")
    assert status == 200, f"/health/ready: {status} {body[:200]!r}"
    m = agent.metrics()
    assert m.samples, f"/metrics has no samples:\n{m.raw[:2000]}"
    status, _ = agent.http("/no-such-endpoint")
    assert status == 404, f"unknown HTTP path returned {status}, want 404"


# ---- the versions Kafka 4.3 added (flexible encodings by hand) ------------

def carr(items, enc):
    """A compact array."""
    items = list(items)
    return kwire.uvarint(len(items) + 1) + b"".join(enc(x) for x in items)


TAGS = kwire.EMPTY_TAGGED_FIELDS


def flexible_call(conn, key, version, body):
    """One flexible request; returns a Reader after the response header."""
    cid = conn.next_cid()
    conn.send(kwire.frame(kwire.request_header(key, version, cid, flexible=True) + body))
    r = kwire.Reader(conn.recv_frame())
    assert r.i32() == cid
    r.tagged_fields()
    return r


def topic_id_of(bootstrap, topic):
    from confluent_kafka import TopicCollection
    from kafkautil import admin
    adm = admin(bootstrap)
    d = adm.describe_topics(TopicCollection([topic]))[topic].result(timeout=30)
    u = d.topic_id
    return (u.get_most_significant_bits().to_bytes(8, "big", signed=True)
            + u.get_least_significant_bits().to_bytes(8, "big", signed=True))


def list_offsets(conn, version, topic, timestamp):
    part = lambda p: kwire.i32(p) + kwire.i32(-1) + kwire.i64(timestamp) + TAGS  # noqa: E731
    body = (kwire.i32(-1) + kwire.i8(0)
            + carr([topic], lambda t: kwire.compact_string(t) + carr([0], part) + TAGS)
            + (kwire.i32(30000) if version >= 10 else b"") + TAGS)
    r = flexible_call(conn, 2, version, body)
    r.i32()  # throttle

    def partition(r):
        out = (r.i32(), r.i16(), r.i64(), r.i64(), r.i32())
        r.tagged_fields()
        return out

    def topic(r):
        name = r.compact_string()
        parts = r.compact_array(partition)
        r.tagged_fields()
        return name, parts

    topics = r.compact_array(topic)
    return topics[0][1][0]  # (partition, error, timestamp, offset, epoch)


def offset_commit_v10(conn, group, topic_id, partition, offset):
    part = lambda p: (kwire.i32(p) + kwire.i64(offset) + kwire.i32(-1)  # noqa: E731
                      + kwire.compact_string("m") + TAGS)
    body = (kwire.compact_string(group) + kwire.i32(-1) + kwire.compact_string("")
            + kwire.compact_string(None)
            + carr([topic_id], lambda t: t + carr([partition], part) + TAGS) + TAGS)
    r = flexible_call(conn, 8, 10, body)
    r.i32()

    def partition_(r):
        out = (r.i32(), r.i16())
        r.tagged_fields()
        return out

    def topic(r):
        tid = r.take(16)
        parts = r.compact_array(partition_)
        r.tagged_fields()
        return tid, parts

    return r.compact_array(topic)


def offset_fetch_v10(conn, group, topic_id, partition):
    topic = lambda t: t + carr([partition], kwire.i32) + TAGS  # noqa: E731
    body = (carr([group], lambda g: kwire.compact_string(g) + kwire.compact_string(None)
                 + kwire.i32(-1) + carr([topic_id], topic) + TAGS)
            + kwire.i8(0) + TAGS)
    r = flexible_call(conn, 9, 10, body)
    r.i32()

    def partition_(r):
        out = (r.i32(), r.i64(), r.i32(), r.compact_string(), r.i16())
        r.tagged_fields()
        return out

    def topic_(r):
        tid = r.take(16)
        parts = r.compact_array(partition_)
        r.tagged_fields()
        return tid, parts

    def group_(r):
        g = r.compact_string()
        topics = r.compact_array(topic_)
        code = r.i16()
        r.tagged_fields()
        return g, topics, code

    return r.compact_array(group_)


def test_versions_kafka_4_3_added(agent):
    topic = unique_topic("v43")
    create_topic(agent.bootstrap, topic, 2)
    tid = topic_id_of(agent.bootstrap, topic)
    unknown = bytes(range(1, 17))
    group = unique_topic("g43")
    with kwire.KafkaConn.to(agent.bootstrap) as conn:
        # ListOffsets 11: nothing is pending upload; -6 needs v11.
        assert list_offsets(conn, 11, topic, -6)[1:4] == (0, -1, -1)
        assert list_offsets(conn, 10, topic, -6)[1] == 35
        assert list_offsets(conn, 11, topic, -2)[1:4] == (0, -1, 0)
        # OffsetCommit 10 by id, then OffsetFetch 10 by id.
        assert offset_commit_v10(conn, group, tid, 1, 42) == [(tid, [(1, 0)])]
        assert offset_commit_v10(conn, group, unknown, 0, 1) == [(unknown, [(0, 100)])]
        groups = offset_fetch_v10(conn, group, tid, 1)
        assert groups == [(group, [(tid, [(1, 42, -1, "m", 0)])], 0)], groups
        groups = offset_fetch_v10(conn, group, unknown, 0)
        assert groups == [(group, [(unknown, [(0, -1, -1, "", 100)])], 0)], groups
    # The same commit, by name, to a client of an older version (its
    # metadata left out: librdkafka expects a C terminator in it).
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": agent.bootstrap, "group.id": group})
    try:
        got = c.committed([TopicPartition(topic, 1)], timeout=30)
        assert [(tp.partition, tp.offset) for tp in got] == [(1, 42)]
    finally:
        c.close()
