# What this proves: what rutomq acknowledges it keeps, across restarts, crashes,
# brokers and storage back ends:
#  - graceful restart (SIGTERM -> exit 0 -> start again on the same ports): every
#    acknowledged record readable at its acknowledged offset, high watermarks
#    unchanged, and new records continue the offsets;
#  - kill -9 in the middle of an idempotent produce stream, restart on the same
#    port: every record whose delivery report said "delivered" is present at the
#    reported offset, offsets are contiguous from 0 per partition (no holes), the
#    producer makes progress again after the restart, and its retries did not
#    duplicate records (idempotence);
#  - two agents sharing one PostgreSQL database and one file:// object directory
#    form one cluster: produce through A, read through B, and Metadata from either
#    lists both brokers;
#  - each object store back end (memory://, file://, S3 via moto_server) round-trips
#    data, and file:// / S3 really receive objects;
#  - the adaptive flush: a trickle of records shares stretched windows (fewer objects
#    and commit transactions than records, rutomq_flush_window_intervals at the
#    ceiling), records intact and in order; under load the windows shrink back;
#  - a lone produce request is sealed at once while the pipeline is idle
#    (--flush-when-idle), not at the end of its flush window;
#  - the embedded-PostgreSQL default (no --postgres-url) works, survives a restart,
#    and leaves no PostgreSQL process behind after SIGTERM.
# How: confluent-kafka producers (delivery callbacks record acknowledged offsets)
# and group-less consumers (assign() at explicit offsets) against agents started by
# the start_agent fixture; raw `kill -9` via Agent.kill().

import os
import threading
import time

import pytest

from kafkautil import (Rec, StreamProducer, check_roundtrip, cluster_metadata, consume_confluent,
                       create_topic, make_records, make_value, partition_counts, produce_confluent,
                       object_files, unique_topic, watermarks)


def small_records(n, start=0):
    return [Rec(i, b"key-%02d" % (i % 23), make_value(i, 50 + i % 200), [("idx", str(i).encode())])
            for i in range(start, start + n)]


def read_all(bootstrap, topic, partitions, timeout=60.0):
    """Read every partition from 0 to its current high watermark."""
    wm = watermarks(bootstrap, topic, partitions)
    for p, (lo, _) in wm.items():
        assert lo == 0, f"partition {p}: log start offset {lo}, expected 0 (nothing is deleted)"
    return consume_confluent(bootstrap, topic, {p: hi for p, (lo, hi) in wm.items()}, timeout=timeout), wm


def test_graceful_restart_keeps_acknowledged_records(agent):
    topic = unique_topic("dur-restart")
    create_topic(agent.bootstrap, topic, 4)
    sent = produce_confluent(agent.bootstrap, topic, make_records(3000))
    counts = partition_counts(sent)
    agent.stop()  # asserts exit code 0
    agent.restart()
    consumed, wm = read_all(agent.bootstrap, topic, range(4))
    assert {p: hi for p, (_, hi) in wm.items()} == {p: counts.get(p, 0) for p in range(4)}, (
        f"high watermarks after restart {wm} != acknowledged counts {counts}")
    check_roundtrip(sent, consumed)
    # new records continue the offsets
    more = produce_confluent(agent.bootstrap, topic, small_records(200, start=10_000))
    for p in range(4):
        offs = sorted(r.offset for r in more if r.partition == p)
        assert offs == list(range(counts.get(p, 0), counts.get(p, 0) + len(offs))), (
            f"partition {p}: offsets after restart {offs[:10]}... do not continue from {counts.get(p, 0)}")


