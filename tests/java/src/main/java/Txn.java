// Transactions end to end with the official Java client (tests/e2e/test_transactions.py).
//
// Usage: Txn --bootstrap HOST:PORT --topic T --partitions P --records N
// The topics T, T-in and T-out must exist with P partitions. Checks, in order:
//   commit/abort: three transactions of N records each over every partition,
//     the second aborted; a read_committed consumer sees exactly the first and
//     third (in order per partition), a read_uncommitted one sees all 3N; the
//     read_committed end offsets equal the high watermarks once all are done.
//   zombie: two producers with one transactional id; the first, fenced by the
//     second's initTransactions, cannot commit, and none of its records is
//     visible to read_committed; the second's are.
//   consume-transform-produce: a group consumer reads T-in (N records), a
//     transactional producer writes each to T-out and commits the consumer's
//     offsets with sendOffsetsToTransaction (generation checked); afterwards
//     T-out holds each record exactly once and the group's committed offsets
//     equal T-in's end offsets.
// The last stdout line is "RESULT ok ..." (exit 0) or "RESULT fail <reason>".

import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class Txn {
    private static String bootstrap;
    private static int partitions;

    static final class Fail extends RuntimeException {
        Fail(String m) { super(m); }
    }

    static void check(boolean ok, String what) {
        if (!ok) throw new Fail(what);
    }

    static KafkaProducer<String, String> producer(String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
        return new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
    }

    static KafkaConsumer<String, String> consumer(String isolation, String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (group != null) p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
    }

    static List<TopicPartition> partitionsOf(String topic) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
        return tps;
    }

    /** Every record of `topic` up to the consumer's end offsets, by partition. */
    static Map<Integer, List<String>> readAll(String topic, String isolation) {
        try (KafkaConsumer<String, String> c = consumer(isolation, null)) {
            List<TopicPartition> tps = partitionsOf(topic);
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            Map<Integer, List<String>> out = new TreeMap<>();
            long deadline = System.currentTimeMillis() + 60_000;
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (c.position(tp) < end.get(tp)) done = false;
                }
                if (done) break;
                check(System.currentTimeMillis() < deadline, "reading " + topic + " (" + isolation + ") timed out at "
                        + positions(c, tps) + " of " + end);
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    out.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.value());
                }
            }
            return out;
        }
    }

    static String positions(KafkaConsumer<?, ?> c, List<TopicPartition> tps) {
        StringBuilder b = new StringBuilder("{");
        for (TopicPartition tp : tps) b.append(tp.partition()).append('=').append(c.position(tp)).append(' ');
        return b.append('}').toString();
    }

    static int count(Map<Integer, List<String>> m) {
        int n = 0;
        for (List<String> l : m.values()) n += l.size();
        return n;
    }

    static void sendTxn(KafkaProducer<String, String> p, String topic, String tag, int n, boolean commit) throws Exception {
        p.beginTransaction();
        for (int i = 0; i < n; i++) {
            p.send(new ProducerRecord<>(topic, i % partitions, "k" + i, tag + "-" + i));
        }
        p.flush();
        if (commit) p.commitTransaction(); else p.abortTransaction();
    }

    static String commitAbort(String topic, int n) throws Exception {
        try (KafkaProducer<String, String> p = producer(topic + "-txn")) {
            p.initTransactions();
            sendTxn(p, topic, "a", n, true);
            sendTxn(p, topic, "b", n, false);
            sendTxn(p, topic, "c", n, true);
        }
        Map<Integer, List<String>> committed = readAll(topic, "read_committed");
        Map<Integer, List<String>> all = readAll(topic, "read_uncommitted");
        check(count(all) == 3 * n, "read_uncommitted saw " + count(all) + " records, expected " + 3 * n);
        check(count(committed) == 2 * n, "read_committed saw " + count(committed) + " records, expected " + 2 * n);
        for (Map.Entry<Integer, List<String>> e : committed.entrySet()) {
            String prev = null;
            for (String v : e.getValue()) {
                check(!v.startsWith("b-"), "read_committed saw aborted record " + v);
                if (prev != null && prev.startsWith("c-")) check(v.startsWith("c-"), "order: " + prev + " then " + v);
                prev = v;
            }
        }
        // With every transaction ended the last stable offsets reach the
        // high watermarks (markers included).
        try (KafkaConsumer<String, String> rc = consumer("read_committed", null);
             KafkaConsumer<String, String> ru = consumer("read_uncommitted", null)) {
            List<TopicPartition> tps = partitionsOf(topic);
            Map<TopicPartition, Long> lso = rc.endOffsets(tps);
            Map<TopicPartition, Long> hw = ru.endOffsets(tps);
            check(lso.equals(hw), "read_committed end offsets " + lso + " differ from high watermarks " + hw);
        }
        return "committed=" + count(committed) + " all=" + count(all);
    }

    static String zombie(String topic, int n) throws Exception {
        String id = topic + "-zombie";
        KafkaProducer<String, String> old = producer(id);
        old.initTransactions();
        old.beginTransaction();
        for (int i = 0; i < n; i++) old.send(new ProducerRecord<>(topic, i % partitions, "z" + i, "zombie-" + i));
        old.flush();
        boolean fenced = false;
        try (KafkaProducer<String, String> successor = producer(id)) {
            successor.initTransactions();
            try {
                old.send(new ProducerRecord<>(topic, 0, "z", "zombie-late")).get();
                old.commitTransaction();
            } catch (ProducerFencedException | InvalidProducerEpochException e) {
                fenced = true;
            } catch (Exception e) {
                // The late send fails with the fence as its cause.
                Throwable c = e;
                while (c != null) {
                    if (c instanceof ProducerFencedException || c instanceof InvalidProducerEpochException) fenced = true;
                    c = c.getCause();
                }
                if (!fenced) throw e;
            }
            try { old.close(Duration.ZERO); } catch (KafkaException ignored) { }
            check(fenced, "the zombie producer was not fenced");
            sendTxn(successor, topic, "s", n, true);
        }
        Map<Integer, List<String>> committed = readAll(topic, "read_committed");
        int zombies = 0, successors = 0;
        for (List<String> l : committed.values()) {
            for (String v : l) {
                if (v.startsWith("zombie-")) zombies++;
                if (v.startsWith("s-")) successors++;
            }
        }
        check(zombies == 0, "read_committed saw " + zombies + " records of the fenced producer");
        check(successors == n, "read_committed saw " + successors + " records of the successor, expected " + n);
        return "fenced=true";
    }

    static String transform(String topic, int n) throws Exception {
        String in = topic + "-in", out = topic + "-out", group = topic + "-eos";
        try (KafkaProducer<String, String> p = new KafkaProducer<>(plainProps(), new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < n; i++) p.send(new ProducerRecord<>(in, i % partitions, "k" + i, "in-" + i));
            p.flush();
        }
        int copied = 0;
        try (KafkaConsumer<String, String> c = consumer("read_committed", group);
             KafkaProducer<String, String> p = producer(topic + "-eos")) {
            p.initTransactions();
            c.subscribe(Collections.singletonList(in));
            long deadline = System.currentTimeMillis() + 90_000;
            while (copied < n) {
                check(System.currentTimeMillis() < deadline, "transform copied " + copied + " of " + n);
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(200));
                if (rs.isEmpty()) continue;
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : rs) {
                    p.send(new ProducerRecord<>(out, r.partition(), r.key(), r.value().replace("in-", "out-")));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    copied++;
                }
                p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                p.commitTransaction();
            }
        }
        Map<Integer, List<String>> got = readAll(out, "read_committed");
        Set<String> seen = new HashSet<>();
        for (List<String> l : got.values()) for (String v : l) check(seen.add(v), "duplicate in output: " + v);
        check(seen.size() == n, "output holds " + seen.size() + " records, expected " + n);
        try (Admin admin = Admin.create(plainProps())) {
            Map<TopicPartition, OffsetAndMetadata> committed =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (TopicPartition tp : partitionsOf(in)) latest.put(tp, OffsetSpec.latest());
            var ends = admin.listOffsets(latest).all().get();
            for (TopicPartition tp : partitionsOf(in)) {
                OffsetAndMetadata o = committed.get(tp);
                check(o != null && o.offset() == ends.get(tp).offset(),
                        "group offset of " + tp + " is " + o + ", end offset " + ends.get(tp).offset());
            }
        }
        return "transformed=" + seen.size();
    }

    static Properties plainProps() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return p;
    }

    public static int main(String[] args) {
        String topic = null;
        int records = 0;
        for (int a = 0; a + 1 < args.length; a += 2) {
            switch (args[a]) {
                case "--bootstrap": bootstrap = args[a + 1]; break;
                case "--topic": topic = args[a + 1]; break;
                case "--partitions": partitions = Integer.parseInt(args[a + 1]); break;
                case "--records": records = Integer.parseInt(args[a + 1]); break;
                default: System.out.println("RESULT fail unknown argument " + args[a]); return 2;
            }
        }
        try {
            String r1 = commitAbort(topic, records);
            String r2 = zombie(topic, records);
            String r3 = transform(topic, records);
            System.out.println("RESULT ok " + r1 + " " + r2 + " " + r3);
            return 0;
        } catch (Fail f) {
            System.out.println("RESULT fail " + f.getMessage());
            return 1;
        } catch (Exception e) {
            e.printStackTrace();
            System.out.println("RESULT fail " + e);
            return 1;
        }
    }
}
