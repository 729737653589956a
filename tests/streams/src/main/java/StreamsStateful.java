// StreamsStateful: a stateful Kafka Streams application run by
// tests/e2e/test_streams_stateful.py, with either processing guarantee.
//
// Usage: StreamsEos stateful --bootstrap HOST:PORT --application-id ID --state-dir DIR
//                   --guarantee at_least_once|exactly_once_v2
//                   --users T --events T --out-regions T --out-windows T
//                   [--threads N] [--delay-us US] [--transaction-timeout-ms MS]
//                   [--group-protocol classic|streams]
//
// Topology (record caches off, so every update of a store is forwarded):
//   users (KTable, key "u<j>", value the user's region "r<n>"), materialized
//     in a persistent store whose changelog is the users topic itself
//     (topology.optimization=all, as Streams applications commonly run);
//   events (key "u<j>", value "e<idx>", event time from the record)
//     -> slow step (StreamsEos.Slow: parks --delay-us per record)
//     -> join with users -> the event's region
//     -> groupBy region (a repartition topic) -> count (a changelog topic,
//        cleanup.policy=compact) -> out-regions: key "r<n>", value the count;
//   the slowed events
//     -> groupByKey -> 10 s tumbling windows (1 h grace) -> count (a windowed
//        changelog topic, cleanup.policy=compact,delete)
//     -> out-windows: key "u<j>@<window start ms>", value the count.
// With exactly_once_v2 each count's updates are 1, 2, ..., n in the output,
// once each, whatever instance died; with at_least_once some may repeat, and
// the last is at least n. A task moved to another instance restores its
// counts from the changelog topics first.
//
// Prints on stderr the same lines as StreamsEos (STATE, PROGRESS, FATAL,
// CLOSED); stdin "stop" closes it.

import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;

public final class StreamsStateful {
    static Topology topology(String users, String events, String outRegions, String outWindows, Properties p) {
        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> regionOf = builder.table(users, Consumed.with(Serdes.String(), Serdes.String()),
                Materialized.as("users"));
        KStream<String, String> slow = builder.stream(events, Consumed.with(Serdes.String(), Serdes.String()))
            .processValues(() -> new StreamsEos.Slow(false), Named.as("slow"));
        slow.join(regionOf, (event, region) -> region, Joined.with(Serdes.String(), Serdes.String(), Serdes.String()))
            .groupBy((user, region) -> region, Grouped.with("by-region", Serdes.String(), Serdes.String()))
            .count(Materialized.as("region-counts"))
            .toStream()
            .mapValues(n -> Long.toString(n))
            .to(outRegions, Produced.with(Serdes.String(), Serdes.String()));
        slow.groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofHours(1)))
            .count(Materialized.as("user-windows"))
            .toStream((w, n) -> w.key() + "@" + w.window().start())
            .mapValues(n -> Long.toString(n))
            .to(outWindows, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build(p);
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = StreamsEos.parseArgs(argv);
        String guarantee = StreamsEos.need(a, "guarantee");
        StreamsEos.delayNs = Long.parseLong(a.getOrDefault("delay-us", "0")) * 1000L;
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, StreamsEos.need(a, "application-id"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, StreamsEos.need(a, "bootstrap"));
        p.put(StreamsConfig.STATE_DIR_CONFIG, StreamsEos.need(a, "state-dir"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(a.getOrDefault("threads", "1")));
        p.put(StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG, StreamsConfig.OPTIMIZE);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        // The users table is loaded before the events it joins: a task waits
        // for every input partition to have data before it picks by time.
        p.put(StreamsConfig.MAX_TASK_IDLE_MS_CONFIG, 2000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG), 60000);
        p.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG),
              Integer.parseInt(a.getOrDefault("transaction-timeout-ms", "10000")));
        StreamsEos.groupProtocol(a, p);
        Topology t = topology(StreamsEos.need(a, "users"), StreamsEos.need(a, "events"),
                StreamsEos.need(a, "out-regions"), StreamsEos.need(a, "out-windows"), p);
        System.exit(StreamsEos.run(t, p));
    }
}
