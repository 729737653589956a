// GroupConsume: one consumer-group member with the official Java client, run
// as a subprocess by tests/e2e/test_groups_java_go.py so that a test can
// SIGKILL it (a crash: no LeaveGroup, no last commit) or SIGTERM it (a clean
// close: KafkaConsumer.close() sends LeaveGroup, or the leaving heartbeat of
// the consumer protocol).
//
// It subscribes to one topic and loops: poll, record every record of the
// batch as processed, then commit synchronously (commitSync with explicit
// offsets) the next offset of every partition processed since the last
// commit, once --commit-interval-ms has passed since the last commit (0:
// after every poll), and record the commit only after the broker accepted it.
// On revocation it commits what it processed of the revoked partitions first;
// on loss it forgets that progress (committing it later could move another
// owner's offset backwards). So what the output says was committed really
// was, and what was processed but not recorded as committed may be processed
// again by the next owner.
//
// Usage: java -jar roundtrip.jar group-consume --bootstrap H:P --topic T --group G
//          [--name N] [--protocol classic|consumer] [--assignor A]
//          [--instance-id ID] [--session-timeout-ms MS] [--heartbeat-interval-ms MS]
//          [--commit-interval-ms MS] [--idle-exit-ms MS] [--conf key=value]...
//   --protocol classic (default): --assignor range|roundrobin|sticky|cooperative-sticky
//     sets partition.assignment.strategy (unset: the client's default, range +
//     cooperative-sticky); session timeout default 6000, heartbeat 500.
//   --protocol consumer (KIP-848): --assignor sets group.remote.assignor
//     (unset: the broker's default); session timeout and heartbeat interval
//     are the broker's (the client refuses them).
//   --idle-exit-ms N: close cleanly and exit 0 once N ms passed without a
//     record after the first assignment. Without it: run until SIGTERM/SIGINT.
//
// Output: one JSON object per line on stdout, each written with one write(2)
// (a SIGKILL never leaves half a line). Every line has "ev", "t" (seconds of
// CLOCK_MONOTONIC, the clock of Python's time.monotonic()), "wall" and "name":
//   start {pid, client}          subscribed
//   assign {parts}  revoke {parts}  lost {parts}     rebalance callbacks
//   recs {r: [[partition, offset, idx], ..]}         one poll's records; idx from the
//                                                    value "v<8 digits>|..." (null if not)
//   committing {offsets: {"p": next}}   commit {offsets}   commit_err {err, offsets}
//   idle   closing   closed   crash {err} (exit 3)
// Client logs go to stderr (warn; consumer internals at info; GROUP_LOG=debug for more).

import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

final class GroupConsume {
    private String name = "java";
    private String topic;
    private KafkaConsumer<byte[], byte[]> consumer;
    private final Map<Integer, Long> pending = new HashMap<>();  // partition -> next offset, not yet committed
    private final Set<Integer> assigned = new HashSet<>();
    private volatile boolean stop;
    private volatile int exitCode = 0;
    private final CountDownLatch done = new CountDownLatch(1);

    /** The kafka-clients version on the class path (its kafka/kafka-version.properties; the
     *  AppInfoParser class that also knows it moved to an internal package in 4.4). */
    static String kafkaClientsVersion() {
        try (java.io.InputStream in = KafkaConsumer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            Properties p = new Properties();
            if (in != null) {
                p.load(in);
            }
            return p.getProperty("version", "unknown");
        } catch (java.io.IOException e) {
            return "unknown";
        }
    }

    static int main(String[] args) {
        return new GroupConsume().run(args);
    }

    static double mono() {
        return System.nanoTime() / 1e9;  // CLOCK_MONOTONIC on Linux
    }

    private Json ev(String ev) {
        return Json.obj().put("ev", ev).put("t", mono()).put("wall", System.currentTimeMillis() / 1e3).put("name", name);
    }

    private static List<Integer> partitions(Collection<TopicPartition> tps) {
        List<Integer> out = new ArrayList<>();
        for (TopicPartition tp : tps) {
            out.add(tp.partition());
        }
        Collections.sort(out);
        return out;
    }

    private static Map<String, Long> offsetsJson(Map<Integer, Long> m) {
        Map<String, Long> out = new TreeMap<>();
        for (Map.Entry<Integer, Long> e : m.entrySet()) {
            out.put(Integer.toString(e.getKey()), e.getValue());
        }
        return out;
    }

