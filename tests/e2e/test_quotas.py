# What this proves: client quotas (issue 17) with real clients against a real
# agent and PostgreSQL.
#  - Apache Kafka's kafka-configs.sh (ConfigCommand 4.2.0), unchanged, adds,
#    describes and deletes quotas of users, clients, user+client pairs,
#    defaults and IPs, and shows the broker's refusal of a bad value;
#  - a librdkafka producer over its user's producer_byte_rate (SASL/SCRAM) is
#    held to the quota (its delivered bytes over the run stay within what the
#    quota window allows) and is told so (librdkafka's throttle statistics),
#    while another user's producer on the same agent at the same time gets
#    every byte it offers, unthrottled;
#  - a librdkafka consumer over its client id's consumer_byte_rate reads a
#    backlog at the quota while another client id reads all of it at once;
#  - request_percentage: a client spending more shard time than its share is
#    answered with throttle_time_ms and its next request waits (the
#    connection is muted, even for a client that ignores the field);
#  - connection_creation_rate per IP: past the rate, new connections from
#    that IP are closed unanswered after the throttle time (at most 1 s),
#    while connections from another address are served, and the agent counts
#    them.
# How: real agents (PLAINTEXT, and SASL_PLAINTEXT for user quotas), quotas set
# with kafka-configs.sh or AlterClientQuotas on the wire (kwire), the agent's
# /metrics for what it did.

import json
import socket
import statistics
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

import kwire
from kafkautil import create_topic, kafka_tool, unique_topic
from test_java_go import roundtrip_clients  # noqa: F401 (fixture)
from test_security import add_user, metric, sasl_conf

KIB = 1024


def set_quota(agent, entity, **values):
    """AlterClientQuotas on the wire: `values` set (None removes)."""
    results = kwire.alter_client_quotas(agent.bootstrap, [(entity, list(values.items()))])
    assert all(code == 0 for code, _, _ in results), results


