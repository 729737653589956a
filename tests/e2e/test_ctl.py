# What this proves: the operator's commands in the agent's binary (`rutomq topic|group|
# produce|consume|cluster`) do what they say against a running agent, over the Kafka
# protocol, in both output formats:
#  - topic create (partitions, configs), list, describe (configs set, offsets), alter-config,
#    delete; a refused creation exits non-zero with Kafka's error name;
#  - produce from standard input (text with keys and headers, JSON) and consume them back
#    (directly with --exit-at-end, and as a group that commits what it printed); a third
#    party (confluent-kafka) reads the same records, keys and headers;
#  - group list/describe (lag), reset-offsets planned then executed, refused while the group
#    has a member;
#  - cluster status: agents with their leases, PostgreSQL and object-store health, lag;
#  - `--log-format json` makes every log line of the agent a JSON object.
# How: one agent (two for the leader move); the binary run with subprocess; answers read as JSON
# where a script would.

import json
import subprocess
import time

from confluent_kafka import Consumer

from conftest import http_get, require_binary, unique_topic
from kafkautil import wait_until


def ctl(agent, *args, stdin=None, check=True, timeout=60):
    res = subprocess.run([require_binary(), *args], input=stdin, capture_output=True, encoding="utf-8", errors="replace",
                         timeout=timeout, env={"RUTOMQ_BROKERS": agent.bootstrap, "PATH": "/usr/bin:/bin"})
    if check:
        assert res.returncode == 0, f"rutomq {' '.join(args)}: rc={res.returncode}\n{res.stdout}\n{res.stderr}"
    return res


def ctl_json(agent, *args, **kw):
    return json.loads(ctl(agent, *args, "--format", "json", **kw).stdout)


