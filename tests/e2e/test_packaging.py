# What this proves: the Debian and RPM packages (scripts/package.sh) hold the binary, the
# hardened systemd unit, the environment file as a configuration file, and the license;
# installing the .deb on this machine creates the rutomq system user and its state
# directory and starts nothing; the unit passes `systemd-analyze verify` and rates "OK" or
# better in `systemd-analyze security`; the agent then runs as the unit runs it (its
# ExecStart line, as its user, with its environment file and limits; through systemctl
# where systemd is PID 1) and a record goes in and out; removing keeps the configuration,
# reinstalling keeps a changed one, purging removes it. The .rpm's files, config flags and
# scripts are read with `rpm -qlp`.
# How: as root (installs into this machine's real /usr, /etc and /var/lib, as an operator
# would); skipped as non-root.

import os
import pwd
import re
import resource
import shlex
import signal
import subprocess
import time
import urllib.request

import psycopg
import pytest

from conftest import REPO_ROOT, free_ports

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="installs a .deb into the machine: needs root")

UNIT = "/lib/systemd/system/rutomq.service"
ENV_FILE = "/etc/rutomq/rutomq.env"


def run(*cmd, check=True, timeout=600, **kw):
    res = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, **kw)
    if check:
        assert res.returncode == 0, f"{' '.join(cmd)}: rc={res.returncode}\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}"
    return res


@pytest.fixture(scope="module")
def packages():
    out = run("bash", os.path.join(REPO_ROOT, "scripts", "package.sh"),
              env={**os.environ, "RUTOMQ_SKIP_CARGO": "1"}, timeout=1500).stdout.split()
    deb = next(p for p in out if p.endswith(".deb"))
    rpm = next(p for p in out if p.endswith(".rpm"))
    print(run("dpkg", "-c", deb).stdout)
    print(run("rpm", "-qlp", rpm).stdout)
    return deb, rpm


def test_rpm_contents(packages):
    _, rpm = packages
    assert re.search(r"/rutomq-\d+\.\d+\.\d+-1\.x86_64\.rpm$", rpm), rpm
    files = set(run("rpm", "-qlp", rpm).stdout.split())
    assert {"/usr/bin/rutomq", "/usr/lib/systemd/system/rutomq.service", "/etc/rutomq/rutomq.env",
            "/usr/share/licenses/rutomq/LICENSE"} <= files, files
    assert run("rpm", "-qcp", rpm).stdout.split() == ["/etc/rutomq/rutomq.env"]
    dump = run("rpm", "-qp", "--dump", rpm).stdout
    env_line = next(line for line in dump.splitlines() if line.startswith("/etc/rutomq/rutomq.env "))
    assert " 0100640 root rutomq " in env_line, env_line
    scripts = run("rpm", "-qp", "--scripts", rpm).stdout
    assert "useradd --system" in scripts and "systemctl stop" in scripts, scripts
    assert not starts_or_enables(scripts), scripts
    assert "(none)" not in run("rpm", "-qp", "--queryformat", "%{LICENSE}", rpm).stdout


def starts_or_enables(script):
    """Whether a maintainer script's code (not its comments) enables or starts the service."""
    code = [line for line in script.splitlines() if not line.lstrip().startswith("#")]
    return any(re.search(r"systemctl\s+(start|enable|restart)\b|deb-systemd-invoke\s+start", line)
               for line in code)


