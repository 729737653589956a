# What this proves: named listeners and SASL authentication (issue 17, first
# part). One agent serves a PLAINTEXT and a SASL_PLAINTEXT listener; users are
# SCRAM credentials in PostgreSQL, made offline by `rutomq user add` or over the
# Kafka protocol by AlterUserScramCredentials.
#  - librdkafka (confluent-kafka; the newest and the promised 2.15.0),
#    kafka-python, Java kafka-clients 4.2.0, 3.9.2 and the newest, franz-go
#    1.21.5 and the newest log in with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512,
#    produce and consume (librdkafka also in a group); Metadata
#    on each listener names that listener's address (a client that bootstrapped
#    on the SASL port is sent back to it, not to the PLAINTEXT one);
#  - a wrong password and an unknown user are refused with
#    SASL_AUTHENTICATION_FAILED and the client's authentication error, the
#    agent counts them, logs the principal, and every refused connection is
#    closed (open connections return to where they were: no slot leaked);
#  - on the wire: before authenticating only ApiVersions and the SASL APIs are
#    answered (Metadata closes the connection); an unknown mechanism is
#    UNSUPPORTED_SASL_MECHANISM (33) with the enabled list; SaslHandshake on the
#    PLAINTEXT listener and SaslAuthenticate before a handshake are
#    ILLEGAL_SASL_STATE (34); a pre-authentication frame over 512 KiB closes
#    the connection; SaslHandshake v0 with a bare PLAIN token authenticates;
#    a forged SCRAM final message (another nonce) is refused;
#  - AlterUserScramCredentials (salted password computed by the client, as
#    kafka-configs.sh does) creates a user that can log in at once; Describe
#    shows mechanisms and iterations only; too few iterations (93), an unknown
#    mechanism (33), a mechanism twice (92) and deleting what is not there
#    (91) are refused per user; a deleted user can no longer log in; Apache
#    Kafka's kafka-configs.sh adds and deletes SCRAM users unchanged.
# How: a real agent with a real PostgreSQL, real clients over TCP, and the
# hand-written codec of kwire.py for the byte-level checks.

import base64
import functools
import hashlib
import hmac
import os
import struct
import subprocess
import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

import kwire
from conftest import require_binary
from kafkautil import (consume_confluent, create_topic, kafka_tool, make_records, proc_cpu_s, proc_status_kib,
                       produce_confluent,
                       run_with_promised_librdkafka, unique_topic, wait_until)

PASSWORD = "s3cret-pässword"