@pytest.mark.timeout(600)
def test_kill9_mid_stream_loses_no_acknowledged_record(agent):
    topic = unique_topic("dur-kill9")
    create_topic(agent.bootstrap, topic, 4)
    prod = StreamProducer(agent.bootstrap, topic, rate_per_sec=4000)
    prod.start()
    try:
        prod.wait_acked(3000, timeout=60, what="before the crash")
        agent.kill()
        acked_at_kill = prod.acked_count()
        time.sleep(1.0)  # the producer keeps queueing and retrying against a dead broker
        agent.restart()
        prod.wait_acked(acked_at_kill + 2000, timeout=90, what="after restart (producer must make progress)")
    finally:
        undelivered = prod.stop_and_flush(timeout=60)
    _verify_stream(prod, agent.bootstrap, topic, range(4), undelivered)


def _verify_stream(prod, bootstrap, topic, partitions, undelivered):
    """Every acknowledged record of a StreamProducer is in the log exactly
    once, intact, at contiguous offsets from 0."""
    assert undelivered == 0, f"{undelivered} messages still undelivered 60 s after the stream stopped"
    assert prod.exception is None, f"producer thread failed: {prod.exception!r}"
    with prod.lock:
        acked = dict(prod.acked)
        errors = list(prod.errors)

    consumed, wm = read_all(bootstrap, topic, partitions, timeout=120)
    at = {}
    for p, recs in consumed.items():
        offs = [r.offset for r in recs]
        assert offs == list(range(wm[p][1])), (
            f"partition {p}: offsets read are not contiguous 0..{wm[p][1] - 1}: first anomalies "
            f"{[(i, o) for i, o in enumerate(offs) if o != i][:10]}")
        for r in recs:
            at[(p, r.offset)] = r
    lost = []
    for idx, (p, o) in acked.items():
        r = at.get((p, o))
        if r is None or r.idx != idx:
            lost.append((idx, (p, o), None if r is None else r.idx))
    assert not lost, (f"{len(lost)} of {len(acked)} acknowledged records are missing or replaced "
                      f"(idx, acked at, idx found there): {lost[:10]}; delivery errors: {errors[:5]}")
    # every record in the log was sent by us and is intact
    for (p, o), r in at.items():
        assert r.idx is not None and r.value == prod.record(r.idx).value, (
            f"{topic}[{p}]@{o}: unexpected or corrupted record {r.value[:40]!r}")
    # idempotence: retries after the crash must not have written a record twice
    seen = {}
    dups = []
    for (p, o), r in sorted(at.items()):
        if r.idx in seen:
            dups.append((r.idx, seen[r.idx], (p, o)))
        seen[r.idx] = (p, o)
    assert not dups, (f"{len(dups)} records were written twice despite enable.idempotence "
                      f"(idx, first, second): {dups[:10]}")


def test_two_agents_share_database_and_objects(start_agent):
    a = start_agent()
    b = start_agent(db_url=a.db_url, object_store=a.object_store)
    for who in (a, b):
        deadline = time.monotonic() + 30
        while True:
            brokers = cluster_metadata(who.bootstrap).brokers
            ports = sorted(br.port for br in brokers.values())
            if ports == sorted([a.port, b.port]):
                break
            assert time.monotonic() < deadline, (
                f"Metadata from {who.name} lists brokers {[(br.id, br.host, br.port) for br in brokers.values()]}, "
                f"want both ports {a.port} and {b.port}")
            time.sleep(0.5)
        assert len({br.id for br in brokers.values()}) == 2, "the two agents need distinct broker ids"
    topic = unique_topic("dur-two")
    create_topic(a.bootstrap, topic, 4)
    sent = produce_confluent(a.bootstrap, topic, make_records(2000))
    counts = partition_counts(sent)
    wm = watermarks(b.bootstrap, topic, range(4))
    assert {p: hi for p, (_, hi) in wm.items()} == {p: counts.get(p, 0) for p in range(4)}, (
        f"watermarks seen through B {wm} != records produced through A {counts}")
    consumed = consume_confluent(b.bootstrap, topic, {p: counts.get(p, 0) for p in range(4)})
    check_roundtrip(sent, consumed)


def _count_files(root):
    return sum(len(files) for _, _, files in os.walk(root))


