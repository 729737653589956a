#!/usr/bin/env bash
# Apache Kafka's own perf tools (org.apache.kafka:kafka-tools, from Maven
# Central) against any Kafka-compatible bootstrap: rutomq or a real Kafka
# started with benches/kafka/start-kafka.sh.
#
# Usage:
#   benches/perf-tools.sh fetch
#       fetch kafka-tools and its runtime dependencies into $PERF_LIBS and
#       compile the assign() consumer and topic helper into $PERF_CLASSES
#   benches/perf-tools.sh create-topic BOOTSTRAP TOPIC PARTITIONS
#       create TOPIC (replication factor 1) with the Java Admin client
#   benches/perf-tools.sh produce BOOTSTRAP TOPIC NUM_RECORDS
#       org.apache.kafka.tools.ProducerPerformance, 1 KiB records, unthrottled,
#       acks=all linger.ms=5 batch.size=131072 compression.type=none
#   benches/perf-tools.sh consume BOOTSTRAP TOPIC NUM_RECORDS
#       AssignPerf (below): a KafkaConsumer with assign() on every partition of
#       TOPIC from the earliest offset, no group.id, no offset commits, reading
#       until NUM_RECORDS records arrived; prints ConsumerPerformance's columns.
#       Kafka's ConsumerPerformance always subscribe()s with a group.id (it
#       needs FindCoordinator/JoinGroup/SyncGroup), so it cannot run against a
#       broker without consumer groups; AssignPerf uses the same consumer
#       properties ConsumerPerformance sets (receive.buffer.bytes=2 MiB,
#       max.partition.fetch.bytes=1 MiB, check.crcs=false, byte-array
#       deserializers, poll(100 ms), 10 s timeout without records).
#   benches/perf-tools.sh consumer-perf BOOTSTRAP TOPIC NUM_RECORDS
#       Kafka's ConsumerPerformance itself (needs consumer groups)
#
# Environment (all optional):
#   KAFKA_VERSION   kafka-tools version (default 4.1.1)
#   PERF_LIBS       jar folder (default <repo>/tests/.cache/perf/libs)
#   PERF_HEAP       client JVM heap (default 512m, as kafka-producer-perf-test.sh)
#   PERF_EXTRA_PRODUCER_PROPS  extra key=value pairs appended to --producer-props
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
PERF_LIBS="${PERF_LIBS:-$repo/tests/.cache/perf/libs}"
PERF_HEAP="${PERF_HEAP:-512m}"
cache="$(dirname "$PERF_LIBS")"
PERF_CLASSES="$cache/classes-$KAFKA_VERSION"

die() { echo "perf-tools: $*" >&2; exit 1; }

write_pom() {
    cat >"$cache/pom.xml" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by benches/perf-tools.sh: Kafka's perf tools and their runtime
     dependencies, copied with dependency:copy-dependencies. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>rutomq.bench</groupId>
  <artifactId>kafka-perf-tools-fetch</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <properties>
    <kafka.version>4.1.1</kafka.version>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>${kafka.version}</version>
    </dependency>
    <!-- the clients log through slf4j 1.7; a simple binding to stderr -->
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-simple</artifactId>
      <version>1.7.36</version>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>3.8.1</version>
        <configuration>
          <includeScope>runtime</includeScope>
        </configuration>
      </plugin>
    </plugins>
  </build>
</project>
EOF
}

write_java() {
    mkdir -p "$cache/src"
    cat >"$cache/src/AssignPerf.java" <<'EOF'
// Written by benches/perf-tools.sh. A group-less consumer throughput probe:
// assign() every partition of a topic, seek to the beginning, poll until the
// expected record count arrived. Consumer properties mirror Kafka's
// ConsumerPerformance so the two are comparable where both can run.
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class AssignPerf {
    public static void main(String[] args) throws Exception {
        if (args.length == 4 && args[0].equals("create-topic")) { createTopic(args[1], args[2], Integer.parseInt(args[3])); return; }
        if (args.length == 4 && args[0].equals("consume")) { consume(args[1], args[2], Long.parseLong(args[3])); return; }
        System.err.println("usage: AssignPerf create-topic BOOTSTRAP TOPIC PARTITIONS | consume BOOTSTRAP TOPIC NUM_RECORDS");
        System.exit(2);
    }

    static void createTopic(String bootstrap, String topic, int partitions) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(p)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            System.out.printf("created topic %s with %d partitions%n", topic, d.partitions().size());
        }
    }

    static void consume(String bootstrap, String topic, long expected) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.RECEIVE_BUFFER_CONFIG, "2097152");
        p.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "1048576");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.CHECK_CRCS_CONFIG, "false");
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "perf-consumer-client");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        long timeoutMs = 10_000;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(topic)) tps.add(new TopicPartition(topic, pi.partition()));
            c.assign(tps);
            c.seekToBeginning(tps);
            long start = System.currentTimeMillis();
            long firstRecordAt = -1, lastConsumed = start;
            long records = 0, bytes = 0;
            while (records < expected && System.currentTimeMillis() - lastConsumed <= timeoutMs) {
                ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(100));
                if (!rs.isEmpty()) {
                    long now = System.currentTimeMillis();
                    if (firstRecordAt < 0) firstRecordAt = now;
                    lastConsumed = now;
                }
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    records++;
                    if (r.key() != null) bytes += r.key().length;
                    if (r.value() != null) bytes += r.value().length;
                }
            }
            long end = System.currentTimeMillis();
            if (records < expected)
                System.out.printf("WARNING: Exiting before consuming the expected number of messages: timeout (%d ms) exceeded.%n", timeoutMs);
            double mb = bytes / 1048576.0;
            double secs = (end - start) / 1000.0;
            double fetchSecs = firstRecordAt < 0 ? 0 : (end - firstRecordAt) / 1000.0;
            System.out.println("partitions, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, elapsed.ms, first.record.ms, fetch.MB.sec, fetch.nMsg.sec");
            System.out.printf("%d, %.4f, %.4f, %d, %.4f, %d, %d, %.4f, %.4f%n", tps.size(), mb, mb / secs, records, records / secs,
                    end - start, firstRecordAt < 0 ? -1 : firstRecordAt - start,
                    fetchSecs > 0 ? mb / fetchSecs : 0, fetchSecs > 0 ? records / fetchSecs : 0);
            if (records < expected) System.exit(1);
        }
    }
}
EOF
}