def add_user(agent, name, password, *extra):
    """`rutomq user add` against the agent's PostgreSQL (the agent may run)."""
    out = subprocess.run([require_binary(), "user", "add", name, "--password", password,
                          "--postgres-url", agent.db_url, *extra],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def sasl_conf(agent, mechanism, user, password):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


def metric(agent, name):
    return agent.metrics().get(name, 0)


def login_fails(agent, mechanism, user, password):
    """A librdkafka producer with these credentials: the authentication
    error it reports (fails if it reports none within 20 s)."""
    errors = []
    p = Producer({"bootstrap.servers": agent.sasl_bootstrap, **sasl_conf(agent, mechanism, user, password),
                  "error_cb": lambda e: errors.append(e), "reconnect.backoff.ms": 500,
                  "reconnect.backoff.max.ms": 1000})
    deadline = time.monotonic() + 20
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        assert time.monotonic() < deadline, f"no authentication error; got {errors}"
        p.poll(0.2)
    del p
    return next(str(e) for e in errors if e.code() == KafkaError._AUTHENTICATION)


@pytest.fixture
def sasl_agent(start_agent):
    a = start_agent(sasl=True)
    add_user(a, "alice", PASSWORD)
    add_user(a, "bob", "bobs-password", "--mechanism", "SCRAM-SHA-256")
    # The agent learns of users made while it runs from PostgreSQL's notice.
    return a


def test_clients_log_in_with_every_mechanism_and_bad_logins_are_refused(sasl_agent):
    a = sasl_agent
    topic = unique_topic("sasl")
    create_topic(a.bootstrap, topic, partitions=2)
    # Metadata names the address of the listener asked on.
    for bootstrap, conf, port in [(a.bootstrap, {}, a.port),
                                  (a.sasl_bootstrap, sasl_conf(a, "SCRAM-SHA-512", "alice", PASSWORD),
                                   a.sasl_port)]:
        md = AdminClient({"bootstrap.servers": bootstrap, **conf}).list_topics(timeout=20)
        assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", port)]
        assert topic in md.topics

    sent = 0
    for mechanism, user, password in [("PLAIN", "alice", PASSWORD),
                                      ("SCRAM-SHA-256", "alice", PASSWORD),
                                      ("SCRAM-SHA-512", "alice", PASSWORD),
                                      ("SCRAM-SHA-256", "bob", "bobs-password"),
                                      ("PLAIN", "bob", "bobs-password")]:
        recs = make_records(50, big=False)
        produce_confluent(a.sasl_bootstrap, topic, recs, timeout=30, **sasl_conf(a, mechanism, user, password))
        sent += len(recs)
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": a.sasl_bootstrap, **sasl_conf(a, "SCRAM-SHA-512", "alice", PASSWORD),
                  "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got = 0
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while got < sent:
            assert time.monotonic() < deadline, f"consumed {got} of {sent} over SASL"
            for m in c.consume(100, timeout=0.5):
                assert m.error() is None, m.error()
                got += 1
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=10)
        assert sum(tp.offset for tp in committed) == sent
    finally:
        c.close()

    # kafka-python, both SCRAM flavours and PLAIN.
    from kafka import KafkaConsumer, KafkaProducer
    for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]:
        kp = KafkaProducer(bootstrap_servers=a.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                           sasl_mechanism=mechanism, sasl_plain_username="alice",
                           sasl_plain_password=PASSWORD, acks="all")
        kp.send(topic, b"kafka-python " + mechanism.encode(), partition=0).get(timeout=30)
        kp.close()
    kc = KafkaConsumer(bootstrap_servers=a.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                       sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="bob",
                       sasl_plain_password="bobs-password", auto_offset_reset="earliest",
                       consumer_timeout_ms=10000)
    kc.assign([__import__("kafka").TopicPartition(topic, 0)])
    values = [m.value for m in kc]
    kc.close()
    assert sum(v.startswith(b"kafka-python ") for v in values) == 3

    # Refused logins: each counted, logged with the principal, closed.
    open_before = metric(a, "rutomq_connections_open")
    failures_before = metric(a, "rutomq_sasl_authentication_failures_total")
    msg = login_fails(a, "SCRAM-SHA-256", "alice", "wrong")
    assert "invalid credentials" in msg and "SCRAM-SHA-256" in msg, msg
    msg = login_fails(a, "SCRAM-SHA-512", "mallory", PASSWORD)
    assert "Authentication failed" in msg, msg
    msg = login_fails(a, "PLAIN", "alice", "wrong")
    assert "Invalid username or password" in msg, msg
    msg = login_fails(a, "SCRAM-SHA-512", "bob", "bobs-password")  # bob has no SHA-512 credential
    assert "Authentication failed" in msg, msg
    assert metric(a, "rutomq_sasl_authentication_failures_total") >= failures_before + 4
    wait_until("refused connections closed",
               lambda: metric(a, "rutomq_connections_open") <= open_before, timeout=10)
    log = open(a.log_path, encoding="utf-8", errors="replace").read()
    assert "authentication failed" in log and "User:alice" in log and "User:mallory" in log


def _sasl_handshake(conn, mechanism, version=1):
    cid = conn.next_cid()
    conn.send(kwire.frame(kwire.request_header(17, version, cid) + kwire.string(mechanism)))
    r = kwire.Reader(conn.recv_frame())
    assert r.i32() == cid
    code = r.i16()
    mechanisms = r.array(lambda rr: rr.string())
    return code, mechanisms


def _sasl_authenticate(conn, token, version=1):
    """(error code, message, auth bytes); the session lifetime (v1+) is
    left in the reader `_sasl_authenticate_v1` reads it from."""
    return _sasl_authenticate_reading(conn, token, version)[:3]


def _sasl_authenticate_reading(conn, token, version):
    cid = conn.next_cid()
    conn.send(kwire.frame(kwire.request_header(36, version, cid) + kwire.bytes_(token)))
    r = kwire.Reader(conn.recv_frame())
    assert r.i32() == cid
    code = r.i16()
    message = r.string()
    n = r.i32()
    auth = r.take(n) if n >= 0 else None
    return code, message, auth, r


def _metadata_v1(conn):
    cid = conn.next_cid()
    conn.send(kwire.frame(kwire.request_header(3, 1, cid) + kwire.i32(-1)))
    return kwire.Reader(conn.recv_frame())


def _scram_client_first(user, nonce):
    return f"n,,n={user},r={nonce}".encode()


