# What this proves: the ACL authorizer (--authorizer acl, Kafka's
# StandardAuthorizer model) on a SASL agent.
#  - Apache Kafka's kafka-acls.sh (AclCommand 4.2.0), unchanged, adds literal,
#    prefixed, group and DENY bindings as a super user, lists them (all, one
#    literal topic, every pattern that MATCHes a topic, one group), removes
#    exactly the selected ones; a principal without ALTER/DESCRIBE on the
#    cluster (alice over SASL, User:ANONYMOUS over PLAINTEXT) gets Kafka's
#    ClusterAuthorizationException for --list and --add;
#  - deny by default: alice without ACLs cannot produce (29 per partition on
#    the wire), fetch (29), list offsets (29), init an idempotent producer
#    (31) or a transactional one (53), find a group (30) or transaction (53)
#    coordinator, consume in a group, see topics (an all-topics Metadata
#    lists none, a named one is 29), create (29), delete or describe the
#    configs of topics, or see groups; refusals are counted in
#    rutomq_authorization_denials_total and logged as "authorization denied"
#    with the principal, once a minute per principal, operation and resource
#    (per shard);
#  - one ACL allows exactly that: WRITE on a topic lets alice produce to it
#    (idempotently too: WRITE on a topic stands for IDEMPOTENT_WRITE) and see
#    it (implied DESCRIBE), but not read it or write another topic;
#    auto-creation and CreateTopics need CREATE on the topic as well as
#    DESCRIBE; READ on the topic and on a group lets her consume and commit in
#    that group, see and describe it and fetch its offsets, but not join
#    another group, nor one she may only DESCRIBE, nor commit offsets of a
#    topic she may not READ, delete the group (DELETE), add partitions
#    (ALTER) or delete records (DELETE); removing the WRITE ACL with
#    kafka-acls.sh refuses her next produce at once;
#  - a transactional producer needs WRITE on its transactional id (53 before
#    kafka-acls.sh --transactional-id grants it); then an aborted and a
#    committed transaction, and a read_committed consumer sees just the
#    committed records; offsets sent to a transaction need READ on their
#    group (30 otherwise); another transactional id stays closed;
#  - super users (';'-separated) may do anything, even on a topic that DENYs
#    everything to User:*, while alice may not create or delete ACLs (31) nor
#    describe ACLs or SCRAM users (31); with --allow-everyone-if-no-acl-found
#    a resource no ACL matches is open to anyone (alice, User:ANONYMOUS), one
#    a literal or prefixed ACL names for someone else is not;
#  - authorized_operations: Metadata v10 and DescribeCluster v0 on the wire,
#    and librdkafka's describe_topics/describe_cluster, report READ|DESCRIBE
#    for a topic alice may READ, all but DELETE for a prefixed ALL with a
#    literal DENY DELETE, every topic and cluster operation for a super user,
#    nothing on the cluster for alice until ALTER and ALTER_CONFIGS on it
#    (which imply DESCRIBE and DESCRIBE_CONFIGS), and Kafka's "not asked"
#    value when not asked.
# How: real agents (PLAINTEXT + SASL_PLAINTEXT listeners, SCRAM users made
# with `rutomq user add`) with a real PostgreSQL; confluent-kafka clients,
# kafka-acls.sh through tests/clients/run.sh tools, and hand-encoded requests
# (kwire.py) where the exact error code on the wire is the point (and where
# librdkafka cannot be used: it drops DescribeAcls' error code and aborts on
# a refused DescribeUserScramCredentials).

import re
import time
import uuid

import pytest
from confluent_kafka import (Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer,
                             TopicCollection, TopicPartition as TopicPartitionOffset)
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ConfigResource, NewPartitions, NewTopic, OffsetSpec,
                                   ResourcePatternType, ResourceType)

import kwire
from kafkautil import kafka_tool, unique_topic, wait_until
from test_java_go import roundtrip_clients  # noqa: F401 (fixture)
from test_security import _sasl_authenticate, _sasl_handshake, add_user, sasl_conf

ADMIN_PW = "admin-password"  # ASCII: Java reads .properties files as ISO-8859-1
ALICE_PW = "alice-password"
OPS_PW = "ops-password"
PASSWORDS = {"admin": ADMIN_PW, "alice": ALICE_PW, "ops": OPS_PW}

# Kafka's AclOperation codes (bit n of authorized_operations is code n).
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
TOPIC_OPS = [READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS]
CLUSTER_OPS = [CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE]

TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
NOT_ASKED = -2**31  # authorized_operations when not requested


def bits(ops):
    return sum(1 << o for o in ops)


def start_acl_agent(start_agent, super_users="User:admin", extra=()):
    a = start_agent(sasl=True, extra_args=["--authorizer", "acl", "--super-users", super_users, *extra])
    for user, pw in PASSWORDS.items():
        add_user(a, user, pw)
    return a


@pytest.fixture
def acl_agent(start_agent):
    return start_acl_agent(start_agent)


