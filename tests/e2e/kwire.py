"""A tiny, dependency-light Kafka wire-protocol codec for raw-socket tests.

Only what tests/e2e/test_raw_protocol.py needs: request framing, request
headers v1 (classic) and v2 (flexible), ApiVersions v0-v3 (+ "unknown
version" v0-layout error response), Produce v3-v8 (non-flexible) and the
RecordBatch v2 (magic 2) format with CRC32C. Everything is written with
`struct` by hand on purpose, so the tests do not depend on a client library's
interpretation of the protocol. test_raw_protocol.py cross-checks these
encoders byte-for-byte against kafka-python's own protocol structs.

Reference: https://kafka.apache.org/protocol (request/response grammar) and
the RecordBatch section of the Kafka documentation ("Message Format").
"""

import socket
import struct
import time

try:  # the PyPI package (C implementation)
    from crc32c import crc32c as _crc32c_impl
except ImportError:  # pragma: no cover - fallback: table-driven Castagnoli
    _CRC32C_TABLE = []
    for _n in range(256):
        _c = _n
        for _ in range(8):
            _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
        _CRC32C_TABLE.append(_c)

    def _crc32c_impl(data):
        crc = 0xFFFFFFFF
        for b in data:
            crc = _CRC32C_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
        return crc ^ 0xFFFFFFFF


def crc32c(data: bytes) -> int:
    return _crc32c_impl(bytes(data)) & 0xFFFFFFFF


# Api keys and error codes used by the tests.
PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 1, 2, 3, 18, 19
ERR_NONE = 0
ERR_CORRUPT_MESSAGE = 2
ERR_UNKNOWN_TOPIC_OR_PARTITION = 3
ERR_UNSUPPORTED_VERSION = 35
ERR_INVALID_RECORD = 87

MAX_RESPONSE_FRAME = 64 * 1024 * 1024


class ProtocolError(AssertionError):
    pass


class ConnectionClosed(Exception):
    pass


# --------------------------------------------------------------------------
# primitive encoders


def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def uvarint(v: int) -> bytes:
    if v < 0:
        raise ValueError("uvarint must be >= 0")
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(v: int) -> bytes:
    """Signed zig-zag varint (as used inside records); 64-bit range."""
    return uvarint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)


def string(s):
    """Classic (int16-length) nullable string."""
    if s is None:
        return i16(-1)
    b = s.encode() if isinstance(s, str) else s
    return i16(len(b)) + b


def compact_string(s):
    if s is None:
        return uvarint(0)
    b = s.encode() if isinstance(s, str) else s
    return uvarint(len(b) + 1) + b


def bytes_(b):
    if b is None:
        return i32(-1)
    return i32(len(b)) + b


def array(items, enc):
    if items is None:
        return i32(-1)
    items = list(items)
    return i32(len(items)) + b"".join(enc(x) for x in items)


EMPTY_TAGGED_FIELDS = b"\x00"


# --------------------------------------------------------------------------
# primitive decoder


class Reader:
    def __init__(self, data: bytes):
        self.b = bytes(data)
        self.pos = 0

    def remaining(self):
        return len(self.b) - self.pos

    def take(self, n):
        if n < 0 or self.pos + n > len(self.b):
            raise ProtocolError(
                f"read underflow: need {n} bytes at offset {self.pos}, frame has {len(self.b)} bytes "
                f"(frame hex: {self.b[:200].hex()})"
            )
        out = self.b[self.pos:self.pos + n]
        self.pos += n
        return out

    def _unpack(self, fmt, n):
        return struct.unpack(fmt, self.take(n))[0]

    def i8(self):
        return self._unpack(">b", 1)

    def i16(self):
        return self._unpack(">h", 2)

    def i32(self):
        return self._unpack(">i", 4)

    def u32(self):
        return self._unpack(">I", 4)

    def i64(self):
        return self._unpack(">q", 8)

    def uvarint(self):
        shift = 0
        out = 0
        while True:
            b = self.take(1)[0]
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 63:
                raise ProtocolError("varint too long")

    def varint(self):
        u = self.uvarint()
        return (u >> 1) ^ -(u & 1)

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        return self.take(n).decode("utf-8", "replace")

    def compact_string(self):
        n = self.uvarint()
        if n == 0:
            return None
        return self.take(n - 1).decode("utf-8", "replace")

    def array(self, fn):
        n = self.i32()
        if n < 0:
            return None
        if n > self.remaining():
            raise ProtocolError(f"array length {n} larger than remaining {self.remaining()} bytes")
        return [fn(self) for _ in range(n)]

    def compact_array(self, fn):
        n = self.uvarint()
        if n == 0:
            return None
        if n - 1 > self.remaining():
            raise ProtocolError(f"compact array length {n - 1} larger than remaining {self.remaining()} bytes")
        return [fn(self) for _ in range(n - 1)]

    def tagged_fields(self):
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            out[tag] = self.take(size)
        return out

    def expect_end(self, what):
        if self.remaining():
            raise ProtocolError(
                f"{what}: {self.remaining()} unexpected trailing bytes at offset {self.pos}: "
                f"{self.b[self.pos:self.pos + 64].hex()}"
            )


