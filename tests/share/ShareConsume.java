// One KafkaShareConsumer (KIP-932) of a share group, for
// tests/e2e/test_share_groups.py. Compiled there against the kafka-clients
// jars of the kafka-tools artifact (4.x: the share consumer does not exist
// in 3.x clients).
//
// Usage: ShareConsume BOOTSTRAP GROUP TOPIC MODE IDLE_MS DEADLINE_MS [MAX_POLL_RECORDS [QUIET]]
//   MODE accept:  accepts every record it gets
//        release: releases a record the first time it gets it, accepts
//                 it when it comes again
//        hold:    takes one poll's records and holds them without
//                 acknowledging (its connection stays open) until DEADLINE_MS
// Prints "READY" once it polled the first time, then one line per record:
// "REC <partition> <offset> <deliveryCount> <value>", and "DONE" when no
// record came for IDLE_MS after the first one (or at DEADLINE_MS).
// MAX_POLL_RECORDS: 10 unless given. QUIET ("quiet"): no REC lines, but
// "COUNT <records> <first ms> <last ms>" before DONE (benches/share.sh).
import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareConsume {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], group = args[1], topic = args[2], mode = args[3];
        long idleMs = Long.parseLong(args[4]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[5]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", "explicit");
        p.put("max.poll.records", args.length > 6 ? args[6] : "10");
        boolean quiet = args.length > 7 && args[7].equals("quiet");
        long count = 0, firstMs = 0, lastMs = 0;
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(List.of(topic));
            boolean ready = false, seen = false;
            long lastRecord = System.currentTimeMillis();
            while (System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                if (!ready) {
                    System.out.println("READY");
                    System.out.flush();
                    ready = true;
                }
                for (ConsumerRecord<String, String> r : recs) {
                    count++;
                    lastMs = System.currentTimeMillis();
                    if (firstMs == 0) {
                        firstMs = lastMs;
                    }
                    if (!quiet) {
                        System.out.println("REC " + r.partition() + " " + r.offset() + " "
                            + r.deliveryCount().orElse((short) -1) + " " + r.value());
                    }
                    if (mode.equals("hold")) {
                        continue;
                    }
                    boolean first = r.deliveryCount().orElse((short) 1) == 1;
                    c.acknowledge(r, mode.equals("release") && first
                        ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
                }
                System.out.flush();
                if (!recs.isEmpty()) {
                    seen = true;
                    lastRecord = System.currentTimeMillis();
                    if (mode.equals("hold")) {
                        // Hold them: no more polls (a poll would acknowledge).
                        Thread.sleep(Math.max(0, deadline - System.currentTimeMillis()));
                        Runtime.getRuntime().halt(0);
                    }
                    c.commitSync();
                } else if (seen && System.currentTimeMillis() - lastRecord > idleMs) {
                    break;
                }
            }
            if (quiet) {
                System.out.println("COUNT " + count + " " + firstMs + " " + lastMs);
            }
            System.out.println("DONE");
            System.out.flush();
        }
    }
}
