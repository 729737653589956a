# What this proves: TLS listeners (issue 17). One agent serves PLAINTEXT,
# SASL_PLAINTEXT, SSL and SASL_SSL listeners with a certificate from a test CA
# (tests/e2e/certs.py makes them) and asks for client certificates
# (ssl.client.auth=requested):
#  - librdkafka (newest and the promised 2.15.0), kafka-python, Java
#    kafka-clients 4.2.0, 3.9.2 and the newest, franz-go 1.21.5 and the newest
#    produce and consume over SSL (with and without a client certificate) and
#    SASL_SSL (SCRAM and PLAIN inside TLS; Java 4.2.0 and 3.9.2 and both
#    franz-go with each of PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512); Metadata
#    on the SSL port names the SSL port;
#  - refused, each closed at once, counted and logged, and no connection slot
#    left behind: an expired client certificate, a client that does not trust
#    the agent's CA, plaintext Kafka to the TLS port, TLS to the plaintext port,
#    a wrong SASL password inside TLS;
#  - with ssl.client.auth=required and a mapping rule
#    (ssl.principal.mapping.rules), a certificate whose subject the rule maps
#    connects, one it does not (and a client without a certificate, and one
#    from another CA) is refused, the subject named in the agent's log;
#  - the certificate is reloaded when its files change and on SIGHUP, without
#    dropping an open connection; a broken new file keeps the old
#    certificate (counted as a failed reload).
# How: real agents with a real PostgreSQL, real clients over TCP, Python's ssl
# module for the handshake-level checks.

import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import warnings

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

import kwire
from certs import Certs
from kafkautil import (consume_confluent, create_topic, make_records, produce_confluent,
                       run_with_promised_librdkafka, unique_topic, wait_until)
from test_java_go import REPO_ROOT, _tail, roundtrip_clients  # noqa: F401 (fixture)
from test_security import JAAS, PASSWORD, add_user, java_roundtrip, metric


@pytest.fixture
def certs(tmp_path):
    return Certs(tmp_path / "certs")


@pytest.fixture
def tls_agent(start_agent, certs):
    a = start_agent(sasl=True, tls=("requested", certs))
    add_user(a, "alice", PASSWORD)
    a.certs = certs
    return a


def ssl_conf(certs, client=None, ca=None):
    conf = {"security.protocol": "SSL", "ssl.ca.location": ca or certs.ca}
    if client:
        cert, key = client
        conf.update({"ssl.certificate.location": cert, "ssl.key.location": key})
    return conf


def sasl_ssl_conf(certs, mechanism, user="alice", password=PASSWORD):
    return {"security.protocol": "SASL_SSL", "ssl.ca.location": certs.ca, "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


def connection_fails(bootstrap, conf, timeout=20):
    """A librdkafka producer with `conf` that never gets a working
    connection: the errors it reported (fails if one delivers)."""
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, **conf, "error_cb": errors.append,
                  "reconnect.backoff.ms": 500, "reconnect.backoff.max.ms": 1000,
                  "message.timeout.ms": 4000})
    delivered = []
    p.produce("never-created", b"x", on_delivery=lambda err, msg: delivered.append(err))
    deadline = time.monotonic() + timeout
    while not delivered:
        assert time.monotonic() < deadline, f"no delivery report; errors {errors}"
        p.poll(0.2)
    assert delivered[0] is not None, f"delivered over {conf}"
    del p
    return errors


def server_subject(port, certs):
    """The subject CN the agent's TLS port presents now (a new handshake)."""
    ctx = ssl.create_default_context(cafile=certs.ca)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
            subject = dict(x[0] for x in t.getpeercert()["subject"])
            return subject["commonName"]


def log_text(agent):
    return open(agent.log_path, encoding="utf-8", errors="replace").read()