@pytest.mark.parametrize("store", ["memory", "file", "s3"])
def test_object_store_roundtrip(request, start_agent, tmp_path, store):
    bucket = None
    extra = []
    if store == "memory":
        url = "memory://"
    elif store == "file":
        d = tmp_path / "objects-file"
        d.mkdir()
        url = f"file://{d}"
    else:
        bucket = request.getfixturevalue("s3_bucket")
        url = f"s3://{bucket['bucket']}/rutomq-e2e"
        extra = ["--s3-endpoint", bucket["endpoint"], "--s3-region", "us-east-1",
                 "--s3-access-key-id", "test", "--s3-secret-access-key", "test", "--s3-allow-http"]
    a = start_agent(object_store=url, extra_args=extra)
    topic = unique_topic(f"dur-{store}")
    create_topic(a.bootstrap, topic, 2)
    sent = produce_confluent(a.bootstrap, topic, make_records(500))
    counts = partition_counts(sent)
    consumed = consume_confluent(a.bootstrap, topic, {p: counts.get(p, 0) for p in range(2)})
    check_roundtrip(sent, consumed)
    if store == "file":
        n = _count_files(d)
        assert n > 0, f"no object was written under {d}"
    if store == "s3":
        listed = bucket["client"].list_objects_v2(Bucket=bucket["bucket"], Prefix="rutomq-e2e/")
        assert listed.get("KeyCount", 0) > 0, f"no object was written to s3://{bucket['bucket']}/rutomq-e2e/: {listed}"


@pytest.mark.timeout(600)
def test_embedded_postgres_defaults(start_agent):
    a = start_agent(embedded_pg=True)
    topic = unique_topic("dur-embedded")
    create_topic(a.bootstrap, topic, 2)
    sent = produce_confluent(a.bootstrap, topic, small_records(100))
    counts = partition_counts(sent)
    check_roundtrip(sent, consume_confluent(a.bootstrap, topic, {p: counts.get(p, 0) for p in range(2)}))
    assert os.path.isdir(os.path.join(a.data_dir, "pg")), f"no embedded PostgreSQL under {a.data_dir}/pg"
    assert a.embedded_postmaster_pids(), "no running postmaster found under DIR/pg while the agent runs"
    a.stop()  # exit code 0
    deadline = time.monotonic() + 15
    while a.embedded_postmaster_pids():
        assert time.monotonic() < deadline, (
            f"embedded PostgreSQL still running 15 s after the agent exited: {a.embedded_postmaster_pids()}")
        time.sleep(0.2)
    a.restart()
    consumed, wm = read_all(a.bootstrap, topic, range(2))
    check_roundtrip(sent, consumed)


