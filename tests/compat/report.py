"""Turns a pytest JUnit XML result of the e2e suite into the dated
compatibility result (docs/compatibility/YYYY-MM-DD.md): which client, at
which version, passed which scenario against rutomq, and the physical-broker
behaviour rutomq deliberately answers differently.

Usage: report.py RESULT.xml DATE GIT_REV > docs/compatibility/DATE.md

The client of each test is declared below (CLIENTS: fnmatch patterns over
"file::test[params]", first match wins); the versions come from the files
that pin them (tests/requirements*.txt, tests/clients/versions.sh,
tests/flink/build.sh, tests/e2e/test_streams.py), so the report names what
ran."""

import fnmatch
import os
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _pin(path, pattern, default="?"):
    try:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            m = re.search(pattern, f.read(), re.M)
        return m.group(1) if m else default
    except OSError:
        return default


V = {
    "rdkafka": _pin("tests/requirements.txt", r"^confluent-kafka==(\S+)"),
    "rdkafka_promised": _pin("tests/requirements-promised.txt", r"^confluent-kafka==(\S+)"),
    "kafka_python": _pin("tests/requirements.txt", r"^kafka-python==(\S+)"),
    "java4": _pin("tests/clients/versions.sh", r'JAVA_CLIENT_4:-([^}]+)\}'),
    "java39": _pin("tests/clients/versions.sh", r'JAVA_CLIENT_39:-([^}]+)\}'),
    "java_newest": _pin("tests/clients/versions.sh", r'JAVA_CLIENT_NEWEST:-([^}]+)\}'),
    "tools": _pin("tests/clients/versions.sh", r'KAFKA_TOOLS:-([^}]+)\}'),
    "franz_promised": _pin("tests/clients/versions.sh", r"^FRANZ_GO_PROMISED=(\S+)"),
    "franz": _pin("tests/go/go.mod", r"github.com/twmb/franz-go v(\S+)"),
    "streams": _pin("tests/e2e/test_streams.py", r'"STREAMS_VERSION", "([^"]+)"'),
    "streams_newest": _pin("tests/e2e/test_streams.py", r'"STREAMS_NEWEST", "([^"]+)"'),
    "connector": _pin("tests/flink/build.sh", r'FLINK_CONNECTOR_KAFKA:-([^}]+)\}'),
}
JAVA = f"Java kafka-clients {V['java4']}, {V['java39']}, {V['java_newest']}"
FRANZ = f"franz-go {V['franz_promised']}, {V['franz']}"
RDK = f"librdkafka (confluent-kafka {V['rdkafka']})"
CLIENTS = [
    ("test_java_go.py::*java-4*", f"Java kafka-clients {V['java4']}"),
    ("test_java_go.py::*java-3.9*", f"Java kafka-clients {V['java39']}"),
    ("test_java_go.py::*java-newest*", f"Java kafka-clients {V['java_newest']}"),
    ("test_*.py::*go-1.21.5*", f"franz-go {V['franz_promised']}"),
    ("test_*.py::*[[]go[]]", f"franz-go {V['franz']}"),
    ("test_java_go.py::test_franz_go_builds*", FRANZ),
    ("test_transactions.py::*java-4*", f"Java kafka-clients {V['java4']}"),
    ("test_transactions.py::*java-3.9*", f"Java kafka-clients {V['java39']}"),
    ("test_transactions.py::*java-newest*", f"Java kafka-clients {V['java_newest']}"),
    ("test_transactions.py::*" + V["rdkafka_promised"] + "*",
     f"librdkafka (confluent-kafka {V['rdkafka_promised']})"),
    ("test_transactions.py::test_kafka_transactions_tool*", f"Kafka CLI tools {V['tools']}"),
    ("test_groups_java_go.py::test_java_*", f"Java kafka-clients {V['java4']}"),
    ("test_groups_java_go.py::test_franz_go_*", f"franz-go {V['franz']}"),
    ("test_groups_java_go.py::test_mixed_*", f"{JAVA}; franz-go {V['franz']}; librdkafka"),
    ("test_compaction.py::test_java_and_franz_go_*", f"{JAVA}; {FRANZ}"),
    ("test_streams.py::*" + V["streams_newest"] + "*", f"Kafka Streams {V['streams_newest']}"),
    ("test_streams_groups.py::*", f"Kafka Streams {V['streams']} (group.protocol=streams); Kafka CLI tools {V['tools']}"),
    ("test_streams*.py::*", f"Kafka Streams {V['streams']}"),
    ("test_flink.py::*2.2.1*", f"Flink 2.2.1 + flink-connector-kafka {V['connector']}"),
    ("test_flink.py::*2.3.0*", f"Flink 2.3.0 + flink-connector-kafka {V['connector']}"),
    ("test_flink.py::test_flink_default_transaction_timeout_refused*",
     f"Flink 2.2.1 + flink-connector-kafka {V['connector']}"),
    ("test_admin_tools.py::test_debian_kcat*", "kcat (Debian, librdkafka 2.0.2)"),
    ("test_admin_tools.py::*", f"Kafka CLI tools {V['tools']}"),
    ("test_delegation_tokens.py::*", f"Kafka CLI tools {V['tools']}"),
    ("test_share_groups.py::*", f"Java kafka-clients {V['tools']} (KafkaShareConsumer); Kafka CLI tools {V['tools']}"),
    ("test_client_telemetry.py::*", f"librdkafka; Java kafka-clients {V['tools']} (Kafka CLI tools)"),
    ("test_kafka_python.py::*", f"kafka-python {V['kafka_python']}"),
    ("test_librdkafka.py::*promised*", f"librdkafka (confluent-kafka {V['rdkafka_promised']})"),
    ("test_librdkafka_suite.py::*", "librdkafka 2.15.0's own tests (its test-runner, built from source)"),
    ("test_raw_protocol.py::*", "raw Kafka protocol (the suite's own encoder)"),
    ("test_harness.py::*", "rutomq's benchmark harness"),
    ("test_cli.py::*", "the rutomq binary"),
    ("test_*.py::*", RDK),
]