    static Integer idxOf(byte[] v) {
        if (v == null || v.length < 10 || v[0] != 'v' || v[9] != '|') {
            return null;
        }
        try {
            return Integer.parseInt(new String(v, 1, 8, StandardCharsets.US_ASCII));
        } catch (NumberFormatException e) {
            return null;
        }
    }

    /** Commits the pending offsets of `only` (null: every partition) that are still assigned. */
    private void commit(Collection<Integer> only, String why) {
        Map<Integer, Long> next = new TreeMap<>();
        for (Map.Entry<Integer, Long> e : pending.entrySet()) {
            if ((only == null || only.contains(e.getKey())) && assigned.contains(e.getKey())) {
                next.put(e.getKey(), e.getValue());
            }
        }
        if (next.isEmpty()) {
            return;
        }
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (Map.Entry<Integer, Long> e : next.entrySet()) {
            offsets.put(new TopicPartition(topic, e.getKey()), new OffsetAndMetadata(e.getValue()));
        }
        ev("committing").put("offsets", offsetsJson(next)).put("why", why).println();
        for (int attempt = 0; ; attempt++) {
            try {
                consumer.commitSync(offsets, Duration.ofSeconds(30));
                break;
            } catch (WakeupException e) {
                // SIGTERM's wakeup() hit the commit: it was not sent or its answer was
                // dropped; commit the same offsets again (wakeup fires only once).
                if (attempt > 0) {
                    ev("commit_err").put("err", e.toString()).put("offsets", offsetsJson(next)).println();
                    return;
                }
            } catch (KafkaException e) {
                ev("commit_err").put("err", e.toString()).put("offsets", offsetsJson(next)).println();
                return;
            }
        }
        for (Map.Entry<Integer, Long> e : next.entrySet()) {
            if (e.getValue().equals(pending.get(e.getKey()))) {
                pending.remove(e.getKey());
            }
        }
        ev("commit").put("offsets", offsetsJson(next)).put("why", why).println();
    }

