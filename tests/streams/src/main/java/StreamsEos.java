// StreamsEos: a stateless Kafka Streams application run with
// processing.guarantee=exactly_once_v2 by tests/e2e/test_streams.py.
//
// Usage: StreamsEos --bootstrap HOST:PORT --application-id ID --state-dir DIR
//                   --input T --out-fizz T --out-rest T
//                   [--threads N] [--delay-us US] [--stall-after N [--stall-ms MS]]
//                   [--transaction-timeout-ms MS] [--persistent-store]
//                   [--group-protocol classic|streams]
//
// Topology (every output value is computable from the input record alone):
//   input (key "k<idx>", value "v<idx>:<payload>")
//     -> slow step: parks --delay-us per record, so a kill lands mid-stream
//     -> filter: drops the records whose idx is a multiple of 7
//     -> mapValues: "o<idx>:<payload reversed>:<payload length>"
//     -> split: idx a multiple of 3 -> --out-fizz, every other one -> --out-rest
// --stall-after N: once this process has processed N records, the slow step
//   blocks every stream thread (each at its next record) for --stall-ms, or
//   for good without it. The records of a blocked thread's open transaction
//   are sent meanwhile (linger.ms is 100), so a kill or SIGSTOP during the
//   stall is sure to leave an open transaction with records in the log and
//   no offsets in it yet.
// --persistent-store: attaches a persistent key-value store with logging
//   disabled (no changelog topic) to the slow step, the one store that needs
//   no compacted topic. Streams persists its process id in the state
//   directory only when the topology has a persistent store, so only then does
//   a restart on the same --state-dir reuse the transactional ids
//   "<application.id>-<process id>-<thread index>" and fence its predecessor.
// --group-protocol streams: Streams' group.protocol (KIP-1071's streams
//   rebalance protocol, StreamsGroupHeartbeat); Streams' default (classic)
//   without it.
//
// Reads stdin: a line "stop" or end of input closes Streams cleanly and exits
// with 0 when the close completed in time. Prints on stderr, one line each:
//   "STATE <old> -> <new>", "PROGRESS processed=<n> state=<s>" every second,
//   "STALL processed=<n>", "FATAL <exception>" (then exits 1),
//   "CLOSED clean=<bool>". Streams' own log at warn (override with
//   -Dorg.slf4j.simpleLogger.defaultLogLevel=info).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.LocalTime;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

public final class StreamsEos {
    private static final String STORE = "seen";
    private static final AtomicLong PROCESSED = new AtomicLong();
    private static volatile long stallAfter = Long.MAX_VALUE;
    private static volatile long stallMs = -1;
    private static boolean stallStarted; // guarded by StreamsEos.class
    private static long stallEndNs; // guarded by StreamsEos.class
    static volatile long delayNs;

    static synchronized void log(String line) {
        System.err.println(LocalTime.now() + " " + line);
        System.err.flush();
    }