# --------------------------------------------------------------------------
# framing and headers


def frame(payload: bytes) -> bytes:
    return i32(len(payload)) + payload


def request_header(api_key, api_version, correlation_id, client_id="rutomq-e2e", flexible=False):
    """Request header v1 (classic) or v2 (flexible: + empty tagged fields).

    Note the client_id stays a classic int16-length nullable string even in
    header v2: it is the one field that never became compact."""
    h = i16(api_key) + i16(api_version) + i32(correlation_id) + string(client_id)
    if flexible:
        h += EMPTY_TAGGED_FIELDS
    return h


# --------------------------------------------------------------------------
# ApiVersions (key 18)


def api_versions_body(version):
    if version >= 3:
        return compact_string("rutomq-e2e") + compact_string("1.0.0") + EMPTY_TAGGED_FIELDS
    return b""


def api_versions_request(version, correlation_id, client_id="rutomq-e2e", flexible=None):
    """A framed ApiVersions request. v3+ uses request header v2 (flexible).

    For a version the broker does not know (e.g. 99) we still send the
    flexible header and the v3 body, as real clients do."""
    if flexible is None:
        flexible = version >= 3
    return frame(request_header(API_VERSIONS, version, correlation_id, client_id, flexible)
                 + api_versions_body(version))


class ApiVersionsResult:
    def __init__(self, correlation_id, error_code, versions, throttle_time_ms, tagged):
        self.correlation_id = correlation_id
        self.error_code = error_code
        self.versions = versions  # api_key -> (min, max)
        self.throttle_time_ms = throttle_time_ms
        self.tagged = tagged

    def __repr__(self):
        return (f"ApiVersionsResult(cid={self.correlation_id}, error={self.error_code}, "
                f"keys={sorted(self.versions)})")


def parse_api_versions_response(payload: bytes, layout_version: int) -> ApiVersionsResult:
    """Parse an ApiVersions response. The response header is ALWAYS v0
    (correlation id only), even for flexible v3+, so that a client can parse
    it before knowing what the broker supports. Requires the frame to be
    consumed exactly."""
    r = Reader(payload)
    cid = r.i32()
    err = r.i16()

    def entry(rr):
        k, mn, mx = rr.i16(), rr.i16(), rr.i16()
        if layout_version >= 3:
            rr.tagged_fields()
        return k, mn, mx

    if layout_version >= 3:
        entries = r.compact_array(entry)
    else:
        entries = r.array(entry)
    throttle = r.i32() if layout_version >= 1 else None
    tagged = r.tagged_fields() if layout_version >= 3 else None
    r.expect_end(f"ApiVersions v{layout_version} response")
    versions = {}
    for k, mn, mx in entries or []:
        if k in versions:
            raise ProtocolError(f"api key {k} listed twice in ApiVersions response")
        versions[k] = (mn, mx)
    return ApiVersionsResult(cid, err, versions, throttle, tagged)


# --------------------------------------------------------------------------
# RecordBatch v2 (magic 2)


def encode_record(offset_delta, timestamp_delta, key, value, headers=()):
    body = i8(0)  # record attributes (unused)
    body += varint(timestamp_delta) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(len(headers))
    for hk, hv in headers:
        hkb = hk.encode() if isinstance(hk, str) else hk
        body += varint(len(hkb)) + hkb
        body += varint(-1) if hv is None else varint(len(hv)) + hv
    return varint(len(body)) + body


