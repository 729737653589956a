// Sends keyed records with Apache Kafka's own Java producer (default
// partitioner) and prints, per record, "key<TAB>partition" as the broker
// confirmed it. Usage: KeyedPlacement BOOTSTRAP TOPIC COUNT
// Keys: "k" + "x" repeated (i % 13) times + i, so every length class of the
// murmur2 tail is covered; the Rust side makes the same keys.
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;

public class KeyedPlacement {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("acks", "all");
        props.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        props.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        List<String> keys = new ArrayList<>();
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < count; i++) {
                String key = "k" + "x".repeat(i % 13) + i;
                keys.add(key);
                sent.add(producer.send(new ProducerRecord<>(topic, key, "java-" + i)));
            }
            producer.flush();
            StringBuilder out = new StringBuilder();
            for (int i = 0; i < count; i++) {
                out.append(keys.get(i)).append('\t').append(sent.get(i).get().partition()).append('\n');
            }
            System.out.print(out);
        }
    }
}