@functools.lru_cache(maxsize=64)
def _salted_password(hash_name, password, salt_b64, iterations):
    return hashlib.pbkdf2_hmac(hash_name, password.encode(), base64.b64decode(salt_b64), iterations)


def _scram_final(mech, password, client_first_bare, server_first, nonce_override=None):
    h = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}[mech]
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    salted = _salted_password(h().name, password, attrs["s"], int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", h).digest()
    stored = h(client_key).digest()
    without_proof = f"c=biws,r={nonce_override or attrs['r']}"
    auth = f"{client_first_bare},{server_first},{without_proof}".encode()
    sig = hmac.new(stored, auth, h).digest()
    proof = bytes(x ^ y for x, y in zip(client_key, sig))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_the_wire_before_and_during_authentication(sasl_agent):
    a = sasl_agent
    host = "127.0.0.1"
    # ApiVersions is answered before authentication; Metadata closes.
    with kwire.KafkaConn(host, a.sasl_port) as c:
        assert c.api_versions(3).error_code == 0
        cid = c.next_cid()
        c.send(kwire.frame(kwire.request_header(3, 1, cid) + kwire.i32(-1)))
        kwire.wait_closed(c.sock)
    # An unknown mechanism: 33 with the enabled ones, then closed.
    with kwire.KafkaConn(host, a.sasl_port) as c:
        code, mechs = _sasl_handshake(c, "GSSAPI")
        assert code == 33 and set(mechs) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}, (code, mechs)
        kwire.wait_closed(c.sock)
    # SaslHandshake on the PLAINTEXT listener: 34, closed.
    with kwire.KafkaConn(host, a.port) as c:
        code, _ = _sasl_handshake(c, "PLAIN")
        assert code == 34
        kwire.wait_closed(c.sock)
    # SaslAuthenticate before any handshake: 34, closed.
    with kwire.KafkaConn(host, a.sasl_port) as c:
        code, _, _ = _sasl_authenticate(c, b"\0alice\0" + PASSWORD.encode())
        assert code == 34
        kwire.wait_closed(c.sock)
    # A frame over 512 KiB before authentication: closed unread.
    with kwire.KafkaConn(host, a.sasl_port) as c:
        c.send(struct.pack(">i", 600 << 10) + b"\0" * 1024)
        kwire.wait_closed(c.sock)
    # v1 PLAIN, then the connection is served; a second handshake is 34.
    with kwire.KafkaConn(host, a.sasl_port) as c:
        assert _sasl_handshake(c, "PLAIN")[0] == 0
        code, msg, _ = _sasl_authenticate(c, b"\0alice\0" + PASSWORD.encode())
        assert code == 0, msg
        r = _metadata_v1(c)
        assert r.i32() > 0  # brokers
        assert _sasl_handshake(c, "PLAIN")[0] == 34
    # v0 handshake: bare tokens. PLAIN answers an empty token, then requests work.
    with kwire.KafkaConn(host, a.sasl_port) as c:
        assert _sasl_handshake(c, "PLAIN", version=0)[0] == 0
        tok = b"\0alice\0" + PASSWORD.encode()
        c.send(kwire.i32(len(tok)) + tok)
        assert c.recv_exact(4) == b"\0\0\0\0"
        assert c.api_versions(3).error_code == 0
        _metadata_v1(c)
    # v0 with a wrong password: closed without an answer.
    with kwire.KafkaConn(host, a.sasl_port) as c:
        assert _sasl_handshake(c, "PLAIN", version=0)[0] == 0
        tok = b"\0alice\0nope"
        c.send(kwire.i32(len(tok)) + tok)
        assert kwire.wait_closed(c.sock).startswith(("eof (after 0", "reset (after 0"))
    # SCRAM-SHA-256 by hand: right proof accepted; a forged nonce refused.
    for forge in [False, True]:
        with kwire.KafkaConn(host, a.sasl_port) as c:
            assert _sasl_handshake(c, "SCRAM-SHA-256")[0] == 0
            first = _scram_client_first("alice", "rOprNGfwEbeRWgbNEkqO")
            code, msg, server_first = _sasl_authenticate(c, first)
            assert code == 0, msg
            server_first = server_first.decode()
            assert server_first.startswith("r=rOprNGfwEbeRWgbNEkqO")
            final = _scram_final("SCRAM-SHA-256", PASSWORD, first[3:].decode(), server_first,
                                 nonce_override="rOprNGfwEbeRWgbNEkqOforged" if forge else None)
            code, msg, server_final = _sasl_authenticate(c, final)
            if forge:
                assert code == 58 and "nonce" in msg, (code, msg)
                kwire.wait_closed(c.sock)
            else:
                assert code == 0, msg
                assert server_final.startswith(b"v=")
                _metadata_v1(c)
    assert metric(a, "rutomq_requests_before_authentication_total") >= 1