def test_librdkafka_and_kafka_python_over_ssl_and_sasl_ssl(tls_agent):
    a, c = tls_agent, tls_agent.certs
    topic = unique_topic("tls")
    create_topic(a.bootstrap, topic, partitions=2)
    md = AdminClient({"bootstrap.servers": a.ssl_bootstrap, **ssl_conf(c)}).list_topics(timeout=20)
    assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", a.ssl_port)]
    assert topic in md.topics

    sent = []
    for bootstrap, conf in [(a.ssl_bootstrap, ssl_conf(c)),
                            (a.ssl_bootstrap, ssl_conf(c, c.client("alice"))),
                            (a.sasl_ssl_bootstrap, sasl_ssl_conf(c, "SCRAM-SHA-512")),
                            (a.sasl_ssl_bootstrap, sasl_ssl_conf(c, "PLAIN"))]:
        sent += produce_confluent(bootstrap, topic, make_records(200), timeout=30, partition=0, **conf)
    # Large records too: frames of many TLS records each way.
    sent += produce_confluent(a.ssl_bootstrap, topic, make_records(20, big=True), timeout=60, partition=0,
                              **ssl_conf(c, c.client("alice")))
    got = consume_confluent(a.ssl_bootstrap, topic, {0: len(sent)}, timeout=60,
                            **ssl_conf(c, c.client("alice")))
    assert [r.value for r in got[0]] == [r.value for r in sent]
    got = consume_confluent(a.sasl_ssl_bootstrap, topic, {0: len(sent)}, timeout=60,
                            **sasl_ssl_conf(c, "SCRAM-SHA-256"))
    assert len(got[0]) == len(sent)

    # kafka-python: SSL, then SASL_SSL.
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    kp = KafkaProducer(bootstrap_servers=a.ssl_bootstrap, security_protocol="SSL", ssl_cafile=c.ca,
                       ssl_certfile=c.client("alice")[0], ssl_keyfile=c.client("alice")[1], acks="all")
    kp.send(topic, b"kafka-python SSL", partition=1).get(timeout=30)
    kp.close()
    kp = KafkaProducer(bootstrap_servers=a.sasl_ssl_bootstrap, security_protocol="SASL_SSL", ssl_cafile=c.ca,
                       sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
                       sasl_plain_password=PASSWORD, acks="all")
    kp.send(topic, b"kafka-python SASL_SSL", partition=1).get(timeout=30)
    kp.close()
    kc = KafkaConsumer(bootstrap_servers=a.ssl_bootstrap, security_protocol="SSL", ssl_cafile=c.ca,
                       auto_offset_reset="earliest", consumer_timeout_ms=10000)
    kc.assign([TopicPartition(topic, 1)])
    assert [m.value for m in kc] == [b"kafka-python SSL", b"kafka-python SASL_SSL"]
    kc.close()
    assert metric(a, "rutomq_tls_handshakes_total") >= 8

    # A response is not held in the TLS write buffer behind a later one
    # still being worked on: ApiVersions, then a Fetch long-polling the end
    # of a partition, sent together; ApiVersions is answered at once.
    ctx = ssl.create_default_context(cafile=c.ca)
    with socket.create_connection(("127.0.0.1", a.ssl_port), timeout=30) as s, \
            ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
        conn = kwire.KafkaConn.wrap(t, timeout=30)
        _, end, _ = kwire.fetch_v4(conn, topic, 1, 0)
        wait_ms = 8000
        fetch = (kwire.i32(-1) + kwire.i32(wait_ms) + kwire.i32(1) + kwire.i32(1 << 20) + kwire.i8(0)
                 + kwire.i32(1) + kwire.string(topic) + kwire.i32(1)
                 + kwire.i32(1) + kwire.i64(end) + kwire.i32(1 << 20))
        started = time.monotonic()
        conn.send(kwire.api_versions_request(3, 100) + kwire.frame(kwire.request_header(1, 4, 101) + fetch))
        assert kwire.parse_api_versions_response(conn.recv_frame(), 3).correlation_id == 100
        answered = time.monotonic() - started
        assert kwire.Reader(conn.recv_frame()).i32() == 101
        polled = time.monotonic() - started
        assert polled >= wait_ms / 2000, f"the Fetch did not long-poll ({polled:.1f} s)"
        assert answered < wait_ms / 2000, f"ApiVersions' answer waited {answered:.1f} s for the Fetch"


