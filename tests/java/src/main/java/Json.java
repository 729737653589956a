// Json: the few JSON lines GroupConsume and GroupAdmin print (kafka-clients
// brings no JSON library). Objects keep insertion order; values may be null,
// Number, Boolean, String, Json, Map (keys as strings), Iterable or int[].

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Map;

final class Json {
    private static final FileOutputStream STDOUT = new FileOutputStream(FileDescriptor.out);

    private final StringBuilder sb = new StringBuilder("{");
    private boolean first = true;

    static Json obj() {
        return new Json();
    }

    Json put(String key, Object value) {
        if (!first) {
            sb.append(',');
        }
        first = false;
        str(sb, key);
        sb.append(':');
        val(sb, value);
        return this;
    }

    @Override
    public String toString() {
        return sb + "}";
    }

    /** Prints this object as one line on stdout with a single write(2): a line is
     *  either wholly in the file or not at all when the process is SIGKILLed. */
    void println() {
        byte[] b = (toString() + "\n").getBytes(StandardCharsets.UTF_8);
        synchronized (STDOUT) {
            try {
                STDOUT.write(b);
            } catch (IOException e) {
                // stdout gone: nothing left to report to
            }
        }
    }

    static void val(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Json) {
            sb.append(v);
        } else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            sb.append(Double.isFinite(d) ? Double.toString(d) : "null");
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Map) {
            sb.append('{');
            boolean f = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!f) {
                    sb.append(',');
                }
                f = false;
                str(sb, String.valueOf(e.getKey()));
                sb.append(':');
                val(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Iterable) {
            sb.append('[');
            boolean f = true;
            for (Object o : (Iterable<?>) v) {
                if (!f) {
                    sb.append(',');
                }
                f = false;
                val(sb, o);
            }
            sb.append(']');
        } else if (v instanceof int[]) {
            sb.append('[');
            int[] a = (int[]) v;
            for (int i = 0; i < a.length; i++) {
                if (i > 0) {
                    sb.append(',');
                }
                sb.append(a[i]);
            }
            sb.append(']');
        } else {
            str(sb, v.toString());
        }
    }

    static void str(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }

    private Json() {
    }
}