def client_conf(a, user, **extra):
    """librdkafka settings for `user` on the SASL listener (SCRAM-SHA-512)."""
    return {"bootstrap.servers": a.sasl_bootstrap, **sasl_conf(a, "SCRAM-SHA-512", user, PASSWORDS[user]),
            **extra}


def admin_client(a, user):
    return AdminClient(client_conf(a, user, **{"socket.timeout.ms": 10000}))


def future_error(fut, timeout=30):
    """The KafkaError a future fails with (None when it succeeds)."""
    try:
        fut.result(timeout=timeout)
        return None
    except KafkaException as e:
        return e.args[0]


def create_topics(a, user, *topics, partitions=1):
    adm = admin_client(a, user)  # kept: a destroyed client fails its futures with _DESTROY
    fs = adm.create_topics([NewTopic(t, num_partitions=partitions, replication_factor=1) for t in topics],
                           operation_timeout=30, request_timeout=30)
    return {t: future_error(f) for t, f in fs.items()}


def grant(a, *bindings, user="admin"):
    """CreateAcls as `user`: bindings (resource type, name, pattern, principal,
    operation[, permission])."""
    adm = admin_client(a, user)
    acls = [AclBinding(rt, name, pt, principal, "*", op, perm[0] if perm else AclPermissionType.ALLOW)
            for rt, name, pt, principal, op, *perm in bindings]
    fs = adm.create_acls(acls, request_timeout=30)
    errors = [future_error(f) for f in fs.values()]
    assert errors == [None] * len(acls), errors


def topic_acl(name, op, principal="User:alice", pattern=ResourcePatternType.LITERAL):
    return (ResourceType.TOPIC, name, pattern, principal, op)


def group_acl(name, op, principal="User:alice"):
    return (ResourceType.GROUP, name, ResourcePatternType.LITERAL, principal, op)


def produce_one(a, user, topic, value=b"v", **extra):
    """One record through a librdkafka producer as `user`: its delivery error
    (None when delivered)."""
    conf = client_conf(a, user, **{"enable.idempotence": False, "acks": "all", "message.timeout.ms": 15000,
                                   **extra})
    p = Producer(conf)
    got = []
    p.produce(topic, value, partition=0, on_delivery=lambda err, msg: got.append(err))
    assert p.flush(30) == 0, f"produce as {user} to {topic} not reported"
    return got[0]


def consume_in_group(a, user, topic, group, want=None, timeout=30):
    """Subscribe as `user` in `group`: ("ok", values) after `want` records
    (committed), or ("error", KafkaError) for the first consumer error."""
    c = Consumer(client_conf(a, user, **{"group.id": group, "auto.offset.reset": "earliest",
                                         "enable.auto.commit": False}))
    got = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while want is None or len(got) < want:
            assert time.monotonic() < deadline, f"{user} in {group}: {len(got)} of {want} records"
            for m in c.consume(100, timeout=0.5):
                if m.error() is not None:
                    return "error", m.error()
                got.append(m.value())
        c.commit(asynchronous=False)
        return "ok", got
    finally:
        c.close()


# ---- raw requests ---------------------------------------------------------------

def sasl_conn(a, user):
    c = kwire.KafkaConn.to(a.sasl_bootstrap)
    assert _sasl_handshake(c, "PLAIN")[0] == 0
    code, msg, _ = _sasl_authenticate(c, b"\0" + user.encode() + b"\0" + PASSWORDS[user].encode())
    assert code == 0, msg
    return c


def raw_produce(c, topic, partitions=(0,)):
    """Produce v8 of one record to each partition: {partition: error code}."""
    batch = kwire.encode_record_batch([(None, b"raw", [])])
    res = c.produce(8, {topic: {p: batch for p in partitions}})
    return {p: r.error_code for p, r in res[topic].items()}


def raw_list_offsets(c, topic, partition=0):
    """ListOffsets v1 of the latest offset: (error code, offset)."""
    cid = c.next_cid()
    body = kwire.i32(-1) + kwire.i32(1) + kwire.string(topic) + kwire.i32(1) + kwire.i32(partition) + kwire.i64(-1)
    c.send(kwire.frame(kwire.request_header(2, 1, cid) + body))
    r = kwire.Reader(c.recv_frame())
    assert r.i32() == cid
    [(name, [(idx, err, _ts, offset)])] = r.array(
        lambda rr: (rr.string(), rr.array(lambda x: (x.i32(), x.i16(), x.i64(), x.i64()))))
    r.expect_end("ListOffsets v1 response")
    assert (name, idx) == (topic, partition)
    return err, offset


def raw_find_coordinator(c, key, key_type):
    """FindCoordinator v1 (key_type 0 group, 1 transactional id): error code."""
    cid = c.next_cid()
    c.send(kwire.frame(kwire.request_header(10, 1, cid) + kwire.string(key) + kwire.i8(key_type)))
    r = kwire.Reader(c.recv_frame())
    assert r.i32() == cid
    r.i32()
    return r.i16()