def test_topic_produce_consume_commands(start_agent):
    agent = start_agent(extra_args=["--log-format", "json"])
    topic, other = unique_topic("ctl"), unique_topic("ctl-other")

    out = ctl(agent, "topic", "create", topic, other, "-p", "3", "-c", "cleanup.policy=compact",
              "-c", "retention.ms=86400000").stdout
    assert "OK" in out and topic in out and other in out
    again = ctl(agent, "topic", "create", topic, check=False)
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stdout, again
    bad = ctl(agent, "topic", "create", unique_topic("bad"), "-c", "cleanup.policy=sideways", check=False)
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stdout, bad

    listed = {t["topic"]: t for t in ctl_json(agent, "topic", "list")}
    assert listed[topic]["partitions"] == 3 and listed[other]["partitions"] == 3

    ctl(agent, "topic", "alter-config", topic, "--set", "retention.ms=3600000", "--delete", "cleanup.policy")
    d = ctl_json(agent, "topic", "describe", topic)
    configs = {c["config"]: (c["value"], c["source"]) for c in d["configs"]}
    assert configs == {"retention.ms": ("3600000", "DYNAMIC_TOPIC_CONFIG")}, configs
    assert [p["partition"] for p in d["partitions"]] == [0, 1, 2]

    # Text with keys and a header on every record; JSON with its own headers and partition.
    ctl(agent, "produce", topic, "--key-delimiter", ":", "-H", "source=cli",
        stdin="k1:first\nk2:second\nk3:third, with: colons\n")
    ctl(agent, "produce", topic, "--format", "json",
        stdin=json.dumps({"key": "j", "value": "from json", "headers": {"h": "x"}, "partition": 2}) + "\n"
        + json.dumps({"key": None, "value": {"base64": "AAEC/w=="}, "partition": 2}) + "\n")
    bad_line = ctl(agent, "produce", topic, "--format", "json", stdin="not json\n", check=False)
    assert bad_line.returncode == 1 and "input line 1" in bad_line.stderr, bad_line

    d = ctl_json(agent, "topic", "describe", topic)
    assert sum(p["records"] for p in d["partitions"]) == 5, d

    got = [json.loads(line) for line in ctl(agent, "consume", topic, "-e", "--format", "json").stdout.splitlines()]
    by_key = {r["key"]: r for r in got}
    assert len(got) == 5 and by_key["k3"]["value"] == "third, with: colons", got
    assert by_key["k1"]["headers"] == [["source", "cli"]]
    assert by_key["j"]["headers"] == [["h", "x"]] and by_key["j"]["partition"] == 2
    assert by_key[None]["value"] == {"base64": "AAEC/w=="}
    text = ctl(agent, "consume", topic, "-e", "-p", "2", "--key-delimiter", "=").stdout
    assert "j=from json\n" in text
    # From an offset on, one partition: the JSON record's second header list round-trips.
    ctl(agent, "produce", topic, "--format", "json", stdin=json.dumps(
        {"key": "dup", "value": "v", "partition": 1, "headers": [["a", "1"], ["a", "2"]]}) + "\n")
    p1 = [json.loads(line) for line in
          ctl(agent, "consume", topic, "-e", "-p", "1", "-o", "1", "--format", "json").stdout.splitlines()]
    assert [r["offset"] for r in p1] == list(range(1, p1[-1]["offset"] + 1)) and p1[-1]["key"] == "dup", p1
    assert p1[-1]["headers"] == [["a", "1"], ["a", "2"]], p1

    # A line goes out when it is written, not when the input ends (`tail -f | rutomq produce`).
    live = subprocess.Popen([require_binary(), "produce", topic, "-p", "0", "-b", agent.bootstrap],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        live.stdin.write(b"while the input is open\n")
        live.stdin.flush()
        deadline = time.monotonic() + 20
        while "while the input is open" not in ctl(agent, "consume", topic, "-e", "-p", "0").stdout:
            assert time.monotonic() < deadline, "a line written to an open input was not produced"
            time.sleep(0.3)
    finally:
        live.stdin.close()
        assert live.wait(timeout=30) == 0, live.stderr.read()

    # `rutomq consume | head -1`: the reader leaving is a normal end.
    head = subprocess.Popen([require_binary(), "consume", topic, "-b", agent.bootstrap],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head.stdout.readline()
    head.stdout.close()
    ctl(agent, "produce", topic, stdin="one more, for a write into the closed pipe\n")
    assert head.wait(timeout=30) == 0, head.stderr.read()

    # Someone else's client reads what the CLI wrote.
    c = Consumer({"bootstrap.servers": agent.bootstrap, "group.id": unique_topic("g"),
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    seen, deadline = [], time.monotonic() + 30
    wanted = [(b"k1", b"first", [("source", b"cli")]), (None, b"\x00\x01\x02\xff", [])]
    while not all(w in seen for w in wanted) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen.append((m.key(), m.value(), m.headers() or []))
    c.close()
    assert all(w in seen for w in wanted), seen

    ctl(agent, "topic", "delete", other)
    assert other not in {t["topic"] for t in ctl_json(agent, "topic", "list")}
    gone = ctl(agent, "topic", "delete", other, check=False)
    assert gone.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in gone.stdout, gone

    # Every line the agent logged is one JSON object (the harness's own "=====" banners aside).
    lines = [line for line in open(agent.log_path, encoding="utf-8").read().splitlines()
             if line.strip() and not line.startswith("=====")]
    assert lines and all(json.loads(line)["level"] for line in lines), lines[:3]


def test_group_and_cluster_commands(start_agent):
    agent = start_agent(extra_args=["--group-lag-interval-ms", "1000"])
    topic, group = unique_topic("ctl-g"), unique_topic("ctl-group")
    ctl(agent, "topic", "create", topic, "-p", "2")
    ctl(agent, "produce", topic, "-p", "0", "--key-delimiter", " ", stdin="".join(f"k{i} v{i}\n" for i in range(10)))

    # A group consumer prints 6 records and commits them on its way out.
    out = ctl(agent, "consume", topic, "-g", group, "-n", "6").stdout.splitlines()
    assert len(out) == 6 and all(line.startswith("v") for line in out), out
    assert group in {g["group"] for g in ctl_json(agent, "group", "list")}
    d = ctl_json(agent, "group", "describe", group)
    assert d["state"] == "Empty" and d["members"] == [], d
    assert d["total_lag"] == 4 and sum(o["committed"] for o in d["offsets"]) == 6, d
    # The coordinating agent exports the same lag for Prometheus.
    series = f'rutomq_consumer_group_lag{{group="{group}",topic="{topic}"}} 4'
    deadline = time.monotonic() + 15
    while series not in agent.http("/metrics")[1].decode():
        assert time.monotonic() < deadline, f"no {series} in /metrics"
        time.sleep(0.5)

    plan = ctl_json(agent, "group", "reset-offsets", group, "--topic", topic, "--to-earliest")
    assert {p["new"] for p in plan} == {0} and all("planned" in p["status"] for p in plan), plan
    assert ctl_json(agent, "group", "describe", group)["total_lag"] == 4, "a dry run moved offsets"
    done = ctl_json(agent, "group", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
    assert {p["status"] for p in done} == {"OK"}, done
    assert ctl_json(agent, "group", "describe", group)["total_lag"] == 10

    # While a member is in the group, offsets stay where they are.
    member = subprocess.Popen([require_binary(), "consume", topic, "-g", group, "-b", agent.bootstrap],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not ctl_json(agent, "group", "describe", group)["members"]:
            assert time.monotonic() < deadline, "the consume member never joined"
            time.sleep(0.5)
        refused = ctl(agent, "group", "reset-offsets", group, "--topic", topic, "--to-latest", "--execute",
                      check=False)
        assert refused.returncode == 1 and "stop its consumers" in refused.stderr, refused
    finally:
        member.terminate()
        member.wait(timeout=30)

    status = ctl_json(agent, "cluster", "status", "--http", f"127.0.0.1:{agent.http_port}")
    assert status["postgres"].startswith("ok") and status["object_store"].startswith("ok"), status
    (a,) = status["agents"]
    assert a["address"] == agent.bootstrap and a["in_metadata"] and a["lease_left_ms"] > 0, a
    assert any(g["group"] == group for g in status["groups"]), status
    text = ctl(agent, "cluster", "status", "--http", f"127.0.0.1:{agent.http_port}").stdout
    assert "POSTGRES" in text and "AGENTS" in text and "GROUPS" in text, text
    # Without a reachable HTTP address the Kafka part is still printed, and the exit says why.
    blind = ctl(agent, "cluster", "status", "--http", "127.0.0.1:1", check=False)
    assert blind.returncode == 1 and "AGENTS" in blind.stdout and "--http" in blind.stderr, blind


def test_consume_follows_the_leaders_when_an_agent_stops(start_agent):
    """A tailing `rutomq consume` (no group) keeps going through a rolling restart: the agent it
    connected to first stops, the partitions' leaders move, it asks the other agent of its
    --brokers list and prints what is produced there."""
    a, b = start_agent(), start_agent()
    topic = unique_topic("ctl-roll")
    ctl(a, "topic", "create", topic, "-p", "4")
    ctl(a, "produce", topic, stdin="".join(f"before {i}\n" for i in range(8)))
    tail = subprocess.Popen([require_binary(), "consume", topic, "-b", f"{a.bootstrap},{b.bootstrap}",
                             "--timeout-ms", "60000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        got = [tail.stdout.readline() for _ in range(8)]
        assert sorted(got) == sorted(f"before {i}\n" for i in range(8)), got
        gone = json.loads(http_get(f"http://127.0.0.1:{a.http_port}/status")[1])["agent_id"]
        a.stop()

        # The remaining agent takes the stopped one's partitions once it sees it gone.
        def leaders():
            d = ctl(b, "topic", "describe", topic, "--format", "json", check=False)
            return {p["leader"] for p in json.loads(d.stdout)["partitions"]} if d.returncode == 0 else None

        wait_until(f"no partition led by the stopped agent {gone}",
                   lambda: (ls := leaders()) is not None and gone not in ls, 30,
                   diag=lambda: f"leaders {leaders()}", interval=0.5)
        ctl(b, "produce", topic, stdin="".join(f"after {i}\n" for i in range(8)))
        after = [tail.stdout.readline() for _ in range(8)]
        assert sorted(after) == sorted(f"after {i}\n" for i in range(8)), after
    finally:
        tail.terminate()
        assert tail.wait(timeout=30) == 0, tail.stderr.read()