def _failed_login(port, mechanism, user, password):
    """One failed login on a new connection; the agent's error code."""
    with kwire.KafkaConn("127.0.0.1", port, timeout=30) as c:
        assert _sasl_handshake(c, mechanism)[0] == 0
        if mechanism == "PLAIN":
            code, _, _ = _sasl_authenticate(c, b"\0" + user.encode() + b"\0" + password.encode())
        else:
            first = _scram_client_first(user, base64.b64encode(os.urandom(12)).decode())
            code, msg, server_first = _sasl_authenticate(c, first)
            assert code == 0, msg
            final = _scram_final(mechanism, password, first[3:].decode(), server_first.decode())
            code, _, _ = _sasl_authenticate(c, final)
        kwire.wait_closed(c.sock, timeout=10)
        return code


def _pbkdf2_ms(hash_name, iterations):
    """CPU milliseconds of one PBKDF2 here (the yardstick for the agent's)."""
    started = time.process_time()
    for _ in range(20):
        hashlib.pbkdf2_hmac(hash_name, b"password", b"sixteen byte salt", iterations)
    return (time.process_time() - started) * 1000 / 20


def test_a_login_flood_costs_bounded_cpu_and_memory_and_logs_per_principal(sasl_agent):
    """10,000 failed logins from one address, 200 at a time: 8,000 SCRAM
    exchanges with a wrong password (the agent checks a proof with HMACs:
    well under one PBKDF2 each), then 2,000 PLAIN ones (one PBKDF2 of the
    user's 8192 rounds each, no more); every one answered 58 and closed,
    counted one by one, a few log lines per principal, the agent's memory
    bounded, and a right password still logs in at once."""
    from concurrent.futures import ThreadPoolExecutor
    a = sasl_agent
    failures_before = metric(a, "rutomq_sasl_authentication_failures_total")
    log_before = open(a.log_path, encoding="utf-8", errors="replace").read().count("authentication failed")
    rss0 = proc_status_kib(a.pid, "VmRSS")

    def flood(mechanism, user, n):
        """n failed logins; (their codes, agent CPU ms per login, wall s)."""
        cpu0, started = proc_cpu_s(a.pid), time.monotonic()
        with ThreadPoolExecutor(max_workers=200) as pool:
            codes = list(pool.map(lambda _: _failed_login(a.sasl_port, mechanism, user, "wrong-password"),
                                  range(n)))
        return codes, (proc_cpu_s(a.pid) - cpu0) * 1000 / n, time.monotonic() - started

    scram_codes, scram_ms, scram_s = flood("SCRAM-SHA-512", "alice", 8000)
    plain_codes, plain_ms, plain_s = flood("PLAIN", "bob", 2000)
    rss1 = proc_status_kib(a.pid, "VmRSS")
    codes = scram_codes + plain_codes
    assert set(codes) == {58}, {c: codes.count(c) for c in set(codes)}
    failures = metric(a, "rutomq_sasl_authentication_failures_total") - failures_before
    assert failures == len(codes), failures
    wait_until("refused connections closed", lambda: metric(a, "rutomq_connections_open") == 0, timeout=10)
    kdf_512, kdf_256 = _pbkdf2_ms("sha512", 4096), _pbkdf2_ms("sha256", 8192)
    summary = (f"8000 SCRAM failures in {scram_s:.1f} s, {scram_ms:.2f} ms of agent CPU each (one PBKDF2-SHA512 "
               f"of 4096 rounds here: {kdf_512:.2f} ms); 2000 PLAIN failures in {plain_s:.1f} s, {plain_ms:.2f} ms "
               f"each (PBKDF2-SHA256 of 8192 rounds: {kdf_256:.2f} ms); RSS {rss0 // 1024} -> {rss1 // 1024} MiB")
    print(summary)
    assert scram_ms < 0.5 * kdf_512, f"a SCRAM failure costs the agent a key derivation: {summary}"
    assert plain_ms < 3 * kdf_256, f"a PLAIN failure costs more than one key derivation: {summary}"
    assert rss1 - rss0 < 64 * 1024, summary
    log = open(a.log_path, encoding="utf-8", errors="replace").read()
    lines = [ln for ln in log.splitlines() if "authentication failed" in ln][log_before:]
    # Once per principal per minute per shard (2 shards, 2 principals),
    # with the count of the ones not logged.
    assert 2 <= len(lines) <= 8, (len(lines), lines[-10:])
    assert any("User:alice" in ln for ln in lines) and any("User:bob" in ln for ln in lines)
    # Still serving.
    with kwire.KafkaConn("127.0.0.1", a.sasl_port) as c:
        assert _sasl_handshake(c, "PLAIN")[0] == 0
        code, msg, _ = _sasl_authenticate(c, b"\0alice\0" + PASSWORD.encode())
        assert code == 0, msg
        assert _metadata_v1(c).i32() > 0


