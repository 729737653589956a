# What this proves: the rutomq command-line contract outside the Kafka protocol:
#  - `rutomq migrate --postgres-url URL` creates the schema in an empty database,
#    is idempotent (a second run exits 0 and changes nothing), and `serve` starts on
#    a migrated database;
#  - `serve` with an invalid --object-store URL fails fast with a non-zero exit code
#    instead of hanging or serving;
#  - SIGTERM gives a graceful exit with code 0 (Agent.stop() asserts it);
#  - the memory --prefault-bytes faults in at start is there besides the object
#    store's read blocks, not taken by them.
# How: run the binary with subprocess against a fresh database of the test cluster
# and inspect the schema through information_schema.

import subprocess

import psycopg
import pytest

from conftest import free_ports, require_binary
from kafkautil import proc_status_kib


def schema_snapshot(url):
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        return conn.execute(
            "SELECT table_schema, table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') "
            "ORDER BY 1, 2, 3").fetchall()


def run_migrate(binary, url, tmp_path, n):
    log = tmp_path / f"migrate{n}.log"
    with open(log, "wb") as f:
        try:
            rc = subprocess.run([binary, "migrate", "--postgres-url", url], stdin=subprocess.DEVNULL,
                                stdout=f, stderr=subprocess.STDOUT, timeout=60).returncode
        except subprocess.TimeoutExpired:
            raise AssertionError(f"rutomq migrate did not finish in 60 s; output:\n{log.read_text()}")
    assert rc == 0, f"rutomq migrate exited {rc}; output:\n{log.read_text(errors='replace')}"


def test_migrate_is_idempotent_and_serve_uses_it(fresh_db, start_agent, tmp_path):
    binary = require_binary()
    assert schema_snapshot(fresh_db) == []
    run_migrate(binary, fresh_db, tmp_path, 1)
    first = schema_snapshot(fresh_db)
    assert first, "rutomq migrate created no tables"
    run_migrate(binary, fresh_db, tmp_path, 2)
    assert schema_snapshot(fresh_db) == first, "a second migrate changed the schema"
    a = start_agent(db_url=fresh_db)
    assert schema_snapshot(fresh_db) == first, "serve changed the schema of an already migrated database"
    a.stop()


def test_serve_rejects_bad_object_store(fresh_db, tmp_path):
    binary = require_binary()
    log = tmp_path / "bad-store.log"
    port, hport = free_ports(2)
    args = [binary, "serve", "--data-dir", str(tmp_path / "data"),
            "--listen", f"127.0.0.1:{port}", "--advertise", f"127.0.0.1:{port}",
            "--http", f"127.0.0.1:{hport}", "--postgres-url", fresh_db,
            "--object-store", "bogus-scheme://nowhere", "--shards", "1"]
    with open(log, "wb") as f:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
            raise AssertionError(f"serve with an invalid --object-store still running after 30 s:\n"
                                 f"{log.read_text(errors='replace')[-3000:]}")
    assert rc != 0, f"serve with an invalid --object-store exited 0:\n{log.read_text(errors='replace')[-3000:]}"


def test_shards_pin_only_to_the_cpus_the_process_may_use(fresh_db, tmp_path):
    """Under a CPU mask (taskset, systemd's CPUAffinity, a Kubernetes cpuset) each shard is
    pinned to a CPU of that mask, never outside it (a cpuset refuses that, and the agent would
    not start)."""
    import os
    import time

    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("one CPU allowed: a mask of it would not tell pinned from unpinned")
    cpu = allowed[-1]
    binary = require_binary()
    port, hport = free_ports(2)
    log = tmp_path / "pinned.log"
    args = ["taskset", "-c", str(cpu), binary, "serve", "--data-dir", str(tmp_path / "data"),
            "--listen", f"127.0.0.1:{port}", "--http", f"127.0.0.1:{hport}", "--postgres-url", fresh_db,
            "--object-store", f"file://{tmp_path / 'objects'}", "--shards", "1"]
    with open(log, "wb") as f:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
    try:
        deadline, shards = time.monotonic() + 30, {}
        while not shards:
            assert proc.poll() is None, f"the agent exited {proc.returncode}:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no shard thread:\n{log.read_text()[-3000:]}"
            time.sleep(0.3)
            for t in os.listdir(f"/proc/{proc.pid}/task"):
                try:
                    name = open(f"/proc/{proc.pid}/task/{t}/comm").read().strip()
                    if name.startswith("shard-"):
                        shards[t] = os.sched_getaffinity(int(t))
                except OSError:
                    pass
        assert all(mask == {cpu} for mask in shards.values()), (cpu, shards)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_memory_faulted_in_at_start_is_not_taken_by_the_read_blocks(start_agent):
    """--prefault-bytes faults memory in at start and frees it for the shards' buffers and
    caches to reuse; the file store's read blocks (read cache + reads in flight) are faulted
    in by the store. Made after the prefault, the blocks took its freed memory and the
    shards faulted theirs in while serving (an ack p99 of 128 ms at 20,000 msg/s on the
    development VM, 32 ms with both there). Both must be resident once the agent is ready."""
    mib = 1 << 20
    prefault, read_cache = 128 * mib, 64 * mib
    a = start_agent(extra_args=["--prefault-bytes", str(prefault), "--read-cache-bytes", str(read_cache)])
    log = open(a.log_path, errors="replace").read()
    if "direct=true" not in log:
        pytest.skip("the object directory refuses O_DIRECT: the store makes no read blocks")
    blocks = read_cache + 128 * mib  # READS_INFLIGHT_BYTES_MAX
    resident = proc_status_kib(a.pid, "RssAnon") * 1024
    assert resident >= prefault + blocks, (
        f"{resident // mib} MiB of anonymous memory resident after start: less than the "
        f"{prefault // mib} MiB prefault and the {blocks // mib} MiB of read blocks")
