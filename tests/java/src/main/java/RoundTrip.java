// RoundTrip: produce N keyed records with the official Java client (idempotent,
// acks=all), then read them back by direct assignment (no consumer group) and
// check what a user depends on: every record exactly once, offsets contiguous
// from 0 in every partition, per-key order, headers intact, acknowledged
// offsets equal to consumed offsets, high watermarks equal to record counts.
//
// Usage: java -jar roundtrip.jar --bootstrap HOST:PORT --topic T --partitions P --records N
//        [--pace-ms M]  (sending, and reading back, each take at least M ms)
// Last line of stdout: "RESULT ok produced=N consumed=N" (exit 0) or
// "RESULT fail <reason>" (exit 1).
//
// The same jar holds the consumer-group programs of
// tests/e2e/test_groups_java_go.py, selected by the first argument:
//   java -jar roundtrip.jar group-consume ...   (GroupConsume.java)
//   java -jar roundtrip.jar group-admin ...     (GroupAdmin.java)

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class RoundTrip {
    static final int KEYS = 97;
    static final long TOPIC_READY_TIMEOUT_MS = 30_000;
    static final long CONSUME_TIMEOUT_MS = 60_000;
    static final String PAD = "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz01";

    static final class Fail extends Exception {
        Fail(String reason) {
            super(reason);
        }
    }

    public static void main(String[] args) {
        // Client warnings go to stderr; set before the first logger is created.
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        // Transactions (tests/e2e/test_transactions.py), same jar.
        if (args.length > 0 && args[0].equals("txn")) {
            System.exit(Txn.main(Arrays.copyOfRange(args, 1, args.length)));
        }
        // Reading a topic to its end offsets (tests/e2e/test_compaction.py), same jar.
        if (args.length > 0 && args[0].equals("dump")) {
            System.exit(Dump.main(Arrays.copyOfRange(args, 1, args.length)));
        }
        // Consumer-group programs (tests/e2e/test_groups_java_go.py), same jar.
        if (args.length > 0 && (args[0].equals("group-consume") || args[0].equals("group-admin"))) {
            String[] rest = Arrays.copyOfRange(args, 1, args.length);
            String level = System.getenv("GROUP_LOG");
            System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
            System.setProperty("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");
            // The group coordinator's view (joins, generations, revocations) at info.
            System.setProperty("org.slf4j.simpleLogger.log.org.apache.kafka.clients.consumer.internals",
                    level != null ? level : "info");
            if (level != null) {
                System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", level);
            }
            System.exit(args[0].equals("group-consume") ? GroupConsume.main(rest) : GroupAdmin.main(rest));
        }
        int code;
        try {
            String bootstrap = null;
            String topic = null;
            int partitions = -1;
            int records = -1;
            long paceMs = 0;
            for (int a = 0; a < args.length; a++) {
                String v = a + 1 < args.length ? args[a + 1] : null;
                switch (args[a]) {
                    case "--bootstrap": bootstrap = v; a++; break;
                    case "--topic": topic = v; a++; break;
                    case "--partitions": partitions = Integer.parseInt(v); a++; break;
                    case "--records": records = Integer.parseInt(v); a++; break;
                    case "--pace-ms": paceMs = Long.parseLong(v); a++; break;
                    case "--client-property": {
                        // KEY=VALUE for the producer, consumer and admin
                        // (security settings, say); repeatable.
                        int eq = v == null ? -1 : v.indexOf('=');
                        if (eq < 1) throw new Fail("--client-property wants KEY=VALUE, got " + v);
                        EXTRA.put(v.substring(0, eq), v.substring(eq + 1));
                        a++;
                        break;
                    }
                    default: throw new Fail("unknown argument " + args[a]);
                }
            }
            if (bootstrap == null || topic == null || partitions < 1 || records < 1 || paceMs < 0) {
                throw new Fail("usage: --bootstrap HOST:PORT --topic T --partitions P --records N [--pace-ms M]");
            }
            run(bootstrap, topic, partitions, records, paceMs);
            System.out.println("RESULT ok produced=" + records + " consumed=" + records);
            code = 0;
        } catch (Fail f) {
            System.out.println("RESULT fail " + f.getMessage());
            code = 1;
        } catch (Throwable t) {
            t.printStackTrace();
            Throwable root = t;
            while (root.getCause() != null) {
                root = root.getCause();
            }
            System.out.println("RESULT fail exception " + t + (root != t ? " caused by " + root : ""));
            code = 1;
        }
        System.out.flush();
        // Exit explicitly: a stuck client thread must not keep the JVM alive.
        System.exit(code);
    }

    /** Client settings given with --client-property, added to every client. */
    static final Properties EXTRA = new Properties();

    static String value(int i) {
        return "value-" + i + "|" + PAD;
    }

    static int indexOfValue(String value) throws Fail {
        if (value == null || !value.startsWith("value-") || value.indexOf('|') < 0) {
            throw new Fail("malformed value " + value);
        }
        try {
            return Integer.parseInt(value.substring(6, value.indexOf('|')));
        } catch (NumberFormatException e) {
            throw new Fail("malformed value " + value);
        }
    }

    /**
     * Holds back until `done` of `n` is due when `n` should take `paceMs`
     * from `start` (System.nanoTime): a paced run keeps its connections busy
     * for the whole time, whatever the broker's speed.
     */
    static void pace(long start, long paceMs, long done, long n) throws InterruptedException {
        if (paceMs == 0) {
            return;
        }
        long dueNanos = start + TimeUnit.MILLISECONDS.toNanos(paceMs) * done / n;
        long aheadMs = TimeUnit.NANOSECONDS.toMillis(dueNanos - System.nanoTime());
        if (aheadMs > 0) {
            Thread.sleep(aheadMs);
        }
    }

    static void run(String bootstrap, String topic, int partitions, int n, long paceMs) throws Exception {
        long t0 = System.nanoTime();
        createTopic(bootstrap, topic, partitions);
        long t1 = System.nanoTime();
        System.out.printf("topic %s created with %d partitions in %d ms%n", topic, partitions, (t1 - t0) / 1_000_000);

        // ---- produce ----
        int[] ackPartition = new int[n];
        long[] ackOffset = new long[n];
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.CLIENT_ID_CONFIG, "roundtrip-java-producer");
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.putAll(EXTRA);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            List<Future<RecordMetadata>> futures = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                pace(t1, paceMs, i, n);
                ProducerRecord<String, String> rec = new ProducerRecord<>(topic, "k" + (i % KEYS), value(i));
                rec.headers().add("idx", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                futures.add(producer.send(rec));
            }
            producer.flush();
            for (int i = 0; i < n; i++) {
                RecordMetadata md;
                try {
                    md = futures.get(i).get(90, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    throw new Fail("send of record " + i + " failed: " + e.getCause());
                } catch (TimeoutException e) {
                    throw new Fail("send of record " + i + " not acknowledged in 90 s");
                }
                if (!md.hasOffset()) {
                    throw new Fail("send of record " + i + " acknowledged without an offset");
                }
                ackPartition[i] = md.partition();
                ackOffset[i] = md.offset();
            }
        }
        long t2 = System.nanoTime();
        System.out.printf("produced %d records in %d ms%n", n, (t2 - t1) / 1_000_000);

        // Acknowledged positions must be distinct and, per partition, exactly 0..count-1.
        long[] ackCount = new long[partitions];
        for (int i = 0; i < n; i++) {
            if (ackPartition[i] < 0 || ackPartition[i] >= partitions) {
                throw new Fail("record " + i + " acknowledged on partition " + ackPartition[i]);
            }
            ackCount[ackPartition[i]]++;
        }
        boolean[][] ackSeen = new boolean[partitions][];
        for (int p = 0; p < partitions; p++) {
            ackSeen[p] = new boolean[(int) ackCount[p]];
        }
        for (int i = 0; i < n; i++) {
            int p = ackPartition[i];
            long o = ackOffset[i];
            if (o < 0 || o >= ackCount[p]) {
                throw new Fail("record " + i + " acknowledged at p" + p + "@" + o + " outside 0.." + (ackCount[p] - 1));
            }
            if (ackSeen[p][(int) o]) {
                throw new Fail("two records acknowledged at the same position p" + p + "@" + o);
            }
            ackSeen[p][(int) o] = true;
        }

        // ---- consume (direct assignment, no group) ----
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.CLIENT_ID_CONFIG, "roundtrip-java-consumer");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        int[] seenPartition = new int[n];
        long[] seenOffset = new long[n];
        Arrays.fill(seenOffset, -1);
        long[] nextOffset = new long[partitions];
        int[] lastIdxOfKey = new int[KEYS];
        Arrays.fill(lastIdxOfKey, -1);
        int[] partitionOfKey = new int[KEYS];
        Arrays.fill(partitionOfKey, -1);
        long consumed = 0;
        Map<TopicPartition, Long> endOffsets;
        cp.putAll(EXTRA);
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CONSUME_TIMEOUT_MS);
            while (consumed < n) {
                if (System.nanoTime() > deadline) {
                    throw new Fail("timeout: consumed " + consumed + " of " + n + " records in "
                            + CONSUME_TIMEOUT_MS / 1000 + " s; next offsets " + Arrays.toString(nextOffset)
                            + " acknowledged counts " + Arrays.toString(ackCount));
                }
                pace(t2, paceMs, consumed, n);
                ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : batch) {
                    consumed++;
                    check(r, topic, partitions, n, nextOffset, seenPartition, seenOffset, lastIdxOfKey, partitionOfKey);
                }
            }
            endOffsets = consumer.endOffsets(tps, Duration.ofSeconds(30));
        }
        long t3 = System.nanoTime();
        System.out.printf("consumed %d records in %d ms%n", consumed, (t3 - t2) / 1_000_000);

        // ---- compare ----
        for (int i = 0; i < n; i++) {
            if (seenOffset[i] < 0) {
                throw new Fail("record " + i + " never consumed");
            }
            if (seenPartition[i] != ackPartition[i] || seenOffset[i] != ackOffset[i]) {
                throw new Fail("record " + i + " acknowledged at p" + ackPartition[i] + "@" + ackOffset[i]
                        + " but consumed at p" + seenPartition[i] + "@" + seenOffset[i]);
            }
        }
        for (int p = 0; p < partitions; p++) {
            if (nextOffset[p] != ackCount[p]) {
                throw new Fail("partition " + p + ": consumed " + nextOffset[p] + " records, acknowledged " + ackCount[p]);
            }
            Long end = endOffsets.get(new TopicPartition(topic, p));
            if (end == null || end != ackCount[p]) {
                throw new Fail("partition " + p + ": high watermark " + end + " but " + ackCount[p] + " records written");
            }
        }
    }

    static void check(ConsumerRecord<String, String> r, String topic, int partitions, int n, long[] nextOffset,
                      int[] seenPartition, long[] seenOffset, int[] lastIdxOfKey, int[] partitionOfKey) throws Fail {
        int p = r.partition();
        if (!topic.equals(r.topic()) || p < 0 || p >= partitions) {
            throw new Fail("record from unexpected " + r.topic() + "-" + p);
        }
        if (r.offset() != nextOffset[p]) {
            throw new Fail("partition " + p + ": expected offset " + nextOffset[p] + " got " + r.offset());
        }
        nextOffset[p]++;
        int i = indexOfValue(r.value());
        if (i < 0 || i >= n) {
            throw new Fail("value index " + i + " out of range at p" + p + "@" + r.offset());
        }
        if (seenOffset[i] >= 0) {
            throw new Fail("record " + i + " consumed twice: p" + seenPartition[i] + "@" + seenOffset[i]
                    + " and p" + p + "@" + r.offset());
        }
        seenPartition[i] = p;
        seenOffset[i] = r.offset();
        String key = "k" + (i % KEYS);
        if (!key.equals(r.key())) {
            throw new Fail("record " + i + " has key " + r.key() + ", expected " + key);
        }
        Header h = r.headers().lastHeader("idx");
        if (h == null || h.value() == null) {
            throw new Fail("record " + i + " has no idx header");
        }
        String idx = new String(h.value(), StandardCharsets.UTF_8);
        if (!idx.equals(Integer.toString(i))) {
            throw new Fail("record " + i + " has idx header " + idx);
        }
        int k = i % KEYS;
        if (partitionOfKey[k] >= 0 && partitionOfKey[k] != p) {
            throw new Fail("key " + key + " seen in partitions " + partitionOfKey[k] + " and " + p);
        }
        partitionOfKey[k] = p;
        if (i <= lastIdxOfKey[k]) {
            throw new Fail("key " + key + " out of order: record " + i + " after record " + lastIdxOfKey[k]);
        }
        lastIdxOfKey[k] = i;
    }

    static void createTopic(String bootstrap, String topic, int partitions) throws Exception {
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        ap.put(AdminClientConfig.CLIENT_ID_CONFIG, "roundtrip-java-admin");
        ap.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        ap.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        ap.putAll(EXTRA);
        try (Admin admin = Admin.create(ap)) {
            try {
                admin.createTopics(Collections.singleton(new NewTopic(topic, partitions, (short) 1)))
                        .all().get(30, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                throw new Fail("create topic " + topic + ": " + e.getCause());
            } catch (TimeoutException e) {
                throw new Fail("create topic " + topic + ": no answer in 30 s");
            }
            // Wait until metadata shows every partition with a leader.
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(TOPIC_READY_TIMEOUT_MS);
            String last = "no answer";
            while (true) {
                try {
                    Map<String, TopicDescription> d = admin.describeTopics(Collections.singleton(topic))
                            .allTopicNames().get(15, TimeUnit.SECONDS);
                    TopicDescription td = d.get(topic);
                    int withLeader = 0;
                    for (TopicPartitionInfo pi : td.partitions()) {
                        if (pi.leader() != null && !pi.leader().isEmpty()) {
                            withLeader++;
                        }
                    }
                    if (td.partitions().size() == partitions && withLeader == partitions) {
                        return;
                    }
                    if (td.partitions().size() > partitions) {
                        throw new Fail("topic " + topic + " has " + td.partitions().size()
                                + " partitions, created with " + partitions);
                    }
                    last = td.partitions().size() + " partitions, " + withLeader + " with a leader";
                } catch (ExecutionException | TimeoutException e) {
                    last = String.valueOf(e instanceof ExecutionException ? e.getCause() : e);
                }
                if (System.nanoTime() > deadline) {
                    throw new Fail("topic " + topic + " not ready after " + TOPIC_READY_TIMEOUT_MS / 1000 + " s: " + last);
                }
                Thread.sleep(100);
            }
        }
    }

    private RoundTrip() {
    }
}