# ---- AlterUserScramCredentials / DescribeUserScramCredentials (flexible, v0)

def _compact_bytes(b):
    return kwire.uvarint(len(b) + 1) + b


def _alter_scram(conn, deletions=(), upsertions=()):
    T = kwire.EMPTY_TAGGED_FIELDS
    body = kwire.uvarint(len(deletions) + 1) + b"".join(
        kwire.compact_string(n) + kwire.i8(m) + T for n, m in deletions)
    body += kwire.uvarint(len(upsertions) + 1) + b"".join(
        kwire.compact_string(n) + kwire.i8(m) + kwire.i32(it) + _compact_bytes(salt) + _compact_bytes(sp) + T
        for n, m, it, salt, sp in upsertions)
    body += T
    cid = conn.next_cid()
    conn.send(kwire.frame(kwire.request_header(51, 0, cid, flexible=True) + body))
    r = kwire.Reader(conn.recv_frame())
    assert r.i32() == cid
    r.tagged_fields()
    r.i32()  # throttle
    out = {}

    def result(rr):
        user = rr.compact_string()
        code = rr.i16()
        msg = rr.compact_string()
        rr.tagged_fields()
        out[user] = (code, msg)
    r.compact_array(result)
    return out


def _describe_scram(conn, users):
    T = kwire.EMPTY_TAGGED_FIELDS
    body = (kwire.uvarint(0) if users is None else
            kwire.uvarint(len(users) + 1) + b"".join(kwire.compact_string(u) + T for u in users)) + T
    cid = conn.next_cid()
    conn.send(kwire.frame(kwire.request_header(50, 0, cid, flexible=True) + body))
    r = kwire.Reader(conn.recv_frame())
    assert r.i32() == cid
    r.tagged_fields()
    r.i32()
    assert r.i16() == 0
    r.compact_string()
    out = {}

    def info(rr):
        m, it = rr.i8(), rr.i32()
        rr.tagged_fields()
        return (m, it)

    def result(rr):
        user, code, _msg = rr.compact_string(), rr.i16(), rr.compact_string()
        infos = rr.compact_array(info)
        rr.tagged_fields()
        out[user] = (code, sorted(infos))
    r.compact_array(result)
    return out


def _salted(mech, password, salt, iterations):
    h = {1: "sha256", 2: "sha512"}[mech]
    return hashlib.pbkdf2_hmac(h, password.encode(), salt, iterations)


def test_scram_credentials_over_the_kafka_protocol(sasl_agent):
    a = sasl_agent
    salt = os.urandom(16)
    with kwire.KafkaConn("127.0.0.1", a.port) as c:
        res = _alter_scram(c, upsertions=[
            ("carol", 2, 4096, salt, _salted(2, "carols-pw", salt, 4096)),
            ("dave", 1, 100, salt, _salted(1, "x", salt, 100)),
            ("erin", 7, 4096, salt, b"x" * 32),
            ("frank", 1, 4096, salt, b"x" * 32), ("frank", 1, 4096, salt, b"y" * 32),
        ], deletions=[("ghost", 1)])
        assert res["carol"] == (0, None), res
        assert res["dave"][0] == 93 and "iterations" in res["dave"][1]
        assert res["erin"][0] == 33
        assert res["frank"][0] == 92
        assert res["ghost"][0] == 91
        d = _describe_scram(c, ["carol", "alice", "nobody"])
        assert d["carol"] == (0, [(2, 4096)])
        assert d["alice"] == (0, [(1, 8192), (2, 8192)])
        assert d["nobody"][0] == 91
        everyone = _describe_scram(c, None)
        assert {"alice", "bob", "carol"} <= set(everyone)
        assert "frank" not in everyone and "dave" not in everyone

    # carol logs in at once with the password the client salted.
    recs = make_records(5, big=False)
    topic = unique_topic("scram-admin")
    produce_confluent(a.sasl_bootstrap, topic, recs, timeout=30,
                      **sasl_conf(a, "SCRAM-SHA-512", "carol", "carols-pw"))
    with kwire.KafkaConn("127.0.0.1", a.port) as c:
        assert _alter_scram(c, deletions=[("carol", 2)])["carol"] == (0, None)
    login_fails(a, "SCRAM-SHA-512", "carol", "carols-pw")


