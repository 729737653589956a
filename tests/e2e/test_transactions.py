# What this proves: Kafka transactions work with the official Java client
# (kafka-clients 4.2.0, 3.9.2 and the newest, 4.4.0), franz-go (GroupTransactSession) and
# librdkafka (confluent-kafka) against rutomq: commit and abort over every
# partition with read_committed consumers seeing exactly the committed records
# (and read_uncommitted ones all of them, markers skipped), read_committed end
# offsets (the last stable offsets) reaching the high watermarks once every
# transaction ended, a zombie producer fenced by its successor's
# initTransactions with none of its records visible, and
# consume-transform-produce with sendOffsetsToTransaction (the group's
# generation checked, its offsets committed exactly with the transaction).
# Also the bad inputs of a transaction coordinator, each a Kafka error code:
# EndTxn without a transaction, AddPartitionsToTxn with a wrong epoch or
# producer id, oversized or zero transaction timeouts, a transactional id
# with NUL bytes (accepted, as Kafka does), EndTxn for an unknown id.
# librdkafka runs both as the newest confluent-kafka (the venv's) and as the
# promised 2.15.0 (a subprocess); franz-go as the newest and the promised 1.21.5.
# How: tests/java/src/main/java/Txn.java and tests/go/txn.go (the RoundTrip
# programs' `txn` subcommand; the zombie check is Java's and librdkafka's),
# the confluent-kafka checks in this file, each against one agent; the bad
# inputs over raw sockets (kwire.py).

import subprocess

import pytest

import kwire
from kafkautil import PROMISED_LIBRDKAFKA, create_topic, kafka_tool, run_with_promised_librdkafka, unique_topic
from test_java_go import GO_CLIENTS, JAVA_CLIENTS, REPO_ROOT, _tail, roundtrip_clients  # noqa: F401 (fixture)

PARTITIONS = 4
RECORDS = 400
RUN_TIMEOUT_S = 300


@pytest.mark.parametrize("client", [*JAVA_CLIENTS, *GO_CLIENTS])
def test_client_transactions(client, agent, request):
    run_sh = request.getfixturevalue("roundtrip_clients")
    topic = unique_topic(f"txn-{client.replace('.', '')}")
    for t in (topic, topic + "-in", topic + "-out"):
        create_topic(agent.bootstrap, t, partitions=PARTITIONS)
    cmd = ["bash", run_sh, client, "txn", "--bootstrap", agent.bootstrap, "--topic", topic,
           "--partitions", str(PARTITIONS), "--records", str(RECORDS)]
    res = subprocess.run(cmd, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=RUN_TIMEOUT_S)
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    last = lines[-1] if lines else "<no output>"
    assert last.startswith("RESULT ok") and res.returncode == 0, (
        f"{client} txn: {last} (exit {res.returncode})\ncommand: {' '.join(cmd)}\n"
        f"--- stdout ---\n{res.stdout}\n--- stderr (last 200 lines) ---\n{_tail(res.stderr, 200)}")
    assert f"committed={2 * RECORDS} all={3 * RECORDS}" in last, last
    assert f"transformed={RECORDS}" in last, last


# ---- raw requests (non-flexible versions: the layouts librdkafka sends) ----

def _call(conn, key, version, body, cid):
    conn.send(kwire.frame(kwire.request_header(key, version, cid) + body))
    r = kwire.Reader(conn.recv_frame())
    assert r.i32() == cid
    return r


def _find_coordinator(conn, txn_id):
    # FindCoordinator v1, key type 1 (transaction).
    r = _call(conn, 10, 1, kwire.string(txn_id) + kwire.i8(1), 1)
    r.i32()
    err = r.i16()
    r.string()
    node = r.i32()
    return err, node


def _init_producer_id(conn, txn_id, timeout_ms, cid=2):
    # InitProducerId v1: transactional id, timeout.
    r = _call(conn, 22, 1, kwire.string(txn_id) + kwire.i32(timeout_ms), cid)
    r.i32()
    return r.i16(), r.i64(), r.i16()


def _end_txn(conn, txn_id, pid, epoch, commit, version=1, cid=3):
    r = _call(conn, 26, version, kwire.string(txn_id) + kwire.i64(pid) + kwire.i16(epoch)
              + kwire.i8(1 if commit else 0), cid)
    r.i32()
    return r.i16()


