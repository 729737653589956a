"""A record batch corrupted at rest in the object store, read back with and
without --read-verify-crc.

What this shows, with a real agent, a real file:// object store and real clients:

  - with --read-verify-crc, a Fetch that reads the corrupt batch back from the
    object store is refused for that partition with KAFKA_STORAGE_ERROR (56),
    no record bytes are sent, and the agent logs "committed span is corrupt";
  - without it (the default, as with Kafka's brokers) the batch is sent exactly
    as stored: the Fetch succeeds (error 0), the response carries the flipped
    byte and a batch CRC that no longer matches its contents, and it is the
    consumer's own CRC check that catches it: kafka-python with
    check_crcs=True (its default) raises kafka.errors.CorruptRecordError
    ("... failed crc check") from poll() instead of returning the value,
    while check_crcs=False hands the corrupted value over silently.

How: an agent with its own data dir (objects under DATA_DIR/objects) gets a few
records in one batch from kafka-python, one value carrying a unique marker.
The agent is stopped (its in-memory tail cache, whose batches are never
re-checked, is gone), one byte of the marker is flipped in the .rtq object
file (the batch CRC covers everything from the attributes field on, so the
batch is now corrupt), and the agent is restarted on the same data dir, first
with --read-verify-crc, then without it. Fetches are a hand-written Fetch v4
(kwire) and kafka-python consumers (group-less, assign() + seek()).
"""

import os
import struct
import time
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import CorruptRecordError

import kwire
from kafkautil import create_topic, object_files, unique_topic

KAFKA_STORAGE_ERROR = 56
CORRUPT_LOG = "committed span is corrupt"


def _produce(bootstrap, topic, values):
    """kafka-python, uncompressed, one flush: {value: offset}."""
    p = KafkaProducer(bootstrap_servers=[bootstrap], acks="all", linger_ms=200,
                      compression_type=None, request_timeout_ms=15000, max_block_ms=15000,
                      client_id="e2e-stored-corruption")
    try:
        futures = [(v, p.send(topic, value=v, partition=0)) for v in values]
        p.flush(timeout=15)
        return {v: f.get(timeout=1).offset for v, f in futures}
    finally:
        p.close(timeout=5)


def _flip_marker_byte(objects_dir, marker):
    """Flip one bit of the marker's first byte in the one object that holds
    it (lower case to upper case); returns (path, the corrupted marker)."""
    hits = []
    for path in object_files(objects_dir):
        with open(path, "rb") as f:
            data = f.read()
        at = data.find(marker)
        while at >= 0:
            hits.append((path, at))
            at = data.find(marker, at + 1)
    assert len(hits) == 1, (f"the marker {marker!r} should be stored exactly once under {objects_dir}, "
                            f"found at {hits} (objects: {object_files(objects_dir)})")
    path, at = hits[0]
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(bytes([marker[0] ^ 0x20]))
        f.flush()
        os.fsync(f.fileno())
    return path, bytes([marker[0] ^ 0x20]) + marker[1:]


def _raw_fetch(bootstrap, topic, partition=0, offset=0):
    """Fetch v4 of one partition: (error code, high watermark, record bytes)."""
    with kwire.KafkaConn.to(bootstrap) as c:
        return kwire.fetch_v4(c, topic, partition, offset)


def _batches(records):
    """(base offset, stored CRC, CRC32C of attributes..end) of each v2 batch."""
    out, pos = [], 0
    while pos + 12 <= len(records):
        base, length = struct.unpack(">qi", records[pos:pos + 12])
        end = pos + 12 + length
        if end > len(records):
            break  # a partial batch at the end of a response
        assert records[pos + 16] == 2, f"batch at {base}: magic {records[pos + 16]}, want 2"
        stored = struct.unpack(">I", records[pos + 17:pos + 21])[0]
        out.append((base, stored, kwire.crc32c(records[pos + 21:end])))
        pos = end
    return out


def _log_since(agent, mark):
    with open(agent.log_path, "rb") as f:
        f.seek(mark)
        return f.read().decode("utf-8", "replace")


def _restart(agent, extra_args):
    """Restart on the same data dir, ports and database with other flags;
    returns where this run's log starts."""
    assert not agent.is_running()
    agent.extra_args = list(extra_args)
    mark = os.path.getsize(agent.log_path)
    agent.start()
    return mark


