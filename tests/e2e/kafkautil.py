"""Client-side helpers shared by the e2e tests: topic admin through
confluent-kafka's AdminClient, deterministic record generation, producing and
reading back with confluent-kafka (group-less: assign() with explicit offsets,
never subscribe()), and the common log-consistency checks.

Every wait loop here has a deadline.
"""

import functools
import os
import subprocess
import threading
import time
import uuid
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Optional


def unique_topic(prefix="e2e"):
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# --------------------------------------------------------------------------
# records


@dataclass
class Rec:
    """One record as sent (partition/offset unknown) or as read back."""
    idx: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: list = field(default_factory=list)  # [(str, bytes|None)]
    partition: Optional[int] = None
    offset: Optional[int] = None
    timestamp: Optional[int] = None


def idx_of_value(value):
    """Values start with b'v<idx:08d>|'."""
    if not value or len(value) < 10 or value[:1] != b"v" or value[9:10] != b"|":
        return None
    try:
        return int(value[1:9])
    except ValueError:
        return None


def make_value(idx, size):
    head = b"v%08d|" % idx
    filler = (b"rutomq-e2e-%d-" % (idx % 17)) * (size // 12 + 1)
    return head + filler[:max(size - len(head), 0)]


def make_records(n, *, n_keys=97, null_headers=True, big=True):
    """Deterministic records: keyed (a few with a null key), varied value sizes
    (0..~1.2 KB after the 10-byte prefix, plus a 300 KB one in the middle),
    several headers including binary, empty, duplicated and (optionally) null values."""
    recs = []
    for i in range(n):
        key = None if i % 1000 == 3 else b"key-%03d" % (i % n_keys)
        size = 300_000 if (big and n >= 100 and i == n // 2) else (i * 37) % 1200
        value = make_value(i, size)
        headers = [("idx", str(i).encode()), ("bin", bytes([i % 256, 0, 255, (i * 7) % 256])),
                   ("empty", b""), ("dup", b"1"), ("dup", b"2")]
        if null_headers and i % 5 == 0:
            headers.append(("null", None))
        recs.append(Rec(i, key, value, headers))
    return recs


# --------------------------------------------------------------------------
# confluent-kafka admin


def admin(bootstrap):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def cluster_metadata(bootstrap, timeout=10):
    return admin(bootstrap).list_topics(timeout=timeout)


def wait_for_topic(bootstrap, topic, partitions=None, timeout=30.0):
    """Poll full-cluster Metadata (no topic-specific request, so nothing can
    auto-create it) until `topic` is listed without error, with `partitions`
    partitions (if given) that all have a leader. Returns the TopicMetadata."""
    adm = admin(bootstrap)
    deadline = time.monotonic() + timeout
    last = "not listed"
    while True:
        try:
            md = adm.list_topics(timeout=5)
            t = md.topics.get(topic)
            if t is not None:
                if t.error is not None:
                    last = f"topic error {t.error}"
                elif partitions is not None and len(t.partitions) != partitions:
                    last = f"{len(t.partitions)} partitions, want {partitions}"
                elif any(p.leader < 0 or p.error is not None for p in t.partitions.values()):
                    last = "partitions without leader: " + str(
                        {p.id: (p.leader, str(p.error)) for p in t.partitions.values()})
                else:
                    return t
        except Exception as e:  # KafkaException on timeouts
            last = repr(e)
        if time.monotonic() > deadline:
            raise AssertionError(f"topic {topic!r} not ready after {timeout}s: {last}")
        time.sleep(0.2)


def wait_topic_absent(bootstrap, topic, timeout=30.0):
    adm = admin(bootstrap)
    deadline = time.monotonic() + timeout
    while True:
        md = adm.list_topics(timeout=5)
        if topic not in md.topics:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"topic {topic!r} still listed in Metadata {timeout}s after deletion")
        time.sleep(0.2)


def create_topic(bootstrap, topic, partitions=1, replication_factor=1, config=None, timeout=30.0):
    """CreateTopics through confluent-kafka's AdminClient, then wait until
    Metadata shows the topic with all partitions led."""
    from confluent_kafka.admin import NewTopic
    adm = admin(bootstrap)  # keep a reference: a destroyed client fails its futures with _DESTROY
    fs = adm.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor,
                  config=config or {})],
        operation_timeout=timeout, request_timeout=timeout)
    try:
        fs[topic].result(timeout=timeout)
    except Exception as e:
        raise AssertionError(f"CreateTopics({topic!r}, partitions={partitions}) failed: {e!r}") from e
    return wait_for_topic(bootstrap, topic, partitions, timeout)