def raw_init_producer_id(c, transactional_id=None):
    """InitProducerId v1: (error code, producer id)."""
    cid = c.next_cid()
    c.send(kwire.frame(kwire.request_header(22, 1, cid) + kwire.string(transactional_id) + kwire.i32(60000)))
    r = kwire.Reader(c.recv_frame())
    assert r.i32() == cid
    r.i32()
    code, pid = r.i16(), r.i64()
    r.i16()
    return code, pid


def raw_metadata_v10(c, topics, include_cluster_ops=True, include_topic_ops=True, auto_create=False):
    """Metadata v10 (flexible) naming `topics` (None: all):
    ({name: (error code, topic_authorized_operations)}, cluster_authorized_operations)."""
    T = kwire.EMPTY_TAGGED_FIELDS
    body = (kwire.uvarint(0) if topics is None else
            kwire.uvarint(len(topics) + 1) + b"".join(b"\0" * 16 + kwire.compact_string(t) + T for t in topics))
    body += kwire.i8(int(auto_create)) + kwire.i8(int(include_cluster_ops)) + kwire.i8(int(include_topic_ops)) + T
    cid = c.next_cid()
    c.send(kwire.frame(kwire.request_header(3, 10, cid, flexible=True) + body))
    r = kwire.Reader(c.recv_frame())
    assert r.i32() == cid
    r.tagged_fields()
    r.i32()  # throttle

    def broker(rr):
        rr.i32(), rr.compact_string(), rr.i32(), rr.compact_string()
        rr.tagged_fields()

    def partition(rr):
        rr.i16(), rr.i32(), rr.i32(), rr.i32()
        for _ in range(3):
            rr.compact_array(lambda x: x.i32())
        rr.tagged_fields()

    def topic(rr):
        err, name = rr.i16(), rr.compact_string()
        rr.take(16)  # topic id
        rr.i8()  # is_internal
        rr.compact_array(partition)
        ops = rr.i32()
        rr.tagged_fields()
        return name, (err, ops)

    r.compact_array(broker)
    r.compact_string()  # cluster id
    r.i32()  # controller
    out = dict(r.compact_array(topic) or [])
    cluster_ops = r.i32()
    r.tagged_fields()
    r.expect_end("Metadata v10 response")
    return out, cluster_ops


def raw_describe_cluster(c, include_ops=True):
    """DescribeCluster v0 (flexible): (error code, cluster_authorized_operations)."""
    cid = c.next_cid()
    c.send(kwire.frame(kwire.request_header(60, 0, cid, flexible=True) + kwire.i8(int(include_ops))
                       + kwire.EMPTY_TAGGED_FIELDS))
    r = kwire.Reader(c.recv_frame())
    assert r.i32() == cid
    r.tagged_fields()
    r.i32()
    err = r.i16()
    r.compact_string()  # message
    r.compact_string()  # cluster id
    r.i32()  # controller

    def broker(rr):
        rr.i32(), rr.compact_string(), rr.i32(), rr.compact_string()
        rr.tagged_fields()

    r.compact_array(broker)
    ops = r.i32()
    r.tagged_fields()
    r.expect_end("DescribeCluster v0 response")
    return err, ops


def raw_describe_acls(c):
    """DescribeAcls v1 of every binding: (error code, number of resources)."""
    cid = c.next_cid()
    body = (kwire.i8(1) + kwire.string(None) + kwire.i8(1) + kwire.string(None) + kwire.string(None)
            + kwire.i8(1) + kwire.i8(1))  # ANY everything
    c.send(kwire.frame(kwire.request_header(29, 1, cid) + body))
    r = kwire.Reader(c.recv_frame())
    assert r.i32() == cid
    r.i32()
    code, _msg = r.i16(), r.string()
    resources = r.array(lambda rr: (rr.i8(), rr.string(), rr.i8(), rr.array(
        lambda x: (x.string(), x.string(), x.i8(), x.i8()))))
    r.expect_end("DescribeAcls v1 response")
    return code, len(resources)


def raw_describe_scram(c):
    """DescribeUserScramCredentials v0 of every user: the request's error code."""
    cid = c.next_cid()
    c.send(kwire.frame(kwire.request_header(50, 0, cid, flexible=True) + kwire.uvarint(0)
                       + kwire.EMPTY_TAGGED_FIELDS))
    r = kwire.Reader(c.recv_frame())
    assert r.i32() == cid
    r.tagged_fields()
    r.i32()
    return r.i16()


# ---- kafka-acls.sh ------------------------------------------------------------------

def command_config(tmp_path, user):
    path = tmp_path / f"{user}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\n"
                    "sasl.mechanism=SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{user}" password="{PASSWORDS[user]}";\n', encoding="utf-8")
    return str(path)


def kafka_acls(run_sh, a, tmp_path, user, *args, ok=True):
    """kafka-acls.sh as `user` over SASL (None: User:ANONYMOUS on the
    PLAINTEXT listener); its output."""
    conn = (["--bootstrap-server", a.bootstrap] if user is None else
            ["--bootstrap-server", a.sasl_bootstrap, "--command-config", command_config(tmp_path, user)])
    res = kafka_tool(run_sh, "org.apache.kafka.tools.AclCommand", *conn, *args, ok=ok)
    return res.stdout + res.stderr