def _add_partitions(conn, txn_id, pid, epoch, topic, partitions, version=1, cid=4):
    body = (kwire.string(txn_id) + kwire.i64(pid) + kwire.i16(epoch)
            + kwire.array([topic], lambda t: kwire.string(t) + kwire.array(partitions, kwire.i32)))
    r = _call(conn, 24, version, body, cid)
    r.i32()
    out = {}
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            p = r.i32()
            out[p] = r.i16()
    return out


ERR_INVALID_PRODUCER_EPOCH = 47
ERR_INVALID_TXN_STATE = 48
ERR_INVALID_PRODUCER_ID_MAPPING = 49
ERR_INVALID_TRANSACTION_TIMEOUT = 50
ERR_PRODUCER_FENCED = 90


def test_transaction_bad_inputs(agent):
    topic = unique_topic("txn-bad")
    create_topic(agent.bootstrap, topic, partitions=2)
    c = kwire.KafkaConn("127.0.0.1", agent.port, 10)
    try:
        txn = unique_topic("bad-id")
        err, node = _find_coordinator(c, txn)
        assert err == 0 and node >= 0
        # Timeouts: zero, negative and above transaction.max.timeout.ms (15 min).
        for t in (0, -5, 900_001):
            err, _, _ = _init_producer_id(c, txn, t)
            assert err == ERR_INVALID_TRANSACTION_TIMEOUT, (t, err)
        err, pid, epoch = _init_producer_id(c, txn, 60_000)
        assert (err, epoch) == (0, 0), "a fresh id starts at epoch 0"
        # EndTxn without a transaction: INVALID_TXN_STATE, commit or abort.
        assert _end_txn(c, txn, pid, epoch, True) == ERR_INVALID_TXN_STATE
        assert _end_txn(c, txn, pid, epoch, False) == ERR_INVALID_TXN_STATE
        # Wrong epoch: INVALID_PRODUCER_EPOCH before KIP-588 (v1), PRODUCER_FENCED after (v3
        # is flexible; v2 is not and knows PRODUCER_FENCED).
        assert set(_add_partitions(c, txn, pid, epoch + 1, topic, [0]).values()) == {ERR_INVALID_PRODUCER_EPOCH}
        assert set(_add_partitions(c, txn, pid, epoch + 1, topic, [0], version=2).values()) == {ERR_PRODUCER_FENCED}
        assert set(_add_partitions(c, txn, pid + 1, epoch, topic, [0]).values()) == {ERR_INVALID_PRODUCER_ID_MAPPING}
        # A good add opens the transaction; a second commit of it succeeds (Flink's retry).
        assert set(_add_partitions(c, txn, pid, epoch, topic, [0, 1]).values()) == {0}
        assert _end_txn(c, txn, pid, epoch, True) == 0
        assert _end_txn(c, txn, pid, epoch, True) == 0, "a repeated commit succeeds"
        assert _end_txn(c, txn, pid, epoch, False) == ERR_INVALID_TXN_STATE
        assert _end_txn(c, txn, pid, epoch + 7, True, version=2) == ERR_PRODUCER_FENCED
        # Unknown id (one agent coordinates every id, so never NOT_COORDINATOR).
        assert _end_txn(c, unique_topic("never-used"), pid, epoch, True) == ERR_INVALID_PRODUCER_ID_MAPPING
        # NUL bytes: Kafka accepts any string as a transactional id; so does rutomq
        # (stored as bytes, not text). One agent coordinates every id.
        nul = "nul\x00id-" + txn
        assert _find_coordinator(c, nul)[0] == 0
        err, _, nul_epoch = _init_producer_id(c, nul, 60_000)
        assert (err, nul_epoch) == (0, 0)
        assert _end_txn(c, nul, 0, 0, True) == ERR_INVALID_PRODUCER_ID_MAPPING
        # Re-initialising fences: the epoch moves on.
        err, pid2, epoch2 = _init_producer_id(c, txn, 60_000)
        assert err == 0 and (pid2, epoch2) == (pid, epoch + 1)
    finally:
        c.sock.close()


def _produce_raw(conn, topic, batch, transactional_id=None, cid=9):
    conn.send(kwire.produce_request(8, cid, {topic: {0: batch}}, transactional_id=transactional_id))
    _, parts, _ = kwire.parse_produce_response(conn.recv_frame(), 8)
    return parts[topic][0]


