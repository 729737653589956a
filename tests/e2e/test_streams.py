# What this proves: a Kafka Streams 4.2.0 application (and 4.4.0, the newest,
# in the kill-and-takeover case) with
# processing.guarantee=exactly_once_v2 and a stateless topology (a slow step,
# filter, mapValues, split into two output topics) writes its output exactly
# once against rutomq when an instance dies mid-stream and another one with
# the same application.id takes over: every expected record is in its output
# topic exactly once for read_committed consumers, in input order per
# partition, nothing else is, and the group's committed offsets end at the
# input's end offsets. Four ways to lose the instance:
#  - SIGKILL while transactions holding records are open; the successor is a
#    new process with its own state directory (new transactional ids), so the
#    orphaned transactions end by rutomq's transaction timeout, and their
#    records stay in the log, aborted (read_uncommitted sees them,
#    read_committed does not);
#  - SIGKILL, then a restart on the same state directory: the process id kept
#    there (Streams keeps one only for topologies with a persistent store, so
#    this variant adds a store with logging disabled: still no internal topic)
#    gives the successor the same transactional id, whose InitProducerId must
#    abort the orphaned transaction at once: its timeout is set longer than the
#    test waits;
#  - a zombie: SIGSTOP mid-transaction (records sent, no offsets yet), a
#    successor takes its tasks once its session expired, then SIGCONT. With
#    the stop longer than its transaction timeout, the timeout abort's epoch
#    bump must fence its late Produce / AddOffsetsToTxn / EndTxn; with a
#    longer timeout its transaction is still valid when it resumes, and only
#    TxnOffsetCommit's group check (its member is gone) keeps it from
#    committing records the successor processed. It rejoins and both
#    instances finish the input.
# How: tests/streams/build.sh builds tests/streams (StreamsEos.java) into
# tests/.cache/bin/streams-eos-<version>.jar; each test creates the input (4
# partitions, 20000 records with distinct keys) and the two outputs (4
# partitions each, so an output record stays in its input partition), runs the
# instances as subprocesses (Streams' log and the program's STATE / PROGRESS /
# STALL lines in <tmp>/<name>.log), watches the outputs with a read_committed
# confluent-kafka consumer, and kills or stops the instance at a point it
# chose: --stall-after N blocks the first instance's stream threads after N
# records, and the test waits until an output partition's last stable offset
# is pinned below its high watermark (an open transaction holds records there,
# none of its offsets yet) before the signal. The transactional ids come from
# ListTransactions (raw request). Agents run with
# --group-initial-rebalance-delay-ms 300.

import json
import logging
import os
import signal
import subprocess
import threading
import time
import uuid
from collections import defaultdict

import pytest

import kwire
from kafkautil import (Rec, run_build_script, committed_confluent, create_topic, high_watermarks, produce_confluent,
                       unique_topic, wait_until)

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD_SH = os.path.join(REPO_ROOT, "tests", "streams", "build.sh")
# The version the product promises, and the newest (run by the kill-and-takeover test).
STREAMS_VERSION = os.environ.get("STREAMS_VERSION", "4.2.0")
STREAMS_NEWEST = os.environ.get("STREAMS_NEWEST", "4.4.0")


def _jar(version):
    return os.path.join(REPO_ROOT, "tests", ".cache", "bin", f"streams-eos-{version}.jar")
BUILD_TIMEOUT_S = 900  # cold: Maven downloads kafka-streams and rocksdbjni

GROUP_ARGS = ["--group-initial-rebalance-delay-ms", "300"]
PARTITIONS = 4
RECORDS = 20000
SLOW_DELAY_US = 500  # per record, per stream thread: one thread alone needs ~15 s for the input
FAST_DELAY_US = 100
DONE_TIMEOUT_S = 90  # from the takeover until every expected record is committed


def _text(b):
    if b is None:
        return ""
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else b


