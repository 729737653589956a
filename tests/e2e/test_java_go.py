# What this proves: rutomq serves the official Java client (kafka-clients 4.2.0,
# 3.9.2 and the newest, 4.4.0) and franz-go (the newest, and the promised 1.21.5) end to end: CreateTopics, an idempotent acks=all
# producer, and a consumer without a group (direct assignment) reading from the
# start, with every record exactly once, offsets contiguous from 0 per
# partition, per-key order, headers intact, acknowledged offsets equal to
# consumed offsets, and high watermarks equal to the records written.
# How: tests/clients/build.sh builds the RoundTrip programs (tests/java,
# tests/go) once per session; each test runs one of them against a fresh agent
# on its own topic (8 partitions, 3000 records) and asserts its final line
# "RESULT ok produced=3000 consumed=3000". The same programs pass against a
# real Apache Kafka 4.x broker (benches/kafka/start-kafka.sh).

import os
import subprocess

import pytest

from kafkautil import run_build_script, unique_topic

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD_SH = os.path.join(REPO_ROOT, "tests", "clients", "build.sh")
RUN_SH = os.path.join(REPO_ROOT, "tests", "clients", "run.sh")

PARTITIONS = 8
RECORDS = 3000
RUN_TIMEOUT_S = 180
BUILD_TIMEOUT_S = 1200  # cold: Maven and Go module downloads plus two shaded jars


def _text(b):
    if b is None:
        return ""
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else b


def _tail(text, n):
    lines = text.splitlines()
    return "\n".join(lines[-n:])


@pytest.fixture(scope="session")
def roundtrip_clients():
    """Builds the RoundTrip client programs once per session (idempotent)."""
    run_build_script(BUILD_SH, timeout=BUILD_TIMEOUT_S)
    return RUN_SH


# The versions the product promises and the newest (tests/clients/versions.sh):
# kafka-clients 4.2.0, 3.9.2 and 4.4.0; franz-go 1.21.5 and the newest (tests/go/go.mod).
JAVA_CLIENTS = ["java-4", "java-3.9", "java-newest"]
GO_CLIENTS = ["go", "go-1.21.5"]


def test_franz_go_builds_are_the_versions_named(request):
    run_sh = request.getfixturevalue("roundtrip_clients")
    for client in GO_CLIENTS:
        res = subprocess.run(["bash", run_sh, client, "version"], cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=30)
        assert res.returncode == 0, f"{client} version: {res.stderr}"
        if client == "go":
            # The newest: whatever tests/go/go.mod pins.
            with open(os.path.join(REPO_ROOT, "tests", "go", "go.mod")) as f:
                want = next(ln.split()[1] for ln in f if ln.strip().startswith("github.com/twmb/franz-go "))
        else:
            want = "v" + client.removeprefix("go-")
        assert res.stdout.strip() == want, (client, res.stdout, want)


@pytest.mark.parametrize("client", [*JAVA_CLIENTS, *GO_CLIENTS])
def test_roundtrip(client, agent, request):
    # Resolved here, after `agent`, so a missing broker binary skips before any build.
    run_sh = request.getfixturevalue("roundtrip_clients")
    topic = unique_topic(f"rt-{client.replace('.', '')}")
    cmd = ["bash", run_sh, client, "--bootstrap", agent.bootstrap, "--topic", topic,
           "--partitions", str(PARTITIONS), "--records", str(RECORDS)]
    try:
        res = subprocess.run(cmd, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, capture_output=True,
                             text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{client} RoundTrip did not finish in {RUN_TIMEOUT_S} s: {' '.join(cmd)}\n"
                    f"--- stdout ---\n{_text(e.stdout)}\n"
                    f"--- stderr (last 200 lines) ---\n{_tail(_text(e.stderr), 200)}", pytrace=False)
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    last = lines[-1] if lines else "<no output>"
    expected = f"RESULT ok produced={RECORDS} consumed={RECORDS}"
    assert last == expected and res.returncode == 0, (
        f"{client} RoundTrip against {agent.bootstrap} topic {topic}: {last} (exit {res.returncode})\n"
        f"command: {' '.join(cmd)}\n"
        f"--- stdout ---\n{res.stdout}\n"
        f"--- stderr (last 200 lines) ---\n{_tail(res.stderr, 200)}")