def test_plain_batch_of_a_producer_in_a_transaction_is_refused(agent):
    """An idempotent, non-transactional batch from a producer id whose
    transaction is open in the partition: INVALID_TXN_STATE, as Kafka
    answers; once the transaction ended the same producer may write plain
    batches again (its sequence numbers carry on)."""
    topic = unique_topic("txn-plain")
    create_topic(agent.bootstrap, topic, partitions=1)
    c = kwire.KafkaConn("127.0.0.1", agent.port, 10)
    try:
        txn = unique_topic("plain-id")
        assert _find_coordinator(c, txn)[0] == 0
        err, pid, epoch = _init_producer_id(c, txn, 60_000)
        assert err == 0
        assert set(_add_partitions(c, txn, pid, epoch, topic, [0]).values()) == {0}
        recs = [(None, b"v", [])] * 2

        def batch(seq, transactional):
            return kwire.encode_record_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                             attributes=0x10 if transactional else 0)
        assert _produce_raw(c, topic, batch(0, True), txn).error_code == 0
        r = _produce_raw(c, topic, batch(2, False))
        assert r.error_code == ERR_INVALID_TXN_STATE, r
        assert _end_txn(c, txn, pid, epoch, True) == 0
        r = _produce_raw(c, topic, batch(2, False))
        assert (r.error_code, r.base_offset) == (0, 3), r  # after the 2 records and the marker
    finally:
        c.close()


# ---- librdkafka (confluent-kafka) ----

def _read_to_eof(bootstrap, topic, partitions, isolation, timeout=60.0):
    """Values of every record of `topic` up to the end the consumer sees
    (the last stable offset for read_committed), per partition."""
    from kafkautil import read_to_eof
    out = {p: [] for p in range(partitions)}
    for value, p, _ in read_to_eof(bootstrap, topic, partitions, isolation, timeout):
        out[p].append(value)
    return out


def _txn_producer(bootstrap, txn_id):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5,
                  "transaction.timeout.ms": 60000})
    p.init_transactions(30)
    return p


def _send_txn(p, topic, partitions, tag, n, commit):
    p.begin_transaction()
    for i in range(n):
        p.produce(topic, key=f"k{i}", value=f"{tag}-{i}", partition=i % partitions)
    p.flush(30)
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)


@pytest.mark.parametrize("librdkafka", ["newest", PROMISED_LIBRDKAFKA])
def test_librdkafka_transactions(librdkafka, agent):
    if librdkafka == "newest":
        librdkafka_transaction_checks(agent.bootstrap)
    else:
        run_with_promised_librdkafka("test_transactions", "librdkafka_transaction_checks", agent.bootstrap)


def librdkafka_transaction_checks(bootstrap):
    """Commit, abort, read_committed, a fenced zombie and
    consume-transform-produce with whichever confluent-kafka is imported."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    parts, n = 4, 300
    topic = unique_topic("txn-rdk")
    create_topic(bootstrap, topic, partitions=parts)
    p = _txn_producer(bootstrap, topic + "-txn")
    _send_txn(p, topic, parts, "a", n, True)
    _send_txn(p, topic, parts, "b", n, False)
    _send_txn(p, topic, parts, "c", n, True)
    committed = _read_to_eof(bootstrap, topic, parts, "read_committed")
    everything = _read_to_eof(bootstrap, topic, parts, "read_uncommitted")
    seen = [v for vs in committed.values() for v in vs]
    assert len(seen) == 2 * n and not any(v.startswith("b-") for v in seen), (len(seen), seen[:5])
    assert sum(len(v) for v in everything.values()) == 3 * n

    # A zombie: a second producer with the same id fences the first.
    zid = topic + "-zombie"
    old = _txn_producer(bootstrap, zid)
    old.begin_transaction()
    for i in range(n):
        old.produce(topic, value=f"zombie-{i}", partition=i % parts)
    old.flush(30)
    new = _txn_producer(bootstrap, zid)
    with pytest.raises(KafkaException):
        old.commit_transaction(30)
    _send_txn(new, topic, parts, "s", n, True)
    seen = [v for vs in _read_to_eof(bootstrap, topic, parts, "read_committed").values() for v in vs]
    assert not any(v.startswith("zombie-") for v in seen)
    assert sum(v.startswith("s-") for v in seen) == n

    # Consume-transform-produce with the consumer's offsets in the transaction.
    src, dst, group = topic + "-in", topic + "-out", topic + "-eos"
    create_topic(bootstrap, src, partitions=parts)
    create_topic(bootstrap, dst, partitions=parts)
    from kafkautil import produce_confluent, make_records
    produce_confluent(bootstrap, src, make_records(n, big=False))
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    t = _txn_producer(bootstrap, topic + "-eos")
    c.subscribe([src])
    copied = 0
    import time
    deadline = time.monotonic() + 90
    while copied < n:
        assert time.monotonic() < deadline, f"copied {copied} of {n}"
        msgs = [m for m in c.consume(num_messages=200, timeout=0.5) if m.error() is None]
        if not msgs:
            continue
        t.begin_transaction()
        for m in msgs:
            t.produce(dst, key=m.key(), value=m.value(), partition=m.partition())
        copied += len(msgs)
        t.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
        t.commit_transaction(30)
    out = _read_to_eof(bootstrap, dst, parts, "read_committed")
    assert sum(len(v) for v in out.values()) == n
    committed = c.committed([TopicPartition(src, p) for p in range(parts)], timeout=10)
    c.close()
    from kafkautil import watermarks
    wm = watermarks(bootstrap, src, range(parts))
    assert {tp.partition: tp.offset for tp in committed} == {p: wm[p][1] for p in range(parts)}


# ---- kafka-transactions.sh (Apache Kafka's TransactionsCommand, kafka-tools) ----

OPEN_PRODUCER = r"""
import sys, time
from confluent_kafka import Producer
bootstrap, topic, txn_id = sys.argv[1:4]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
              "transaction.timeout.ms": 600000})
