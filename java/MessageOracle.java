// Conformance oracle for kassign.protocol's generated-message codecs (KIP-848's ConsumerGroupHeartbeat,
// OffsetCommit, OffsetFetch, and the request/response headers): builds, writes and reads
// org.apache.kafka.common.message.*Data with kafka-clients itself, through reflection on the
// generated classes (a field "fooBar" has a getter fooBar() and a setter setFooBar(...)).
// One request per stdin line, one answer per stdout line ("OK\t<answer>" or "ERR\t<message>").
//   ENC <DataClass> <version> <json>  -> hex of the message written at version
//   DEC <DataClass> <version> <hex>   -> json of the message read at version (every field)
// JSON keys are the generated fields' names; a Uuid is Kafka's base64 string; "_unknownTaggedFields"
// is a list of [tag, hex]. Integers are range-checked, so a wrong test input cannot wrap silently.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Modifier;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.protocol.Readable;
import org.apache.kafka.common.protocol.types.RawTaggedField;

public class MessageOracle {
    static final String PACKAGE = "org.apache.kafka.common.message.";

    // ---- a minimal JSON reader: objects, arrays, strings, integers, true/false/null ----
    static final class Json {
        final String s;
        int i;

        Json(String s) { this.s = s; }

        Object value() {
            skip();
            char c = s.charAt(i);
            if (c == '{') {
                Map<String, Object> m = new LinkedHashMap<>();
                i++;
                skip();
                if (s.charAt(i) == '}') { i++; return m; }
                while (true) {
                    skip();
                    String k = string();
                    skip();
                    expect(':');
                    m.put(k, value());
                    skip();
                    if (s.charAt(i++) == '}') return m;
                }
            }
            if (c == '[') {
                List<Object> l = new ArrayList<>();
                i++;
                skip();
                if (s.charAt(i) == ']') { i++; return l; }
                while (true) {
                    l.add(value());
                    skip();
                    if (s.charAt(i++) == ']') return l;
                }
            }
            if (c == '"') return string();
            if (s.startsWith("true", i)) { i += 4; return Boolean.TRUE; }
            if (s.startsWith("false", i)) { i += 5; return Boolean.FALSE; }
            if (s.startsWith("null", i)) { i += 4; return null; }
            int start = i;
            while (i < s.length() && "-0123456789".indexOf(s.charAt(i)) >= 0) i++;
            return Long.parseLong(s.substring(start, i));
        }

        String string() {
            expect('"');
            StringBuilder b = new StringBuilder();
            while (true) {
                char c = s.charAt(i++);
                if (c == '"') return b.toString();
                if (c != '\\') { b.append(c); continue; }
                char e = s.charAt(i++);
                switch (e) {
                    case 'u': b.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
                    case 'n': b.append('\n'); break;
                    case 't': b.append('\t'); break;
                    case 'r': b.append('\r'); break;
                    case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    default: b.append(e);
                }
            }
        }

        void skip() { while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++; }

        void expect(char c) {
            if (s.charAt(i) != c) throw new IllegalArgumentException("expected " + c + " at " + i);
            i++;
        }
    }

