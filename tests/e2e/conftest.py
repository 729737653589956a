"""Fixtures for the rutomq end-to-end tests.

What they provide
-----------------
pg_url       (session)  One private PostgreSQL cluster for the whole run (or the
                        cluster named by $RUTOMQ_TEST_PG_URL). Returns its superuser URL.
fresh_db     (function) A new, empty database on that cluster; returns its URL.
start_agent  (function) Factory: start_agent(db_url=None, object_store=None, data_dir=None,
                        shards=2, extra_args=[], embedded_pg=False, *, auto_create_topics=True,
                        default_partitions=1, flush_interval_ms=10) -> Agent.
                        Every agent still running at the end of the test is killed.
agent        (function) One Agent started with the defaults.
unique_topic            Re-exported from kafkautil (plain helper, not a fixture).

Agents that are started by the same test without db_url / object_store share
that test's database and object directory, i.e. they form one cluster.

The broker binary is $RUTOMQ_BIN or <repo>/target/release/rutomq. Tests that need it
SKIP only when the file does not exist; a binary that exists but misbehaves FAILS.
"""

import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kafkautil import unique_topic  # noqa: E402,F401  (re-exported for tests)

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def rutomq_bin():
    return os.environ.get("RUTOMQ_BIN") or os.path.join(REPO_ROOT, "target", "release", "rutomq")


def require_binary():
    path = rutomq_bin()
    if not os.path.isfile(path):
        pytest.skip(f"rutomq binary not built: {path} does not exist "
                    f"(build it with `cargo build --release` or set RUTOMQ_BIN)")
    if not os.access(path, os.X_OK):
        pytest.fail(f"rutomq binary {path} exists but is not executable")
    return path


def free_port():
    """A TCP port that was free a moment ago on 127.0.0.1 (bind to port 0)."""
    return free_ports(1)[0]


def free_ports(n):
    """`n` distinct TCP ports that were free a moment ago on 127.0.0.1. The
    sockets are held until all are bound: two free_port() calls in a row can
    get the same port back (an agent once got one port for its Kafka and its
    HTTP listener)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def tail(path, n=50):
    if not os.path.isfile(path):  # e.g. /dev/full: reads never end
        return f"<{path} is not a regular file>"
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError as e:
        return f"<cannot read {path}: {e}>"
    return "\n".join(lines[-n:])


_NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_get(url, timeout=2.0):
    """(status, body bytes); never uses a proxy. Raises OSError on connection errors."""
    try:
        with _NO_PROXY_OPENER.open(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


# --------------------------------------------------------------------------
# PostgreSQL


def _pg_version_key(path):
    m = re.search(r"/postgresql/(\d+)(?:\.(\d+))?/bin", path)
    return (int(m.group(1)), int(m.group(2) or 0)) if m else (0, 0)


def find_pg_bindir():
    """Directory holding initdb, pg_ctl and postgres: `pg_config --bindir`, then
    PATH, then the newest /usr/lib/postgresql/*/bin."""
    candidates = []
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            candidates.append(out.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        pass
    for tool in ("initdb", "pg_ctl"):
        w = shutil.which(tool)
        if w:
            candidates.append(os.path.dirname(os.path.realpath(w)))
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_pg_version_key, reverse=True)
    for d in candidates:
        if all(os.path.isfile(os.path.join(d, t)) for t in ("initdb", "pg_ctl", "postgres")):
            return d
    raise RuntimeError(
        "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found via pg_config, PATH or "
        f"/usr/lib/postgresql/*/bin (looked in {candidates}); install the Debian package `postgresql`")


