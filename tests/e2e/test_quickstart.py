# What this proves: the README's quick start works as written, without containers: a
# PostgreSQL server, a real S3-compatible server (s3s-fs from crates.io, checking SigV4
# signatures) and one agent pointed at both with s3://; records go in and come out, the
# objects are in the bucket, `cluster status` sees both stores healthy, and after a stop
# and a start (of all three) the records are still there.
# How: packaging/quickstart/quickstart.sh with free ports and its own directory; the S3
# server is built once into tests/.cache/cargo-tools (scripts/test.sh does it up front).

import os
import subprocess
import tempfile

from conftest import REPO_ROOT, free_ports, require_binary

SCRIPT = os.path.join(REPO_ROOT, "packaging", "quickstart", "quickstart.sh")


def test_quickstart_with_s3_server():
    qs_dir = tempfile.mkdtemp(prefix="rutomq-qs-", dir="/tmp")
    os.chmod(qs_dir, 0o755)  # the PostgreSQL server runs as `postgres` when we are root
    kafka, http, s3, pg = free_ports(4)
    env = {**os.environ, "QS_DIR": qs_dir, "QS_KAFKA_PORT": str(kafka), "QS_HTTP_PORT": str(http),
           "QS_S3_PORT": str(s3), "QS_PG_PORT": str(pg), "RUTOMQ_BIN": require_binary(),
           "QS_TOOLS": os.path.join(REPO_ROOT, "tests", ".cache", "cargo-tools")}

    def qs(*args, timeout=600):
        res = subprocess.run(["bash", SCRIPT, *args], env=env, capture_output=True, text=True, timeout=timeout)
        assert res.returncode == 0, f"quickstart.sh {args}: rc={res.returncode}\n{res.stdout}\n{res.stderr}"
        return res.stdout

    try:
        qs("start")
        out = qs("demo")
        print(out)
        for line in ("alice: hello", "bob: from rutomq", "carol: on S3"):
            assert line in out.splitlines(), out
        objects = [line for line in out.splitlines() if line.startswith("quickstart/objects/")]
        assert objects, out
        for o in objects:
            assert os.path.getsize(os.path.join(qs_dir, "s3", "rutomq", o)) > 0
        assert "POSTGRES      ok" in out and "OBJECT_STORE  ok" in out, out
        qs("stop")
        qs("start")
        again = subprocess.run([require_binary(), "consume", "quickstart", "-e", "-b", f"127.0.0.1:{kafka}"],
                               capture_output=True, text=True, timeout=60)
        assert sorted(again.stdout.splitlines()) == ["from rutomq", "hello", "on S3"], again
    finally:
        subprocess.run(["bash", SCRIPT, "stop"], env=env, capture_output=True, timeout=120)
        subprocess.run(["rm", "-rf", qs_dir])