def _pg_ctl(data_dir, *args):
    """Runs pg_ctl on an agent's embedded cluster, as its owner when root."""
    import glob
    import pwd
    import subprocess
    bindirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
    pg_ctl = os.path.join(bindirs[-1], "pg_ctl") if bindirs else "pg_ctl"
    data = os.path.join(data_dir, "pg", "data")
    cmd = [pg_ctl, *args, "-D", data]
    if os.geteuid() == 0:
        owner = pwd.getpwuid(os.stat(data).st_uid).pw_name
        cmd = ["runuser", "-u", owner, "--", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.mark.timeout(600)
def test_postgres_restart_mid_stream_agent_recovers(start_agent):
    """PostgreSQL restarts under a produce stream: the agent reconnects by
    itself, the idempotent producer's retries land once, nothing acknowledged
    is lost and offsets stay contiguous."""
    a = start_agent(embedded_pg=True)
    topic = unique_topic("dur-pgrestart")
    create_topic(a.bootstrap, topic, 2)
    prod = StreamProducer(a.bootstrap, topic, rate_per_sec=3000)
    prod.start()
    try:
        prod.wait_acked(2000, timeout=60, what="before the PostgreSQL restart")
        sock = os.path.join(a.data_dir, "pg", "run")
        log = os.path.join(a.data_dir, "pg", "postgres.log")  # not our pipes: pg_ctl would wait on them
        r = _pg_ctl(a.data_dir, "restart", "-m", "fast", "-w", "-l", log,
                    "-o", f"-c listen_addresses='' -k {sock}")
        assert r.returncode == 0, f"pg_ctl restart failed: {r.stdout}{r.stderr}"
        acked_at_restart = prod.acked_count()
        prod.wait_acked(acked_at_restart + 2000, timeout=90, what="after the PostgreSQL restart")
    finally:
        undelivered = prod.stop_and_flush(timeout=60)
    _verify_stream(prod, a.bootstrap, topic, range(2), undelivered)


@pytest.mark.timeout(300)
def test_orphan_objects_are_collected(start_agent, tmp_path):
    """Objects of a deleted topic, and an upload that was never committed,
    are deleted by the orphan collector; objects of live topics stay and
    stay readable."""
    from kafkautil import delete_topic
    d = tmp_path / "objects-gc"
    d.mkdir()
    a = start_agent(object_store=f"file://{d}",
                    extra_args=["--gc-interval-ms", "300", "--gc-grace-ms", "2000",
                                "--file-delete-delay-ms", "0"])
    keep, drop = unique_topic("gc-keep"), unique_topic("gc-drop")
    create_topic(a.bootstrap, keep, 1)
    create_topic(a.bootstrap, drop, 1)
    # Separate produce calls: objects hold one topic each.
    sent_keep = produce_confluent(a.bootstrap, keep, make_records(200))
    before_drop = set(object_files(d, suffix=""))
    produce_confluent(a.bootstrap, drop, make_records(200))
    drop_objects = set(object_files(d, suffix="")) - before_drop
    assert drop_objects, "producing to the second topic wrote no object"
    # A stray upload nobody committed (as after a failed commit), made old.
    stray_dir = d / "objects" / "999"
    stray_dir.mkdir(parents=True, exist_ok=True)
    stray = stray_dir / "0000000000000-stray.rtq"
    stray.write_bytes(b"never committed")
    old = time.time() - 3600
    os.utime(stray, (old, old))
    delete_topic(a.bootstrap, drop)
    deadline = time.monotonic() + 60
    while True:
        left = set(object_files(d, suffix=""))
        if not (left & drop_objects) and not stray.exists():
            break
        assert time.monotonic() < deadline, (
            f"orphans still present after 60 s: {sorted(left & drop_objects)[:5]}, stray exists: {stray.exists()}")
        time.sleep(0.5)
    assert left, "the live topic's objects were deleted too"
    counts = partition_counts(sent_keep)
    check_roundtrip(sent_keep, consume_confluent(a.bootstrap, keep, {0: counts.get(0, 0)}))


def test_adaptive_flush_stretches_windows_for_a_trickle_and_not_under_load(start_agent):
    """A trickle of records shares stretched windows (fewer objects and commit
    transactions than records) and still round-trips in order; under load the
    windows are one flush interval again."""
    from confluent_kafka import Producer
    a = start_agent(flush_interval_ms=20, extra_args=["--flush-interval-max-ms", "80"])
    topic = unique_topic("dur-stretch")
    create_topic(a.bootstrap, topic, 1)
    before = a.metrics()
    p = Producer({"bootstrap.servers": a.bootstrap, "acks": "all", "linger.ms": 0,
                  "enable.idempotence": True})
    sent, errors = [], []
    # 60 records, one every 20 ms (one per flush interval): unstretched,
    # that is one object per record.
    for i in range(60):
        value = b"trickle-%03d" % i
        p.produce(topic, value=value, partition=0,
                  on_delivery=lambda err, msg: errors.append(err) if err else sent.append(msg.value()))
        p.poll(0)
        time.sleep(0.02)
    assert p.flush(30) == 0 and not errors, f"trickle not delivered: {errors[:5]}"
    after = a.metrics()
    puts = after["rutomq_object_puts_total"] - before["rutomq_object_puts_total"]
    txns = after["rutomq_commit_transactions_total"] - before["rutomq_commit_transactions_total"]
    assert after["rutomq_flush_window_intervals"] == 4, (
        f"a trickle of 1 record per 20 ms interval should stretch windows to 80 ms, the gauge says "
        f"{after['rutomq_flush_window_intervals']}")
    assert puts <= 30 and txns <= 30, f"60 records took {puts} objects and {txns} commit transactions"
    consumed = consume_confluent(a.bootstrap, topic, {0: 60})
    assert [r.value for r in consumed[0]] == sent == [b"trickle-%03d" % i for i in range(60)]
    # Load: ~24 MiB as fast as it goes; the windows shrink back to one
    # interval (sampled while it runs; traffic that stops leaves the gauge
    # where the last window put it).
    strides = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            strides.append(a.metrics()["rutomq_flush_window_intervals"])
            time.sleep(0.01)
    t = threading.Thread(target=sample)
    t.start()
    try:
        produce_confluent(a.bootstrap, topic, [Rec(i, None, make_value(i, 8192)) for i in range(3000)],
                          partition=0)
    finally:
        stop.set()
        t.join()
    assert 1 in strides, f"windows never shrank back to one interval under load: {sorted(set(strides))}"


def test_a_lone_request_is_sealed_at_once_while_the_pipeline_is_idle(start_agent):
    """--flush-when-idle (on by default where windows do not stretch): a produce
    request that finds none of the agent's windows on its way is sealed at once,
    not at the end of its flush window; with it off, it waits for the grid. A
    1 s flush interval makes the difference plain."""
    from confluent_kafka import Producer

    def lone_produces(a, topic, n, first):
        p = Producer({"bootstrap.servers": a.bootstrap, "acks": "all", "linger.ms": 0,
                      "enable.idempotence": True})
        p.list_topics(topic, timeout=30)  # connected before the clock starts
        took = []
        for i in range(n):
            done = []
            t0 = time.monotonic()
            p.produce(topic, value=b"lone-%d" % i, partition=0,
                      on_delivery=lambda err, msg: done.append((err, msg.offset())))
            assert p.flush(30) == 0 and done and done[0][0] is None, f"record {i}: {done}"
            took.append(time.monotonic() - t0)
            assert done[0][1] == first + i
        return took

    a = start_agent(flush_interval_ms=1000)
    topic = unique_topic("dur-idle")
    create_topic(a.bootstrap, topic, 1)
    before = a.metrics()
    took = lone_produces(a, topic, 5, 0)
    after = a.metrics()
    seals = after["rutomq_flush_idle_seals_total"] - before["rutomq_flush_idle_seals_total"]
    assert seals == 5, f"5 lone requests, {seals} idle seals"
    # Waiting for the grid, five in a row under 0.6 s would be luck (0.6^5).
    assert max(took) < 0.6, f"lone requests waited for the 1 s grid: {[round(t, 3) for t in took]}"

    a.stop()  # b alone serves the partition
    b = start_agent(flush_interval_ms=1000, extra_args=["--flush-when-idle", "false"])
    before = b.metrics()
    lone_produces(b, topic, 3, 5)
    after = b.metrics()

    def grid_seals(m):
        return sum(v for name, labels, v in m.samples
                   if name == "rutomq_window_stage_seconds_count" and 'stage="seal_late"' in labels)
    assert after["rutomq_flush_idle_seals_total"] == before["rutomq_flush_idle_seals_total"] == 0
    assert grid_seals(after) - grid_seals(before) >= 3, "with it off, requests wait for the grid"
    consumed = consume_confluent(b.bootstrap, topic, {0: 8})
    assert [r.value for r in consumed[0]] == [b"lone-%d" % i for i in range(5)] + \
        [b"lone-%d" % i for i in range(3)]
