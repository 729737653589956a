# What this proves: Apache Flink 2.2.1 and 2.3.0 with flink-connector-kafka
# 5.0.0-2.2 run KafkaSource -> KafkaSink with DeliveryGuarantee.EXACTLY_ONCE
# against rutomq, survive a SIGKILL of the job mid-stream and a restore from
# its last retained checkpoint, and the read_committed output then holds every
# input value exactly once (nothing lost, nothing duplicated) with no
# transaction left open (read_committed end = high watermark), while the
# read_uncommitted view also holds the records of the transactions the kill
# left open and the restored job aborted (duplicates were written, and stayed
# invisible to read_committed). Both ways users meet Flink's 1 h default
# transaction timeout are covered: the sink's transaction.timeout.ms lowered
# under the broker's 15 min maximum (Flink 2.2.1), and the broker started with
# --transaction-max-timeout-ms 3600000 for the sink's default (Flink 2.3.0);
# with neither, the job fails on INVALID_TRANSACTION_TIMEOUT, as against Kafka.
# How: tests/flink/build.sh builds the FlinkEos job (tests/flink: a local
# MiniCluster in one JVM, parallelism 2, checkpoints every 500 ms retained in a
# directory, restarts disabled) once per Flink version. Each test fills a
# 4-partition input topic with 20000 distinct values, starts the job, waits
# until a read_committed consumer (confluent-kafka) sees a fifth of them in the
# output, SIGKILLs the JVM, restarts it restoring from the newest
# chk-N/_metadata, waits until read_committed shows every value (and 3 s more),
# stops it, then reads the output topic read_committed and read_uncommitted.
# The same test passes against Apache Kafka 4.1.1:
#   RUTOMQ_BIN=tests/e2e/tools/kafka-as-rutomq .venv/bin/pytest tests/e2e/test_flink.py

import collections
import glob
import os
import re
import signal
import subprocess
import time
import uuid

import pytest

from kafkautil import (Rec, consumer_config, create_topic, produce_confluent, run_build_script, unique_topic,
                       wait_for_topic, watermarks)
from test_java_go import REPO_ROOT

BUILD_SH = os.path.join(REPO_ROOT, "tests", "flink", "build.sh")
JAR_DIR = os.path.join(REPO_ROOT, "tests", ".cache", "bin")
BUILD_TIMEOUT_S = 1200  # cold: Maven downloads Flink (~100 MB) and shades two jars

PARTITIONS = 4
RECORDS = 20000
PARALLELISM = 2
RECORD_DELAY_US = 2000  # per record and subtask: a run without a kill takes ~20 s
KILL_AFTER = RECORDS // 5  # committed output records seen before the SIGKILL
FIRST_OUTPUT_TIMEOUT_S = 90  # JVM + MiniCluster start, first checkpoints committed
FINISH_TIMEOUT_S = 150  # restored run: JVM start and the rest of the input
SETTLE_S = 3.0  # after the output is complete: six more checkpoints' commits
JVM_ARGS = ["-Xmx768m", "-XX:+UseSerialGC"]


@pytest.fixture(scope="session")
def flink_jars():
    """Builds one FlinkEos jar per Flink version once per session (idempotent)."""
    run_build_script(BUILD_SH, timeout=BUILD_TIMEOUT_S)
    return lambda version: os.path.join(JAR_DIR, f"flink-eos-{version}.jar")


def _value(i):
    return b"flink-%06d" % i


_NOISE = ("Name collision", "DelegationToken", "WebMonitorUtils", "declined (tasks not ready)",
          "CheckpointFailureManager")


def _log_excerpt(path, n=40):
    """The job's stdout lines and its first distinct warnings/errors (stack
    frames, repeats and Flink's start-up noise left out), then its RESULT line."""
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError as e:
        return f"<cannot read {path}: {e}>"
    keep, seen = [], set()
    for ln in lines:
        if ln.startswith(("\t", "RESULT")) or not re.search(r"FLINKEOS|WARN|ERROR|Exception|Caused by", ln):
            continue
        if any(s in ln for s in _NOISE):
            continue
        shape = re.sub(r"\d+", "N", ln)
        if shape not in seen:
            seen.add(shape)
            keep.append(ln)
    result = [ln for ln in lines if ln.startswith("RESULT")]
    return "\n".join(keep[:n] + ([f"... {len(keep) - n} more"] if len(keep) > n else []) + result[-1:])


