// An exactly-once Flink job against a Kafka-compatible broker (tests/e2e/test_flink.py).
//
// Usage: FlinkEos --bootstrap HOST:PORT --input T --output T --checkpoint-dir DIR
//                 --txn-prefix P [--group G] [--restore CHK_DIR] [--parallelism N]
//                 [--record-delay-us N] [--checkpoint-interval-ms N]
//                 [--transaction-timeout-ms N] [--naming INCREMENTING|POOLING]
//                 [--guarantee EXACTLY_ONCE|AT_LEAST_ONCE] [--bounded true]
//                 [--discovery-ms N]
//
// One local MiniCluster (StreamExecutionEnvironment in this JVM, STREAMING mode)
// runs KafkaSource (input, from the earliest offsets, unbounded) -> a map that
// waits record-delay-us per record (so a kill lands mid-stream) -> KafkaSink
// with DeliveryGuarantee.EXACTLY_ONCE and the given transactional id prefix.
// Values pass through unchanged; each output record's key is its value (so
// they spread over the output partitions).
// --guarantee sets the sink's delivery guarantee (default EXACTLY_ONCE).
// --bounded true: the source stops at the end offsets it finds at the start
// (OffsetsInitializer.latest()), the job finishes after its final checkpoint
// and prints "RESULT ok" (exit 0). --discovery-ms: the source looks for new
// partitions of the input this often (partition.discovery.interval.ms; Flink's
// default 5 min for an unbounded source).
// Checkpoints every checkpoint-interval-ms (default 500) into DIR/<job id>/chk-N,
// retained on cancellation (and, since nothing deletes them, after a SIGKILL).
// --restore CHK_DIR starts from that retained checkpoint (its _metadata).
// --transaction-timeout-ms sets the sink's transaction.timeout.ms; without it
// the sink asks Flink's default (1 h). Restarts are disabled and no checkpoint
// failure is tolerated: any error fails the job and the JVM exits non-zero.
//
// The job runs until it is killed (the test stops it once the output is
// complete). Stdout: "FLINKEOS start flink=V restore=PATH|none"; if the job
// fails, "RESULT fail <reason>" (exit 1).
// Logs (slf4j-simple, stderr): WARN, and INFO for the checkpoint coordinator and
// the Kafka connector; override with -Dorg.slf4j.simpleLogger.* properties.

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ExecutionOptions;
import org.apache.flink.configuration.ExternalizedCheckpointRetention;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.sink.KafkaSinkBuilder;
import org.apache.flink.connector.kafka.sink.TransactionNamingStrategy;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.KafkaSourceBuilder;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

public final class FlinkEos {
    /** Waits a fixed time per record: the job's throughput is bounded, so a kill lands mid-stream. */
    static final class SlowMap implements MapFunction<String, String> {
        private final long delayNs;

        SlowMap(long delayUs) {
            this.delayNs = delayUs * 1000L;
        }

        @Override
        public String map(String value) {
            if (delayNs > 0) {
                long until = System.nanoTime() + delayNs;
                long left;
                while ((left = until - System.nanoTime()) > 0) LockSupport.parkNanos(left);
            }
            return value;
        }
    }