def test_bad_tls_connections_are_refused_and_leave_nothing_open(tls_agent):
    a, c = tls_agent, tls_agent.certs
    open_before = metric(a, "rutomq_connections_open")
    failed_before = metric(a, "rutomq_tls_handshake_failures_total")

    # An expired client certificate: the agent refuses the handshake.
    connection_fails(a.ssl_bootstrap, ssl_conf(c, c.client("old", expired=True)))
    assert metric(a, "rutomq_tls_handshake_failures_total") > failed_before
    wait_until("the refusal logged", lambda: "certificate expired" in log_text(a), timeout=10)
    # A client that does not trust the agent's CA refuses it.
    errors = connection_fails(a.ssl_bootstrap, ssl_conf(c, ca=c.other_ca))
    assert any("certificate verify failed" in str(e) or e.code() == KafkaError._SSL for e in errors), errors
    # Plaintext Kafka to the TLS port, TLS to the plaintext port.
    connection_fails(a.ssl_bootstrap, {"security.protocol": "PLAINTEXT"})
    connection_fails(a.bootstrap, ssl_conf(c))
    # A wrong password inside TLS.
    errors = connection_fails(a.sasl_ssl_bootstrap, sasl_ssl_conf(c, "SCRAM-SHA-256", password="wrong"))
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors

    # By hand: an ApiVersions request on the TLS port is not a ClientHello;
    # the agent closes at once (no answer, no slot kept).
    with kwire.KafkaConn("127.0.0.1", a.ssl_port) as conn:
        conn.send(kwire.api_versions_request(3, 1))
        kwire.wait_closed(conn.sock, timeout=5)
    # TLS 1.2 is served (ApiVersions answered over it); a handshake that
    # offers only TLS 1.1 is refused by the agent with an alert (not by the
    # local OpenSSL, which is told to allow it).
    ctx = ssl.create_default_context(cafile=c.ca)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    with socket.create_connection(("127.0.0.1", a.ssl_port), timeout=10) as s:
        with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
            assert t.version() == "TLSv1.2"
            assert kwire.KafkaConn.wrap(t).api_versions(3).error_code == 0
    ctx = ssl.create_default_context(cafile=c.ca)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # TLS 1.1 is meant to be old
        ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    ctx.set_ciphers("ALL:@SECLEVEL=0")
    with socket.create_connection(("127.0.0.1", a.ssl_port), timeout=10) as s:
        with pytest.raises(ssl.SSLError, match="alert"):
            ctx.wrap_socket(s, server_hostname="127.0.0.1")
    wait_until("refused connections closed",
               lambda: metric(a, "rutomq_connections_open") <= open_before, timeout=15)
    assert "TLS handshake failed" in log_text(a)
    assert a.is_running()


def test_required_client_certificates_and_principal_mapping(start_agent, certs):
    a = start_agent(tls=("required", certs), extra_args=[
        "--ssl-principal-mapping-rules", "RULE:^CN=([^,]*),OU=eng,O=rutomq$/$1/L"])
    topic = unique_topic("mtls")
    create_topic(a.bootstrap, topic, partitions=1)
    recs = produce_confluent(a.ssl_bootstrap, topic, make_records(50), timeout=30, partition=0,
                             **ssl_conf(certs, certs.client("Alice")))
    got = consume_confluent(a.ssl_bootstrap, topic, {0: len(recs)}, timeout=30,
                            **ssl_conf(certs, certs.client("Alice")))
    assert len(got[0]) == len(recs)
    # No client certificate; one whose subject no rule maps (OU=ops); one
    # signed by a CA the agent does not trust: each refused.
    open_before = metric(a, "rutomq_connections_open")
    connection_fails(a.ssl_bootstrap, ssl_conf(certs))
    connection_fails(a.ssl_bootstrap, ssl_conf(certs, certs.client("carol", ou="ops")))
    wait_until("the unmapped subject logged",
               lambda: "no --ssl-principal-mapping-rules rule matches" in log_text(a)
               and "CN=carol,OU=ops,O=rutomq" in log_text(a), timeout=10)
    ctx = ssl.create_default_context(cafile=certs.ca)
    ctx.load_cert_chain(*certs.client("mallory", other_ca=True))
    with socket.create_connection(("127.0.0.1", a.ssl_port), timeout=10) as s:
        # TLS 1.3: the client's certificate is judged after the client's
        # side of the handshake; the refusal is the alert read next, where a
        # served connection would answer the ApiVersions request.
        with pytest.raises(ssl.SSLError, match="unknown ca"):
            with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
                t.sendall(kwire.api_versions_request(3, 1))
                got = t.recv(4)
                pytest.fail(f"the agent answered a client of an unknown CA: {got!r}")
    wait_until("refused connections closed",
               lambda: metric(a, "rutomq_connections_open") <= open_before, timeout=15)
    assert metric(a, "rutomq_tls_handshake_failures_total") >= 3


