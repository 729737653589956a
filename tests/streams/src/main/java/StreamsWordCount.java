// StreamsWordCount: Kafka Streams' word count as a throughput benchmark
// (benches/streams-race.sh), the same program against any Kafka-compatible
// broker.
//
// Usage: StreamsEos wordcount --bootstrap HOST:PORT --state-dir DIR
//                   [--lines N] [--partitions P] [--threads T]
//                   [--guarantee at_least_once|exactly_once_v2]
//
// Creates an input and an output topic (P partitions, default 4), produces N
// lines (default 200000) of 10 words from a 1000-word vocabulary, then runs
// lines -> flatMapValues(split) -> groupBy(word) (a repartition topic) ->
// count (a compacted changelog) -> output, with Streams' defaults otherwise
// (record caches on, commit.interval.ms 100 for EOS, 30000 for ALOS: lowered
// here to 1000 so that the end is seen soon). It measures from KafkaStreams.start()
// until the group's committed offsets on the input reach the lines produced
// and prints "RESULT lines=N seconds=S lines_per_s=R guarantee=G".

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public final class StreamsWordCount {
    static String line(long i) {
        StringBuilder b = new StringBuilder();
        for (int j = 0; j < 10; j++) {
            if (j > 0) b.append(' ');
            b.append('w').append((i * 31 + j * 977) % 1000);
        }
        return b.toString();
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = StreamsEos.parseArgs(argv);
        String bootstrap = StreamsEos.need(a, "bootstrap");
        long lines = Long.parseLong(a.getOrDefault("lines", "200000"));
        int partitions = Integer.parseInt(a.getOrDefault("partitions", "4"));
        String guarantee = a.getOrDefault("guarantee", StreamsConfig.AT_LEAST_ONCE);
        String run = UUID.randomUUID().toString().substring(0, 8);
        String in = "wc-in-" + run, out = "wc-out-" + run, app = "wc-" + run;

        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(in, partitions, (short) 1),
                    new NewTopic(out, partitions, (short) 1))).all().get();
            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            pp.put(ProducerConfig.LINGER_MS_CONFIG, 5);
            pp.put(ProducerConfig.BATCH_SIZE_CONFIG, 65536);
            try (KafkaProducer<String, String> p =
                    new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
                for (long i = 0; i < lines; i++) {
                    p.send(new ProducerRecord<>(in, (int) (i % partitions), null, line(i)));
                }
                p.flush();
            }

            StreamsBuilder builder = new StreamsBuilder();
            builder.stream(in, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(v -> Arrays.asList(v.split(" ")))
                .groupBy((k, w) -> w, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .to(out, Produced.with(Serdes.String(), Serdes.Long()));
            Properties p = new Properties();
            p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
            p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(StreamsConfig.STATE_DIR_CONFIG, StreamsEos.need(a, "state-dir"));
            p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
            p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(a.getOrDefault("threads", "2")));
            if (guarantee.equals(StreamsConfig.AT_LEAST_ONCE)) {
                p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 1000);
            }
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(in, i));
            try (KafkaStreams streams = new KafkaStreams(builder.build(), p)) {
                long t0 = System.nanoTime();
                streams.start();
                while (true) {
                    Thread.sleep(100);
                    Map<TopicPartition, OffsetAndMetadata> c =
                        admin.listConsumerGroupOffsets(app).partitionsToOffsetAndMetadata().get();
                    long done = 0;
                    for (TopicPartition tp : tps) {
                        OffsetAndMetadata o = c.get(tp);
                        if (o != null) done += o.offset();
                    }
                    if (done >= lines) break;
                    if (streams.state() == KafkaStreams.State.ERROR) {
                        System.out.println("RESULT fail streams in state ERROR");
                        System.exit(1);
                    }
                    if (System.nanoTime() - t0 > 600_000_000_000L) {
                        System.out.println("RESULT fail not done in 600 s: " + done + " of " + lines);
                        System.exit(1);
                    }
                }
                double s = (System.nanoTime() - t0) / 1e9;
                System.out.printf("RESULT lines=%d seconds=%.2f lines_per_s=%.0f guarantee=%s%n",
                        lines, s, lines / s, guarantee);
                streams.close(Duration.ofSeconds(30));
            }
        }
        System.exit(0);
    }
}