    private static Map<String, String> parseArgs(String[] args) {
        Map<String, String> a = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("bad argument " + args[i] + " (expected --name value)");
            }
            a.put(args[i].substring(2), args[++i]);
        }
        for (String required : new String[] {"bootstrap", "input", "output", "checkpoint-dir", "txn-prefix"}) {
            if (!a.containsKey(required)) throw new IllegalArgumentException("missing --" + required);
        }
        return a;
    }

    private static void defaultLogLevels() {
        String[][] levels = {
            {"org.slf4j.simpleLogger.defaultLogLevel", "warn"},
            {"org.slf4j.simpleLogger.showDateTime", "true"},
            {"org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS"},
            {"org.slf4j.simpleLogger.log.org.apache.flink.runtime.checkpoint.CheckpointCoordinator", "info"},
            {"org.slf4j.simpleLogger.log.org.apache.flink.connector.kafka", "info"},
        };
        for (String[] kv : levels) {
            if (System.getProperty(kv[0]) == null) System.setProperty(kv[0], kv[1]);
        }
    }

    public static void main(String[] argv) {
        defaultLogLevels();
        try {
            JobExecutionResult r = run(parseArgs(argv));
            System.out.println("RESULT ok job=" + r.getJobID() + " (the job ended)");
            System.out.flush();
            System.exit(0);
        } catch (Throwable t) {
            t.printStackTrace();
            Throwable root = t;
            while (root.getCause() != null && root.getCause() != root) root = root.getCause();
            System.out.println("RESULT fail " + t + " (root cause: " + root + ")");
            System.out.flush();
            System.exit(1);
        }
    }

    private static JobExecutionResult run(Map<String, String> a) throws Exception {
        String bootstrap = a.get("bootstrap");
        int parallelism = Integer.parseInt(a.getOrDefault("parallelism", "2"));
        long intervalMs = Long.parseLong(a.getOrDefault("checkpoint-interval-ms", "500"));
        String restore = a.get("restore");

        Configuration conf = new Configuration();
        conf.set(ExecutionOptions.RUNTIME_MODE, RuntimeExecutionMode.STREAMING);
        conf.set(CheckpointingOptions.CHECKPOINTING_INTERVAL, Duration.ofMillis(intervalMs));
        conf.set(CheckpointingOptions.CHECKPOINT_STORAGE, "filesystem");
        conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, "file://" + a.get("checkpoint-dir"));
        conf.set(CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION,
                ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION);
        conf.set(CheckpointingOptions.MAX_RETAINED_CHECKPOINTS, 3);
        conf.set(CheckpointingOptions.TOLERABLE_FAILURE_NUMBER, 0);
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "disable");
        if (restore != null) conf.set(StateRecoveryOptions.SAVEPOINT_PATH, restore);

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(parallelism);

        KafkaSourceBuilder<String> source = KafkaSource.<String>builder()
                .setBootstrapServers(bootstrap)
                .setTopics(a.get("input"))
                .setGroupId(a.getOrDefault("group", a.get("txn-prefix") + "-source"))
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setValueOnlyDeserializer(new SimpleStringSchema());
        if (Boolean.parseBoolean(a.getOrDefault("bounded", "false"))) {
            source.setBounded(OffsetsInitializer.latest());
        }
        if (a.containsKey("discovery-ms")) {
            source.setProperty("partition.discovery.interval.ms", a.get("discovery-ms"));
        }

        KafkaSinkBuilder<String> sink = KafkaSink.<String>builder()
                .setBootstrapServers(bootstrap)
                .setRecordSerializer(KafkaRecordSerializationSchema.builder()
                        .setTopic(a.get("output"))
                        .setKeySerializationSchema(new SimpleStringSchema())
                        .setValueSerializationSchema(new SimpleStringSchema())
                        .build())
                .setDeliveryGuarantee(DeliveryGuarantee.valueOf(a.getOrDefault("guarantee", "EXACTLY_ONCE")))
                .setTransactionalIdPrefix(a.get("txn-prefix"))
                .setTransactionNamingStrategy(
                        TransactionNamingStrategy.valueOf(a.getOrDefault("naming", "INCREMENTING")));
        if (a.containsKey("transaction-timeout-ms")) {
            sink.setProperty("transaction.timeout.ms", a.get("transaction-timeout-ms"));
        }

        env.fromSource(source.build(), WatermarkStrategy.noWatermarks(), "kafka-source").uid("kafka-source")
                .map(new SlowMap(Long.parseLong(a.getOrDefault("record-delay-us", "1000"))))
                .uid("slow-map").name("slow-map")
                .sinkTo(sink.build()).uid("kafka-sink").name("kafka-sink");

        System.out.println("FLINKEOS start flink=" + EnvironmentInformation.getVersion()
                + " restore=" + (restore == null ? "none" : restore));
        System.out.flush();
        return env.execute("rutomq-flink-eos");
    }
}
