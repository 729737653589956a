# What this proves: log compaction (cleanup.policy=compact) behaves as Kafka's
# cleaner does, seen through librdkafka (confluent-kafka) over TCP, with the
# compactor running in the agent:
#  - after compaction a partition holds, for every key, its latest record at
#    the offset it was acknowledged with, with its key, value and timestamp,
#    and nothing older; the high watermark and log start do not move;
#    batches in every codec (none, gzip, snappy, lz4, zstd) are rewritten;
#  - a consumer reading from 0 again and again while records are produced
#    and compacted only ever sees records as they were acknowledged, at
#    increasing offsets (a valid history);
#  - tombstones stay for delete.retention.ms after a pass saw them, then go;
#    the end of the log, all removed, is still readable to the high
#    watermark (an empty batch keeps where it ended);
#  - a fetch at a removed offset returns the next surviving record;
#  - transactions: aborted data is removed at once (read_uncommitted no
#    longer sees it), read_committed reads the latest committed value per
#    key, and commit markers whose data is all gone are removed;
#  - a partition with more distinct keys than the key map holds is
#    compacted in several passes, to the same result;
#  - the official Java client (kafka-clients 4.2.0, 3.9.2, 4.4.0) and
#    franz-go (1.21.5 and the newest), reading a compacted log without a
#    group in both isolation levels, step over its gaps, its empty batches,
#    its removed tail and removed aborted data to the same records
#    librdkafka reads (tests/java/.../Dump.java, tests/go/dump.go);
#  - an agent killed while it compacts leaves a log that reads whole (the
#    old spans or the new, never a mix), the restarted agent finishes the
#    job, and no object outlives the orphan collector unreferenced.
# How: one agent per test (compactor every 300 ms, objects retired after the
# 30 s floor compaction keeps for readers), confluent-kafka producers with
# explicit timestamps, group-less consumers reading to EOF, the agent's
# /metrics, and PostgreSQL queried directly for the object check.

import os
import signal
import subprocess
import threading
import time
import uuid

import pytest

from test_java_go import GO_CLIENTS, JAVA_CLIENTS, REPO_ROOT, _tail, roundtrip_clients  # noqa: F401 (fixture)
from kafkautil import (Rec, create_topic, object_files, produce_confluent, unique_topic, wait_until,
                       watermarks)

FAST = ["--compaction-interval-ms", "300", "--file-delete-delay-ms", "500",
        "--gc-interval-ms", "300", "--retention-check-interval-ms", "300"]