# What a physical Kafka broker does that rutomq deliberately does not, and
# what it answers instead (kept in step with the README and DESIGN.md).
DIFFERENCES = """\
| Kafka behaviour | rutomq |
|---|---|
| Partition replicas on brokers, ISR, replica placement | Data lives in the object store (its durability is the store's). Metadata names one live agent per partition as leader (a rendezvous hash over the live agents), with replicas = ISR = [that agent]; any agent serves any partition, so a client that talks to another agent is served too. |
| `replication.factor`, replica assignments in CreateTopics and CreatePartitions | `replication.factor` -1 or >= 1 is accepted and has no effect. A manual replica assignment is checked as Kafka's controller checks one (CreateTopics: factor and count -1, partitions 0..n-1 each once; CreatePartitions: one list per partition added; both: non-empty lists of distinct live agents of one length) and gives the partition count; it places nothing (Metadata names the leader as for any partition). |
| Leader elections, preferred leaders, unclean election | None: when an agent leaves, the hash moves its partitions to the others at once (no data moves). ElectLeaders answers every existing partition ELECTION_NOT_NEEDED (its one replica, the preferred one, leads), as Kafka answers a single-replica partition. |
| Leader epochs, truncation after a leader change | A partition has one epoch, 0, for its whole life: nothing acknowledged is ever truncated (PostgreSQL orders every record before it is acknowledged), and a change of the leader Metadata names moves routing, not data. OffsetForLeaderEpoch answers epoch 0 with the high watermark, a later epoch with none (-1), a client ahead of epoch 0 with UNKNOWN_LEADER_EPOCH, as Kafka answers for a partition still at its first epoch. |
| Partition reassignments | None can be made: AlterPartitionReassignments refuses new replicas with INVALID_REPLICA_ASSIGNMENT ("rutomq partitions have no replicas to move"), a cancellation with NO_REASSIGNMENT_IN_PROGRESS; ListPartitionReassignments lists none. |
| Log directories, segments, index files | None on the agents. DescribeLogDirs reports one virtual directory per agent, the object store's URL (no credentials), holding the partitions Metadata names the agent leader of, each with its bytes in object storage; total and usable bytes -1 (an object store has no fixed capacity). AlterReplicaLogDirs to that directory succeeds with nothing moved, to any other is LOG_DIR_NOT_FOUND. Segment, index, flush and tiering topic configs are accepted, stored, described, and inert (DescribeConfigs says why). |
| Produce v0–2 (listed by Kafka 4 for librdkafka before 2.11, KAFKA-18659) | Listed in ApiVersions too; a request at one is answered UNSUPPORTED_VERSION for each partition in the version's layout (Kafka 4.1 closes the connection instead) and nothing is written. |
| The cleaner's threads and I/O throttle | One compactor thread per agent over the compacted partitions it leads; no `log.cleaner.io.max.bytes.per.second` throttle yet. |
| Transaction markers written by the coordinator to partition leaders | EndTxn writes every partition's marker, the offsets and the last stable offsets in one PostgreSQL transaction: no hanging or half-written transaction. |
| KRaft controller, quorum and broker-registration APIs | The 15 controller/broker-internal keys are not served (agents register in PostgreSQL). DescribeQuorum is answered INVALID_REQUEST with why (no KRaft quorum: the ordered metadata is PostgreSQL's), so `kafka-metadata-quorum` exits 1 at once with that message. |
| Dynamic broker configs set per broker | The topic defaults among them (`log.retention.ms`, `message.max.bytes`, ...) are cluster-wide on rutomq (`--entity-default`; one agent's value is INVALID_REQUEST with why: any agent serves any partition). Kafka's other dynamic broker configs are stored and described with no effect (the documentation field says so); those rutomq sets by its flags or TLS files (listeners, SASL mechanisms, `ssl.*`, `max.connections*`) are refused with where to set them. |
| Broker loggers (log4j names) | The agent's tracing targets, named with dots (`rutomq.api.produce`), `root` the default; SET and DELETE as in Kafka, kept until restart. |
| Share-partition state kept by a share coordinator (`__share_group_state`), partition leaders holding the in-flight records | Each share-partition's state is a PostgreSQL row changed by compare-and-set, so consumers of one partition may fetch through any agents at once; the share-state APIs (83–87) read and write that row (a written state's leading acknowledged records are done at once: the start moves past them). Share sessions live on the client's connection. |
| Streams groups' internal topics created by the broker through its controller (KIP-1071) | The agent answering the heartbeat creates them through CreateTopics' own path with the member's rights, and the coordinator learns them at once; a streams group's topology is stored in its PostgreSQL group row. |
| Client telemetry (KIP-714) exported by a broker plugin | Built in: pushed client metrics are exported on `/metrics` as `rutomq_client_metric` (bounded); sums are asked cumulative (`delta_temporality` false). With `--client-telemetry-topic` each push is also written into a topic as OTLP (what Kafka's plugin plus an OpenTelemetry collector would write there). |
| ListOffsets `-6` (earliest pending upload, KIP-1023, tiered storage) | No offset (-1), as Kafka answers for a topic without tiered storage: a record is in the object store before it is acknowledged, so nothing is ever pending upload. |
| Feature flags (KIP-584) | ApiVersions lists `group.version` 1 (KIP-848), `share.version` 1 (KIP-932) and `streams.version` 1 (KIP-1071), epoch 0; every other feature is at level 0 for clients (`transaction.version` 0: Java 4.x and franz-go producers keep the original transaction protocol). UpdateFeatures succeeds only when it keeps a level and refuses any change whole with INVALID_UPDATE_VERSION and why. |
"""


