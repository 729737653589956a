# What this proves: the e2e harness itself is sound, independently of the broker
# (these tests never need the rutomq binary, so they also run before it exists):
#  - the session PostgreSQL cluster really starts (as root via an unprivileged OS
#    user), runs with fsync on and max_connections=300, and fresh_db gives each test
#    its own empty database;
#  - the hand-written wire encoders in kwire.py (request headers v1/v2, ApiVersions
#    v0-v3, Produce v3-v8, RecordBatch v2 with CRC32C) are byte-identical to
#    kafka-python's independent implementation, and our response parsers decode
#    kafka-python-encoded responses;
#  - the Prometheus text parser used by Agent.metrics() works.
# How: direct SQL through psycopg; encode the same message with both codecs and
# compare bytes.

import psycopg
import pytest

import kwire
from conftest import Metrics


def test_pg_cluster_settings(pg_url):
    with psycopg.connect(pg_url, autocommit=True, connect_timeout=10) as conn:
        assert conn.execute("SHOW fsync").fetchone()[0] == "on", "test cluster must run with fsync=on"
        assert conn.execute("SHOW max_connections").fetchone()[0] == "300"
        assert conn.execute("SELECT current_setting('is_superuser')").fetchone()[0] == "on"


def test_fresh_db_is_isolated(pg_url, fresh_db):
    assert fresh_db != pg_url
    with psycopg.connect(fresh_db, autocommit=True, connect_timeout=10) as conn:
        name = conn.execute("SELECT current_database()").fetchone()[0]
        assert name.startswith("t_"), name
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema NOT IN "
            "('pg_catalog', 'information_schema')").fetchone()[0]
        assert tables == 0, "a fresh database must be empty"
        conn.execute("CREATE TABLE marker (x int)")
    # the marker table is not visible from a second fresh database
    from conftest import create_database, drop_database
    other_name, other_url = create_database(pg_url)
    try:
        with psycopg.connect(other_url, autocommit=True, connect_timeout=10) as conn:
            assert conn.execute("SELECT to_regclass('marker')").fetchone()[0] is None
    finally:
        drop_database(pg_url, other_name)


def _kp_request_bytes(req, cid, client_id="rutomq-e2e"):
    header = req.build_header(cid, client_id)
    return header.encode() + req.encode()


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_api_versions_request_matches_kafka_python(version):
    from kafka.protocol.api_versions import ApiVersionsRequest
    if version >= 3:
        req = ApiVersionsRequest[version](client_software_name="rutomq-e2e",
                                          client_software_version="1.0.0", _tagged_fields={})
    else:
        req = ApiVersionsRequest[version]()
    want = _kp_request_bytes(req, 7)
    got = kwire.api_versions_request(version, 7)
    assert got[:4] == kwire.i32(len(got) - 4)
    assert got[4:] == want, f"\nours:         {got[4:].hex()}\nkafka-python: {want.hex()}"


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_api_versions_response_parser(version):
    from kafka.protocol.api_versions import ApiVersionsResponse
    entries = [(0, 3, 9), (18, 0, 3), (19, 0, 4)]
    if version >= 3:
        resp = ApiVersionsResponse[version](error_code=0, api_versions=[e + ({},) for e in entries],
                                            throttle_time_ms=0, _tagged_fields={})
    elif version >= 1:
        resp = ApiVersionsResponse[version](error_code=0, api_versions=entries, throttle_time_ms=0)
    else:
        resp = ApiVersionsResponse[version](error_code=0, api_versions=entries)
    res = kwire.parse_api_versions_response(kwire.i32(42) + resp.encode(), version)
    assert res.correlation_id == 42 and res.error_code == 0
    assert res.versions == {k: (a, b) for k, a, b in entries}
    # trailing garbage must be detected
    with pytest.raises(kwire.ProtocolError):
        kwire.parse_api_versions_response(kwire.i32(42) + resp.encode() + b"\x00", version)


def _sample_records():
    return [(b"k1", b"v1", [("h", b"x"), ("n", None)]),
            (None, b"v2" * 100, []),
            (b"k3", None, []),
            (b"", b"", [("", b"")])]


def test_record_batch_matches_kafka_python():
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    recs = _sample_records()
    for i, (k, v, h) in enumerate(recs):
        b.append(i, timestamp=1_700_000_000_000, key=k, value=v, headers=h)
    want = bytes(b.build())
    # kafka-python writes partitionLeaderEpoch 0 where Java writes -1; both are outside the CRC.
    got = kwire.encode_record_batch(recs, partition_leader_epoch=0)
    assert got == want, f"\nours:         {got.hex()}\nkafka-python: {want.hex()}"
    parsed = DefaultRecordBatch(kwire.encode_record_batch(recs))
    assert parsed.validate_crc()
    assert [(r.offset, r.key, r.value, r.headers) for r in parsed] == [
        (i, k, v, h) for i, (k, v, h) in enumerate(recs)]
    assert not DefaultRecordBatch(kwire.encode_record_batch(recs, crc_override=0xDEADBEEF)).validate_crc()


def test_crc32c_known_vector():
    assert kwire.crc32c(b"123456789") == 0xE3069283


@pytest.mark.parametrize("version", [3, 5, 7, 8])
def test_produce_request_and_response_match_kafka_python(version):
    from kafka.protocol.produce import ProduceRequest, ProduceResponse
    batch = kwire.encode_record_batch(_sample_records())
    req = ProduceRequest[version](transactional_id=None, required_acks=-1, timeout=10000,
                                  topics=[("t", [(0, batch), (1, batch)])])
    want = _kp_request_bytes(req, 9)
    got = kwire.produce_request(version, 9, {"t": {0: batch, 1: batch}})
    assert got[4:] == want
    if version >= 8:
        resp = ProduceResponse[version](topics=[("t", [(0, 2, -1, -1, 0, [(0, "crc")], "corrupt"),
                                                       (1, 0, 5, -1, 0, [], None)])], throttle_time_ms=0)
    elif version >= 5:
        resp = ProduceResponse[version](topics=[("t", [(0, 2, -1, -1, 0), (1, 0, 5, -1, 0)])],
                                        throttle_time_ms=0)
    else:
        resp = ProduceResponse[version](topics=[("t", [(0, 2, -1, -1), (1, 0, 5, -1)])],
                                        throttle_time_ms=0)
    cid, res, _ = kwire.parse_produce_response(kwire.i32(9) + resp.encode(), version)
    assert cid == 9
    assert res["t"][0].error_code == 2 and res["t"][1].error_code == 0 and res["t"][1].base_offset == 5


def test_metrics_parser():
    m = Metrics("# HELP x help\n# TYPE x counter\nx_total 3\nx_total{a=\"1\"} 4.5\n"
                "y{le=\"+Inf\"} +Inf\nz 1e3 1700000000000\n")
    assert m["x_total"] == 7.5 and m["z"] == 1000.0 and m["y"] == float("inf")
    assert len(m.samples) == 4 and "HELP" in m.raw


def test_unique_topic_names():
    from kafkautil import unique_topic
    names = {unique_topic() for _ in range(100)}
    assert len(names) == 100
    assert all(len(n) < 200 for n in names)