@pytest.fixture(scope="session")
def streams_jar():
    """Builds the Streams program once per session (idempotent) for each
    version; returns version -> jar."""
    versions = [STREAMS_VERSION, STREAMS_NEWEST]
    run_build_script(BUILD_SH, *versions, timeout=BUILD_TIMEOUT_S)
    return {v: _jar(v) for v in versions}


# --------------------------------------------------------------------------
# input and expected output


def input_records():
    """Distinct keys k<idx>, values v<idx>:<payload> of varied length."""
    return [Rec(i, b"k%05d" % i, b"v%05d:payload-%d-%s" % (i, i, b"x" * (i % 13)))
            for i in range(RECORDS)]


def transformed(value):
    """What StreamsEos's mapValues makes of an input value."""
    head, payload = value[1:].split(b":", 1)
    return b"o" + head + b":" + payload[::-1] + b":" + str(len(payload)).encode()


def expected_outputs(records):
    """{"fizz"|"rest": {key: (input partition, value)}}: multiples of 7 dropped,
    multiples of 3 to the fizz topic, the others to the rest topic."""
    out = {"fizz": {}, "rest": {}}
    for r in records:
        if r.idx % 7 == 0:
            continue
        out["fizz" if r.idx % 3 == 0 else "rest"][r.key] = (r.partition, transformed(r.value))
    return out


# --------------------------------------------------------------------------
# reading the outputs


def _consumer(bootstrap, isolation, debug_log=None):
    """A group-less consumer; with `debug_log` (a path), librdkafka's fetch and msg
    debug lines go to that file."""
    from confluent_kafka import Consumer
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": "e2e-nogroup-" + uuid.uuid4().hex,  # never joined, nothing committed
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "enable.partition.eof": True,
        "fetch.wait.max.ms": 100,
        "isolation.level": isolation,
    }
    if debug_log is None:
        return Consumer(conf)
    logger = logging.getLogger(f"librdkafka-{uuid.uuid4().hex}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    handler = logging.FileHandler(debug_log)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(handler)
    return Consumer(dict(conf, debug="fetch,msg"), logger=logger)


def end_offsets(bootstrap, topics, isolation):
    """{(topic, partition): end offset} by ListOffsets: the last stable offset
    for read_committed, the high watermark for read_uncommitted."""
    from confluent_kafka import TopicPartition
    c = _consumer(bootstrap, isolation)
    try:
        return {(t, p): c.get_watermark_offsets(TopicPartition(t, p), timeout=10, cached=False)[1]
                for t in topics for p in range(PARTITIONS)}
    finally:
        c.close()


def read_all(bootstrap, topics, isolation, timeout=60.0):
    """Every record of `topics` up to their end offsets (for `isolation`) at the
    time of the call: {topic: {partition: [(offset, key, value)]}}."""
    from confluent_kafka import KafkaError, TopicPartition
    ends = end_offsets(bootstrap, topics, isolation)
    out = {t: {p: [] for p in range(PARTITIONS)} for t in topics}
    pending = {tp for tp, end in ends.items() if end > 0}
    c = _consumer(bootstrap, isolation)
    try:
        c.assign([TopicPartition(t, p, 0) for (t, p) in ends])
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise AssertionError(f"{isolation} read of {topics} not at the end offsets {ends} after "
                                     f"{timeout}s; still reading {sorted(pending)}")
            for m in c.consume(num_messages=1000, timeout=0.5):
                tp = (m.topic(), m.partition())
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= ends[tp]:
                            pending.discard(tp)
                        continue
                    raise AssertionError(f"consumer error on {tp}: {m.error()}")
                out[m.topic()][m.partition()].append((m.offset(), m.key(), m.value()))
                if m.offset() + 1 >= ends[tp]:
                    pending.discard(tp)
        return out
    finally:
        c.close()


class CommittedWatcher(threading.Thread):
    """A read_committed consumer of the output topics running for the whole
    test: how many records, and which, are committed so far. With
    $STREAMS_TEST_FETCH_DEBUG set, librdkafka's fetch and msg debug log goes to
    <tmp>/watcher-fetch.log."""

    def __init__(self, bootstrap, topics, tmp_path):
        super().__init__(daemon=True)
        debug_log = str(tmp_path / "watcher-fetch.log") if os.environ.get("STREAMS_TEST_FETCH_DEBUG") else None
        self.bootstrap = bootstrap
        self.consumer = _consumer(bootstrap, "read_committed", debug_log)
        self.topics = topics
        self.lock = threading.Lock()
        self.seen = defaultdict(int)  # (topic, key, value) -> times read
        self.count = 0
        self.last = {}  # (topic, partition) -> ("record" | "eof", offset)
        self.error = None
        self._stop_event = threading.Event()

    def run(self):
        from confluent_kafka import KafkaError, TopicPartition
        try:
            self.consumer.assign([TopicPartition(t, p, 0) for t in self.topics for p in range(PARTITIONS)])
            while not self._stop_event.is_set():
                for m in self.consumer.consume(num_messages=1000, timeout=0.2):
                    tp = (m.topic(), m.partition())
                    if m.error() is not None:
                        if m.error().code() == KafkaError._PARTITION_EOF:
                            self.last[tp] = ("eof", m.offset())
                            continue
                        raise AssertionError(f"consumer error on {tp}: {m.error()}; {self._diag(tp)}")
                    self.last[tp] = ("record", m.offset())
                    with self.lock:
                        self.seen[(m.topic(), m.key(), m.value())] += 1
                        self.count += 1
        except Exception as e:  # reported by committed()
            self.error = e
        finally:
            self.consumer.close()

    def _diag(self, tp):
        """What the log of `tp` looks like now, for an error report."""
        lso = end_offsets(self.bootstrap, [tp[0]], "read_committed")[tp]
        hwm = end_offsets(self.bootstrap, [tp[0]], "read_uncommitted")[tp]
        every = read_all(self.bootstrap, [tp[0]], "read_uncommitted")[tp[0]][tp[1]]
        return (f"last record or EOF seen there: {self.last.get(tp)}; now: last stable offset {lso}, "
                f"high watermark {hwm}, read_uncommitted offsets read {len(every)}, the last ones "
                f"{[(o, k) for o, k, _ in every[-5:]]}")

    def committed(self):
        assert self.error is None, f"read_committed watcher died: {self.error!r}"
        with self.lock:
            return self.count

    def distinct(self):
        assert self.error is None, f"read_committed watcher died: {self.error!r}"
        with self.lock:
            return len(self.seen)

    def stop(self):
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=30)


