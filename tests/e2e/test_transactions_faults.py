# What this proves: transactions stay all-or-nothing under faults.
#  - The coordinator agent of a transactional id is SIGKILLed while its
#    producer runs transactions through two agents: the other agent takes the
#    id over (its state is in PostgreSQL), the producer carries on, and a
#    transaction left open by a producer that died with the agent is aborted
#    by the survivor once its timeout passes (the last stable offset then
#    reaches the high watermark).
#  - PostgreSQL restarts while a producer commits transactions back to back
#    (EndTxn in flight): the agent reconnects and the producer carries on.
# In both, a checker reads the whole history with read_committed and asserts
# the invariants: every transaction is seen whole or not at all; every one
# whose commit was acknowledged is seen; none that was aborted is; offsets
# strictly increase; read_uncommitted sees at least as much.
# How: confluent-kafka (librdkafka) transactional producers in a thread, the
# dead producer in a subprocess killed with SIGKILL, agents from conftest.

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from kafkautil import consumer_config, create_topic, read_to_eof, unique_topic, wait_until
from test_durability import _pg_ctl

PARTITIONS = 4
PER_TXN = 20


class TxnLoop(threading.Thread):
    """Runs transactions of PER_TXN records (values `txn-<n>-<i>`) over every
    partition until stopped, recording which commits were acknowledged and
    which transactions were aborted; recreates the producer after a fatal
    error, as an application does."""

    def __init__(self, bootstrap, topic, txn_id):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.txn_id = bootstrap, topic, txn_id
        self.committed, self.aborted, self.unknown = set(), set(), set()
        self.errors = []
        self.stop_flag = threading.Event()
        self.n = 0

    def producer(self):
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.txn_id,
                      "linger.ms": 2, "transaction.timeout.ms": 10000,
                      "reconnect.backoff.max.ms": 500, "socket.timeout.ms": 5000})
        p.init_transactions(60)
        return p

    def run(self):
        p = None
        while not self.stop_flag.is_set():
            try:
                if p is None:
                    p = self.producer()
                n = self.n
                self.n += 1
                p.begin_transaction()
                for i in range(PER_TXN):
                    p.produce(self.topic, value=f"txn-{n}-{i}", partition=i % PARTITIONS)
                p.flush(30)
                try:
                    p.commit_transaction(30)
                    self.committed.add(n)
                except KafkaException as e:
                    err = e.args[0]
                    if err.txn_requires_abort():
                        p.abort_transaction(30)
                        self.aborted.add(n)
                    else:
                        # Retriable or fatal: the outcome is not known here.
                        self.unknown.add(n)
                        raise
            except KafkaException as e:
                self.errors.append(str(e))
                if e.args[0].fatal() or not e.args[0].retriable():
                    p = None
                time.sleep(0.2)
            except Exception as e:  # noqa: BLE001 - reported by the test
                self.errors.append(repr(e))
                p = None
                time.sleep(0.2)

    def stop(self):
        self.stop_flag.set()
        self.join(120)


def check_history(loop, committed_view, uncommitted_view, extra_aborted=()):
    """The invariants over what read_committed consumers saw."""
    by_txn = {}
    last = {}
    for value, p, off in committed_view:
        assert off > last.get(p, -1), f"offsets not increasing in partition {p}: {last.get(p)} then {off}"
        last[p] = off
        prefix, n, i = value.split("-")
        by_txn.setdefault(prefix + "-" + n, set()).add(int(i))
    torn = {t: len(s) for t, s in by_txn.items() if len(s) != PER_TXN}
    assert not torn, f"transactions seen in part by read_committed: {sorted(torn.items())[:10]}"
    seen = {int(t.split("-")[1]) for t in by_txn if t.startswith("txn-")}
    lost = loop.committed - seen
    assert not lost, f"acknowledged commits missing from read_committed: {sorted(lost)[:20]}"
    leaked = (loop.aborted | set(extra_aborted)) & seen
    assert not leaked, f"aborted transactions visible to read_committed: {sorted(leaked)[:20]}"
    assert not any(v.startswith("dead-") for v, _, _ in committed_view), \
        "records of the transaction left open by the dead producer are visible"
    assert len(uncommitted_view) >= len(committed_view)


DEAD_PRODUCER = r"""
import os, sys, time
from confluent_kafka import Producer
bootstrap, topic, txn_id = sys.argv[1:4]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 2,
              "transaction.timeout.ms": 5000})
p.init_transactions(60)
p.begin_transaction()
for i in range(40):
    p.produce(topic, value=f"dead-{i}", partition=i % 4)
p.flush(30)
print("OPEN", flush=True)
time.sleep(3600)
"""