def _pg_os_user():
    """None when not root; otherwise the unprivileged OS user that runs the cluster
    (postgres refuses to run as root): `postgres` if it exists, else `rutomq-test`
    (created if missing)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "rutomq-test"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            pass
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    "rutomq-test"], check=True, capture_output=True)
    return "rutomq-test"


class PgCluster:
    SUPERUSER = "postgres"

    def __init__(self):
        self.bindir = find_pg_bindir()
        self.os_user = _pg_os_user()
        # Under /tmp (world-traversable) rather than pytest's 0700 tmp dirs, so that
        # the unprivileged `postgres` user can reach it when we run as root.
        self.root = tempfile.mkdtemp(prefix="rutomq-e2e-pg-", dir="/tmp" if self.os_user else None)
        self.datadir = os.path.join(self.root, "data")
        self.logfile = os.path.join(self.root, "postgres.log")
        self.port = free_port()
        self.started = False
        if self.os_user:
            pw = pwd.getpwnam(self.os_user)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        os.chmod(self.root, 0o755)

    def _run(self, *argv, timeout=120):
        cmd = list(argv)
        if self.os_user:
            cmd = ["runuser", "-u", self.os_user, "--"] + cmd
        res = subprocess.run(cmd, cwd=self.root, capture_output=True, text=True, timeout=timeout,
                             stdin=subprocess.DEVNULL)
        if res.returncode != 0:
            raise RuntimeError(f"command failed ({res.returncode}): {' '.join(cmd)}\n"
                               f"stdout:\n{res.stdout}\nstderr:\n{res.stderr}\n"
                               f"server log tail:\n{tail(self.logfile, 50)}")
        return res

    def start(self):
        self._run(os.path.join(self.bindir, "initdb"), "-D", self.datadir, "-U", self.SUPERUSER,
                  "--auth=trust", "--encoding=UTF8", "--locale=C")
        with open(os.path.join(self.datadir, "postgresql.conf"), "a") as f:
            f.write(
                "\n# rutomq e2e test cluster\n"
                "listen_addresses = '127.0.0.1'\n"
                f"port = {self.port}\n"
                f"unix_socket_directories = '{self.root}'\n"
                "max_connections = 300\n"
                "fsync = on\n"
                "synchronous_commit = on\n"
                "full_page_writes = on\n"
                "logging_collector = off\n"
            )
        # initdb --auth=trust already writes trust lines for local, 127.0.0.1/32 and ::1/128.
        self._run(os.path.join(self.bindir, "pg_ctl"), "-D", self.datadir, "-l", self.logfile,
                  "-w", "-t", "60", "start")
        self.started = True
        return self

    @property
    def url(self):
        return f"postgresql://{self.SUPERUSER}@127.0.0.1:{self.port}/postgres"

    def stop(self):
        if self.started:
            try:
                self._run(os.path.join(self.bindir, "pg_ctl"), "-D", self.datadir, "-m", "fast",
                          "-w", "-t", "60", "stop")
            except Exception as e:  # last resort: kill the postmaster by pid
                print(f"pg_ctl stop failed: {e}", file=sys.stderr)
                _kill_postmaster(self.datadir)
            self.started = False
        shutil.rmtree(self.root, ignore_errors=True)


def _kill_postmaster(datadir):
    pidfile = os.path.join(datadir, "postmaster.pid")
    try:
        with open(pidfile) as f:
            pid = int(f.readline().strip())
    except (OSError, ValueError):
        return
    if _cmdline(pid).find("postgres") < 0:
        return
    for sig in (signal.SIGQUIT, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _pid_alive(pid):
            time.sleep(0.1)


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        return False


def url_with_db(base_url, dbname):
    u = urllib.parse.urlsplit(base_url)
    return urllib.parse.urlunsplit((u.scheme, u.netloc, "/" + dbname, u.query, u.fragment))


def create_database(base_url):
    import psycopg
    name = "t_" + uuid.uuid4().hex
    with psycopg.connect(base_url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name, url_with_db(base_url, name)


def drop_database(base_url, name):
    import psycopg
    try:
        with psycopg.connect(base_url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except Exception as e:  # cleanup only
        print(f"warning: could not drop database {name}: {e}", file=sys.stderr)


@pytest.fixture(scope="session")
def pg_url():
    external = os.environ.get("RUTOMQ_TEST_PG_URL")
    if external:
        yield external
        return
    cluster = PgCluster()
    try:
        cluster.start()
    except Exception:
        cluster.stop()
        raise
    try:
        yield cluster.url
    finally:
        cluster.stop()


@pytest.fixture
def fresh_db(pg_url):
    name, url = create_database(pg_url)
    yield url
    drop_database(pg_url, name)


# --------------------------------------------------------------------------
# Agents


class Metrics(dict):
    """name -> value summed over all label sets; `.raw` keeps the full text,
    `.samples` the list of (name, labels_text, value)."""

    def __init__(self, raw):
        super().__init__()
        self.raw = raw
        self.samples = []
        for line in raw.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(\s+\S+)?$", line)
            if not m:
                raise AssertionError(f"unparseable Prometheus line: {line!r}")
            name, labels, value = m.group(1), m.group(2) or "", m.group(3)
            try:
                v = float(value)
            except ValueError:
                raise AssertionError(f"bad sample value in Prometheus line: {line!r}")
            self.samples.append((name, labels, v))
            self[name] = self.get(name, 0.0) + v


class Agent:
    def __init__(self, *, binary, name, data_dir, port, http_port, db_url, object_store, shards,
                 flush_interval_ms, auto_create_topics, default_partitions, extra_args, embedded_pg,
                 log_path, env, sasl_port=None, tls=None, ssl_ports=(None, None)):
        self.binary = binary
        # With a SASL_PLAINTEXT listener beside the PLAINTEXT one.
        self.sasl_port = sasl_port
        # With SSL and SASL_SSL listeners: tls is a certs.Certs (files) and
        # the client-auth mode, ("requested", certs).
        self.tls = tls
        self.ssl_port, self.sasl_ssl_port = ssl_ports
        self.name = name
        self.data_dir = data_dir
        self.port = port
        self.http_port = http_port
        self.db_url = db_url
        self.object_store = object_store
        self.shards = shards
        self.flush_interval_ms = flush_interval_ms
        self.auto_create_topics = auto_create_topics
        self.default_partitions = default_partitions
        self.extra_args = list(extra_args)
        self.embedded_pg = embedded_pg
        self.log_path = log_path
        self.env = env
        self.proc = None
        self.ready_timeout = 90.0 if embedded_pg else 30.0

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self):
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def ssl_bootstrap(self):
        return f"127.0.0.1:{self.ssl_port}"

    @property
    def sasl_ssl_bootstrap(self):
        return f"127.0.0.1:{self.sasl_ssl_port}"

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def args(self):
        a = [self.binary, "serve", "--data-dir", self.data_dir]
        if self.sasl_port is None and self.tls is None:
            a += ["--listen", f"127.0.0.1:{self.port}", "--advertise", f"127.0.0.1:{self.port}"]
        else:
            listeners = [f"PLAINTEXT://127.0.0.1:{self.port}"]
            if self.sasl_port is not None:
                listeners.append(f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}")
            if self.tls is not None:
                client_auth, certs = self.tls
                listeners += [f"SSL://127.0.0.1:{self.ssl_port}",
                              f"SASL_SSL://127.0.0.1:{self.sasl_ssl_port}"]
                a += ["--ssl-certificate-location", certs.server_cert,
                      "--ssl-key-location", certs.server_key,
                      "--ssl-truststore-location", certs.ca,
                      "--ssl-client-auth", client_auth]
            a += ["--listeners", ",".join(listeners)]
        a += ["--http", f"127.0.0.1:{self.http_port}"]
        if not self.embedded_pg:
            a += ["--postgres-url", self.db_url]
        a += ["--object-store", self.object_store,
              "--shards", str(self.shards),
              "--flush-interval-ms", str(self.flush_interval_ms),
              "--auto-create-topics", "true" if self.auto_create_topics else "false",
              "--default-partitions", str(self.default_partitions)]
        # No memory faulted in at start (~840 MiB at the defaults: 0.05-6.7 s
        # per start on the development VMs, ~200 starts per suite run). It
        # serves latency under load, which tests do not measure; the agents
        # test_cli.py starts by hand keep the default.
        if not any(x.startswith("--prefault-bytes") for x in self.extra_args):
            a += ["--prefault-bytes", "0"]
        return a + self.extra_args

    def is_running(self):
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n=50):
        return tail(self.log_path, n)

    def _fail(self, msg, n=50):
        pytest.fail(f"{self.name}: {msg}\ncommand: {' '.join(self.args())}\n"
                    f"--- last {n} lines of {self.log_path} ---\n{self.log_tail(n)}", pytrace=False)

    def start(self):
        assert not self.is_running(), f"{self.name} is already running"
        os.makedirs(self.data_dir, exist_ok=True)
        with open(self.log_path, "ab", buffering=0) as log:
            try:
                log.write(f"\n===== [{time.strftime('%H:%M:%S')}] starting: {' '.join(self.args())}\n".encode())
                log.flush()
            except OSError:  # e.g. /dev/full, on purpose
                pass
            self.proc = subprocess.Popen(self.args(), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=self.env,
                                         start_new_session=True)
        self.wait_ready()
        return self

    def wait_ready(self, timeout=None):
        timeout = timeout or self.ready_timeout
        url = f"http://127.0.0.1:{self.http_port}/health/ready"
        deadline = time.monotonic() + timeout
        last = "no answer"
        while True:
            rc = self.proc.poll()
            if rc is not None:
                self._fail(f"exited with code {rc} before becoming ready ({url}: {last})")
            try:
                status, body = http_get(url, timeout=1.0)
                if status == 200:
                    return
                last = f"HTTP {status} {body[:200]!r}"
            except OSError as e:
                last = repr(e)
            if time.monotonic() > deadline:
                self._fail(f"not ready after {timeout:.0f}s ({url}: {last})")
            time.sleep(0.1)

    def stop(self, timeout=60.0):
        """SIGTERM, wait, and assert a graceful exit with code 0."""
        assert self.proc is not None, f"{self.name} was never started"
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
                self._fail(f"did not exit within {timeout:.0f}s of SIGTERM (killed)")
        rc = self.proc.returncode
        if rc != 0:
            self._fail(f"exit code after SIGTERM was {rc}, expected 0")

    def kill(self):
        """SIGKILL the broker process (crash simulation) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def restart(self):
        """Gracefully stop if still running, then start again with the same
        arguments and ports, and wait until ready."""
        if self.is_running():
            self.stop()
        return self.start()

    def http(self, path, timeout=5.0):
        return http_get(f"http://127.0.0.1:{self.http_port}{path}", timeout=timeout)

    def metrics(self):
        status, body = self.http("/metrics")
        assert status == 200, f"{self.name}: GET /metrics returned HTTP {status}: {body[:300]!r}"
        return Metrics(body.decode("utf-8", "replace"))

    def embedded_postmaster_pids(self):
        pids = []
        for pidfile in glob.glob(os.path.join(self.data_dir, "pg", "**", "postmaster.pid"), recursive=True):
            try:
                with open(pidfile) as f:
                    pid = int(f.readline().strip())
            except (OSError, ValueError):
                continue
            if _pid_alive(pid) and "postgres" in _cmdline(pid):
                pids.append((pid, os.path.dirname(pidfile)))
        return pids

    def cleanup(self):
        """Teardown: make sure nothing this agent started is left running."""
        if self.proc is not None:
            if self.proc.poll() is None:
                if self.embedded_pg:
                    # a SIGKILL would orphan the embedded PostgreSQL: try graceful first
                    self.proc.send_signal(signal.SIGTERM)
                    try:
                        self.proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        pass
                if self.proc.poll() is None:
                    self.proc.kill()
                    self.proc.wait(timeout=30)
            try:  # anything left in the agent's own process group
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.embedded_pg:
            for _pid, datadir in self.embedded_postmaster_pids():
                _kill_postmaster(datadir)