def encode_record_batch(records, base_timestamp=1_700_000_000_000, base_offset=0,
                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                        partition_leader_epoch=-1, attributes=0,
                        claimed_count=None, crc_override=None):
    """Encode an uncompressed RecordBatch v2.

    records: list of (key: bytes|None, value: bytes|None, headers: list[(str, bytes|None)]).
    claimed_count: write this in the recordsCount field instead of the true count
    (CRC is still computed correctly over what is written).
    crc_override: write this CRC instead of the correct one.

    Layout: baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 |
    crc u32 | attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 |
    maxTimestamp i64 | producerId i64 | producerEpoch i16 | baseSequence i32 |
    recordsCount i32 | records...   CRC32C covers attributes..end.
    """
    recs = b"".join(encode_record(i, 0, k, v, h) for i, (k, v, h) in enumerate(records))
    n = len(records)
    count = n if claimed_count is None else claimed_count
    after_crc = struct.pack(">hiqqqhii", attributes, max(n - 1, 0), base_timestamp, base_timestamp,
                            producer_id, producer_epoch, base_sequence, count) + recs
    crc = crc32c(after_crc) if crc_override is None else crc_override
    body = struct.pack(">ibI", partition_leader_epoch, 2, crc) + after_crc
    return i64(base_offset) + i32(len(body)) + body


# --------------------------------------------------------------------------
# Produce (key 0), v3..v8 (non-flexible)

PRODUCE_MIN_SUPPORTED_HERE = 3
PRODUCE_MAX_SUPPORTED_HERE = 8


def produce_request(version, correlation_id, topics, acks=-1, timeout_ms=10000, transactional_id=None,
                    client_id="rutomq-e2e"):
    """topics: {topic_name: {partition: record_set_bytes}} (order preserved)."""
    if not PRODUCE_MIN_SUPPORTED_HERE <= version <= PRODUCE_MAX_SUPPORTED_HERE:
        raise ValueError(f"this encoder only does Produce v3..v8, not v{version}")
    body = string(transactional_id) + i16(acks) + i32(timeout_ms)
    body += array(topics.items(), lambda t: string(t[0]) + array(
        t[1].items(), lambda p: i32(p[0]) + bytes_(p[1])))
    return frame(request_header(PRODUCE, version, correlation_id, client_id) + body)


class ProducePartitionResult:
    def __init__(self, index, error_code, base_offset, log_append_time, log_start_offset,
                 record_errors, error_message):
        self.index = index
        self.error_code = error_code
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.log_start_offset = log_start_offset
        self.record_errors = record_errors
        self.error_message = error_message

    def __repr__(self):
        return (f"Partition(index={self.index}, error={self.error_code}, base_offset={self.base_offset}, "
                f"msg={self.error_message!r}, record_errors={self.record_errors})")


def parse_produce_response(payload, version):
    """Returns (correlation_id, {topic: {partition: ProducePartitionResult}}, throttle)."""
    r = Reader(payload)
    cid = r.i32()

    def part(rr):
        idx = rr.i32()
        err = rr.i16()
        base = rr.i64()
        lat = rr.i64() if version >= 2 else None
        lso = rr.i64() if version >= 5 else None
        rec_errs = rr.array(lambda x: (x.i32(), x.string())) if version >= 8 else None
        msg = rr.string() if version >= 8 else None
        return ProducePartitionResult(idx, err, base, lat, lso, rec_errs, msg)

    def topic(rr):
        name = rr.string()
        return name, rr.array(part)

    topics = r.array(topic)
    throttle = r.i32() if version >= 1 else None
    r.expect_end(f"Produce v{version} response")
    out = {}
    for name, parts in topics or []:
        out.setdefault(name, {})
        for p in parts or []:
            out[name][p.index] = p
    return cid, out, throttle


# --------------------------------------------------------------------------
# AlterClientQuotas (key 49), v0


ALTER_CLIENT_QUOTAS = 49


def alter_client_quotas_request(correlation_id, entries, validate_only=False, client_id="rutomq-e2e"):
    """entries: [(entity, ops)], entity a list of (entity type, name or None
    for <default>), ops a list of (key, value or None to remove)."""
    def entity_part(p):
        return string(p[0]) + string(p[1])

    def op(o):
        key, value = o
        return string(key) + struct.pack(">d", 0.0 if value is None else float(value)) + i8(1 if value is None else 0)

    def entry(e):
        entity, ops = e
        return array(entity, entity_part) + array(ops, op)

    body = array(entries, entry) + i8(1 if validate_only else 0)
    return frame(request_header(ALTER_CLIENT_QUOTAS, 0, correlation_id, client_id) + body)


def parse_alter_client_quotas_response(payload):
    """(correlation id, throttle ms, [(error code, message, [(type, name)])])."""
    r = Reader(payload)
    cid = r.i32()
    throttle = r.i32()

    def entry(rr):
        code, msg = rr.i16(), rr.string()
        return code, msg, rr.array(lambda x: (x.string(), x.string()))

    entries = r.array(entry)
    r.expect_end("AlterClientQuotas v0 response")
    return cid, throttle, entries