fetch() {
    mkdir -p "$cache"
    exec 9>"$cache/.fetch.lock"
    flock 9
    if [[ ! -f "$PERF_LIBS/.version" || "$(cat "$PERF_LIBS/.version")" != "$KAFKA_VERSION" ]]; then
        echo "perf-tools: fetching kafka-tools $KAFKA_VERSION into $PERF_LIBS" >&2
        rm -rf "$PERF_LIBS"
        write_pom
        local log="$cache/fetch-$KAFKA_VERSION.log"
        mvn -B -q -Dstyle.color=never -f "$cache/pom.xml" dependency:copy-dependencies \
            -Dkafka.version="$KAFKA_VERSION" -DoutputDirectory="$PERF_LIBS" >"$log" 2>&1 \
            || { cat "$log" >&2; die "mvn dependency:copy-dependencies failed"; }
        ls "$PERF_LIBS"/kafka-tools-"$KAFKA_VERSION".jar >/dev/null || die "kafka-tools jar missing after fetch"
        echo "$KAFKA_VERSION" >"$PERF_LIBS/.version"
        rm -rf "$PERF_CLASSES"
    fi
    if [[ ! -f "$PERF_CLASSES/AssignPerf.class" ]]; then
        write_java
        mkdir -p "$PERF_CLASSES"
        javac -nowarn -d "$PERF_CLASSES" -cp "$PERF_LIBS/*" "$cache/src/AssignPerf.java" \
            || die "javac AssignPerf failed"
    fi
    exec 9>&-
}

run_java() {
    command -v java >/dev/null || die "java not found (Java 17+)"
    exec java -Xms"$PERF_HEAP" -Xmx"$PERF_HEAP" -XX:+UseG1GC -Djava.awt.headless=true \
        -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -Dorg.slf4j.simpleLogger.logFile=System.err \
        -cp "$PERF_CLASSES:$PERF_LIBS/*" "$@"
}

need3() { [[ $# -eq 3 ]] || die "usage: $0 ${sub} BOOTSTRAP TOPIC NUM"; [[ "$3" =~ ^[0-9]+$ ]] || die "NUM must be a number, got $3"; }

sub="${1:-}"
case "$sub" in
    fetch) fetch; echo "FETCHED kafka-tools $KAFKA_VERSION $PERF_LIBS" ;;
    create-topic)
        shift; need3 "$@"; fetch
        run_java AssignPerf create-topic "$1" "$2" "$3" ;;
    produce)
        shift; need3 "$@"; fetch
        # shellcheck disable=SC2086
        run_java org.apache.kafka.tools.ProducerPerformance \
            --topic "$2" --num-records "$3" --record-size 1024 --throughput -1 \
            --producer-props bootstrap.servers="$1" acks=all linger.ms=5 batch.size=131072 \
            compression.type=none ${PERF_EXTRA_PRODUCER_PROPS:-} ;;
    consume)
        shift; need3 "$@"; fetch
        run_java AssignPerf consume "$1" "$2" "$3" ;;
    consumer-perf)
        shift; need3 "$@"; fetch
        run_java org.apache.kafka.tools.ConsumerPerformance \
            --bootstrap-server "$1" --topic "$2" --messages "$3" --timeout 10000 ;;
    -h|--help|"") sed -n '2,33p' "$0"; [[ -n "$sub" ]] ;;
    *) die "unknown subcommand $sub (fetch | create-topic | produce | consume | consumer-perf)" ;;
esac
