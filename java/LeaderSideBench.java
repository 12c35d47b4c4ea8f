// The group leader's side of a cooperative-sticky rebalance in kafka-clients (3.9.1), on the input files
// benchmarks/leader_side.py writes: decoding every member's JoinGroup metadata
// (ConsumerProtocol.deserializeSubscription), CooperativeStickyAssignor.assign, and serializing every
// member's assignment for the SyncGroup (ConsumerProtocol.serializeAssignment).
//
//   java -cp CLASSES:kafka-clients.jar:slf4j-nop.jar LeaderSideBench INPUT [--warmup-seconds 1] [--reps 9]
//
// INPUT (text, one item a line, fields separated by one space):
//   topics K                      then K lines: NAME PARTITIONS
//   case NAME MEMBERS             then MEMBERS lines: MEMBER_ID SUBSCRIPTION_HEX KASSIGN_ASSIGNMENT_HEX
//                                 (kassign's serialized assignment of that member, "-" if none)
// Output: one JSON object per case on stdout: the median and samples (ms) of each of the three steps,
// the first (cold) call of each, Java's serialized assignment per member (hex), whether each
// subscription re-serializes to the bytes it was read from, and which of kassign's serialized
// assignments Java re-serializes to different bytes. Progress on stderr.
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.TopicPartition;

import java.io.BufferedReader;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;
import java.util.function.Supplier;

public class LeaderSideBench {

    static final class Case {
        final String name;
        final List<String> memberIds = new ArrayList<>();
        final List<byte[]> subscriptions = new ArrayList<>();
        final List<byte[]> kassignAssignments = new ArrayList<>();

        Case(String name) {
            this.name = name;
        }
    }