COMPACT = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _read(bootstrap, topic, start=0, isolation="read_uncommitted", timeout=60.0):
    """[(offset, key, value, timestamp)] of partition 0 from `start` to the
    high watermark (EOF with nothing after it), and the position reached."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-cmp-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "auto.offset.reset": "error",
                  "enable.partition.eof": True, "fetch.wait.max.ms": 100,
                  "isolation.level": isolation})
    out = []
    try:
        c.assign([TopicPartition(topic, 0, start)])
        deadline = time.monotonic() + timeout
        while True:
            assert time.monotonic() < deadline, f"reading {topic} from {start} timed out at {out[-1:]}"
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                return out, m.offset()
            out.append((m.offset(), m.key(), m.value(), m.timestamp()[1]))
    finally:
        c.close()


def _wait(what, cond, timeout=60.0, interval=0.3):
    return wait_until(what, cond, timeout, interval=interval)


def _check_history(records, sent):
    """Every record read is one acknowledged at that offset, offsets rise."""
    last = -1
    for off, key, value, ts in records:
        assert off > last, f"offset {off} after {last}"
        last = off
        s = sent.get(off)
        assert s is not None, f"offset {off} was never acknowledged"
        assert (key, value, ts) == (s.key, s.value, s.timestamp), \
            f"offset {off}: read {(key, value, ts)}, acknowledged {(s.key, s.value, s.timestamp)}"


def _latest(sent):
    """key -> the record acknowledged last for it."""
    out = {}
    for off in sorted(sent):
        out[sent[off].key] = sent[off]
    return out


def _produce_rounds(bootstrap, topic, rounds, keys, per_round, tombstones=(), base_ts=None):
    """`rounds` produce calls (each codec in turn) of `per_round` records over
    `keys` keys; the last round ends with a tombstone per key in
    `tombstones`. Returns {offset: Rec}."""
    base_ts = base_ts or int(time.time() * 1000) - 600_000
    sent = {}
    n = 0
    for r in range(rounds):
        recs = []
        for i in range(per_round):
            recs.append(Rec(n, b"k%03d" % ((n * 7) % keys), b"v%d-%d" % (r, n), [],
                            timestamp=base_ts + n))
            n += 1
        if r == rounds - 1:
            for k in tombstones:
                recs.append(Rec(n, b"k%03d" % k, None, [], timestamp=base_ts + n))
                n += 1
        produce_confluent(bootstrap, topic, recs, partition=0,
                          **{"compression.type": CODECS[r % len(CODECS)], "linger.ms": 2,
                             "batch.num.messages": 37})
        sent.update({x.offset: x for x in recs})
    return sent


def test_latest_value_per_key_tombstones_and_reads_during_compaction(start_agent):
    agent = start_agent(extra_args=FAST)
    topic = unique_topic("cmp")
    create_topic(agent.bootstrap, topic, 1, config={**COMPACT, "delete.retention.ms": "5000"})
    stop = threading.Event()
    seen = {"reads": [], "error": None}

    def reader():
        # Reads the log from 0 over and over while it is produced and
        # compacted (checked once every acknowledged offset is known).
        try:
            while not stop.is_set():
                seen["reads"].append(_read(agent.bootstrap, topic)[0])
        except BaseException as e:  # reported below
            seen["error"] = e

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    sent = _produce_rounds(agent.bootstrap, topic, rounds=10, keys=40, per_round=150,
                           tombstones=range(30, 40))
    hw = max(sent) + 1
    latest = _latest(sent)
    live = {k: r for k, r in latest.items() if r.value is not None}

    # Compacted: every key once, at its latest offset (the tombstones too,
    # until their horizon).
    def compacted():
        recs, end = _read(agent.bootstrap, topic)
        return (recs, end) if len(recs) == len(latest) else None
    recs, end = _wait("the partition compacted to one record per key", compacted)
    stop.set()
    t.join(timeout=60)
    assert seen["error"] is None, f"a reader during compaction failed: {seen['error']!r}"
    assert len(seen["reads"]) >= 2
    for read in seen["reads"]:
        _check_history(read, sent)
    assert end == hw
    _check_history(recs, sent)
    assert {off for off, *_ in recs} == {r.offset for r in latest.values()}
    assert watermarks(agent.bootstrap, topic, [0])[0] == (0, hw), "log start and high watermark kept"

    # A fetch at a removed offset returns the next surviving record.
    kept = sorted(r.offset for r in latest.values())
    for start in [0, 1, kept[0] + 1, kept[len(kept) // 2] - 1, kept[-1] - 3]:
        got, _ = _read(agent.bootstrap, topic, start=start)
        want = [o for o in kept if o >= start]
        assert [o for o, *_ in got] == want, f"from {start}"

    # The tombstones (the end of the log) go after delete.retention.ms.
    def tombstones_gone():
        recs, end = _read(agent.bootstrap, topic)
        return (recs, end) if len(recs) == len(live) else None
    recs, end = _wait("the tombstones removed", tombstones_gone, timeout=60)
    assert end == hw, "the end of the log reads to the high watermark"
    assert {off for off, *_ in recs} == {r.offset for r in live.values()}
    _check_history(recs, sent)
    got, end = _read(agent.bootstrap, topic, start=hw - 1)
    assert (got, end) == ([], hw), "a fetch in the removed tail reaches the high watermark"
    assert watermarks(agent.bootstrap, topic, [0])[0] == (0, hw)

    m = agent.metrics()
    assert m["rutomq_compaction_passes_total"] >= 2
    assert m["rutomq_compaction_removed_records_total"] >= len(sent) - len(live)
    assert m["rutomq_compaction_removed_bytes_total"] > 0
    assert any(n == "rutomq_compaction_dirty_ratio" and topic in labels
               for n, labels, _ in m.samples)


def test_transactions_aborted_data_and_markers(start_agent):
    from confluent_kafka import Producer
    agent = start_agent(extra_args=FAST)
    topic = unique_topic("cmptx")
    create_topic(agent.bootstrap, topic, 1, config={**COMPACT, "delete.retention.ms": "1000"})
    p = Producer({"bootstrap.servers": agent.bootstrap, "transactional.id": "cmp-" + uuid.uuid4().hex,
                  "linger.ms": 1})
    p.init_transactions(30)

    def txn(pairs, commit):
        p.begin_transaction()
        for k, v in pairs:
            p.produce(topic, key=k, value=v, partition=0)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)

    txn([(b"x", b"x0")], True)                       # its data will all go: marker removable
    txn([(b"a", b"a1"), (b"b", b"b1"), (b"c", b"c1")], True)
    txn([(b"a", b"a-aborted"), (b"d", b"d-aborted")], False)
    txn([(b"a", b"a3"), (b"x", b"x1")], True)
    p.flush(30)
    want = {b"a": b"a3", b"b": b"b1", b"c": b"c1", b"x": b"x1"}

    def values(isolation):
        recs, _ = _read(agent.bootstrap, topic, isolation=isolation)
        return {k: v for _, k, v, _ in recs}, len(recs)

    before_uncommitted, _ = values("read_uncommitted")
    assert b"d" in before_uncommitted or agent.metrics()["rutomq_compaction_passes_total"] > 0

    def compacted():
        vals, n = values("read_uncommitted")
        return vals if n == len(want) else None
    assert _wait("aborted and superseded records removed", compacted) == want, \
        "read_uncommitted no longer sees aborted data"
    vals, n = values("read_committed")
    assert (vals, n) == (want, len(want))
    _wait("the first transaction's commit marker removed",
          lambda: agent.metrics()["rutomq_compaction_removed_markers_total"] >= 1, timeout=30)
    vals, n = values("read_committed")
    assert (vals, n) == (want, len(want)), "read_committed after marker removal"
    hw = watermarks(agent.bootstrap, topic, [0])[0][1]
    _, end = _read(agent.bootstrap, topic, isolation="read_committed")
    assert end == hw, "read_committed reaches the high watermark (no open transaction)"


def test_more_keys_than_the_key_map_holds(start_agent):
    # 1000 slots, filled to 900 keys: 3000 distinct keys take several passes.
    agent = start_agent(extra_args=FAST + ["--compaction-key-map-bytes", str(24 * 1000)])
    topic = unique_topic("cmpmap")
    create_topic(agent.bootstrap, topic, 1, config=COMPACT)
    sent = _produce_rounds(agent.bootstrap, topic, rounds=4, keys=3000, per_round=1500)
    latest = _latest(sent)
    assert len(latest) == 3000

    def compacted():
        recs, end = _read(agent.bootstrap, topic)
        return (recs, end) if len(recs) == len(latest) else None
    recs, end = _wait("every key once", compacted, timeout=90)
    _check_history(recs, sent)
    assert {o for o, *_ in recs} == {r.offset for r in latest.values()}
    assert agent.metrics()["rutomq_compaction_passes_total"] >= 3, "several passes"


def _dump(run_sh, client, bootstrap, topic, isolation):
    """[(offset, key, value)] of partition 0 as a RoundTrip client's dump
    mode reads it ("-" is null)."""
    res = subprocess.run(["bash", run_sh, client, "dump", "--bootstrap", bootstrap, "--topic", topic,
                          "--partitions", "1", "--isolation", isolation],
                         cwd=REPO_ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    lines = res.stdout.splitlines()
    assert res.returncode == 0 and lines and lines[-1].startswith("RESULT ok"), \
        f"{client} dump {isolation}: rc={res.returncode}\n{_tail(res.stdout, 5)}\n{_tail(res.stderr, 20)}"
    out = []
    for line in lines:
        if line.startswith("REC "):
            _, part, off, key, value = line.split(" ", 4)
            assert part == "0"
            out.append((int(off), None if key == "-" else key.encode(), None if value == "-" else value.encode()))
    return out


def test_java_and_franz_go_read_a_compacted_log(start_agent, request):
    from confluent_kafka import Producer
    run_sh = request.getfixturevalue("roundtrip_clients")
    agent = start_agent(extra_args=FAST)
    topic = unique_topic("cmpjg")
    create_topic(agent.bootstrap, topic, 1, config={**COMPACT, "delete.retention.ms": "1000"})
    p = Producer({"bootstrap.servers": agent.bootstrap, "transactional.id": "cmpjg-" + uuid.uuid4().hex,
                  "linger.ms": 1})
    p.init_transactions(30)
    for pairs, commit in [([(b"ta", b"ta1"), (b"tb", b"tb1")], True),
                          ([(b"ta", b"ta-aborted"), (b"td", b"td-aborted")], False)]:
        p.begin_transaction()
        for k, v in pairs:
            p.produce(topic, key=k, value=v, partition=0)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    # Then plain batches in every codec, ending with tombstones: once they
    # go, the log's tail is removed records only.
    sent = _produce_rounds(agent.bootstrap, topic, rounds=6, keys=40, per_round=120, tombstones=range(25, 40))
    live = {k: r for k, r in _latest(sent).items() if r.value is not None}
    want = {k: r.value for k, r in live.items()} | {b"ta": b"ta1", b"tb": b"tb1"}
    hw = watermarks(agent.bootstrap, topic, [0])[0][1]

    def compacted():
        recs, end = _read(agent.bootstrap, topic)
        return recs if len(recs) == len(want) and end == hw else None
    ref = _wait("compacted, tombstones and aborted data gone", compacted, timeout=90)
    assert {k: v for _, k, v, _ in ref} == want
    assert ref[-1][0] < hw - 15, "the tail (the tombstones) is removed"
    ref = [(o, k, v) for o, k, v, _ in ref]
    for isolation in ["read_uncommitted", "read_committed"]:
        recs, end = _read(agent.bootstrap, topic, isolation=isolation)
        assert ([(o, k, v) for o, k, v, _ in recs], end) == (ref, hw), f"librdkafka {isolation}"
        for client in JAVA_CLIENTS + GO_CLIENTS:
            got = _dump(run_sh, client, agent.bootstrap, topic, isolation)
            assert got == ref, f"{client} {isolation} reads what librdkafka reads"


def _object_files(root):
    return {os.path.relpath(p, root) for p in object_files(root)}


def test_killed_mid_pass_leaves_a_whole_log_and_no_orphans(start_agent, tmp_path):
    import psycopg
    objects = tmp_path / "objects"
    objects.mkdir()
    # Each pass waits 3 s between uploading its objects and its swap.
    args = FAST + ["--inject-compaction-swap-delay-ms", "3000", "--gc-grace-ms", "10000"]
    agent = start_agent(object_store=f"file://{objects}", extra_args=args)
    topic = unique_topic("cmpkill")
    create_topic(agent.bootstrap, topic, 1, config=COMPACT)
    sent = _produce_rounds(agent.bootstrap, topic, rounds=10, keys=50, per_round=100)
    latest = _latest(sent)
    produced = _object_files(objects)
    # Produce is over: a new object is a pass's upload, its swap not done.
    _wait("a compaction pass uploading", lambda: _object_files(objects) - produced, timeout=30)
    agent.kill()
    agent.restart()
    recs, end = _read(agent.bootstrap, topic)
    _check_history(recs, sent)
    assert {r.offset for r in latest.values()} <= {o for o, *_ in recs}, "no latest value lost"

    def compacted():
        recs, end = _read(agent.bootstrap, topic)
        return (recs, end) if len(recs) == len(latest) else None
    recs, end = _wait("compaction finished by the restarted agent", compacted, timeout=60)
    _check_history(recs, sent)

    def no_orphans():
        with psycopg.connect(agent.db_url, connect_timeout=10) as conn:
            known = {r[0] for r in conn.execute("SELECT object_key FROM objects")}
            referenced = {r[0] for r in conn.execute("SELECT DISTINCT object_key FROM spans")}
        files = _object_files(objects)
        missing = referenced - files
        assert not missing, f"spans point at objects that are gone: {sorted(missing)[:5]}"
        # The killed pass's upload is unknown to PostgreSQL: the collector
        # deletes it after the grace; retired objects stay scheduled.
        return files <= known
    _wait("no object on disk unknown to PostgreSQL", no_orphans, timeout=60, interval=1.0)