# ---- Java kafka-clients (the promised 4.2.0 and 3.9.2) ----------------------

from test_java_go import REPO_ROOT, _tail, roundtrip_clients  # noqa: E402,F401 (fixture)

JAAS = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
        "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
        "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


def java_roundtrip(run_sh, client, bootstrap, props, records, prefix, pace_ms=0):
    """RoundTrip.java of `client` with these client properties, sending and
    reading back each taking at least `pace_ms`: (its last line, the
    process)."""
    topic = unique_topic(f"{prefix}-{client.replace('.', '')}")
    cmd = ["bash", run_sh, client, "--bootstrap", bootstrap, "--topic", topic, "--partitions", "2",
           "--records", str(records), "--pace-ms", str(pace_ms)]
    for k, v in props.items():
        cmd += ["--client-property", f"{k}={v}"]
    res = subprocess.run(cmd, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         timeout=180)
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    return (lines[-1] if lines else "<no output>"), res


def _java_roundtrip(run_sh, client, agent, mechanism, password, records=500, pace_ms=0):
    jaas = f'{JAAS[mechanism]} required username="alice" password="{password}";'
    props = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism, "sasl.jaas.config": jaas}
    return java_roundtrip(run_sh, client, agent.sasl_bootstrap, props, records, f"sasl-{mechanism.lower()}",
                          pace_ms)


@pytest.mark.parametrize("client", ["java-4", "java-3.9", "java-newest"])
def test_java_clients_log_in_with_scram_and_plain(client, sasl_agent, request):
    run_sh = request.getfixturevalue("roundtrip_clients")
    for mechanism in ["SCRAM-SHA-512", "PLAIN"]:
        last, res = _java_roundtrip(run_sh, client, sasl_agent, mechanism, PASSWORD)
        assert last == "RESULT ok produced=500 consumed=500" and res.returncode == 0, (
            f"{client} {mechanism}: {last}\n--- stdout ---\n{res.stdout[-4000:]}\n"
            f"--- stderr ---\n{_tail(res.stderr, 80)}")
    # A wrong password: the client fails with its authentication error.
    last, res = _java_roundtrip(run_sh, client, sasl_agent, "SCRAM-SHA-256", "wrong", records=1)
    assert res.returncode != 0 and "RESULT fail" in last, last
    assert "SaslAuthenticationException" in res.stdout + res.stderr, _tail(res.stdout + res.stderr, 40)


def test_kafka_configs_tool_manages_scram_users(sasl_agent, request):
    """Apache Kafka's kafka-configs.sh (kafka.admin.ConfigCommand 4.2.0),
    unchanged: add a user's SCRAM credentials, log in with them, delete one
    mechanism, and Kafka's error for deleting it twice; --describe shows
    the mechanisms and iterations (it asks DescribeClientQuotas too)."""
    run_sh = request.getfixturevalue("roundtrip_clients")
    a = sasl_agent

    def configs(*args, ok=True):
        res = kafka_tool(run_sh, "kafka.admin.ConfigCommand", "--bootstrap-server", a.bootstrap,
                         "--entity-type", "users", "--entity-name", "zed", *args, ok=ok)
        return res.stdout + res.stderr

    out = configs("--alter", "--add-config",
                  "SCRAM-SHA-512=[iterations=8192,password=zed-pw],SCRAM-SHA-256=[password=zed-pw]")
    assert "Completed updating config for user zed" in out, out
    topic = unique_topic("configs-tool")
    for mechanism in ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]:
        produce_confluent(a.sasl_bootstrap, topic, make_records(3, big=False), timeout=30,
                          **sasl_conf(a, mechanism, "zed", "zed-pw"))
    with kwire.KafkaConn("127.0.0.1", a.port) as c:
        assert _describe_scram(c, ["zed"])["zed"] == (0, [(1, 4096), (2, 8192)])
    out = configs("--describe")
    assert "SCRAM credential configs for user-principal 'zed' are SCRAM-SHA-256=iterations=4096, " \
           "SCRAM-SHA-512=iterations=8192" in out, out
    configs("--alter", "--delete-config", "SCRAM-SHA-512")
    login_fails(a, "SCRAM-SHA-512", "zed", "zed-pw")
    produce_confluent(a.sasl_bootstrap, topic, make_records(3, big=False), timeout=30,
                      **sasl_conf(a, "SCRAM-SHA-256", "zed", "zed-pw"))
    out = configs("--alter", "--delete-config", "SCRAM-SHA-512", ok=False)
    assert "ResourceNotFoundException" in out, out[-2000:]