def parse_acl_list(out):
    """kafka-acls.sh --list output: {resource pattern: {acl entry lines}}."""
    acls = {}
    current = None
    for line in out.splitlines():
        m = re.match(r"Current ACLs for resource `ResourcePattern\((.*)\)`:", line.strip())
        if m:
            current = acls.setdefault(m.group(1), set())
            continue
        m = re.match(r"\((principal=.*)\)$", line.strip())
        if m and current is not None:
            current.add(m.group(1))
    return acls


def entry(principal, op, perm="ALLOW"):
    return f"principal={principal}, host=*, operation={op}, permissionType={perm}"


def pattern(rt, name, pt="LITERAL"):
    return f"resourceType={rt}, name={name}, patternType={pt}"


# ---- tests --------------------------------------------------------------------------

def test_kafka_acls_tool_adds_lists_and_removes_acls(acl_agent, request, tmp_path):
    run_sh = request.getfixturevalue("roundtrip_clients")
    a = acl_agent
    acls = lambda *args, **kw: kafka_acls(run_sh, a, tmp_path, *args, **kw)  # noqa: E731

    # No ACLs yet: the list is empty.
    assert parse_acl_list(acls("admin", "--list")) == {}
    acls("admin", "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Write",
         "--topic", "orders")
    acls("admin", "--add", "--deny-principal", "User:bob", "--operation", "Describe", "--topic", "orders")
    acls("admin", "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "ord",
         "--resource-pattern-type", "prefixed")
    acls("admin", "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "billing")
    orders = pattern("TOPIC", "orders")
    ord_prefixed = pattern("TOPIC", "ord", "PREFIXED")
    billing = pattern("GROUP", "billing")
    everything = {
        orders: {entry("User:alice", "READ"), entry("User:alice", "WRITE"),
                 entry("User:bob", "DESCRIBE", "DENY")},
        ord_prefixed: {entry("User:alice", "READ")},
        billing: {entry("User:alice", "READ")},
    }
    assert parse_acl_list(acls("admin", "--list")) == everything
    # One literal topic; then every pattern that matches the topic name.
    assert parse_acl_list(acls("admin", "--list", "--topic", "orders")) == {orders: everything[orders]}
    assert parse_acl_list(acls("admin", "--list", "--topic", "orders", "--resource-pattern-type", "match")) == {
        orders: everything[orders], ord_prefixed: everything[ord_prefixed]}
    assert parse_acl_list(acls("admin", "--list", "--group", "billing")) == {billing: everything[billing]}

    # Neither alice (no cluster ACL) nor User:ANONYMOUS may list or add.
    for user in ["alice", None]:
        out = acls(user, "--list", ok=False)
        assert "ClusterAuthorizationException" in out, out[-2000:]
        out = acls(user, "--add", "--allow-principal", "User:mallory", "--operation", "All", "--topic", "*",
                   ok=False)
        assert "ClusterAuthorizationException" in out, out[-2000:]

    # --remove takes exactly what it selects.
    acls("admin", "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Write",
         "--topic", "orders")
    acls("admin", "--remove", "--force", "--group", "billing")
    assert parse_acl_list(acls("admin", "--list")) == {
        orders: {entry("User:alice", "READ"), entry("User:bob", "DESCRIBE", "DENY")},
        ord_prefixed: {entry("User:alice", "READ")},
    }


def denials(a):
    return a.metrics().get("rutomq_authorization_denials_total", 0)


def test_a_principal_without_acls_is_denied_and_one_acl_allows_exactly_that(acl_agent, request, tmp_path):
    a = acl_agent
    t, other, fresh = unique_topic("acl-t"), unique_topic("acl-other"), unique_topic("acl-new")
    g, g2 = f"g-{t}", f"g2-{t}"
    assert create_topics(a, "admin", t, other) == {t: None, other: None}
    # A group admin uses (a committed offset), for the listings.
    assert produce_one(a, "admin", t, b"from-admin") is None
    assert consume_in_group(a, "admin", t, f"admins-{t}", want=1) == ("ok", [b"from-admin"])
    adm = admin_client(a, "admin")
    wait_until("admin's group listed", lambda: f"admins-{t}" in {
        x.group_id for x in adm.list_consumer_groups(request_timeout=10).result(15).valid}, timeout=15)
    before = denials(a)

    # ---- alice, no ACL at all.
    err = produce_one(a, "alice", t)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    with sasl_conn(a, "alice") as c:
        assert raw_produce(c, t, partitions=(0,)) == {0: TOPIC_AUTHORIZATION_FAILED}
        assert kwire.fetch_v4(c, t)[0] == TOPIC_AUTHORIZATION_FAILED
        assert raw_list_offsets(c, t) == (TOPIC_AUTHORIZATION_FAILED, -1)
        assert raw_find_coordinator(c, g, 0) == GROUP_AUTHORIZATION_FAILED
        assert raw_find_coordinator(c, "tx", 1) == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert raw_init_producer_id(c)[0] == CLUSTER_AUTHORIZATION_FAILED
        assert raw_init_producer_id(c, "tx")[0] == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        # Not describable: left out of all topics, refused when named.
        topics, _ = raw_metadata_v10(c, None)
        assert topics == {}, topics
        topics, _ = raw_metadata_v10(c, [t])
        assert topics[t][0] == TOPIC_AUTHORIZATION_FAILED, topics
    state, err = consume_in_group(a, "alice", t, g)
    assert state == "error" and err.code() in (KafkaError.GROUP_AUTHORIZATION_FAILED,
                                               KafkaError.TOPIC_AUTHORIZATION_FAILED), err
    alice = admin_client(a, "alice")
    md = alice.list_topics(timeout=15)
    assert md.topics == {}, sorted(md.topics)
    assert t in admin_client(a, "admin").list_topics(timeout=15).topics
    assert create_topics(a, "alice", fresh)[fresh].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    err = future_error(alice.delete_topics([t], operation_timeout=15, request_timeout=15)[t])
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    res = ConfigResource(ResourceType.TOPIC, t)
    err = future_error(alice.describe_configs([res], request_timeout=15)[res])
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    listed = alice.list_consumer_groups(request_timeout=10).result(15)
    assert listed.valid == [] and listed.errors == [], (listed.valid, listed.errors)
    # Nothing happened behind the refusals.
    assert t in admin_client(a, "admin").list_topics(timeout=15).topics
    assert fresh not in admin_client(a, "admin").list_topics(timeout=15).topics
    assert denials(a) >= before + 10, (before, denials(a))
    log = open(a.log_path, encoding="utf-8", errors="replace").read()
    denied = [ln for ln in log.splitlines() if "authorization denied" in ln]
    assert any('principal="User:alice"' in ln and 'operation="Write"' in ln and f"resource=Topic:{t} " in ln
               and "api=Produce" in ln for ln in denied), denied[-20:]

    # ---- WRITE on t: produce to t (also idempotently), nothing else.
    grant(a, topic_acl(t, AclOperation.WRITE))
    assert produce_one(a, "alice", t, b"w1") is None
    assert produce_one(a, "alice", t, b"w2", **{"enable.idempotence": True}) is None
    err = produce_one(a, "alice", other)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    with sasl_conn(a, "alice") as c:
        assert raw_produce(c, t) == {0: 0}
        assert raw_produce(c, other) == {0: TOPIC_AUTHORIZATION_FAILED}
        assert kwire.fetch_v4(c, t)[0] == TOPIC_AUTHORIZATION_FAILED
        code, pid = raw_init_producer_id(c)
        assert code == 0 and pid >= 0, (code, pid)
        # WRITE implies DESCRIBE: now listed.
        topics, _ = raw_metadata_v10(c, None)
        assert set(topics) == {t} and topics[t][0] == 0, topics
    # Every refusal is counted; the log line comes once a minute per
    # principal, operation and resource (per shard: at most 2 here).
    before = denials(a)
    with sasl_conn(a, "alice") as c:
        for _ in range(5):
            assert raw_produce(c, other) == {0: TOPIC_AUTHORIZATION_FAILED}
    assert denials(a) >= before + 5

    def write_other_lines():
        log = open(a.log_path, encoding="utf-8", errors="replace").read().splitlines()
        return [ln for ln in log if "authorization denied" in ln and 'operation="Write"' in ln
                and f"resource=Topic:{other} " in ln]
    lines = wait_until("the denial logged", write_other_lines, timeout=5)
    assert len(lines) <= 2, lines

    # Auto-creation and CreateTopics need CREATE (on the topic here), and
    # DESCRIBE to see the topic at all.
    pre = f"auto-{t}-"
    grant(a, topic_acl(pre, AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
          topic_acl(pre + "c", AclOperation.CREATE, pattern=ResourcePatternType.PREFIXED),
          topic_acl(f"create-only-{t}", AclOperation.CREATE))
    with sasl_conn(a, "alice") as c:
        assert raw_metadata_v10(c, [pre + "x"], auto_create=True)[0][pre + "x"][0] == TOPIC_AUTHORIZATION_FAILED
        assert raw_metadata_v10(c, [pre + "c1"])[0][pre + "c1"][0] == 3  # UNKNOWN_TOPIC_OR_PARTITION
        assert raw_metadata_v10(c, [pre + "c1"], auto_create=True)[0][pre + "c1"][0] == 0
        assert raw_metadata_v10(c, [f"create-only-{t}"], auto_create=True)[0][f"create-only-{t}"][0] == \
            TOPIC_AUTHORIZATION_FAILED
    assert create_topics(a, "alice", pre + "c2", pre + "y") == {
        pre + "c2": None, pre + "y": KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)}
    assert produce_one(a, "alice", pre + "c3") is None  # librdkafka's Metadata creates it
    listed = admin_client(a, "admin").list_topics(timeout=15).topics
    assert {pre + "c1", pre + "c2", pre + "c3"} <= set(listed) and pre + "x" not in listed and pre + "y" not in listed
    assert f"create-only-{t}" not in listed

    # ---- READ on t and on group g: consume in g, not in g2.
    grant(a, topic_acl(t, AclOperation.READ), group_acl(g, AclOperation.READ))
    with sasl_conn(a, "alice") as c:
        err, hw, records = kwire.fetch_v4(c, t)
        assert err == 0 and hw == 4 and b"from-admin" in records and b"w2" in records, (err, hw, records)
    assert consume_in_group(a, "alice", t, g, want=4) == ("ok", [b"from-admin", b"w1", b"w2", b"raw"])
    state, err = consume_in_group(a, "alice", t, g2)
    assert state == "error" and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, (state, err)
    # READ on the group implies DESCRIBE: alice now sees g (only).
    listed = alice.list_consumer_groups(request_timeout=10).result(15)
    assert [x.group_id for x in listed.valid] == [g], listed.valid
    # DESCRIBE on a group finds its coordinator, but joining needs READ.
    g3 = f"g3-{t}"
    grant(a, group_acl(g3, AclOperation.DESCRIBE))
    with sasl_conn(a, "alice") as c:
        assert raw_find_coordinator(c, g3, 0) == 0
    state, err = consume_in_group(a, "alice", t, g3)
    assert state == "error" and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, (state, err)
    fs = alice.describe_consumer_groups([g, f"admins-{t}"], request_timeout=15)
    assert future_error(fs[g]) is None
    assert future_error(fs[f"admins-{t}"]).code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    # DESCRIBE on the group and the topic: its committed offsets.
    fs = alice.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)], request_timeout=15)
    assert [(x.topic, x.partition, x.offset) for x in fs[g].result(15).topic_partitions] == [(t, 0, 4)]
    # Deleting the group needs DELETE; the topic's partitions ALTER, its records DELETE.
    err = future_error(alice.delete_consumer_groups([g], request_timeout=15)[g])
    assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, err
    err = future_error(alice.create_partitions([NewPartitions(t, 2)], request_timeout=15)[t])
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    err = future_error(alice.delete_records([TopicPartitionOffset(t, 0, 1)], request_timeout=15)[
        TopicPartitionOffset(t, 0, 1)])
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    tp = TopicPartitionOffset(t, 0)
    assert alice.list_offsets({tp: OffsetSpec.latest()}, request_timeout=15)[tp].result(15).offset == 4
    # Committing in g an offset of a topic alice may not READ: refused per partition.
    c = Consumer(client_conf(a, "alice", **{"group.id": g, "enable.auto.commit": False}))
    try:
        with pytest.raises(KafkaException) as e:
            c.commit(offsets=[TopicPartitionOffset(other, 0, 1)], asynchronous=False)
        assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, e.value
    finally:
        c.close()

    # ---- WRITE removed with kafka-acls.sh: refused again at once.
    run_sh = request.getfixturevalue("roundtrip_clients")
    kafka_acls(run_sh, a, tmp_path, "admin", "--remove", "--force", "--allow-principal", "User:alice",
               "--operation", "Write", "--topic", t)
    err = produce_one(a, "alice", t)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    with sasl_conn(a, "alice") as c:
        assert raw_produce(c, t) == {0: TOPIC_AUTHORIZATION_FAILED}
        assert kwire.fetch_v4(c, t)[0] == 0  # READ stays


