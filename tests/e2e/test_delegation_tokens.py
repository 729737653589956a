# What this proves: delegation tokens work as Kafka's do, driven by Kafka's
# own kafka-delegation-tokens tool (kafka-tools 4.2.0): a user logged in
# with SCRAM creates a token naming a renewer; the token logs in (SCRAM
# with tokenauth=true: the Java client as kafka-topics) as its owner, and
# may not ask for tokens itself; the owner and the renewer renew it, a third
# user may not; describe lists it with its renewer; once expired it logs in
# no more. A PLAINTEXT connection may not ask for tokens; an agent without
# a secret key has tokens off.
# How: one agent with a SASL listener and --delegation-token-secret-key,
# the tool through tests/clients/run.sh.

import pytest

from kafkautil import kafka_tool
from test_java_go import roundtrip_clients  # noqa: F401 (fixture)
from test_security import add_user

pytestmark = pytest.mark.timeout(600)

TOKENS = "org.apache.kafka.tools.DelegationTokenCommand"
# ASCII: Java reads .properties files as ISO-8859-1.
PASSWORD = "tokens-s3cret"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def props(tmp_path, name, user, password, token=False):
    extra = ' tokenauth="true"' if token else ""
    path = tmp_path / f"{name}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                    f'sasl.jaas.config={SCRAM} required username="{user}" password="{password}"{extra};\n')
    return str(path)


def test_delegation_tokens_with_kafkas_tool(start_agent, request, tmp_path):
    run_sh = request.getfixturevalue("roundtrip_clients")
    a = start_agent(sasl=True, extra_args=["--delegation-token-secret-key", "cluster-wide-secret"])
    for user in ["alice", "bob", "carol"]:
        add_user(a, user, PASSWORD)
    alice = props(tmp_path, "alice", "alice", PASSWORD)
    bob = props(tmp_path, "bob", "bob", PASSWORD)
    carol = props(tmp_path, "carol", "carol", PASSWORD)

    def tokens(cfg, *args, ok=True, boot=None):
        res = kafka_tool(run_sh, TOKENS, "--bootstrap-server", boot or a.sasl_bootstrap,
                         "--command-config", cfg, *args, ok=ok)
        return res.stdout + res.stderr

    out = tokens(alice, "--create", "--max-life-time-period", "-1", "--renewer-principal", "User:bob")
    row = next(ln for ln in out.splitlines() if "User:alice" in ln and not ln.startswith("TOKENID"))
    token_id, hmac = row.split()[0], row.split()[1]
    assert len(token_id) >= 16 and len(hmac) >= 40, out

    # The token logs in as alice; it may not ask for tokens itself.
    as_token = props(tmp_path, "token", token_id, hmac, token=True)
    kafka_tool(run_sh, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", a.sasl_bootstrap,
               "--command-config", as_token, "--list")
    out = tokens(as_token, "--create", "--max-life-time-period", "-1", ok=False)
    assert "DelegationTokenDisabledException" in out or "not allowed" in out.lower(), out[-2000:]

    # (Without --owner-principal the tool asks for no owner: none listed,
    # as Apache Kafka answers it.)
    out = tokens(alice, "--describe", "--owner-principal", "User:alice")
    assert token_id in out and "User:bob" in out, out
    assert "Total number of tokens : 0" in tokens(alice, "--describe")

    # Renewals: the owner and the renewer, not a third user.
    out = tokens(alice, "--renew", "--hmac", hmac, "--renew-time-period", "600000")
    assert "Completed renew operation" in out, out
    tokens(bob, "--renew", "--hmac", hmac, "--renew-time-period", "600000")
    out = tokens(carol, "--renew", "--hmac", hmac, "--renew-time-period", "600000", ok=False)
    assert "DelegationTokenOwnerMismatchException" in out, out[-2000:]

    # Expired at once: it logs in no more.
    out = tokens(alice, "--expire", "--hmac", hmac, "--expiry-time-period", "-1")
    assert "Completed expire operation" in out, out
    assert token_id not in tokens(alice, "--describe", "--owner-principal", "User:alice")
    res = kafka_tool(run_sh, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", a.sasl_bootstrap,
                     "--command-config", as_token, "--list", ok=False, timeout=120)
    assert "SaslAuthenticationException" in res.stdout + res.stderr or "Authentication failed" in res.stdout + res.stderr, \
        (res.stdout + res.stderr)[-2000:]

    # Not over PLAINTEXT.
    plain = tmp_path / "plain.properties"
    plain.write_text("security.protocol=PLAINTEXT\n")
    out = tokens(str(plain), "--describe", ok=False, boot=a.bootstrap)
    assert "DelegationToken" in out, out[-2000:]


def test_tokens_are_off_without_a_secret_key(start_agent, request, tmp_path):
    run_sh = request.getfixturevalue("roundtrip_clients")
    a = start_agent(sasl=True)
    add_user(a, "alice", PASSWORD)
    res = kafka_tool(run_sh, TOKENS, "--bootstrap-server", a.sasl_bootstrap, "--command-config",
                     props(tmp_path, "alice", "alice", PASSWORD), "--describe", ok=False)
    assert "DelegationTokenDisabledException" in res.stdout + res.stderr, (res.stdout + res.stderr)[-2000:]
