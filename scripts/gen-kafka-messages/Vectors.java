// Test vectors for the generated message codecs: each sample message
// (samples/NAME.json, in Kafka's JSON form) encoded by Apache Kafka's own
// generated classes at each valid version, printed as "NAME VERSION HEX".
// Run by run.sh; the Rust tests decode and re-encode each vector
// (engine/src/api/generated/tests.rs).
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.MessageUtil;

public class Vectors {
    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        ObjectMapper mapper = new ObjectMapper();
        for (int i = 1; i < args.length; i++) {
            String name = args[i];
            JsonNode node = mapper.readTree(Files.readString(dir.resolve(name + ".json")));
            String cls = "org.apache.kafka.common.message." + name + "Data";
            Class<?> data = Class.forName(cls);
            Class<?> conv = Class.forName(cls + "JsonConverter");
            ApiMessage probe = (ApiMessage) data.getConstructor().newInstance();
            for (short v = probe.lowestSupportedVersion(); v <= probe.highestSupportedVersion(); v++) {
                ApiMessage m = (ApiMessage) conv.getMethod("read", JsonNode.class, short.class).invoke(null, node, v);
                ByteBuffer buf = MessageUtil.toByteBufferAccessor(m, v).buffer();
                StringBuilder hex = new StringBuilder();
                while (buf.hasRemaining()) {
                    hex.append(String.format("%02x", buf.get()));
                }
                System.out.println(name + " " + v + " " + hex);
            }
        }
    }
}