def _agent_env():
    # The broker reads RUTOMQ_* variables as defaults for its flags (e.g.
    # RUTOMQ_POSTGRES_URL): never let the test runner's environment leak into
    # an agent's configuration; the command line is the whole contract.
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUTOMQ_")}
    env.setdefault("RUST_LOG", "info")
    env.setdefault("NO_COLOR", "1")  # plain log files
    env.setdefault("RUST_BACKTRACE", "1")
    return env


@pytest.fixture
def start_agent(request, tmp_path):
    agents = []
    request.node._rutomq_agents = agents
    test_db = {}  # lazily created database shared by this test's default agents
    extra_dirs = []
    state = {"pg_url": None}

    def _start(db_url=None, object_store=None, data_dir=None, shards=2, extra_args=(),
               embedded_pg=False, *, auto_create_topics=True, default_partitions=1,
               flush_interval_ms=10, log_path=None, sasl=False, tls=None):
        binary = require_binary()
        n = len(agents)
        name = f"agent{n}"
        if embedded_pg:
            if db_url is not None:
                raise ValueError("embedded_pg=True and db_url are mutually exclusive")
        elif db_url is None:
            if "url" not in test_db:
                state["pg_url"] = request.getfixturevalue("pg_url")
                test_db["name"], test_db["url"] = create_database(state["pg_url"])
            db_url = test_db["url"]
        if object_store is None:
            objects = tmp_path / "objects"
            objects.mkdir(exist_ok=True)
            object_store = f"file://{objects}"
        if data_dir is None:
            if embedded_pg:
                # The broker's embedded PostgreSQL may run as an unprivileged user
                # when we are root: keep its data dir out of pytest's 0700 tmp dirs.
                data_dir = tempfile.mkdtemp(prefix=f"rutomq-e2e-{name}-", dir="/tmp")
                os.chmod(data_dir, 0o755)
                extra_dirs.append(data_dir)
            else:
                data_dir = str(tmp_path / f"{name}-data")
        port, http_port, sasl_port, ssl_port, sasl_ssl_port = free_ports(5)
        a = Agent(binary=binary, name=name, data_dir=str(data_dir), port=port,
                  http_port=http_port, db_url=db_url, object_store=object_store, shards=shards,
                  flush_interval_ms=flush_interval_ms, auto_create_topics=auto_create_topics,
                  default_partitions=default_partitions, extra_args=extra_args,
                  embedded_pg=embedded_pg, log_path=log_path or str(tmp_path / f"{name}.log"),
                  env=_agent_env(), sasl_port=sasl_port if sasl else None, tls=tls,
                  ssl_ports=(ssl_port, sasl_ssl_port) if tls else (None, None))
        agents.append(a)
        return a.start()

    yield _start

    for a in agents:
        try:
            a.cleanup()
        except Exception as e:  # keep cleaning the others
            print(f"warning: cleanup of {a.name} failed: {e}", file=sys.stderr)
    if "name" in test_db:
        drop_database(state["pg_url"], test_db["name"])
    for d in extra_dirs:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def agent(start_agent):
    return start_agent()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for a in getattr(item, "_rutomq_agents", []):
            rep.sections.append((f"{a.name} log ({a.log_path}, last 200 lines)", a.log_tail(200)))


# --------------------------------------------------------------------------
# S3 (moto_server)


def _moto_server_bin():
    cand = os.path.join(os.path.dirname(sys.executable), "moto_server")
    return cand if os.path.isfile(cand) else shutil.which("moto_server")


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A moto S3 server on 127.0.0.1:<free port>; yields its endpoint URL."""
    exe = _moto_server_bin()
    if not exe:
        pytest.fail("moto_server not found (pip install 'moto[server]' from tests/requirements.txt)")
    port = free_port()
    log_path = tmp_path_factory.mktemp("moto") / "moto.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"moto_server exited with {proc.returncode}:\n{tail(log_path)}")
            try:
                http_get(endpoint + "/", timeout=1.0)
                break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"moto_server not answering after 30s:\n{tail(log_path)}")
            time.sleep(0.2)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def s3_client(endpoint):
    import boto3
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test")


@pytest.fixture
def s3_bucket(s3_server):
    """A fresh bucket on the moto server: dict(endpoint, bucket, client)."""
    bucket = "rutomq-" + uuid.uuid4().hex[:16]
    client = s3_client(s3_server)
    client.create_bucket(Bucket=bucket)
    return {"endpoint": s3_server, "bucket": bucket, "client": client}