# ---- franz-go (the promised 1.21.5 and the newest) ----------------------------

@pytest.mark.parametrize("client", ["go-1.21.5", "go"])
def test_franz_go_logs_in_with_scram_and_plain(client, sasl_agent, request):
    run_sh = request.getfixturevalue("roundtrip_clients")

    def roundtrip(mechanism, password, records):
        topic = unique_topic(f"sasl-{client.replace('.', '')}-{mechanism.lower()}")
        env = {**os.environ, "ROUNDTRIP_SASL": f"{mechanism}:alice:{password}"}
        res = subprocess.run(["bash", run_sh, client, "--bootstrap", sasl_agent.sasl_bootstrap,
                              "--topic", topic, "--partitions", "2", "--records", str(records)],
                             cwd=REPO_ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=180, env=env)
        lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
        return (lines[-1] if lines else "<no output>"), res

    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]:
        last, res = roundtrip(mechanism, PASSWORD, 500)
        assert last == "RESULT ok produced=500 consumed=500" and res.returncode == 0, (
            f"{client} {mechanism}: {last}\n--- stderr ---\n{_tail(res.stderr, 60)}")
    last, res = roundtrip("SCRAM-SHA-512", "wrong", 1)
    assert res.returncode != 0 and "RESULT fail" in last, last
    assert "SASL_AUTHENTICATION_FAILED" in res.stdout + res.stderr or "invalid credentials" in res.stdout + res.stderr, \
        _tail(res.stdout + res.stderr, 30)


# ---- librdkafka 2.15.0 (the promised version; the tests above use the newest) --

