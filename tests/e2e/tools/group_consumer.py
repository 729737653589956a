#!/usr/bin/env python3
"""One consumer-group member, run as a subprocess by tests/e2e/test_groups.py so
that a test can SIGKILL it (a crash: no LeaveGroup, no last commit) or SIGTERM
it (a clean close: consumer.close() sends LeaveGroup).

It subscribes to one topic in one group and loops: consume a batch, record
every record of it as processed, then (unless --commit none) commit the next
offset of each partition processed since the last commit, synchronously, once
--commit-interval-ms has passed since the last commit (0: after every batch),
and record the commit only after the broker accepted it. So at any instant,
what the events file says was committed really was committed, the broker's
committed offset is at most the last "committing" attempt, and whatever was
processed but not recorded as committed may be processed again by the next
owner. Progress not yet committed is forgotten for partitions that are revoked
or lost (committing it later could move another owner's offset backwards).

Events are JSON lines appended to --events, each written with one write(2) on
an O_APPEND descriptor (no user-space buffer survives a SIGKILL half-written):
  {"ev": "start", "pid": ..}                   process up, consumer not yet created
  {"ev": "subscribed"}                         subscribe() called
  {"ev": "assign", "parts": [..]}              rebalance callback (eager: the whole new
  {"ev": "revoke", "parts": [..]}              assignment / everything revoked;
  {"ev": "lost", "parts": [..]}                cooperative: the increments)
  {"ev": "recs", "r": [[partition, offset, idx], ..]}   processed (idx from the value)
  {"ev": "committing", "offsets": {"p": next_offset}}   about to send the commit
  {"ev": "commit", "offsets": {"p": next_offset}}       accepted by the broker
  {"ev": "commit_err", "err": ".."}
  {"ev": "error", "err": ".."}                 a consumer error event (may be transient)
  {"ev": "closing"} / {"ev": "closed"}         SIGTERM received / close() returned
  {"ev": "crash", "err": ".."}                 unexpected exception (exit code 3)
Every event carries "t" = time.monotonic() (CLOCK_MONOTONIC, comparable across
processes on one Linux machine) and "name".

Usage:
  group_consumer.py --bootstrap H:P[,H:P] --topic T --group G --events FILE
                    [--name N] [--client confluent|kafka-python]
                    [--commit sync|none] [--commit-interval-ms N]
                    [--conf key=value ...]
--conf values are passed to the client as given (kafka-python: integers and
true/false are converted).
"""

import argparse
import json
import os
import signal
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kafkautil import idx_of_value  # noqa: E402


class Events:
    def __init__(self, path, name):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.name = name

    def emit(self, ev, **fields):
        rec = {"ev": ev, "t": time.monotonic(), "wall": time.time(), "name": self.name}
        rec.update(fields)
        os.write(self.fd, (json.dumps(rec, separators=(",", ":")) + "\n").encode())


STOP = {"flag": False}


def _on_term(signum, frame):
    STOP["flag"] = True


def parse_conf(items, typed):
    out = {}
    for item in items or []:
        k, _, v = item.partition("=")
        if typed:
            if v.lower() in ("true", "false"):
                v = v.lower() == "true"
            else:
                try:
                    v = int(v)
                except ValueError:
                    pass
        out[k] = v
    return out