def test_certificate_reload_on_change_and_sighup(start_agent, certs):
    a = start_agent(tls=("none", certs))
    assert server_subject(a.ssl_port, certs) == "localhost"
    topic = unique_topic("reload")
    create_topic(a.bootstrap, topic, partitions=1)
    # A producer whose connection stays open across the reloads.
    p = Producer({"bootstrap.servers": a.ssl_bootstrap, **ssl_conf(certs), "linger.ms": 0})
    delivered = []

    def send(i):
        p.produce(topic, b"r%d" % i, partition=0, on_delivery=lambda err, msg: delivered.append(err))
        p.flush(20)
        assert delivered[-1] is None, delivered[-1]

    send(0)
    accepted = metric(a, "rutomq_connections_accepted_total")

    from cryptography import x509
    from cryptography.x509.oid import NameOID

    def reissue(cn, **key):
        cert, key = certs.issue("next", x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]), server=True,
                                **key)
        # Replace both files by rename, as a certificate manager does.
        for src, dst in [(key, certs.server_key), (cert, certs.server_cert)]:
            shutil.copy(src, dst + ".tmp")
            os.replace(dst + ".tmp", dst)

    # The new keys in the other formats the agent reads: SEC1 (EC), then
    # PKCS#1 (RSA); the first key was PKCS#8.
    reissue("localhost-2", key_format="traditional")
    wait_until("the changed files reloaded",
               lambda: metric(a, "rutomq_tls_certificate_reloads_total") >= 1, timeout=20)
    assert server_subject(a.ssl_port, certs) == "localhost-2"
    send(1)
    # SIGHUP reloads at once, even with no change seen yet.
    reissue("localhost-3", rsa_key=True, key_format="traditional")
    os.kill(a.pid, signal.SIGHUP)
    wait_until("reloaded on SIGHUP", lambda: metric(a, "rutomq_tls_certificate_reloads_total") >= 2, timeout=10)
    assert server_subject(a.ssl_port, certs) == "localhost-3"
    send(2)
    # A broken file: the old certificate stays.
    with open(certs.server_cert, "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    os.kill(a.pid, signal.SIGHUP)
    wait_until("the failed reload counted",
               lambda: metric(a, "rutomq_tls_certificate_reload_failures_total") >= 1, timeout=10)
    assert server_subject(a.ssl_port, certs) == "localhost-3"
    send(3)
    assert "cannot reload the TLS certificate" in log_text(a)
    # The producer kept its one connection (the server_subject probes
    # opened the others) and lost nothing.
    assert metric(a, "rutomq_connections_accepted_total") == accepted + 3
    del p
    got = consume_confluent(a.ssl_bootstrap, topic, {0: 4}, timeout=30, **ssl_conf(certs))
    assert [r.value for r in got[0]] == [b"r0", b"r1", b"r2", b"r3"]
    assert a.is_running()


# ---- Java kafka-clients, franz-go, the promised librdkafka ---------------------

def _java(run_sh, client, bootstrap, props, records):
    return java_roundtrip(run_sh, client, bootstrap, props, records, "tls")


@pytest.mark.parametrize("client", ["java-4", "java-3.9", "java-newest"])
def test_java_clients_over_ssl_and_sasl_ssl(client, tls_agent, request):
    run_sh = request.getfixturevalue("roundtrip_clients")
    a, c = tls_agent, tls_agent.certs
    trust = {"ssl.truststore.type": "PEM", "ssl.truststore.location": c.ca}
    # The promised versions log in with every mechanism over TLS, the
    # newest with one.
    mechanisms = ["SCRAM-SHA-512"] if client == "java-newest" else ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]
    for bootstrap, props in [
            (a.ssl_bootstrap, {"security.protocol": "SSL", **trust, "ssl.keystore.type": "PEM",
                               "ssl.keystore.location": c.client_pem("alice")})] + [
            (a.sasl_ssl_bootstrap, {"security.protocol": "SASL_SSL", **trust, "sasl.mechanism": m,
                                    "sasl.jaas.config": f'{JAAS[m]} required username="alice" '
                                                        f'password="{PASSWORD}";'}) for m in mechanisms]:
        last, res = _java(run_sh, client, bootstrap, props, 500)
        assert last == "RESULT ok produced=500 consumed=500" and res.returncode == 0, (
            f"{client} {props['security.protocol']} {props.get('sasl.mechanism', '')}: {last}\n"
            f"--- stdout ---\n{res.stdout[-3000:]}\n--- stderr ---\n{_tail(res.stderr, 60)}")
    # An expired client certificate: the client fails with its SSL error.
    last, res = _java(run_sh, client, a.ssl_bootstrap,
                      {"security.protocol": "SSL", **trust, "ssl.keystore.type": "PEM",
                       "ssl.keystore.location": c.client_pem("old", expired=True)}, 1)
    assert res.returncode != 0 and "RESULT fail" in last, last
    assert "SSLHandshakeException" in res.stdout + res.stderr or "SslAuthenticationException" in \
        res.stdout + res.stderr, _tail(res.stdout + res.stderr, 40)