p.init_transactions(30)
p.begin_transaction()
for i in range(8):
    p.produce(topic, value=b"open", partition=i % 2)
p.flush(30)
print("OPEN", flush=True)
time.sleep(600)
"""


def test_kafka_transactions_tool(agent, request):
    import sys
    run_sh = request.getfixturevalue("roundtrip_clients")
    topic, txn = unique_topic("txn-tool"), unique_topic("tool-id")
    create_topic(agent.bootstrap, topic, partitions=2)
    opener = subprocess.Popen([sys.executable, "-c", OPEN_PRODUCER, agent.bootstrap, topic, txn],
                              stdout=subprocess.PIPE, text=True)

    def tool(*args):
        res = kafka_tool(run_sh, "org.apache.kafka.tools.TransactionsCommand",
                         "--bootstrap-server", agent.bootstrap, *args)
        return [ln.split() for ln in res.stdout.splitlines() if ln.strip()]

    try:
        assert opener.stdout.readline().strip() == "OPEN"
        rows = tool("list")
        assert rows[0][:4] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
        mine = [r for r in rows[1:] if r[0] == txn]
        assert len(mine) == 1 and mine[0][3] == "Ongoing", rows
        pid = mine[0][2]
        rows = tool("describe", "--transactional-id", txn)
        assert rows[1][1:5] == [txn, pid, "0", "Ongoing"], rows
        assert sorted(rows[1][-1].split(",")) == [f"{topic}-0", f"{topic}-1"], rows
        rows = tool("describe-producers", "--topic", topic, "--partition", "0")
        assert rows[1][0] == pid and rows[1][-1] == "0", rows  # CurrentTransactionStartOffset 0
        rows = tool("find-hanging", "--topic", topic, "--max-transaction-timeout", "0")
        assert len(rows) == 1, f"an open transaction its coordinator knows is not hanging: {rows}"
        tool("abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
        rows = tool("describe", "--transactional-id", txn)
        # The whole transaction is aborted (both partitions), its producer fenced.
        assert rows[1][1:5] == [txn, pid, "1", "CompleteAbort"], rows
    finally:
        opener.kill()
    committed = _read_to_eof(agent.bootstrap, topic, 2, "read_committed")
    assert committed == {0: [], 1: []}


def test_concurrent_transactional_producers(agent):
    """Several transactional producers commit at once over the same
    partitions (their EndTxns racing each other and the window commits):
    every commit leaves exactly one marker per partition, high watermarks
    count records plus markers, and read_committed sees every record once."""
    import threading
    from kafkautil import watermarks
    parts, producers, txns, per = 4, 3, 25, 40
    topic = unique_topic("txn-conc")
    create_topic(agent.bootstrap, topic, partitions=parts)
    errors = []

    def run(k):
        try:
            p = _txn_producer(agent.bootstrap, f"{topic}-p{k}")
            for t in range(txns):
                _send_txn(p, topic, parts, f"p{k}t{t}", per, True)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert not errors, errors
    records = producers * txns * per
    wm = watermarks(agent.bootstrap, topic, range(parts))
    assert sum(hi for _, hi in wm.values()) == records + producers * txns * parts, wm
    seen = [v for vs in _read_to_eof(agent.bootstrap, topic, parts, "read_committed").values() for v in vs]
    assert len(seen) == records and len(set(seen)) == records