def _kp_consumer(bootstrap, topic, check_crcs):
    c = KafkaConsumer(bootstrap_servers=[bootstrap], group_id=None, enable_auto_commit=False,
                      auto_offset_reset="none", fetch_max_wait_ms=100, request_timeout_ms=15000,
                      check_crcs=check_crcs, client_id="e2e-stored-corruption")
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, 0)
    return c


def _kp_poll(c, *, until_offset, got, timeout=15.0):
    """Poll until a record at or past `until_offset` arrives, appending
    (offset, value) to `got`; a poll() exception propagates."""
    deadline = time.monotonic() + timeout
    while not got or got[-1][0] < until_offset:
        assert time.monotonic() < deadline, f"kafka-python read only {got} in {timeout}s"
        for msgs in c.poll(timeout_ms=500).values():
            got.extend((m.offset, m.value) for m in msgs)


@pytest.mark.timeout(120)
def test_corrupt_stored_batch_with_and_without_read_verify_crc(start_agent, tmp_path):
    data_dir = tmp_path / "agent-data"
    objects = data_dir / "objects"
    objects.mkdir(parents=True)
    a = start_agent(data_dir=str(data_dir), object_store=f"file://{objects}")
    topic = unique_topic("stored-corrupt")
    create_topic(a.bootstrap, topic, 1)

    marker = b"marker-" + uuid.uuid4().hex.encode()
    values = [b"first", b"value:" + marker + b":end", b"last"]
    offsets = _produce(a.bootstrap, topic, values)
    assert sorted(offsets.values()) == [0, 1, 2], f"offsets {offsets}"
    err, hw, records = _raw_fetch(a.bootstrap, topic)
    assert (err, hw) == (0, 3) and marker in records, f"before the corruption: error {err}, hw {hw}"
    assert [b for b, s, c in _batches(records) if s != c] == [], "a batch is corrupt before the flip"

    a.stop()  # the tail cache goes with the process
    path, corrupted = _flip_marker_byte(objects, marker)
    corrupted_value = b"value:" + corrupted + b":end"

    # (a) --read-verify-crc: the read from the object store is checked and refused.
    mark = _restart(a, ["--read-verify-crc"])
    err, hw, records = _raw_fetch(a.bootstrap, topic)
    assert err == KAFKA_STORAGE_ERROR, (
        f"with --read-verify-crc, Fetch of the corrupt batch (object {path}) answered error {err}, "
        f"want {KAFKA_STORAGE_ERROR} (KAFKA_STORAGE_ERROR); records {records[:80]!r}")
    assert records == b"", f"records sent with the error: {records[:80]!r}"
    log = _log_since(a, mark)
    lines = [line for line in log.splitlines() if CORRUPT_LOG in line]
    assert lines, f"the agent did not log {CORRUPT_LOG!r}:\n{log[-3000:]}"
    assert os.path.basename(path) in lines[0] and "CRC" in lines[0], (
        f"the log line should name the object {os.path.basename(path)} and the CRC: {lines[0]}")

    # (b) the default: the batch is sent as stored, the consumer's CRC check finds it.
    a.stop()
    mark = _restart(a, [])
    err, hw, records = _raw_fetch(a.bootstrap, topic)
    assert (err, hw) == (0, 3), f"without --read-verify-crc: error {err}, hw {hw}, want (0, 3)"
    assert corrupted in records and marker not in records, (
        "the fetched bytes are not the stored (corrupted) ones")
    bad = [(b, s, c) for b, s, c in _batches(records) if s != c]
    assert len(bad) == 1 and bad[0][0] <= offsets[values[1]], (
        f"want exactly the batch holding offset {offsets[values[1]]} with a CRC mismatch: "
        f"(base, stored, computed) {_batches(records)}")

    c = _kp_consumer(a.bootstrap, topic, check_crcs=True)
    try:
        got = []
        with pytest.raises(CorruptRecordError, match="failed crc check") as exc:
            _kp_poll(c, until_offset=offsets[values[1]], got=got)
        assert f"at offset {bad[0][0]}" in str(exc.value), f"{exc.value}"
    finally:
        c.close()

    # A kafka-python consumer without its CRC check takes the corrupted value as is.
    c = _kp_consumer(a.bootstrap, topic, check_crcs=False)
    try:
        got = []
        _kp_poll(c, until_offset=offsets[values[1]], got=got)
        assert (offsets[values[1]], corrupted_value) in got, f"check_crcs=False read {got}"
    finally:
        c.close()
    assert CORRUPT_LOG not in _log_since(a, mark), "the agent checked the CRC without the flag"