@pytest.mark.parametrize("client", ["go-1.21.5", "go"])
def test_franz_go_over_ssl_and_sasl_ssl(client, tls_agent, request):
    run_sh = request.getfixturevalue("roundtrip_clients")
    a, c = tls_agent, tls_agent.certs
    cert, key = c.client("alice")
    for bootstrap, extra in [(a.ssl_bootstrap, {"ROUNDTRIP_TLS_CERT": cert, "ROUNDTRIP_TLS_KEY": key})] + [
            (a.sasl_ssl_bootstrap, {"ROUNDTRIP_SASL": f"{m}:alice:{PASSWORD}"})
            for m in ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]]:
        topic = unique_topic(f"tls-{client.replace('.', '')}")
        env = {**os.environ, "ROUNDTRIP_TLS_CA": c.ca, **extra}
        res = subprocess.run(["bash", run_sh, client, "--bootstrap", bootstrap, "--topic", topic,
                              "--partitions", "2", "--records", "500"],
                             cwd=REPO_ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=180, env=env)
        lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
        last = lines[-1] if lines else "<no output>"
        assert last == "RESULT ok produced=500 consumed=500" and res.returncode == 0, (
            f"{client} {bootstrap}: {last}\n--- stderr ---\n{_tail(res.stderr, 60)}")


def librdkafka_tls_checks(ssl_bootstrap, sasl_ssl_bootstrap, certs_dir):
    """SSL with a client certificate and SASL_SSL with SCRAM: produce and
    read back."""
    c = Certs(certs_dir, existing=True)
    for bootstrap, conf in [(ssl_bootstrap, ssl_conf(c, c.client("alice"))),
                            (sasl_ssl_bootstrap, sasl_ssl_conf(c, "SCRAM-SHA-512"))]:
        topic = unique_topic("tls-215")
        recs = produce_confluent(bootstrap, topic, make_records(50), timeout=30, partition=0, **conf)
        got = consume_confluent(bootstrap, topic, {0: len(recs)}, timeout=30, **conf)
        assert [r.value for r in got[0]] == [r.value for r in recs]


def test_promised_librdkafka_over_tls(tls_agent):
    a = tls_agent
    a.certs.client("alice")
    run_with_promised_librdkafka("test_tls", "librdkafka_tls_checks", a.ssl_bootstrap,
                                 a.sasl_ssl_bootstrap, a.certs.dir)
