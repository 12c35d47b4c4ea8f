// Times kafka-clients' (3.9.1) client-side StickyAssignor and CooperativeStickyAssignor on one case file
// of benchmarks/cases.py (the shared kafka4-uniform format), the way a group leader runs them.
//
//   java -cp CLASSES:kafka-clients.jar:slf4j-api.jar StickyBench CASEFILE
//        [--assignor sticky|cooperative-sticky] [--steps fresh,leave,join] [--warmup-seconds 3] [--timebox 60]
//
// Steps: fresh (no previous assignment); leave (the leaver gone, everyone else owning its own fresh
// result in generation 1); join (the joiner added with nothing owned, everyone else owning its fresh result). The eager StickyAssignor gets the
// previous assignment as V1 user data produced by a member's own StickyAssignor (onAssignment +
// subscriptionUserData), so assign() pays the decode as a leader does; CooperativeStickyAssignor gets
// ownedPartitions + generationId (protocol v2+). Subscriptions are rebuilt before every call (the user
// data ByteBuffer is consumed by a read), outside the timed region.
//
// One JSON object per line on stdout per step; progress on stderr. If one call exceeds the time box the
// step is reported as skipped (and later steps too) and the JVM exits with status 3.
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.consumer.internals.AbstractPartitionAssignor;
import org.apache.kafka.common.TopicPartition;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;

public class StickyBench {

    /** A case file: topic sizes and subscriptions in file order. */
    static final class Case {
        final String name;
        final LinkedHashMap<String, Integer> topics = new LinkedHashMap<>();
        final LinkedHashMap<String, List<String>> members = new LinkedHashMap<>();
        String leaver, joiner;

        Case(String name) {
            this.name = name;
        }

        LinkedHashMap<String, List<String>> stepMembers(String step) {
            LinkedHashMap<String, List<String>> out = new LinkedHashMap<>(members);
            if (step.equals("leave")) out.remove(leaver);
            else if (step.equals("join")) out.put(joiner, members.values().iterator().next());
            else if (!step.equals("fresh")) throw new IllegalArgumentException("unknown step " + step);
            return out;
        }
    }

    static Case load(Path file) throws IOException {
        String fn = file.getFileName().toString();
        Case c = new Case(fn.endsWith(".txt") ? fn.substring(0, fn.length() - 4) : fn);
        try (BufferedReader r = Files.newBufferedReader(file)) {
            int nt = Integer.parseInt(r.readLine().trim().split("\\s+")[1]);
            for (int i = 0; i < nt; i++) {
                String[] f = r.readLine().trim().split("\\s+");
                c.topics.put(f[0], Integer.parseInt(f[1]));
            }
            int nm = Integer.parseInt(r.readLine().trim().split("\\s+")[1]);
            for (int i = 0; i < nm; i++) {
                String[] f = r.readLine().trim().split("\\s+");
                int k = Integer.parseInt(f[1]);
                c.members.put(f[0], Arrays.asList(Arrays.copyOfRange(f, 2, 2 + k)));
            }
            String line;
            while ((line = r.readLine()) != null) {
                String[] f = line.trim().split("\\s+");
                if (f[0].equals("leaver")) c.leaver = f[1];
                else if (f[0].equals("joiner")) c.joiner = f[1];
            }
        }
        if (c.leaver == null || c.joiner == null) throw new IllegalArgumentException(file + ": no leaver/joiner line");
        return c;
    }

    /** Per-member inputs of one call: topics, previous partitions and their generation. */
    static final class MemberInput {
        final List<String> topics;
        final ByteBuffer userData;          // sticky: V1 previous assignment; cooperative: generation
        final List<TopicPartition> owned;   // cooperative only
        final int generation;

        MemberInput(List<String> topics, ByteBuffer userData, List<TopicPartition> owned, int generation) {
            this.topics = topics;
            this.userData = userData;
            this.owned = owned;
            this.generation = generation;
        }
    }