    static byte[] unhex(String h) {
        byte[] out = new byte[h.length() / 2];
        for (int i = 0; i < out.length; i++)
            out[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
        return out;
    }

    static String hex(ByteBuffer buf) {
        ByteBuffer d = buf.duplicate();
        StringBuilder sb = new StringBuilder(d.remaining() * 2);
        while (d.hasRemaining()) sb.append(String.format("%02x", d.get() & 0xff));
        return sb.toString();
    }

    static byte[] bytes(ByteBuffer buf) {
        ByteBuffer d = buf.duplicate();
        byte[] b = new byte[d.remaining()];
        d.get(b);
        return b;
    }

    static double median(double[] xs) {
        double[] s = xs.clone();
        Arrays.sort(s);
        int n = s.length;
        return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    }

    static String samples(double[] xs) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < xs.length; i++) sb.append(i > 0 ? "," : "").append(String.format(Locale.ROOT, "%.4f", xs[i]));
        return sb.append("]").toString();
    }

    /** A timed step: the first (cold) call, then warm-up calls for at least warmupSeconds, then reps timed calls. */
    static final class Timed {
        double firstMs;
        double[] samplesMs;
    }

    /** Times call(prepare()); each call gets its own prepared input, built outside the timed region. */
    static <I> Timed time(Supplier<I> prepare, Function<I, ?> call, double warmupSeconds, int reps) {
        Timed t = new Timed();
        I input = prepare.get();
        System.gc();
        long a = System.nanoTime();
        call.apply(input);
        t.firstMs = (System.nanoTime() - a) / 1e6;
        long ws = System.nanoTime();
        int warm = 0;
        // Warm up until the JIT has compiled the hot paths, as in a long-running leader.
        while (warm < 5 || (System.nanoTime() - ws) / 1e9 < warmupSeconds) {
            call.apply(prepare.get());
            warm++;
        }
        t.samplesMs = new double[reps];
        for (int i = 0; i < reps; i++) {
            input = prepare.get();
            System.gc();
            long s = System.nanoTime();
            call.apply(input);
            t.samplesMs[i] = (System.nanoTime() - s) / 1e6;
        }
        return t;
    }

    /** Fresh Subscription objects over the same fields (reading user data consumes a ByteBuffer's position). */
    static Map<String, Subscription> copy(Map<String, Subscription> subs) {
        Map<String, Subscription> out = new HashMap<>();
        for (Map.Entry<String, Subscription> e : subs.entrySet()) {
            Subscription s = e.getValue();
            out.put(e.getKey(), new Subscription(s.topics(), s.userData() == null ? null : s.userData().duplicate(),
                s.ownedPartitions(), s.generationId().orElse(-1), s.rackId()));
        }
        return out;
    }

    static String timedJson(String key, Timed t) {
        return String.format(Locale.ROOT, "\"%sMs\":%.4f,\"%sFirstMs\":%.4f,\"%sSamplesMs\":%s", key,
            median(t.samplesMs), key, t.firstMs, key, samples(t.samplesMs));
    }

    static Map<String, Subscription> decodeAll(Case c) {
        Map<String, Subscription> out = new HashMap<>();
        for (int i = 0; i < c.memberIds.size(); i++)
            out.put(c.memberIds.get(i), ConsumerProtocol.deserializeSubscription(ByteBuffer.wrap(c.subscriptions.get(i))));
        return out;
    }

    static Map<String, ByteBuffer> encodeAll(Map<String, List<TopicPartition>> assignment) {
        Map<String, ByteBuffer> out = new HashMap<>();
        for (Map.Entry<String, List<TopicPartition>> e : assignment.entrySet())
            out.put(e.getKey(), ConsumerProtocol.serializeAssignment(new Assignment(e.getValue())));
        return out;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: LeaderSideBench INPUT [--warmup-seconds 1] [--reps 9]");
            System.exit(2);
        }
        double warmupSeconds = 1;
        int reps = 9;
        for (int i = 1; i < args.length; i += 2) {
            switch (args[i]) {
                case "--warmup-seconds": warmupSeconds = Double.parseDouble(args[i + 1]); break;
                case "--reps": reps = Integer.parseInt(args[i + 1]); break;
                default: throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        Map<String, Integer> partitionsPerTopic = new LinkedHashMap<>();
        List<Case> cases = new ArrayList<>();
        try (BufferedReader r = Files.newBufferedReader(Paths.get(args[0]))) {
            String line;
            while ((line = r.readLine()) != null) {
                String[] f = line.trim().split(" ");
                if (f[0].equals("topics")) {
                    int k = Integer.parseInt(f[1]);
                    for (int i = 0; i < k; i++) {
                        String[] t = r.readLine().trim().split(" ");
                        partitionsPerTopic.put(t[0], Integer.parseInt(t[1]));
                    }
                } else if (f[0].equals("case")) {
                    Case c = new Case(f[1]);
                    int n = Integer.parseInt(f[2]);
                    for (int i = 0; i < n; i++) {
                        String[] m = r.readLine().trim().split(" ");
                        c.memberIds.add(m[0]);
                        c.subscriptions.add(unhex(m[1]));
                        c.kassignAssignments.add(m[2].equals("-") ? null : unhex(m[2]));
                    }
                    cases.add(c);
                } else if (!f[0].isEmpty()) {
                    throw new IllegalArgumentException("unexpected line: " + line);
                }
            }
        }
        for (Case c : cases) {
            System.err.printf(Locale.ROOT, "%s: %d members ...%n", c.name, c.memberIds.size());
            Timed decode = time(() -> c, LeaderSideBench::decodeAll, warmupSeconds, reps);
            Map<String, Subscription> subs = decodeAll(c);
            CooperativeStickyAssignor assignor = new CooperativeStickyAssignor();
            Timed assign = time(() -> copy(subs), s -> assignor.assign(partitionsPerTopic, s), warmupSeconds, reps);
            Map<String, List<TopicPartition>> result = assignor.assign(partitionsPerTopic, copy(subs));
            Timed encode = time(() -> result, LeaderSideBench::encodeAll, warmupSeconds, reps);
            Map<String, ByteBuffer> encoded = encodeAll(result);

            int subscriptionMismatches = 0;
            for (int i = 0; i < c.memberIds.size(); i++) {
                ByteBuffer again = ConsumerProtocol.serializeSubscription(
                    ConsumerProtocol.deserializeSubscription(ByteBuffer.wrap(c.subscriptions.get(i))));
                if (!Arrays.equals(bytes(again), c.subscriptions.get(i))) subscriptionMismatches++;
            }
            List<String> kassignMismatches = new ArrayList<>();
            for (int i = 0; i < c.memberIds.size(); i++) {
                byte[] theirs = c.kassignAssignments.get(i);
                if (theirs == null) continue;
                ByteBuffer again = ConsumerProtocol.serializeAssignment(
                    ConsumerProtocol.deserializeAssignment(ByteBuffer.wrap(theirs)));
                if (!Arrays.equals(bytes(again), theirs)) kassignMismatches.add("\"" + c.memberIds.get(i) + "\"");
            }
            long syncBytes = 0;
            StringBuilder asg = new StringBuilder("{");
            boolean first = true;
            for (String m : c.memberIds) {
                ByteBuffer b = encoded.get(m);
                syncBytes += b.remaining();
                asg.append(first ? "" : ",").append('"').append(m).append("\":\"").append(hex(b)).append('"');
                first = false;
            }
            asg.append("}");
            System.out.println("{\"case\":\"" + c.name + "\",\"members\":" + c.memberIds.size() + ","
                + timedJson("decode", decode) + "," + timedJson("assign", assign) + "," + timedJson("encode", encode)
                + ",\"syncBytes\":" + syncBytes + ",\"subscriptionMismatches\":" + subscriptionMismatches
                + ",\"kassignAssignmentMismatches\":[" + String.join(",", kassignMismatches) + "]"
                + ",\"assignments\":" + asg + "}");
            System.out.flush();
        }
    }
}