def alter_client_quotas(bootstrap, entries, validate_only=False):
    """Sends AlterClientQuotas on a new connection; its entries' results."""
    with KafkaConn.to(bootstrap) as c:
        cid = c.next_cid()
        c.send(alter_client_quotas_request(cid, entries, validate_only))
        rcid, _, results = parse_alter_client_quotas_response(c.recv_frame())
        assert rcid == cid
        return results


# --------------------------------------------------------------------------
# a blocking connection


def fetch_v4(c, topic, partition=0, offset=0):
    """Fetch v4 of one partition on connection `c` (a KafkaConn): (error
    code, high watermark, record bytes)."""
    return fetch_v4_partitions(c, topic, {partition: offset})[partition]


def fetch_v4_partitions(c, topic, offsets):
    """Fetch v4 of partitions {partition: offset} of `topic` on connection
    `c` (a KafkaConn), no wait, min_bytes 1, 1 MiB per partition:
    {partition: (error code, high watermark, record bytes)}."""
    cid = c.next_cid()
    body = (i32(-1) + i32(0) + i32(1) + i32(len(offsets) << 20) + i8(0)
            + i32(1) + string(topic) + i32(len(offsets))
            + b"".join(i32(p) + i64(o) + i32(1 << 20) for p, o in offsets.items()))
    c.send(frame(request_header(1, 4, cid) + body))
    r = Reader(c.recv_frame())
    assert r.i32() == cid
    r.i32()  # throttle

    def part(rr):
        idx, err, hw, _lso = rr.i32(), rr.i16(), rr.i64(), rr.i64()
        rr.array(lambda x: (x.i64(), x.i64()))  # aborted transactions
        n = rr.i32()
        return idx, err, hw, rr.take(n) if n >= 0 else b""

    topics = r.array(lambda rr: (rr.string(), rr.array(part)))
    r.expect_end("Fetch v4 response")
    [(name, parts)] = topics
    assert name == topic
    got = {idx: (err, hw, records) for idx, err, hw, records in parts}
    assert sorted(got) == sorted(offsets), f"asked {sorted(offsets)}, answered {sorted(got)}"
    return got


class KafkaConn:
    def __init__(self, host, port, timeout=10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self._next_cid = 1

    @classmethod
    def wrap(cls, sock, timeout=10.0):
        """Adopt an already connected socket."""
        conn = cls.__new__(cls)
        conn.sock = sock
        conn.sock.settimeout(timeout)
        conn._next_cid = 1
        return conn

    @classmethod
    def to(cls, bootstrap, timeout=10.0):
        host, port = bootstrap.rsplit(":", 1)
        return cls(host, int(port), timeout)

    def next_cid(self):
        cid = self._next_cid
        self._next_cid += 1
        return cid

    def send(self, data):
        self.sock.sendall(data)

    def recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionClosed(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def recv_frame(self):
        size = struct.unpack(">i", self.recv_exact(4))[0]
        if size < 4 or size > MAX_RESPONSE_FRAME:
            raise ProtocolError(f"bad response frame size {size}")
        return self.recv_exact(size)

    def api_versions(self, version=3, client_id="rutomq-e2e"):
        cid = self.next_cid()
        self.send(api_versions_request(version, cid, client_id=client_id))
        res = parse_api_versions_response(self.recv_frame(), version if version <= 3 else 3)
        if res.correlation_id != cid:
            raise ProtocolError(f"correlation id mismatch: sent {cid}, got {res.correlation_id}")
        return res

    def produce(self, version, topics, acks=-1, timeout_ms=10000):
        cid = self.next_cid()
        self.send(produce_request(version, cid, topics, acks=acks, timeout_ms=timeout_ms))
        rcid, result, _ = parse_produce_response(self.recv_frame(), version)
        if rcid != cid:
            raise ProtocolError(f"correlation id mismatch: sent {cid}, got {rcid}")
        return result

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def wait_closed(sock, timeout=5.0):
    """Return a description of how the peer closed the connection within
    `timeout` seconds (EOF or reset), reading and discarding any bytes it sent
    first; raise AssertionError if the connection is still open at the deadline."""
    deadline = time.monotonic() + timeout
    got = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"connection still open after {timeout}s (received {got} bytes)")
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return f"reset (after {got} bytes)"
        except socket.timeout:
            raise AssertionError(f"connection still open after {timeout}s (received {got} bytes)")
        if not chunk:
            return f"eof (after {got} bytes)"
        got += len(chunk)
