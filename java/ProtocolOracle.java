// Conformance oracle for kassign.protocol: serializes and deserializes with kafka-clients itself.
// One request per stdin line, one answer per stdout line ("OK\t..." or "ERR\t<message>").
// Fields are tab-separated; a string is "x" + hex(UTF-8), null is "~", a list is comma-separated
// items (empty field = empty list), a partition is "x<hex topic>:<partition>", bytes are hex or "~".
//   SUB  version topics userData owned generation rack   -> hex of ConsumerProtocol.serializeSubscription
//   ASN  version partitions userData                      -> hex of ConsumerProtocol.serializeAssignment
//   STK  partitions generation                            -> hex of StickyAssignor.subscriptionUserData
//   COOP generation                                       -> hex of CooperativeStickyAssignor.subscriptionUserData
//   DSUB hex -> topics userData owned generation(-1 = none) rack
//   DASN hex -> partitions userData
//   DSTK hex -> partitions generation(~ = none)          (StickyAssignor's private deserializer)
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.consumer.internals.AbstractStickyAssignor;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.TopicPartition;

public class ProtocolOracle {
    static String str(String f) {
        if (f.equals("~")) return null;
        return new String(unhex(f.substring(1)), StandardCharsets.UTF_8);
    }

    static String enc(String s) {
        return s == null ? "~" : "x" + hex(s.getBytes(StandardCharsets.UTF_8));
    }

    static byte[] unhex(String h) {
        byte[] out = new byte[h.length() / 2];
        for (int i = 0; i < out.length; i++)
            out[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
        return out;
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) sb.append(String.format("%02x", x & 0xff));
        return sb.toString();
    }

    static String hex(ByteBuffer buf) {
        ByteBuffer d = buf.duplicate();
        byte[] b = new byte[d.remaining()];
        d.get(b);
        return hex(b);
    }

    static ByteBuffer bytes(String f) {
        return f.equals("~") ? null : ByteBuffer.wrap(unhex(f));
    }

    static List<String> strs(String f) {
        List<String> out = new ArrayList<>();
        if (!f.isEmpty()) for (String s : f.split(",", -1)) out.add(str(s));
        return out;
    }

    static List<TopicPartition> tps(String f) {
        List<TopicPartition> out = new ArrayList<>();
        if (f.isEmpty()) return out;
        for (String item : f.split(",", -1)) {
            int colon = item.lastIndexOf(':');
            out.add(new TopicPartition(str(item.substring(0, colon)), Integer.parseInt(item.substring(colon + 1))));
        }
        return out;
    }

    static String encTps(List<TopicPartition> tps) {
        List<String> items = new ArrayList<>();
        for (TopicPartition tp : tps) items.add(enc(tp.topic()) + ":" + tp.partition());
        return String.join(",", items);
    }

    static String answer(String[] f, Method stickyDecode) throws Exception {
        switch (f[0]) {
            case "SUB": {
                int generation = Integer.parseInt(f[5]);
                Subscription s = new Subscription(strs(f[2]), bytes(f[3]), tps(f[4]), generation,
                    Optional.ofNullable(str(f[6])));
                return hex(ConsumerProtocol.serializeSubscription(s, Short.parseShort(f[1])));
            }
            case "ASN":
                return hex(ConsumerProtocol.serializeAssignment(new Assignment(tps(f[2]), bytes(f[3])), Short.parseShort(f[1])));
            case "STK": {
                StickyAssignor a = new StickyAssignor();
                a.onAssignment(new Assignment(tps(f[1])), new ConsumerGroupMetadata("g", Integer.parseInt(f[2]), "m", Optional.empty()));
                return hex(a.subscriptionUserData(new HashSet<>()));
            }
            case "COOP": {
                CooperativeStickyAssignor a = new CooperativeStickyAssignor();
                a.onAssignment(new Assignment(new ArrayList<>()), new ConsumerGroupMetadata("g", Integer.parseInt(f[1]), "m", Optional.empty()));
                return hex(a.subscriptionUserData(new HashSet<>()));
            }
            case "DSUB": {
                Subscription s = ConsumerProtocol.deserializeSubscription(ByteBuffer.wrap(unhex(f[1])));
                List<String> topics = new ArrayList<>();
                for (String t : s.topics()) topics.add(enc(t));
                return String.join(",", topics) + "\t" + (s.userData() == null ? "~" : hex(s.userData())) + "\t"
                    + encTps(s.ownedPartitions()) + "\t" + s.generationId().orElse(-1) + "\t" + enc(s.rackId().orElse(null));
            }
            case "DASN": {
                Assignment a = ConsumerProtocol.deserializeAssignment(ByteBuffer.wrap(unhex(f[1])));
                return encTps(a.partitions()) + "\t" + (a.userData() == null ? "~" : hex(a.userData()));
            }
            case "DSTK": {
                AbstractStickyAssignor.MemberData d =
                    (AbstractStickyAssignor.MemberData) stickyDecode.invoke(null, ByteBuffer.wrap(unhex(f[1])));
                return encTps(d.partitions) + "\t" + (d.generation.isPresent() ? d.generation.get().toString() : "~");
            }
            default:
                throw new IllegalArgumentException("unknown request " + f[0]);
        }
    }

    public static void main(String[] args) throws Exception {
        Method stickyDecode = StickyAssignor.class.getDeclaredMethod("deserializeTopicPartitionAssignment", ByteBuffer.class);
        stickyDecode.setAccessible(true);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            try {
                out.println("OK\t" + answer(line.split("\t", -1), stickyDecode));
            } catch (Throwable e) {
                Throwable root = e.getCause() != null ? e.getCause() : e;
                out.println("ERR\t" + root.getClass().getSimpleName() + ": " + String.valueOf(root.getMessage()).replace('\n', ' '));
            }
            if (!in.ready()) out.flush();  // answer each batch as soon as the caller has sent all of it
        }
        out.flush();
    }
}
