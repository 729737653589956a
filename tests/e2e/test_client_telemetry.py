# What this proves: client telemetry (KIP-714) works with unmodified
# clients. A client-metrics subscription set with kafka-configs selects
# clients by client id; librdkafka (confluent-kafka) and the Java producer
# (kafka-clients 4.2.0, through Kafka's own ProducerPerformance tool) ask
# for their subscription, push their metrics at its interval, and the agent
# exports what they pushed on /metrics as rutomq_client_metric, labelled
# with the metric's name, the client instance and client id; a client the
# subscription does not select pushes nothing; removing the subscription
# lists it no more.
# How: one agent, the kafka-tools 4.2.0 jars through tests/clients/run.sh.

import threading
import time

import pytest
from confluent_kafka import Producer

from kafkautil import kafka_tool, unique_topic, wait_for_topic
from test_java_go import roundtrip_clients  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(300)


def series(agent, name_prefix):
    """The rutomq_client_metric lines whose metric name starts so."""
    _, body = agent.http("/metrics")
    return [ln for ln in body.decode().splitlines()
            if ln.startswith('rutomq_client_metric{name="' + name_prefix)]


def test_clients_push_their_metrics_to_the_agent(agent, request):
    run_sh = request.getfixturevalue("roundtrip_clients")
    boot = agent.bootstrap
    topic = unique_topic("telemetry")
    sub = unique_topic("apps")

    def tool(cls, *args, ok=True):
        res = kafka_tool(run_sh, cls, "--bootstrap-server", boot, *args, ok=ok)
        return res.stdout + res.stderr

    tool("kafka.admin.ConfigCommand", "--alter", "--entity-type", "client-metrics", "--entity-name", sub,
         "--add-config", "metrics=org.apache.kafka.producer.,interval.ms=1000,match=[client_id=app-.*]")
    p0 = Producer({"bootstrap.servers": boot})
    p0.produce(topic, b"create")
    p0.flush(30)
    wait_for_topic(boot, topic)

    # librdkafka: selected by its client id, pushes every second.
    def produce_for(client_id, seconds):
        p = Producer({"bootstrap.servers": boot, "client.id": client_id, "linger.ms": 5})
        end = time.time() + seconds
        while time.time() < end:
            p.produce(topic, b"x" * 100)
            p.poll(0.05)
        p.flush(30)

    unselected = threading.Thread(target=produce_for, args=("batch-job", 6))
    unselected.start()
    produce_for("app-rd", 6)
    unselected.join()
    lines = series(agent, "org.apache.kafka.producer.")
    rd = [ln for ln in lines if 'client_id="app-rd"' in ln]
    assert rd, "\n".join(lines) or "no client metrics exported"
    assert not [ln for ln in lines if 'client_id="batch-job"' in ln], "an unselected client pushed"
    assert any("client_instance_id=" in ln for ln in rd), rd

    # The Java producer (KIP-714's reference client).
    res = kafka_tool(run_sh, "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                     "--num-records", "1500", "--record-size", "100", "--throughput", "250",
                     "--producer-props", f"bootstrap.servers={boot}", "client.id=app-java")
    out = res.stdout + res.stderr
    assert "records sent" in out, out
    java = [ln for ln in series(agent, "org.apache.kafka.producer.") if 'client_id="app-java"' in ln]
    assert java, "the Java producer's metrics were not exported"
    m = agent.metrics()
    assert m.get("rutomq_client_telemetry_pushes_total", 0) >= 3, m

    # The subscription removed: listed no more.
    tool("kafka.admin.ConfigCommand", "--alter", "--entity-type", "client-metrics", "--entity-name", sub,
         "--delete-config", "metrics,interval.ms,match")
    assert sub not in tool("org.apache.kafka.tools.ClientMetricsCommand", "--list").split()