def run_confluent(args, ev):
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    conf = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.name,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "fetch.wait.max.ms": 100,
        "reconnect.backoff.max.ms": 1000,
        "topic.metadata.refresh.interval.ms": 5000,
    }
    conf.update(parse_conf(args.conf, typed=False))
    if conf.get("group.protocol") == "consumer":
        # KIP-848: session and heartbeat timing belong to the broker.
        conf.pop("session.timeout.ms", None)
        conf.pop("heartbeat.interval.ms", None)
    c = Consumer(conf)

    pending = {}  # partition -> next offset processed but not committed
    assigned = set()

    def on_assign(consumer, parts):
        assigned.update(tp.partition for tp in parts)
        ev.emit("assign", parts=sorted(tp.partition for tp in parts))

    def on_revoke(consumer, parts):
        for tp in parts:
            pending.pop(tp.partition, None)
            assigned.discard(tp.partition)
        ev.emit("revoke", parts=sorted(tp.partition for tp in parts))

    def on_lost(consumer, parts):
        for tp in parts:
            pending.pop(tp.partition, None)
            assigned.discard(tp.partition)
        ev.emit("lost", parts=sorted(tp.partition for tp in parts))

    c.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    ev.emit("subscribed")
    last_commit = time.monotonic()
    try:
        while not STOP["flag"]:
            msgs = c.consume(num_messages=500, timeout=0.2)
            batch = []
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        ev.emit("error", err=str(err), fatal=err.fatal())
                    continue
                p, o = m.partition(), m.offset()
                batch.append([p, o, idx_of_value(m.value())])
                if p in assigned:  # never commit for a partition already handed over
                    pending[p] = max(pending.get(p, 0), o + 1)
            if batch:
                ev.emit("recs", r=batch)
            if (args.commit == "none" or not pending
                    or time.monotonic() - last_commit < args.commit_interval_ms / 1000.0):
                continue
            nxt = dict(pending)
            last_commit = time.monotonic()
            ev.emit("committing", offsets={str(p): o for p, o in nxt.items()})
            try:
                res = c.commit(offsets=[TopicPartition(args.topic, p, o) for p, o in sorted(nxt.items())],
                               asynchronous=False)
            except KafkaException as e:
                ev.emit("commit_err", err=str(e.args[0]), offsets={str(p): o for p, o in nxt.items()})
                continue
            ok = {str(tp.partition): tp.offset for tp in res or [] if tp.error is None}
            bad = {str(tp.partition): str(tp.error) for tp in res or [] if tp.error is not None}
            for p, o in nxt.items():
                if str(p) in ok and pending.get(p) == o:
                    del pending[p]
            if ok:
                ev.emit("commit", offsets=ok)
            if bad:
                ev.emit("commit_err", err=bad)
    finally:
        if STOP["flag"]:
            ev.emit("closing")
            c.close()
            ev.emit("closed")


def run_kafka_python(args, ev):
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.errors import KafkaError

    pending = {}  # partition -> next offset processed but not committed
    assigned = set()

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            for tp in revoked:
                pending.pop(tp.partition, None)
                assigned.discard(tp.partition)
            ev.emit("revoke", parts=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, parts):
            assigned.update(tp.partition for tp in parts)
            ev.emit("assign", parts=sorted(tp.partition for tp in parts))

        def on_partitions_lost(self, lost):
            for tp in lost:
                pending.pop(tp.partition, None)
                assigned.discard(tp.partition)
            ev.emit("lost", parts=sorted(tp.partition for tp in lost))

    conf = dict(
        bootstrap_servers=args.bootstrap.split(","),
        group_id=args.group,
        client_id=args.name,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=100,
        request_timeout_ms=30000,
        reconnect_backoff_max_ms=1000,
    )
    conf.update(parse_conf(args.conf, typed=True))
    c = KafkaConsumer(**conf)
    c.subscribe([args.topic], listener=Listener())
    ev.emit("subscribed")
    last_commit = time.monotonic()
    try:
        while not STOP["flag"]:
            polled = c.poll(timeout_ms=200, max_records=500)
            batch = []
            for tp, recs in polled.items():
                for r in recs:
                    batch.append([tp.partition, r.offset, idx_of_value(r.value)])
                    if tp.partition in assigned:
                        pending[tp.partition] = max(pending.get(tp.partition, 0), r.offset + 1)
            if batch:
                ev.emit("recs", r=batch)
            if (args.commit == "none" or not pending
                    or time.monotonic() - last_commit < args.commit_interval_ms / 1000.0):
                continue
            nxt = dict(pending)
            last_commit = time.monotonic()
            ev.emit("committing", offsets={str(p): o for p, o in nxt.items()})
            try:
                c.commit({TopicPartition(args.topic, p): OffsetAndMetadata(o, "", -1) for p, o in nxt.items()})
            except KafkaError as e:
                ev.emit("commit_err", err=repr(e), offsets={str(p): o for p, o in nxt.items()})
                continue
            for p, o in nxt.items():
                if pending.get(p) == o:
                    del pending[p]
            ev.emit("commit", offsets={str(p): o for p, o in nxt.items()})
    finally:
        if STOP["flag"]:
            ev.emit("closing")
            c.close(autocommit=False)
            ev.emit("closed")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--events", required=True)
    ap.add_argument("--name", default="worker")
    ap.add_argument("--client", choices=["confluent", "kafka-python"], default="confluent")
    ap.add_argument("--commit", choices=["sync", "none"], default="sync")
    ap.add_argument("--commit-interval-ms", type=int, default=0)
    ap.add_argument("--conf", action="append", default=[])
    args = ap.parse_args()
    ev = Events(args.events, args.name)
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    ev.emit("start", pid=os.getpid(), client=args.client)
    try:
        if args.client == "confluent":
            run_confluent(args, ev)
        else:
            run_kafka_python(args, ev)
    except Exception as e:
        ev.emit("crash", err=repr(e), tb=traceback.format_exc())
        traceback.print_exc()
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