def delete_topic(bootstrap, topic, timeout=30.0):
    adm = admin(bootstrap)  # keep a reference until the future resolves
    fs = adm.delete_topics([topic], operation_timeout=timeout, request_timeout=timeout)
    try:
        fs[topic].result(timeout=timeout)
    except Exception as e:
        raise AssertionError(f"DeleteTopics({topic!r}) failed: {e!r}") from e


def watermarks(bootstrap, topic, partitions, timeout=10.0):
    """{partition: (low, high)} via ListOffsets (cached=False): the high
    watermark, not the last stable offset (librdkafka's default isolation
    level is read_committed)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-wm-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False)
                for p in partitions}
    finally:
        c.close()


# --------------------------------------------------------------------------
# confluent-kafka produce / consume


def producer_config(bootstrap, **overrides):
    conf = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 60000,
        "reconnect.backoff.max.ms": 1000,
        "partitioner": "murmur2_random",
    }
    conf.update(overrides)
    return conf


def produce_confluent(bootstrap, topic, records, timeout=120.0, partition=None, **conf_overrides):
    """Produce `records` (list of Rec) in order, wait for every delivery report.
    Fills rec.partition / rec.offset from the report. Returns the records;
    raises AssertionError listing delivery errors if any."""
    from confluent_kafka import Producer
    p = Producer(producer_config(bootstrap, **conf_overrides))
    errors = []
    delivered = [0]

    def on_delivery(rec, err, msg):
        if err is not None:
            errors.append((rec.idx, str(err)))
        else:
            rec.partition = msg.partition()
            rec.offset = msg.offset()
            delivered[0] += 1

    deadline = time.monotonic() + timeout
    for i, rec in enumerate(records):
        kw = {}
        if partition is not None:
            kw["partition"] = partition
        elif rec.partition is not None:
            kw["partition"] = rec.partition
        if rec.timestamp is not None:
            kw["timestamp"] = rec.timestamp
        while True:
            try:
                p.produce(topic, key=rec.key, value=rec.value, headers=rec.headers or None,
                          on_delivery=functools.partial(on_delivery, rec), **kw)
                break
            except BufferError:
                p.poll(0.1)
                if time.monotonic() > deadline:
                    raise AssertionError("producer queue stayed full until the deadline")
        if i % 200 == 0:
            p.poll(0)
    remaining = p.flush(max(deadline - time.monotonic(), 1.0))
    assert remaining == 0, (f"{remaining} of {len(records)} messages still undelivered after {timeout}s; "
                            f"{delivered[0]} delivered, errors: {errors[:10]}")
    assert not errors, f"{len(errors)} delivery errors, first ones: {errors[:10]}"
    assert delivered[0] == len(records), f"{delivered[0]} delivery reports for {len(records)} records"
    return records


def consumer_config(bootstrap, **overrides):
    conf = {
        "bootstrap.servers": bootstrap,
        # confluent-kafka insists on a group.id even for assign(); it is never
        # joined (no subscribe) and nothing is committed.
        "group.id": "e2e-nogroup-" + uuid.uuid4().hex,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",  # surface OFFSET_OUT_OF_RANGE instead of silently resetting
        "enable.partition.eof": True,
        "fetch.wait.max.ms": 100,
    }
    conf.update(overrides)
    return conf


def consume_confluent(bootstrap, topic, ends, starts=None, timeout=60.0, **conf_overrides):
    """Read partitions {p: end_offset_exclusive} from `starts` (default 0) with a
    group-less consumer (assign + explicit offsets). Returns {p: [Rec...]} in
    the order received. Fails if any partition does not reach its end offset
    before the deadline or if the consumer reports an error."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    starts = starts or {}
    out = {p: [] for p in ends}
    nxt = {p: starts.get(p, 0) for p in ends}
    c = Consumer(consumer_config(bootstrap, **conf_overrides))
    try:
        c.assign([TopicPartition(topic, p, starts.get(p, 0)) for p in ends])
        deadline = time.monotonic() + timeout
        while any(nxt[p] < ends[p] for p in ends):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout}s reading {topic}: next offset per partition {nxt}, "
                    f"wanted end offsets {ends}")
            msgs = c.consume(num_messages=1000, timeout=0.5)
            for m in msgs:
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(f"consumer error on {topic}[{m.partition()}]: {m.error()}")
                p = m.partition()
                ts_type, ts = m.timestamp()
                out[p].append(Rec(idx_of_value(m.value()), m.key(), m.value(), list(m.headers() or []),
                                  p, m.offset(), ts))
                nxt[p] = max(nxt[p], m.offset() + 1)
        return out
    finally:
        c.close()