def read_all(a, user, topic, isolation, timeout=30):
    """Values of `topic` partition 0 a consumer as `user` reads with
    `isolation` until EOF (assigned: its group, reader-<random>, is only
    asked for its coordinator)."""
    c = Consumer(client_conf(a, user, **{"group.id": f"reader-{uuid.uuid4().hex}", "enable.auto.commit": False,
                                         "enable.partition.eof": True, "isolation.level": isolation}))
    out = []
    try:
        c.assign([TopicPartitionOffset(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while True:
            assert time.monotonic() < deadline, f"reading {topic} as {user}: no EOF; got {out}"
            for m in c.consume(100, timeout=0.5):
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        return out
                    raise AssertionError(f"consumer error: {m.error()}")
                out.append(m.value())
    finally:
        c.close()


def test_transactions_need_the_transactional_id(acl_agent, request, tmp_path):
    a = acl_agent
    t = unique_topic("acl-txn")
    tid = f"tx-{t}"
    assert create_topics(a, "admin", t) == {t: None}
    grant(a, topic_acl(t, AclOperation.WRITE), topic_acl(t, AclOperation.READ),
          (ResourceType.GROUP, "reader-", ResourcePatternType.PREFIXED, "User:alice", AclOperation.READ))
    conf = client_conf(a, "alice", **{"transactional.id": tid, "message.timeout.ms": 15000})

    p = Producer(conf)
    with pytest.raises(KafkaException) as e:
        p.init_transactions(20)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, e.value
    del p

    run_sh = request.getfixturevalue("roundtrip_clients")
    out = kafka_acls(run_sh, a, tmp_path, "admin", "--add", "--allow-principal", "User:alice",
                     "--operation", "Write", "--transactional-id", tid)
    assert pattern("TRANSACTIONAL_ID", tid) in out, out[-2000:]
    p = Producer(conf)
    p.init_transactions(20)
    p.begin_transaction()
    for i in range(3):
        p.produce(t, b"aborted-%d" % i, partition=0)
    p.flush(15)
    p.abort_transaction(20)
    p.begin_transaction()
    for i in range(5):
        p.produce(t, b"committed-%d" % i, partition=0)
    p.commit_transaction(20)
    # Offsets in the transaction (AddOffsetsToTxn, TxnOffsetCommit) need
    # READ on the group too.
    for group, code in [(f"reader-{t}", None), (f"noread-{t}", KafkaError.GROUP_AUTHORIZATION_FAILED)]:
        c = Consumer(client_conf(a, "alice", **{"group.id": group}))
        p.begin_transaction()
        p.produce(t, b"with-offsets", partition=0)
        assert p.flush(15) == 0
        try:
            p.send_offsets_to_transaction([TopicPartitionOffset(t, 0, 3)], c.consumer_group_metadata(), 20)
            p.commit_transaction(20)
            assert code is None, group
            committed = c.committed([TopicPartitionOffset(t, 0)], timeout=15)
            assert [x.offset for x in committed] == [3], committed
        except KafkaException as e:
            assert e.args[0].code() == code, (group, e)
            p.abort_transaction(20)
        finally:
            c.close()
    del p
    assert read_all(a, "alice", t, "read_committed") == [b"committed-%d" % i for i in range(5)] + [b"with-offsets"]
    assert len(read_all(a, "alice", t, "read_uncommitted")) == 10
    # Someone else's transactional id stays closed.
    with sasl_conn(a, "alice") as c:
        assert raw_init_producer_id(c, f"other-{tid}")[0] == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert raw_find_coordinator(c, tid, 1) == 0


def everything_filter():
    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                            AclPermissionType.ANY)


def all_acls(a, user):
    adm = admin_client(a, user)
    return adm.describe_acls(everything_filter(), request_timeout=15).result(20)


def test_super_users_may_do_anything(start_agent):
    """Each of the ';'-separated super users, with no ACL naming them and a
    DENY of everything to User:* on their topic: Kafka checks super users
    before any ACL."""
    a = start_acl_agent(start_agent, super_users="User:admin;User:ops")
    t, g = unique_topic("acl-super"), unique_topic("acl-super-g")
    for user in ["ops", "admin"]:
        assert all_acls(a, user) == []
    assert create_topics(a, "ops", t) == {t: None}
    grant(a, topic_acl(t, AclOperation.ALL, principal="User:*") + (AclPermissionType.DENY,), user="ops")
    assert [b.principal for b in all_acls(a, "admin")] == ["User:*"]
    for user in ["ops", "admin"]:
        assert produce_one(a, user, t, user.encode(), **{"enable.idempotence": True}) is None
    assert consume_in_group(a, "ops", t, g, want=2) == ("ok", [b"ops", b"admin"])
    ops = admin_client(a, "ops")
    res = ConfigResource(ResourceType.TOPIC, t)
    assert future_error(ops.describe_configs([res], request_timeout=15)[res]) is None
    assert {x.group_id for x in ops.list_consumer_groups(request_timeout=10).result(15).valid} == {g}
    creds = ops.describe_user_scram_credentials(request_timeout=15).result(20)
    assert set(creds) == {"admin", "alice", "ops"}, creds
    # Not alice: the DENY for User:* and no cluster ACL.
    assert produce_one(a, "alice", t).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # DescribeAcls and DescribeUserScramCredentials on the wire: librdkafka
    # drops DescribeAcls' error code (an empty listing), and frees the
    # request-level error string of DescribeUserScramCredentials it put on
    # its stack (the process aborts).
    for user, code in [("alice", CLUSTER_AUTHORIZATION_FAILED), ("ops", 0)]:
        with sasl_conn(a, user) as c:
            assert raw_describe_acls(c)[0] == code, user
            assert raw_describe_scram(c) == code, user
    alice = admin_client(a, "alice")
    f = everything_filter()
    err = future_error(alice.delete_acls([f], request_timeout=15)[f])
    assert err is not None and err.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, err
    binding = AclBinding(ResourceType.TOPIC, t, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.ALL, AclPermissionType.ALLOW)
    err = future_error(alice.create_acls([binding], request_timeout=15)[binding])
    assert err is not None and err.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, err
    assert [(b.principal, b.permission_type) for b in all_acls(a, "ops")] == [("User:*", AclPermissionType.DENY)]
    # The super user deletes the group and the topic.
    assert future_error(ops.delete_consumer_groups([g], request_timeout=15)[g]) is None
    assert future_error(ops.delete_topics([t], operation_timeout=15, request_timeout=15)[t]) is None
    wait_until("topic gone", lambda: t not in ops.list_topics(timeout=10).topics, timeout=15)


def test_allow_everyone_if_no_acl_found(start_agent):
    """--allow-everyone-if-no-acl-found: a resource no ACL matches is open
    to any principal (alice, and User:ANONYMOUS on the PLAINTEXT listener);
    one that a literal or prefixed ACL names, for someone else, is not."""
    a = start_acl_agent(start_agent, extra=["--allow-everyone-if-no-acl-found"])
    free, guarded, team = unique_topic("free"), unique_topic("guarded"), unique_topic("team-x")
    assert create_topics(a, "admin", guarded, team) == {guarded: None, team: None}
    grant(a, topic_acl(guarded, AclOperation.READ, principal="User:bob"),
          topic_acl("team-", AclOperation.WRITE, principal="User:bob", pattern=ResourcePatternType.PREFIXED))
    # Alice creates a topic (the cluster has no ACL), writes and reads it in a group no ACL names.
    assert create_topics(a, "alice", free) == {free: None}
    assert produce_one(a, "alice", free, b"a") is None
    with kwire.KafkaConn.to(a.bootstrap) as c:  # User:ANONYMOUS
        assert raw_produce(c, free) == {0: 0}
    assert consume_in_group(a, "alice", free, f"g-{free}", want=2) == ("ok", [b"a", b"raw"])
    for topic in [guarded, team]:
        assert produce_one(a, "alice", topic).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with sasl_conn(a, "alice") as c:
        topics, _ = raw_metadata_v10(c, None)
        assert set(topics) == {free}, topics
        assert kwire.fetch_v4(c, guarded)[0] == TOPIC_AUTHORIZATION_FAILED
    with kwire.KafkaConn.to(a.bootstrap) as c:
        assert raw_produce(c, team) == {0: TOPIC_AUTHORIZATION_FAILED}


def test_authorized_operations(acl_agent):
    """Metadata v10 and DescribeCluster v0 report the allowed operations as
    bits; librdkafka's describe_topics/describe_cluster decode the same."""
    a = acl_agent
    t, u, x = unique_topic("ops-t"), unique_topic("ops-u"), unique_topic("all-")
    assert create_topics(a, "admin", t, u, x) == {t: None, u: None, x: None}
    grant(a, topic_acl(t, AclOperation.READ),
          topic_acl("all-", AclOperation.ALL, pattern=ResourcePatternType.PREFIXED),
          topic_acl(x, AclOperation.DELETE) + (AclPermissionType.DENY,))
    all_but_delete = bits(o for o in TOPIC_OPS if o != DELETE)
    with sasl_conn(a, "alice") as c:
        topics, cluster = raw_metadata_v10(c, None)
        assert topics == {t: (0, bits([READ, DESCRIBE])), x: (0, all_but_delete)}, topics
        assert cluster == 0
        topics, _ = raw_metadata_v10(c, [t, u])
        assert topics == {t: (0, bits([READ, DESCRIBE])), u: (TOPIC_AUTHORIZATION_FAILED, NOT_ASKED)}, topics
        topics, cluster = raw_metadata_v10(c, [t], include_cluster_ops=False, include_topic_ops=False)
        assert (topics, cluster) == ({t: (0, NOT_ASKED)}, NOT_ASKED)
        assert raw_describe_cluster(c) == (0, 0)
        assert raw_describe_cluster(c, include_ops=False) == (0, NOT_ASKED)
    with sasl_conn(a, "admin") as c:
        topics, cluster = raw_metadata_v10(c, [t, u])
        assert topics == {t: (0, bits(TOPIC_OPS)), u: (0, bits(TOPIC_OPS))}, topics
        assert cluster == bits(CLUSTER_OPS)
        assert raw_describe_cluster(c) == (0, bits(CLUSTER_OPS))

    # Cluster ACLs: ALTER implies DESCRIBE, ALTER_CONFIGS DESCRIBE_CONFIGS.
    grant(a, (ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice", AclOperation.ALTER),
          (ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice",
           AclOperation.ALTER_CONFIGS))
    want_cluster = bits([ALTER, DESCRIBE, ALTER_CONFIGS, DESCRIBE_CONFIGS])
    with sasl_conn(a, "alice") as c:
        assert raw_describe_cluster(c) == (0, want_cluster)
        assert raw_metadata_v10(c, [t])[1] == want_cluster

    alice = admin_client(a, "alice")
    fs = alice.describe_topics(TopicCollection([t, x]), include_authorized_operations=True, request_timeout=15)
    assert set(fs[t].result(15).authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    assert AclOperation.DELETE not in fs[x].result(15).authorized_operations
    assert len(fs[x].result(15).authorized_operations) == 7
    cd = alice.describe_cluster(include_authorized_operations=True, request_timeout=15).result(15)
    assert set(cd.authorized_operations) == {AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.ALTER_CONFIGS,
                                             AclOperation.DESCRIBE_CONFIGS}, cd.authorized_operations