    static Map<String, String> parseArgs(String[] args) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + a);
            }
            if (a.equals("--persistent-store")) {
                m.put(a.substring(2), "true");
            } else {
                if (i + 1 >= args.length) {
                    throw new IllegalArgumentException(a + " needs a value");
                }
                m.put(a.substring(2), args[++i]);
            }
        }
        return m;
    }

    static String need(Map<String, String> a, String key) {
        String v = a.get(key);
        if (v == null) {
            throw new IllegalArgumentException("--" + key + " is required");
        }
        return v;
    }

    /** Sets group.protocol from --group-protocol, if given. */
    static void groupProtocol(Map<String, String> a, Properties p) {
        String protocol = a.get("group-protocol");
        if (protocol != null) {
            p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, protocol);
        }
    }

    /** idx of a key "k<idx>". */
    static long idxOf(String key) {
        return Long.parseLong(key.substring(1));
    }

    /** Blocks the calling stream thread until the stall's end (set by the first caller). */
    static void stall(long n) {
        long end;
        synchronized (StreamsEos.class) {
            if (!stallStarted) {
                stallStarted = true;
                stallEndNs = System.nanoTime() + Math.max(stallMs, 0) * 1_000_000L;
                log("STALL processed=" + n);
            }
            end = stallEndNs;
        }
        while (stallMs < 0) {
            LockSupport.parkNanos(1_000_000_000L);
        }
        // nanoTime's clock runs on while the process is stopped (SIGSTOP).
        long left;
        while ((left = end - System.nanoTime()) > 0) {
            LockSupport.parkNanos(Math.min(left, 100_000_000L));
        }
    }

    static String transform(String value) {
        int colon = value.indexOf(':');
        String head = value.substring(1, colon);
        String payload = value.substring(colon + 1);
        return "o" + head + ":" + new StringBuilder(payload).reverse() + ":" + payload.length();
    }

    /** The slow step: one record at a time, optionally counting keys in the local store. */
    static final class Slow implements FixedKeyProcessor<String, String, String> {
        private FixedKeyProcessorContext<String, String> context;
        private KeyValueStore<String, Long> store;
        private final boolean withStore;

        Slow(boolean withStore) {
            this.withStore = withStore;
        }

        @Override
        public void init(FixedKeyProcessorContext<String, String> context) {
            this.context = context;
            if (withStore) {
                store = context.getStateStore(STORE);
            }
        }

        @Override
        public void process(FixedKeyRecord<String, String> record) {
            long n = PROCESSED.incrementAndGet();
            if (n >= stallAfter) {
                stall(n);
            }
            if (delayNs > 0) {
                LockSupport.parkNanos(delayNs);
            }
            if (store != null) {
                Long seen = store.get(record.key());
                store.put(record.key(), seen == null ? 1L : seen + 1);
            }
            context.forward(record);
        }
    }

    static Topology topology(String input, String outFizz, String outRest, boolean withStore) {
        StreamsBuilder builder = new StreamsBuilder();
        if (withStore) {
            builder.addStateStore(Stores.keyValueStoreBuilder(
                    Stores.persistentKeyValueStore(STORE), Serdes.String(), Serdes.Long())
                .withLoggingDisabled());
        }
        KStream<String, String> in = builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()));
        KStream<String, String> slow = withStore
            ? in.processValues(() -> new Slow(true), Named.as("slow"), STORE)
            : in.processValues(() -> new Slow(false), Named.as("slow"));
        slow.filter((k, v) -> idxOf(k) % 7 != 0, Named.as("drop-sevens"))
            .mapValues(StreamsEos::transform, Named.as("transform"))
            .split(Named.as("split-"))
            .branch((k, v) -> idxOf(k) % 3 == 0,
                    Branched.withConsumer(s -> s.to(outFizz, Produced.with(Serdes.String(), Serdes.String())),
                                          "fizz"))
            .defaultBranch(Branched.withConsumer(
                s -> s.to(outRest, Produced.with(Serdes.String(), Serdes.String())), "rest"));
        return builder.build();
    }

    public static void main(String[] argv) throws Exception {
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
        System.setProperty("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");
        if (argv.length > 0 && argv[0].equals("wordcount")) {
            StreamsWordCount.main(java.util.Arrays.copyOfRange(argv, 1, argv.length));
            return;
        }
        if (argv.length > 0 && argv[0].equals("stateful")) {
            StreamsStateful.main(java.util.Arrays.copyOfRange(argv, 1, argv.length));
            return;
        }
        Map<String, String> a = parseArgs(argv);
        delayNs = Long.parseLong(a.getOrDefault("delay-us", "0")) * 1000L;
        stallAfter = Long.parseLong(a.getOrDefault("stall-after", String.valueOf(Long.MAX_VALUE)));
        stallMs = Long.parseLong(a.getOrDefault("stall-ms", "-1"));
        boolean withStore = a.containsKey("persistent-store");

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, need(a, "application-id"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, need(a, "bootstrap"));
        p.put(StreamsConfig.STATE_DIR_CONFIG, need(a, "state-dir"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(a.getOrDefault("threads", "1")));
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        // Kafka's minimum session timeout, so a killed instance's members leave
        // the group within seconds.
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG), 60000);
        p.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG),
              Integer.parseInt(a.getOrDefault("transaction-timeout-ms", "10000")));
        groupProtocol(a, p);

        Topology t = topology(need(a, "input"), need(a, "out-fizz"), need(a, "out-rest"), withStore);
        System.exit(run(t, p));
    }

    /** Runs `topology` until stdin says "stop" (or ends); the exit code. */
    static int run(Topology topology, Properties p) throws Exception {
        KafkaStreams streams = new KafkaStreams(topology, p);
        streams.setStateListener((next, old) -> log("STATE " + old + " -> " + next));
        streams.setUncaughtExceptionHandler(e -> {
            log("FATAL " + e);
            e.printStackTrace();
            System.err.flush();
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });

        Thread progress = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException e) {
                    return;
                }
                KafkaStreams.State s = streams.state();
                log("PROGRESS processed=" + PROCESSED.get() + " state=" + s);
                if (s == KafkaStreams.State.ERROR) {
                    log("FATAL streams in state ERROR");
                    Runtime.getRuntime().halt(1);
                }
            }
        }, "progress");
        progress.setDaemon(true);
        progress.start();

        streams.start();
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = stdin.readLine()) != null && !line.trim().equals("stop")) {
            // only "stop" (or end of input) means something
        }
        boolean clean = streams.close(Duration.ofSeconds(30));
        log("CLOSED clean=" + clean + " processed=" + PROCESSED.get());
        return clean ? 0 : 1;
    }
}