    static String quote(String v) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : v.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    // ---- hex ----
    static byte[] unhex(String h) {
        byte[] out = new byte[h.length() / 2];
        for (int k = 0; k < out.length; k++) out[k] = (byte) Integer.parseInt(h.substring(2 * k, 2 * k + 2), 16);
        return out;
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) sb.append(String.format("%02x", x & 0xff));
        return sb.toString();
    }

    // ---- reflection over generated message classes ----
    static List<Field> dataFields(Class<?> cls) {
        List<Field> out = new ArrayList<>();
        for (Field f : cls.getDeclaredFields())
            if (!Modifier.isStatic(f.getModifiers()) && !f.getName().startsWith("_")) out.add(f);
        return out;
    }

    static String setter(String name) {
        return "set" + Character.toUpperCase(name.charAt(0)) + name.substring(1);
    }

    static long integer(Object v, long min, long max) {
        long x = (Long) v;
        if (x < min || x > max) throw new IllegalArgumentException("test input " + x + " out of range");
        return x;
    }

    static Object convert(Type t, Object v) throws Exception {
        if (v == null) return null;
        if (t == String.class) return (String) v;
        if (t == int.class || t == Integer.class) return (int) integer(v, Integer.MIN_VALUE, Integer.MAX_VALUE);
        if (t == short.class) return (short) integer(v, Short.MIN_VALUE, Short.MAX_VALUE);
        if (t == long.class) return (Long) v;
        if (t == boolean.class) return (Boolean) v;
        if (t == Uuid.class) return Uuid.fromString((String) v);
        if (t instanceof ParameterizedType && ((ParameterizedType) t).getRawType() == List.class) {
            Type element = ((ParameterizedType) t).getActualTypeArguments()[0];
            List<Object> out = new ArrayList<>();
            for (Object item : (List<?>) v) out.add(convert(element, item));
            return out;
        }
        if (t instanceof Class && Collection.class.isAssignableFrom((Class<?>) t)) {
            // A keyed collection (e.g. MetadataResponseTopicCollection): its element type is the
            // superclass's type argument; elements are added in the JSON's order, as written.
            Type element = ((ParameterizedType) ((Class<?>) t).getGenericSuperclass()).getActualTypeArguments()[0];
            @SuppressWarnings("unchecked")
            Collection<Object> out = (Collection<Object>) ((Class<?>) t).getConstructor().newInstance();
            for (Object item : (List<?>) v) out.add(convert(element, item));
            return out;
        }
        if (t instanceof Class && Message.class.isAssignableFrom((Class<?>) t)) {
            @SuppressWarnings("unchecked")
            Map<String, Object> m = (Map<String, Object>) v;
            return build((Class<?>) t, m);
        }
        throw new IllegalArgumentException("no conversion to " + t);
    }

    static Object build(Class<?> cls, Map<String, Object> json) throws Exception {
        Object o = cls.getConstructor().newInstance();
        for (Map.Entry<String, Object> e : json.entrySet()) {
            if (e.getKey().equals("_unknownTaggedFields")) {
                for (Object item : (List<?>) e.getValue()) {
                    List<?> pair = (List<?>) item;
                    int tag = (int) integer(pair.get(0), 0, Integer.MAX_VALUE);
                    ((Message) o).unknownTaggedFields().add(new RawTaggedField(tag, unhex((String) pair.get(1))));
                }
                continue;
            }
            Field f = cls.getDeclaredField(e.getKey());
            cls.getMethod(setter(f.getName()), f.getType()).invoke(o, convert(f.getGenericType(), e.getValue()));
        }
        return o;
    }

    static String dump(Object v) throws Exception {
        if (v == null) return "null";
        if (v instanceof String) return quote((String) v);
        if (v instanceof Number || v instanceof Boolean) return v.toString();
        if (v instanceof Uuid) return quote(v.toString());
        if (v instanceof Collection) {
            StringBuilder b = new StringBuilder("[");
            for (Object item : (Collection<?>) v) b.append(b.length() > 1 ? "," : "").append(dump(item));
            return b.append(']').toString();
        }
        if (v instanceof Message) {
            Class<?> cls = v.getClass();
            StringBuilder b = new StringBuilder("{");
            for (Field f : dataFields(cls))
                b.append(quote(f.getName())).append(':').append(dump(cls.getMethod(f.getName()).invoke(v))).append(',');
            b.append("\"_unknownTaggedFields\":[");
            boolean first = true;
            for (RawTaggedField raw : ((Message) v).unknownTaggedFields()) {
                b.append(first ? "" : ",").append('[').append(raw.tag()).append(",\"").append(hex(raw.data())).append("\"]");
                first = false;
            }
            return b.append("]}").toString();
        }
        throw new IllegalArgumentException("cannot dump " + v.getClass());
    }

    static String answer(String line) throws Exception {
        String[] f = line.split("\t", -1);
        Class<?> cls = Class.forName(PACKAGE + f[1]);
        short version = Short.parseShort(f[2]);
        switch (f[0]) {
            case "ENC": {
                @SuppressWarnings("unchecked")
                Map<String, Object> json = (Map<String, Object>) new Json(f[3]).value();
                Message m = (Message) build(cls, json);
                ObjectSerializationCache cache = new ObjectSerializationCache();
                ByteBuffer buf = ByteBuffer.allocate(m.size(cache, version));
                m.write(new ByteBufferAccessor(buf), cache, version);
                return hex(buf.array());
            }
            case "DEC": {
                Constructor<?> c = cls.getConstructor(Readable.class, short.class);
                return dump(c.newInstance(new ByteBufferAccessor(ByteBuffer.wrap(unhex(f[3]))), version));
            }
            default:
                throw new IllegalArgumentException("unknown command " + f[0]);
        }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            try {
                out.println("OK\t" + answer(line));
            } catch (Throwable t) {
                Throwable cause = t instanceof InvocationTargetException ? t.getCause() : t;
                String msg = cause.getClass().getSimpleName() + ": " + cause.getMessage();
                out.println("ERR\t" + msg.replace('\n', ' ').replace('\t', ' '));
            }
        }
    }
}