def test_deb_install_run_remove_purge(packages, pg_url, tmp_path):
    deb, _ = packages
    assert re.search(r"/rutomq_\d+\.\d+\.\d+-1_amd64\.deb$", deb), deb
    listing = run("dpkg", "-c", deb).stdout
    for path in ["./usr/bin/rutomq", "./lib/systemd/system/rutomq.service", "./etc/rutomq/rutomq.env",
                 "./usr/share/doc/rutomq/copyright"]:
        assert path in listing, listing
    ctrl = tmp_path / "control"
    run("dpkg-deb", "-e", deb, str(ctrl))
    assert (ctrl / "conffiles").read_text().split() == [ENV_FILE]
    for script in ("postinst", "prerm", "postrm"):
        assert not starts_or_enables((ctrl / script).read_text()), script

    run("dpkg", "--purge", "rutomq", check=False)
    try:
        run("dpkg", "-i", deb)
        # Files, user, state directory, permissions.
        assert os.access("/usr/bin/rutomq", os.X_OK)
        assert run("dpkg-query", "-W", "-f=${Conffiles}", "rutomq").stdout.strip().startswith(ENV_FILE)
        user = pwd.getpwnam("rutomq")
        assert user.pw_shell.endswith("nologin") and user.pw_uid < 1000, user
        st = os.stat("/var/lib/rutomq")
        assert st.st_uid == user.pw_uid and oct(st.st_mode & 0o777) == "0o750"
        st = os.stat(ENV_FILE)
        assert oct(st.st_mode & 0o777) == "0o640" and st.st_gid == user.pw_gid, oct(st.st_mode)
        env_text = open(ENV_FILE).read()
        assert env_text == run("/usr/bin/rutomq", "env-template").stdout

        # Nothing enabled, nothing started.
        assert not os.path.exists("/etc/systemd/system/multi-user.target.wants/rutomq.service")
        assert not packaged_agents(), "installing started rutomq"

        # The unit.
        verify = run("systemd-analyze", "verify", UNIT, check=False)
        assert verify.returncode == 0, verify.stderr
        security = run("systemd-analyze", "security", "--offline=true", UNIT, check=False)
        score = re.search(r"Overall exposure level for rutomq.service: ([\d.]+) (\w+)", security.stdout)
        print(f"systemd-analyze security: {score.group(0) if score else security.stdout[-500:]}")
        assert score and float(score.group(1)) <= 2.0 and score.group(2) in ("OK", "SAFE"), security.stdout

        # Configure as an operator would: an external PostgreSQL, our ports.
        port, http_port = free_ports(2)
        dbname = "pkg_" + str(os.getpid())
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {dbname}")
            conn.execute(f"CREATE DATABASE {dbname}")
        db_url = pg_url.rsplit("/", 1)[0] + "/" + dbname
        with open(ENV_FILE, "a") as f:
            f.write(f"\n# test\nRUTOMQ_POSTGRES_URL={db_url}\nRUTOMQ_LISTEN=127.0.0.1:{port}\n"
                    f"RUTOMQ_HTTP=127.0.0.1:{http_port}\nRUTOMQ_SHARDS=1\n")
        proc = start_unit(tmp_path)
        try:
            wait_ready(http_port, proc, tmp_path)
            env = {"RUTOMQ_BROKERS": f"127.0.0.1:{port}", "PATH": "/usr/bin:/bin"}
            run("/usr/bin/rutomq", "topic", "create", "packaged", "-p", "2", env=env)
            run("/usr/bin/rutomq", "produce", "packaged", "--key-delimiter", ":", input="k:installed by dpkg\n",
                env=env)
            got = run("/usr/bin/rutomq", "consume", "packaged", "-e", "--key-delimiter", ":", env=env).stdout
            assert got == "k:installed by dpkg\n", got
            # The agent's files are its own user's.
            owners = {pwd.getpwuid(os.stat(os.path.join(d, n)).st_uid).pw_name
                      for d, _, names in os.walk("/var/lib/rutomq") for n in names}
            assert owners <= {"rutomq"}, owners
        finally:
            stop_unit(proc)

        # Remove keeps the configuration; reinstall keeps a changed one; purge removes it.
        run("dpkg", "-r", "rutomq")
        assert not os.path.exists("/usr/bin/rutomq") and os.path.exists(ENV_FILE)
        run("dpkg", "-i", deb)
        assert f"RUTOMQ_LISTEN=127.0.0.1:{port}" in open(ENV_FILE).read(), "reinstalling replaced a changed config"
        # As `systemctl enable` would leave it: purging takes the link away too.
        wants = "/etc/systemd/system/multi-user.target.wants"
        os.makedirs(wants, exist_ok=True)
        os.symlink(UNIT, f"{wants}/rutomq.service")
        run("dpkg", "--purge", "rutomq")
        assert not os.path.exists(ENV_FILE) and not os.path.exists("/var/lib/rutomq")
        assert not os.path.lexists(f"{wants}/rutomq.service")
        assert run("dpkg-query", "-W", "rutomq", check=False).returncode != 0
    finally:
        run("dpkg", "--purge", "rutomq", check=False)


def packaged_agents():
    """Pids of processes running the installed binary."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/exe") == "/usr/bin/rutomq":
                pids.append(int(pid))
        except OSError:
            pass
    return pids


def systemd_is_pid1():
    return os.path.isdir("/run/systemd/system")


def exec_start():
    """The unit's ExecStart, User and Limit* lines."""
    unit = open(UNIT).read()
    get = lambda k: re.search(rf"^{k}=(.*)$", unit, re.M).group(1).strip()  # noqa: E731
    return shlex.split(get("ExecStart")), get("User"), get("LimitNOFILE"), get("LimitMEMLOCK")


def start_unit(tmp_path):
    if systemd_is_pid1():
        run("systemctl", "daemon-reload")
        run("systemctl", "start", "rutomq.service")
        return None
    # No systemd here: what the unit does, by hand: its user, its environment file, its
    # working directory, its limits, its command.
    argv, user, nofile, memlock = exec_start()
    env = {"PATH": "/usr/bin:/bin"}
    for line in open(ENV_FILE):
        line = line.strip()
        if line and not line.startswith("#"):
            k, v = line.split("=", 1)
            env[k] = v
    # systemd (as root) raises limits past the hard ones; a sandbox without
    # CAP_SYS_RESOURCE stops at its own hard limits.
    nofile = min(int(nofile), resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    hard_memlock = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    if memlock == "infinity":
        memlock = "unlimited" if hard_memlock == resource.RLIM_INFINITY else str(hard_memlock)
    print(f"running the unit's ExecStart by hand: nofile={nofile} memlock={memlock}")
    cmd = ["prlimit", f"--nofile={nofile}", f"--memlock={memlock}", "--",
           "setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--no-new-privs", "--", *argv]
    log = open(tmp_path / "unit.log", "wb")
    return subprocess.Popen(cmd, cwd="/var/lib/rutomq", env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def wait_ready(http_port, proc, tmp_path):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the agent exited {proc.returncode}:\n{(tmp_path / 'unit.log').read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/health/ready", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    pytest.fail("the packaged agent never became ready:\n" + (tmp_path / "unit.log").read_text()[-3000:])


def stop_unit(proc):
    if proc is None:
        run("systemctl", "stop", "rutomq.service")
        return
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=45) == 0, "SIGTERM did not stop the agent cleanly"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