def _coordinator_port(bootstrap, txn_id):
    import kwire
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    c = kwire.KafkaConn(host, int(port), 10)
    try:
        c.send(kwire.frame(kwire.request_header(10, 1, 1) + kwire.string(txn_id) + kwire.i8(1)))
        r = kwire.Reader(c.recv_frame())
        r.i32()
        r.i32()
        assert r.i16() == 0
        r.string()
        r.i32()
        r.string()
        return r.i32()
    finally:
        c.sock.close()


@pytest.mark.timeout(420)
def test_coordinator_agent_killed_mid_transaction(start_agent):
    a = start_agent()
    b = start_agent()  # same database and object directory: one cluster
    both = f"{a.bootstrap},{b.bootstrap}"
    topic = unique_topic("txn-kill")
    create_topic(a.bootstrap, topic, partitions=PARTITIONS)
    # Ids coordinated by `a`, the agent that will die.
    ids = [unique_topic("kill-id") for _ in range(40)]
    mine = [i for i in ids if _coordinator_port(b.bootstrap, i) == a.port]
    assert len(mine) >= 2, "rendezvous gave agent a none of 40 ids"
    loop = TxnLoop(both, topic, mine[0])
    loop.start()
    dead = subprocess.Popen([sys.executable, "-c", DEAD_PRODUCER, b.bootstrap, topic, mine[1]],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert dead.stdout.readline().strip() == "OPEN", "the dead producer did not open its transaction"
        wait_until("some commits before the kill", lambda: len(loop.committed) >= 5, 60)
        dead.send_signal(signal.SIGKILL)
        dead.wait(10)
        before = len(loop.committed)
        a.kill()
        t_kill = time.monotonic()
        wait_until("commits after the coordinator agent died", lambda: len(loop.committed) >= before + 5, 120,
                   lambda: f"errors: {loop.errors[-5:]}")
        print(f"\nfirst commits through {b.name} {time.monotonic() - t_kill:.1f} s after the kill; "
              f"{len(loop.errors)} client errors meanwhile")
    finally:
        loop.stop()
        if dead.poll() is None:
            dead.kill()
    # The open transaction of the dead producer is aborted by the survivor
    # (timeout 5 s): the last stable offsets reach the high watermarks.
    def stable():
        rc = Consumer(consumer_config(b.bootstrap, **{"isolation.level": "read_committed"}))
        # librdkafka reads committed by default: this one must not.
        ru = Consumer(consumer_config(b.bootstrap, **{"isolation.level": "read_uncommitted"}))
        try:
            tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            lso = [rc.get_watermark_offsets(tp, timeout=10, cached=False)[1] for tp in tps]
            hw = [ru.get_watermark_offsets(tp, timeout=10, cached=False)[1] for tp in tps]
            return lso == hw
        finally:
            rc.close()
            ru.close()
    wait_until("the dead producer's transaction to be aborted by timeout", stable, 60)
    committed_view = read_to_eof(b.bootstrap, topic, PARTITIONS, "read_committed", 90.0)
    uncommitted_view = read_to_eof(b.bootstrap, topic, PARTITIONS, "read_uncommitted", 90.0)
    assert any(v.startswith("dead-") for v, _, _ in uncommitted_view), "the dead producer's records were written"
    check_history(loop, committed_view, uncommitted_view)
    print(f"{len(loop.committed)} committed, {len(loop.aborted)} aborted, {len(loop.unknown)} unknown outcome; "
          f"{len(committed_view)} records read_committed")


@pytest.mark.timeout(420)
def test_postgres_restart_during_commits(start_agent):
    a = start_agent(embedded_pg=True)
    topic = unique_topic("txn-pgrestart")
    create_topic(a.bootstrap, topic, partitions=PARTITIONS)
    loop = TxnLoop(a.bootstrap, topic, unique_topic("pg-id"))
    loop.start()
    try:
        wait_until("some commits before the restart", lambda: len(loop.committed) >= 10, 60)
        sock = os.path.join(a.data_dir, "pg", "run")
        log = os.path.join(a.data_dir, "pg", "postgres.log")
        r = _pg_ctl(a.data_dir, "restart", "-m", "fast", "-w", "-l", log,
                    "-o", f"-c listen_addresses='' -k {sock}")
        assert r.returncode == 0, f"pg_ctl restart failed: {r.stdout}{r.stderr}"
        before = len(loop.committed)
        wait_until("commits after the PostgreSQL restart", lambda: len(loop.committed) >= before + 10, 120,
                   lambda: f"errors: {loop.errors[-5:]}")
    finally:
        loop.stop()
    committed_view = read_to_eof(a.bootstrap, topic, PARTITIONS, "read_committed", 90.0)
    uncommitted_view = read_to_eof(a.bootstrap, topic, PARTITIONS, "read_uncommitted", 90.0)
    check_history(loop, committed_view, uncommitted_view)
    print(f"\n{len(loop.committed)} committed, {len(loop.aborted)} aborted, {len(loop.unknown)} unknown; "
          f"client errors: {loop.errors[:3]}")