def pinned_partitions(bootstrap, topics, sample_s=0.6):
    """Output partitions whose last stable offset did not move for `sample_s`
    and is below the high watermark: an open transaction holds records there."""
    lso0 = end_offsets(bootstrap, topics, "read_committed")
    time.sleep(sample_s)
    lso1 = end_offsets(bootstrap, topics, "read_committed")
    hwm = end_offsets(bootstrap, topics, "read_uncommitted")
    return sorted(tp for tp in lso1 if lso0[tp] == lso1[tp] < hwm[tp])


# --------------------------------------------------------------------------
# transactions (ListTransactions over a raw socket)


def list_transactions(bootstrap):
    """{transactional_id: state} of every transaction the agent coordinates
    (ListTransactions v0, flexible)."""
    with kwire.KafkaConn.to(bootstrap) as conn:
        cid = conn.next_cid()
        body = kwire.uvarint(1) + kwire.uvarint(1) + kwire.EMPTY_TAGGED_FIELDS  # no filters
        conn.send(kwire.frame(kwire.request_header(66, 0, cid, flexible=True) + body))
        r = kwire.Reader(conn.recv_frame())
        assert r.i32() == cid
        r.tagged_fields()
        r.i32()  # throttle
        err = r.i16()
        assert err == 0, f"ListTransactions error code {err}"
        r.compact_array(lambda r: r.compact_string())  # unknown state filters

        def state(r):
            tid, _pid, st = r.compact_string(), r.i64(), r.compact_string()
            r.tagged_fields()
            return tid, st
        return dict(r.compact_array(state) or [])