def _cases(xml_path):
    root = ET.parse(xml_path).getroot()
    for tc in root.iter("testcase"):
        module = tc.get("classname", "").split(".")[-1]
        name = tc.get("name", "")
        if tc.find("skipped") is not None:
            outcome = "skipped"
        elif tc.find("failure") is not None or tc.find("error") is not None:
            outcome = "FAIL"
        else:
            outcome = "pass"
        yield f"{module}.py::{name}", outcome, float(tc.get("time", "0"))


def _client(test_id):
    for pattern, client in CLIENTS:
        if fnmatch.fnmatchcase(test_id, pattern):
            return client
    return "—"


def main():
    xml_path, date, rev = sys.argv[1:4]
    by_client = defaultdict(list)
    total = defaultdict(int)
    for test_id, outcome, secs in _cases(xml_path):
        by_client[_client(test_id)].append((test_id, outcome, secs))
        total[outcome] += 1
    out = [f"# rutomq compatibility result, {date}", "",
           f"rutomq at `{rev}`, tested by `tests/compat/run.sh` (the end-to-end suite of "
           "`scripts/test.sh`, each test against real agents over TCP with a real PostgreSQL; "
           "clients at the versions below, unmodified). "
           f"{total['pass']} passed, {total['FAIL']} failed, {total['skipped']} skipped.", "",
           "## By client", "", "| Client | Passed | Failed | Skipped |", "|---|---|---|---|"]
    order = sorted(by_client, key=lambda c: (c.startswith(("raw", "rutomq", "the rutomq", "—")), c))
    for c in order:
        rows = by_client[c]
        n = {o: sum(1 for _, x, _ in rows if x == o) for o in ("pass", "FAIL", "skipped")}
        out.append(f"| {c} | {n['pass']} | {n['FAIL']} | {n['skipped']} |")
    out += ["", "## Scenarios", "",
            "Each test's file starts with what it proves and how; the fault cases (agents, "
            "PostgreSQL, client processes killed, paused or restarted mid-run) are named in the test.", ""]
    for c in order:
        out += [f"### {c}", "", "| Test | Result | Seconds |", "|---|---|---|"]
        for test_id, outcome, secs in sorted(by_client[c]):
            out.append(f"| `{test_id}` | {outcome} | {secs:.0f} |")
        out.append("")
    out += ["## What rutomq answers instead of a physical broker", "", DIFFERENCES]
    sys.stdout.write("\n".join(out))


if __name__ == "__main__":
    main()
