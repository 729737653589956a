// Test vectors for the generated message codecs: each sample message
// (samples/NAME.json, in Kafka's JSON form; an array holds several)
// encoded by Apache Kafka's own generated classes at each valid version it
// can be written at, printed as "NAME VERSION HEX" (a sample with a field
// a version cannot carry is skipped at that version).
// Run by run.sh; the Rust tests decode and re-encode each vector
// (engine/src/api/generated/tests.rs).
import java.lang.reflect.InvocationTargetException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.MessageUtil;

public class Vectors {
    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        ObjectMapper mapper = new ObjectMapper();
        for (int i = 1; i < args.length; i++) {
            String name = args[i];
            JsonNode read = mapper.readTree(Files.readString(dir.resolve(name + ".json")));
            List<JsonNode> samples = new ArrayList<>();
            if (read.isArray()) {
                read.forEach(samples::add);
            } else {
                samples.add(read);
            }
            String cls = "org.apache.kafka.common.message." + name + "Data";
            Class<?> data = Class.forName(cls);
            Class<?> conv = Class.forName(cls + "JsonConverter");
            ApiMessage probe = (ApiMessage) data.getConstructor().newInstance();
            for (JsonNode node : samples) {
                for (short v = probe.lowestSupportedVersion(); v <= probe.highestSupportedVersion(); v++) {
                    ByteBuffer buf;
                    try {
                        ApiMessage m = (ApiMessage) conv.getMethod("read", JsonNode.class, short.class).invoke(null, node, v);
                        buf = MessageUtil.toByteBufferAccessor(m, v).buffer();
                    } catch (UnsupportedVersionException | InvocationTargetException e) {
                        continue;
                    }
                    StringBuilder hex = new StringBuilder();
                    while (buf.hasRemaining()) {
                        hex.append(String.format("%02x", buf.get()));
                    }
                    System.out.println(name + " " + v + " " + hex);
                }
            }
        }
    }
}