def librdkafka_sasl_checks(sasl_bootstrap, password):
    """Each mechanism produces and reads back; a wrong password is refused."""
    from confluent_kafka import KafkaError, Producer
    for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]:
        conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                "sasl.username": "alice", "sasl.password": password}
        topic = unique_topic("sasl-215")
        recs = produce_confluent(sasl_bootstrap, topic, make_records(20, big=False), timeout=30, partition=0,
                                 **conf)
        got = consume_confluent(sasl_bootstrap, topic, {0: len(recs)}, timeout=30, **conf)
        assert [r.value for r in got[0]] == [r.value for r in recs]
    errors = []
    p = Producer({"bootstrap.servers": sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": "wrong",
                  "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        assert time.monotonic() < deadline, errors
        p.poll(0.2)


def test_promised_librdkafka_logs_in(sasl_agent):
    run_with_promised_librdkafka("test_security", "librdkafka_sasl_checks", sasl_agent.sasl_bootstrap, PASSWORD)


# ---- re-authentication (KIP-368, connections.max.reauth.ms) --------------------

def _sasl_authenticate_v1(conn, token):
    """SaslAuthenticate v1: (error code, message, auth bytes, session lifetime ms)."""
    code, message, auth, r = _sasl_authenticate_reading(conn, token, 1)
    return code, message, auth, r.i64()


def test_sessions_expire_and_clients_reauthenticate(start_agent):
    a = start_agent(sasl=True, extra_args=["--connections-max-reauth-ms", "1500"])
    add_user(a, "alice", PASSWORD)
    add_user(a, "bob", "bobs-password")
    plain = lambda user, pw: b"\0" + user.encode() + b"\0" + pw.encode()  # noqa: E731
    # By hand: the lifetime is told; a renewal before expiry keeps the
    # connection; after expiry anything but SASL closes it.
    with kwire.KafkaConn("127.0.0.1", a.sasl_port) as c:
        assert _sasl_handshake(c, "PLAIN")[0] == 0
        code, msg, _, lifetime = _sasl_authenticate_v1(c, plain("alice", PASSWORD))
        assert (code, lifetime) == (0, 1500), (code, msg, lifetime)
        _metadata_v1(c)
        assert _sasl_handshake(c, "PLAIN")[0] == 0
        assert _sasl_authenticate_v1(c, plain("alice", PASSWORD))[0] == 0
        _metadata_v1(c)
        time.sleep(1.7)
        expired_before = metric(a, "rutomq_sasl_sessions_expired_total")
        cid = c.next_cid()
        c.send(kwire.frame(kwire.request_header(3, 1, cid) + kwire.i32(-1)))
        kwire.wait_closed(c.sock)
    assert metric(a, "rutomq_sasl_sessions_expired_total") == expired_before + 1
    # Re-authenticating as someone else is refused.
    with kwire.KafkaConn("127.0.0.1", a.sasl_port) as c:
        assert _sasl_handshake(c, "PLAIN")[0] == 0
        assert _sasl_authenticate_v1(c, plain("alice", PASSWORD))[0] == 0
        assert _sasl_handshake(c, "PLAIN")[0] == 0
        code, msg, _, _ = _sasl_authenticate_v1(c, plain("bob", "bobs-password"))
        assert code == 58 and "Cannot change principals" in msg, (code, msg)
        kwire.wait_closed(c.sock)

    # librdkafka re-authenticates on its own: a producer runs across several
    # session lifetimes without an error, then everything reads back.
    from confluent_kafka import Producer
    topic = unique_topic("reauth")
    create_topic(a.bootstrap, topic, partitions=1)
    reauth_before = metric(a, "rutomq_sasl_reauthentications_total")
    errors, delivered = [], []
    p = Producer({"bootstrap.servers": a.sasl_bootstrap, **sasl_conf(a, "SCRAM-SHA-512", "alice", PASSWORD),
                  "error_cb": errors.append, "linger.ms": 5})
    deadline = time.monotonic() + 6
    i = 0
    while time.monotonic() < deadline:
        p.produce(topic, b"r%d" % i, partition=0, on_delivery=lambda err, msg: delivered.append(err))
        i += 1
        p.poll(0.01)
    assert p.flush(20) == 0
    assert errors == [] and all(e is None for e in delivered) and len(delivered) == i, (errors, delivered[:3])
    assert metric(a, "rutomq_sasl_reauthentications_total") >= reauth_before + 2
    got = consume_confluent(a.sasl_bootstrap, topic, {0: i}, timeout=30,
                            **sasl_conf(a, "SCRAM-SHA-256", "bob", "bobs-password"))
    assert [r.value for r in got[0]] == [b"r%d" % j for j in range(i)]


def test_java_client_reauthenticates(start_agent, request):
    """Java 4.2.0 across sessions of 1.5 s: RoundTrip's producer and
    consumer, each kept sending for 4 s (paced, so the broker's speed does
    not decide how many sessions a connection outlives), re-authenticate
    (KIP-368) before their sessions expire and lose nothing."""
    run_sh = request.getfixturevalue("roundtrip_clients")
    a = start_agent(sasl=True, extra_args=["--connections-max-reauth-ms", "1500"])
    add_user(a, "alice", PASSWORD)
    before = metric(a, "rutomq_sasl_reauthentications_total")
    expired_before = metric(a, "rutomq_sasl_sessions_expired_total")
    last, res = _java_roundtrip(run_sh, "java-4", a, "SCRAM-SHA-512", PASSWORD, records=20000, pace_ms=4000)
    assert last == "RESULT ok produced=20000 consumed=20000" and res.returncode == 0, (
        f"{last}\n--- stderr ---\n{_tail(res.stderr, 60)}")
    # 4 s of producing, then 4 s of reading, on sessions of 1.5 s: at least
    # two renewals each; none let expire (that would close the connection).
    renewed = metric(a, "rutomq_sasl_reauthentications_total") - before
    assert renewed >= 4, f"{renewed} re-authentications\n{res.stdout[-2000:]}"
    assert metric(a, "rutomq_sasl_sessions_expired_total") == expired_before


# ---- ACL APIs without an authorizer ---------------------------------------------

def test_acl_tool_is_told_security_is_disabled(agent, request):
    """No authorizer is configured (no --authorizer): Apache Kafka's
    kafka-acls.sh (org.apache.kafka.tools.AclCommand 4.2.0) gets what a
    Kafka broker without authorizer.class.name answers, for --list, --add
    and --remove alike."""
    run_sh = request.getfixturevalue("roundtrip_clients")
    for args in (["--list"],
                 ["--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t"],
                 ["--remove", "--force", "--topic", "t"]):
        res = kafka_tool(run_sh, "org.apache.kafka.tools.AclCommand", "--bootstrap-server", agent.bootstrap,
                         *args, ok=None)
        out = res.stdout + res.stderr
        assert "SecurityDisabledException: No Authorizer is configured on the broker" in out, (args, out[-2000:])