class Job:
    """One FlinkEos JVM, its output in `log_path`."""

    def __init__(self, jar, args, log_path):
        self.log_path = str(log_path)
        self.cmd = ["java", *JVM_ARGS, "-jar", jar, *args]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.cmd, cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def describe(self):
        rc = self.proc.poll()
        state = "running" if rc is None else f"exit code {rc}"
        return (f"job {state}: {' '.join(self.cmd)}\n--- {self.log_path} (stdout, warnings, errors) ---\n"
                f"{_log_excerpt(self.log_path)}")

    def result_line(self):
        with open(self.log_path, "rb") as f:
            lines = [ln for ln in f.read().decode("utf-8", "replace").splitlines() if ln.startswith("RESULT")]
        return lines[-1] if lines else "<no RESULT line>"

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def cleanup(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(timeout=30)


@pytest.fixture
def jobs():
    started = []
    yield started
    for j in started:
        j.cleanup()


class Output:
    """A group-less consumer of every partition of `topic` from offset 0."""

    def __init__(self, bootstrap, topic, isolation, partitions=PARTITIONS):
        from confluent_kafka import Consumer, TopicPartition
        self.topic = topic
        self.partitions = partitions
        self.consumer = Consumer(consumer_config(bootstrap, **{"isolation.level": isolation}))
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.counts = collections.Counter()
        self.eof = set()

    def poll(self, timeout=0.5):
        from confluent_kafka import KafkaError
        for m in self.consumer.consume(num_messages=2000, timeout=timeout):
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, (
                    f"consumer error on {self.topic}[{m.partition()}]: {m.error()}")
                self.eof.add(m.partition())
                continue
            self.eof.discard(m.partition())
            self.counts[m.value()] += 1

    def total(self):
        return sum(self.counts.values())

    def positions(self):
        from confluent_kafka import TopicPartition
        return {tp.partition: tp.offset for tp in
                self.consumer.position([TopicPartition(self.topic, p) for p in range(self.partitions)])}

    def close(self):
        self.consumer.close()


def _read_all(bootstrap, topic, isolation, partitions=PARTITIONS, timeout=60.0):
    """Reads `topic` to the end the consumer sees (read_committed: the last
    stable offset); returns (value counts, end position per partition)."""
    out = Output(bootstrap, topic, isolation, partitions)
    try:
        deadline = time.monotonic() + timeout
        while len(out.eof) < partitions:
            assert time.monotonic() < deadline, (
                f"reading {topic} ({isolation}) did not reach the end in {timeout} s: "
                f"{out.total()} records, at end of {sorted(out.eof)}")
            out.poll()
        return out.counts, out.positions()
    finally:
        out.close()


def _newest_checkpoint(ck_dir):
    """The retained checkpoint with the highest id whose _metadata was written."""
    found = []
    for meta in glob.glob(os.path.join(ck_dir, "*", "chk-*", "_metadata")):
        d = os.path.dirname(meta)
        if os.path.getsize(meta) > 0:
            found.append((int(d.rsplit("-", 1)[1]), d))
    return max(found)[1] if found else None


def _job_args(bootstrap, src, dst, prefix, ck_dir, txn_timeout_ms):
    args = ["--bootstrap", bootstrap, "--input", src, "--output", dst, "--txn-prefix", prefix,
            "--checkpoint-dir", ck_dir, "--parallelism", str(PARALLELISM),
            "--record-delay-us", str(RECORD_DELAY_US), "--checkpoint-interval-ms", "500"]
    if txn_timeout_ms is not None:
        args += ["--transaction-timeout-ms", str(txn_timeout_ms)]
    return args


def _prepare_topics(agent, tag):
    src, dst = unique_topic(f"flink-in-{tag}"), unique_topic(f"flink-out-{tag}")
    create_topic(agent.bootstrap, src, partitions=PARTITIONS)
    create_topic(agent.bootstrap, dst, partitions=PARTITIONS)
    produce_confluent(agent.bootstrap, src,
                      [Rec(i, None, _value(i), partition=i % PARTITIONS) for i in range(RECORDS)])
    return src, dst


def _watch(job, seen, done, timeout, waiting_for, earlier=None):
    """Polls the output consumer `seen` until done() while `job` runs; fails
    with the job's log excerpt (and the earlier run's) if the job ends, the
    deadline passes or the consumer reports an error."""
    def context():
        return job.describe() + (f"\n--- earlier run ---\n{earlier.describe()}" if earlier else "")

    deadline = time.monotonic() + timeout
    while not done():
        assert job.proc.poll() is None, (
            f"the job ended while waiting for {waiting_for}: {seen.total()} committed output records "
            f"({len(seen.counts)} distinct values) seen\n{context()}")
        assert time.monotonic() < deadline, (
            f"no {waiting_for} after {timeout} s: {seen.total()} committed output records "
            f"({len(seen.counts)} distinct values) seen\n{context()}")
        try:
            seen.poll()
        except AssertionError as e:
            raise AssertionError(f"{e}\n{context()}") from None


CASES = [
    # (Flink version, broker flags, the sink's transaction.timeout.ms or None for Flink's 1 h)
    pytest.param("2.2.1", [], 60000, id="flink-2.2.1-sink-timeout-60s"),
    pytest.param("2.3.0", ["--transaction-max-timeout-ms", "3600000"], None, id="flink-2.3.0-broker-max-1h"),
]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("version,broker_args,txn_timeout_ms", CASES)
def test_flink_exactly_once_kill_and_restore(version, broker_args, txn_timeout_ms, start_agent, jobs,
                                              tmp_path, request):
    agent = start_agent(extra_args=broker_args)
    jar = request.getfixturevalue("flink_jars")(version)
    tag = version.replace(".", "")
    src, dst = _prepare_topics(agent, tag)
    prefix = f"flink-{tag}-{uuid.uuid4().hex[:8]}"
    ck_dir = str(tmp_path / "checkpoints")
    os.makedirs(ck_dir)
    args = _job_args(agent.bootstrap, src, dst, prefix, ck_dir, txn_timeout_ms)
    t0 = time.monotonic()

    # 1. First run, killed once part of its output is committed.
    first = Job(jar, args, tmp_path / "job1.log")
    jobs.append(first)
    seen = Output(agent.bootstrap, dst, "read_committed")
    try:
        _watch(first, seen, lambda: seen.total() >= KILL_AFTER, FIRST_OUTPUT_TIMEOUT_S,
               f"{KILL_AFTER} committed output records")
        first.kill()
    finally:
        seen.close()
    committed_at_kill = seen.total()
    assert committed_at_kill < RECORDS, (
        f"the kill did not land mid-stream: {committed_at_kill} of {RECORDS} committed already")
    dups_at_kill = {v: n for v, n in seen.counts.items() if n > 1}
    assert not dups_at_kill, f"duplicates visible to read_committed before the kill: {list(dups_at_kill)[:10]}"
    checkpoint = _newest_checkpoint(ck_dir)
    assert checkpoint, (f"no retained checkpoint (chk-N/_metadata) under {ck_dir} after the kill: "
                        f"{sorted(glob.glob(os.path.join(ck_dir, '*', '*')))}\n{first.describe()}")
    killed_at = time.monotonic() - t0

    # 2. Restored run, until the output holds every input value (and a little
    # longer, so that late duplicates would show), then stopped.
    second = Job(jar, args + ["--restore", checkpoint], tmp_path / "job2.log")
    jobs.append(second)
    seen = Output(agent.bootstrap, dst, "read_committed")
    try:
        _watch(second, seen, lambda: len(seen.counts) >= RECORDS, FINISH_TIMEOUT_S,
               f"all {RECORDS} values committed after the restore from {checkpoint}", earlier=first)
        settle = time.monotonic() + SETTLE_S
        _watch(second, seen, lambda: time.monotonic() > settle, SETTLE_S + 30, "the settle time", earlier=first)
        second.kill()
    finally:
        seen.close()
    completed_at = time.monotonic() - t0
    with open(second.log_path, encoding="utf-8", errors="replace") as f:
        restore_log = f.read()
    m = re.search(r"Restoring job \S+ from (?:Savepoint|Checkpoint) (\d+)", restore_log)
    restored_id = int(checkpoint.rsplit("-", 1)[1])
    assert m and int(m.group(1)) == restored_id, (
        f"the restored job did not report restoring checkpoint {restored_id} ({checkpoint})\n{second.describe()}")

    # 3. Exactly once, as read_committed consumers see it.
    counts, ends = _read_all(agent.bootstrap, dst, "read_committed")
    want = {_value(i) for i in range(RECORDS)}
    missing = sorted(want - set(counts))
    foreign = sorted(set(counts) - want)
    dups = sorted(v for v, n in counts.items() if n > 1)
    assert not missing and not foreign and not dups, (
        f"read_committed output is not the input exactly once: {len(missing)} missing (e.g. {missing[:5]}), "
        f"{len(dups)} duplicated (e.g. {dups[:5]}), {len(foreign)} foreign (e.g. {foreign[:5]}); "
        f"{sum(counts.values())} records for {RECORDS} inputs; {committed_at_kill} committed at the kill, "
        f"restored from {checkpoint}")
    hw = {p: high for p, (_low, high) in watermarks(agent.bootstrap, dst, range(PARTITIONS)).items()}
    assert ends == hw, (f"a transaction with records is still open after the output was complete: read_committed ends "
                        f"(last stable offsets) {ends} != high watermarks {hw}")

    # 4. The kill left transactions open with records in them; the restored job
    # aborted them: they are in the log, read_uncommitted sees them.
    everything, _ = _read_all(agent.bootstrap, dst, "read_uncommitted")
    assert set(everything) == want, f"read_uncommitted holds values never sent: {sorted(set(everything) - want)[:5]}"
    aborted = sum(everything.values()) - RECORDS
    assert aborted > 0, (
        f"read_uncommitted holds exactly the {RECORDS} inputs: the transactions open at the kill held "
        f"no record, so this run did not exercise the abort of a killed job's transactions")
    print(f"flink {version}: killed after {killed_at:.1f} s with {committed_at_kill} committed, restored "
          f"{os.path.basename(checkpoint)}, output complete after {completed_at:.1f} s, {aborted} aborted "
          f"duplicates hidden from read_committed")


@pytest.mark.timeout(600)
def test_flink_default_transaction_timeout_refused(agent, jobs, tmp_path, request):
    """Flink's default transaction.timeout.ms (1 h) against the broker's default
    maximum (15 min): the sink's initTransactions fails with Kafka's
    INVALID_TRANSACTION_TIMEOUT, so the job fails instead of writing."""
    jar = request.getfixturevalue("flink_jars")("2.2.1")
    src, dst = unique_topic("flink-in-tmo"), unique_topic("flink-out-tmo")
    create_topic(agent.bootstrap, src, partitions=1)
    create_topic(agent.bootstrap, dst, partitions=1)
    produce_confluent(agent.bootstrap, src, [Rec(i, None, _value(i), partition=0) for i in range(10)])
    ck_dir = str(tmp_path / "checkpoints")
    os.makedirs(ck_dir)
    job = Job(jar, _job_args(agent.bootstrap, src, dst, "flink-tmo-" + uuid.uuid4().hex[:8], ck_dir, None),
              tmp_path / "job.log")
    jobs.append(job)
    try:
        rc = job.proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the job neither failed nor finished in 120 s\n{job.describe()}", pytrace=False)
    result = job.result_line()
    # The Java client's text for error code 50 (INVALID_TRANSACTION_TIMEOUT).
    assert rc != 0 and "transaction timeout is larger than the maximum value allowed" in result, (
        f"expected the job to fail on INVALID_TRANSACTION_TIMEOUT: {result}\n{job.describe()}")
    counts, _ = _read_all(agent.bootstrap, dst, "read_uncommitted", partitions=1)
    assert not counts, f"the refused job wrote {sum(counts.values())} records"


FLINK_VERSIONS = ["2.2.1", "2.3.0"]


def _committed(bootstrap, group, topic, partitions):
    from kafkautil import committed_confluent
    return committed_confluent(bootstrap, group, topic, range(partitions))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("version", FLINK_VERSIONS)
def test_flink_source_discovers_partitions_and_commits_offsets(version, agent, jobs, tmp_path, request):
    """An unbounded KafkaSource with partition discovery and an AT_LEAST_ONCE
    KafkaSink: the partitions CreatePartitions adds mid-run are found and read
    from their start, every value reaches the output, and the source commits
    its offsets to its group on checkpoints, up to the input's end offsets."""
    from confluent_kafka.admin import AdminClient, NewPartitions
    jar = request.getfixturevalue("flink_jars")(version)
    tag = version.replace(".", "")
    src, dst = unique_topic(f"flink-disc-{tag}"), unique_topic(f"flink-disc-out-{tag}")
    create_topic(agent.bootstrap, src, partitions=2)
    create_topic(agent.bootstrap, dst, partitions=PARTITIONS)
    n = 2000
    produce_confluent(agent.bootstrap, src, [Rec(i, None, _value(i), partition=i % 2) for i in range(n)])
    prefix = f"flink-disc-{tag}-{uuid.uuid4().hex[:8]}"
    ck_dir = str(tmp_path / "checkpoints")
    os.makedirs(ck_dir)
    args = ["--bootstrap", agent.bootstrap, "--input", src, "--output", dst, "--txn-prefix", prefix,
            "--checkpoint-dir", ck_dir, "--parallelism", str(PARALLELISM), "--record-delay-us", "0",
            "--guarantee", "AT_LEAST_ONCE", "--discovery-ms", "1000"]
    job = Job(jar, args, tmp_path / "job.log")
    jobs.append(job)
    seen = Output(agent.bootstrap, dst, "read_uncommitted")
    try:
        _watch(job, seen, lambda: len(seen.counts) >= n, FIRST_OUTPUT_TIMEOUT_S, f"the first {n} values")
        a = AdminClient({"bootstrap.servers": agent.bootstrap})
        a.create_partitions([NewPartitions(src, 4)])[src].result(timeout=30)
        wait_for_topic(agent.bootstrap, src, partitions=4)
        produce_confluent(agent.bootstrap, src,
                          [Rec(i, None, _value(i), partition=2 + i % 2) for i in range(n, 2 * n)])
        _watch(job, seen, lambda: len(seen.counts) >= 2 * n, 60,
               f"the {n} values written to the two partitions added mid-run")
        ends = {p: hw for p, (_lo, hw) in watermarks(agent.bootstrap, src, range(4)).items()}
        group = prefix + "-source"

        def offsets_committed():
            got = _committed(agent.bootstrap, group, src, 4)
            return got == ends or None
        deadline = time.monotonic() + 30
        while not offsets_committed():
            assert job.proc.poll() is None, job.describe()
            assert time.monotonic() < deadline, (
                f"the source's committed offsets {_committed(agent.bootstrap, group, src, 4)} "
                f"did not reach the input's end offsets {ends}\n{job.describe()}")
            seen.poll(0.2)
        job.kill()
    finally:
        seen.close()
    counts, _ = _read_all(agent.bootstrap, dst, "read_uncommitted")
    want = {_value(i) for i in range(2 * n)}
    assert set(counts) == want, (f"{len(want - set(counts))} values missing, "
                                 f"{len(set(counts) - want)} foreign in the output")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("version", FLINK_VERSIONS)
def test_flink_bounded_source_exactly_once(version, agent, jobs, tmp_path, request):
    """A bounded KafkaSource (up to the end offsets at the start) into an
    EXACTLY_ONCE KafkaSink: the job finishes by itself after its final
    checkpoint, its output holds the input up to those offsets exactly once
    for read_committed (records written to the input after it started are
    not read), and no transaction is left open."""
    jar = request.getfixturevalue("flink_jars")(version)
    tag = version.replace(".", "")
    src, dst = unique_topic(f"flink-bnd-{tag}"), unique_topic(f"flink-bnd-out-{tag}")
    create_topic(agent.bootstrap, src, partitions=PARTITIONS)
    create_topic(agent.bootstrap, dst, partitions=PARTITIONS)
    n = 5000
    produce_confluent(agent.bootstrap, src, [Rec(i, None, _value(i), partition=i % PARTITIONS) for i in range(n)])
    ck_dir = str(tmp_path / "checkpoints")
    os.makedirs(ck_dir)
    args = _job_args(agent.bootstrap, src, dst, f"flink-bnd-{tag}-{uuid.uuid4().hex[:8]}", ck_dir, 60000)
    args += ["--bounded", "true"]
    args[args.index("--record-delay-us") + 1] = "200"
    job = Job(jar, args, tmp_path / "job.log")
    jobs.append(job)
    seen = Output(agent.bootstrap, dst, "read_committed")
    try:
        _watch(job, seen, lambda: seen.total() > 0, FIRST_OUTPUT_TIMEOUT_S, "the first committed output")
    finally:
        seen.close()
    # The source resolved its end offsets when it started: these are past them.
    produce_confluent(agent.bootstrap, src,
                      [Rec(i, None, _value(i), partition=i % PARTITIONS) for i in range(n, n + 100)])
    try:
        rc = job.proc.wait(timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the bounded job did not finish in 180 s\n{job.describe()}", pytrace=False)
    assert rc == 0 and job.result_line().startswith("RESULT ok"), job.describe()
    counts, ends = _read_all(agent.bootstrap, dst, "read_committed")
    want = {_value(i) for i in range(n)}
    dups = sorted(v for v, c in counts.items() if c > 1)
    assert set(counts) == want and not dups, (
        f"read_committed output is not the bounded input exactly once: {len(want - set(counts))} missing, "
        f"{len(dups)} duplicated, {len(set(counts) - want)} foreign")
    hw = {p: high for p, (_low, high) in watermarks(agent.bootstrap, dst, range(PARTITIONS)).items()}
    assert ends == hw, f"a transaction is still open after the job finished: {ends} != {hw}"