def read_to_eof(bootstrap, topic, partitions, isolation, timeout=60.0):
    """(value, partition, offset) of every record of `topic`'s `partitions`
    partitions up to the end a group-less consumer with `isolation.level`
    `isolation` sees (the last stable offset for read_committed), in the
    order received: the end is when every partition reported EOF with no
    record since."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    c = Consumer(consumer_config(bootstrap, **{"isolation.level": isolation}))
    out = []
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        eof = set()
        deadline = time.monotonic() + timeout
        while len(eof) < partitions:
            assert time.monotonic() < deadline, f"reading {topic} ({isolation}) timed out; eof {eof}"
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error() is not None:
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                    eof.add(m.partition())
                    continue
                eof.discard(m.partition())
                out.append((m.value().decode(), m.partition(), m.offset()))
        return out
    finally:
        c.close()


def run_build_script(script, *args, timeout):
    """Runs `bash script args...` from the repository root (the tests/*/build.sh
    programs: idempotent, fast when nothing changed); fails the test with its
    output (stderr's last 200 lines) when it fails or outlasts `timeout` s."""
    import subprocess
    import pytest
    root = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    name = os.path.relpath(script, root)

    def text(b):
        if b is None:
            return ""
        return b.decode("utf-8", "replace") if isinstance(b, bytes) else b

    def tail(t):
        return "\n".join(t.splitlines()[-200:])
    try:
        res = subprocess.run(["bash", script, *args], cwd=root, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{name} did not finish in {timeout} s\n"
                    f"stdout:\n{text(e.stdout)}\nstderr:\n{tail(text(e.stderr))}", pytrace=False)
    if res.returncode != 0:
        pytest.fail(f"{name} failed with exit code {res.returncode}\n"
                    f"stdout:\n{res.stdout}\nstderr:\n{tail(res.stderr)}", pytrace=False)


# librdkafka 2.15.0, the version the product promises (the venv has the newest):
# installed by scripts/test.sh from tests/requirements-promised.txt.
PROMISED_LIBRDKAFKA = "2.15.0"
PROMISED_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".cache", "py", "promised")


def run_with_promised_librdkafka(module, function, *args, timeout=300):
    """Runs `module.function(*args)` (string arguments) of tests/e2e in a
    subprocess whose `import confluent_kafka` is the promised version; fails
    with its output when it raises or when the version is not that one."""
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    assert os.path.isdir(os.path.join(PROMISED_PY, "confluent_kafka")), (
        f"{PROMISED_PY} has no confluent_kafka: scripts/test.sh installs tests/requirements-promised.txt there")
    code = ("import importlib, sys, confluent_kafka\n"
            f"assert confluent_kafka.libversion()[0] == {PROMISED_LIBRDKAFKA!r}, confluent_kafka.libversion()\n"
            "getattr(importlib.import_module(sys.argv[1]), sys.argv[2])(*sys.argv[3:])\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PROMISED_PY, here]))
    res = subprocess.run([sys.executable, "-c", code, module, function, *args], cwd=here, env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, (
        f"{module}.{function} with librdkafka {PROMISED_LIBRDKAFKA}: exit {res.returncode}\n"
        f"--- stdout ---\n{res.stdout[-4000:]}\n--- stderr ---\n{res.stderr[-8000:]}")
    return res.stdout


# --------------------------------------------------------------------------
# checks


def check_roundtrip(sent, consumed, *, check_headers=True, null_headers_supported=True):
    """The core correctness check of a produce-then-read-back:
    - every sent record read back exactly once, at the offset its ack reported
    - per partition, offsets read are exactly 0..n-1 in order (contiguous, no gaps/dups)
    - keys, values (and headers) byte-identical
    - per key: one partition, and send order == log order."""
    by_idx = {r.idx: r for r in sent}
    assert len(by_idx) == len(sent)
    seen = {}
    for p, recs in consumed.items():
        offs = [r.offset for r in recs]
        assert offs == list(range(len(offs))), (
            f"partition {p}: offsets read are not contiguous from 0: first anomalies "
            f"{[(i, o) for i, o in enumerate(offs) if o != i][:10]} ({len(offs)} records)")
        for r in recs:
            assert r.idx is not None, f"partition {p} offset {r.offset}: value does not carry an idx: {r.value[:40]!r}"
            assert r.idx not in seen, (f"record idx {r.idx} read twice: at {seen[r.idx]} and "
                                       f"{(p, r.offset)}")
            seen[r.idx] = (p, r.offset)
    missing = sorted(set(by_idx) - set(seen))
    extra = sorted(set(seen) - set(by_idx))
    assert not missing, f"{len(missing)} acknowledged records never read back, e.g. idx {missing[:10]}"
    assert not extra, f"{len(extra)} records read that were never sent, e.g. idx {extra[:10]}"
    for p, recs in consumed.items():
        for r in recs:
            s = by_idx[r.idx]
            assert (s.partition, s.offset) == (p, r.offset), (
                f"idx {r.idx}: acked at {(s.partition, s.offset)} but read at {(p, r.offset)}")
            assert r.key == s.key, f"idx {r.idx}: key {r.key!r} != sent {s.key!r}"
            assert r.value == s.value, (f"idx {r.idx}: value differs (len {len(r.value or b'')} vs "
                                        f"{len(s.value or b'')}): {r.value[:40]!r} vs {s.value[:40]!r}")
            if check_headers:
                want = s.headers if null_headers_supported else [h for h in s.headers if h[1] is not None]
                got = [(k, v) for k, v in r.headers]
                assert got == want, f"idx {r.idx}: headers {got} != sent {want}"
    # per-key order
    per_key = defaultdict(list)
    for p in sorted(consumed):
        for r in consumed[p]:
            if r.key is not None:
                per_key[r.key].append((p, r.offset, r.idx))
    for key, lst in per_key.items():
        parts = {p for p, _, _ in lst}
        assert len(parts) == 1, f"key {key!r} spread over partitions {sorted(parts)}"
        idxs = [i for _, _, i in sorted(lst)]
        assert idxs == sorted(idxs), f"key {key!r}: log order {idxs[:20]}... differs from send order"


def partition_counts(records):
    counts = defaultdict(int)
    for r in records:
        counts[r.partition] += 1
    return dict(counts)


# --------------------------------------------------------------------------
# background producer (durability tests)


class StreamProducer(threading.Thread):
    """Produces keyed records as fast as allowed (rate-limited, bounded count)
    from a background thread, recording each acknowledged (partition, offset).
    With `partitions`, record i goes to partition i % partitions (every
    partition gets records); otherwise the client's partitioner decides."""

    def __init__(self, bootstrap, topic, max_records=300_000, rate_per_sec=5000, partitions=None,
                 **conf_overrides):
        super().__init__(daemon=True)
        from confluent_kafka import Producer
        self.topic = topic
        self.producer = Producer(producer_config(bootstrap, **{"message.timeout.ms": 180000,
                                                              **conf_overrides}))
        self.max_records = max_records
        self.rate = rate_per_sec
        self.partitions = partitions
        self.lock = threading.Lock()
        self.acked = {}  # idx -> (partition, offset)
        self.errors = []  # (idx, error string)
        self.sent = 0
        self._stop_producing = threading.Event()
        self.exception = None

    def record(self, i):
        return Rec(i, b"key-%03d" % (i % 61), make_value(i, 100 + (i * 13) % 400), [("idx", str(i).encode())])

    def _cb(self, idx, err, msg):
        with self.lock:
            if err is not None:
                self.errors.append((idx, str(err)))
            else:
                self.acked[idx] = (msg.partition(), msg.offset())

    def acked_count(self):
        with self.lock:
            return len(self.acked)

    def run(self):
        try:
            t0 = time.monotonic()
            i = 0
            while i < self.max_records and not self._stop_producing.is_set():
                # simple rate limit: never more than rate * elapsed
                if i > self.rate * (time.monotonic() - t0):
                    self.producer.poll(0.005)
                    continue
                r = self.record(i)
                where = {} if self.partitions is None else {"partition": i % self.partitions}
                try:
                    self.producer.produce(self.topic, key=r.key, value=r.value, headers=r.headers,
                                          on_delivery=functools.partial(self._cb, i), **where)
                except BufferError:
                    self.producer.poll(0.05)
                    continue
                i += 1
                self.sent = i
                if i % 50 == 0:
                    self.producer.poll(0)
        except Exception as e:  # reported by the test
            self.exception = e

    def stop_and_flush(self, timeout=120.0):
        """Stop producing new records, wait for the thread, flush outstanding ones.
        Returns the number still undelivered after `timeout`."""
        self._stop_producing.set()
        self.join(timeout=30)
        assert not self.is_alive(), "producer thread did not stop"
        return self.producer.flush(timeout)

    def wait_acked(self, n, timeout, what):
        deadline = time.monotonic() + timeout
        while self.acked_count() < n:
            if self.exception:
                raise AssertionError(f"producer thread died: {self.exception!r}")
            if time.monotonic() > deadline:
                with self.lock:
                    errs = self.errors[:10]
                raise AssertionError(f"{what}: only {self.acked_count()} of {n} records acknowledged after "
                                     f"{timeout}s (sent {self.sent}); delivery errors: {errs}")
            time.sleep(0.05)


# --------------------------------------------------------------------------
# helpers of the consumer-group tests


def wait_until(what, cond, timeout, diag=None, interval=0.1):
    """Poll `cond` until it returns something truthy; fail with `diag()` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            extra = ("\n" + diag()) if diag else ""
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}{extra}")
        time.sleep(interval)


@contextmanager
def producing(prod):
    """Runs a StreamProducer for the `with` block (stopped, not flushed, at its end)."""
    prod.start()
    try:
        yield prod
    finally:
        prod._stop_producing.set()


def finish_producing(prod):
    """Stop, flush, and return {idx: (partition, offset)} of every record, all acknowledged."""
    undelivered = prod.stop_and_flush(60)
    assert prod.exception is None, f"producer thread died: {prod.exception!r}"
    assert undelivered == 0, f"{undelivered} records undelivered; errors {prod.errors[:10]}"
    assert not prod.errors, f"{len(prod.errors)} delivery errors, first {prod.errors[:10]}"
    with prod.lock:
        acked = dict(prod.acked)
    assert len(acked) == prod.sent, f"{len(acked)} acknowledged of {prod.sent} sent"
    return acked


def high_watermarks(bootstrap, topic, n_parts, acked=None):
    """{partition: high watermark}; with `acked`, asserted equal to one past
    the highest acknowledged offset of each partition."""
    hw = {p: hi for p, (_, hi) in watermarks(bootstrap, topic, range(n_parts)).items()}
    if acked is not None:
        want = defaultdict(int)
        for p, o in acked.values():
            want[p] = max(want[p], o + 1)
        assert hw == {p: want.get(p, 0) for p in range(n_parts)}, (
            f"high watermarks {hw} != 1 + highest acknowledged offset per partition {dict(want)}")
    return hw


def committed_confluent(bootstrap, group, topic, parts, timeout=10):
    """{partition: offset} via Consumer.committed() (OffsetFetch; never joins)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        res = c.committed([TopicPartition(topic, p) for p in parts], timeout=timeout)
        errs = [(tp.partition, str(tp.error)) for tp in res if tp.error is not None]
        assert not errs, f"committed() errors: {errs}"
        return {tp.partition: tp.offset for tp in res}
    finally:
        c.close()


# --------------------------------------------------------------------------
# Apache Kafka's command-line tools and the agent process


TOOLS_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def kafka_tool(run_sh, tool_class, *args, ok=True, timeout=120):
    """One of Apache Kafka's command-line tools, unchanged (`tool_class`
    from the kafka-tools jars, run by tests/clients/run.sh `run_sh`): the
    finished process. Its exit status must be 0 (`ok=True`), non-zero
    (`ok=False`), or anything (`ok=None`)."""
    res = subprocess.run(["bash", run_sh, "tools", tool_class, *args], cwd=TOOLS_ROOT,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    if ok is not None:
        assert (res.returncode == 0) == ok, (
            f"{tool_class} {' '.join(args)}: exit {res.returncode}\n{(res.stdout + res.stderr)[-3000:]}")
    return res


def proc_status_kib(pid, field):
    """A KiB figure of /proc/PID/status (VmRSS, VmHWM, ...)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


def proc_cpu_s(pid):
    """User plus system CPU seconds process PID has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def object_files(root, suffix=".rtq"):
    """The object files under a file store's directory (paths, sorted): the
    `.rtq` objects by default, every file with `suffix=""`."""
    out = []
    for dirpath, _, files in os.walk(root):
        out.extend(os.path.join(dirpath, f) for f in files if f.endswith(suffix))
    return sorted(out)