    private final class Listener implements ConsumerRebalanceListener {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> parts) {
            List<Integer> ps = partitions(parts);
            commit(ps, "revoke");
            for (Integer p : ps) {
                pending.remove(p);
                assigned.remove(p);
            }
            ev("revoke").put("parts", ps).println();
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> parts) {
            List<Integer> ps = partitions(parts);
            assigned.addAll(ps);
            ev("assign").put("parts", ps).println();
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> parts) {
            List<Integer> ps = partitions(parts);
            for (Integer p : ps) {
                pending.remove(p);
                assigned.remove(p);
            }
            ev("lost").put("parts", ps).println();
        }
    }

    private static String assignorClass(String a) {
        switch (a) {
            case "range": return RangeAssignor.class.getName();
            case "roundrobin": return RoundRobinAssignor.class.getName();
            case "sticky": return StickyAssignor.class.getName();
            case "cooperative-sticky": return CooperativeStickyAssignor.class.getName();
            default: throw new IllegalArgumentException("unknown classic assignor " + a
                    + " (range|roundrobin|sticky|cooperative-sticky)");
        }
    }

    int run(String[] args) {
        String bootstrap = null;
        String group = null;
        String protocol = "classic";
        String assignor = null;
        String instanceId = null;
        int sessionTimeoutMs = 6000;
        int heartbeatIntervalMs = 500;
        long commitIntervalMs = 0;
        long idleExitMs = 0;
        Properties extra = new Properties();
        try {
            for (int a = 0; a < args.length; a++) {
                String v = a + 1 < args.length ? args[a + 1] : null;
                if (v == null) {
                    throw new IllegalArgumentException("missing value for " + args[a]);
                }
                switch (args[a]) {
                    case "--bootstrap": bootstrap = v; break;
                    case "--topic": topic = v; break;
                    case "--group": group = v; break;
                    case "--name": name = v; break;
                    case "--protocol": protocol = v; break;
                    case "--assignor": assignor = v; break;
                    case "--instance-id": instanceId = v; break;
                    case "--session-timeout-ms": sessionTimeoutMs = Integer.parseInt(v); break;
                    case "--heartbeat-interval-ms": heartbeatIntervalMs = Integer.parseInt(v); break;
                    case "--commit-interval-ms": commitIntervalMs = Long.parseLong(v); break;
                    case "--idle-exit-ms": idleExitMs = Long.parseLong(v); break;
                    case "--conf": {
                        int eq = v.indexOf('=');
                        if (eq <= 0) {
                            throw new IllegalArgumentException("--conf wants key=value, got " + v);
                        }
                        extra.put(v.substring(0, eq), v.substring(eq + 1));
                        break;
                    }
                    default: throw new IllegalArgumentException("unknown argument " + args[a]);
                }
                a++;
            }
            if (bootstrap == null || topic == null || group == null) {
                throw new IllegalArgumentException("usage: group-consume --bootstrap H:P --topic T --group G [options]");
            }
            if (!protocol.equals("classic") && !protocol.equals("consumer")) {
                throw new IllegalArgumentException("--protocol classic|consumer, got " + protocol);
            }
        } catch (IllegalArgumentException e) {
            System.err.println("group-consume: " + e.getMessage());
            return 2;
        }

        String pid = ManagementFactory.getRuntimeMXBean().getName().split("@")[0];
        ev("start").put("pid", Long.parseLong(pid)).put("client", "java-" + kafkaClientsVersion())
                .put("protocol", protocol).println();

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "500");
        cp.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        // "group.protocol" and "group.remote.assignor" by name: kafka-clients 3.9 has them too.
        cp.put("group.protocol", protocol);
        if (protocol.equals("classic")) {
            cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, Integer.toString(sessionTimeoutMs));
            cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, Integer.toString(heartbeatIntervalMs));
            if (assignor != null) {
                cp.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignorClass(assignor));
            }
        } else if (assignor != null) {
            cp.put("group.remote.assignor", assignor);
        }
        if (instanceId != null) {
            cp.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
        }
        cp.putAll(extra);

        Thread hook = new Thread(() -> {
            stop = true;
            KafkaConsumer<byte[], byte[]> c = consumer;
            if (c != null) {
                try {
                    c.wakeup();
                } catch (RuntimeException e) {
                    // already closed
                }
            }
            try {
                if (!done.await(40, TimeUnit.SECONDS)) {
                    ev("crash").put("err", "close did not finish within 40 s of SIGTERM").println();
                    exitCode = 4;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            // halt, not exit: exit from a hook would block; halt keeps our exit code (not 143).
            Runtime.getRuntime().halt(exitCode);
        }, "group-consume-shutdown");
        Runtime.getRuntime().addShutdownHook(hook);

        try {
            consumer = new KafkaConsumer<>(cp);
            consumer.subscribe(Collections.singletonList(topic), new Listener());
            ev("subscribed").println();
            long lastCommit = System.nanoTime();
            long lastRecord = System.nanoTime();
            boolean everAssigned = false;
            while (!stop) {
                ConsumerRecords<byte[], byte[]> recs;
                try {
                    recs = consumer.poll(Duration.ofMillis(200));
                } catch (WakeupException e) {
                    break;
                }
                everAssigned |= !assigned.isEmpty();
                if (!recs.isEmpty()) {
                    List<Object> batch = new ArrayList<>(recs.count());
                    for (ConsumerRecord<byte[], byte[]> r : recs) {
                        int p = r.partition();
                        List<Object> one = new ArrayList<>(3);
                        one.add(p);
                        one.add(r.offset());
                        one.add(idxOf(r.value()));
                        batch.add(one);
                        if (assigned.contains(p)) {  // never commit a partition already handed over
                            Long cur = pending.get(p);
                            pending.put(p, Math.max(cur == null ? 0 : cur, r.offset() + 1));
                        }
                    }
                    ev("recs").put("r", batch).println();
                    lastRecord = System.nanoTime();
                }
                if (!pending.isEmpty() && System.nanoTime() - lastCommit >= commitIntervalMs * 1_000_000L) {
                    lastCommit = System.nanoTime();
                    commit(null, "poll");
                }
                if (idleExitMs > 0 && everAssigned && System.nanoTime() - lastRecord > idleExitMs * 1_000_000L) {
                    ev("idle").put("idle_ms", idleExitMs).println();
                    break;
                }
            }
            ev("closing").println();
            commit(null, "close");
            consumer.close(Duration.ofSeconds(30));
            ev("closed").println();
            exitCode = 0;
        } catch (Throwable t) {
            t.printStackTrace();
            Throwable root = t;
            while (root.getCause() != null) {
                root = root.getCause();
            }
            ev("crash").put("err", t.toString() + (root != t ? " caused by " + root : "")).println();
            exitCode = 3;
        } finally {
            done.countDown();
        }
        return exitCode;
    }

    private GroupConsume() {
    }
}