    /** What each member would send: built once per step, untimed. */
    static Map<String, MemberInput> memberInputs(boolean cooperative, Map<String, List<String>> subs,
                                                 Map<String, List<TopicPartition>> previous, int generation) {
        Map<String, MemberInput> out = new LinkedHashMap<>();
        for (Map.Entry<String, List<String>> e : subs.entrySet()) {
            List<TopicPartition> prev = previous == null ? null : previous.get(e.getKey());
            ByteBuffer userData;
            if (cooperative) {
                CooperativeStickyAssignor member = new CooperativeStickyAssignor();
                int gen = prev == null ? -1 : generation;
                if (prev != null) member.onAssignment(new Assignment(prev), metadata(e.getKey(), gen));
                userData = member.subscriptionUserData(new HashSet<>(e.getValue()));
                out.put(e.getKey(), new MemberInput(e.getValue(), userData,
                    prev == null ? Collections.emptyList() : prev, gen));
            } else {
                StickyAssignor member = new StickyAssignor();
                if (prev != null) member.onAssignment(new Assignment(prev), metadata(e.getKey(), generation));
                userData = member.subscriptionUserData(new HashSet<>(e.getValue()));
                // Eager members revoke everything before joining: nothing owned on the wire.
                out.put(e.getKey(), new MemberInput(e.getValue(), userData, Collections.emptyList(), -1));
            }
        }
        return out;
    }

    static ConsumerGroupMetadata metadata(String memberId, int generation) {
        return new ConsumerGroupMetadata("bench", generation, memberId, Optional.empty());
    }

    /** Fresh Subscription objects over the same bytes (a read consumes a ByteBuffer's position). */
    static Map<String, Subscription> subscriptions(Map<String, MemberInput> inputs) {
        Map<String, Subscription> out = new HashMap<>();
        for (Map.Entry<String, MemberInput> e : inputs.entrySet()) {
            MemberInput in = e.getValue();
            out.put(e.getKey(), new Subscription(in.topics, in.userData == null ? null : in.userData.duplicate(),
                in.owned, in.generation, Optional.empty()));
        }
        return out;
    }

    static final class Eval {
        String valid = "ok";
        int balance = -1, moved = -1, unassigned;
    }

    /**
     * Validity (every partition of a subscribed topic at most once, only to a subscriber; with
     * {@code complete} exactly once), balance (max - min partitions per member) and moved (previously
     * owned partitions whose owner differs).
     */
    static Eval evaluate(Case c, Map<String, List<String>> subs, Map<String, List<TopicPartition>> asg,
                         Map<TopicPartition, String> prevOwner, boolean complete) {
        Eval ev = new Eval();
        Map<TopicPartition, String> owner = new HashMap<>();
        int min = Integer.MAX_VALUE, max = Integer.MIN_VALUE;
        for (Map.Entry<String, List<String>> s : subs.entrySet()) {
            List<TopicPartition> got = asg.getOrDefault(s.getKey(), Collections.emptyList());
            Set<String> topics = new HashSet<>(s.getValue());
            for (TopicPartition tp : got) {
                Integer n = c.topics.get(tp.topic());
                if (!topics.contains(tp.topic()) || n == null || tp.partition() < 0 || tp.partition() >= n) {
                    ev.valid = "INVALID: " + s.getKey() + " got " + tp;
                    return ev;
                }
                if (owner.put(tp, s.getKey()) != null) {
                    ev.valid = "INVALID: " + tp + " assigned twice";
                    return ev;
                }
            }
            min = Math.min(min, got.size());
            max = Math.max(max, got.size());
        }
        for (String m : asg.keySet())
            if (!subs.containsKey(m)) {
                ev.valid = "INVALID: assignment for unknown member " + m;
                return ev;
            }
        Set<String> subscribed = new HashSet<>();
        for (List<String> ts : subs.values()) subscribed.addAll(ts);
        for (String t : subscribed) ev.unassigned += c.topics.get(t);
        ev.unassigned -= owner.size();
        if (complete && ev.unassigned > 0) {
            ev.valid = "INVALID: " + ev.unassigned + " partitions unassigned";
            return ev;
        }
        ev.balance = max - min;
        if (prevOwner != null) {
            ev.moved = 0;
            for (Map.Entry<TopicPartition, String> e : prevOwner.entrySet())
                if (!e.getValue().equals(owner.get(e.getKey()))) ev.moved++;
        }
        return ev;
    }