# --------------------------------------------------------------------------
# Streams instances as subprocesses


class StreamsApp:
    """One StreamsEos process; its stderr (Streams' log and the program's
    STATE / PROGRESS / STALL / FATAL / CLOSED lines) goes to `log_path`."""

    def __init__(self, name, jar, log_path, args):
        self.name = name
        self.argv = ["java", "-XX:+UseSerialGC", "-Xmx384m",
                     "-Dorg.slf4j.simpleLogger.defaultLogLevel=info", "-jar", jar] + args
        self.log_path = log_path
        self.proc = None

    def start(self):
        with open(self.log_path, "ab") as log:
            log.write(f"===== {time.strftime('%H:%M:%S')} starting: {' '.join(self.argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=log, stderr=log,
                                         cwd=REPO_ROOT, start_new_session=True)
        return self

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def lines(self, marker):
        """The program's own lines "<time> MARKER ..." (not Streams' log lines)."""
        out = []
        for ln in self.log_text().splitlines():
            parts = ln.split(" ", 2)
            if len(parts) >= 2 and parts[1] == marker:
                out.append(ln)
        return out

    def last_processed(self):
        """processed=N of the last PROGRESS line, 0 before the first."""
        lines = self.lines("PROGRESS")
        if not lines:
            return 0
        return int(lines[-1].split("processed=", 1)[1].split()[0])

    def tail(self, n=80):
        return "\n".join(self.log_text().splitlines()[-n:])

    def assert_alive(self):
        rc = self.proc.poll()
        assert rc is None, f"{self.name} exited with code {rc}:\n{self.tail()}"
        fatal = self.lines("FATAL")
        assert not fatal, f"{self.name}: {fatal[0]}\n{self.tail()}"

    def wait_line(self, marker, timeout, what):
        def cond():
            self.assert_alive()
            return self.lines(marker)
        return wait_until(f"{self.name}: {what}", cond, timeout, diag=self.tail)

    def wait_running(self, timeout=60):
        def cond():
            self.assert_alive()
            return any(ln.endswith("-> RUNNING") for ln in self.lines("STATE"))
        return wait_until(f"{self.name} in state RUNNING", cond, timeout, diag=self.tail)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=60):
        """Ask for a clean close (stdin "stop") and assert it completed."""
        self.assert_alive()
        self.proc.stdin.write(b"stop\n")
        self.proc.stdin.close()
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
            raise AssertionError(f"{self.name} did not close within {timeout}s:\n{self.tail()}")
        closed = self.lines("CLOSED")
        assert rc == 0 and closed and "clean=true" in closed[-1], (
            f"{self.name}: exit code {rc}, close line {closed}:\n{self.tail()}")

    def cleanup(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.fixture
def streams(request, tmp_path):
    """Factory: streams(name, args[, version]) -> started StreamsApp; all killed at the
    end, their log tails printed (a failing test's report shows them)."""
    apps = []

    def _start(name, args, version=STREAMS_VERSION):
        jar = request.getfixturevalue("streams_jar")[version]
        app = StreamsApp(name, jar, str(tmp_path / f"{name}.log"), args)
        apps.append(app)
        return app.start()

    yield _start
    for app in apps:
        app.cleanup()
        # Shown in the report of a failing test (captured teardown output).
        print(f"--- {app.name}: last 60 lines of {app.log_path} ---\n{app.tail(60)}")


# --------------------------------------------------------------------------
# the scenario pieces


class Setup:
    def __init__(self, agent, tmp_path, prefix):
        self.bootstrap = agent.bootstrap
        self.tmp_path = tmp_path
        base = unique_topic(prefix)
        self.app_id = base + "-app"
        self.input = base + "-in"
        self.outputs = {"fizz": base + "-fizz", "rest": base + "-rest"}
        for t in [self.input] + list(self.outputs.values()):
            create_topic(self.bootstrap, t, partitions=PARTITIONS)
        self.records = produce_confluent(self.bootstrap, self.input, input_records())
        self.expected = expected_outputs(self.records)
        self.expected_total = sum(len(v) for v in self.expected.values())
        self.watcher = CommittedWatcher(self.bootstrap, list(self.outputs.values()), tmp_path)
        self.watcher.start()

    def args(self, state_dir, *extra):
        return ["--bootstrap", self.bootstrap, "--application-id", self.app_id,
                "--state-dir", str(self.tmp_path / state_dir), "--input", self.input,
                "--out-fizz", self.outputs["fizz"], "--out-rest", self.outputs["rest"]] + list(extra)

    def wait_committed(self, n, timeout, apps):
        def cond():
            for a in apps:
                a.assert_alive()
            return self.watcher.committed() >= n
        wait_until(f"{n} output records committed", cond, timeout,
                   diag=lambda: f"committed so far: {self.watcher.committed()}\n" + apps[-1].tail())

    def wait_pinned(self, timeout, app):
        """Until an open transaction holds records in an output partition."""
        return wait_until("an open transaction with records in an output partition",
                          lambda: pinned_partitions(self.bootstrap, list(self.outputs.values())),
                          timeout, diag=app.tail, interval=0.0)

    def wait_done(self, apps, timeout=DONE_TIMEOUT_S):
        """Until every expected output record is committed, then until no
        transaction is open on the outputs (last stable offsets = high watermarks)."""
        def complete():
            for a in apps:
                a.assert_alive()
            return self.watcher.distinct() >= self.expected_total

        def diag():
            return (f"distinct committed output records {self.watcher.distinct()} of "
                    f"{self.expected_total} (read {self.watcher.committed()}); transactions: "
                    f"{list_transactions(self.bootstrap)}\n"
                    + "\n".join(f"--- {a.name} ---\n{a.tail(40)}" for a in apps))
        wait_until("every expected output record committed", complete, timeout, diag=diag, interval=0.5)
        topics = list(self.outputs.values())

        def settled():
            return (end_offsets(self.bootstrap, topics, "read_committed")
                    == end_offsets(self.bootstrap, topics, "read_uncommitted"))
        wait_until("no open transaction on the outputs", settled, 30, diag=diag, interval=0.3)

    def check_exactly_once(self):
        """The outputs hold exactly the expected records, once each, in input
        order per partition, each in its input partition; the live watcher saw
        nothing else and nothing twice; the group's offsets are at the input's
        end. Returns (committed, uncommitted) record counts."""
        self.watcher.stop()
        topics = list(self.outputs.values())
        committed = read_all(self.bootstrap, topics, "read_committed")
        every = read_all(self.bootstrap, topics, "read_uncommitted")
        by_idx = {r.key: r.idx for r in self.records}
        for name, topic in self.outputs.items():
            want = self.expected[name]
            got = defaultdict(list)
            for p, recs in committed[topic].items():
                for off, key, value in recs:
                    got[key].append((p, off, value))
                idxs = [by_idx.get(key, -1) for _, key, _ in recs]
                assert idxs == sorted(idxs), (
                    f"{topic}[{p}]: output not in input order, first inversions "
                    f"{[(a, b) for a, b in zip(idxs, idxs[1:]) if a > b][:10]}")
            dups = {k: v for k, v in got.items() if len(v) > 1}
            assert not dups, (f"{topic}: {len(dups)} keys committed more than once, e.g. "
                              f"{list(dups.items())[:5]}")
            missing = sorted(set(want) - set(got))
            assert not missing, (f"{topic}: {len(missing)} of {len(want)} expected records never "
                                 f"committed, e.g. {missing[:10]}")
            extra = sorted(set(got) - set(want))
            assert not extra, f"{topic}: {len(extra)} unexpected records, e.g. {extra[:10]}"
            for key, [(p, off, value)] in got.items():
                want_p, want_value = want[key]
                assert value == want_value, f"{topic} {key!r} at {(p, off)}: {value!r} != {want_value!r}"
                assert p == want_p, f"{topic} {key!r}: in partition {p}, its input was in {want_p}"
        # What a consumer saw live is what is committed in the end: never an
        # aborted or open transaction's record, never one twice.
        final = {(topic, key, value) for topic, parts in committed.items()
                 for recs in parts.values() for _, key, value in recs}
        twice = [r for r, n in self.watcher.seen.items() if n > 1]
        assert not twice, f"{len(twice)} records read twice by the live read_committed consumer, e.g. {twice[:5]}"
        gone = sorted(set(self.watcher.seen) - final)
        assert not gone, (f"{len(gone)} records read by the live read_committed consumer are not committed "
                          f"in the end (an aborted or open transaction's), e.g. {gone[:5]}")
        ends = high_watermarks(self.bootstrap, self.input, PARTITIONS)
        offsets = committed_confluent(self.bootstrap, self.app_id, self.input, range(PARTITIONS))
        assert offsets == ends, f"group {self.app_id}: committed offsets {offsets} != input end offsets {ends}"
        n_committed = sum(len(r) for t in committed.values() for r in t.values())
        n_every = sum(len(r) for t in every.values() for r in t.values())
        return n_committed, n_every


@pytest.fixture
def make_setup(start_agent, tmp_path):
    """Factory: make_setup(prefix) -> Setup on a fresh agent; its watcher is
    stopped at the end."""
    setups = []

    def _make(prefix):
        agent = start_agent(extra_args=GROUP_ARGS)
        setups.append(Setup(agent, tmp_path, prefix))
        return setups[-1]

    yield _make
    for st in setups:
        st.watcher.stop()


def _app_txn_ids(setup):
    return {t: s for t, s in list_transactions(setup.bootstrap).items()
            if t.startswith(setup.app_id + "-")}


def _process_id(state_dir, app_id):
    with open(os.path.join(state_dir, app_id, "kafka-streams-process-metadata")) as f:
        return json.load(f)["processId"]


# --------------------------------------------------------------------------
# tests


@pytest.mark.timeout(300)
@pytest.mark.parametrize("version", [STREAMS_VERSION, STREAMS_NEWEST])
def test_streams_eos_kill_and_takeover(version, make_setup, streams):
    s = make_setup("streams-kill")
    a = streams("a", s.args("state-a", "--threads", "2", "--delay-us", str(SLOW_DELAY_US),
                            "--stall-after", "4000"), version)
    a.wait_running()
    a.wait_line("STALL", 60, "the stream threads stalled after 4000 records")
    s.wait_committed(1, 30, [a])
    pinned = s.wait_pinned(20, a)
    a.kill()
    at_kill = s.watcher.committed()
    assert 0 < at_kill < s.expected_total, f"{at_kill} of {s.expected_total} committed at the kill"
    ids_a = set(_app_txn_ids(s))
    assert len(ids_a) == 2, f"instance a (2 threads): transactional ids {ids_a}"

    b = streams("b", s.args("state-b", "--threads", "2", "--delay-us", str(FAST_DELAY_US)), version)
    s.wait_done([b])
    ids = _app_txn_ids(s)
    assert ids_a < set(ids) and len(ids) == 4, f"instances a and b: transactional ids {ids}"
    n_committed, n_every = s.check_exactly_once()
    assert n_committed == s.expected_total
    assert n_every > n_committed, (
        f"the kill left no aborted records in the outputs ({n_every} records in all, {n_committed} "
        f"committed) though partitions {pinned} held an open transaction's records")
    b.stop()


@pytest.mark.timeout(300)
def test_streams_eos_restart_same_state_dir(make_setup, streams, tmp_path):
    s = make_setup("streams-restart")
    # The orphaned transaction would outlive the test's patience: only the
    # successor's InitProducerId can end it.
    common = ["--threads", "1", "--persistent-store", "--transaction-timeout-ms", "300000"]
    a = streams("a", s.args("state", *common, "--delay-us", str(SLOW_DELAY_US), "--stall-after", "4000"))
    a.wait_running()
    a.wait_line("STALL", 60, "the stream thread stalled after 4000 records")
    s.wait_committed(1, 30, [a])
    s.wait_pinned(20, a)
    a.kill()
    at_kill = s.watcher.committed()
    assert 0 < at_kill < s.expected_total, f"{at_kill} of {s.expected_total} committed at the kill"
    pid = _process_id(str(tmp_path / "state"), s.app_id)
    assert _app_txn_ids(s) == {f"{s.app_id}-{pid}-1": "Ongoing"}, list_transactions(s.bootstrap)

    a2 = streams("a2", s.args("state", *common, "--delay-us", str(FAST_DELAY_US)))
    s.wait_done([a2])
    assert _process_id(str(tmp_path / "state"), s.app_id) == pid
    ids = _app_txn_ids(s)
    assert set(ids) == {f"{s.app_id}-{pid}-1"}, f"the restart did not reuse the transactional id: {ids}"
    n_committed, n_every = s.check_exactly_once()
    assert n_committed == s.expected_total
    assert n_every > n_committed, f"no aborted records ({n_every} in all, {n_committed} committed)"
    a2.stop()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("fenced_by", ["epoch", "generation"])
def test_streams_eos_zombie_fenced(fenced_by, make_setup, streams):
    """A zombie: the instance stops (SIGSTOP) mid-transaction, records sent
    and no offsets in it yet; a successor takes its tasks once its session
    expired; then it resumes (SIGCONT) where it stopped.
    epoch: the stop outlasts the zombie's transaction timeout, so the
      coordinator aborts its transaction and bumps its producer epoch: its late
      Produce / AddOffsetsToTxn / EndTxn must fail.
    generation: the transaction timeout outlasts the test, so the zombie's
      transaction is still valid when it resumes: only TxnOffsetCommit's group
      check (its member is gone) keeps it from committing."""
    s = make_setup(f"streams-zombie-{fenced_by[0]}")
    txn_timeout_ms = 10000 if fenced_by == "epoch" else 300000
    common = ["--threads", "1", "--delay-us", str(SLOW_DELAY_US),
              "--transaction-timeout-ms", str(txn_timeout_ms)]
    # The stall ends while the zombie is stopped: it resumes processing at once.
    a = streams("a", s.args("state-a", *common, "--stall-after", "3000", "--stall-ms", "8000"))
    a.wait_running()
    a.wait_line("STALL", 60, "the stream thread stalled after 3000 records")
    s.wait_committed(1, 30, [a])
    s.wait_pinned(4, a)
    a.signal(signal.SIGSTOP)
    at_stop = s.watcher.committed()
    try:
        [a_txn] = _app_txn_ids(s)
        b = streams("b", s.args("state-b", *common))
        if fenced_by == "epoch":
            aborted = ("PrepareAbort", "CompleteAbort")
            wait_until("the zombie's transaction aborted by its timeout",
                       lambda: _app_txn_ids(s)[a_txn] in aborted, 40,
                       diag=lambda: f"transactions: {list_transactions(s.bootstrap)}")
            s.wait_committed(at_stop + 2000, 60, [b])
        else:
            # a's open transaction pins the last stable offsets of the output
            # partitions it wrote to: follow b's own count.
            wait_until("b processing 2000 records", lambda: b.assert_alive() or b.last_processed() >= 2000,
                       60, diag=b.tail)
            state = _app_txn_ids(s)[a_txn]
            assert state == "Ongoing", f"the zombie's transaction is {state}"
        assert s.watcher.committed() < s.expected_total, "b finished before the zombie resumed"
    finally:
        a.signal(signal.SIGCONT)
    s.wait_done([a, b])
    n_committed, n_every = s.check_exactly_once()
    assert n_committed == s.expected_total
    assert n_every > n_committed, f"no aborted records ({n_every} in all, {n_committed} committed)"
    b.stop()
    a.stop()