def test_kafka_configs_tool_manages_quotas(agent, request):
    run_sh = request.getfixturevalue("roundtrip_clients")

    def configs(*args, ok=True):
        res = kafka_tool(run_sh, "kafka.admin.ConfigCommand", "--bootstrap-server", agent.bootstrap, *args, ok=ok)
        return res.stdout + res.stderr

    out = configs("--alter", "--entity-type", "users", "--entity-name", "alice",
                  "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
    assert "Completed updating config for user alice" in out, out
    configs("--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
            "--entity-name", "app1", "--add-config", "request_percentage=50")
    configs("--alter", "--entity-type", "clients", "--entity-default", "--add-config", "consumer_byte_rate=1000")
    configs("--alter", "--entity-type", "ips", "--entity-name", "10.1.2.3", "--add-config",
            "connection_creation_rate=20")

    out = configs("--describe", "--entity-type", "users", "--entity-name", "alice")
    assert "Quota configs for user-principal 'alice' are" in out, out
    assert "producer_byte_rate=1048576.0" in out and "consumer_byte_rate=2097152.0" in out, out
    out = configs("--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                  "--entity-name", "app1")
    assert "request_percentage=50.0" in out, out
    out = configs("--describe", "--entity-type", "clients", "--entity-default")
    assert "Quota configs for the default client-id are consumer_byte_rate=1000.0" in out, out
    out = configs("--describe", "--entity-type", "ips", "--entity-name", "10.1.2.3")
    assert "connection_creation_rate=20.0" in out, out
    # Every user's quotas (and SCRAM credentials, none here).
    out = configs("--describe", "--entity-type", "users")
    assert "user-principal 'alice'" in out, out

    configs("--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config", "producer_byte_rate")
    out = configs("--describe", "--entity-type", "users", "--entity-name", "alice")
    assert "producer_byte_rate" not in out and "consumer_byte_rate=2097152.0" in out, out

    # The broker's own refusal, as Kafka's tool prints it.
    out = configs("--alter", "--entity-type", "clients", "--entity-name", "app2", "--add-config",
                  "producer_byte_rate=1.5", ok=False)
    assert "producer_byte_rate cannot be a fractional value" in out, out[-2000:]
    out = configs("--alter", "--entity-type", "ips", "--entity-name", "10.1.2.3", "--add-config",
                  "connection_creation_rate=0", ok=False)
    assert "Quota connection_creation_rate must be greater than 0" in out, out[-2000:]

    # A change made on the wire shows in the tool.
    results = kwire.alter_client_quotas(agent.bootstrap, [([("user", "alice")], [("consumer_byte_rate", None)])])
    assert results[0][0] == 0, results
    out = configs("--describe", "--entity-type", "users", "--entity-name", "alice")
    assert "consumer_byte_rate" not in out, out


class Pump:
    """A librdkafka producer sending `value_bytes` records as fast as it may
    (or at `rate` bytes/s) until stopped; counts delivered bytes and keeps
    librdkafka's largest reported throttle time."""

    def __init__(self, conf, topic, value_bytes=16 * KIB, rate=None):
        self.delivered = 0
        self.errors = []
        self.throttle_max_ms = 0
        self.stop = threading.Event()
        self.value = b"x" * value_bytes
        self.topic = topic
        self.rate = rate
        self.p = Producer({**conf, "linger.ms": 5, "acks": "all", "queue.buffering.max.kbytes": 2048,
                           "statistics.interval.ms": 500, "stats_cb": self._stats})
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _stats(self, raw):
        for b in json.loads(raw).get("brokers", {}).values():
            self.throttle_max_ms = max(self.throttle_max_ms, b.get("throttle", {}).get("max", 0))

    def _done(self, err, msg):
        if err is not None:
            self.errors.append(str(err))
        else:
            self.delivered += len(msg.value())

    def _run(self):
        started, sent = time.monotonic(), 0
        while not self.stop.is_set():
            if self.rate is not None and sent > self.rate * (time.monotonic() - started):
                self.p.poll(0.005)
                continue
            try:
                self.p.produce(self.topic, value=self.value, on_delivery=self._done)
                sent += len(self.value)
            except BufferError:
                self.p.poll(0.05)
                continue
            self.p.poll(0)
        self.p.flush(60)
        # Dropped here: its callbacks refer back to this object.
        self.p = None


def test_a_producer_over_its_quota_is_throttled_and_others_are_not(start_agent):
    a = start_agent(sasl=True)
    add_user(a, "slow", "slow-pw")
    add_user(a, "fast", "fast-pw")
    topic = unique_topic("quota-produce")
    create_topic(a.bootstrap, topic, partitions=2)
    quota = 512 * KIB
    offered = 4 * 1024 * KIB
    set_quota(a, [("user", "slow")], producer_byte_rate=quota)
    slow = Pump({"bootstrap.servers": a.sasl_bootstrap, **sasl_conf(a, "SCRAM-SHA-512", "slow", "slow-pw")}, topic)
    fast = Pump({"bootstrap.servers": a.sasl_bootstrap, **sasl_conf(a, "SCRAM-SHA-512", "fast", "fast-pw")}, topic,
                rate=offered)
    started = time.monotonic()
    for p in (slow, fast):
        p.thread.start()
    time.sleep(16)
    elapsed = time.monotonic() - started
    slow_total, fast_total = slow.delivered, fast.delivered
    for p in (slow, fast):
        p.stop.set()
    for p in (slow, fast):
        p.thread.join(120)
        assert not p.errors, p.errors[:5]
    # Kafka's rate is measured over 10 to 11 s of samples: a new client may
    # spend a window's worth at once, and what it sends is held to the
    # quota over any window (each window may end with one more request of
    # up to 1 MiB per partition, 2 MiB here, before the client is muted;
    # two windows in the run). So over the run it delivers at most the
    # elapsed time's worth, one window's and those requests, and at least
    # about the elapsed time's worth.
    allowed = quota * (elapsed + 11) + 4096 * KIB
    summary = (f"slow {slow_total / KIB:.0f} KiB in {elapsed:.1f} s (allowed {allowed / KIB:.0f}, quota "
               f"{quota * elapsed / KIB:.0f}), throttle max {slow.throttle_max_ms} ms; fast "
               f"{fast_total / KIB:.0f} KiB (offered {offered * elapsed / KIB:.0f})")
    print(summary)
    assert slow_total <= allowed, summary
    assert slow_total >= quota * elapsed * 0.5, f"throttled far below its quota: {summary}"
    assert slow.throttle_max_ms > 0, f"librdkafka was never told to back off: {summary}"
    # The other user is not slowed: it got what it offered, unthrottled.
    assert fast.throttle_max_ms == 0, summary
    assert fast_total >= 0.85 * offered * elapsed, f"the other user was slowed too: {summary}"
    assert metric(a, "rutomq_quota_produce_throttles_total") > 0
    assert metric(a, "rutomq_quota_produce_throttle_ms_total") > 0


def test_a_consumer_over_its_quota_reads_at_its_rate(agent):
    a = agent
    topic = unique_topic("quota-fetch")
    create_topic(a.bootstrap, topic, partitions=1)
    value = b"y" * (16 * KIB)
    p = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
    total = 8 * 1024 * KIB
    for _ in range(total // len(value)):
        while True:
            try:
                p.produce(topic, value=value, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0
    quota = 256 * KIB
    set_quota(a, [("client-id", "slow-reader")], consumer_byte_rate=quota)

    def read(client_id, seconds):
        c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "quota-" + client_id, "client.id": client_id,
                      "enable.auto.commit": False, "fetch.wait.max.ms": 100, "auto.offset.reset": "earliest"})
        c.assign([TopicPartition(topic, 0, 0)])
        got, started = 0, time.monotonic()
        while time.monotonic() - started < seconds and got < total:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got += len(m.value())
        elapsed = time.monotonic() - started
        c.close()
        return got, elapsed

    fast_got, fast_s = read("fast-reader", 30)
    assert fast_got == total, (fast_got, total)
    slow_got, slow_s = read("slow-reader", 8)
    allowed = quota * (max(slow_s, 10) + 1) + 1024 * KIB
    summary = f"slow {slow_got / KIB:.0f} KiB in {slow_s:.1f} s (allowed {allowed / KIB:.0f}); fast all in {fast_s:.1f} s"
    print(summary)
    assert slow_got <= allowed, summary
    assert slow_got >= quota * 3, f"throttled far below its quota: {summary}"
    assert fast_s < slow_s, summary
    assert metric(a, "rutomq_quota_fetch_throttles_total") > 0


def test_request_quota_throttles_and_mutes_a_busy_client(agent):
    a = agent
    # A tenth of a percent of one shard: 10 ms over the 10 s window.
    set_quota(a, [("client-id", "busy")], request_percentage=0.1)
    with kwire.KafkaConn.to(a.bootstrap) as busy, kwire.KafkaConn.to(a.bootstrap) as idle:
        throttled = None
        deadline = time.monotonic() + 30
        while throttled is None:
            assert time.monotonic() < deadline, "never throttled"
            r = busy.api_versions(client_id="busy")
            if r.throttle_time_ms > 0:
                throttled = r.throttle_time_ms
        # A request-rate throttle is at most one sample window.
        assert 0 < throttled <= 1000, throttled
        # The connection is muted: the next request waits (this client
        # ignores the field and sends at once).
        t = time.monotonic()
        busy.api_versions(client_id="busy")
        waited_ms = (time.monotonic() - t) * 1000
        assert waited_ms >= throttled * 0.8, (waited_ms, throttled)
        # Another client is not throttled.
        for _ in range(20):
            assert idle.api_versions(client_id="idle").throttle_time_ms == 0
    assert metric(a, "rutomq_quota_request_throttles_total") > 0


def _connect_from(source_ip, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.bind((source_ip, 0))
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    return s


def _served(sock):
    """Whether the agent answers ApiVersions on `sock`, and how long it took."""
    t = time.monotonic()
    try:
        ok = kwire.KafkaConn.wrap(sock, timeout=5).api_versions().error_code == 0
    except (OSError, kwire.ConnectionClosed):
        ok = False
    return ok, time.monotonic() - t


def test_connection_creation_rate_per_ip(agent):
    a = agent
    rate = 5
    set_quota(a, [("ip", "127.0.0.3")], connection_creation_rate=rate)
    # Kafka's rate is measured over at least 10 s: the first 10 s worth
    # (50) are served at once, then new connections from the address are
    # refused (a few more pass as the window grows within each second).
    results = []
    while sum(1 for ok, _ in results[-5:] if not ok) < 5:
        assert len(results) < 70, results
        s = _connect_from("127.0.0.3", a.port)
        results.append(_served(s))
        s.close()
    served = sum(1 for ok, _ in results if ok)
    refused = [t for ok, t in results if not ok]
    summary = f"{served} served, {len(refused)} refused: {[ok for ok, _ in results]}"
    assert all(ok for ok, _ in results[:50]), summary
    assert served <= 58, summary
    # A refused connection is closed unanswered after the throttle time
    # (200 ms to 1 s here), not at once, and at most 1 s.
    assert statistics.median(refused) >= 0.1, (summary, refused)
    assert max(refused) <= 1.5, (summary, max(refused))
    # Another address is not limited.
    for _ in range(60):
        s = _connect_from("127.0.0.4", a.port)
        ok, _ = _served(s)
        s.close()
        assert ok
    assert metric(a, "rutomq_connections_throttled_total") >= len(refused), summary
    # The quota removed, the address is served again.
    set_quota(a, [("ip", "127.0.0.3")], connection_creation_rate=None)
    s = _connect_from("127.0.0.3", a.port)
    assert _served(s)[0]
    s.close()