    static Map<TopicPartition, String> owners(Map<String, List<TopicPartition>> asg) {
        Map<TopicPartition, String> out = new HashMap<>();
        for (Map.Entry<String, List<TopicPartition>> e : asg.entrySet())
            for (TopicPartition tp : e.getValue()) out.put(tp, e.getKey());
        return out;
    }

    static double median(double[] xs) {
        double[] s = xs.clone();
        Arrays.sort(s);
        int n = s.length;
        return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    }

    static final class Timing {
        double[] samplesMs;
        int warmupRuns;
        Map<String, List<TopicPartition>> result;
    }

    /**
     * One probe call (time-boxed) sizes the run, as the kafka4-uniform tool does: probe < 0.5 s:
     * >= 5 warm-up calls and >= warmupSeconds of warm-up, 9 timed; < 5 s: 2 warm-up, 5 timed;
     * < 10 s: 1 warm-up, 3 timed; else (already seconds of JIT-compiled work) the probe is the only
     * sample, to keep the general path's multi-minute cases affordable. System.gc() before each timed call.
     */
    static Timing measure(Supplier<Map<String, List<TopicPartition>>> call, double warmupSeconds, double timebox)
            throws TimeoutException, InterruptedException, ExecutionException {
        Timing t = new Timing();
        ExecutorService probeThread = Executors.newSingleThreadExecutor(r -> {
            Thread th = new Thread(r, "probe");
            th.setDaemon(true);
            return th;
        });
        System.gc();
        long t0 = System.nanoTime();
        Future<Map<String, List<TopicPartition>>> probe = probeThread.submit(call::get);
        try {
            t.result = probe.get((long) (timebox * 1000), TimeUnit.MILLISECONDS);
        } finally {
            probeThread.shutdown();
        }
        double probeS = (System.nanoTime() - t0) / 1e9;
        int warm, reps;
        double warmS = 0;
        if (probeS < 0.5) { warm = 5; warmS = warmupSeconds; reps = 9; }
        else if (probeS < 5) { warm = 2; reps = 5; }
        else if (probeS < 10) { warm = 1; reps = 3; }
        else {
            t.samplesMs = new double[]{probeS * 1e3};
            return t;
        }
        long ws = System.nanoTime();
        while (t.warmupRuns < warm || (System.nanoTime() - ws) / 1e9 < warmS) {
            call.get();
            t.warmupRuns++;
        }
        t.samplesMs = new double[reps];
        for (int i = 0; i < reps; i++) {
            t.result = null;
            System.gc();
            long a = System.nanoTime();
            t.result = call.get();
            t.samplesMs[i] = (System.nanoTime() - a) / 1e6;
        }
        return t;
    }

