// Reads every partition of a topic from its start to its end offset without a
// group, as a table loader reads a compacted topic
// (tests/e2e/test_compaction.py: Java and franz-go over a compacted log).
//
// Usage: dump --bootstrap HOST:PORT --topic T --partitions P [--isolation read_committed]
// Prints "REC <partition> <offset> <key> <value>" per record (key and value as
// UTF-8, "-" for null), then "RESULT ok consumed=N" once every partition's
// position reached its end offset (the last stable offset for
// read_committed), or "RESULT fail <reason>": offsets not increasing within a
// partition, or the end not reached in 60 s (the client stuck before a gap or
// an empty batch).

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class Dump {
    static String text(byte[] b) {
        return b == null ? "-" : new String(b, StandardCharsets.UTF_8);
    }

    public static int main(String[] args) {
        String bootstrap = null, topic = null, isolation = "read_uncommitted";
        int partitions = -1;
        for (int a = 0; a + 1 < args.length; a += 2) {
            switch (args[a]) {
                case "--bootstrap": bootstrap = args[a + 1]; break;
                case "--topic": topic = args[a + 1]; break;
                case "--partitions": partitions = Integer.parseInt(args[a + 1]); break;
                case "--isolation": isolation = args[a + 1]; break;
                default:
                    System.out.println("RESULT fail unknown argument " + args[a]);
                    return 2;
            }
        }
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "97");
        p.put(ConsumerConfig.FETCH_MAX_BYTES_CONFIG, "20000");
        p.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "10000");
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
        long n = 0;
        try (KafkaConsumer<byte[], byte[]> c =
                new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = c.endOffsets(tps, Duration.ofSeconds(30));
            Map<TopicPartition, Long> last = new HashMap<>();
            long deadline = System.nanoTime() + 60_000_000_000L;
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (c.position(tp, Duration.ofSeconds(30)) < ends.get(tp)) done = false;
                }
                if (done) break;
                if (System.nanoTime() > deadline) {
                    StringBuilder at = new StringBuilder();
                    for (TopicPartition tp : tps) {
                        at.append(' ').append(tp.partition()).append(':').append(c.position(tp))
                                .append('/').append(ends.get(tp));
                    }
                    System.out.println("RESULT fail end offsets not reached in 60 s, positions" + at);
                    return 1;
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    Long prev = last.put(tp, r.offset());
                    if (prev != null && r.offset() <= prev) {
                        System.out.println("RESULT fail partition " + r.partition() + ": offset "
                                + r.offset() + " after " + prev);
                        return 1;
                    }
                    System.out.println("REC " + r.partition() + " " + r.offset() + " " + text(r.key())
                            + " " + text(r.value()));
                    n++;
                }
            }
        } catch (Exception e) {
            System.out.println("RESULT fail " + e);
            return 1;
        }
        System.out.println("RESULT ok consumed=" + n);
        return 0;
    }
}
