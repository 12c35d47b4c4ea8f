// Runs kafka-clients' (3.9.1) StickyAssignor / CooperativeStickyAssignor on a batch of scenarios, for
// kassign's conformance test: one JVM for the whole batch.
//
//   java -cp CLASSES:kafka-clients.jar:slf4j-api.jar StickyOracle SCENARIOS.json
//
// SCENARIOS.json is a JSON array of objects:
//   {"assignor": "sticky" | "cooperative-sticky",
//    "topics": {"t": partitions, ...},
//    "members": {"m": {"topics": [...], "user_data": "hex" | null, "owned": [["t", p], ...],
//                      "generation": int | null, "rack": "r" | null}, ...},
//    "partition_racks": {"t:p": ["r", ...], ...} | null}
// The answer is one JSON line per scenario on stdout:
//   {"assignment": {"m": [["t", p], ...], ...}} or {"error": "..."}
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.consumer.internals.AbstractStickyAssignor;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

public class StickyOracle {

    /** A minimal JSON reader: objects, arrays, strings (with \" \\ \\uXXXX escapes), integers, null, booleans. */
    static final class Json {
        private final String s;
        private int i;

        Json(String s) {
            this.s = s;
        }

        Object read() {
            skip();
            char c = s.charAt(i);
            if (c == '{') {
                Map<String, Object> m = new LinkedHashMap<>();
                i++;
                skip();
                if (s.charAt(i) == '}') {
                    i++;
                    return m;
                }
                while (true) {
                    skip();
                    String k = (String) read();
                    skip();
                    i++; // ':'
                    m.put(k, read());
                    skip();
                    if (s.charAt(i++) == '}') return m;
                }
            }
            if (c == '[') {
                List<Object> l = new ArrayList<>();
                i++;
                skip();
                if (s.charAt(i) == ']') {
                    i++;
                    return l;
                }
                while (true) {
                    l.add(read());
                    skip();
                    if (s.charAt(i++) == ']') return l;
                }
            }
            if (c == '"') {
                StringBuilder b = new StringBuilder();
                i++;
                while (s.charAt(i) != '"') {
                    char ch = s.charAt(i++);
                    if (ch == '\\') {
                        char e = s.charAt(i++);
                        if (e == 'u') {
                            b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                            i += 4;
                        } else if (e == 'n') {
                            b.append('\n');
                        } else if (e == 't') {
                            b.append('\t');
                        } else {
                            b.append(e);
                        }
                    } else {
                        b.append(ch);
                    }
                }
                i++;
                return b.toString();
            }
            if (s.startsWith("null", i)) {
                i += 4;
                return null;
            }
            if (s.startsWith("true", i)) {
                i += 4;
                return Boolean.TRUE;
            }
            if (s.startsWith("false", i)) {
                i += 5;
                return Boolean.FALSE;
            }
            int start = i;
            while (i < s.length() && (Character.isDigit(s.charAt(i)) || s.charAt(i) == '-')) i++;
            return Long.parseLong(s.substring(start, i));
        }

        private void skip() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
        }
    }

    static String quote(String v) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : v.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static ByteBuffer hex(String h) {
        if (h == null) return null;
        byte[] out = new byte[h.length() / 2];
        for (int k = 0; k < out.length; k++) out[k] = (byte) Integer.parseInt(h.substring(2 * k, 2 * k + 2), 16);
        return ByteBuffer.wrap(out);
    }

    @SuppressWarnings("unchecked")
    static String run(Map<String, Object> sc) {
        String name = (String) sc.get("assignor");
        AbstractStickyAssignor assignor = "sticky".equals(name) ? new StickyAssignor() : new CooperativeStickyAssignor();
        Map<String, Object> topics = (Map<String, Object>) sc.get("topics");
        Map<String, Object> racks = (Map<String, Object>) sc.get("partition_racks");
        Map<String, Subscription> subs = new HashMap<>();
        for (Map.Entry<String, Object> e : ((Map<String, Object>) sc.get("members")).entrySet()) {
            Map<String, Object> m = (Map<String, Object>) e.getValue();
            List<String> ts = new ArrayList<>();
            for (Object t : (List<Object>) m.get("topics")) ts.add((String) t);
            List<TopicPartition> owned = new ArrayList<>();
            for (Object o : (List<Object>) m.get("owned")) {
                List<Object> tp = (List<Object>) o;
                owned.add(new TopicPartition((String) tp.get(0), ((Long) tp.get(1)).intValue()));
            }
            Object gen = m.get("generation");
            Optional<Integer> generation = gen == null ? Optional.empty() : Optional.of(((Long) gen).intValue());
            subs.put(e.getKey(), new Subscription(ts, hex((String) m.get("user_data")), owned, generation.orElse(-1),
                Optional.ofNullable((String) m.get("rack"))));
        }
        Map<String, List<TopicPartition>> result;
        if (racks == null) {
            Map<String, Integer> ppt = new HashMap<>();
            topics.forEach((t, n) -> ppt.put(t, ((Long) n).intValue()));
            result = assignor.assign(ppt, subs);
        } else {
            Map<String, Node> nodes = new HashMap<>();
            Map<String, List<PartitionInfo>> infos = new HashMap<>();
            for (Map.Entry<String, Object> t : topics.entrySet()) {
                List<PartitionInfo> parts = new ArrayList<>();
                int n = ((Long) t.getValue()).intValue();
                for (int p = 0; p < n; p++) {
                    List<Object> rs = (List<Object>) racks.getOrDefault(t.getKey() + ":" + p, new ArrayList<>());
                    Node[] replicas = new Node[rs.size()];
                    for (int k = 0; k < rs.size(); k++) {
                        String r = (String) rs.get(k);
                        replicas[k] = nodes.computeIfAbsent(r, x -> new Node(nodes.size(), "host-" + x, 9092, x));
                    }
                    parts.add(new PartitionInfo(t.getKey(), p, replicas.length > 0 ? replicas[0] : null, replicas, replicas));
                }
                infos.put(t.getKey(), parts);
            }
            result = assignor.assignPartitions(infos, subs);
        }
        StringBuilder out = new StringBuilder("{\"assignment\": {");
        boolean first = true;
        for (Map.Entry<String, List<TopicPartition>> e : new TreeMap<>(result).entrySet()) {
            if (!first) out.append(", ");
            first = false;
            out.append(quote(e.getKey())).append(": [");
            boolean f2 = true;
            for (TopicPartition tp : e.getValue()) {
                if (!f2) out.append(", ");
                f2 = false;
                out.append('[').append(quote(tp.topic())).append(", ").append(tp.partition()).append(']');
            }
            out.append(']');
        }
        return out.append("}}").toString();
    }

    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws Exception {
        String text = new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8);
        List<Object> scenarios = (List<Object>) new Json(text).read();
        PrintStream out = new PrintStream(System.out, false, "UTF-8");
        for (Object sc : scenarios) {
            String line;
            try {
                line = run((Map<String, Object>) sc);
            } catch (Exception | AssertionError ex) {
                line = "{\"error\": " + quote(ex.toString()) + "}";
            }
            out.println(line);
        }
        out.flush();
    }
}