    static String json(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static void emit(String impl, Case c, String step, int members, String rest) {
        System.out.println("{\"impl\":" + json(impl) + ",\"case\":" + json(c.name) + ",\"step\":" + json(step)
            + ",\"members\":" + members + "," + rest + "}");
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: StickyBench CASEFILE [--assignor sticky|cooperative-sticky] [--steps fresh,leave,join]"
                + " [--warmup-seconds 3] [--timebox 60]");
            System.exit(2);
        }
        Case c = load(Paths.get(args[0]));
        String assignorName = "sticky";
        List<String> steps = Arrays.asList("fresh", "leave", "join");
        double warmupSeconds = 3, timebox = 60;
        for (int i = 1; i < args.length; i += 2) {
            switch (args[i]) {
                case "--assignor": assignorName = args[i + 1]; break;
                case "--steps": steps = Arrays.asList(args[i + 1].split(",")); break;
                case "--warmup-seconds": warmupSeconds = Double.parseDouble(args[i + 1]); break;
                case "--timebox": timebox = Double.parseDouble(args[i + 1]); break;
                default: throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        boolean cooperative;
        if (assignorName.equals("sticky")) cooperative = false;
        else if (assignorName.equals("cooperative-sticky")) cooperative = true;
        else throw new IllegalArgumentException("unknown assignor " + assignorName);
        String impl = cooperative ? "java-coop" : "java-sticky";
        AbstractPartitionAssignor assignor = cooperative ? new CooperativeStickyAssignor() : new StickyAssignor();

        Map<String, Integer> partitionsPerTopic = new HashMap<>(c.topics);
        Map<String, List<TopicPartition>> fresh = null;
        for (int si = 0; si < steps.size(); si++) {
            String step = steps.get(si);
            LinkedHashMap<String, List<String>> subs = c.stepMembers(step);
            Map<String, List<TopicPartition>> previous = null;
            if (!step.equals("fresh")) {
                if (fresh == null) {
                    emit(impl, c, step, subs.size(), "\"skipped\":\"no fresh result\"");
                    continue;
                }
                previous = new HashMap<>(fresh);
                // leave: the leaver's partitions are unowned; join: everyone owns its fresh result
                if (step.equals("leave")) previous.remove(c.leaver);
            }
            Map<String, MemberInput> inputs = memberInputs(cooperative, subs, previous, 1);
            Timing t;
            System.err.printf(Locale.ROOT, "%s %s %s ...%n", c.name, step, impl);
            try {
                t = measure(() -> assignor.assign(partitionsPerTopic, subscriptions(inputs)), warmupSeconds, timebox);
            } catch (TimeoutException e) {
                for (String rest : steps.subList(si, steps.size()))
                    emit(impl, c, rest, c.stepMembers(rest).size(),
                        String.format(Locale.ROOT, "\"skipped\":\"skipped (>%.0fs)\"", timebox));
                System.exit(3);
                return;
            }
            Map<TopicPartition, String> prevOwner = step.equals("fresh") ? null : owners(fresh);
            Eval ev;
            int revoked = 0;
            if (cooperative && !step.equals("fresh")) {
                // KIP-429: partitions changing owner are only revoked in this round; a second round
                // (everyone owning this round's result, generation 2) hands them to their new owner.
                Eval first = evaluate(c, subs, t.result, null, false);
                revoked = first.unassigned;
                Map<String, List<TopicPartition>> round2 = assignor.assign(partitionsPerTopic,
                    subscriptions(memberInputs(true, subs, t.result, 2)));
                ev = evaluate(c, subs, round2, prevOwner, true);
                if (!first.valid.equals("ok")) ev.valid = "round 1 " + first.valid;
            } else {
                ev = evaluate(c, subs, t.result, prevOwner, true);
            }
            if (step.equals("fresh")) fresh = t.result;
            StringBuilder samples = new StringBuilder("[");
            for (int i = 0; i < t.samplesMs.length; i++)
                samples.append(i > 0 ? "," : "").append(String.format(Locale.ROOT, "%.4f", t.samplesMs[i]));
            samples.append("]");
            emit(impl, c, step, subs.size(), String.format(Locale.ROOT,
                "\"medianMs\":%.4f,\"samplesMs\":%s,\"warmupRuns\":%d,\"balance\":%d,\"moved\":%s,\"revoked\":%d,\"valid\":%s",
                median(t.samplesMs), samples, t.warmupRuns, ev.balance, ev.moved < 0 ? "null" : String.valueOf(ev.moved),
                revoked, json(ev.valid)));
        }
    }
}
